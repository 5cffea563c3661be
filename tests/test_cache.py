"""The cache root, keyed directories, and model fingerprints."""

from __future__ import annotations

import sys
from pathlib import Path

import models
import pytest
from ortplug import InMemoryCheckpoint, LocalCheckpoint
from ortplug.cache.root import cache_dir, cache_key, cache_root


def test_cache_root_follows_the_environment(tmp_path, monkeypatch) -> None:
    assert cache_root({"ORTPLUG_CACHE_DIR": str(tmp_path)}) == tmp_path
    # the platform's user cache dir, whatever this user's XDG_CACHE_HOME is
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "elsewhere"))
    assert cache_root({}).name == "ortplug"
    if sys.platform.startswith("linux"):
        assert cache_root({}) == tmp_path / "elsewhere" / "ortplug"
        monkeypatch.delenv("XDG_CACHE_HOME")
        monkeypatch.setenv("HOME", str(tmp_path / "home"))
        assert cache_root({}) == tmp_path / "home" / ".cache" / "ortplug"


def test_cache_dir_is_created_under_the_root(tmp_path) -> None:
    folder = cache_dir("tensorrt", "engines", "abc", environ={"ORTPLUG_CACHE_DIR": str(tmp_path)})
    assert folder == tmp_path / "tensorrt" / "engines" / "abc" and folder.is_dir()


def test_a_cache_root_that_is_a_file_is_a_clear_error(tmp_path) -> None:
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("")
    with pytest.raises(
        OSError, match=r"cannot be created .*set ORTPLUG_CACHE_DIR to a writable directory"
    ):
        cache_dir("coreml", environ={"ORTPLUG_CACHE_DIR": str(blocker)})
    assert blocker.read_text() == ""  # untouched


def test_cache_keys_are_stable_and_sensitive() -> None:
    key = cache_key("m", "1.32.0", {"a": "1", "b": "2"})
    assert key == cache_key("m", "1.32.0", {"b": "2", "a": "1"})  # dict order does not matter
    assert len(key) == 24 and int(key, 16) >= 0
    assert key != cache_key("m", "1.32.1", {"a": "1", "b": "2"})
    assert key != cache_key("m", "1.32.0", {"a": "1", "b": "3"})


def test_fingerprint_of_a_file_equals_that_of_its_bytes(tmp_path) -> None:
    data = models.add_model()
    path = models.write(tmp_path, "m.onnx", data)
    from_file = LocalCheckpoint(path).resolve()
    assert from_file.fingerprint() == InMemoryCheckpoint(data).resolve().fingerprint()
    assert (
        from_file.fingerprint()
        != InMemoryCheckpoint(models.add_model([2, 4])).resolve().fingerprint()
    )


def test_fingerprint_follows_a_rewritten_file(tmp_path) -> None:
    path = models.write(tmp_path, "m.onnx", models.add_model())
    checkpoint = LocalCheckpoint(path).resolve()
    first = checkpoint.fingerprint()
    path.write_bytes(models.add_model([3, 4]))  # new size: a new file version
    assert checkpoint.fingerprint() != first


def test_input_shapes_are_read_from_the_graph(tmp_path) -> None:
    path: Path = models.write(tmp_path, "m.onnx", models.shared_dim_model())
    assert LocalCheckpoint(path).resolve().input_shapes() == {"a": ("batch", 4), "b": ("batch", 4)}
    assert InMemoryCheckpoint(models.initializer_input_model()).resolve().input_shapes() == {
        "x": (1, 4)
    }
