"""An application of four libraries that build their own ONNX Runtime sessions from models in
their wheels; prints what each computed, as JSON (run by test_dropin_libraries.py)."""

from __future__ import annotations

import hashlib
import importlib.util
import json
import sys
import tempfile
from pathlib import Path

import numpy as np
from PIL import Image, ImageDraw


def _digest(arrays: list[np.ndarray]) -> str:
    return hashlib.sha256(b"".join(np.ascontiguousarray(a).tobytes() for a in arrays)).hexdigest()


def magika() -> dict[str, object]:
    """File-type detection: hard-codes providers=["CPUExecutionProvider"]."""
    from magika import Magika

    result = Magika().identify_bytes(
        b"import os\n\ndef main(x):\n    return os.path.join(x, 'y')\n" * 8
    )
    return {"label": str(result.output.label), "score": float(result.score)}


def nudenet(folder: Path) -> dict[str, object]:
    """Image detection: builds its session with providers=None."""
    from nudenet import NudeDetector

    detector = NudeDetector()
    pixels = np.random.RandomState(0).randint(0, 256, (320, 320, 3), dtype=np.uint8)
    path = folder / "noise.png"
    Image.fromarray(pixels).save(path)
    raw = np.random.RandomState(1).rand(1, 3, 320, 320).astype(np.float32)
    outputs = detector.onnx_session.run(None, {detector.input_name: raw})
    return {"detections": detector.detect(str(path)), "raw": _digest(outputs)}


def rapidocr() -> dict[str, object]:
    """OCR: three sessions, [("CPUExecutionProvider", {...})] and its own SessionOptions."""
    from rapidocr_onnxruntime import RapidOCR

    image = Image.new("RGB", (360, 80), "white")
    ImageDraw.Draw(image).text((10, 25), "ortplug 2026 drop-in", fill="black", font_size=32)
    result, _ = RapidOCR()(np.asarray(image))
    return {"boxes": [[box, text, float(score)] for box, text, score in result or []]}


def silero_vad() -> dict[str, object]:
    """Voice activity (faster-whisper's Silero VAD): providers=["CPUExecutionProvider"] and its
    own SessionOptions; the per-frame speech probabilities and the segments found."""
    from faster_whisper.vad import VadOptions, get_speech_timestamps, get_vad_model

    rate = 16000
    time = np.arange(512 * 94) / rate  # about 3 s, in whole 512-sample frames
    voiced = np.sin(2 * np.pi * 140 * time) + 0.6 * np.sin(2 * np.pi * 700 * time)
    noise = np.random.RandomState(2).normal(0, 0.05, time.shape)
    audio = (0.3 * voiced * (np.sin(2 * np.pi * 0.5 * time) > 0) + noise).astype(np.float32)
    speech = get_speech_timestamps(audio, VadOptions(min_silence_duration_ms=100))
    return {"probabilities": _digest([get_vad_model()(audio)]), "speech": speech}


def main() -> None:
    with tempfile.TemporaryDirectory() as folder:
        found = {"magika": magika(), "rapidocr": rapidocr(), "silero_vad": silero_vad()}
        if importlib.util.find_spec("nudenet") is not None:  # optional: it brings its own OpenCV
            found["nudenet"] = nudenet(Path(folder))
    json.dump(found, sys.stdout, sort_keys=True, default=str)
    print()


if __name__ == "__main__":
    main()
