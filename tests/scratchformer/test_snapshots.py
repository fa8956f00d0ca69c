"""Training snapshots (`train --snapshots N`, `--model DIR@step-NNNNNN`): where they are taken, what they hold,
how they load, and that they show attention forming — a short copy-task run (d_model 32, 1 + 1 layers, 300
steps, a few seconds) whose cross-attention moves onto the gold diagonal between its first and last snapshot."""

from __future__ import annotations

import json
import os
import random
import socket
import sys
from pathlib import Path

import pytest
import torch
import torch.multiprocessing as mp
from safetensors.torch import load_file

from scratchformer.cli import main
from scratchformer.errors import UserError
from scratchformer.loading.bundle import examples_of, load_model, snapshots_of, split_snapshot
from scratchformer.loading.checkpoint import load_checkpoint, save_checkpoint, snapshot_dirs
from scratchformer.running.decoding import greedy
from scratchformer.tasks import read_pairs_tsv
from scratchformer.tasks.algorithmic import generate_task
from scratchformer.training import snapshot_steps
from scratchformer.training.evaluation import evaluate

STEPS, N = 300, 6
TINY = ["--epochs", "40", "--batch-tokens", "200", "--d-model", "32", "--heads", "2", "--layers", "1", "--d-ff",
        "64", "--dropout", "0", "--warmup", "50", "--seed", "0", "--threads", "1", "--quiet"]


