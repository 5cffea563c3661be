"""What a server has served: rows per second per stream, queueing delay, batch fill.

The server counts on each stream, under the lock it takes anyway to hand a stream its requests
(:mod:`.server`): the requests and rows each run took, the runs, how long each run's requests
waited in the queue before it started, how long its runs took, and for runs of requests that
share runs, how full each was against the device's batch limit. :meth:`.server.Server.served`
copies the counters into the frozen values here: the traffic served so far, as it was served.
"""

from __future__ import annotations

from typing import Any

import attrs

__all__ = ["DeviceStats", "ServedStats", "StreamStats"]


def _count(number: int, noun: str) -> str:
    return f"{number} {noun}{'' if number == 1 else 's'}"


def _ms(seconds: float) -> float:
    return round(seconds * 1000.0, 3)


@attrs.frozen
class StreamStats:
    """One execution stream's share of the traffic.

    ``requests``/``rows``: what its runs took (a request of no known rows counts one row);
    ``runs``: its runs (a batch run again request by request counts once); ``busy_s``: time in
    its runs; ``seconds``: time it served (since it started, until it was replaced,
    ``retired``); ``latency``: the latency path's (callers ran on it themselves, by turns).
    """

    requests: int
    rows: int
    runs: int
    busy_s: float
    seconds: float
    retired: bool = False
    latency: bool = False

    @property
    def rows_per_s(self) -> float:
        """Rows served per second since it started serving."""
        return self.rows / self.seconds if self.seconds > 0 else 0.0

    @property
    def busy(self) -> float:
        """The share of its time spent in runs (0 to 1)."""
        return min(1.0, self.busy_s / self.seconds) if self.seconds > 0 else 0.0

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {
            "requests": self.requests,
            "rows": self.rows,
            "runs": self.runs,
            "rows_per_s": round(self.rows_per_s, 1),
            "busy": round(self.busy, 3),
            "seconds": round(self.seconds, 3),
            "retired": self.retired,
            "latency": self.latency,
        }


@attrs.frozen
class DeviceStats:
    """One device's traffic: its streams (replaced ones too), queueing delay and batch fill.

    ``waited_s``/``max_wait_s``: the time its requests waited in the queue before their run
    started, in all and at most; ``batch_limit``: the most rows one run takes; ``shared_runs``:
    runs of requests that may share runs; ``filled_rows``: their rows, each run's counted up to
    ``batch_limit``.
    """

    label: str
    streams: tuple[StreamStats, ...]
    waited_s: float
    max_wait_s: float
    batch_limit: int
    shared_runs: int
    filled_rows: int

    @property
    def requests(self) -> int:
        """Requests its runs took."""
        return sum(stream.requests for stream in self.streams)

    @property
    def rows(self) -> int:
        """Rows its runs took."""
        return sum(stream.rows for stream in self.streams)

    @property
    def runs(self) -> int:
        """Runs it made."""
        return sum(stream.runs for stream in self.streams)

    @property
    def mean_wait_ms(self) -> float | None:
        """The mean queueing delay of its requests (``None``: none served)."""
        requests = self.requests
        return self.waited_s * 1000.0 / requests if requests else None

    @property
    def fill(self) -> float | None:
        """Rows per shared run over the batch limit, in (0, 1] (``None``: no shared run)."""
        if not self.shared_runs:
            return None
        return self.filled_rows / (self.shared_runs * self.batch_limit)

    def describe(self) -> str:
        """``cpu: 2 streams, 812 rows/s (406, 406), 90 requests in 40 runs, wait ..., batch fill 0.62``
        (``2 streams and the latency path``: callers run on it now)."""
        live = [s for s in self.streams if not s.retired]
        rates = ", ".join(f"{s.rows_per_s:.0f}" for s in live)
        rate = sum(s.rows_per_s for s in live)
        wait = self.mean_wait_ms
        waited = (
            "no request yet"
            if wait is None
            else f"wait {wait:.2f} ms mean, {self.max_wait_s * 1000:.2f} ms max"
        )
        fill = self.fill
        filled = "no shared run" if fill is None else f"batch fill {fill:.2f}"
        streams = _count(sum(1 for s in live if not s.latency), "stream")
        if any(s.latency for s in live):
            streams += " and the latency path"
        return (
            f"{self.label}: {streams}, {rate:.0f} rows/s ({rates}), "
            f"{_count(self.requests, 'request')} in {_count(self.runs, 'run')}, {waited}, {filled}"
        )

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        fill = self.fill
        wait = self.mean_wait_ms
        return {
            "label": self.label,
            "streams": [stream.to_dict() for stream in self.streams],
            "requests": self.requests,
            "rows": self.rows,
            "runs": self.runs,
            "mean_wait_ms": None if wait is None else round(wait, 3),
            "max_wait_ms": _ms(self.max_wait_s),
            "batch_limit": self.batch_limit,
            "shared_runs": self.shared_runs,
            "fill": None if fill is None else round(fill, 3),
        }


@attrs.frozen
class ServedStats:
    """The traffic a server served so far (:meth:`.server.Server.served`): each device's, and
    what its watch found last (:mod:`.watch`; ``None``: nothing compared yet)."""

    seconds: float
    devices: tuple[DeviceStats, ...]
    watch: str | None = None

    @property
    def requests(self) -> int:
        """Requests taken by a run, on every device."""
        return sum(device.requests for device in self.devices)

    @property
    def rows(self) -> int:
        """Rows taken by a run, on every device."""
        return sum(device.rows for device in self.devices)

    @property
    def rows_per_s(self) -> float:
        """Rows served per second since serving started."""
        return self.rows / self.seconds if self.seconds > 0 else 0.0

    def lines(self) -> list[str]:
        """The traffic as people read it, one line per device."""
        lines = [f"served     {device.describe()}" for device in self.devices]
        return lines if self.watch is None else [*lines, f"watch      {self.watch}"]

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {
            "seconds": round(self.seconds, 3),
            "rows_per_s": round(self.rows_per_s, 1),
            "devices": [device.to_dict() for device in self.devices],
            "watch": self.watch,
        }
