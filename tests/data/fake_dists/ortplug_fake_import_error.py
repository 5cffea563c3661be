"""A plugin whose import fails, as when a vendor library is missing."""

raise ImportError("libacme.so.3: cannot open shared object file")
