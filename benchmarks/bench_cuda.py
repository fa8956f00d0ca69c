"""The prepared CUDA check (issue 42): every number scratchformer computes on a GPU against the CPU's, in one call.

    python benchmarks/bench_cuda.py [--device cuda|cuda:N|cpu] [--small] [--layers N] [--skip-qwen]

On `--device` (default cuda) and on the CPU, with the same inputs, it
  - traces the bundled en-hi model (the sentence read with the CPU's greedy translation as the decoder input) and a
    random-weight folder of Qwen2.5-0.5B's shape (24 layers, d_model 896, 14 query and 2 key/value heads, d_ff
    4864, 151 936 tokens; written here with transformers' save_pretrained in bfloat16, opened in float32), and
    compares every step's tensor (the recomputed ones too, rerun on their own device);
  - checks that en-hi's greedy translation (KV cache) is the same tokens;
  - runs the activation-patching sweep `Run.sweep(corrupt_word=…, method="both")` makes (exact and attribution
    patching; analyses.sweep.compute on the models already open) on both models and compares the clean and
    corrupted metrics and every component's patched metric;
  - takes one training step (`scratchformer.training`'s Trainer: Adam on the first batch of the en-hi task, a
    model of `scratchformer train`'s default size, dropout off so both devices compute the same function) and
    compares the loss and every parameter's gradient;
  - writes the interactive page (`scratchformer export --format html`) of en-hi and compares every map in it.
It prints a table (time on each device, what was compared, the largest difference and where, the tolerance) and
a last line PASS or FAIL; the exit status is 0 for PASS, 1 for FAIL, 2 when the device cannot be used.

Differences are relative: max |device − CPU| over a tensor divided by the CPU tensor's largest |value| (non-finite
numbers must sit at the same places on both). Tolerances: 1e-3 for float32 arithmetic, whose rounding differs
between kernels; 2e-3 for the page, whose maps are stored in float16. A wrong kernel, mask or device move shows as
differences of order 1.

`--device cpu` is a dry run: the CPU against itself (every difference 0), which tests the script's plumbing on a
machine without a GPU; `--small` shrinks the Qwen-shaped folder (2 layers, d_model 64) and the training model (and
trains on the reverse task, whose data are made faster than en-hi's) so the dry run takes seconds
(tests/test_bench_cuda.py runs it). `--layers N` gives the Qwen-shaped folder N layers
instead of 24. On a loaded 2-core CPU the full-size dry run took 8.5 minutes: writing the folder 28 s, tracing it
4 s a side, its sweep (2,864 metric values) 160–180 s a side (docs/benchmarks.md).
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import io
import os
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402
import torch  # noqa: E402

SENTENCE = "the girl eats an apple"
PROMPT = "When Mary and John went to the store, John gave a drink to"
# The sweeps' corruption (word I, from 0, replaced: the same number of tokens) and metric tokens. en-hi's are its
# clean and corrupted runs' top tokens, as `sweep` chooses them (the device is then given the CPU's); the random
# Qwen-shaped model's top tokens may lie past the end of GPT-2's vocabulary, which names no such token, so the
# sweep compares the names' tokens.
SWEEP = {"en-hi": ("1=boy", None, None), "qwen": ("1=Anna", " Mary", " John")}
RTOL = 1e-3  # float32 on two devices: kernels add in different orders
PAGE_RTOL = 2e-3  # the page stores maps in float16 (about 1e-3 relative): one rounding step apart at most
QWEN = dict(vocab_size=151936, hidden_size=896, intermediate_size=4864, num_hidden_layers=24, num_attention_heads=14,
            num_key_value_heads=2, max_position_embeddings=32768, tie_word_embeddings=True,
            rope_parameters={"rope_type": "default", "rope_theta": 1000000.0}, bos_token_id=50256,
            eos_token_id=50256)  # fmt: skip
QWEN_SMALL = dict(QWEN, vocab_size=50257, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                  num_attention_heads=4, num_key_value_heads=2)  # fmt: skip
TRAIN = dict(d_model=128, heads=4, layers=2, d_ff=256, batch_tokens=1500)  # `scratchformer train`'s defaults
TRAIN_SMALL = dict(d_model=32, heads=2, layers=1, d_ff=64, batch_tokens=300)


@dataclass
class Row:
    """One line of the table: a check, its time on each device, and how far apart the two results are."""

    check: str
    ref_s: float
    dev_s: float
    compared: str  # what was compared, e.g. "535 steps"
    worst: float  # the largest relative difference (inf: shapes or non-finite places differ)
    where: str  # the step, parameter or component it was found in
    tolerance: float

    @property
    def ok(self) -> bool:
        return self.worst <= self.tolerance


# ---------------------------------------------------------------- comparing numbers


def relative_difference(got, want) -> float:
    """max |got − want| / max |want| over the finite numbers; inf when the shapes differ or a NaN or ±∞ of one is
    not at the same place in the other (0 where both are empty or all zero and equal)."""
    a = np.asarray(got.float().cpu() if torch.is_tensor(got) else got, dtype=np.float64)
    b = np.asarray(want.float().cpu() if torch.is_tensor(want) else want, dtype=np.float64)
    if a.shape != b.shape:
        return float("inf")
    for same_place in (np.isnan, np.isposinf, np.isneginf):
        if not np.array_equal(same_place(a), same_place(b)):
            return float("inf")
    finite = np.isfinite(b)
    if not finite.any():
        return 0.0
    diff = float(np.abs(a[finite] - b[finite]).max())
    scale = float(np.abs(b[finite]).max())
    return diff / scale if scale > 0 else diff


def worst_of(pairs: dict) -> tuple[float, str]:
    """(largest relative difference, its name) over {name: (got, want)}."""
    worst, where = 0.0, "every one equal"
    for name, (got, want) in pairs.items():
        d = relative_difference(got, want)
        if d > worst:
            worst, where = d, name
    return worst, where


def synchronise(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def timed(device: torch.device, work: Callable[[], object]) -> tuple[object, float]:
    """(what `work` returns, seconds it took, the device's queued work included)."""
    synchronise(device)
    start = time.perf_counter()
    out = work()
    synchronise(device)
    return out, time.perf_counter() - start


# ---------------------------------------------------------------- the checks


class Side:
    """One side of the comparison: its device, and each model opened on it once (load_model), with the time that
    took. The dry run has two CPU sides, so each model is still opened twice."""

    def __init__(self, device: torch.device) -> None:
        self.device = device
        self.opened: dict[str, object] = {}
        self.seconds: dict[str, float] = {}

    def get(self, spec: str):
        from scratchformer.loading.bundle import load_model

        if spec not in self.opened:
            self.opened[spec], self.seconds[spec] = timed(self.device, lambda: load_model(spec, self.device))
        return self.opened[spec]

    def time(self, work: Callable[[], object]) -> tuple[object, float]:
        return timed(self.device, work)


def compare_opened(label: str, spec: str, ref: Side, dev: Side) -> Row:
    """The model opened on each device: every parameter and buffer the same numbers once back on the CPU."""
    want, got = ref.get(spec).model.state_dict(), dev.get(spec).model.state_dict()
    ref_s, dev_s = ref.seconds[spec], dev.seconds[spec]
    if list(got) != list(want):
        return Row(label, ref_s, dev_s, "state_dict", float("inf"), "different parameter names", 0.0)
    worst, where = worst_of({name: (got[name], want[name]) for name in want})
    return Row(label, ref_s, dev_s, f"{len(want)} tensors", worst, where, 0.0)


def step_tensors(bundle, inputs) -> dict[str, torch.Tensor]:
    """Every step's tensor of one traced run, read back to the CPU (recomputed steps rerun on the model's device)."""
    _, trace = bundle.run(inputs)
    return {s.name: s.tensor for s in trace}


def compare_traces(label: str, spec: str, ref: Side, dev: Side, inputs) -> Row:
    """One traced run of `spec` on each device with the same inputs; every step compared."""
    want, ref_s = ref.time(lambda: step_tensors(ref.get(spec), inputs))
    got, dev_s = dev.time(lambda: step_tensors(dev.get(spec), inputs))
    if list(got) != list(want):
        return Row(label, ref_s, dev_s, "step names", float("inf"), "the two traces name different steps", RTOL)
    worst, where = worst_of({name: (got[name], want[name]) for name in want})
    return Row(label, ref_s, dev_s, f"{len(want)} steps", worst, where, RTOL)


def compare_greedy(ref: Side, dev: Side) -> tuple[Row, str]:
    """en-hi's greedy translation of SENTENCE (with the KV cache) on both devices: the same tokens or a failure.
    Returns the row and the CPU's translation, which the other en-hi checks read as their decoder input."""
    a, b = ref.get("en-hi"), dev.get("en-hi")
    want, ref_s = ref.time(lambda: a.prepare_run(SENTENCE).target_tokens[0])
    got, dev_s = dev.time(lambda: b.prepare_run(SENTENCE).target_tokens[0])
    worst = 0.0 if got == want else float("inf")
    where = " ".join(want[1:]) if got == want else f"{' '.join(got)} ≠ {' '.join(want)}"
    return Row("greedy en-hi (KV cache)", ref_s, dev_s, f"{len(want)} tokens", worst, where, 0.0), " ".join(want[1:])


def sweep_numbers(result: dict) -> dict[str, float]:
    """A sweep's numbers by name: the clean and corrupted metric, and each component's patched metric
    m_corrupt + effect · (m_clean − m_corrupt) and attribution estimate (effects divide by that gap, which would
    blow a small difference up)."""
    gap = result["clean"] - result["corrupt"]
    out = {"m_clean": result["clean"], "m_corrupt": result["corrupt"]}
    for group in ("heads", "positions", "mlp"):
        for i, entry in enumerate(result[group]):
            name = f"{group}[{i}] {entry.get('attention') or entry.get('step')} {entry.get('head', '')}".rstrip()
            out[f"{name} patched"] = result["corrupt"] + entry["effect"] * gap
            if "estimate" in entry:
                out[f"{name} estimate"] = result["corrupt"] + entry["estimate"] * gap
    return out


def compare_sweeps(label: str, spec: str, ref: Side, dev: Side, source: str) -> Row:
    """The sweep `Run.sweep(corrupt_word=…, method="both")` makes (exact and attribution patching) of the text read
    without continuing it (start_only), on each device; the device is given the answer and wrong tokens the CPU
    chose, so that a near tie between two top tokens cannot make the two sweeps measure different things."""
    from scratchformer.analyses import sweep

    word, answer, wrong = SWEEP["en-hi" if spec == "en-hi" else "qwen"]
    a, b = ref.get(spec), dev.get(spec)
    clean, corrupt = a.prepare_run(source, "", True), a.prepare(sweep.corrupted_text(source, None, word), "")
    answer, wrong = (None if t is None else f"id:{a.tgt_tokenizer.encode(t)[0]}" for t in (answer, wrong))
    want, ref_s = ref.time(lambda: sweep.compute(a, clean, corrupt, answer, wrong, method="both").to_dict())
    answer, wrong = (f"id:{want['metric'][k]['id']}" for k in ("answer", "wrong"))
    got, dev_s = dev.time(lambda: sweep.compute(b, clean, corrupt, answer, wrong, method="both").to_dict())
    if (got["metric"], got["tokens"]) != (want["metric"], want["tokens"]):
        return Row(label, ref_s, dev_s, "metric", float("inf"), "the metrics' tokens differ", RTOL)
    a_numbers, b_numbers = sweep_numbers(got), sweep_numbers(want)
    scale = max(abs(v) for v in b_numbers.values()) or 1.0  # one scale for all: they are values of one metric
    worst, where = max((abs(a_numbers[k] - b_numbers[k]) / scale, k) for k in b_numbers)
    where = where if worst > 0 else "every one equal"
    return Row(label, ref_s, dev_s, f"{len(b_numbers)} metric values", worst, where, RTOL)


def training_data(task: str, sizes: dict):
    """(TrainOptions, TrainData) of `scratchformer train --task TASK` with dropout off (so both devices compute the
    same function), one step; the data are made once and shared by both devices."""
    from scratchformer.training import load_data
    from scratchformer.training.options import TrainOptions

    opts = TrainOptions(task=task, epochs=1, max_steps=1, dropout=0.0, **sizes)  # nothing is written
    return opts, load_data(opts)


def train_once(device: torch.device, opts, data) -> tuple[float, dict[str, torch.Tensor]]:
    """One Adam step of the Trainer on the first batch, the model built as training.trainer.prepare builds it (the
    seed, then the weights made on the CPU and moved): (loss, every parameter's gradient)."""
    from scratchformer.training.options import build_config
    from scratchformer.training.trainer import Trainer
    from scratchformer.transformer.model import Transformer

    torch.manual_seed(opts.seed)
    model = Transformer(build_config(opts, data)).to(device)
    trainer = Trainer(model, data, dataclasses.replace(opts, device=str(device)), device)
    loss = trainer.global_step(trainer.epoch_batches(0)[0])
    return loss, {n: p.grad.detach().cpu() for n, p in model.named_parameters() if p.grad is not None}


def compare_training(ref: Side, dev: Side, task: str, sizes: dict) -> Row:
    (opts, data), data_s = ref.time(lambda: training_data(task, sizes))
    print(f"(made the {task} training data in {data_s:.1f} s)", flush=True)
    label = f"training step {task}"
    (want_loss, want), ref_s = ref.time(lambda: train_once(ref.device, opts, data))
    (got_loss, got), dev_s = dev.time(lambda: train_once(dev.device, opts, data))
    if list(got) != list(want):
        return Row(label, ref_s, dev_s, "gradients", float("inf"), "different parameters", RTOL)
    pairs = {"loss": (np.array([got_loss]), np.array([want_loss]))}
    pairs.update({f"grad {n}": (got[n], want[n]) for n in want})
    worst, where = worst_of(pairs)
    return Row(label, ref_s, dev_s, f"loss {want_loss:.4f}, {len(want)} gradients", worst, where, RTOL)


def page_maps(device: torch.device, target: str, out: Path) -> dict[str, np.ndarray]:
    """`scratchformer export --format html` of en-hi on `device`: every map the page holds, decoded."""
    from scratchformer.cli import main as cli
    from scratchformer.page import read_page
    from scratchformer.page.packing import unpack_values

    argv = ["export", "--model", "en-hi", "--source", SENTENCE, "--target", target, "--format", "html", "--out",
            str(out), "--device", str(device), "--overwrite"]  # fmt: skip
    with contextlib.redirect_stdout(io.StringIO()):
        if cli(argv) != 0:
            raise SystemExit(f"scratchformer {' '.join(argv)} failed.")
    index, chunks = read_page((out / "page.html").read_text(encoding="utf-8"))
    names = {str(i): s["name"] for i, s in enumerate(index["steps"])}
    return {f"{names.get(key.split('/')[0], key)} ({key})": unpack_values(chunks[m["chunk"]], m["dtype"],
            tuple(m["shape"])) for key, m in index["maps"].items()}  # fmt: skip


def compare_pages(ref: Side, dev: Side, target: str, tmp: Path) -> Row:
    want, ref_s = ref.time(lambda: page_maps(ref.device, target, tmp / "page-ref"))
    got, dev_s = dev.time(lambda: page_maps(dev.device, target, tmp / "page-dev"))
    if list(got) != list(want):
        return Row("page export en-hi", ref_s, dev_s, "maps", float("inf"), "the pages hold different maps", PAGE_RTOL)
    worst, where = worst_of({k: (got[k], want[k]) for k in want})
    return Row("page export en-hi", ref_s, dev_s, f"{len(want)} maps", worst, where, PAGE_RTOL)


def write_qwen_folder(directory: Path, shape: dict) -> Path:
    """A random-weight Qwen2 folder of `shape`, saved by transformers in bfloat16 as the real one is stored, with
    GPT-2's tokenizer (offline; its ids all fall inside the vocabulary). Built on the meta device and filled with
    normal(0, 0.02) directly: transformers' own initialisation takes longer than the rest of the check."""
    import transformers

    from scratchformer.loading.tokenizers import gpt2_tokenizer

    with torch.device("meta"):
        model = transformers.Qwen2ForCausalLM(transformers.Qwen2Config(**shape))
    model.to_empty(device="cpu")
    model.tie_weights()  # to_empty gave the tied output layer a tensor of its own
    generator = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for name, p in model.named_parameters():
            p.fill_(1.0) if "norm" in name else p.normal_(0.0, 0.02, generator=generator)
    model.to(torch.bfloat16).save_pretrained(str(directory))
    gpt2_tokenizer().hf.save_pretrained(str(directory))
    return directory


# ---------------------------------------------------------------- the run


def device_or_exit(name: str) -> torch.device:
    """The device to check, or exit status 2 with one sentence when it cannot be used here."""
    if name.startswith("cuda") and not torch.cuda.is_available():
        print(f"{name} was asked for, but PyTorch finds no CUDA device on this machine; run with --device cpu for a "
              "dry run of this check on the CPU.", file=sys.stderr)  # fmt: skip
        raise SystemExit(2)
    from scratchformer.errors import UserError
    from scratchformer.loading.device import resolve_device

    try:
        return resolve_device(name)
    except UserError as exc:
        print(exc, file=sys.stderr)
        raise SystemExit(2) from None


def describe(dev: torch.device) -> str:
    """What the run compares, for the table's first line."""
    if dev.type != "cuda":
        return f"{dev} against cpu (a dry run: the CPU against itself), torch {torch.__version__}"
    name = torch.cuda.get_device_name(dev)
    tf32 = torch.backends.cuda.matmul.allow_tf32
    return (f"{dev} ({name}, CUDA {torch.version.cuda}) against cpu, torch {torch.__version__}, "
            f"float32 matmul precision {torch.get_float32_matmul_precision()}{', TF32 on' if tf32 else ''}")


class Table:
    """The table, printed a line at a time as each check ends (the full-size run takes minutes)."""

    WIDTH = 24

    def __init__(self, dev: torch.device) -> None:
        self.rows: list[Row] = []
        other = "cpu again s" if dev.type == "cpu" else f"{dev} s"
        print(f"{'check':<{self.WIDTH}}  {'cpu s':>7}  {other:>11}  {'compared':<34}  {'worst rel.':>10}  "
              f"{'tolerance':>9}  ok    where", flush=True)  # fmt: skip

    def add(self, r: Row) -> None:
        self.rows.append(r)
        print(f"{r.check:<{self.WIDTH}}  {r.ref_s:7.2f}  {r.dev_s:11.2f}  {r.compared:<34}  {r.worst:10.3g}  "
              f"{r.tolerance:9.3g}  {'yes' if r.ok else 'NO ':<4}  {r.where}", flush=True)  # fmt: skip


def run_checks(args: argparse.Namespace, device: torch.device, tmp: Path) -> list[Row]:
    ref, dev, table = Side(torch.device("cpu")), Side(device), Table(device)
    greedy, translation = compare_greedy(ref, dev)
    table.add(compare_opened("open en-hi", "en-hi", ref, dev))
    table.add(greedy)
    read = ref.get("en-hi").prepare_run(SENTENCE, translation)  # the same decoder input on both devices
    table.add(compare_traces("trace en-hi", "en-hi", ref, dev, read))
    table.add(compare_sweeps("sweep en-hi", "en-hi", ref, dev, SENTENCE))
    if not args.skip_qwen:
        shape = dict(QWEN_SMALL if args.small else QWEN)
        shape["num_hidden_layers"] = args.layers or shape["num_hidden_layers"]
        folder, write_s = ref.time(lambda: str(write_qwen_folder(tmp / "qwen", shape)))
        print(f"(wrote a random Qwen2.5-0.5B-shaped folder: {shape['num_hidden_layers']} layers, d_model "
              f"{shape['hidden_size']}, {shape['vocab_size']} tokens, in {write_s:.1f} s)", flush=True)  # fmt: skip
        table.add(compare_opened("open qwen", folder, ref, dev))
        prompt = ref.get(folder).prepare_run(PROMPT, "", True)
        table.add(compare_traces("trace qwen", folder, ref, dev, prompt))
        table.add(compare_sweeps("sweep qwen", folder, ref, dev, PROMPT))
    table.add(compare_training(ref, dev, "reverse" if args.small else "en-hi", TRAIN_SMALL if args.small else TRAIN))
    table.add(compare_pages(ref, dev, translation, tmp))
    return table.rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda", help="the device checked against the CPU (default cuda)")
    parser.add_argument("--small", action="store_true",
                        help="a small Qwen-shaped folder, and a small model trained on the reverse task: seconds")
    parser.add_argument("--layers", type=int, help="layers of the Qwen-shaped folder (default 24; 2 with --small)")
    parser.add_argument("--skip-qwen", action="store_true", help="leave out the Qwen-shaped folder")
    args = parser.parse_args()
    dev = device_or_exit(args.device)
    if dev.type == "cuda":
        torch.zeros(1, device=dev).sum().item()  # start CUDA before any timing
    print(describe(dev), flush=True)
    with tempfile.TemporaryDirectory(prefix="bench-cuda-") as tmp:
        rows = run_checks(args, dev, Path(tmp))
    failed = [r.check for r in rows if not r.ok]
    if failed:
        print(f"FAIL: {len(failed)} of {len(rows)} checks differ beyond their tolerance on {dev}: {', '.join(failed)}")
        return 1
    print(f"PASS: all {len(rows)} checks on {dev} agree with the CPU within their tolerances")
    return 0


if __name__ == "__main__":
    sys.exit(main())
