"""How many wrong results reach callers after a candidate that goes wrong after its takeover, measured
against the statement in ``ortplug.pipeline.real_traffic``'s docstring.

    python benchmarks/bench_exposure.py [--trials 12]
    python benchmarks/bench_real_traffic.py --exposure   (the same)

Each trial builds a startup fallback on the ``mlp`` of ``bench_proven_choice.py`` whose candidate
is this script's test provider (ONNX Runtime's CPU kernels under the Azure provider's name, like
``ortplug_misbehaving``): right through verification, the shadow and the takeover
(``real_traffic_checks=1``), then, from its ``m``-th call after the takeover, wrong (outputs
shifted) on a share ``q`` of its calls. Callers keep calling (``run``, or ``arun``) until the spot
check hands over to the CPU reference; every result is compared bit for bit with a plain ONNX
Runtime CPU session. The modes are the tester's (issue 37, T6), as a candidate that goes wrong
once it serves: wrong from its takeover on every call (``m=1, q=1``), on one request in five (a
batch of 4 every 5th request, ``q=0.2``), on one in ten (values x1.8 every 10th, ``q=0.1``), on
every 17th run (``q=1/17``), from its 40th call (``m=40``), long after (``m=2000``: the share has
decayed to ``p``), and through ``arun``. Per mode and spot-check share ``p``: the mean wrong
results over the trials and the stated

    E = sum_{k >= 0} q * prod_{j < k} (1 - q * s'(m + j)) + q * r * (d + i),
    s'(n) = min(max(p, W / (W + n - 1)), 1 / (1 + r * (d + i)))

with ``W = DECAY``, ``r`` the measured call rate, ``d`` the measured time of one CPU reference
run and comparison of a request (what the check thread does before it switches) and ``i`` the
interpreter's switch interval (the check's thread may wait that long for the lock while the
callers run Python). ``E`` is an upper bound of the mean: ``ratio`` (measured / stated) is at most
about 1, well below it where the callers leave the interpreter lock free.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import statistics
import sys
import tempfile
import threading
import time
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any, ClassVar

import attrs
import numpy as np
import onnxruntime as ort
from bench_proven_choice import mlp
from ortplug import LocalCheckpoint, OnnxBackend, StartupFallback, Verification
from ortplug.pipeline.real_traffic import DECAY
from ortplug.plugins import ProviderOffer, ProviderType, hookimpl
from ortplug.settings import refresh_settings
from ortplug.testing import make_plugin_host
from ortplug.verification.comparison import compare_outputs
from ortplug.verification.verdicts import default_tolerance

#: (label, m, q, run form): the tester's T6 modes as a candidate that goes wrong after it serves.
MODES = (
    ("wrong from its takeover", 1, 1.0, "run"),
    ("b1then4: 1 request in 5", 1, 0.2, "run"),
    ("mag: 1 request in 10", 1, 0.1, "run"),
    ("every 17th run", 1, 1 / 17, "run"),
    ("after 40 calls", 40, 1.0, "run"),
    ("long after its takeover", 2000, 1.0, "run"),
    ("arun, from its takeover", 1, 1.0, "arun"),
)
_SHIFT = np.float32(0.5)


class _Drift:
    """When the wrapped sessions go wrong: from the ``start``-th run counted after ``arm``, every
    ``every``-th run (a real provider's state, shared by its sessions)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.runs = 0
        self.start: int | None = None
        self.every = 1

    def arm(self, start: int, every: int) -> None:
        with self.lock:
            self.runs, self.start, self.every = 0, start, every

    def wrong(self) -> bool:
        with self.lock:
            self.runs += 1
            start, runs = self.start, self.runs
        return start is not None and runs >= start and (runs - start) % self.every == 0


class _Drifting:
    """A real ONNX Runtime session that claims the graph's nodes and shifts outputs as ``drift``
    says, on ``run`` and ``run_async``."""

    def __init__(self, session: Any, drift: _Drift) -> None:
        self._session, self._drift = session, drift

    def __getattr__(self, name: str) -> Any:
        return getattr(self._session, name)

    def get_provider_graph_assignment_info(self) -> list[Any]:
        return [
            _Claimed(tuple(s.get_nodes()))
            for s in self._session.get_provider_graph_assignment_info()
        ]

    def _served(self, outputs: list[Any]) -> list[Any]:
        if not self._drift.wrong():
            return outputs
        return [
            o + _SHIFT if isinstance(o, np.ndarray) and o.dtype.kind == "f" else o for o in outputs
        ]

    def run(self, output_names: Any, input_feed: Any, run_options: Any = None) -> list[Any]:
        return self._served(list(self._session.run(output_names, input_feed, run_options)))

    def run_async(
        self,
        output_names: Any,
        input_feed: Any,
        callback: Any,
        user_data: Any,
        run_options: Any = None,
    ) -> Any:
        def served(outputs: Any, data: Any, error: str) -> None:
            callback(outputs if error else self._served(list(outputs)), data, error)

        return self._session.run_async(output_names, input_feed, served, user_data, run_options)


@attrs.frozen
class _Claimed:
    nodes: tuple[Any, ...]
    ep_name: str = "AzureExecutionProvider"

    def get_nodes(self) -> tuple[Any, ...]:
        return self.nodes


@attrs.frozen
class DriftingProvider:
    kind: ClassVar[str] = "drifting"
    drift: _Drift = attrs.field(eq=False, repr=False)

    def to_ort(self) -> tuple[str, dict[str, str]]:
        return "AzureExecutionProvider", {"drifting": "1"}

    def ortplug_testing_wrap(self, session: Any) -> Any:
        return _Drifting(session, self.drift)


class DriftingPlugin:
    def __init__(self, drift: _Drift) -> None:
        self.config = DriftingProvider(drift)

    @hookimpl
    def ortplug_provider_types(self) -> Iterator[ProviderType]:
        yield ProviderType("drifting", "AzureExecutionProvider", DriftingProvider)

    @hookimpl
    def ortplug_offer_providers(self) -> Iterator[ProviderOffer]:
        yield ProviderOffer(self.config, preference=95, reason="a provider that goes wrong later")


def stated(p: float, m: int, q: float, rate: float, delay: float) -> float:
    """The docstring's E for share ``p``, start ``m``, wrong share ``q``, ``rate`` calls/s and a
    check of ``delay`` s (the interpreter's switch interval added, as it states)."""
    busy = delay + sys.getswitchinterval()  # one check, waits for the interpreter lock included
    idle = 1 / (1 + rate * busy)  # a call is taken only while the check is idle
    expected, alive, n = 0.0, 1.0, m
    while alive > 1e-9 and n < m + 10**6:
        expected += q * alive
        alive *= 1 - q * min(max(p, DECAY / (DECAY + n - 1)), idle)
        n += 1
    return expected + q * rate * busy


def _trial(
    model: Path, plain: Any, p: float, m: int, q: float, form: str
) -> tuple[int, float, int]:
    """One takeover that goes wrong: (wrong results served, calls per second, calls after the switch
    that were wrong)."""
    drift = _Drift()
    # a fresh cache: the last trial's rejection on real inputs is cached (no later build chose it)
    os.environ["ORTPLUG_CACHE_DIR"] = tempfile.mkdtemp(dir=model.parent)
    refresh_settings()
    backend = OnnxBackend.from_checkpoint(
        LocalCheckpoint(model).resolve(), plugins=make_plugin_host(("drift", DriftingPlugin(drift))),
        startup_fallback=StartupFallback(real_traffic_checks=1, spot_check=p), verify=Verification(measure=False),
    )  # fmt: skip
    rng = np.random.default_rng(0)
    feed = {"x": rng.standard_normal((1, 64)).astype(np.float32)}
    while not backend.wait_ready(0.01):
        backend.run(feed)
    if backend.providers[0] != "AzureExecutionProvider":
        raise SystemExit(f"the candidate did not take over: {backend.startup_status}")
    drift.arm(m, max(1, round(1 / q)))
    wrong = after = calls = 0
    started = time.perf_counter()
    while calls < 50_000:
        feed = {"x": rng.standard_normal((1, 64)).astype(np.float32)}
        moved = backend.providers[0] != "AzureExecutionProvider"
        if form == "arun":
            got = next(iter(asyncio.run(backend.arun(feed)).values()))
        else:
            got = next(iter(backend.run(feed).values()))
        bad = not np.array_equal(got, plain.run(None, feed)[0])
        wrong += bad and not moved
        after += bad and moved
        calls += 1
        if moved:
            break
    rate = calls / (time.perf_counter() - started)
    backend.close()
    return wrong, rate, after


def _judge_seconds(model: Path, plain: Any) -> float:
    """``d``: one CPU reference run of a request and the comparison a spot check makes of it."""
    feed = {"x": np.ones((1, 64), np.float32)}
    names = [o.name for o in plain.get_outputs()]
    outputs = dict(zip(names, plain.run(None, feed)))
    tolerance = default_tolerance("fp32")
    started = time.perf_counter()
    for _ in range(200):
        compare_outputs(dict(zip(names, plain.run(None, feed))), outputs, tolerance)
    return (time.perf_counter() - started) / 200


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=12)
    parser.add_argument("--shares", type=float, nargs="*", default=[0.01, 0.1])
    args = parser.parse_args(argv)
    warnings.simplefilter("ignore")  # each trial's spot check warns once, as it should
    logging.getLogger("ortplug").setLevel(logging.ERROR)  # and each takeover says one line
    print(f"onnxruntime {ort.__version__}, python {sys.version.split()[0]}, {os.cpu_count()} CPUs; "
          f"W = {DECAY}, {args.trials} trials per row")  # fmt: skip
    with tempfile.TemporaryDirectory(prefix="bench-exposure-") as folder:
        os.environ["ORTPLUG_CACHE_DIR"] = folder
        model = mlp(Path(folder) / "mlp.onnx")
        plain = ort.InferenceSession(str(model), providers=["CPUExecutionProvider"])
        delay = _judge_seconds(model, plain)
        print(f"d (one CPU reference run and comparison): {delay * 1e3:.3f} ms, i (switch "
              f"interval): {sys.getswitchinterval() * 1e3:g} ms\n")  # fmt: skip
        print(f"{'mode':<28}{'p':>6}{'m':>6}{'q':>7}{'calls/s':>9}{'wrong: measured':>17}"
              f"{'stated':>9}{'ratio':>7}{'after':>7}")  # fmt: skip
        for p in args.shares:
            for label, m, q, form in MODES:
                runs = [_trial(model, plain, p, m, q, form) for _ in range(args.trials)]
                wrong = statistics.mean(r[0] for r in runs)
                rate = statistics.median(r[1] for r in runs)
                after = sum(r[2] for r in runs)
                expected = statistics.mean(stated(p, m, q, r[1], delay) for r in runs)
                print(f"{label:<28}{p:>6g}{m:>6}{q:>7.3f}{rate:>9.0f}{wrong:>17.1f}"
                      f"{expected:>9.1f}{wrong / expected:>7.2f}{after:>7}")  # fmt: skip
    print("\n'after': wrong results once the CPU reference served (must be 0).")


if __name__ == "__main__":
    main()
