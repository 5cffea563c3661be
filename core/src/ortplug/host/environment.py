"""``configure``: ONNX Runtime's process-wide settings (default logger, global thread pools, whose
sizes are set once per process)."""

from __future__ import annotations

import threading

import attrs

from ..errors import OptionError
from ..providers.options import check_threads
from .runtime import require_onnxruntime

__all__ = ["GlobalThreadPools", "configure", "global_thread_pools"]

_lock = threading.Lock()
_pools: GlobalThreadPools | None = None


@attrs.frozen
class GlobalThreadPools:
    """The sizes the process-wide pools were created with (0 = ONNX Runtime's default)."""

    intra_op_num_threads: int
    inter_op_num_threads: int


def configure(
    *,
    log_severity_level: int | None = None,
    global_intra_op_num_threads: int | None = None,
    global_inter_op_num_threads: int | None = None,
) -> None:
    """Set ONNX Runtime's default log severity (0 verbose ... 4 fatal) and/or create the global
    thread pools: once per process (other sizes later are an error; sessions use them only with
    ``SessionOptionsConfig(use_per_session_threads=False)``)."""
    ort = require_onnxruntime()
    if log_severity_level is not None:
        if log_severity_level not in (0, 1, 2, 3, 4):
            raise OptionError(
                f"log_severity_level: expected 0 (verbose) to 4 (fatal), got {log_severity_level!r}"
            )
        ort.set_default_logger_severity(log_severity_level)
    if global_intra_op_num_threads is None and global_inter_op_num_threads is None:
        return
    wanted = GlobalThreadPools(
        check_threads("global_intra_op_num_threads", global_intra_op_num_threads or 0, minimum=0),
        check_threads("global_inter_op_num_threads", global_inter_op_num_threads or 0, minimum=0),
    )
    global _pools
    with _lock:
        if _pools is not None:
            if _pools != wanted:
                raise RuntimeError(
                    f"ONNX Runtime's global thread pools already exist with intra="
                    f"{_pools.intra_op_num_threads}, inter={_pools.inter_op_num_threads}; they "
                    "can be sized once per process (call configure() once, at start-up)"
                )
            return
        ort.set_global_thread_pool_sizes(wanted.intra_op_num_threads, wanted.inter_op_num_threads)
        _pools = wanted


def global_thread_pools() -> GlobalThreadPools | None:
    """The global pools created by :func:`configure`, or ``None``."""
    return _pools
