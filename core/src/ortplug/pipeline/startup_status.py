"""What a backend says of its start-up fallback: waiting for it, its status, its error (apart
from the switch, which a backend without one never imports)."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .switch_state import StartupSwitch

__all__ = ["StartupStatus"]


class StartupStatus:
    """What a backend says of its start-up fallback (``_startup``: its switch, ``None``: built
    without one): the waiting, the status line, the error and whether a candidate shadows."""

    _startup: StartupSwitch | None = None

    def wait_ready(self, timeout: float | None = None) -> bool:
        """Wait until a start-up fallback settled: its accelerator serves, or it will not; False
        on time-out. A candidate that shadows the CPU (:attr:`shadowing`) needs real requests to
        agree on before it serves (a lossy candidate too, by default): without them this says
        so once, and waits. True at once without a start-up fallback."""
        return self._startup is None or self._startup.wait(timeout)

    @property
    def startup_error(self) -> BaseException | None:
        """Why a start-up fallback's accelerator did not come up (``None``: it did, or is coming)."""
        return None if self._startup is None else self._startup.error

    @property
    def startup_status(self) -> str | None:
        """What a start-up fallback is doing or did, in one line (``None``: built without one)."""
        return None if self._startup is None else self._startup.status

    @property
    def shadowing(self) -> bool:
        """Whether a verified candidate is checked on the requests the CPU reference serves now."""
        startup = self._startup
        return startup is not None and startup.traffic is not None and not startup.done.is_set()
