"""Many callers: raw ONNX Runtime's default session against ortplug's latency and throughput hints.

    python benchmarks/bench_throughput.py [--rounds 7] [--seconds 0.3] [--callers 1,4,16]

Per model of a small real set shipped in pip packages (installed at benchmark time, never by
the tests: ``pip install magika rapidocr-onnxruntime nudenet``): magika's content-type model,
nudenet's 320n detector, PaddleOCR's text-direction classifier and recognizer (as
``rapidocr-onnxruntime`` ships them; openwakeword, in the issue's set, downloads its models at
run time, so the recognizer stands in for it). Each request is one row (one file, image or
text line) at the size the library feeds; the same arrays are the checkpoint's samples, so the
throughput hint's first build measures on them.

At 1, 4 and 16 callers (threads calling at once, each sending its next request when the last
returned), three sides serve for ``--seconds`` each, in interleaved rounds (rates are requests
over seconds pooled over the rounds; a ratio is the median over the rounds of the side's rate
over raw's in the same round, as a host whose speed moves, a shared VM's, moves a round's sides
alike): ONNX Runtime's default ``InferenceSession`` (CPU
provider, called from every caller), ``OnnxBackend`` with the latency hint (the default) and
with ``performance_hint="throughput"`` (built in an empty cache, so it measures now; its build
time and layout are printed). The goals: the throughput hint >= 1.3x raw at 4 and at 16
callers (geometric mean over the models), the latency hint >= 0.95x raw at 1 caller, and the
throughput hint's p99 within raw's p99 plus the stated queueing delay plus one of its runs
(a run's mean time in that slice: streams x seconds / runs). "CPUs used" is this process's CPU
time over the wall time, per side (raw / latency / throughput): on a machine busy with other
work, the side with more runnable threads gets a larger share of the CPUs, which is no faster
serving; the load average is printed at the start and the end for that reason.

The closing lines bound what any serving layout can reach here: each model's median time per
row of a single-thread session, run alone and in batches of 8 rows (the cheapest way a CPU can
run a request, with no thread waiting on another), and the rate the CPUs would serve at that
cost, against raw's rate at the most callers; then, per caller count, the geometric mean of
those bounds over raw's rate at that count: the most a geometric-mean goal can reach here.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import statistics
import subprocess
import sys
import tempfile
import time
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

# --cache DIR (read before ortplug is imported), else a new empty folder: measure now.
os.environ["ORTPLUG_CACHE_DIR"] = next(
    (sys.argv[i + 1] for i, arg in enumerate(sys.argv[:-1]) if arg == "--cache"), None
) or tempfile.mkdtemp(prefix="bench-throughput-")

import attrs
import numpy as np
import onnxruntime as ort
from ortplug import LocalCheckpoint, OnnxBackend, ResolvedCheckpoint
from ortplug_serve import served as served_stats
from ortplug_serve.callers import Served, drive
from ortplug_serve.server import Server

SIDES = ("raw", "latency", "throughput")


@attrs.frozen
class Model:
    """A model file inside a pip package, and one request's inputs as the library feeds it."""

    name: str
    package: str
    distribution: str
    file: str
    request: Callable[[np.random.Generator], dict[str, np.ndarray]]

    def path(self) -> Path | None:
        spec = importlib.util.find_spec(self.package)
        if spec is None or not spec.submodule_search_locations:
            return None
        found = Path(next(iter(spec.submodule_search_locations))) / self.file
        return found if found.is_file() else None


MODELS = (
    Model("magika", "magika", "magika", "models/standard_v3_3/model.onnx",
          lambda rng: {"bytes": rng.integers(0, 257, (1, 2048)).astype(np.int32)}),
    Model("nudenet 320n", "nudenet", "nudenet", "320n.onnx",
          lambda rng: {"images": rng.random((1, 3, 320, 320), np.float32)}),
    Model("PaddleOCR cls", "rapidocr_onnxruntime", "rapidocr-onnxruntime",
          "models/ch_ppocr_mobile_v2.0_cls_infer.onnx",
          lambda rng: {"x": rng.random((1, 3, 48, 192), np.float32) * 2 - 1}),
    Model("PaddleOCR rec", "rapidocr_onnxruntime", "rapidocr-onnxruntime",
          "models/ch_PP-OCRv4_rec_infer.onnx",
          lambda rng: {"x": rng.random((1, 3, 48, 320), np.float32) * 2 - 1}),
)  # fmt: skip


def installed_models(subset: str | None) -> Iterator[tuple[Model, Path]]:
    """The models of ``subset`` (comma-separated names; ``None``: all) with their files; a
    model whose package is not installed is said skipped."""
    wanted = None if subset is None else {name.strip() for name in subset.split(",")}
    for model in MODELS:
        if wanted is not None and model.name not in wanted:
            continue
        path = model.path()
        if path is None:
            print(f"{model.name}: skipped (pip install {model.distribution})")
            continue
        yield model, path


