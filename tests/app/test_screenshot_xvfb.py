"""A real window on a real X server (Xvfb): `scratchformer gui ... --screenshot FILE` writes the window's PNG."""

import os
import shutil
import subprocess
import sys
import time

import numpy as np
import pytest
from PySide6.QtGui import QImage

XVFB = shutil.which("Xvfb")


@pytest.fixture
def xvfb_display():
    if XVFB is None:
        pytest.skip("the Xvfb binary is not installed (apt-get install xvfb)")
    for n in range(91, 120):
        if not os.path.exists(f"/tmp/.X11-unix/X{n}") and not os.path.exists(f"/tmp/.X{n}-lock"):
            break
    proc = subprocess.Popen([XVFB, f":{n}", "-screen", "0", "1600x1000x24", "-nolisten", "tcp"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 10
    while not os.path.exists(f"/tmp/.X11-unix/X{n}") and time.monotonic() < deadline:
        time.sleep(0.05)
    try:
        yield f":{n}"
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def test_window_opens_on_x_and_saves_a_screenshot(xvfb_display, tmp_path):
    out = tmp_path / "window.png"
    env = {**os.environ, "DISPLAY": xvfb_display, "QT_QPA_PLATFORM": "xcb",
           "SCRATCHFORMER_SETTINGS": str(tmp_path / "settings.ini")}
    cmd = [sys.executable, "-m", "scratchformer", "gui", "--model", "blog",
           "--source", "machine learning using PyTorch", "--target", "the answer",
           "--step", "encoder.0.self_attn.weights", "--screenshot", str(out)]
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stderr[-2000:]
    image = QImage(str(out))
    assert (image.width(), image.height()) == (1400, 900)
    image = image.convertToFormat(QImage.Format.Format_RGB32)
    pixels = np.frombuffer(image.constBits(), np.uint8).reshape(900, image.bytesPerLine() // 4, 4)[:, :1400, :3]
    colours = np.unique(pixels.reshape(-1, 3), axis=0)
    assert len(colours) > 200  # a drawn window (heatmap, diagram, text), not a blank frame
    b, g, r = pixels[..., 0].astype(int), pixels[..., 1].astype(int), pixels[..., 2].astype(int)
    highlight = (r > 190) & (g < 70) & (b < 70)  # the current diagram block's red border
    assert highlight.sum() > 200

def test_screenshot_of_a_missing_step_fails_with_one_sentence(tmp_path):
    out = tmp_path / "never.png"
    env = {**os.environ, "QT_QPA_PLATFORM": "offscreen", "SCRATCHFORMER_SETTINGS": str(tmp_path / "s.ini")}
    cmd = [sys.executable, "-m", "scratchformer", "gui", "--model", "blog", "--source", "hello there",
           "--step", "decoder.7.nothing", "--screenshot", str(out)]
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=240)
    assert done.returncode == 2
    assert "no step named 'decoder.7.nothing'" in done.stderr
    assert "Traceback" not in done.stderr
    assert not out.exists()


def test_screenshot_of_a_view_by_title_and_of_a_missing_one(tmp_path):
    env = {**os.environ, "QT_QPA_PLATFORM": "offscreen", "SCRATCHFORMER_SETTINGS": str(tmp_path / "s.ini")}
    base = [sys.executable, "-m", "scratchformer", "gui", "--model", "blog", "--source", "hello there",
            "--target", "the answer"]
    out = tmp_path / "neuron.png"
    done = subprocess.run(base + ["--view", "q·k NEURON view", "--screenshot", str(out)], env=env,
                          capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stderr[-2000:]
    assert QImage(str(out)).width() == 1400
    missing = tmp_path / "never.png"
    done = subprocess.run(base + ["--view", "Attention flow", "--screenshot", str(missing)], env=env,
                          capture_output=True, text=True, timeout=240)
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert "no view titled 'Attention flow'; the views are 'Step'," in done.stderr and "'Weighted sum'" in done.stderr
    assert not missing.exists()
