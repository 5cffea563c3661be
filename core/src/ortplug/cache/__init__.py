"""The cache: its root, keys, trusted folders and atomic writes, and the index that prunes it."""
