"""The ``cpu`` plugin's hook implementations (entry point ``cpu = "ortplug_cpu.plugin"``)."""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence

from ortplug.plugins import (
    CheckpointMetadata,
    DoctorCheck,
    HostCapabilities,
    ProviderConfig,
    ProviderOffer,
    SessionOptionsConfig,
    check_threads,
    fact_label,
    hookimpl,
)

from .config import CpuProvider

__all__ = [
    "INT8_ISA",
    "INT8_PREFERENCE",
    "ortplug_adjust_session_options",
    "ortplug_doctor_checks",
    "ortplug_offer_providers",
]

_SPINNING_KEY = "session.intra_op.allow_spinning"

#: ISA extensions with int8 dot products (x86 VNNI and AMX, Arm dotprod and i8mm): where an int8
#: variant beats fp32 (3.6x on an MLP, 1.4-1.9x on ResNet-50 with VNNI: benchmarks/bench_variants.py).
INT8_ISA = frozenset({"avx512_vnni", "avx_vnni", "amx", "amx_int8", "dotprod", "i8mm"})
#: An int8 variant on such a CPU: ahead of the CPU on the reference weights (preference 0). A
#: preference orders this kind's offers only: the CPU kind is always last, after every accelerator.
INT8_PREFERENCE = 1


@hookimpl
def ortplug_offer_providers(
    metadata: CheckpointMetadata, host: HostCapabilities
) -> Iterable[ProviderOffer]:
    """CPU runs every checkpoint (the fallback at the end of every chain); int8 variants with VNNI/AMX."""
    reason = "runs every ONNX model; the fallback at the end of every chain"
    if metadata.precision == "int8":
        reason = "int8 checkpoint: ONNX Runtime's CPU integer kernels run quantized graphs"
    yield ProviderOffer(config=CpuProvider(), preference=0, reason=reason)
    flags = sorted(INT8_ISA.intersection(host.fact("cpu", "isa_flags") or ()))
    if flags:
        for variant in metadata.variants_for(CpuProvider.ort_name, "int8"):
            yield ProviderOffer(
                config=CpuProvider(),
                preference=INT8_PREFERENCE,
                reason=f"int8 variant on a CPU with int8 dot products ({', '.join(flags)})",
                variant=variant.name,
            )


def _default_threads(host: HostCapabilities) -> int | None:
    """The usable CPU count when the process is limited to fewer CPUs than the host has.

    A count above ortplug's thread bound (``ORTPLUG_OVERRIDE_CPU_USABLE_CPUS=100000``) is an
    error naming the fact, reported as this plugin's failure: the build goes on without it.
    """
    usable = host.fact("cpu", "usable_cpus")
    logical = host.fact("cpu", "logical_cpus")
    if isinstance(usable, int) and isinstance(logical, int) and 0 < usable < logical:
        return check_threads(fact_label("cpu", "usable_cpus"), usable)
    return None


@hookimpl
def ortplug_adjust_session_options(
    session_options: SessionOptionsConfig,
    chain: Sequence[ProviderConfig],
    host: HostCapabilities,
) -> SessionOptionsConfig | None:
    """Apply ``CpuProvider`` fields and container-aware thread counts to what the user left unset."""
    cpu = next((c for c in chain if isinstance(c, CpuProvider)), CpuProvider())
    updates: dict[str, object] = {}
    if (
        session_options.intra_op_num_threads is None
        and "ORT_INTRA_OP_NUM_THREADS" not in os.environ
    ):
        threads = cpu.threads or _default_threads(host)
        if threads:
            updates["intra_op_num_threads"] = threads
    if session_options.enable_cpu_mem_arena is None and cpu.use_arena is not None:
        updates["enable_cpu_mem_arena"] = cpu.use_arena
    options = session_options.evolve(**updates) if updates else session_options
    if cpu.allow_spinning is not None:
        options = options.with_config_entries({_SPINNING_KEY: "1" if cpu.allow_spinning else "0"})
    return options if options is not session_options else None


_THREAD_VARIABLES = ("ORT_INTRA_OP_NUM_THREADS", "OMP_NUM_THREADS")


@hookimpl
def ortplug_doctor_checks(host: HostCapabilities) -> Iterable[DoctorCheck]:
    """Thread settings wider than the CPUs this process may use (cgroup quota, affinity)."""
    usable = host.fact("cpu", "usable_cpus")
    if not isinstance(usable, int):
        return
    quota = host.fact("cpu", "cgroup_cpu_quota")
    limit = f"{usable} usable CPUs" + (f" (cgroup quota {quota:g})" if quota else "")
    wide = []
    for variable in _THREAD_VARIABLES:
        value = os.environ.get(variable, "")
        if value.isdigit() and int(value) > usable:
            wide.append(f"{variable}={value}")
    if wide:
        yield DoctorCheck(
            "cpu threads",
            False,
            f"{', '.join(wide)} is wider than the {limit}: threads oversubscribe and spin",
            f"unset it, or set it to {usable} or less (ortplug sizes intra-op threads itself)",
        )
    else:
        yield DoctorCheck("cpu threads", True, limit)
