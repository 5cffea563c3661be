"""Startup fallback: serve on the CPU at once, bring the accelerator up in the background, switch.

An accelerator that compiles (a TensorRT engine, a CoreML or OpenVINO model,
WebGPU's shaders) can make the first request wait seconds or minutes. With
``startup_fallback=True`` the backend is returned as soon as a CPU session
serves; a daemon thread builds the accelerator's session, runs it once on
representative inputs (so its first real run is not the slow one), and then
hands it to the backend, which serves from it from the next run on.
"""

from __future__ import annotations

import atexit
import logging
import threading
import time
import warnings
from typing import TYPE_CHECKING, Any

import attrs

from .._runtime import require_onnxruntime
from ..errors import OrtplugError, ProviderFallbackWarning
from ..providers import CPU_EP
from ..sample_inputs import sample_inputs
from ._placement import enforce_share
from ._plan import SessionPlan, StalePlanError
from ._session import cancel_builds, create_planned

if TYPE_CHECKING:
    from ..checkpoint import ResolvedCheckpoint
    from ._session import SessionBuild
    from .onnx_backend import OnnxBackend

__all__ = ["StartupSwitch", "start_on_cpu"]

_log = logging.getLogger("ortplug")


@attrs.define(eq=False)
class StartupSwitch:
    """The background bring-up of one backend's accelerator: when it ended and how."""

    requested: tuple[str, ...]
    done: threading.Event = attrs.field(factory=threading.Event)
    switched: bool = False
    error: BaseException | None = None
    seconds: float | None = None  # build + warm-up time of the accelerator session
    exiting: bool = False  # the interpreter is exiting: stop, quietly
    warm_up_options: Any = None  # the warm-up run's RunOptions, to terminate it at exit


#: Bring-ups under way; at exit each is stopped and waited for (native code still
#: running in a thread when the process ends aborts it).
_UNDER_WAY: set[StartupSwitch] = set()
_EXIT_WAIT_S = 30.0
#: Accelerator sessions built again for custom-op libraries registered during a bring-up.
_MAX_REBUILDS = 3


def _stop_at_exit() -> None:
    switches = list(_UNDER_WAY)
    for switch in switches:
        switch.exiting = True
        if switch.warm_up_options is not None:
            switch.warm_up_options.terminate = True
    cancel_builds()
    deadline = time.monotonic() + _EXIT_WAIT_S
    for switch in switches:
        switch.done.wait(max(0.0, deadline - time.monotonic()))


atexit.register(_stop_at_exit)


def start_on_cpu(
    backend: OnnxBackend,
    resolved: ResolvedCheckpoint,
    plan: SessionPlan,
    min_accelerator_share: float | None,
) -> StartupSwitch:
    """Start bringing ``plan``'s accelerator up behind ``backend``, which serves on the CPU now."""
    switch = StartupSwitch(tuple(config.to_ort()[0] for config in plan.chain))
    _UNDER_WAY.add(switch)
    backend._startup = switch
    backend._chain_reasons = (
        ("cpu", f"startup fallback: serves while {list(switch.requested)} builds and warms up"),
    )
    thread = threading.Thread(
        target=_bring_up,
        args=(backend, resolved, plan, min_accelerator_share, switch),
        name="ortplug-startup-fallback",
        daemon=True,
    )
    thread.start()
    return switch


def _warm_up(build: SessionBuild, resolved: ResolvedCheckpoint, switch: StartupSwitch) -> None:
    """One run on representative inputs: shaders, kernels and engines are compiled here."""
    session = build.session
    from ._validation import InputChecker

    specs = InputChecker.from_session(session).inputs
    try:
        feed, _ = sample_inputs(specs, resolved.metadata.extra)
    except OrtplugError as exc:  # an input that cannot be generated: the first real run warms up
        _log.info("startup fallback: no warm-up run (%s)", exc)
        return
    switch.warm_up_options = require_onnxruntime().RunOptions()
    if not switch.exiting:
        session.run(None, feed, switch.warm_up_options)


def _bring_up(
    backend: OnnxBackend,
    resolved: ResolvedCheckpoint,
    plan: SessionPlan,
    min_accelerator_share: float | None,
    switch: StartupSwitch,
) -> None:
    started = time.perf_counter()
    try:
        for attempt in range(_MAX_REBUILDS + 1):
            build = create_planned(resolved, plan, plan.options)
            if not any(name != CPU_EP for name in build.session.get_providers()):
                raise RuntimeError("no accelerator was realized; see the warning above for the cause")
            _warm_up(build, resolved, switch)
            switch.seconds = time.perf_counter() - started
            try:
                switch.switched = not switch.exiting and backend._switch_to(resolved, plan, build)
                break
            except StalePlanError as stale:  # register_custom_op_library ran meanwhile
                if attempt == _MAX_REBUILDS:
                    raise RuntimeError(
                        f"the switch was abandoned: {stale} (registered while the accelerator's "
                        f"session was being built, {attempt + 1} times)"
                    ) from None
                libraries = (*plan.options.custom_op_libraries, *stale.libraries)
                plan = attrs.evolve(
                    plan, options=plan.options.evolve(custom_op_libraries=libraries)
                )
        if switch.switched and min_accelerator_share is not None:
            enforce_share(backend.report, min_accelerator_share, strict=False)
    except Exception as exc:  # the CPU keeps serving; the cause reaches the user as a warning
        switch.error = exc
        if switch.exiting:
            return
        warnings.warn(
            f"startup fallback: {list(switch.requested)} did not come up, the CPU keeps serving: "
            f"{type(exc).__name__}: {exc}",
            ProviderFallbackWarning,
            stacklevel=1,
        )
    finally:
        _UNDER_WAY.discard(switch)
        switch.done.set()
