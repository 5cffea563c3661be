"""The runtime's plugin host: finds, imports and arbitrates plugins, runs their probes and
calls their hooks (:class:`~.manager.PluginHost`). Plugin authors build on :mod:`ortplug.plugins`."""