def _copy_tsv(path: Path, n: int = 800) -> Path:
    """Copy pairs over 8 letters with their gold alignment (target word i comes from source word i)."""
    rng = random.Random(0)
    seqs = sorted({" ".join(rng.choice("abcdefgh") for _ in range(rng.randint(3, 7))) for _ in range(n)})
    path.write_text("".join(f"{s}\t{s}\t{' '.join(map(str, range(len(s.split()))))}\n" for s in seqs),
                    encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    root = tmp_path_factory.mktemp("snapshots")
    tsv = _copy_tsv(root / "copy.tsv")
    out = root / "copy"
    threads = torch.get_num_threads()
    assert main(["train", "--data", str(tsv), "--out", str(out), "--max-steps", str(STEPS), "--snapshots", str(N),
                 "--name", "tiny-copy", *TINY]) == 0
    torch.set_num_threads(threads)  # --threads 1 was set for this whole process
    return out, tsv


def test_the_schedule_is_increasing_denser_early_and_ends_at_the_last_step():
    assert snapshot_steps(1056, 6) == [33, 66, 132, 264, 528, 1056]  # each twice the one before
    for total in (1, 5, 7, 40, 300, 1056, 14_000):
        for n in (1, 2, 6, 20):
            steps = snapshot_steps(total, n)
            assert len(steps) == min(n, total) and steps[-1] == total and steps[0] >= 1
            gaps = [b - a for a, b in zip([0, *steps], steps)]
            assert all(g >= 1 for g in gaps)  # strictly increasing
            assert all(b >= a - 1 for a, b in zip(gaps, gaps[1:]))  # gaps widen (up to rounding): denser early
    assert snapshot_steps(300, 0) == [] and snapshot_steps(0, 6) == []


def test_snapshots_are_written_as_checkpoints_sharing_the_runs_tokenizers(run):
    out, _ = run
    found = snapshot_dirs(out)
    assert list(found) == snapshot_steps(STEPS, N) and list(found)[-1] == STEPS
    steps = list(found)
    gaps = [b - a for a, b in zip(steps, steps[1:])]
    assert gaps == sorted(gaps) and gaps[-1] > 4 * gaps[0]  # denser early
    for step, path in found.items():
        assert path == out / "snapshots" / f"step-{step:06d}"
        assert sorted(p.name for p in path.iterdir()) == ["config.json", "model.safetensors"]  # no tokenizer copies
        assert json.loads((path / "config.json").read_text(encoding="utf-8"))["extra"]["training_step"] == step
    model, src_tok, tgt_tok = load_checkpoint(found[steps[0]])
    _, run_src, run_tgt = load_checkpoint(out)
    assert src_tok.vocab_size == run_src.vocab_size and tgt_tok.token_id("a") == run_tgt.token_id("a")
    # the snapshots differ from each other: training moved the weights between them
    first, last = (load_file(str(found[s] / "model.safetensors")) for s in (steps[0], steps[-1]))
    assert any(not torch.equal(first[k], last[k]) for k in first)
    assert not any(p.name.startswith(".") for p in (out / "snapshots").iterdir())  # no temporary folder left


def test_training_json_has_the_curve_and_the_snapshots(run):
    out, _ = run
    record = json.loads((out / "training.json").read_text(encoding="utf-8"))
    curve = record["curve"]
    steps = [p["step"] for p in curve]
    assert steps == sorted(set(steps)) and steps[-1] == STEPS
    losses = [p["train_loss"] for p in curve if "train_loss" in p]
    assert len(losses) >= 100 and sum(losses[-10:]) < 0.6 * sum(losses[:10])
    validated = {p["step"] for p in curve if "valid_loss" in p and "valid_token_accuracy" in p}
    assert set(snapshot_steps(STEPS, N)) <= validated
    assert {h["step"] for h in record["history"]} <= validated  # the epoch ends too
    snaps = record["snapshots"]
    assert [s["step"] for s in snaps] == snapshot_steps(STEPS, N)
    for s in snaps:
        assert s["path"] == f"snapshots/step-{s['step']:06d}"
        assert s["train_loss"] > 0 and s["valid_loss"] > 0 and 0 <= s["valid_token_accuracy"] <= 1
    assert snaps[-1]["valid_loss"] < snaps[0]["valid_loss"]
    assert snaps[-1]["valid_token_accuracy"] > snaps[0]["valid_token_accuracy"] + 0.5
    listed = snapshots_of(str(out))
    assert [(s.step, s.valid_loss) for s in listed] == [(s["step"], s["valid_loss"]) for s in snaps]


def test_a_snapshot_loads_by_model_spec(run):
    out, _ = run
    first = snapshot_steps(STEPS, N)[0]
    spec = f"{out}@step-{first:06d}"
    assert split_snapshot(spec) == (str(out), first)
    assert split_snapshot("reverse") == ("reverse", None)
    bundle = load_model(spec)
    assert bundle.name == f"tiny-copy@step-{first:06d}" and bundle.model.config.name == "tiny-copy"
    assert next(bundle.model.parameters()).dtype == torch.float32
    assert bundle.src_tokenizer.token_id("h") is not None
    assert load_model(f"{out}@step-{first}").name == bundle.name  # the zeros are optional
    assert examples_of(spec) == examples_of(str(out))
    direct = load_model(str(out / "snapshots" / f"step-{first:06d}"))  # the snapshot's folder itself
    assert direct.name == bundle.name and direct.src_tokenizer.vocab_size == bundle.src_tokenizer.vocab_size


def test_cross_attention_moves_onto_the_diagonal_between_the_first_and_the_last_snapshot(run):
    out, tsv = run
    pairs = read_pairs_tsv(tsv)[:120]
    accuracy = {}
    for snap in snapshots_of(str(out)):
        result = evaluate(load_model(snap.spec), pairs, "copy", alignment_only=True)
        accuracy[snap.step] = result.layer_accuracy[0]  # argmax of the heads-averaged row on the gold source word
    first, last = accuracy[min(accuracy)], accuracy[max(accuracy)]
    assert first < 0.3, accuracy  # near chance: 3–7 source words plus </s>
    assert last > 0.7, accuracy
    assert max(v for s, v in accuracy.items() if s <= STEPS // 4) < last - 0.3, accuracy


def test_an_unknown_snapshot_gets_one_sentence_listing_the_steps(run, capsys):
    out, _ = run
    with pytest.raises(UserError) as info:
        load_model(f"{out}@step-000010")
    message = str(info.value)
    listed = ", ".join(str(s) for s in snapshot_steps(STEPS, N)[:-1]) + f" and {STEPS}"
    assert "no snapshot at step 10" in message and listed in message and message.count(". ") == 0
    for argv in (["trace", "--model", f"{out}@step-000010", "--source", "a b c"],
                 ["evaluate", "--model", f"{out}@step-000010", "--data", str(run[1]), "--limit", "3"],
                 ["translate", "--model", "copy@step-999999", "--source", "1 2 3"]):
        assert main(argv) == 2
        err = capsys.readouterr().err.strip()
        assert err.startswith("scratchformer: ") and "\n" not in err and "no snapshot at step" in err, err
    with pytest.raises(UserError, match="random weights and no training snapshots"):
        load_model("blog@step-000001")
    with pytest.raises(UserError, match="Unknown model"):
        load_model("no-such-model@step-000001")


def test_a_run_without_snapshots_says_so(tmp_path):
    tsv = _copy_tsv(tmp_path / "c.tsv", 60)
    out = tmp_path / "plain"
    assert main(["train", "--data", str(tsv), "--out", str(out), "--max-steps", "3", *TINY]) == 0
    assert snapshots_of(str(out)) == [] and not (out / "snapshots").exists()
    with pytest.raises(UserError, match="has no training snapshots"):
        load_model(f"{out}@step-000003")


def test_a_run_stopped_early_keeps_its_last_step_and_a_new_best_checkpoint_keeps_the_snapshots(tmp_path,
                                                                                               monkeypatch):
    import scratchformer.training.trainer as trainer_module

    tsv = _copy_tsv(tmp_path / "c.tsv", 200)
    out = tmp_path / "stopped"
    stop_at = 37  # not a planned snapshot step: as if --max-minutes ran out there
    monkeypatch.setattr(trainer_module.Trainer, "out_of_time", lambda self, start: self.step >= stop_at)
    assert main(["train", "--data", str(tsv), "--out", str(out), "--snapshots", "4", *TINY, "--epochs", "10"]) == 0
    found = snapshot_dirs(out)
    assert list(found)[-1] == stop_at and len(found) <= 4 + 1
    record = json.loads((out / "training.json").read_text(encoding="utf-8"))
    assert record["stopped"] == "max_minutes" and record["snapshots"][-1]["step"] == stop_at
    assert record["epochs_done"] >= 1  # a best checkpoint replaced the folder after the first snapshots ...
    assert all(s["step"] in found for s in record["snapshots"])  # ... and they are all still there
    assert (out / "resume" / "trainer_state.json").is_file()
    load_model(f"{out}@step-{stop_at:06d}")


def _saved_twice(tmp_path, dtype):
    """A small seeded model with tied output weights, saved as a snapshot in `dtype` and again in float32."""
    from scratchformer.transformer.config import TransformerConfig
    from scratchformer.transformer.model import Transformer

    torch.manual_seed(0)
    model = Transformer(TransformerConfig(d_model=64, n_heads=2, d_ff=128, n_encoder_layers=1, n_decoder_layers=1,
                                          src_vocab_size=200, tgt_vocab_size=200, max_len=16, tie_output=True))
    path = save_checkpoint(tmp_path / "run" / "snapshots" / "step-000001", model, None, None, dtype=dtype)
    full = save_checkpoint(tmp_path / "run" / "snapshots" / "step-000002", model, None, None)
    return model, path, full


def test_float16_snapshots_load_back_as_float32(tmp_path):
    model, path, full = _saved_twice(tmp_path, torch.float16)
    assert {t.dtype for t in load_file(str(path / "model.safetensors")).values()} == {torch.float16}
    assert (path / "model.safetensors").stat().st_size < 0.55 * (full / "model.safetensors").stat().st_size
    loaded, _, _ = load_checkpoint(path)
    for (name, a), (_, b) in zip(model.state_dict().items(), loaded.state_dict().items()):
        assert b.dtype == torch.float32 and torch.allclose(a, b, rtol=1e-3, atol=1e-4), name
    assert next(model.parameters()).dtype == torch.float32  # the model itself was not converted


def test_int8_snapshots_are_a_quarter_the_size_and_load_back_close_to_the_float32_weights(tmp_path):
    from scratchformer.loading.quantize import SCALE, is_int8

    model, path, full = _saved_twice(tmp_path, torch.int8)
    weights = path / "model.safetensors"
    assert is_int8(weights) and not is_int8(full / "model.safetensors")
    stored = load_file(str(weights))
    matrices = [n for n, t in stored.items() if t.dtype == torch.int8]
    assert matrices and all(n + SCALE in stored for n in matrices)
    assert weights.stat().st_size < 0.3 * (full / "model.safetensors").stat().st_size
    loaded, _, _ = load_checkpoint(path)
    assert loaded.generator.proj.weight is loaded.tgt_embed.tokens.weight  # the tie survives the round trip
    for (name, a), (_, b) in zip(model.state_dict().items(), loaded.state_dict().items()):
        assert b.dtype == torch.float32, name
        row_max = a.abs().reshape(a.shape[0], -1).amax(1).reshape(-1, *[1] * (a.dim() - 1)) if a.dim() > 1 else None
        bound = row_max / 127 / 2 + 1e-7 if row_max is not None else a.abs() * 1e-3 + 1e-6  # half a step / float16
        assert ((a - b).abs() <= bound).all(), name
    src = torch.tensor([[5, 9, 17, 3]])
    tgt = torch.tensor([[1, 8, 12]])
    with torch.no_grad():
        p_full, p_int8 = (m.eval()(src, tgt).softmax(-1) for m in (model, loaded))
    assert (p_full - p_int8).abs().max() < 2e-3  # what a viewer shows does not visibly change


def test_a_damaged_int8_snapshot_gets_one_sentence(tmp_path):
    from scratchformer.transformer.config import TransformerConfig
    from scratchformer.transformer.model import Transformer

    model = Transformer(TransformerConfig(d_model=32, n_heads=2, d_ff=64, n_encoder_layers=1, n_decoder_layers=1,
                                          src_vocab_size=50, tgt_vocab_size=50, max_len=8))
    path = save_checkpoint(tmp_path / "run" / "snapshots" / "step-000001", model, None, None, dtype=torch.int8)
    weights = path / "model.safetensors"
    intact = weights.read_bytes()
    weights.write_bytes(intact[: len(intact) // 2])
    with pytest.raises(UserError, match="cannot be read"):
        load_checkpoint(path)
    from safetensors.torch import save_file

    from scratchformer.loading.quantize import FORMAT_KEY, INT8_ROWS, SCALE

    weights.write_bytes(intact)
    stored = load_file(str(weights))
    scaled = next(n for n in stored if n.endswith(SCALE))
    del stored[scaled]  # an int8 matrix without its scales would load as raw integers: refused instead
    save_file(stored, str(weights), metadata={"format": "pt", FORMAT_KEY: INT8_ROWS})
    with pytest.raises(UserError, match="without its scales"):
        load_checkpoint(path)


def test_snapshots_until_a_step_int8_snapshots_and_float16_weights(tmp_path):
    assert snapshot_steps(2030, 4, until=256) == [32, 64, 128, 256]
    assert snapshot_steps(300, 4, until=5000) == snapshot_steps(300, 4)
    tsv = _copy_tsv(tmp_path / "c.tsv", 300)
    out = tmp_path / "early"
    assert main(["train", "--data", str(tsv), "--out", str(out), "--max-steps", "120", "--snapshots", "3",
                 "--snapshots-until", "60", "--snapshot-dtype", "int8", "--weights-dtype", "float16",
                 *TINY]) == 0
    found = snapshot_dirs(out)
    assert list(found) == [15, 30, 60]  # none at the final step 120: the model itself is that
    record = json.loads((out / "training.json").read_text(encoding="utf-8"))
    assert record["steps"] == 120 and [s["step"] for s in record["snapshots"]] == [15, 30, 60]
    assert {t.dtype for t in load_file(str(out / "model.safetensors")).values()} == {torch.float16}
    assert torch.int8 in {t.dtype for t in load_file(str(found[60] / "model.safetensors")).values()}
    final = load_model(str(out))
    assert next(final.model.parameters()).dtype == torch.float32
    snap = load_model(f"{out}@step-000060")
    assert snap.src_tokenizer.vocab_size == final.src_tokenizer.vocab_size


def test_train_refuses_a_snapshot_span_below_one(tmp_path, capsys):
    assert main(["train", "--task", "copy", "--out", str(tmp_path / "o"), "--snapshots", "3",
                 "--snapshots-until", "0"]) == 2
    assert "--snapshots-until must be a step of 1 or more" in capsys.readouterr().err


def test_train_refuses_a_negative_snapshot_count(tmp_path, capsys):
    assert main(["train", "--task", "copy", "--out", str(tmp_path / "o"), "--snapshots", "-1"]) == 2
    assert "--snapshots must be 0 or more" in capsys.readouterr().err


# ------------------------------------------------------------------------------------- the bundled models


@pytest.mark.parametrize("name", ["copy", "reverse"])
def test_bundled_snapshots_load_and_show_attention_forming(name):
    snaps = snapshots_of(name)
    assert len(snaps) >= 4
    steps = [s.step for s in snaps]
    assert steps == sorted(steps)
    record = json.loads((snaps[0].path.parent.parent / "training.json").read_text(encoding="utf-8"))
    assert steps[-1] == record["steps"] and [s["step"] for s in record["snapshots"]] == steps
    first, last = load_model(snaps[0].spec), load_model(snaps[-1].spec)
    assert last.name == f"{name}@step-{steps[-1]:06d}" and last.origin == "bundled"
    pairs = generate_task(name, 16, seed=2024)
    start, end = (evaluate(b, pairs, "fresh", alignment_only=True).best_head[2] for b in (first, last))
    assert start < 0.6 < 0.9 <= end
    digits = "3 1 4 1 5".split()
    ids = greedy(last, last.encode_source(" ".join(digits)), max_len=last.config.max_len)
    assert last.tgt_tokenizer.token_strings(ids) == (digits if name == "copy" else digits[::-1])


def test_bundled_en_hi_snapshots_show_its_word_alignment_forming():
    from scratchformer.loading.quantize import is_int8
    from scratchformer.tasks import load_task_splits

    snaps = snapshots_of("en-hi")
    steps = [s.step for s in snaps]
    record = json.loads((snaps[0].path.parent.parent / "training.json").read_text(encoding="utf-8"))
    assert len(snaps) >= 4 and steps == sorted(steps) and [s["step"] for s in record["snapshots"]] == steps
    assert steps[-1] < record["steps"] / 4  # early in the run, where the alignment forms; the model shows the rest
    assert all(is_int8(s.path / "model.safetensors") for s in snaps)
    pairs = load_task_splits("en-hi")["test"][:64]
    first, last, final = (load_model(spec) for spec in (snaps[0].spec, snaps[-1].spec, "en-hi"))
    results = [evaluate(b, pairs, "test") for b in (first, last, final)]
    guided = [r.head_accuracy[1][0] for r in results]  # decoder layer 2, head 1: the guided-alignment head
    assert guided[0] < 0.5 < 0.9 < guided[1] <= guided[2] + 0.05
    assert results[0].exact_match == 0 < results[1].exact_match < results[2].exact_match


def test_a_bundled_snapshot_in_the_trace_command(capsys):
    step = snapshots_of("reverse")[-1].step
    assert main(["trace", "--model", f"reverse@step-{step:06d}", "--source", "3 1 4", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["target_tokens"][0][1:4] == ["4", "1", "3"]


# ----------------------------------------------------------------------------------------- two processes

ENV = {"OMP_NUM_THREADS": "1", "MASTER_ADDR": "127.0.0.1"}


def _rank(rank: int, world: int, port: int, argv: list[str], log: str) -> None:
    os.environ.update(ENV, RANK=str(rank), LOCAL_RANK=str(rank), WORLD_SIZE=str(world), MASTER_PORT=str(port),
                      LOCAL_WORLD_SIZE=str(world))
    import scratchformer.training.trainer as trainer_module

    real = trainer_module._save_snapshot

    def save_snapshot(trainer, out, entry, record):
        with open(log, "a", encoding="utf-8") as f:
            f.write(f"{rank} {entry['step']}\n")
        return real(trainer, out, entry, record)

    trainer_module._save_snapshot = save_snapshot
    code = main(["train", *argv])
    if code:
        sys.exit(code)


def test_under_ddp_rank_zero_alone_writes_the_same_snapshots(tmp_path):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    tsv = _copy_tsv(tmp_path / "c.tsv", 120)
    args = ["--data", str(tsv), "--max-steps", "12", "--snapshots", "3", "--batch-tokens", "48", *TINY[2:]]
    threads = torch.get_num_threads()
    assert main(["train", *args, "--out", str(tmp_path / "one")]) == 0
    torch.set_num_threads(threads)
    log = tmp_path / "writes.log"
    mp.spawn(_rank, args=(2, port, [*args, "--out", str(tmp_path / "two")], str(log)), nprocs=2, join=True)
    writes = log.read_text(encoding="utf-8").split()
    assert writes[0::2] == ["0"] * 3 and [int(w) for w in writes[1::2]] == snapshot_steps(12, 3)
    one, two = (json.loads((tmp_path / d / "training.json").read_text(encoding="utf-8")) for d in ("one", "two"))
    assert [s["step"] for s in one["snapshots"]] == [s["step"] for s in two["snapshots"]] == [3, 6, 12]
    for a, b in zip(one["snapshots"], two["snapshots"]):  # validation summed over the two ranks
        assert b["valid_loss"] == pytest.approx(a["valid_loss"], abs=1e-4)
        assert b["valid_token_accuracy"] == pytest.approx(a["valid_token_accuracy"], abs=1e-9)
    assert list(snapshot_dirs(tmp_path / "two")) == [3, 6, 12]
