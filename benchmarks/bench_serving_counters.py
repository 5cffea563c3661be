"""What counting the served traffic costs the throughput hint (``ortplug_serve.served``).

    python benchmarks/bench_serving_counters.py [--rounds 6] [--seconds 0.5] [--callers 1,4,16]

The server counts each run under the lock it takes to hand a stream its requests
(``Server._began``, and the run's end in ``Server._release``). Two figures, on the shipped demo
model (a run of a few microseconds: the worst case for any cost per run):

* the time one count takes, for a run of 1 and of 8 requests, against the two counters the
  server kept before (requests and runs per device), in a loop with nothing else running;
* requests per second served by a throughput build at each count of concurrent callers, with
  the counting in place and with the server's methods swapped for their uncounting form
  (requests and runs per device only), in interleaved rounds on the same backend.
"""

from __future__ import annotations

import argparse
import time
from importlib.resources import files
from typing import Any

import numpy as np
from ortplug import LocalCheckpoint, OnnxBackend, ServingConfig
from ortplug_serve.callers import Served, drive
from ortplug_serve.server import Device, Server, Stream, _Request

GIVEN = ServingConfig(streams=2, threads_per_stream=1, max_batch=8, max_delay_ms=0)
COUNTED = (Server._began, Server._release)


def _began_uncounted(
    self: Server, device: Device, stream: Stream, batch: list[_Request], rows: int, full: int
) -> None:
    """What the server counted before: requests and runs per device."""
    device.requests += len(batch)
    device.runs += 1


def _release_uncounted(self: Server, stream: Stream) -> None:
    """The release as it was before: no time in runs."""
    with self._cond:
        stream.busy = False
        if self._queue:
            self._cond.notify_all()


def _counting(on: bool) -> None:
    began, release = COUNTED if on else (_began_uncounted, _release_uncounted)
    Server._began = began  # type: ignore[method-assign]
    Server._release = release  # type: ignore[method-assign]


def _per_count_ns(server: Server, batch: list[_Request], loops: int) -> dict[str, float]:
    """Nanoseconds per count of a run of ``batch``: counted, and as before."""
    device = server.devices[0]
    stream = device.streams[0]
    out = {}
    for name, count in (("counted", COUNTED[0]), ("before", _began_uncounted)):
        best = float("inf")
        for _ in range(5):
            began = time.perf_counter()
            for _ in range(loops):
                count(server, device, stream, batch, len(batch), 8)
            best = min(best, time.perf_counter() - began)
        out[name] = best / loops * 1e9
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=6, help="interleaved rounds")
    parser.add_argument("--seconds", type=float, default=0.5, help="seconds per side and round")
    parser.add_argument("--callers", default="1,4,16", help="caller counts, e.g. 1,4,16")
    args = parser.parse_args()
    checkpoint = LocalCheckpoint(str(files("ortplug.data") / "demo.onnx")).resolve()
    x = np.ones((1, 8), np.float32)
    with OnnxBackend.from_checkpoint(
        checkpoint, performance_hint="throughput", serving=GIVEN
    ) as backend:
        server = backend.dispatcher
        assert isinstance(server, Server)
        batching = server._batching
        for size in (1, 8):
            batch = [_Request({"x": x}, ["y"], None, batching) for _ in range(size)]
            ns = _per_count_ns(server, batch, 20000)
            print(
                f"count of a run of {size} request(s): {ns['counted']:.0f} ns "
                f"(before: {ns['before']:.0f} ns, +{ns['counted'] - ns['before']:.0f} ns)"
            )

        def run() -> Any:
            return backend.run({"x": x})

        for callers in [int(c) for c in args.callers.split(",")]:
            parts: dict[bool, list[Served]] = {True: [], False: []}
            for index in range(args.rounds):
                for on in (True, False) if index % 2 == 0 else (False, True):
                    _counting(on)
                    parts[on].append(drive(run, callers, args.seconds))
            _counting(True)
            rates = {on: Served.pooled(got).requests_per_s for on, got in parts.items()}
            print(
                f"{callers:>3} callers: counted {rates[True]:.0f} req/s, uncounted "
                f"{rates[False]:.0f} req/s, ratio {rates[True] / rates[False]:.3f}"
            )
    print(f"demo model, {GIVEN}, {args.rounds} interleaved rounds of {args.seconds:g} s")


if __name__ == "__main__":
    main()
