"""The one name, ``ortplug``: the plugins' entry-point group, the hook prefix and the prefix of
the variables. Its own module so that the entry-point scan and ``ortplug --version`` read it
without importing pluggy or attrs."""

from __future__ import annotations

__all__ = ["PROJECT"]

PROJECT = "ortplug"
