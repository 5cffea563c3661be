"""The ``tensorrt`` plugin's hook implementations (entry point ``tensorrt = "ortplug_tensorrt.plugin"``)."""

from __future__ import annotations

import logging
import os
from collections.abc import Iterable, Sequence
from pathlib import Path

import attrs
from ortplug.plugins import (
    CheckpointMetadata,
    HostCapabilities,
    OptionError,
    ProviderConfig,
    ProviderDecline,
    ProviderOffer,
    ResolvedCheckpoint,
    SessionOptionsConfig,
    hookimpl,
    pip_install,
    preload_runtime_libraries,
)

from .config import TensorrtProvider
from .engine_cache import (
    cache_unusable,
    compute_capability,
    engine_cache_key,
    engine_dir,
    has_cached_engine,
    timing_dir,
)
from .shapes import format_profile, parse_profile, profiles_from_ranges

__all__ = [
    "FP16_PREFERENCE",
    "OPT_IN_ENV",
    "PREFERENCE",
    "ortplug_adjust_session_options",
    "ortplug_offer_providers",
    "ortplug_prepare_provider",
]

_log = logging.getLogger("ortplug.tensorrt")

#: Environment variable that lets the default policy pick TensorRT on this host.
OPT_IN_ENV = "ORTPLUG_TENSORRT"
#: Preference of the exact TensorRT offer; it orders TensorRT's own offers only. TensorRT goes
#: ahead of CUDA (its manifest's "before"), so CUDA stays behind it for the nodes TensorRT skips.
PREFERENCE = 0
#: TensorRT with fp16 kernels allowed on an fp32 checkpoint: just below exact fp32, verified at
#: fp16's tolerance.
FP16_PREFERENCE = -1
#: TensorRT 10 builds run on Turing (7.5) and newer.
_MIN_CAPABILITY = (7, 5)


def _capability(text: str | None) -> tuple[int, int]:
    major, _, minor = (text or "0.0").partition(".")
    return int(major or 0), int(minor or 0)


def _blocker(host: HostCapabilities) -> str | None:
    """Why TensorRT cannot run on this host at all, or ``None``."""
    if "cuda" not in host.facts:
        return (
            f"no GPU facts: the TensorRT plugin reads the cuda probe; {pip_install('ortplug-cuda')}"
        )
    if host.fact("cuda", "driver_error"):
        return f"no usable NVIDIA driver: {host.fact('cuda', 'driver_error')}"
    if not host.fact("cuda", "devices"):
        return "the NVIDIA driver reports no CUDA device"
    if not host.has_provider(TensorrtProvider.ort_name):
        return (
            f"this ONNX Runtime build ({host.ort_version or 'not installed'}) has no "
            f"TensorrtExecutionProvider; {pip_install('ortplug[tensorrt]')}"
        )
    if host.fact("tensorrt", "library_error"):
        return f"{host.fact('tensorrt', 'library_error')}; {pip_install('ortplug[tensorrt]')}"
    return None


def _opted_in(metadata: CheckpointMetadata) -> bool:
    return metadata.extra.get("tensorrt") is True or os.environ.get(OPT_IN_ENV, "") in (
        "1",
        "true",
        "yes",
    )


def _default_config(metadata: CheckpointMetadata, host: HostCapabilities) -> TensorrtProvider:
    """Precision flags from the checkpoint, on the device with the most memory."""
    device = max(host.fact("cuda", "devices"), key=lambda d: d.get("memory_mib", 0))
    capability = _capability(device.get("compute_capability"))
    return TensorrtProvider(
        device_id=int(device.get("index", 0)),
        fp16=True if metadata.precision == "fp16" else None,
        bf16=True if metadata.precision == "bf16" and capability >= (8, 0) else None,
        int8=True if metadata.precision == "int8" else None,
    )


