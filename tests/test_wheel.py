"""An installed wheel works outside the repository: built offline from a copy of the source tree, installed with
pip into a private folder, then run from another directory, where it must find its own bundled models, tokenizer
files and icon (not the checkout's, which the editable install would otherwise supply)."""

from __future__ import annotations

import importlib.metadata
import importlib.util
import json
import os
import shutil
import struct
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
# What the wheel is built from: the files pyproject.toml packages (a copy, so that concurrent runs never share the
# checkout's build/ folder and files deleted from the checkout cannot linger in it).
SOURCES = ("pyproject.toml", "README.md", "scratchformer", "app", "resources")
BUNDLED_MODELS = ("en-hi", "copy", "reverse", "sort")
MODEL_FILES = ("config.json", "model.safetensors", "src_tokenizer/tokenizer.json", "tgt_tokenizer/tokenizer.json",
               "src_tokenizer/scratchformer_tokenizer.json", "tgt_tokenizer/scratchformer_tokenizer.json")


def _setuptools_builds_wheels() -> bool:
    """setuptools ≥ 70.1 has bdist_wheel itself; older ones need the `wheel` package. (Asked of the metadata: importing
    setuptools into the test process would fight over distutils.)"""
    try:
        version = tuple(int(p) for p in importlib.metadata.version("setuptools").split(".")[:2] if p.isdigit())
    except importlib.metadata.PackageNotFoundError:
        return False
    return version >= (70, 1) or importlib.util.find_spec("wheel") is not None


pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("pip") is None or not _setuptools_builds_wheels(),
    reason="building a wheel offline needs pip and setuptools' bdist_wheel in this Python",
)


def _pip(*args: str, cwd: Path) -> None:
    proc = subprocess.run([sys.executable, "-m", "pip", *args, "--no-index", "--no-deps", "--quiet", "--no-cache-dir",
                           "--disable-pip-version-check"], cwd=cwd, capture_output=True, text=True, timeout=180)
    assert proc.returncode == 0, proc.stdout + proc.stderr


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    """(wheel, site folder, a working directory outside the repository, environment that puts the site first)."""
    root = tmp_path_factory.mktemp("wheel")
    src = root / "src"
    src.mkdir()
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc", "*.egg-info")
    for name in SOURCES:
        path = REPO / name
        if path.is_dir():
            shutil.copytree(path, src / name, ignore=ignore)
        else:
            shutil.copy2(path, src / name)
    dist = root / "dist"
    _pip("wheel", ".", "--no-build-isolation", "-w", str(dist), cwd=src)
    wheel = next(dist.glob("scratchformer-*.whl"))
    site = root / "site"
    _pip("install", "--target", str(site), str(wheel), cwd=root)
    work = root / "elsewhere"
    work.mkdir()
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONSAFEPATH", "DISPLAY",
                                                              "WAYLAND_DISPLAY")}
    env.update(PYTHONPATH=str(site), QT_QPA_PLATFORM="offscreen", HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1",
               SCRATCHFORMER_SETTINGS=str(root / "settings.ini"), OMP_NUM_THREADS="1")
    return wheel, site, work, env


def _run(argv, work, env, timeout=120):
    proc = subprocess.run(argv, cwd=work, env=env, capture_output=True, text=True, timeout=timeout)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc.stdout


def test_wheel_bundles_models_tokenizers_and_icon(installed):
    wheel = installed[0]
    names = set(zipfile.ZipFile(wheel).namelist())
    for model in BUNDLED_MODELS:
        for part in MODEL_FILES:
            assert f"resources/models/{model}/{part}" in names
    assert "resources/icons/scratchformer.svg" in names
    for model in ("copy", "reverse", "en-hi"):  # the Training tab's snapshots ship too
        snapshots = {n for n in names if n.startswith(f"resources/models/{model}/snapshots/")}
        assert sum(n.endswith("/model.safetensors") for n in snapshots) >= 4, model
        assert sum(n.endswith("/config.json") for n in snapshots) >= 4, model
    assert {"app/main.py", "scratchformer/cli.py", "scratchformer/commands/install_desktop.py"} <= names
    assert {f"scratchformer/page/viewer.{ext}" for ext in ("html", "css", "js")} <= names  # the page's viewer
    entry_points = next(n for n in names if n.endswith(".dist-info/entry_points.txt"))
    assert "scratchformer = scratchformer.cli:main" in zipfile.ZipFile(wheel).read(entry_points).decode()


def test_installed_package_is_imported_from_the_site_not_the_checkout(installed):
    _, site, work, env = installed
    code = ("import json, app, resources, scratchformer, scratchformer.loading.bundle as b, app.main as m; "
            "print(json.dumps([scratchformer.__file__, resources.__file__, app.__file__, str(m.icon_path()), "
            "sorted(b.bundled_models()), str(b.resources_dir())]))")
    files = json.loads(_run([sys.executable, "-c", code], work, env))
    *paths, models, res = files
    for path in (*paths, res):
        assert Path(path).resolve().is_relative_to(site.resolve()), path
    assert Path(files[3]).is_file()
    assert set(BUNDLED_MODELS) <= set(models)


def test_installed_trace_runs_from_another_directory(installed):
    _, site, work, env = installed
    out = _run([sys.executable, "-m", "scratchformer", "trace", "--model", "en-hi", "--source", "we are friends",
                "--json"], work, env)
    data = json.loads(out)
    assert data["model"]["d_model"] == 128
    assert data["source_tokens"][0][:3] == ["we", "are", "friends"]
    names = {s["name"] for s in data["steps"]}
    assert {"encoder.0.self_attn.weights", "decoder.1.cross_attn.weights", "generator.probs"} <= names


def test_installed_console_script_takes_a_screenshot(installed):
    _, site, work, env = installed
    script = site / "bin" / "scratchformer"
    argv = [str(script)] if script.is_file() else [sys.executable, "-m", "scratchformer"]
    out = _run([*argv, "gui", "--model", "en-hi", "--source", "we are friends", "--screenshot", "out.png"], work, env,
               timeout=180)
    png = (work / "out.png").read_bytes()
    assert out.startswith("saved ") and png[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = struct.unpack(">II", png[16:24])
    assert width >= 800 and height >= 500


def test_installed_export_writes_the_interactive_page_with_its_viewer(installed):
    _, site, work, env = installed
    out = _run([sys.executable, "-m", "scratchformer", "export", "--model", "en-hi", "--source", "we are friends",
                "--format", "html", "--out", "page"], work, env)
    assert out.startswith("Wrote ")
    page = (work / "page" / "page.html").read_text(encoding="utf-8")
    viewer = (site / "scratchformer" / "page" / "viewer.js").read_text(encoding="utf-8")
    assert viewer in page and 'id="sf-index"' in page  # the installed viewer, inlined
