"""What a throughput build serves with: the values, as reports show them.

``performance_hint="latency"`` (the default) serves each call on the calling thread, in the
core. ``"throughput"`` serves many callers: execution streams and a queue that batches
concurrent requests (:mod:`.server`), sized by measuring the model on this host at its first
throughput build (:mod:`.measure`) and recorded (:mod:`.record`). ``"cumulative_throughput"``
does the same over every verified device it may use at once (:mod:`.devices`). The hint is
given to ``OnnxBackend.from_checkpoint``, or as the session config entry
:data:`ortplug.backend.hints.HINT_ENTRY` (the drop-in's ``SessionOptions``).
"""

from __future__ import annotations

from typing import Any

import attrs
from ortplug.errors import OptionError
from ortplug.providers.options import check_threads

__all__ = [
    "MAX_BATCH_ROWS",
    "MAX_DELAY_MS",
    "DeviceServing",
    "Layout",
    "ServingConfig",
    "ServingReport",
    "Trial",
]

#: The bounds of a batch (rows per run) and of the queueing delay a configuration may state.
MAX_BATCH_ROWS = 4096
MAX_DELAY_MS = 1000.0


def _positive(limit: int) -> Any:
    def check(_: Any, attribute: attrs.Attribute[Any], value: object) -> None:
        if value is None:
            return
        if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= limit:
            raise OptionError(
                f"{attribute.name}: expected a whole number from 1 to {limit} or None, got {value!r}"
            )

    return check


def _threads(_: Any, attribute: attrs.Attribute[Any], value: object) -> None:
    if value is not None:
        check_threads(attribute.name, value)


def _delay(_: Any, attribute: attrs.Attribute[Any], value: object) -> None:
    if value is None:
        return
    if (
        isinstance(value, bool)
        or not isinstance(value, (int, float))
        or not 0 <= value <= MAX_DELAY_MS
    ):
        raise OptionError(
            f"{attribute.name}: expected milliseconds from 0 to {MAX_DELAY_MS:g} or None, "
            f"got {value!r}"
        )


def _flag(_: Any, attribute: attrs.Attribute[Any], value: object) -> None:
    if not isinstance(value, bool):
        raise OptionError(f"{attribute.name}: expected True or False, got {value!r}")


@attrs.frozen(kw_only=True)
class ServingConfig:
    """How a throughput build serves; each field left ``None`` is measured on this host.

    ``streams``: execution streams (each a worker thread running a session, or a share of one);
    ``threads_per_stream``: intra-op threads of each stream's session (streams x threads never
    exceed the CPUs this process may use); ``max_batch``: rows of concurrent requests one run
    takes at most (1: no batching); ``max_delay_ms``: how long a request waits in the queue for
    others to share its run (0: it shares only with requests already queued); ``cpus``: the CPUs
    the streams share in all (default: every CPU this process may use; fewer, such as the CPUs
    Ray gave an actor, bound the layouts measured and the streams x threads given);
    ``watch``: whether the server compares its layout with the latency path on live traffic
    and moves to the faster (:mod:`.watch`; ``False``: the layout chosen serves as long as the
    backend; a layout given in full is never watched).
    """

    streams: int | None = attrs.field(default=None, validator=_positive(1024))
    threads_per_stream: int | None = attrs.field(default=None, validator=_threads)
    max_batch: int | None = attrs.field(default=None, validator=_positive(MAX_BATCH_ROWS))
    max_delay_ms: float | None = attrs.field(default=None, validator=_delay)
    cpus: int | None = attrs.field(default=None, validator=_threads)
    watch: bool = attrs.field(default=True, validator=_flag)

    @property
    def complete(self) -> bool:
        """Whether every field of the layout is given (nothing to measure)."""
        layout = (self.streams, self.threads_per_stream, self.max_batch, self.max_delay_ms)
        return None not in layout

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form of what bounds the layouts (``watch`` changes none: not in it)."""
        return attrs.asdict(self, filter=lambda attribute, _: attribute.name != "watch")


@attrs.frozen
class Layout:
    """One device's serving configuration: streams, intra-op threads each (``None``: the
    session's own), the most rows a run takes, and the queueing delay."""

    streams: int
    threads: int | None
    max_batch: int
    max_delay_ms: float

    def describe(self) -> str:
        """``2 streams x 1 thread, batches of up to 8 rows, 0 ms delay``."""
        threads = (
            " with the session's own threads"
            if self.threads is None
            else f" x {_count(self.threads, 'thread')}"
        )
        batches = (
            "no batching" if self.max_batch == 1 else f"batches of up to {self.max_batch} rows"
        )
        return (
            f"{_count(self.streams, 'stream')}{threads}, {batches}, {self.max_delay_ms:g} ms delay"
        )

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return attrs.asdict(self)


