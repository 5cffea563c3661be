"""The run forms a dispatcher serves (``run_into``, ``run_async``, ``arun``) on its queue, each
keeping the latency form's contract."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from ..errors import OptionError
from ..session.async_runs import RunCallback
from ..session.feeds import check_into_outputs

if TYPE_CHECKING:
    from concurrent.futures import Future  # its import brings logging: a latency run needs none

    from ..session.introspection import ValueInfo

__all__ = ["arun_on", "callback_on", "copy_into"]


def copy_into(
    run: Callable[[dict[str, Any], list[str]], Mapping[str, Any]],
    feed: dict[str, Any],
    outputs: Mapping[str, np.ndarray],
    infos: tuple[Sequence[ValueInfo], Sequence[ValueInfo]],
) -> Mapping[str, np.ndarray]:
    """``run_into`` through a dispatcher: run the named outputs, then copy into the arrays."""
    targets = check_into_outputs(outputs, infos[1], infos[0], feed)
    results = run(feed, list(targets))
    for name, array in targets.items():
        result = np.asarray(results[name])
        if result.shape != array.shape:
            raise OptionError(
                f"run_into: output {name!r}: the run computed shape {result.shape}, "
                f"got an array of shape {array.shape}"
            )
        np.copyto(array, result)
    return outputs


def callback_on(
    future: Future[list[Any]],
    names: Sequence[str],
    callback: RunCallback,
    explained: Callable[[BaseException], BaseException],
    ended: Callable[[], None],
) -> None:
    """Call ``callback`` with ``future``'s outputs by name (or its explained error) when it
    settles, on the thread that settles it; ``ended`` first. A cancelled request calls nothing."""

    def settled(done: Future[list[Any]]) -> None:
        ended()
        if done.cancelled():  # cancelled by the server closing: its callers were told
            return
        error = done.exception()
        if error is not None:
            callback(None, explained(error))
        else:
            callback(dict(zip(names, done.result())), None)

    future.add_done_callback(settled)


async def arun_on(
    future: Future[list[Any]],
    names: Sequence[str],
    explained: Callable[[BaseException], BaseException],
    ended: Callable[[], None],
) -> Mapping[str, Any]:
    """``await`` ``future``'s outputs by name; a cancelled (or timed-out) await cancels it."""
    import asyncio

    try:
        results = await asyncio.wrap_future(future)
    except Exception as exc:
        raise explained(exc) from exc
    finally:
        ended()
    return dict(zip(names, results))
