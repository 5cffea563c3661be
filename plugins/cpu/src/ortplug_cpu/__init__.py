"""ortplug-cpu: ONNX Runtime's CPU execution provider as an ortplug plugin."""

from .config import CpuProvider
from .probes import cgroup_cpu_quota, isa_flags_from_cpuinfo, usable_cpus

__all__ = ["CpuProvider", "cgroup_cpu_quota", "isa_flags_from_cpuinfo", "usable_cpus"]
