"""Where a TensorRT engine for one exact (model, runtime, GPU, options) lives, and whether it exists."""

from __future__ import annotations

from pathlib import Path

from ortplug.plugins import (
    CACHE_ENV,
    HostCapabilities,
    ResolvedCheckpoint,
    cache_dir,
    cache_key,
    cache_problem,
    cache_root,
)

from .config import TensorrtProvider

__all__ = [
    "cache_unusable",
    "compute_capability",
    "engine_cache_key",
    "engine_dir",
    "has_cached_engine",
    "timing_dir",
]


def compute_capability(host: HostCapabilities, device_id: int) -> str | None:
    """The compute capability of CUDA device ``device_id`` from the ``cuda`` probe, if known."""
    for device in host.fact("cuda", "devices", []):
        if device.get("index") == device_id:
            value = device.get("compute_capability")
            return str(value) if value else None
    return None


def engine_cache_key(
    config: TensorrtProvider, checkpoint: ResolvedCheckpoint, host: HostCapabilities
) -> str:
    """Model hash + ONNX Runtime version + TensorRT version + compute capability + options."""
    return cache_key(
        "tensorrt-engine",
        checkpoint.fingerprint(),
        host.ort_version,
        host.fact("tensorrt", "version"),
        compute_capability(host, config.device_id),
        config.cache_relevant_options(),
    )


def engine_dir(key: str) -> Path:
    """The (created) engine directory for a key."""
    return cache_dir("tensorrt", "engines", key)


def timing_dir(host: HostCapabilities, device_id: int) -> Path:
    """Timing caches are portable across models on one TensorRT version and compute capability."""
    version = host.fact("tensorrt", "version") or "unknown"
    capability = compute_capability(host, device_id) or "unknown"
    return cache_dir("tensorrt", "timing", f"trt{version}-sm{capability}")


def has_cached_engine(key: str) -> bool:
    """Whether an engine was already built for this key (without creating directories)."""
    folder = cache_root() / "tensorrt" / "engines" / key
    return folder.is_dir() and any(folder.glob("*.engine"))


def cache_unusable(config: TensorrtProvider) -> str | None:
    """Why ortplug's engine or timing cache folder cannot take this config's files, or ``None``.

    Only the folders ortplug would choose count: a path the user gave is theirs to check.
    """
    folders = [
        ("engines", config.engine_cache and config.engine_cache_path is None),
        ("timing", config.timing_cache and config.timing_cache_path is None),
    ]
    for folder, used in folders:
        problem = cache_problem("tensorrt", folder) if used else None
        if problem is not None:
            return (
                f"the TensorRT {folder} cache cannot be written ({problem}), so every session "
                f"would rebuild its engine for minutes; set {CACHE_ENV} to a writable directory"
            )
    return None
