"""Autotune records: the fastest chain and thread count ``ortplug bench --save`` measured for a model.

One JSON file per (model fingerprint, ONNX Runtime version, host signature)
under ``<cache>/autotune/``: a changed model, runtime or host finds no record
and the policy decides as usual. A corrupt or foreign file is ignored with an
:class:`~ortplug.errors.OrtplugCacheWarning` naming it.
"""

from __future__ import annotations

import json
import os
import warnings
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import attrs

from ..cache import cache_dir, cache_key, cache_root
from ..checkpoint import ResolvedCheckpoint
from ..errors import OptionError, OrtplugCacheWarning
from ..host import HostCapabilities
from ..plugins.manager import PluginHost
from .protocol import ProviderSelection

__all__ = [
    "RECORD_SCHEMA",
    "TunedSetting",
    "apply_tuning",
    "host_signature",
    "lookup",
    "save",
    "stale_records",
]

RECORD_SCHEMA = 1
_FOLDER = "autotune"


def _kinds(value: Iterable[str]) -> tuple[str, ...]:
    return tuple(value)


@attrs.frozen
class TunedSetting:
    """The winner of a benchmark: provider kinds in order, intra-op threads, and by how much it won."""

    chain: tuple[str, ...] = attrs.field(converter=_kinds)
    intra_op_num_threads: int | None
    speedup: float  # median time of the policy's default divided by the winner's
    median_ms: float

    def describe(self) -> str:
        """One line for reasons and reports."""
        threads = (
            "" if self.intra_op_num_threads is None else f", {self.intra_op_num_threads} threads"
        )
        return (
            f"autotuned by `ortplug bench --save`: {','.join(self.chain)}{threads} ran "
            f"{self.speedup:.2f}x faster than the policy's default here"
        )


def host_signature(host: HostCapabilities) -> dict[str, Any]:
    """What makes a measurement valid on another day: platform, providers, usable CPUs, ISA."""
    return {
        "platform": host.platform,
        "machine": host.machine,
        "providers": sorted(host.available_providers),
        "usable_cpus": host.fact("cpu", "usable_cpus"),
        "isa": host.fact("cpu", "isa_flags"),
    }


def _name(checkpoint: ResolvedCheckpoint, host: HostCapabilities) -> str:
    key = cache_key("autotune", checkpoint.fingerprint(), host.ort_version, host_signature(host))
    return f"{key}.json"


def save(checkpoint: ResolvedCheckpoint, host: HostCapabilities, setting: TunedSetting) -> Path:
    """Write the record for this model on this host; returns its path."""
    path = cache_dir(_FOLDER) / _name(checkpoint, host)
    record = {
        "schema": RECORD_SCHEMA,
        "model": checkpoint.fingerprint(),
        "ort_version": host.ort_version,
        "host": host_signature(host),
        "setting": attrs.asdict(setting),
    }
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(record, indent=2))
    tmp.replace(path)
    return path


def _parse(path: Path, checkpoint: ResolvedCheckpoint, host: HostCapabilities) -> TunedSetting:
    record = json.loads(path.read_text())
    if not isinstance(record, dict) or record.get("schema") != RECORD_SCHEMA:
        raise OptionError(f"not an ortplug autotune record (schema {RECORD_SCHEMA})")
    if (
        record.get("model") != checkpoint.fingerprint()
        or record.get("ort_version") != host.ort_version
    ):
        raise OptionError("it belongs to another model or ONNX Runtime version")
    setting = record["setting"]
    threads = setting["intra_op_num_threads"]
    if threads is not None and (not isinstance(threads, int) or threads < 1):
        raise OptionError(f"intra_op_num_threads {threads!r} is not a positive integer")
    chain = setting["chain"]
    if not isinstance(chain, list) or not chain or not all(isinstance(k, str) for k in chain):
        raise OptionError(f"chain {chain!r} is not a list of provider kinds")
    return TunedSetting(chain, threads, float(setting["speedup"]), float(setting["median_ms"]))


def lookup(checkpoint: ResolvedCheckpoint, host: HostCapabilities) -> TunedSetting | None:
    """The saved setting for this model on this host, or ``None`` (cheap when nothing was saved)."""
    folder = cache_root() / _FOLDER
    if not folder.is_dir() or not any(folder.glob("*.json")):
        return None
    path = folder / _name(checkpoint, host)
    if not path.is_file():
        return None
    try:
        return _parse(path, checkpoint, host)
    except (OSError, ValueError, KeyError, TypeError) as exc:
        warnings.warn(
            f"ignoring autotune record {path}: {exc}; delete it or run `ortplug bench MODEL --save` again",
            OrtplugCacheWarning,
            stacklevel=3,
        )
        return None


def stale_records(ort_version: str | None) -> list[Path]:
    """Records written for another ONNX Runtime version, or unreadable ones (for ``ortplug doctor``)."""
    folder = cache_root() / _FOLDER
    if not folder.is_dir():
        return []
    stale = []
    for path in sorted(folder.glob("*.json")):
        try:
            record = json.loads(path.read_text())
            if not isinstance(record, dict) or record.get("ort_version") != ort_version:
                stale.append(path)
        except (OSError, ValueError):
            stale.append(path)
    return stale


def apply_tuning(
    selection: ProviderSelection,
    checkpoint: ResolvedCheckpoint,
    host: HostCapabilities,
    plugins: PluginHost,
) -> ProviderSelection:
    """The selection with what ``ortplug bench --save`` measured for this model here, if anything.

    A record naming a provider the plugins no longer offer is not used.
    """
    tuned = lookup(checkpoint, host)
    if tuned is None:
        return selection
    by_kind = {config.kind: config for config in selection.chain}
    registry = plugins.provider_registry()
    if set(tuned.chain) - set(by_kind) - {"cpu"} or not registry.has_kind("cpu"):
        return selection
    chain = tuple(by_kind.get(kind) or registry.parse(kind) for kind in tuned.chain)
    defaults = dict(selection.session_defaults)
    if tuned.intra_op_num_threads is not None and "ORT_INTRA_OP_NUM_THREADS" not in os.environ:
        defaults["intra_op_num_threads"] = tuned.intra_op_num_threads
    return attrs.evolve(
        selection,
        chain=chain,
        reasons=(tuned.describe(),) * len(chain),
        session_defaults=defaults,
    )
