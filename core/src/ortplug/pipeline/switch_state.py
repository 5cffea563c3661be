"""What a startup fallback's bring-up shares with the checks on real traffic: its state, what it works
with, and how a candidate that did not come up is said (neither imports the other)."""

from __future__ import annotations

import atexit
import threading
import time
import warnings
from typing import TYPE_CHECKING, Any

import attrs

from ..errors import ProviderFallbackWarning, VerificationWarning
from ..session.build import cancel_builds

if TYPE_CHECKING:
    from .build_pipeline import BuildPipeline, BuildResult
    from .traffic_check import TrafficCheck

__all__ = [
    "Proving",
    "StartupSwitch",
    "TrafficSettings",
    "did_not_come_up",
    "start_switch",
]


@attrs.frozen
class TrafficSettings:
    """``checks``: agreeing real requests before a candidate serves (0: it serves once verified);
    ``spot_check``: the share of its calls run again on the CPU reference then (0: none)."""

    checks: int
    spot_check: float


@attrs.define(eq=False)
class StartupSwitch:
    """The background bring-up of one backend's accelerator: ``done`` once what serves is
    settled (the accelerator serves, or it will not), and how."""

    requested: tuple[str, ...]
    done: threading.Event = attrs.field(factory=threading.Event)
    switched: bool = False
    error: BaseException | None = None
    seconds: float | None = None  # build + warm-up time of the accelerator session
    exiting: bool = False  # the interpreter is exiting: stop, quietly
    warm_up_options: Any = None  # the warm-up run's RunOptions, to terminate it at exit
    status: str = ""  # what it is doing or did, as the report says it
    traffic: TrafficCheck | None = None  # the shadow checking a candidate on real requests
    said_waiting: bool = False  # wait_ready said once that it waits for real requests

    def settle(self) -> None:
        """What serves is settled: no longer under way."""
        _UNDER_WAY.discard(self)
        self.done.set()

    def wait(self, timeout: float | None) -> bool:
        """Wait until settled (False on time-out); a candidate that shadows the CPU and sees no
        real request for :data:`_QUIET_S` (it waits for requests to agree on, not for time) is
        said once, so the wait is not a silent one."""
        if (
            self.traffic is None
            or self.said_waiting
            or (timeout is not None and timeout < _QUIET_S)
        ):
            return self.done.wait(timeout)
        status = self.status
        quiet = _QUIET_S
        if self.done.wait(quiet):
            return True
        if self.traffic is not None and self.status == status and not self.said_waiting:
            self.said_waiting = True
            warnings.warn(
                f"wait_ready: {status}; no real request came in {quiet:g} s: it takes over only "
                "after agreeing on them (send run() calls, or set ORTPLUG_REAL_TRAFFIC_CHECKS=0 "
                "or StartupFallback(real_traffic_checks=0) to serve it once verified)",
                VerificationWarning,
                stacklevel=3,
            )
        rest = None if timeout is None else max(0.0, timeout - quiet)
        return self.done.wait(rest)


#: Bring-ups under way; at exit each is stopped and waited for (native code still
#: running in a thread when the process ends aborts it).
_UNDER_WAY: set[StartupSwitch] = set()
_EXIT_WAIT_S = 30.0
#: Seconds without a real request after which a wait for a shadowing candidate says why it waits.
_QUIET_S = 1.0


def _stop_at_exit() -> None:
    switches = list(_UNDER_WAY)
    for switch in switches:
        switch.exiting = True
        if switch.warm_up_options is not None:
            switch.warm_up_options.terminate = True
        if switch.traffic is not None:
            switch.traffic.stop(wait=False)
    cancel_builds()
    deadline = time.monotonic() + _EXIT_WAIT_S
    for switch in switches:
        switch.done.wait(max(0.0, deadline - time.monotonic()))


atexit.register(_stop_at_exit)


def start_switch(requested: tuple[str, ...]) -> StartupSwitch:
    """The switch of a bring-up of ``requested`` starting now: under way until it settles."""
    switch = StartupSwitch(requested)
    _UNDER_WAY.add(switch)
    return switch


@attrs.frozen
class Proving:
    """What the background bring-up works with: the build's pipeline (``from_checkpoint``'s
    arguments), the CPU reference serving now, and the checks on real requests."""

    pipeline: BuildPipeline
    reference: BuildResult  # the CPU session serving now, and its plan
    traffic: TrafficSettings  # the checks on real requests before and after a switch


def did_not_come_up(switch: StartupSwitch, what: str, exc: Exception) -> None:
    """The candidate ``what`` did not come up: the CPU keeps serving, and the cause reaches the
    user as one warning (none while the interpreter exits)."""
    switch.error = exc
    switch.status = f"the CPU reference serves: {what} did not come up"
    if switch.exiting:
        return
    warnings.warn(
        f"startup fallback: {list(switch.requested)} did not come up, the CPU keeps serving: "
        f"{type(exc).__name__}: {exc}",
        ProviderFallbackWarning,
        stacklevel=1,
    )
