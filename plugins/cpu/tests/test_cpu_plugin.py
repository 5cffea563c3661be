"""The CPU plugin: probe parsers on given host files, thread defaults, and the real probe."""

from __future__ import annotations

import attrs
import pytest
from ortplug import CheckpointMetadata, SessionOptionsConfig
from ortplug_cpu import CpuProvider, cgroup_cpu_quota, isa_flags_from_cpuinfo, usable_cpus
from ortplug_cpu.probes import detect_cpu

META = CheckpointMetadata(input_names=["x"], output_names=["y"])

X86 = "processor\t: 0\nflags\t\t: fpu sse4_2 avx avx2 fma avx512f avx512_vnni amx_tile amx_int8\n"
ARM = "processor\t: 0\nFeatures\t: fp asimd asimddp sve sve2 i8mm bf16\n"


def test_isa_flags_from_x86_cpuinfo() -> None:
    assert isa_flags_from_cpuinfo(X86) == (
        "amx", "amx_int8", "avx", "avx2", "avx512_vnni", "avx512f", "fma", "sse4_2",
    )  # fmt: skip


def test_isa_flags_from_arm_cpuinfo() -> None:
    assert isa_flags_from_cpuinfo(ARM) == ("bf16", "dotprod", "i8mm", "neon", "sve", "sve2")
    assert isa_flags_from_cpuinfo("") == ()


@pytest.mark.parametrize(
    ("cpu_max", "quota", "period", "expected"),
    [
        ("max 100000\n", None, None, None),
        ("150000 100000\n", None, None, 1.5),
        (None, "200000", "100000", 2.0),
        (None, "-1", "100000", None),
        ("garbage", None, None, None),
        (None, None, None, None),
    ],
)
def test_cgroup_quota_v1_and_v2(cpu_max, quota, period, expected) -> None:
    assert cgroup_cpu_quota(cpu_max, quota, period) == expected


@pytest.mark.parametrize(
    ("logical", "affinity", "quota", "expected"),
    [(64, None, None, 64), (64, 8, None, 8), (64, 64, 1.5, 2), (64, 4, 16.0, 4), (4, 4, 0.2, 1)],
)
def test_usable_cpus_is_the_tightest_limit(logical, affinity, quota, expected) -> None:
    assert usable_cpus(logical, affinity, quota) == expected


def test_real_probe_reports_sane_counts() -> None:
    facts = detect_cpu()
    assert 1 <= facts["usable_cpus"] <= facts["logical_cpus"]
    assert all(isinstance(flag, str) for flag in facts["isa_flags"])


def test_container_limited_host_gets_usable_thread_count(
    plugin_host, cpu_host, monkeypatch
) -> None:
    monkeypatch.delenv("ORT_INTRA_OP_NUM_THREADS", raising=False)
    limited = attrs.evolve(cpu_host, facts={"cpu": {"logical_cpus": 64, "usable_cpus": 2}})
    options = plugin_host.adjust_session_options(
        SessionOptionsConfig(), [CpuProvider()], META, limited
    )
    assert options.intra_op_num_threads == 2
    # an unconstrained host keeps ONNX Runtime's own default
    options = plugin_host.adjust_session_options(
        SessionOptionsConfig(), [CpuProvider()], META, cpu_host
    )
    assert options.intra_op_num_threads is None


def test_user_settings_win_over_plugin_defaults(plugin_host, cpu_host, monkeypatch) -> None:
    monkeypatch.delenv("ORT_INTRA_OP_NUM_THREADS", raising=False)
    limited = attrs.evolve(cpu_host, facts={"cpu": {"logical_cpus": 64, "usable_cpus": 2}})
    chosen = SessionOptionsConfig(intra_op_num_threads=6, enable_cpu_mem_arena=True)
    options = plugin_host.adjust_session_options(
        chosen, [CpuProvider(threads=3, use_arena=False)], META, limited
    )
    assert (options.intra_op_num_threads, options.enable_cpu_mem_arena) == (6, True)
    monkeypatch.setenv("ORT_INTRA_OP_NUM_THREADS", "5")
    options = plugin_host.adjust_session_options(
        SessionOptionsConfig(), [CpuProvider()], META, limited
    )
    assert options.intra_op_num_threads is None  # ONNX Runtime reads the variable itself


def test_provider_fields_reach_the_session_options(plugin_host, cpu_host) -> None:
    import onnxruntime as ort

    options = plugin_host.adjust_session_options(
        SessionOptionsConfig(), [CpuProvider(threads=3, use_arena=False, allow_spinning=False)],
        META, cpu_host,
    )  # fmt: skip
    so = options.to_ort(ort)
    assert so.intra_op_num_threads == 3
    assert so.enable_cpu_mem_arena is False
    assert so.get_session_config_entry("session.intra_op.allow_spinning") == "0"
