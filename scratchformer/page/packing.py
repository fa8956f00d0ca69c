"""How the page carries its numbers: arrays as float16 (or float32) with their bytes shuffled, gzip, base64.

A map of (heads, rows, cols) values is written in row-major order as IEEE half floats (float16: 11 significant
bits, about 3.3 decimal digits, exactly representing −∞, +∞ and NaN), unless its numbers need more: token ids
past 2048 and values past float16's largest (65 504) stay float32. Before compressing, the bytes are shuffled
into planes (every value's first byte, then every value's second byte, …), the filter HDF5 and Blosc call
"shuffle": the high bytes (sign, exponent, top of the mantissa) repeat a lot and deflate well once they sit next
to each other, while the low bytes are nearly random. For MiniLM's attention maps this saves about a tenth over
plain float16. The browser undoes it with DecompressionStream('gzip') and one pass over the planes.

JSON (the index: steps, labels, explanations, derivations) is gzipped and base64-encoded the same way. The gzip
header carries no time stamp, so the same run always gives the same page.
"""

from __future__ import annotations

import base64
import gzip
import json

import numpy as np

FLOAT16_MAX = 65504.0
FLOAT16_EXACT_INTEGERS = 2048  # every integer up to 2¹¹ has an exact float16
LEVEL = 6  # deflate level: 9 is twice as slow for under 1 % less


def storage_dtype(values: np.ndarray) -> str:
    """'f16' unless float16 would change what the map means: a value past its range, or whole numbers (token ids)
    past those it holds exactly; then 'f32'."""
    finite = values[np.isfinite(values)]
    if finite.size == 0:
        return "f16"
    biggest = float(np.abs(finite).max())
    if biggest > FLOAT16_MAX:
        return "f32"
    if biggest > FLOAT16_EXACT_INTEGERS and bool(np.all(finite == np.round(finite))):
        return "f32"
    return "f16"


def shuffled(values: np.ndarray, dtype: str) -> bytes:
    """The values' little-endian bytes, gathered into byte planes."""
    stored = np.ascontiguousarray(values, dtype="<f2" if dtype == "f16" else "<f4")
    width = stored.itemsize
    planes = stored.reshape(-1).view(np.uint8).reshape(-1, width)  # (n, width)
    return np.ascontiguousarray(planes.T).tobytes()  # (width, n): plane by plane


def unshuffled(data: bytes, dtype: str) -> np.ndarray:
    """shuffled's inverse: the values (1-D, float32)."""
    width = 2 if dtype == "f16" else 4
    planes = np.frombuffer(data, dtype=np.uint8).reshape(width, -1)  # (width, n)
    raw = np.ascontiguousarray(planes.T).reshape(-1)
    return raw.view("<f2" if dtype == "f16" else "<f4").astype(np.float32)


def compress(data: bytes) -> str:
    """gzip (no time stamp) then base64: text that sits inside the HTML."""
    return base64.b64encode(gzip.compress(data, compresslevel=LEVEL, mtime=0)).decode("ascii")


def decompress(text: str) -> bytes:
    return gzip.decompress(base64.b64decode(text))


def pack_values(values: np.ndarray) -> tuple[str, str]:
    """(text, dtype) for an array of any shape (the page keeps the shape beside it)."""
    dtype = storage_dtype(values)
    return compress(shuffled(values, dtype)), dtype


def unpack_values(text: str, dtype: str, shape: tuple[int, ...]) -> np.ndarray:
    """pack_values' inverse, as float32 of `shape` (tests and tools read pages with it)."""
    return unshuffled(decompress(text), dtype).reshape(shape)


def pack_json(obj) -> str:
    """Compact UTF-8 JSON, gzipped and base64-encoded. Non-finite floats must be replaced first (JSON has none)."""
    text = json.dumps(obj, ensure_ascii=False, separators=(",", ":"), allow_nan=False, default=_plain)
    return compress(text.encode("utf-8"))


def _plain(value):
    """numpy's scalars (a bool_ from a comparison, an int64 id) as the Python values JSON knows."""
    if isinstance(value, np.generic):
        return value.item()
    raise TypeError(f"Object of type {type(value).__name__} is not JSON serializable")


def unpack_json(text: str):
    return json.loads(decompress(text).decode("utf-8"))


def finite_or_text(x: float) -> float | str:
    """A float for JSON: finite as it is (rounded to float32's digits), −∞ / +∞ / NaN as the strings the viewer
    reads back ('-inf', 'inf', 'nan')."""
    x = float(x)
    if x != x:
        return "nan"
    if x in (float("inf"), float("-inf")):
        return "inf" if x > 0 else "-inf"
    return float(f"{x:.7g}")
