"""``register_custom_op_library`` during a startup fallback's bring-up (issue 24 item 31): the
accelerator's session gets the library too and the switch happens, whichever finishes first."""

from __future__ import annotations

import models
import numpy as np
import onnxruntime_extensions
import ortplug_azuretest
from ortplug import InMemoryCheckpoint, OnnxBackend, PluginHost, StartupFallback

AZURE = ("AzureExecutionProvider", "CPUExecutionProvider")
ONE = np.ones((1, 4), np.float32)


def test_a_library_registered_during_bring_up_reaches_the_accelerator(
    plugin_host: PluginHost,
) -> None:
    assert plugin_host.register(ortplug_azuretest, name="azuretest")
    backend = OnnxBackend.from_checkpoint(
        InMemoryCheckpoint(models.add_model(nodes=3000)).resolve(),  # a build that takes a while
        providers=["azure", "cpu"],
        plugins=plugin_host,
        startup_fallback=StartupFallback(real_traffic_checks=0),
    )
    assert backend.providers == ("CPUExecutionProvider",)
    library = onnxruntime_extensions.get_library_path()
    backend.register_custom_op_library(library)
    assert backend.wait_ready(timeout=120)
    assert backend.startup_error is None
    assert backend.providers == AZURE
    assert backend.session_options.custom_op_libraries == (library,)
    assert backend.run({"a": ONE, "b": ONE})["c"][0, 0] == 2.0
