"""The server watching itself: its layout against the latency path, on the traffic it serves.

The latency path is the one-caller-per-thread baseline: each caller runs its own request on
one session with the session's own threads, on its own thread, no queue and no batching (what
the latency hint and raw ONNX Runtime shared by the callers do; a provider that does not
declare concurrent runs takes turns, as under the latency hint). A throughput build on one
device can serve :meth:`~.server.Server.run` on it at any moment
(:meth:`~.server.Server.serve_latency`), so the watch compares the two on live traffic: short
windows served by turns, in :data:`PAIRS` pairs (one window of each path, the order turning
each pair), each window at least :data:`WINDOW_S` seconds and :data:`WINDOW_REQUESTS` requests
(at most :data:`MAX_WINDOW_S`), its rows counted from the served counters (:mod:`.stats`)
between the first and the last look that saw requests served (:func:`window_of`); a
window in which the traffic paused does not count, and the layout's rate over the latency
path's is taken pair by pair, so traffic that changes between pairs weighs on both paths
alike. Callers are never held: every window serves them, on one path or the other, and a
switch drops no request; the watch's thread only reads the counters, 20 times a second.

:func:`compare` and :func:`decide` are the decision, pure functions of the measured windows:
a layout under the latency path's rate by more than :data:`MARGIN` in every pair falls behind
and is replaced (via :meth:`~.server.Server.restream`) by the next layout the start measured,
which is then compared the same way; when none beats the latency path, ``run()`` serves the
latency path, said once with a :class:`~.independence.ServingWarning`. Windows with too little
traffic decide nothing (no traffic, or a caller that stopped): the watch waits for more.

:class:`Watch` runs it on a thread of the server's (:meth:`~.server.Server.behind`): within
the first seconds of real traffic of every process (a recorded layout is a starting point, not
a verdict), then every :data:`RECHECK_S` seconds, or sooner when a second of steady traffic
serves rows, or holds requests at once, 1.5 times off the first second after the verdict
(callers came or went); each round tries
the layouts measured at the start (at most :data:`ALTERNATIVES` besides the one compared).
Its verdicts are what ``served(backend)`` shows (the ``watch`` line), and a verdict that
changes what serves rewrites the serving record, so the next process starts from it
(:mod:`.record`).
"""

from __future__ import annotations

import itertools
import math
import time
import warnings
from collections.abc import Callable, Sequence

import attrs
from ortplug.errors import OptionError

from .config import Layout, Trial
from .devices import StreamBuilder
from .independence import ServingWarning
from .server import Device, Server, Stream

__all__ = [
    "ALTERNATIVES",
    "MARGIN",
    "MAX_WINDOW_S",
    "PAIRS",
    "RECHECK_S",
    "WINDOW_REQUESTS",
    "WINDOW_S",
    "Comparison",
    "Decision",
    "Watch",
    "Window",
    "alternatives",
    "compare",
    "decide",
    "window_of",
]

#: Seconds a window serves at least, and at most (a slow model's window ends there).
WINDOW_S = 0.25
MAX_WINDOW_S = 2.0
#: Requests a window must serve to count.
WINDOW_REQUESTS = 8
#: Pairs of windows (one per path) a comparison serves.
PAIRS = 3
#: The latency path replaces a layout only when it serves this many times its rows per second.
MARGIN = 1.05
#: Seconds between comparisons once one decided (traffic changes).
RECHECK_S = 120.0
#: Seconds a switch settles before its window counts (runs under way finish).
SETTLE_S = 0.03
#: Layouts measured at the start tried after the serving one fell behind, before the latency path.
ALTERNATIVES = 1
#: Seconds between looks at the counters.
_POLL_S = 0.05
#: Seconds before a comparison that decided nothing is tried again.
_RETRY_S = 1.0
#: Seconds without a request served after which a window does not count (the traffic paused).
_GAP_S = 0.3
#: Between comparisons: a stretch of steady traffic this long whose rows per second, or requests
#: held at once, moved by this factor from the first stretch after the verdict compares again
#: before :data:`RECHECK_S` (callers came or went).
_STRETCH_S = 1.0
_CHANGE = 1.5
_PATHS = ("layout", "latency")


def _not_negative(_: object, attribute: attrs.Attribute[float], value: float) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value >= 0:
        raise OptionError(f"{attribute.name}: expected a number >= 0, got {value!r}")


