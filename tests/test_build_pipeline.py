"""The build pipeline: candidates are decided purely, a plugin prepares only what is built,
outcomes are an enum, and warnings point at the user's call."""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import ClassVar

import attrs
import models
from ortplug import LocalCheckpoint, OnnxBackend, ProviderType, Verification, hookimpl
from ortplug.pipeline.build_pipeline import BuildPipeline, CandidateOutcome
from ortplug.selection import ProviderSelection
from ortplug.testing import make_plugin_host
from ortplug_cpu import CpuProvider


@attrs.frozen
class CountedProvider:
    """Names ONNX Runtime's CUDA provider, which the CPU wheel here does not have."""

    kind: ClassVar[str] = "counted"

    def to_ort(self) -> tuple[str, dict[str, str]]:
        return "CUDAExecutionProvider", {}


class CountingPlugin:
    """Owns ``counted`` and counts its ``ortplug_prepare_provider`` calls."""

    def __init__(self) -> None:
        self.prepared = 0

    @hookimpl
    def ortplug_provider_types(self):
        yield ProviderType("counted", "CUDAExecutionProvider", CountedProvider)

    @hookimpl
    def ortplug_prepare_provider(self, config):
        if config.kind == "counted":
            self.prepared += 1


@attrs.frozen
class _CpuFirst:
    """A policy whose first choice is the CPU reference, the counted accelerator after it."""

    def choose(self, request: object) -> ProviderSelection:
        later = ProviderSelection((CountedProvider(), CpuProvider()), ("later", "later"))
        return ProviderSelection((CpuProvider(),), ("first",), alternatives=(later,))


def _checkpoint(tmp_path: Path):
    return LocalCheckpoint(models.write(tmp_path, "add.onnx", models.add_model([2]))).resolve()


def test_a_candidate_never_built_is_never_prepared(tmp_path: Path) -> None:
    """The first choice serves: the plugin of a later one is never asked to prepare it (every
    alternative was prepared up front, running each plugin's hook for nothing)."""
    counting = CountingPlugin()
    plugins = make_plugin_host(("counting", counting))
    backend = OnnxBackend.from_checkpoint(
        _checkpoint(tmp_path),
        policy=_CpuFirst(),
        plugins=plugins,
        verify=Verification(measure=False),
    )
    assert backend.providers == ("CPUExecutionProvider",)
    assert [c.chain for c in backend.report.candidates] == [("cpu",), ("counted", "cpu")]
    assert counting.prepared == 0


def test_the_candidates_are_pure_and_each_outcome_is_an_enum(tmp_path: Path) -> None:
    counting = CountingPlugin()
    plugins = make_plugin_host(("counting", counting))
    pipeline = BuildPipeline(_checkpoint(tmp_path), measure=False)
    listed = pipeline.candidates(policy=_CpuFirst(), plugins=plugins)
    assert [c.text for c in listed] == [
        "the reference weights on [cpu]",
        "the reference weights on [counted, cpu]",
    ]
    assert counting.prepared == 0
    result = pipeline.run(listed)
    assert result.outcomes == (CandidateOutcome.REFERENCE, CandidateOutcome.NOT_TRIED)
    assert result.plan.chain == (CpuProvider(),)
    assert counting.prepared == 0


def test_a_rejected_candidates_warning_points_at_the_callers_line(tmp_path: Path) -> None:
    """The warning names this file, whatever the depth of the stage that warns (a fixed
    stacklevel pointed inside ortplug on some paths)."""
    plugins = make_plugin_host(("counting", CountingPlugin()))
    later = ProviderSelection((CpuProvider(),), ("after",))

    @attrs.frozen
    class _CountedFirst:
        def choose(self, request: object) -> ProviderSelection:
            return ProviderSelection(
                (CountedProvider(), CpuProvider()), ("a", "b"), alternatives=(later,)
            )

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        backend = OnnxBackend.from_checkpoint(
            _checkpoint(tmp_path),
            policy=_CountedFirst(),
            plugins=plugins,
            verify=Verification(measure=False, min_accelerator_share=0.5),
        )
    assert backend.providers == ("CPUExecutionProvider",)
    assert caught, "a rejected candidate warns"
    assert {Path(w.filename).name for w in caught} == {Path(__file__).name}
