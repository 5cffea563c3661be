"""A big model's fingerprint is hashed once per version of its file, across processes."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from models import external_weights_model, matmul_model
from ortplug import LocalCheckpoint
from ortplug.checkpoint import _fingerprints
from ortplug.errors import CheckpointError


@pytest.fixture
def big_model(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A real model file counted as big, whose version counts as settled at once."""
    path = tmp_path / "model.onnx"
    path.write_bytes(matmul_model())
    monkeypatch.setattr(_fingerprints, "REMEMBERED_BYTES", 1)
    monkeypatch.setattr(_fingerprints, "_SETTLED_S", 0.0)
    monkeypatch.setattr(_fingerprints, "_known", {})
    return path


def _records() -> list[Path]:
    return sorted(Path(os.environ["ORTPLUG_CACHE_DIR"], _fingerprints.FOLDER).glob("*.json"))


def _unhashable(monkeypatch: pytest.MonkeyPatch) -> None:
    """From here on, hashing a file fails the test: a digest must come from what is kept."""

    def hashed(path: Path, *_: object) -> str:
        raise AssertionError(f"{path} was hashed again")

    monkeypatch.setattr(_fingerprints, "_known", {})
    monkeypatch.setattr(_fingerprints, "_hash", hashed)


def test_a_big_models_digest_is_kept_and_read_back_without_hashing(
    big_model: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    expected = hashlib.sha256(big_model.read_bytes()).hexdigest()
    assert LocalCheckpoint(big_model).resolve().fingerprint() == expected
    (record,) = _records()
    assert json.loads(record.read_text())["model_path"] == os.path.realpath(big_model)
    _unhashable(monkeypatch)
    assert LocalCheckpoint(big_model).resolve().fingerprint() == expected


def test_a_later_process_reads_the_kept_digest(big_model: Path) -> None:
    digest = _fingerprints.file_fingerprint(big_model)
    script = (
        "import sys; from pathlib import Path; from ortplug.checkpoint import _fingerprints as f\n"
        "f._hash = lambda path: sys.exit('hashed again')\n"
        "f.REMEMBERED_BYTES = 1; f._SETTLED_S = 0.0\n"
        "print(f.file_fingerprint(Path(sys.argv[1])))\n"
    )
    shown = subprocess.run(
        [sys.executable, "-c", script, str(big_model)], capture_output=True, text=True, check=True
    )
    assert shown.stdout.strip() == digest


def test_a_rewritten_file_is_hashed_again_even_with_its_old_size_and_mtime(
    big_model: Path,
) -> None:
    _fingerprints.file_fingerprint(big_model)
    before = big_model.stat()
    data = bytearray(big_model.read_bytes())
    data[-1] ^= 0xFF  # same size
    big_model.write_bytes(bytes(data))
    os.utime(big_model, ns=(before.st_atime_ns, before.st_mtime_ns))
    _fingerprints._known.clear()
    assert _fingerprints.file_fingerprint(big_model) == hashlib.sha256(data).hexdigest()


def test_a_file_written_just_now_is_not_kept(
    big_model: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_fingerprints, "_SETTLED_S", 3600.0)
    expected = hashlib.sha256(big_model.read_bytes()).hexdigest()
    assert _fingerprints.file_fingerprint(big_model) == expected
    assert _records() == []


@pytest.mark.parametrize(
    "forge",
    [
        lambda record: {**record, "sha256": "0" * 63 + "g"},
        lambda record: {**record, "version": [*record["version"][:3], 1, *record["version"][4:]]},
        lambda record: {**record, "schema": 99},
        lambda record: ["not", "a", "record"],
    ],
)
def test_a_record_that_is_not_one_digest_of_this_version_is_hashed_again(
    big_model: Path, monkeypatch: pytest.MonkeyPatch, forge
) -> None:
    expected = _fingerprints.file_fingerprint(big_model)
    (record,) = _records()
    record.write_text(json.dumps(forge(json.loads(record.read_text()))))
    _fingerprints._known.clear()
    assert _fingerprints.file_fingerprint(big_model) == expected


def test_a_small_file_is_hashed_without_touching_the_cache(tmp_path: Path) -> None:
    path = tmp_path / "model.onnx"
    path.write_bytes(matmul_model())
    assert path.stat().st_size < _fingerprints.REMEMBERED_BYTES
    assert _fingerprints.file_fingerprint(path) == hashlib.sha256(path.read_bytes()).hexdigest()
    assert _records() == []


def test_a_file_written_just_now_is_hashed_at_every_call_then_once_settled(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A same-size rewrite within the timestamps' granularity would keep its version: a digest
    (or a model summary) of a file written just now is not remembered, even in the process."""
    path = tmp_path / "model.onnx"
    path.write_bytes(matmul_model())
    hashed: list[Path] = []
    real = _fingerprints._hash
    monkeypatch.setattr(_fingerprints, "_hash", lambda p, *s: hashed.append(p) or real(p, *s))
    monkeypatch.setattr(_fingerprints, "_known", {})
    checkpoint = LocalCheckpoint(path).resolve()
    first = checkpoint.fingerprint()
    assert checkpoint.fingerprint() == first and len(hashed) == 2
    monkeypatch.setattr(_fingerprints, "_SETTLED_S", 0.0)
    assert checkpoint.fingerprint() == first and checkpoint.fingerprint() == first
    assert len(hashed) == 3


# -- external data: only what ONNX Runtime itself would read is read ---------------------------


def _naming(path: Path, location: str, **entries: str) -> Path:
    """``external_weights_model`` saved at ``path``, its weights named as ``location`` (and
    ``entries``, such as ``offset``, beside it)."""
    model = onnx.load_from_string(external_weights_model())
    (entry,) = [e for e in model.graph.initializer[0].external_data if e.key == "location"]
    entry.value = location
    for key, value in entries.items():
        added = model.graph.initializer[0].external_data.add()
        added.key, added.value = key, value
    path.parent.mkdir(parents=True, exist_ok=True)
    onnx.save_model(model, path)
    return path


def _ort_loads(path: Path, refusal: str = "External data path") -> bool:
    try:
        ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    except Exception as exc:  # ONNX Runtime's own type for a refused model
        assert refusal in str(exc)
        return False
    return True


@pytest.mark.parametrize("location", ["../big.bin", "sub/../../big.bin", "link.bin", "absolute"])
def test_external_data_outside_the_models_folder_is_refused_before_a_byte_is_read(
    tmp_path: Path, location: str
) -> None:
    """A hostile model's external data naming a big file outside its folder was hashed (a sparse
    64 GB one: 53 s to over a minute) before ONNX Runtime refused the model in 0.3 s."""
    big = tmp_path / "big.bin"
    with big.open("wb") as handle:
        handle.truncate(4 << 30)  # sparse: no disk, but seconds to hash
    (tmp_path / "m").mkdir()
    (tmp_path / "m" / "link.bin").symlink_to(big)
    location = str(big) if location == "absolute" else location
    path = _naming(tmp_path / "m" / "m.onnx", location)
    checkpoint = LocalCheckpoint(path).resolve()
    started = time.perf_counter()
    with pytest.raises(CheckpointError) as caught:
        checkpoint.fingerprint()
    assert time.perf_counter() - started < 2
    message = str(caught.value)
    assert f"external data location {location!r}: expected a " in message
    assert str((tmp_path / "m").resolve()) in message and "\n" not in message
    assert not _ort_loads(path)  # the rule is ONNX Runtime's


def test_external_data_that_onnx_runtime_reads_is_still_fingerprinted(tmp_path: Path) -> None:
    """Inside the folder, through ``..`` that comes back, or symbolic links into the real model
    file's folder (the Hugging Face cache's layout): ONNX Runtime reads these, so they count."""
    weights = np.arange(4, dtype=np.float32).tobytes()
    (tmp_path / "blobs").mkdir()
    (tmp_path / "blobs" / "data").write_bytes(weights)
    _naming(tmp_path / "blobs" / "model", "w.bin")
    snapshot = tmp_path / "snapshots" / "v1"
    snapshot.mkdir(parents=True)
    (snapshot / "model.onnx").symlink_to(tmp_path / "blobs" / "model")
    (snapshot / "w.bin").symlink_to(tmp_path / "blobs" / "data")
    paths = [snapshot / "model.onnx", _naming(tmp_path / "m" / "m.onnx", "../m/w.bin")]
    (tmp_path / "m" / "w.bin").write_bytes(weights)
    for path in paths:
        assert _ort_loads(path)
        before = LocalCheckpoint(path).resolve().fingerprint()
        (path.parent / "w.bin").resolve().write_bytes(weights[::-1])
        assert LocalCheckpoint(path).resolve().fingerprint() != before


def _poke(path: Path, at: int, data: bytes) -> None:
    """Write ``data`` at byte ``at`` of the file (its size kept), dated a second later."""
    with path.open("r+b") as handle:
        handle.seek(at)
        handle.write(data)
    later = path.stat().st_mtime_ns + 1_000_000_000
    os.utime(path, ns=(later, later))


def test_only_the_bytes_onnx_runtime_reads_of_an_external_data_file_are_hashed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A sparse 64 GB external-data file inside the model's folder, of which the model uses 16
    bytes, was hashed whole (``ortplug run``, ``verify`` and ``exec`` still busy after 60 s
    where ONNX Runtime loads the model in 0.5 s): each tensor's bytes are hashed, by ONNX
    Runtime's rule (its type's size at its offset), and none of the rest."""
    monkeypatch.setattr(_fingerprints, "_SETTLED_S", 0.0)
    weights = tmp_path / "m" / "w.bin"
    weights.parent.mkdir()
    with weights.open("wb") as handle:
        handle.write(b"\0" * 64 + np.arange(4, dtype=np.float32).tobytes())
        handle.truncate(16 << 30)  # sparse: no disk, but many seconds to hash
    path = _naming(tmp_path / "m" / "m.onnx", "w.bin", offset="64")
    assert _ort_loads(path)
    started = time.perf_counter()
    before = LocalCheckpoint(path).resolve().fingerprint()
    assert time.perf_counter() - started < 2
    _poke(weights, 80, b"\1")  # a byte no tensor uses
    assert LocalCheckpoint(path).resolve().fingerprint() == before
    _poke(weights, 64, b"\1")  # a byte of the weights
    assert LocalCheckpoint(path).resolve().fingerprint() != before