def _whole(_: object, attribute: attrs.Attribute[int], value: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise OptionError(f"{attribute.name}: expected a whole number >= 0, got {value!r}")


def _path(_: object, attribute: attrs.Attribute[str], value: str) -> None:
    if value not in _PATHS:
        raise OptionError(f"{attribute.name}: expected one of {', '.join(_PATHS)}, got {value!r}")


@attrs.frozen
class Window:
    """One window of live traffic served on one ``path`` (``layout`` or ``latency``): the
    requests and rows served in it, and its seconds."""

    path: str = attrs.field(validator=_path)
    requests: int = attrs.field(validator=_whole)
    rows: int = attrs.field(validator=_whole)
    seconds: float = attrs.field(validator=_not_negative)

    @property
    def rows_per_s(self) -> float:
        """Rows served per second in it."""
        return self.rows / self.seconds if self.seconds > 0 else 0.0


@attrs.frozen
class Comparison:
    """What a comparison's windows say: ``verdict`` (``kept``: the layout is not behind;
    ``behind``: the latency path serves over :data:`MARGIN` times its rows per second in every
    pair; ``undecided``: too few windows served enough traffic), each path's rows per second
    pooled over the windows that counted (``None``: too few did), how many counted, and the
    ratio."""

    verdict: str
    layout_rows_per_s: float | None
    latency_rows_per_s: float | None
    counted: int
    #: The layout's rows per second over the latency path's, pair by pair (``None``: undecided).
    ratio: float | None = None

    def describe(self) -> str:
        """``412 rows/s against the latency path's 380 (1.08x) over 6 windows of live traffic``."""
        ratio = self.ratio
        if ratio is None or self.latency_rows_per_s is None:
            return f"too little traffic to compare ({self.counted} windows counted)"
        return (
            f"{self.layout_rows_per_s:.0f} rows/s against the latency path's "
            f"{self.latency_rows_per_s:.0f} ({ratio:.2f}x) over {self.counted} windows of live "
            "traffic"
        )


def compare(
    windows: Sequence[Window],
    *,
    margin: float = MARGIN,
    least: int = WINDOW_REQUESTS,
    each: int = 2,
) -> Comparison:
    """The verdict of ``windows``, served by pairs (one window of each path, in either order):
    a pair counts when both its windows served at least ``least`` requests; the layout's rows
    per second over the latency path's is the geometric mean of the counted pairs' (a traffic
    that changes between pairs weighs on both paths of each pair alike), at least ``each``
    pairs counted; each path's rate is pooled over the counted pairs. The layout is behind only
    when it is in every counted pair: a pair a moment of the host's speed favoured (a shared
    VM's) does not replace a layout the start measured."""
    if isinstance(margin, bool) or not isinstance(margin, (int, float)) or not margin >= 1:
        raise OptionError(f"margin: expected a number >= 1, got {margin!r}")
    pairs = []
    for first, second in zip(windows[::2], windows[1::2]):
        pair = {first.path: first, second.path: second}
        if len(pair) == 2 and all(w.requests >= max(1, least) and w.rows > 0 and w.seconds > 0
                                  for w in pair.values()):  # fmt: skip
            pairs.append((pair["layout"], pair["latency"]))
    if len(pairs) < max(1, each):
        return Comparison("undecided", None, None, 2 * len(pairs))
    rates = []
    for index in range(2):
        rows = sum(pair[index].rows for pair in pairs)
        rates.append(rows / sum(pair[index].seconds for pair in pairs))
    ratios = [a.rows_per_s / b.rows_per_s for a, b in pairs]
    ratio = math.exp(sum(math.log(pair) for pair in ratios) / len(pairs))
    verdict = "behind" if all(pair * margin < 1 for pair in ratios) else "kept"
    return Comparison(verdict, rates[0], rates[1], 2 * len(pairs), ratio)


@attrs.frozen
class Decision:
    """What the watch does after a comparison of ``compared``: ``serve`` it (``layout``), try
    the next layout (``next``, ``layout`` that one), serve the latency path (``latency``), or
    wait for traffic (``wait``); ``line`` says why."""

    action: str
    layout: Layout | None
    line: str


def decide(result: Comparison, compared: Layout, untried: Sequence[Layout]) -> Decision:
    """The step after ``result`` of ``compared`` against the latency path, ``untried`` the
    layouts not compared yet (best first)."""
    said = f"{compared.describe()}: {result.describe()}"
    if result.verdict == "undecided":
        return Decision("wait", None, said)
    if result.verdict == "kept":
        return Decision("layout", compared, f"layout kept: {said}")
    if untried:
        following = untried[0]
        return Decision("next", following, f"fell behind: {said}; trying {following.describe()}")
    return Decision(
        "latency",
        compared,
        f"no layout beats the latency path on this host's traffic ({said}): run() serves "
        "each caller on its own thread, one session, no batching",
    )


def window_of(path: str, looks: Sequence[tuple[float, int, int]]) -> Window | None:
    """The window that ``looks`` at the counters make (each: seconds, requests and rows served;
    the first at the window's start), or ``None`` while it needs more: what was served between
    the first and the last look that saw requests served, so traffic that starts or stops inside
    it does not dilute its rate; one in which the traffic paused counts nothing."""
    moved = [look for before, look in itertools.pairwise(looks) if look[1] != before[1]]
    started, now = looks[0][0], looks[-1][0]
    latest = moved[-1] if moved else looks[0]
    begun = moved[0] if moved else latest
    seconds, count = latest[0] - begun[0], latest[1] - begun[1]
    if now - latest[0] > max(_GAP_S, 4 * seconds / count if count else 0.0):
        return Window(path, 0, 0, now - started)  # the traffic paused: it does not count
    if (seconds >= WINDOW_S and count >= WINDOW_REQUESTS) or now - started >= MAX_WINDOW_S:
        return Window(path, count, latest[2] - begun[2], seconds)
    return None


def alternatives(trials: Sequence[Trial], serving: Layout) -> list[Layout]:
    """The layouts to try when ``serving`` falls behind: the best other ones ``trials``
    measured, at most :data:`ALTERNATIVES`."""
    ranked = sorted(trials, key=lambda trial: trial.requests_per_s, reverse=True)
    found: list[Layout] = []
    for trial in ranked:
        if trial.layout != serving and trial.layout not in found:
            found.append(trial.layout)
    return found[:ALTERNATIVES]


@attrs.frozen
class _Count:
    """A device's counters as the watch reads them: requests, rows, and the seconds requests
    spent in it (queued or in a run): over a stretch, the requests it held at once."""

    requests: int
    rows: int
    held_s: float


def _moved(before: tuple[float, float], now: tuple[float, float]) -> bool:
    """Whether the traffic's rows per second, or the requests held at once (by at least one),
    moved by :data:`_CHANGE` times between two stretches."""
    (rate, held), (new_rate, new_held) = before, now
    if rate > 0 and new_rate > 0 and not 1 / _CHANGE <= new_rate / rate <= _CHANGE:
        return True
    far = held > 0 and new_held > 0 and not 1 / _CHANGE <= new_held / held <= _CHANGE
    return far and abs(new_held - held) >= 1


class Watch:
    """The watch of a server of one device (module docstring): its builder (the layouts'
    sessions), the layout serving and the others measured (best first), the latency path's
    stream, whether the record says the latency path serves, and ``keep``, called with the
    layout and why the latency path serves (``None``: the layout does) when a verdict changes
    what serves (it rewrites the record)."""

    def __init__(
        self,
        server: Server,
        builder: StreamBuilder,
        layout: Layout,
        others: Sequence[Layout],
        latency: Stream,
        keep: Callable[[Layout, str | None, str], None],
        *,
        on_latency: bool,
        build_first: bool,
    ) -> None:
        self._server = server
        self._device: Device = server.devices[0]
        self._builder = builder
        self._layout = layout
        self._measured = [layout, *(other for other in others if other != layout)]
        self._untried = self._measured[1:]
        self._latency = latency
        self._keep = keep
        self._build_first = build_first
        self._held = (layout, on_latency)  # what the record holds (and serves)
        self._best: tuple[float, Layout] | None = None  # this round's nearest layout
        self._warned = False

    @property
    def layout(self) -> Layout:
        """The layout compared with the latency path (its streams serve the queue)."""
        return self._layout

    def run(self) -> None:
        """Build the layout's sessions when asked (once a request was served), then compare while
        the server serves."""
        try:
            if self._build_first and not (
                self._server.first_served() and self._serve_layout(self._layout)
            ):
                return
            while not self._server.stopping.is_set():
                if self._round():
                    self._between()
                elif self._server.stopping.wait(_RETRY_S):
                    return
        finally:
            self._builder.release()

    def apply(self, decision: Decision) -> bool:
        """Act on ``decision``: serve the layout or the latency path (said once; a change is
        kept), or the next layout; whether it wants that one compared now (``next``)."""
        if decision.action == "wait":  # what it found before still stands
            self._server.watched = self._server.watched or decision.line
            self._server.serve_latency(self._device, self._latency if self._held[1] else None)
            return False
        self._server.watched = decision.line
        if decision.action == "next" and decision.layout is not None:
            following = decision.layout
            if following in self._untried:
                self._untried.remove(following)
            if self._serve_layout(following):
                self._layout = following
                return True
            decision = Decision("latency", self._layout, decision.line)
        latency = decision.action == "latency"
        self._server.serve_latency(self._device, self._latency if latency else None)
        kept = decision.layout or self._layout
        if latency and self._best is not None:
            kept = self._best[1]  # what a later process compares first
        if latency and not self._warned:
            self._warned = True
            warnings.warn(f"the throughput hint serves the latency path: {decision.line}",
                          ServingWarning, stacklevel=2)  # fmt: skip
        if (kept, latency) != self._held:
            self._held = (kept, latency)
            self._keep(kept, decision.line if latency else None, decision.line)
        return False

    def _serve_layout(self, layout: Layout) -> bool:
        """Serve on ``layout``'s streams (built now); ``False`` when they failed to build."""
        try:
            streams = self._builder.streams(layout)
        except Exception as exc:  # the streams serving serve on (served() says why)
            self._server.restream_failed = " ".join(f"{type(exc).__name__}: {exc}".split())[:300]
            return False
        return self._server.restream(self._device, streams)

    def _round(self) -> bool:
        """One comparison and what follows from it; whether it decided."""
        if not self._traffic():
            return False
        self._best = None
        self._untried = [other for other in self._measured if other != self._layout]
        self._untried = self._untried[:ALTERNATIVES]
        while True:
            windows = self._windows()
            if windows is None:
                return False
            result = compare(windows)
            ratio = result.ratio
            if ratio is not None and (self._best is None or ratio > self._best[0]):
                self._best = (ratio, self._layout)
            decision = decide(result, self._layout, self._untried)
            if not self.apply(decision):
                return decision.action != "wait"

    def _between(self) -> None:
        """Until the next comparison: :data:`RECHECK_S` seconds, or sooner when a stretch of
        steady traffic serves rows, or holds requests at once, :data:`_CHANGE` times off the
        first stretch after the verdict (callers came or went)."""
        stopping = self._server.stopping
        deadline = time.monotonic() + RECHECK_S
        last = begun = self._served()
        changed = started = time.monotonic()
        reference: tuple[float, float] | None = None  # rows/s and requests at once
        while not stopping.wait(_POLL_S):
            now = time.monotonic()
            if now >= deadline:
                return
            count = self._served()
            if count.requests != last.requests:
                last, changed = count, now
            if now - changed > _GAP_S:  # paused: a stretch starts with the next request
                begun, started = count, now
                continue
            if now - started < _STRETCH_S:
                continue
            seconds = now - started
            stretch = ((count.rows - begun.rows) / seconds, (count.held_s - begun.held_s) / seconds)
            begun, started = count, now
            if reference is None:
                reference = stretch
            elif _moved(reference, stretch):
                return

    def _traffic(self) -> bool:
        """Wait until the server serves requests (``False``: it stopped first)."""
        before = self._served().requests
        while not self._server.stopping.wait(_POLL_S):
            if self._served().requests > before:
                return True
        return False

    def _served(self) -> _Count:
        device = self._server.served().devices[0]
        held = device.waited_s + sum(stream.busy_s for stream in device.streams)
        return _Count(device.requests, device.rows, held)

    def _look(self) -> tuple[float, int, int]:
        """Now, and the requests and rows served so far (a look of :func:`window_of`)."""
        count = self._served()
        return time.monotonic(), count.requests, count.rows

    def _windows(self) -> list[Window] | None:
        """:data:`PAIRS` pairs of windows, the order turning each pair (``None``: stopped)."""
        windows = []
        for index in range(PAIRS):
            for path in _PATHS if index % 2 == 0 else _PATHS[::-1]:
                window = self._window(path)
                if window is None:
                    return None
                windows.append(window)
        return windows

    def _window(self, path: str) -> Window | None:
        """One window served on ``path`` (:func:`window_of`; ``None``: stopped)."""
        latency = self._latency if path == "latency" else None
        stopping = self._server.stopping
        if not self._server.serve_latency(self._device, latency) or stopping.wait(SETTLE_S):
            return None
        looks = [self._look()]
        while not stopping.wait(_POLL_S):
            looks.append(self._look())
            window = window_of(path, looks)
            if window is not None:
                return window
        return None