def _with_samples(path: Path, feed: dict[str, np.ndarray]) -> ResolvedCheckpoint:
    """The model as a checkpoint whose samples are ``feed`` (metadata ``extra.samples``)."""
    folder = Path(tempfile.mkdtemp(prefix="samples-"))
    for name, value in feed.items():
        np.save(folder / f"{name}.npy", value)
    checkpoint = LocalCheckpoint(path).resolve()
    extra = {**checkpoint.metadata.extra, "samples": str(folder)}
    return ResolvedCheckpoint(path, attrs.evolve(checkpoint.metadata, extra=extra))


class _Sides:
    """The three sides of one model: their run functions, and the throughput backend's server."""

    def __init__(self, path: Path, feed: dict[str, np.ndarray], load: int = 0) -> None:
        self.raw = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
        names = [output.name for output in self.raw.get_outputs()]
        checkpoint = _with_samples(path, feed)
        self.latency = OnnxBackend.from_checkpoint(checkpoint)
        busy = [subprocess.Popen([sys.executable, "-c", "while 1: pass"]) for _ in range(load)]
        try:
            started = time.perf_counter()
            self.throughput = OnnxBackend.from_checkpoint(checkpoint, performance_hint="throughput")
            self.build_s = time.perf_counter() - started
        finally:
            for process in busy:
                process.kill()
                process.wait()
        self.runs: dict[str, Callable[[], object]] = {
            "raw": lambda: self.raw.run(names, feed),
            "latency": lambda: self.latency.run(feed),
            "throughput": lambda: self.throughput.run(feed),
        }
        for run in self.runs.values():
            run()

    def served_runs(self) -> tuple[int, int]:
        """Runs the throughput backend made so far, and its streams."""
        server = self.throughput.dispatcher
        assert isinstance(server, Server)
        return sum(d.runs for d in server.devices), sum(len(d.streams) for d in server.devices)

    def delay_ms(self) -> float:
        serving = self.throughput.serving
        assert serving is not None
        return max(d.layout.max_delay_ms for d in serving.devices if d.layout and d.serving)

    def close(self) -> None:
        self.latency.close()
        self.throughput.close()


def _measure(
    sides: _Sides, callers: int, rounds: int, seconds: float
) -> tuple[dict[str, list[Served]], float]:
    """Each side for ``seconds`` per round, the order turning each round: each side's slices,
    round by round; the throughput side's mean run (ms)."""
    slices: dict[str, list[Served]] = {side: [] for side in SIDES}
    busy = runs = 0.0
    for index in range(rounds):
        for side in SIDES[index % 3 :] + SIDES[: index % 3]:
            before, streams = sides.served_runs()
            served = drive(sides.runs[side], callers, seconds)
            slices[side].append(served)
            if side == "throughput":
                runs += sides.served_runs()[0] - before
                busy += streams * served.seconds
    return slices, 1e3 * busy / max(runs, 1)


def _per_row_ms(path: Path, feed: dict[str, np.ndarray], rows: int) -> float:
    """Median milliseconds per row of a single-thread session running ``rows`` rows at once."""
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    session = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
    batch = {name: np.repeat(value, rows, axis=0) for name, value in feed.items()}
    session.run(None, batch)
    times = []
    deadline = time.perf_counter() + 1.0
    while len(times) < 5 or (time.perf_counter() < deadline and len(times) < 200):
        started = time.perf_counter()
        session.run(None, batch)
        times.append(time.perf_counter() - started)
    return 1e3 * statistics.median(times) / rows


def _row(name: str, callers: int, slices: dict[str, list[Served]], bound: float) -> dict[str, Any]:
    """One table row: each side's slices pooled, and its ratio to raw: the median over the rounds
    of its rate over raw's in the same round (a host whose speed moves between rounds moves a
    round's sides alike; pooled rates would weigh whichever side a fast moment fell on)."""
    row: dict[str, Any] = {"model": name, "callers": callers, "p99_bound_ms": bound}
    for side in SIDES:
        row[side] = Served.pooled(slices[side])
        row[f"{side}_x"] = statistics.median(
            part.requests_per_s / raw.requests_per_s
            for part, raw in zip(slices[side], slices["raw"])
            if raw.requests_per_s > 0
        )
    return row


