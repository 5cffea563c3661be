"""Startup fallback: serve on the CPU at once, prove the accelerator in the background, switch."""

from __future__ import annotations

import threading
import time
from typing import TYPE_CHECKING

import attrs

from .. import log as _log
from ..errors import InputsNotAcceptedError, OrtplugError
from ..host.runtime import require_onnxruntime
from ..providers.configs import CPU_EP
from ..session.build import SessionBuild, create_planned
from ..session.plan import Choice, StalePlanError
from ..verification.sample_inputs import carried_samples, session_inputs
from .build_pipeline import BuildPipeline, BuildResult, ServeChange, ServingBackend
from .real_traffic import hand_over
from .share import enforce_share
from .switch_state import Proving, StartupSwitch, TrafficSettings, did_not_come_up, start_switch

if TYPE_CHECKING:
    from collections.abc import Sequence

    from ..checkpoint import ResolvedCheckpoint

__all__ = ["prove_on_traffic", "start_on_cpu"]

#: Accelerator sessions built again for custom-op libraries registered during a bring-up.
_MAX_REBUILDS = 3


def start_on_cpu(
    backend: ServingBackend,
    pipeline: BuildPipeline,
    listed: Sequence[Choice],
    reference: BuildResult,
    traffic: TrafficSettings,
) -> StartupSwitch:
    """Start bringing the first of ``listed`` up behind ``backend``, which serves ``reference``
    (the CPU) now."""
    chain = listed[0].selection.chain
    switch = start_switch(tuple(config.to_ort()[0] for config in chain))
    switch.status = f"the CPU reference serves while {list(switch.requested)} comes up"
    thread = threading.Thread(
        target=_bring_up,
        args=(backend, listed, Proving(pipeline, reference, traffic), switch),
        name="ortplug-startup-fallback",
        daemon=True,
    )
    thread.start()
    return switch


def prove_on_traffic(
    backend: ServingBackend,
    pipeline: BuildPipeline,
    proven: BuildResult,
    reference: BuildResult,
    traffic: TrafficSettings,
) -> StartupSwitch:
    """Let ``proven``, a lossy candidate verified on generated inputs only, serve behind
    ``backend`` (which serves ``reference``, the CPU, now) after it agreed with the CPU on real
    requests (:func:`.real_traffic.hand_over`); no caller waits meanwhile."""
    switch = start_switch(tuple(config.to_ort()[0] for config in proven.plan.chain))
    if not hand_over(backend, proven, Proving(pipeline, reference, traffic), switch, _switch):
        switch.settle()
    return switch


def _warm_up(build: SessionBuild, resolved: ResolvedCheckpoint, switch: StartupSwitch) -> None:
    """One run on representative inputs (the checkpoint's samples, else the first generated size
    it runs): shaders, kernels and engines are compiled here."""
    session = build.session
    options = switch.warm_up_options = require_onnxruntime().RunOptions()
    options.log_severity_level = 4  # a size it refuses is tried next; no log of it on stderr
    if switch.exiting:
        return
    try:
        session_inputs(session, resolved.metadata.extra, carried_samples(resolved), options)
    except InputsNotAcceptedError as exc:  # no size ran: what the first one raised
        raise exc.cause from exc
    except OrtplugError as exc:  # an input that cannot be generated: the first real run warms up
        _log.info("startup fallback: no warm-up run (%s)", exc)


def _bring_up(
    backend: ServingBackend, listed: Sequence[Choice], proving: Proving, switch: StartupSwitch
) -> None:
    started = time.perf_counter()
    shadowing = False
    pipeline = proving.pipeline
    try:
        if pipeline.verify is not False:
            shadowing = _prove(backend, listed, proving, switch)
            return
        plan = pipeline.prepare(listed[0])
        build = pipeline.build(plan)
        if not any(name != CPU_EP for name in build.session.get_providers()):
            raise RuntimeError("no accelerator was realized; see the warning above for the cause")
        result = BuildResult(pipeline.checkpoint, plan, build, choice=listed[0])
        _warm_up(build, result.weights, switch)
        switch.seconds = time.perf_counter() - started
        switch.switched = _switch(backend, result, switch)
        if switch.switched:
            switch.status = f"{list(backend.providers)} serves, unverified (verify=False)"
        if switch.switched and pipeline.min_share is not None:
            enforce_share(backend.report, pipeline.min_share, strict=False)
    except Exception as exc:
        did_not_come_up(switch, str(list(switch.requested)), exc)
    finally:
        switch.seconds = time.perf_counter() - started
        if not shadowing:
            switch.settle()


def _prove(
    backend: ServingBackend, listed: Sequence[Choice], proving: Proving, switch: StartupSwitch
) -> bool:
    """The proving stages against the CPU session serving now; hand over when another one won
    (True: it shadows the CPU reference on real requests first)."""
    result = proving.pipeline.prove(listed, reference=proving.reference)
    if result.build is proving.reference.build:  # the CPU won, or nothing else passed
        backend.serve(ServeChange(result=result))
        switch.status = "the CPU reference serves: no other choice was verified and faster"
        return False
    return hand_over(backend, result, proving, switch, _switch)


def _switch(backend: ServingBackend, result: BuildResult, switch: StartupSwitch) -> bool:
    """Serve ``result`` now; when custom-op libraries were registered on the backend while it
    was built (``register_custom_op_library``), build it again with them first."""
    for attempt in range(_MAX_REBUILDS + 1):
        try:
            return not switch.exiting and backend.serve(ServeChange(result, switch=True)).moved
        except StalePlanError as stale:
            if attempt == _MAX_REBUILDS:
                raise RuntimeError(
                    f"the switch was abandoned: {stale} (registered while the accelerator's "
                    f"session was being built, {attempt + 1} times)"
                ) from None
            plan = result.plan.with_custom_op_libraries(stale.libraries)
            build = create_planned(result.weights, plan, plan.options)
            _warm_up(build, result.weights, switch)
            result = attrs.evolve(result, plan=plan, build=build)
    return False
