"""Where compiled shaders go: Mesa's disk cache under ortplug's cache dir, keyed by the EP version.

Dawn compiles WGSL to SPIR-V and the Vulkan driver compiles that to machine
code the first time a session runs a kernel: seconds per model on Mesa's
lavapipe, a fraction of that with Mesa's shader cache warm. Mesa reads
``MESA_SHADER_CACHE_DIR`` when a device is created, so ortplug sets it for the
process before a WebGPU session is built, unless the user set it. Dawn's own
pipeline cache is not reachable: ``onnxruntime-ep-webgpu`` 0.4.0 has no option
for it.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping, MutableMapping
from pathlib import Path

from ortplug.plugins import cache_dir, cache_key, cache_root

__all__ = [
    "MESA_CACHE_ENV",
    "ep_version",
    "shader_cache_key",
    "shader_cache_path",
    "use_shader_cache",
]

#: Mesa's shader cache location (``MESA_GLSL_CACHE_DIR`` is its older name).
MESA_CACHE_ENV = "MESA_SHADER_CACHE_DIR"
_MESA_OLD_ENV = "MESA_GLSL_CACHE_DIR"


def ep_version() -> str | None:
    """The installed ``onnxruntime-ep-webgpu`` version, or ``None``."""
    from importlib import metadata  # deferred: ~15 ms, paid only when the version is needed

    try:
        return metadata.version("onnxruntime-ep-webgpu")
    except metadata.PackageNotFoundError:
        return None


def shader_cache_key() -> str:
    """EP version + platform: a new EP (new WGSL) gets a fresh folder; Mesa keys by driver build."""
    return cache_key("webgpu-shaders", ep_version(), sys.platform)


def shader_cache_path(environ: Mapping[str, str] | None = None) -> Path:
    """The folder Mesa caches into: the user's ``MESA_SHADER_CACHE_DIR``, else ortplug's keyed one.

    Does not create it (see :func:`use_shader_cache`).
    """
    env = os.environ if environ is None else environ
    chosen = env.get(MESA_CACHE_ENV) or env.get(_MESA_OLD_ENV)
    if chosen:
        return Path(chosen)
    return cache_root(env) / "webgpu" / "shaders" / shader_cache_key()


def use_shader_cache(environ: MutableMapping[str, str] | None = None) -> Path:
    """Point Mesa's shader cache at ortplug's keyed folder (created) unless the user chose one.

    Returns the folder in use. Raises ``OSError`` (naming the folder and
    ``ORTPLUG_CACHE_DIR``) when ortplug's folder cannot be created.
    """
    env = os.environ if environ is None else environ
    if env.get(MESA_CACHE_ENV) or env.get(_MESA_OLD_ENV):
        return shader_cache_path(env)
    folder = cache_dir("webgpu", "shaders", shader_cache_key(), environ=env)
    from ortplug.plugins import describe_cache_folder  # deferred: only when WebGPU is chained

    describe_cache_folder(folder, kind="WebGPU shader cache (Mesa)")
    env[MESA_CACHE_ENV] = str(folder)
    return folder
