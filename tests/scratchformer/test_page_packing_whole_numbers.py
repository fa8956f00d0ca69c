"""The interactive page's packing of whole numbers: float16 holds every integer up to 2048 and no odd one past it
(2049 becomes 2048), so maps of whole numbers past 2048 (token ids, 50 256 = GPT-2's <|endoftext|>) are stored as
float32 and come back exact, both through packing.unpack_values and through the page's own viewer.js unpacking
(run in Node where it is installed); maps of ordinary fractional numbers stay float16, two bytes a value, so the
page's size budget holds."""

from __future__ import annotations

import base64
import gzip
import json
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from scratchformer.page import page_data, page_html, read_page
from scratchformer.page.packing import pack_values, storage_dtype, unpack_values

UNPACK = Path(__file__).resolve().parents[2] / "scratchformer" / "page" / "viewer_unpack.js"  # every page's

IDS = np.array([[[2049, 2051, 4097, 30243, 50256, 0, 7, 2048]]], dtype=np.float32)  # (heads, rows, cols)


def f16(values) -> np.ndarray:
    return np.asarray(values, dtype=np.float32).astype(np.float16).astype(np.float32)


def test_float16_really_cannot_hold_these_ids():
    """The premise, checked with numpy's own float16: below 2049 every integer survives, past it odd ones do not."""
    up_to = np.arange(2049, dtype=np.float32)
    np.testing.assert_array_equal(f16(up_to), up_to)
    assert f16(2049.0) == 2048.0 and f16(50256.0) != 50256.0 and f16(30243.0) != 30243.0
    assert np.any(f16(IDS) != IDS)


@pytest.mark.parametrize("ids", [IDS, IDS[..., :1], -IDS, np.array([[[2049.0, np.nan, -np.inf, 1.0]]], np.float32)],
                         ids=["ids", "2049 alone", "negative", "beside non-finite values"])
def test_whole_numbers_past_2048_are_float32_and_round_trip_exactly(ids):
    text, dtype = pack_values(ids)
    assert dtype == storage_dtype(ids) == "f32"
    raw = gzip.decompress(base64.b64decode(text))
    assert len(raw) == 4 * ids.size  # four bytes a value
    np.testing.assert_array_equal(unpack_values(text, dtype, ids.shape), ids)  # NaN and −∞ where they were


def test_whole_numbers_float16_holds_stay_float16_and_exact():
    ids = np.arange(2049, dtype=np.float32).reshape(1, 1, -1)  # an en-hi-sized vocabulary: 0 … 2048
    text, dtype = pack_values(ids)
    assert dtype == "f16"
    np.testing.assert_array_equal(unpack_values(text, dtype, ids.shape), ids)


def test_fractional_maps_stay_float16_even_past_2048():
    """Scores or activations of any size below float16's largest: fractional, with a few whole numbers (0, a
    round 2500) among them, which must not make the whole map float32."""
    rng = np.random.default_rng(1)
    values = (rng.standard_normal((4, 30, 30)) * 1500).astype(np.float32)
    values[0, 0, :3] = [0.0, 2500.0, -3000.0]
    values[1, 2, 2] = 3000.25
    assert np.abs(values).max() > 2048 and not np.all(values == np.round(values))
    text, dtype = pack_values(values)
    assert dtype == storage_dtype(values) == "f16"
    assert len(gzip.decompress(base64.b64decode(text))) == 2 * values.size  # two bytes a value: the budget's unit
    np.testing.assert_array_equal(unpack_values(text, dtype, values.shape), f16(values))
    small = rng.random((2, 5, 5)).astype(np.float32)  # attention weights
    assert storage_dtype(small) == "f16"


def viewer_unpack(chunks: list[tuple[str, str]]) -> list[list]:
    """Each (text, dtype) unpacked by the page's own code: viewer_unpack.js (base64, gunzip, the float16 table,
    the byte planes), which every page inlines first, run in Node. Non-finite values come back as strings."""
    node = shutil.which("node")
    if node is None:
        pytest.skip("Node.js is not installed, so the page's own JavaScript unpacking cannot be run here.")
    script = "globalThis.window = globalThis;\n" + UNPACK.read_text(encoding="utf-8") + """
      const input = JSON.parse(require("fs").readFileSync(0, "utf8"));
      (async () => {
        const out = [];
        for (const [text, dtype] of input) {
          const vals = await window.sfUnpack.values(text, dtype);
          out.push(Array.from(vals, (v) => (Number.isFinite(v) ? v : String(v))));
        }
        process.stdout.write(JSON.stringify(out));
      })();
    """
    done = subprocess.run([node, "-e", script], input=json.dumps(chunks), capture_output=True, text=True,
                          timeout=60, check=False)  # fmt: skip
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def as_array(values: list) -> np.ndarray:
    named = {"NaN": np.nan, "Infinity": np.inf, "-Infinity": -np.inf}
    return np.array([named[v] if isinstance(v, str) else v for v in values], dtype=np.float64)


@pytest.fixture(scope="module")
def blog_page():
    """The page of an untrained GPT-2-shaped model (a 50 257-token vocabulary): its token ids pass 2048."""
    from scratchformer.loading.bundle import load_model

    bundle = load_model("blog", "cpu")
    inputs = bundle.prepare_run("machine learning using PyTorch")
    _, trace = bundle.run(inputs, keep_output=False)
    return trace, read_page(page_html(page_data(bundle, trace, inputs, derive_cells=0)))


def test_the_pages_own_unpacking_gives_the_ids_back_exactly_and_the_fractions_at_float16(blog_page):
    fractions = np.array([[[0.1, -2.5, 2500.75, -np.inf]]], dtype=np.float32)
    arrays = [IDS, -IDS, fractions]
    packed = [pack_values(a) for a in arrays]
    assert [d for _, d in packed] == ["f32", "f32", "f16"]
    trace, (index, chunks) = blog_page
    for step in trace:  # and the blog page's own token-id maps, as the page carries them
        if step.kind == "tokens":
            info = index["maps"][f"{step.index}/0"]
            arrays.append(step.tensor[0].numpy().astype(np.float32))
            packed.append((chunks[info["chunk"]], info["dtype"]))
    assert len(arrays) == 5
    for array, got in zip(arrays, viewer_unpack(packed), strict=True):
        want = array if storage_dtype(array) == "f32" else f16(array)
        np.testing.assert_array_equal(as_array(got), want.ravel().astype(np.float64))


def test_a_pages_token_ids_past_2048_are_stored_exact_and_its_other_maps_in_float16(blog_page):
    trace, (index, chunks) = blog_page
    wide = []
    for step in trace:
        info = index["maps"][f"{step.index}/0"]
        if info["dtype"] == "f32":
            wide.append(step.name)
        if step.kind == "tokens":
            ids = step.tensor[0].numpy().astype(np.float32)
            assert ids.max() > 2048 and np.any(f16(ids) != ids), step.name  # float16 would change them
            stored = unpack_values(chunks[info["chunk"]], info["dtype"], tuple(info["shape"]))
            np.testing.assert_array_equal(stored.ravel(), ids.ravel(), err_msg=step.name)
    assert sorted(wide) == sorted(s.name for s in trace if s.kind == "tokens")  # only the ids are float32
