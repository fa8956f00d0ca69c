"""The example notebook runs headless and offline, and shows what it promises: the translation, the steps table,
an inline figure (SVG) and the interactive page, with no network address anywhere in its output."""

import os
import re
import sys
from pathlib import Path

import pytest

nbformat = pytest.importorskip("nbformat", reason="nbformat is a test extra (pip install -e .[test])")
nbclient = pytest.importorskip("nbclient", reason="nbclient is a test extra (pip install -e .[test])")

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOK = ROOT / "examples" / "python-api.ipynb"


def _outputs(cell) -> dict:
    """mime type → data of a code cell's displayed outputs (stdout text under "stream")."""
    out = {}
    for o in cell.get("outputs", []):
        if o["output_type"] == "stream":
            out["stream"] = out.get("stream", "") + o["text"]
        elif o["output_type"] in ("execute_result", "display_data"):
            out.update(o["data"])
        elif o["output_type"] == "error":
            pytest.fail(f"cell failed: {o['ename']}: {o['evalue']}")
    return out


def test_the_example_notebook_runs_offline(tmp_path, monkeypatch):
    nb = nbformat.read(NOTEBOOK, as_version=4)
    assert all(not c.get("outputs") for c in nb.cells if c.cell_type == "code"), "commit the notebook without outputs"
    monkeypatch.setenv("QT_QPA_PLATFORM", "offscreen")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    client = nbclient.NotebookClient(nb, timeout=240, kernel_name="python3", resources={"metadata": {"path": tmp_path}})
    client.km = client.kernel_manager_class(kernel_name="python3")
    client.km.kernel_cmd = [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"]
    client.execute()
    code = [_outputs(c) for c in nb.cells if c.cell_type == "code"]
    assert "लड़की" in code[0]["text/plain"]  # the translation
    assert "decoder.1.cross_attn.weights" in code[1]["text/html"]  # the steps table
    assert "torch.Size([1, 4, 5, 6])" in code[2]["text/plain"]
    assert "<svg" in code[3]["image/svg+xml"] and "image/png" in code[3]
    assert "Why" in code[4]["stream"] or "weights" in code[4]["stream"]
    assert "लड़की" in code[5]["text/plain"]  # the lens reads the translation's first word
    page = code[6]["text/html"]
    assert "<iframe" in page and "srcdoc" in page
    every = "".join(str(v) for out in code for v in out.values())
    assert not re.search(r"(src|href)\s*=\s*[\"']?(https?:)?//", every)  # nothing loads from a network address