@hookimpl
def ortplug_offer_providers(
    metadata: CheckpointMetadata, host: HostCapabilities, checkpoint: ResolvedCheckpoint | None
) -> Iterable[ProviderOffer | ProviderDecline]:
    """TensorRT only when opted in, or when an engine for this exact model is cached.

    On an fp32 checkpoint TensorRT builds fp32 engines; fp16 kernels (``trt_fp16_enable``)
    are their own candidate at ``precision="fp16"``.
    """
    blocker = _blocker(host)
    if blocker:
        yield ProviderDecline("tensorrt", blocker)
        return
    config = _default_config(metadata, host)
    capability = compute_capability(host, config.device_id)
    if _capability(capability) < _MIN_CAPABILITY:
        yield ProviderDecline(
            "tensorrt",
            f"GPU compute capability {capability or 'unknown'} is below TensorRT 10's minimum 7.5",
        )
        return
    version = host.fact("tensorrt", "version")
    cached = False
    if checkpoint is not None:
        try:
            key = engine_cache_key(_with_profiles(config, checkpoint), checkpoint, host)
        except ValueError as exc:
            yield ProviderDecline("tensorrt", f"cannot prepare TensorRT for this checkpoint: {exc}")
            return
        cached = has_cached_engine(key)
    if not cached and not _opted_in(metadata):
        yield ProviderDecline(
            "tensorrt",
            "not chosen automatically: the first TensorRT engine build takes minutes; opt in "
            f"with {OPT_IN_ENV}=1 or metadata extra tensorrt=true, or request it explicitly",
        )
        return
    unusable = cache_unusable(config)  # checked only when offering: it touches the disk
    if unusable is not None:
        yield ProviderDecline("tensorrt", unusable)
        return
    reason = (
        f"TensorRT {version} engine for this model is cached (sm {capability})"
        if cached
        else f"opted in: TensorRT {version} on sm {capability}, engine cached after the first build"
    )
    yield ProviderOffer(config=config, preference=PREFERENCE, reason=reason)
    if metadata.precision == "fp32":
        yield ProviderOffer(
            config=attrs.evolve(config, fp16=True),
            preference=FP16_PREFERENCE,
            reason=f"{reason}; fp16 kernels allowed (trt_fp16_enable): faster, less exact",
            precision="fp16",
        )


def _with_profiles(config: TensorrtProvider, checkpoint: ResolvedCheckpoint) -> TensorrtProvider:
    """Check given profiles against the model, or derive them from ``extra.dim_ranges``."""
    shapes = checkpoint.input_shapes()
    dynamic = sorted(
        name
        for name, shape in shapes.items()
        if shape is None or not all(isinstance(d, int) and d > 0 for d in shape)
    )
    if config.profile_min_shapes is not None:
        listed = parse_profile("profile_min_shapes", config.profile_min_shapes)
        unknown = sorted(set(listed) - set(shapes))
        missing = [name for name in dynamic if name not in listed]
        if unknown or missing:
            raise OptionError(
                f"TensorRT profile shapes for {checkpoint.label}: every dynamic input must be "
                f"listed and only model inputs; missing {missing}, not inputs {unknown} "
                f"(model inputs: {sorted(shapes)})"
            )
        return config
    if not dynamic:
        return config
    ranges = checkpoint.metadata.dim_ranges()
    if not ranges:
        return config
    profiles = profiles_from_ranges(shapes, ranges)
    if profiles is None:
        return config
    low, mid, high = (format_profile(p) for p in profiles)
    return attrs.evolve(
        config, profile_min_shapes=low, profile_opt_shapes=mid, profile_max_shapes=high
    )


@hookimpl
def ortplug_prepare_provider(
    config: ProviderConfig, checkpoint: ResolvedCheckpoint, host: HostCapabilities
) -> ProviderConfig | None:
    """Profiles from the checkpoint, keyed engine/timing cache dirs, libraries, a cold-build notice."""
    if not isinstance(config, TensorrtProvider):
        return None
    from ortplug.plugins import describe_cache_folder  # deferred: only when TRT is chained

    if config.preload_dlls:
        preload_runtime_libraries(config.dll_directory)
    prepared = _with_profiles(config, checkpoint)
    if prepared.engine_cache and prepared.engine_cache_path is None:
        folder = engine_dir(engine_cache_key(prepared, checkpoint, host))
        describe_cache_folder(
            folder, kind="TensorRT engine", checkpoint=checkpoint, ort_version=host.ort_version
        )
        prepared = attrs.evolve(prepared, engine_cache_path=str(folder))
    if prepared.timing_cache and prepared.timing_cache_path is None:
        timing = timing_dir(host, prepared.device_id)
        describe_cache_folder(timing, kind="TensorRT timing cache", ort_version=host.ort_version)
        prepared = attrs.evolve(prepared, timing_cache_path=str(timing))
    _announce_build(prepared, checkpoint)
    return prepared


def _announce_build(config: TensorrtProvider, checkpoint: ResolvedCheckpoint) -> None:
    folder = config.engine_cache_path
    if folder is None or not config.engine_cache:
        _log.warning(
            "building TensorRT engine for %s without an engine cache: this can take minutes, "
            "on every session",
            checkpoint.label,
        )
    elif not any(Path(folder).glob("*.engine")):  # ONNX Runtime names its engines *.engine
        _log.warning(
            "building TensorRT engine for %s: this can take minutes; it is cached in %s for "
            "the next session",
            checkpoint.label,
            folder,
        )


@hookimpl
def ortplug_adjust_session_options(
    session_options: SessionOptionsConfig, chain: Sequence[ProviderConfig]
) -> SessionOptionsConfig | None:
    """A TensorRT ``build_timeout_s`` becomes the session's load timeout unless one is set."""
    if session_options.load_timeout_s is not None:
        return None
    timeouts = [
        c.build_timeout_s for c in chain if isinstance(c, TensorrtProvider) and c.build_timeout_s
    ]
    return session_options.evolve(load_timeout_s=min(timeouts)) if timeouts else None
