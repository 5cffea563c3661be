"""Autotune records: the fastest chain and thread count ``ortplug bench --save`` measured for a
model, one per model fingerprint, ONNX Runtime version and host under ``<cache>/autotune/``."""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import attrs

from ..cache.root import cache_key
from ..cache.store import RecordStore, read_json
from ..checkpoint import ResolvedCheckpoint
from ..errors import OptionError
from ..host.capabilities import HostCapabilities
from ..plugin_host.manager import PluginHost
from ..providers.options import check_threads
from .protocol import ProviderSelection

__all__ = [
    "RECORD_FOLDER",
    "RECORD_SCHEMA",
    "TunedSetting",
    "apply_tuning",
    "candidate_labels",
    "check_can_save",
    "choice_label",
    "host_signature",
    "lookup",
    "measured_here",
    "save",
    "stale_records",
]

RECORD_SCHEMA = 1
#: The folder under the cache root that holds the records.
RECORD_FOLDER = "autotune"


def _kinds(value: Iterable[str]) -> tuple[str, ...]:
    return tuple(value)


#: An outcome kept in a record is cut to this length (a verdict can name every output).
_MAX_OUTCOME_CHARS = 2000


def _outcomes(value: Iterable[str]) -> tuple[str, ...]:
    """Each outcome, cut to what a record may hold (a longer one made the record unreadable)."""
    limit = _MAX_OUTCOME_CHARS
    return tuple(o if len(o) <= limit else o[: limit - 3] + "..." for o in value)


@attrs.frozen
class TunedSetting:
    """The winner of a benchmark: provider kinds in order, intra-op threads, and by how much it won."""

    chain: tuple[str, ...] = attrs.field(converter=_kinds)
    intra_op_num_threads: int | None
    speedup: float  # median time of the policy's default divided by the winner's
    median_ms: float
    #: The precision variant the chain runs (``None``: the reference weights).
    variant: str | None = None
    #: The candidates the winner was measured against (:func:`candidate_labels`; empty from
    #: ``bench --save``): a record made before a provider was installed is not used.
    offered: tuple[str, ...] = attrs.field(default=(), converter=_kinds)
    #: The reduced-precision mode the chain's lead runs (``None``: none).
    precision: str | None = None
    #: What became of each of ``offered`` on that build (``"rejected: ..."``), in its order.
    outcomes: tuple[str, ...] = attrs.field(default=(), converter=_outcomes)

    def describe(self) -> str:
        """One line for reasons and reports."""
        threads = (
            "" if self.intra_op_num_threads is None else f", {self.intra_op_num_threads} threads"
        )
        weights = f" on variant {self.variant}" if self.variant else ""
        if self.offered:
            return (
                f"measured on this model's first build here: {','.join(self.chain)}{weights} was "
                f"the fastest verified of {len(self.offered)} choices ({self.speedup:.2f}x the "
                "CPU reference's speed)"
            )
        return (
            f"autotuned by `ortplug bench --save`: {','.join(self.chain)}{weights}{threads} ran "
            f"{self.speedup:.2f}x faster than the policy's default here"
        )


def candidate_labels(selection: ProviderSelection) -> tuple[str, ...]:
    """``int8::cpu``, ``:bf16:openvino,cpu``: each of the policy's choices (variant, precision
    mode, chain kinds)."""
    return tuple(
        choice_label(choice.variant, choice.precision, [c.kind for c in choice.chain])
        for choice in (selection, *selection.alternatives)
    )


def choice_label(variant: str | None, precision: str | None, kinds: Iterable[str]) -> str:
    """One choice as :func:`candidate_labels` names it."""
    return f"{variant or ''}:{precision or ''}:{','.join(kinds)}"


def host_signature(host: HostCapabilities) -> dict[str, Any]:
    """What makes a measurement valid on another day: platform, providers, usable CPUs, ISA."""
    return {
        "platform": host.platform,
        "machine": host.machine,
        "providers": sorted(host.available_providers),
        "usable_cpus": host.fact("cpu", "usable_cpus"),
        "isa": host.fact("cpu", "isa_flags"),
    }


def _key(checkpoint: ResolvedCheckpoint, host: HostCapabilities) -> str:
    return cache_key("autotune", checkpoint.fingerprint(), host.ort_version, host_signature(host))


