"""The cache: its root, keys, trusted folders and atomic writes, the one record store, and the
index that prunes it."""
