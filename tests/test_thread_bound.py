"""One bound on thread counts wherever one enters (issue 24 items 10, 35 and the threads of 36):
flags, provider and session options, autotune records, plugin hooks, the usable-CPU fact."""

from __future__ import annotations

import json
import os

import models
import pytest
from ortplug import InMemoryCheckpoint, OnnxBackend, SessionOptionsConfig, configure, hookimpl
from ortplug.cli.main import main
from ortplug.errors import OptionError, OrtplugCacheWarning
from ortplug.providers.options import check_threads, max_threads
from ortplug.selection.autotune import TunedSetting, lookup, save
from ortplug.testing import make_plugin_host
from ortplug_cpu import CpuProvider

TOO_MANY = max_threads() + 1
ADD = InMemoryCheckpoint(models.add_model()).resolve()


def _exit_code(*argv: str) -> int:
    """``ortplug ARGV``'s exit status in this process (a usage error exits from the parser)."""
    try:
        return main(list(argv))
    except SystemExit as exc:
        return int(exc.code or 0)


def test_the_bound_follows_the_cpus_this_process_may_use() -> None:
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    assert max_threads() == max(64, 4 * cpus)
    assert check_threads("n", max_threads()) == max_threads()
    with pytest.raises(OptionError, match=rf"^n: expected a thread count from 1 to {TOO_MANY - 1}"):
        check_threads("n", TOO_MANY)


@pytest.mark.parametrize("field", ["intra_op_num_threads", "inter_op_num_threads"])
def test_session_options_refuse_more_threads_than_the_bound(field: str) -> None:
    assert getattr(SessionOptionsConfig(**{field: 0}), field) == 0  # ONNX Runtime's default
    with pytest.raises(OptionError, match=rf"{field}: .*got {TOO_MANY}$"):
        SessionOptionsConfig(**{field: TOO_MANY})
    with pytest.raises(OptionError, match=field):
        SessionOptionsConfig.from_dict({field: 100000})


def test_global_thread_pools_are_bounded_before_onnx_runtime_sees_them() -> None:
    with pytest.raises(OptionError, match="global_intra_op_num_threads: .*got 100000"):
        configure(global_intra_op_num_threads=100000)


def test_bench_threads_flag_is_a_usage_error_above_the_bound(tmp_path, capsys) -> None:
    model = models.write(tmp_path, "add.onnx", models.add_model())
    assert _exit_code("bench", str(model), "--threads", f"1,{TOO_MANY}") == 2
    err = capsys.readouterr().err
    assert "argument --threads: thread count: expected a thread count from 1 to" in err
    assert f"got {TOO_MANY}" in err


@pytest.mark.parametrize("threads", [str(TOO_MANY), "99999999999999999999"])
def test_cpu_threads_option_is_bounded_and_named(threads: str, capsys) -> None:
    with pytest.raises(OptionError, match=r"^threads: expected a thread count"):
        CpuProvider(threads=int(threads))
    assert _exit_code("run", "--providers", f"cpu:threads={threads}") == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("ortplug run: error: --providers: provider 'cpu': threads: expected")
    assert "incompatible function arguments" not in err


def test_an_autotune_record_above_the_bound_is_ignored_with_a_warning(plugin_host) -> None:
    host = plugin_host.host_capabilities()
    path = save(ADD, host, TunedSetting(("cpu",), 1, 1.2, 0.01))
    record = json.loads(path.read_text())
    record["setting"]["intra_op_num_threads"] = TOO_MANY
    path.write_text(json.dumps(record))
    with pytest.warns(OrtplugCacheWarning, match=f"intra_op_num_threads: .*got {TOO_MANY}"):
        assert lookup(ADD, host) is None
    with pytest.warns(OrtplugCacheWarning):
        backend = OnnxBackend.from_checkpoint(ADD, plugins=plugin_host)
    assert backend.session_options.intra_op_num_threads != TOO_MANY


class _GreedyThreads:
    """A plugin that asks for far more intra-op threads than the host could run."""

    @hookimpl
    def ortplug_adjust_session_options(self, session_options):
        return session_options.evolve(intra_op_num_threads=4096 + TOO_MANY)


def test_a_plugin_hook_asking_for_too_many_threads_is_a_plugin_failure() -> None:
    host = make_plugin_host(("greedy", _GreedyThreads()))
    with pytest.warns(Warning, match=r"'greedy'.*intra_op_num_threads: expected a thread count"):
        backend = OnnxBackend.from_checkpoint(ADD, providers=["cpu"], plugins=host)
    assert backend.session_options.intra_op_num_threads != 4096 + TOO_MANY
    assert backend.run({"a": [[1, 2, 3, 4]], "b": [[1, 1, 1, 1]]})["c"].tolist() == [[2, 3, 4, 5]]


def test_a_usable_cpus_override_above_the_bound_is_named_not_applied(monkeypatch, tmp_path, capsys):
    monkeypatch.setenv("ORTPLUG_OVERRIDE_CPU_USABLE_CPUS", "100000")
    monkeypatch.setenv("ORTPLUG_OVERRIDE_CPU_LOGICAL_CPUS", "200000")
    host = make_plugin_host(environ=dict(os.environ))
    with pytest.warns(Warning, match="ORTPLUG_OVERRIDE_CPU_USABLE_CPUS: expected a thread count"):
        backend = OnnxBackend.from_checkpoint(ADD, providers=["cpu"], plugins=host)
    assert backend.session_options.intra_op_num_threads is None  # ONNX Runtime's own default
    model = models.write(tmp_path, "add.onnx", models.add_model())
    assert _exit_code("bench", str(model), "--rounds", "1") == 1
    err = capsys.readouterr().err
    assert (
        "ORTPLUG_OVERRIDE_CPU_USABLE_CPUS (the default --threads): expected a thread count" in err
    )
