"""Startup fallback: serve on the CPU at once, bring the accelerator up in the background, switch.

An accelerator that compiles (a TensorRT engine, a CoreML or OpenVINO model,
WebGPU's shaders) can make the first request wait seconds or minutes. With
``startup_fallback=True`` the backend is returned as soon as a CPU session
serves; a daemon thread builds the accelerator's session, runs it once on
representative inputs (so its first real run is not the slow one), and then
hands it to the backend, which serves from it from the next run on.
"""

from __future__ import annotations

import logging
import threading
import time
import warnings
from typing import TYPE_CHECKING

import attrs

from ..errors import OrtplugError, ProviderFallbackWarning
from ..providers import CPU_EP
from ..sample_inputs import sample_inputs
from ._placement import enforce_share
from ._plan import SessionPlan

if TYPE_CHECKING:
    from ..checkpoint import ResolvedCheckpoint
    from ._session import SessionBuild
    from .onnx_backend import OnnxBackend

__all__ = ["StartupSwitch", "start_on_cpu"]

_log = logging.getLogger("ortplug")


@attrs.define
class StartupSwitch:
    """The background bring-up of one backend's accelerator: when it ended and how."""

    requested: tuple[str, ...]
    done: threading.Event = attrs.field(factory=threading.Event)
    switched: bool = False
    error: BaseException | None = None
    seconds: float | None = None  # build + warm-up time of the accelerator session


def start_on_cpu(
    backend: OnnxBackend,
    resolved: ResolvedCheckpoint,
    plan: SessionPlan,
    min_accelerator_share: float | None,
) -> StartupSwitch:
    """Start bringing ``plan``'s accelerator up behind ``backend``, which serves on the CPU now."""
    switch = StartupSwitch(tuple(config.to_ort()[0] for config in plan.chain))
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


def _warm_up(build: SessionBuild, resolved: ResolvedCheckpoint) -> None:
    """One run on representative inputs: shaders, kernels and engines are compiled here."""
    session = build.session
    from ._validation import InputChecker

    specs = InputChecker.from_session(session).inputs
    try:
        feed, _ = sample_inputs(specs, resolved.metadata.extra)
    except OrtplugError as exc:  # an input that cannot be generated: the first real run warms up
        _log.info("startup fallback: no warm-up run (%s)", exc)
        return
    session.run(None, feed)


def _bring_up(
    backend: OnnxBackend,
    resolved: ResolvedCheckpoint,
    plan: SessionPlan,
    min_accelerator_share: float | None,
    switch: StartupSwitch,
) -> None:
    from .onnx_backend import _build

    started = time.perf_counter()
    try:
        build = _build(resolved, plan, plan.options)
        if not any(name != CPU_EP for name in build.session.get_providers()):
            raise RuntimeError("no accelerator was realized; see the warning above for the cause")
        _warm_up(build, resolved)
        switch.seconds = time.perf_counter() - started
        switch.switched = backend._switch_to(resolved, plan, build)
        if switch.switched and min_accelerator_share is not None:
            enforce_share(backend.report, min_accelerator_share, strict=False)
    except Exception as exc:  # the CPU keeps serving; the cause reaches the user as a warning
        switch.error = exc
        warnings.warn(
            f"startup fallback: {list(switch.requested)} did not come up, the CPU keeps serving: "
            f"{type(exc).__name__}: {exc}",
            ProviderFallbackWarning,
            stacklevel=1,
        )
    finally:
        switch.done.set()