@pytest.mark.parametrize("entries", [{"offset": str(16 << 30)}, {"length": "8"}, {"offset": "+4"}])
def test_external_data_onnx_runtime_refuses_is_not_read(tmp_path: Path, entries) -> None:
    """Past the file's end, a length that is not the tensor's size, an offset that is not
    digits: ONNX Runtime refuses the model, and none of the file is read for it."""
    weights = tmp_path / "w.bin"
    with weights.open("wb") as handle:
        handle.truncate(16 << 30)
    path = _naming(tmp_path / "m.onnx", "w.bin", **entries)
    assert not _ort_loads(path, "")
    started = time.perf_counter()
    LocalCheckpoint(path).resolve().fingerprint()
    assert time.perf_counter() - started < 2


def test_the_digest_of_an_external_data_files_ranges_is_kept_across_processes(
    big_model: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    weights = big_model.parent / "w.bin"
    weights.write_bytes(b"\7" * 32 + np.arange(4, dtype=np.float32).tobytes())
    path = _naming(big_model.parent / "ext.onnx", "w.bin", offset="32")
    expected = LocalCheckpoint(path).resolve().fingerprint()
    assert any(json.loads(r.read_text())["spans"] for r in _records())
    _unhashable(monkeypatch)
    assert LocalCheckpoint(path).resolve().fingerprint() == expected
