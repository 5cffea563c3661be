"""Throughput of ``ortplug_ray.predict`` against one backend in a plain loop and a hand-written class.

Prints rows per second (higher is better) and ratios, measured in one run on a
local Ray cluster of 2 CPUs (``--nodes 2`` starts two nodes of 1 CPU each on
this machine with ``ray.cluster_utils``). The plain loop gets the CPU budget of
one actor: one intra-op thread. A Ray figure counts the rows that reach the driver
after its first output batch over the time from that batch to the last, so
actor start-up and session builds stay out of it (the wait for the first batch
is printed apart); inputs sit in the object store first, except for the "with
read tasks" line, whose inputs Ray read tasks generate while the actor runs.
Each figure is rows over time summed over ``--rounds`` interleaved rounds.

Against a hand-written predictor (``--raw-only`` runs just this part): ``predict`` beside what a
Ray user writes instead, a ``map_batches`` callable class that builds one raw
``onnxruntime.InferenceSession`` in ``__init__`` (CPU provider, one intra-op thread per CPU Ray
gives the actor, as ortplug sizes it) and runs each numpy batch through it (a static batch-1
model: one run per row, the outputs concatenated), on the same stored dataset, with the same
actors (``compute=ActorPoolStrategy(size=N)``, Ray 2.51+'s spelling of ``concurrency=N``, 1 CPU
each) and batch size. Both are timed end to end, from the
``map_batches`` call to the last row at the driver (actor start-up included); rounds alternate
which side goes first, and the outputs' sums must agree (both sides did the same work).

The performance hint (one node of 2 CPUs): one actor given both CPUs with the latency hint (one
run per batch, 2 intra-op threads) and with ``performance_hint="throughput"`` (each batch cut
into one part per measured stream, run side by side), against a plain loop over the same rows
through one backend with 2 threads.

    python benchmarks/bench_ray.py                 # demo MLP, light_squeezenet, light_resnet50
    python benchmarks/bench_ray.py --nodes 2       # the same on two nodes of 1 CPU each
    python benchmarks/bench_ray.py --hints-only    # one actor of 2 CPUs, each performance hint
    python benchmarks/bench_ray.py --raw-only      # predict against a hand-written map_batches class
"""

from __future__ import annotations

import argparse
import logging
import os
import time
from collections.abc import Callable
from importlib.resources import files
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import ray
from ortplug import LocalCheckpoint, OnnxBackend, SessionOptionsConfig
from ortplug_ray import BackendConfig, default_batch_size, predict

LIGHT = Path(onnx.__file__).parent / "backend/test/data/light"


def _loop_rows_per_s(model: Path, rows: np.ndarray, batch: int, threads: int = 1) -> float:
    """One backend, ``threads`` intra-op threads, ``batch`` rows per run, every row once."""
    backend = OnnxBackend.from_checkpoint(
        LocalCheckpoint(model).resolve(),
        ["cpu"],
        SessionOptionsConfig(intra_op_num_threads=threads),
    )
    name = backend.input_names[0]
    backend.run({name: rows[:batch]})
    started = time.perf_counter()
    for start in range(0, len(rows), batch):
        backend.run({name: rows[start : start + batch]})
    return len(rows) / (time.perf_counter() - started)


def _ray_steady(
    dataset: Any, model: Path, actors: int, cpus: int = 1, hint: str = "latency"
) -> tuple[int, float, float]:
    """One ``predict`` run: rows after the first output batch, their seconds, and that first wait.

    Timing from the first batch that reaches the driver leaves actor start-up and session
    builds out of the rate (reported apart) without a second run to subtract.
    """
    started = time.perf_counter()
    scored = predict(
        dataset,
        model,
        providers=["cpu"],
        keep_columns=[],
        concurrency=actors,
        num_cpus_per_actor=cpus,
        performance_hint=hint,
    )
    first_at, first_rows, rows = 0.0, 0, 0
    for batch in scored.iter_batches(batch_size=None, batch_format="numpy"):
        rows += len(next(iter(batch.values())))
        if not first_at:
            first_at, first_rows = time.perf_counter(), rows
    return rows - first_rows, time.perf_counter() - first_at, first_at - started


