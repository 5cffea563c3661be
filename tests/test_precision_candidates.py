"""Precision is a candidate: a provider's reduced-precision switch, offered with ``precision=``.

A test plugin offers the CPU provider (real ONNX Runtime sessions) with a pretend
reduced-precision switch, as a third party's plugin would offer its own; the policy
ranks it as its own candidate, the plan and the verdict carry its precision, and it
is verified at that precision's tolerance before it serves.
"""

from __future__ import annotations

import models
import pytest
from ortplug import (
    CheckpointMetadata,
    DefaultProviderPolicy,
    InMemoryCheckpoint,
    OnnxBackend,
    ProviderOffer,
    Tolerance,
    Verification,
    hookimpl,
)
from ortplug.checkpoint.variants import COMPUTE_PRECISIONS, default_tolerance
from ortplug.errors import OptionError
from ortplug.testing import make_host, make_plugin_host
from ortplug_cpu import CpuProvider

REDUCED = CpuProvider(use_arena=False)  # a config the switch makes: distinct from the exact one


class ReducedSwitch:
    """Offers the CPU provider with a pretend bf16 switch on, ahead of the exact CPU offer."""

    def __init__(self, precision: str = "bf16", preference: int = 10) -> None:
        self.precision = precision
        self.preference = preference

    @hookimpl
    def ortplug_offer_providers(self, metadata):
        yield ProviderOffer(
            REDUCED, self.preference, "the switch: faster, less exact", precision=self.precision
        )


def _plugins(switch: ReducedSwitch | None = None):
    return make_plugin_host(("switch", switch or ReducedSwitch()))


def _checkpoint():
    return InMemoryCheckpoint(models.matmul_model()).resolve()


def test_an_offer_names_a_precision_ortplug_knows() -> None:
    assert COMPUTE_PRECISIONS == ("fp32", "fp16", "bf16", "int8", "tf32")
    assert default_tolerance("tf32") == Tolerance(rtol=1e-2, atol=1e-2)
    with pytest.raises(OptionError, match=r"ProviderOffer.precision: expected None or one of fp32"):
        ProviderOffer(REDUCED, 1, "x", precision="fp8")


def test_a_reduced_precision_offer_is_its_own_candidate() -> None:
    metadata = CheckpointMetadata(input_names=["x"], output_names=["y"])
    selection = DefaultProviderPolicy(_plugins()).explain(metadata, make_host())
    assert (selection.precision, list(selection.chain)) == ("bf16", [REDUCED])
    assert selection.describe_candidate() == "the reference weights at bf16"
    assert selection.reasons == ("the switch: faster, less exact [switch]",)
    (exact,) = selection.alternatives
    assert (exact.precision, list(exact.chain)) == (None, [CpuProvider()])


def test_an_offer_at_the_weights_own_precision_is_the_reference() -> None:
    metadata = CheckpointMetadata(input_names=["x"], output_names=["y"], precision="bf16")
    selection = DefaultProviderPolicy(_plugins()).explain(metadata, make_host())
    assert selection.precision is None and selection.alternatives == ()
    assert list(selection.chain) == [REDUCED]  # one chain: the higher preference of the kind


def test_the_reduced_candidate_is_verified_at_its_precisions_tolerance(monkeypatch) -> None:
    monkeypatch.setenv(
        "ORTPLUG_REAL_TRAFFIC_CHECKS", "0"
    )  # served once verified (by default it shadows the CPU first)
    with OnnxBackend.from_checkpoint(
        _checkpoint(), plugins=_plugins(), verify=Verification(measure=False)
    ) as backend:
        verdict = backend.report.verification  # verify=None: a reduced precision is checked
        assert verdict is not None and verdict.passed
        assert verdict.precision == "bf16" and verdict.tolerance == default_tolerance("bf16")
        report = backend.report
        assert report.precision == "bf16" and report.to_dict()["precision"] == "bf16"
        assert "precision  bf16 (the lead provider's reduced-precision mode)" in report.lines()
        assert "verified the reference weights (bf16) on CPUExecutionProvider" in verdict.describe()


def test_verify_false_never_uses_an_unverified_reduced_precision() -> None:
    with OnnxBackend.from_checkpoint(_checkpoint(), plugins=_plugins(), verify=False) as backend:
        assert backend.report.precision is None and backend.report.verification is None


def test_the_tolerance_is_the_reduced_precisions_unless_one_is_given() -> None:
    from ortplug.verification.verifier import Verifier

    checkpoint = _checkpoint()
    verifier = Verifier(checkpoint, _plugins(), None)
    assert verifier.tolerance_for(checkpoint, "tf32") == default_tolerance("tf32")
    assert verifier.tolerance_for(checkpoint) == default_tolerance("fp32")
    given = Verifier(checkpoint, _plugins(), Tolerance(0, 0))
    assert given.tolerance_for(checkpoint, "bf16") == Tolerance(0, 0)  # the caller's wins


def test_ortplug_verify_checks_a_reduced_candidate_instead_of_calling_it_the_reference() -> None:
    from ortplug.cli.choice_rows import check_row
    from ortplug.session.plan import plan_session
    from ortplug.verification.verifier import Verifier

    checkpoint, plugins = _checkpoint(), _plugins()
    plan = plan_session(checkpoint, None, None, None, plugins)
    assert plan.precision == "bf16" and not plan.on_reference
    row = check_row(Verifier(checkpoint, plugins, None), checkpoint, plan)
    assert (row["status"], row["precision"]) == ("pass", "bf16")
    assert row["verdict"]["tolerance"] == default_tolerance("bf16").to_dict()
