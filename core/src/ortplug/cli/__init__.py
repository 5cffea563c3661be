"""The ``ortplug`` command line."""