def _blocks(rows: np.ndarray, model: Path) -> Any:
    """``rows`` in the object store, in blocks of four default batches (enough for two actors)."""
    size = 4 * default_batch_size(BackendConfig(model=model))
    name = LocalCheckpoint(model).resolve().metadata.input_names[0]
    parts = [rows[i : i + size] for i in range(0, len(rows), size)]
    return ray.data.from_numpy(parts).rename_columns({"data": name}).materialize()


def _generated(count: int, shape: tuple[int, ...], name: str) -> Any:
    """``count`` random rows made by Ray read tasks as the pipeline runs (nothing materialized)."""

    def make(batch: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        rng = np.random.default_rng(int(batch["id"][0]))
        return {name: rng.random((len(batch["id"]), *shape), np.float32)}

    return ray.data.range(count, override_num_blocks=max(2, count // 108)).map_batches(make)


def _report(title: str, model: Path, rows: np.ndarray, batch: int, rounds: int) -> None:
    """The loop, one actor and two actors, interleaved ``rounds`` times; rows over total time."""
    totals = {"loop": [0, 0.0], 1: [0, 0.0], 2: [0, 0.0]}
    first: dict[int, float] = {1: 0.0, 2: 0.0}
    stored = _blocks(rows, model)
    for _ in range(rounds):
        totals["loop"][0] += len(rows)
        totals["loop"][1] += len(rows) / _loop_rows_per_s(model, rows, batch)
        for actors in (1, 2):
            done, spent, wait = _ray_steady(stored, model, actors)
            totals[actors][0] += done
            totals[actors][1] += spent
            first[actors] = max(first[actors], wait)
    loop, one, two = (totals[key][0] / totals[key][1] for key in ("loop", 1, 2))
    print(f"  {title}: {len(rows)} rows, loop batch {batch}, "
          f"Ray batch {default_batch_size(BackendConfig(model=model))}")  # fmt: skip
    print(f"    plain loop, 1 thread          {loop:>12,.1f}")
    print(
        f"    1 actor (1 CPU)               {one:>12,.1f}   x{one / loop:.2f} of the loop "
        f"(first batch after {first[1]:.1f} s)"
    )
    print(
        f"    2 actors (1 CPU each)         {two:>12,.1f}   x{two / one:.2f} of 1 actor, "
        f"{two / 2:,.1f} per CPU (first batch after {first[2]:.1f} s)"
    )


class _RawPredictor:
    """What a Ray user writes instead of ``predict``: a raw session built once per actor."""

    def __init__(self, model: str, threads: int) -> None:
        import onnxruntime as ort

        options = ort.SessionOptions()
        options.intra_op_num_threads = threads
        self.session = ort.InferenceSession(model, options, providers=["CPUExecutionProvider"])
        first = self.session.get_inputs()[0]
        self.name = first.name
        self.per_row = first.shape[0] == 1  # a static batch of 1: one run per row
        self.outputs = [output.name for output in self.session.get_outputs()]

    def __call__(self, batch: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        rows = batch[self.name]
        if not self.per_row:
            return dict(zip(self.outputs, self.session.run(None, {self.name: rows})))
        runs = [self.session.run(None, {self.name: rows[i : i + 1]}) for i in range(len(rows))]
        return {name: np.concatenate(parts) for name, parts in zip(self.outputs, zip(*runs))}


def _end_to_end(scored: Callable[[], Any]) -> tuple[float, float, dict[str, float]]:
    """Seconds from calling ``scored`` (which makes the lazy dataset) to the last row at the
    driver and to the first, and each output column's sum (rows counted as ``"rows"``)."""
    started = time.perf_counter()
    first = 0.0
    sums: dict[str, float] = {"rows": 0.0}
    for batch in scored().iter_batches(batch_size=None, batch_format="numpy"):
        first = first or time.perf_counter() - started
        for name, values in batch.items():
            sums[name] = sums.get(name, 0.0) + float(values.sum(dtype=np.float64))
        sums["rows"] += len(values)
    return time.perf_counter() - started, first, sums


def _report_raw(title: str, model: Path, rows: np.ndarray, actors: int, rounds: int) -> None:
    """``predict`` against the hand-written class, end to end, rounds alternating who goes first."""
    batch = default_batch_size(BackendConfig(model=model))
    stored = _blocks(rows, model)

    def raw() -> Any:
        return stored.map_batches(
            _RawPredictor,
            fn_constructor_kwargs={"model": str(model), "threads": 1},
            batch_size=batch,
            batch_format="numpy",
            compute=ray.data.ActorPoolStrategy(size=actors),  # Ray 2.51+: concurrency=N's spelling
            num_cpus=1,
        )

    def ortplug() -> Any:
        return predict(
            stored, model, providers=["cpu"], keep_columns=[], batch_size=batch,
            concurrency=actors, num_cpus_per_actor=1,
        )  # fmt: skip

    sides = {"raw": raw, "ortplug": ortplug}
    spent = {"raw": 0.0, "ortplug": 0.0}
    first = {"raw": 0.0, "ortplug": 0.0}
    sums: dict[str, dict[str, float]] = {}
    for index in range(rounds):
        for side in ("raw", "ortplug") if index % 2 == 0 else ("ortplug", "raw"):
            seconds, wait, totals = _end_to_end(sides[side])
            spent[side] += seconds
            first[side] += wait
            sums.setdefault(side, totals)
    if (
        sums["raw"]["rows"] != len(rows)
        or sums["raw"].keys() != sums["ortplug"].keys()
        or not all(
            np.isclose(sums["raw"][n], sums["ortplug"][n], rtol=1e-5, atol=1e-3)
            for n in sums["raw"]
        )
    ):
        raise SystemExit(f"{title}: the two sides' outputs differ: {sums}")
    raw_rate, ours = (len(rows) * rounds / spent[side] for side in ("raw", "ortplug"))
    print(f"  {title}: {len(rows)} rows, batch {batch}, {actors} actor(s) of 1 CPU, end to end")
    print(
        f"    hand-written map_batches      {raw_rate:>12,.1f}   "
        f"(first batch after {first['raw'] / rounds:.2f} s)"
    )
    print(
        f"    ortplug predict               {ours:>12,.1f}   x{ours / raw_rate:.3f} of "
        f"hand-written (first batch after {first['ortplug'] / rounds:.2f} s)"
    )


def _report_hints(title: str, model: Path, rows: np.ndarray, batch: int, rounds: int) -> None:
    """One actor of 2 CPUs with each hint against a plain 2-thread loop; rows over total time."""
    sides: dict[str, list[float]] = {"loop": [0, 0.0], "latency": [0, 0.0], "throughput": [0, 0.0]}
    stored = _blocks(rows, model)
    for _ in range(rounds):
        sides["loop"][0] += len(rows)
        sides["loop"][1] += len(rows) / _loop_rows_per_s(model, rows, batch, threads=2)
        for hint in ("latency", "throughput"):
            done, spent, _ = _ray_steady(stored, model, 1, cpus=2, hint=hint)
            sides[hint][0] += done
            sides[hint][1] += spent
    loop, latency, throughput = (sides[k][0] / sides[k][1] for k in sides)
    print(f"  {title}, one actor of 2 CPUs: {len(rows)} rows")
    print(f"    plain loop, 2 threads         {loop:>12,.1f}")
    print(
        f"    latency hint                  {latency:>12,.1f}   x{latency / loop:.2f} of the loop"
    )
    print(
        f"    throughput hint               {throughput:>12,.1f}   x{throughput / loop:.2f} of the loop"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=16_000_000, help="demo MLP rows")
    parser.add_argument("--squeezenet", type=int, default=3000, help="light_squeezenet images")
    parser.add_argument("--resnet", type=int, default=1000, help="light_resnet50 images")
    parser.add_argument("--rounds", type=int, default=2, help="interleaved rounds")
    parser.add_argument("--nodes", type=int, choices=(1, 2), default=1)
    parser.add_argument(
        "--hints-only", action="store_true", help="only the performance hint comparison"
    )
    parser.add_argument(
        "--raw-only", action="store_true", help="only predict against a hand-written class"
    )
    parser.add_argument(
        "--actors", type=int, nargs="+", default=[1, 2], help="actors against hand-written"
    )
    args = parser.parse_args()
    cluster = None
    if args.nodes == 2:
        from ray.cluster_utils import Cluster

        cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 1})
        cluster.add_node(num_cpus=1)
        ray.init(address=cluster.address, log_to_driver=False, configure_logging=False)
    else:
        ray.init(
            address="local", num_cpus=2, include_dashboard=False, log_to_driver=False,
            configure_logging=False,
        )  # fmt: skip
    ray.data.DataContext.get_current().enable_progress_bars = False
    logging.getLogger("ray.data").setLevel(logging.WARNING)  # no lines per dataset run
    print(
        f"ray {ray.__version__}, {len(ray.nodes())} node(s), 2 CPUs for Ray, "
        f"{os.cpu_count()} on this machine; rows per second (higher is better)"
    )
    rng = np.random.default_rng(0)
    demo = Path(str(files("ortplug.data") / "demo.onnx"))
    mlp_batch = default_batch_size(BackendConfig(model=demo))
    squeezenet = LIGHT / "light_squeezenet.onnx"
    print("ortplug predict against a hand-written map_batches class (raw ONNX Runtime):")
    for actors in args.actors:
        mlp_rows = rng.standard_normal((args.rows, 8), np.float32)
        _report_raw("demo MLP (dynamic batch)", demo, mlp_rows, actors, args.rounds)
        del mlp_rows
        images = rng.random((args.squeezenet, 3, 224, 224), np.float32)
        _report_raw("light_squeezenet (static batch 1)", squeezenet, images, actors, args.rounds)
        del images
    if args.raw_only:
        ray.shutdown()
        return
    if args.nodes == 1:  # an actor of 2 CPUs fits one node of 2
        mlp_rows = rng.standard_normal((args.rows // 4, 8), np.float32)
        _report_hints("demo MLP", demo, mlp_rows, mlp_batch, args.rounds)
        del mlp_rows
        images = rng.random((args.squeezenet, 3, 224, 224), np.float32)
        _report_hints("light_squeezenet (static batch 1)", squeezenet, images, 1, args.rounds)
        del images
    if args.hints_only:
        ray.shutdown()
        return
    _report(
        "demo MLP", demo, rng.standard_normal((args.rows, 8), np.float32), mlp_batch, args.rounds
    )
    images = rng.random((args.squeezenet, 3, 224, 224), np.float32)
    _report("light_squeezenet (static batch 1)", squeezenet, images, 1, args.rounds)
    started = time.perf_counter()
    _blocks(images, squeezenet)  # dropped at once: only the time to store it counts
    put = len(images) / (time.perf_counter() - started)
    del images
    done, spent, _ = _ray_steady(
        _generated(args.squeezenet, (3, 224, 224), "data_0"), squeezenet, 1
    )
    fed = done / spent
    print(f"    1 actor, with read tasks      {fed:>12,.1f}   (inputs made while it runs)")
    print(f"    driver into the object store  {put:>12,.1f}   (588 KiB per row)")
    resnet = LIGHT / "light_resnet50.onnx"
    images = rng.random((args.resnet, 3, 224, 224), np.float32)
    _report("light_resnet50 (static batch 1)", resnet, images, 1, args.rounds)
    ray.shutdown()
    if cluster is not None:
        cluster.shutdown()


if __name__ == "__main__":
    main()