def measured_here(checkpoint: ResolvedCheckpoint, host: HostCapabilities) -> dict[str, Any]:
    """What a record measured for a model on this host begins with (autotune and serving records):
    the model's fingerprint and file (``ortplug cache`` marks it stale once gone), the runtime
    and the host signature."""
    weights = checkpoint.weights_path
    return {
        "model": checkpoint.fingerprint(),
        "model_path": str(weights.resolve()) if weights else None,
        "ort_version": host.ort_version,
        "host": host_signature(host),
    }


def check_can_save() -> Path:
    """Raise :class:`~ortplug.errors.CacheError` now (with the fix) if a record could not be saved.

    ``ortplug bench --save`` calls it before benchmarking, not after.
    """
    return _STORE.check_writable()


def save(checkpoint: ResolvedCheckpoint, host: HostCapabilities, setting: TunedSetting) -> Path:
    """Write the record for this model on this host atomically; returns its path."""
    record = {**measured_here(checkpoint, host), "setting": attrs.asdict(setting)}
    return _STORE.save(_key(checkpoint, host), record)


#: Bounds of a record: it is a few hundred bytes of flat JSON written by ``save``.
_MAX_RECORD_BYTES = 64 * 1024
_MAX_CHAIN = 16
_MAX_OFFERED = 64
_MAX_KIND_CHARS = 64
_SPEEDUP_RANGE = (1e-6, 1e6)
_MEDIAN_MS_RANGE = (0.0, 1e9)
_STORE = RecordStore(
    RECORD_FOLDER,
    RECORD_SCHEMA,
    "autotune record",
    "delete it or run `ortplug bench MODEL --save` again",
    max_bytes=_MAX_RECORD_BYTES,
    constants=False,
)


def _shown(value: object) -> str:
    """``repr`` cut short: a corrupt record can hold a 400-digit number or a huge string."""
    try:
        text = repr(value)
    except RecursionError:
        return f"<{type(value).__name__} nested too deeply>"
    return text if len(text) <= 60 else text[:57] + "..."


def _number(setting: dict[str, Any], name: str, bounds: tuple[float, float]) -> float:
    """A finite JSON number within ``bounds`` (booleans, NaN and huge integers are refused)."""
    value = setting.get(name)
    low, high = bounds
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not low <= value <= high:
        raise OptionError(f"{name} {_shown(value)} is not a number from {low:g} to {high:g}")
    return float(value)


def _threads(setting: dict[str, Any]) -> int | None:
    threads = setting.get("intra_op_num_threads")
    if threads is None:
        return None
    return check_threads("intra_op_num_threads", threads)


def _chain(setting: dict[str, Any]) -> list[str]:
    chain = setting.get("chain")
    if (
        not isinstance(chain, list)
        or not 1 <= len(chain) <= _MAX_CHAIN
        or not all(isinstance(k, str) and 0 < len(k) <= _MAX_KIND_CHARS for k in chain)
        or len(set(chain)) != len(chain)
    ):
        raise OptionError(
            f"chain {_shown(chain)} is not a list of 1 to {_MAX_CHAIN} distinct provider kinds"
        )
    return chain


def _parse(
    record: dict[str, Any], checkpoint: ResolvedCheckpoint, host: HostCapabilities
) -> TunedSetting:
    """Every field checked against its type and bounds; any defect raises naming the field."""
    if (
        record.get("model") != checkpoint.fingerprint()
        or record.get("ort_version") != host.ort_version
    ):
        raise OptionError("it belongs to another model or ONNX Runtime version")
    if record.get("host") != json.loads(json.dumps(host_signature(host))):
        raise OptionError("it belongs to another host (platform, providers, CPUs or ISA)")
    setting = record.get("setting")
    if not isinstance(setting, dict):
        raise OptionError(f"setting {_shown(setting)} is not an object")
    offered = setting.get("offered", [])
    if (
        not isinstance(offered, list)
        or len(offered) > _MAX_OFFERED
        or not all(isinstance(o, str) and len(o) <= _MAX_CHAIN * _MAX_KIND_CHARS for o in offered)
    ):
        raise OptionError(f"offered {_shown(offered)} is not a list of candidate labels")
    outcomes = setting.get("outcomes", [])
    if (
        not isinstance(outcomes, list)
        or (outcomes and len(outcomes) != len(offered))
        or not all(isinstance(o, str) and len(o) <= _MAX_OUTCOME_CHARS for o in outcomes)
    ):
        raise OptionError(f"outcomes {_shown(outcomes)} is not one line per offered candidate")
    variant, precision = setting.get("variant"), setting.get("precision")
    for name, value in (("variant", variant), ("precision", precision)):
        if value is not None and (
            not isinstance(value, str) or not 0 < len(value) <= _MAX_KIND_CHARS
        ):
            raise OptionError(f"{name} {_shown(value)} is not a name or null")
    return TunedSetting(
        _chain(setting),
        _threads(setting),
        _number(setting, "speedup", _SPEEDUP_RANGE),
        _number(setting, "median_ms", _MEDIAN_MS_RANGE),
        variant,
        tuple(offered),
        precision,
        tuple(outcomes),
    )


