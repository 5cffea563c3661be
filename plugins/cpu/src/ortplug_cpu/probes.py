"""Host probes of the CPU: logical CPUs, CPUs usable by this process, ISA flags.

The parsers are pure functions of file contents so tests can feed them any host.
"""

from __future__ import annotations

import math
import os
import platform
import sys
from collections.abc import Iterable
from pathlib import Path

__all__ = [
    "cgroup_cpu_quota",
    "detect_cpu",
    "isa_flags_from_cpuinfo",
    "usable_cpus",
]

# /proc/cpuinfo flag -> the name ortplug reports.
_X86_FLAGS = {
    "sse4_2": "sse4_2",
    "avx": "avx",
    "avx2": "avx2",
    "fma": "fma",
    "f16c": "f16c",
    "avx512f": "avx512f",
    "avx512bw": "avx512bw",
    "avx512_vnni": "avx512_vnni",
    "avx512_bf16": "avx512_bf16",
    "avx512_fp16": "avx512_fp16",
    "avx_vnni": "avx_vnni",
    "amx_tile": "amx",
    "amx_bf16": "amx_bf16",
    "amx_int8": "amx_int8",
}
_ARM_FLAGS = {
    "asimd": "neon",
    "asimddp": "dotprod",
    "asimdhp": "fp16",
    "i8mm": "i8mm",
    "bf16": "bf16",
    "sve": "sve",
    "sve2": "sve2",
    "sme": "sme",
}


def isa_flags_from_cpuinfo(cpuinfo: str) -> tuple[str, ...]:
    """The ISA extensions inference kernels care about, from ``/proc/cpuinfo`` text."""
    for line in cpuinfo.splitlines():
        key, _, value = line.partition(":")
        key = key.strip().lower()
        if key in ("flags", "features"):
            table = _X86_FLAGS if key == "flags" else _ARM_FLAGS
            present = set(value.split())
            return tuple(sorted({name for flag, name in table.items() if flag in present}))
    return ()


def cgroup_cpu_quota(
    cpu_max: str | None, cfs_quota: str | None, cfs_period: str | None
) -> float | None:
    """CPUs allowed by the cgroup: v2 ``cpu.max`` ("max 100000" or "150000 100000") or v1 files."""
    try:
        if cpu_max is not None:
            quota, _, period = cpu_max.strip().partition(" ")
            if quota != "max" and period:
                return int(quota) / int(period)
            return None
        if cfs_quota is not None and cfs_period is not None:
            quota_us = int(cfs_quota.strip())
            if quota_us > 0:
                return quota_us / int(cfs_period.strip())
    except ValueError:
        return None
    return None


def usable_cpus(logical: int, affinity: int | None, quota: float | None) -> int:
    """CPUs this process can really use: the smallest of host, affinity and ceil(quota)."""
    candidates = [logical]
    if affinity:
        candidates.append(affinity)
    if quota:
        candidates.append(max(1, math.ceil(quota)))
    return max(1, min(candidates))


def _read(path: str) -> str | None:
    try:
        return Path(path).read_text()
    except OSError:
        return None


def _own_cgroup_dir(proc_self_cgroup: str | None) -> str:
    """The v2 cgroup directory of this process ("0::/path" line), else the root."""
    for line in (proc_self_cgroup or "").splitlines():
        if line.startswith("0::"):
            return "/sys/fs/cgroup" + line[3:].strip().rstrip("/")
    return "/sys/fs/cgroup"


def _first(values: Iterable[str | None]) -> str | None:
    return next((v for v in values if v is not None), None)


def detect_cpu() -> dict[str, object]:
    """Read this host's CPU facts (Linux files, affinity); never raises for a missing file."""
    logical = os.cpu_count() or 1
    affinity = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None
    quota = None
    isa: tuple[str, ...] = ()
    if sys.platform.startswith("linux"):
        own = _own_cgroup_dir(_read("/proc/self/cgroup"))
        quota = cgroup_cpu_quota(
            _first(_read(d + "/cpu.max") for d in (own, "/sys/fs/cgroup")),
            _read("/sys/fs/cgroup/cpu/cpu.cfs_quota_us"),
            _read("/sys/fs/cgroup/cpu/cpu.cfs_period_us"),
        )
        isa = isa_flags_from_cpuinfo(_read("/proc/cpuinfo") or "")
    elif sys.platform == "darwin" and platform.machine() == "arm64":
        isa = ("neon",)
    return {
        "logical_cpus": logical,
        "affinity_cpus": affinity,
        "cgroup_cpu_quota": quota,
        "usable_cpus": usable_cpus(logical, affinity, quota),
        "isa_flags": list(isa),
    }