def _count(number: int, noun: str) -> str:
    return f"{number} {noun}{'' if number == 1 else 's'}"


@attrs.frozen
class Trial:
    """One measured configuration and the requests per second it served."""

    layout: Layout
    requests_per_s: float

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {"layout": self.layout.to_dict(), "requests_per_s": round(self.requests_per_s, 1)}


@attrs.frozen
class DeviceServing:
    """One device a throughput build serves on (or weighed): its layout, measured requests per
    second, share of the requests, and state (``serving``, ``dropped: ...``, ``not used: ...``)."""

    label: str
    chain: tuple[str, ...]
    layout: Layout | None
    requests_per_s: float | None
    state: str
    trials: tuple[Trial, ...] = ()

    @property
    def serving(self) -> bool:
        return self.state == "serving"

    def describe(self) -> str:
        """``cpu [cpu]: 2 streams x 1 thread, ..., 5230 requests/s, serving``."""
        layout = "" if self.layout is None else f" {self.layout.describe()},"
        rate = "" if self.requests_per_s is None else f" {self.requests_per_s:.0f} requests/s,"
        return f"{self.label} [{', '.join(self.chain)}]:{layout}{rate} {self.state}"

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {
            "label": self.label,
            "chain": list(self.chain),
            "layout": None if self.layout is None else self.layout.to_dict(),
            "requests_per_s": None
            if self.requests_per_s is None
            else round(self.requests_per_s, 1),
            "state": self.state,
            "trials": [trial.to_dict() for trial in self.trials],
        }


@attrs.frozen
class ServingReport:
    """What a throughput build serves with (``backend.serving``, ``report.serving``).

    ``hint``: the performance hint; ``devices``: each device served on or weighed;
    ``batching``: whether and how concurrent requests share runs; ``source``: where the
    layouts come from (measured now, recorded by an earlier build, given, or defaults);
    ``callers``: the concurrent callers the measurement ran; ``inputs``: the inputs it ran
    on (``samples: x float32 (1, 3, 48, 320)``; ``None``: nothing was measured); ``latency``:
    why the latency path serves instead of the devices' layout (no layout beat it on this
    host's traffic, :mod:`.watch`; ``None``: the layout serves).
    """

    hint: str
    devices: tuple[DeviceServing, ...]
    batching: str
    source: str
    callers: int | None = None
    inputs: str | None = None
    latency: str | None = None

    @property
    def streams(self) -> int:
        """How many runs it serves at once: the streams of every device that serves."""
        return max(1, sum(d.layout.streams for d in self.devices if d.serving and d.layout))

    def lines(self) -> list[str]:
        """The report as people read it, one fact per line."""
        out = [f"hint       {self.hint}: {self.source}"]
        if self.inputs is not None:
            out.append(f"inputs     {self.inputs}")
        out.append(f"batching   {self.batching}")
        if self.latency is not None:
            out.append(f"latency    serves the latency path: {self.latency}")
        out += [f"device     {device.describe()}" for device in self.devices]
        for device in self.devices:
            out += [
                f"trial      {device.label}: {trial.layout.describe()}: "
                f"{trial.requests_per_s:.0f} requests/s"
                for trial in device.trials
            ]
        return out

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {
            "hint": self.hint,
            "devices": [device.to_dict() for device in self.devices],
            "batching": self.batching,
            "source": self.source,
            "callers": self.callers,
            "inputs": self.inputs,
            "latency": self.latency,
        }