def lookup(checkpoint: ResolvedCheckpoint, host: HostCapabilities) -> TunedSetting | None:
    """The saved setting for this model on this host, or ``None`` (a bad record with an
    :class:`~ortplug.errors.OrtplugCacheWarning` naming it)."""
    if not _STORE.records():
        return None
    return _STORE.load(_key(checkpoint, host), lambda record: _parse(record, checkpoint, host))


def stale_records(ort_version: str | None) -> list[Path]:
    """Records written for another ONNX Runtime version, or unreadable ones (for ``ortplug doctor``).

    A FIFO, device or directory named ``*.json`` is listed without being opened.
    """
    stale = []
    for path in _STORE.records():  # never through a link, nor a folder others can write
        try:
            record = read_json(path, max_bytes=_MAX_RECORD_BYTES, constants=False)
            if not isinstance(record, dict) or record.get("ort_version") != ort_version:
                stale.append(path)
        except (OSError, ValueError, RecursionError):
            stale.append(path)
    return stale


def apply_tuning(
    selection: ProviderSelection,
    checkpoint: ResolvedCheckpoint,
    host: HostCapabilities,
    plugins: PluginHost,
) -> ProviderSelection:
    """The selection with what was measured for this model here, if anything still offered: that
    choice first, the others as its alternatives."""
    tuned = lookup(checkpoint, host)
    if tuned is None or (tuned.offered and tuned.offered != candidate_labels(selection)):
        return selection
    choices = [selection, *selection.alternatives]
    chosen = next(
        (
            c
            for c in choices
            if (c.variant, c.precision) == (tuned.variant, tuned.precision)
            and tuple(k.kind for k in c.chain) == tuned.chain
        ),
        None,
    )
    if chosen is None:
        chosen = _tuned_chain(choices, tuned, plugins)
        if chosen is None:
            return selection
    defaults = dict(chosen.session_defaults)
    if tuned.intra_op_num_threads is not None and "ORT_INTRA_OP_NUM_THREADS" not in os.environ:
        defaults["intra_op_num_threads"] = tuned.intra_op_num_threads
    outcome_of = dict(zip(tuned.offered, tuned.outcomes))
    alternatives = tuple(
        attrs.evolve(c, recorded=outcome_of.get(label))
        for c, label in zip(choices, candidate_labels(selection))
        if c is not chosen
    )
    return attrs.evolve(
        chosen,
        reasons=(tuned.describe(),) * len(chosen.chain),
        session_defaults=defaults,
        tuned=True,
        alternatives=alternatives,
    )


def _tuned_chain(
    choices: list[ProviderSelection], tuned: TunedSetting, plugins: PluginHost
) -> ProviderSelection | None:
    """The recorded chain on the reference weights, from the providers the policy offered."""
    reference = next((c for c in choices if c.variant is None and c.precision is None), None)
    registry = plugins.provider_registry()
    if reference is None or tuned.variant or tuned.precision or not registry.has_kind("cpu"):
        return None
    by_kind = {config.kind: config for config in reference.chain}
    if set(tuned.chain) - set(by_kind) - {"cpu"}:
        return None
    chain = tuple(by_kind.get(kind) or registry.parse(kind) for kind in tuned.chain)
    return attrs.evolve(reference, chain=chain, reasons=("",) * len(chain))