def _print_rows(rows: list[dict[str, Any]]) -> None:
    print(
        f"| {'model':<14} | callers | {'raw req/s':>9} | {'p50/p99 ms':>13} | "
        f"{'latency hint':>18} | {'p50/p99 ms':>13} | {'throughput hint':>18} | "
        f"{'p50/p99 ms':>13} | p99 bound ms | CPUs used |"
    )
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for row in rows:
        cells = [f"{row['model']:<14}", f"{row['callers']:>7}"]
        for side in SIDES:
            served = row[side]
            rate = f"{served.requests_per_s:,.1f}"
            if side != "raw":
                rate += f" ({row[f'{side}_x']:.2f}x)"
            latency = f"{served.p50_ms:.1f} / {served.p99_ms:.1f}"
            cells += [f"{rate:>{9 if side == 'raw' else 18}}", f"{latency:>13}"]
        ok = "ok" if row["throughput"].p99_ms <= row["p99_bound_ms"] else "OVER"
        cells.append(f"{row['p99_bound_ms']:.1f} {ok}")
        cells.append(" / ".join(f"{row[side].cpus_used:.1f}" for side in SIDES))
        print("| " + " | ".join(cells) + " |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7, help="interleaved rounds (7)")
    parser.add_argument("--seconds", type=float, default=0.3, help="seconds per side and round")
    parser.add_argument("--callers", default="1,4,16", help="caller counts, e.g. 1,4,16")
    parser.add_argument("--models", help="a comma-separated subset of the model names")
    parser.add_argument("--cache", help="the cache folder (default: a new empty one, so the "
                        "first throughput build measures now; the same folder again: a later "
                        "process starts from what this one recorded)")  # fmt: skip
    parser.add_argument("--loaded-build", type=int, default=0, metavar="N",
                        help="run N busy-loop processes during each throughput build only "
                        "(a layout measured on a loaded host), killed once it is built")  # fmt: skip
    args = parser.parse_args()
    counts = [int(part) for part in args.callers.split(",")]
    warnings.simplefilter("ignore")
    print(f"onnxruntime {ort.__version__}, {os.cpu_count()} CPUs, plugins "
          f"{os.environ.get('ORTPLUG_PLUGINS', 'all installed')}, load average "
          f"{', '.join(f'{v:.2f}' for v in os.getloadavg())} at the start")  # fmt: skip
    rows: list[dict[str, Any]] = []
    ceilings: list[str] = []
    reachable: dict[int, list[float]] = {}  # callers -> each model's bound over raw's rate
    rng = np.random.default_rng(0)
    for model, path in installed_models(args.models):
        feed = model.request(rng)
        sides = _Sides(path, feed, args.loaded_build)
        serving = sides.throughput.serving
        assert serving is not None
        loaded = f" ({args.loaded_build} busy loops meanwhile)" if args.loaded_build else ""
        print(f"{model.name}: throughput build {sides.build_s:.1f} s{loaded}; {serving.source}; "
              f"{'; '.join(d.describe() for d in serving.devices)}"
              f"{'' if serving.latency is None else '; the latency path serves'}")  # fmt: skip
        for callers in counts:
            slices, run_ms = _measure(sides, callers, args.rounds, args.seconds)
            bound = Served.pooled(slices["raw"]).p99_ms + sides.delay_ms() + run_ms
            rows.append(_row(model.name, callers, slices, bound))
        traffic = served_stats(sides.throughput)
        if traffic is not None and traffic.watch is not None:
            print(f"{model.name}: watch: {traffic.watch}")
        sides.close()
        alone, batched = _per_row_ms(path, feed, 1), _per_row_ms(path, feed, 8)
        most = max(counts)
        raw = next(r["raw"] for r in rows if r["model"] == model.name and r["callers"] == most)
        ceiling = (os.cpu_count() or 1) * 1e3 / min(alone, batched)
        for r in rows:
            if r["model"] == model.name:
                reachable.setdefault(r["callers"], []).append(ceiling / r["raw"].requests_per_s)
        ceilings.append(
            f"{model.name}: {alone:.2f} ms/row alone, {batched:.2f} in batches of 8 on one "
            f"thread: at most {ceiling:,.1f} requests/s on {os.cpu_count()} CPUs, "
            f"{ceiling / raw.requests_per_s:.2f}x raw at {most} callers"
        )
    print()
    _print_rows(rows)
    print()
    for side, callers in (("throughput", 4), ("throughput", 16), ("latency", 1)):
        ratios = [r[f"{side}_x"] for r in rows if r["callers"] == callers]
        if ratios:
            print(f"geometric mean, {side} hint at {callers} caller(s): "
                  f"{statistics.geometric_mean(ratios):.2f}x raw ONNX Runtime")  # fmt: skip
    for line in ceilings:
        print(line)
    for callers, bounds in sorted(reachable.items()):
        if callers > 1:  # what the 1.3x goal asks of this host: the layouts' best at once
            print(f"geometric mean of those bounds at {callers} caller(s): "
                  f"{statistics.geometric_mean(bounds):.2f}x raw ONNX Runtime")  # fmt: skip
    print(f"load average {', '.join(f'{v:.2f}' for v in os.getloadavg())} at the end")


if __name__ == "__main__":
    main()
