"""Integrations with engines that run ortplug at scale (each behind its own extra)."""
