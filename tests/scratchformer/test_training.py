"""Training: the schedule, the loss, batching, resume equality, seed reproducibility, bad files, the command."""

import json
import math

import pytest
import torch

from scratchformer.cli import main
from scratchformer.errors import UserError
from scratchformer.loading.checkpoint import load_checkpoint
from scratchformer.tasks import Pair
from scratchformer.training import (
    IGNORE,
    Example,
    TrainData,
    Trainer,
    TrainOptions,
    collate,
    label_smoothed_loss,
    noam_lr,
    pair_data,
    prepare,
    text_data,
    token_batches,
    train,
    tsv_splits,
)


def test_noam_schedule_is_the_papers_formula():
    d, w = 512, 4000
    for step in (1, 100, 3999, 4000, 4001, 20000):
        expected = d**-0.5 * min(step**-0.5, step * w**-1.5)
        assert noam_lr(step, d, w) == pytest.approx(expected)
    peak = noam_lr(w, d, w)
    assert noam_lr(w - 1, d, w) < peak and noam_lr(w + 1, d, w) < peak  # rises linearly, then decays
    assert noam_lr(100, d, w) == pytest.approx(100 * d**-0.5 * w**-1.5)
    assert noam_lr(10, 64, 4, scale=2.0) == pytest.approx(2 * noam_lr(10, 64, 4))


def test_label_smoothed_loss_matches_the_hand_computation():
    torch.manual_seed(0)
    logits = torch.randn(2, 3, 5)
    labels = torch.tensor([[1, 4, IGNORE], [0, 2, 3]])
    eps, v = 0.1, 5
    logp = logits.log_softmax(-1)
    total, n = 0.0, 0
    for b in range(2):
        for t in range(3):
            y = int(labels[b, t])
            if y == IGNORE:
                continue
            target = torch.full((v,), eps / v)
            target[y] += 1 - eps
            total += float(-(target * logp[b, t]).sum())
            n += 1
    assert float(label_smoothed_loss(logits, labels, eps)) == pytest.approx(total / n, rel=1e-5)
    # ε = 0 is plain cross-entropy
    plain = -logp[labels != IGNORE].gather(-1, labels[labels != IGNORE][:, None]).mean()
    assert float(label_smoothed_loss(logits, labels, 0.0)) == pytest.approx(float(plain), rel=1e-5)


def test_token_batches_cover_everything_once_and_respect_the_budget():
    import random

    examples = [Example([1] * (i % 7 + 1), [1] * (i % 5 + 1), [2] * (i % 5 + 1)) for i in range(100)]
    batches = token_batches(examples, 40, random.Random(0))
    flat = sorted(i for b in batches for i in b)
    assert flat == list(range(100))
    for b in batches:
        longest = max(max(len(examples[i].src), len(examples[i].tgt_in)) for i in b)
        assert longest * len(b) <= 40 or len(b) == 1


def test_collate_pads_and_masks():
    ex = [Example([5, 6, 2], [1, 7], [7, 2]), Example([5, 2], [1, 8, 9], [8, 9, 2])]
    batch = collate(ex, torch.device("cpu"))
    assert batch.src.tolist() == [[5, 6, 2], [5, 2, 0]]
    assert batch.src_pad.tolist() == [[False, False, False], [False, False, True]]
    assert batch.tgt_in.tolist() == [[1, 7, 0], [1, 8, 9]]
    assert batch.labels.tolist() == [[7, 2, IGNORE], [8, 9, 2]]
    assert batch.n_tokens == 5


def _tiny_data() -> TrainData:
    pairs = [Pair(" ".join(s), " ".join(s)) for s in ("abc", "bca", "cab", "aab", "bba", "ccb", "abca", "bcab")]
    splits = {"train": pairs[:6], "valid": pairs[6:], "test": []}
    return pair_data(splits, "tiny copy")


def _tiny_options(tmp_path, **kw) -> TrainOptions:
    base = dict(task="copy", out=str(tmp_path / "run"), epochs=20, batch_tokens=12, d_model=16, heads=2,
                layers=1, d_ff=32, dropout=0.1, warmup=4, seed=7, threads=1, valid_greedy=0)
    base.update(kw)
    return TrainOptions(**base)


def _trainer(opts: TrainOptions) -> Trainer:
    torch.manual_seed(opts.seed)
    from scratchformer.training import build_config
    from scratchformer.transformer.model import Transformer

    data = _tiny_data()
    return Trainer(Transformer(build_config(opts, data)), data, opts, torch.device("cpu"))


def test_resume_gives_the_same_weights_as_training_straight_through(tmp_path):
    straight = _trainer(_tiny_options(tmp_path, max_steps=10))
    straight.run(progress=False)
    assert straight.step == 10

    first = _trainer(_tiny_options(tmp_path, max_steps=5))
    first.run(progress=False)
    assert first.step == 5 and first.batch_in_epoch > 0 or first.epoch > 0
    first.save_state(tmp_path / "state")
    torch.manual_seed(12345)  # disturb the global RNG: the saved state must restore it

    model, _, _ = load_checkpoint(tmp_path / "state")
    second = Trainer(model, _tiny_data(), _tiny_options(tmp_path, max_steps=10), torch.device("cpu"))
    second.load_state(tmp_path / "state")
    assert second.step == 5
    second.run(progress=False)
    assert second.step == 10
    for (name, a), (_, b) in zip(straight.model.state_dict().items(), second.model.state_dict().items()):
        assert torch.equal(a, b), name


def test_same_seed_same_run_and_another_seed_differs(tmp_path):
    runs = []
    for seed in (3, 3, 4):
        t = _trainer(_tiny_options(tmp_path, seed=seed, max_steps=6))
        t.run(progress=False)
        runs.append(torch.cat([p.detach().flatten() for p in t.model.parameters()]))
    assert torch.equal(runs[0], runs[1])
    assert not torch.equal(runs[0], runs[2])


def test_training_lowers_the_loss_and_writes_a_checkpoint(tmp_path):
    opts = _tiny_options(tmp_path, task="copy", epochs=2, max_steps=None, threads=2)
    # the real copy task is too big for a unit test: train on the tiny data through the same driver
    import scratchformer.training.trainer as training  # prepare() looks load_data up in this module

    original = training.load_data
    training.load_data = lambda o: _tiny_data()
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        result = train(opts, progress=False)
        assert torch.get_num_threads() == 1  # trained on opts.threads, then the process is left as it was
    finally:
        training.load_data = original
        torch.set_num_threads(threads)
    assert result["torch_threads"] == opts.threads != 1
    out = tmp_path / "run"
    assert (out / "model.safetensors").is_file() and (out / "src_tokenizer").is_dir()
    assert (out / "resume" / "optimizer.safetensors").is_file()
    saved = json.loads((out / "training.json").read_text(encoding="utf-8"))
    assert saved["seed"] == 7 and saved["epochs_done"] == 2 and saved["stopped"] == "finished"
    assert saved["wall_seconds"] >= 0 and len(saved["history"]) == 2
    assert result["best_valid_loss"] == min(h["valid_loss"] for h in saved["history"])
    model, src_tok, tgt_tok = load_checkpoint(out)
    assert model.config.extra["src_suffix"] == ["</s>"]
    assert src_tok.token_id("a") is not None and tgt_tok.pad_id == 0


def test_copy_task_learns_in_a_few_hundred_steps(tmp_path):
    """The algorithmic task whose right attention is known: copy, learnt for real (a few seconds)."""
    from scratchformer.training import exact_match

    opts = _tiny_options(tmp_path, epochs=100, batch_tokens=400, d_model=32, heads=2, layers=1, d_ff=64,
                         warmup=50, dropout=0.0, max_steps=300, lr_scale=1.0)
    import random

    rng = random.Random(0)
    seqs = {" ".join(rng.choice("abcdef") for _ in range(rng.randint(3, 6))) for _ in range(700)}
    pairs = [Pair(s, s) for s in sorted(seqs)]
    data = pair_data({"train": pairs[:-50], "valid": pairs[-50:]}, "copy")
    torch.manual_seed(0)
    from scratchformer.training import build_config
    from scratchformer.transformer.model import Transformer

    # one thread, as under the suite's two workers: 300 steps from one seed land on one model only when the sums
    # are added in one order (with two threads this seed reached 0.84)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        trainer = Trainer(Transformer(build_config(opts, data)), data, opts, torch.device("cpu"))
        trainer.run(progress=False)
        assert exact_match(trainer.model, data.valid, torch.device("cpu")) >= 0.9
    finally:
        torch.set_num_threads(threads)


def test_bad_tsv_files_get_one_sentence(tmp_path):
    bad = tmp_path / "bad.tsv"
    bad.write_text("one column only\n", encoding="utf-8")
    with pytest.raises(UserError, match="column"):
        tsv_splits(bad, 0)
    empty = tmp_path / "empty.tsv"
    empty.write_text("\n\n", encoding="utf-8")
    with pytest.raises(UserError, match="empty"):
        tsv_splits(empty, 0)
    latin = tmp_path / "latin.tsv"
    latin.write_bytes("caf\xe9\tcafe\n".encode("latin-1"))
    with pytest.raises(UserError, match="UTF-8"):
        tsv_splits(latin, 0)
    one = tmp_path / "one.tsv"
    one.write_text("a b\tb a\n", encoding="utf-8")
    with pytest.raises(UserError, match="at least 2"):
        tsv_splits(one, 0)


def test_train_command_reports_bad_files_without_traceback(tmp_path, capsys):
    bad = tmp_path / "bad.tsv"
    bad.write_text("a\tb\tc\td\n", encoding="utf-8")
    assert main(["train", "--data", str(bad), "--out", str(tmp_path / "o"), "--quiet"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("scratchformer: ") and "4 columns" in err and "\n" not in err
    assert main(["train", "--text", str(tmp_path / "missing.txt"), "--out", str(tmp_path / "o")]) == 2
    assert "does not exist" in capsys.readouterr().err
    assert main(["train", "--resume", str(tmp_path / "nowhere")]) == 2
    assert "nothing to resume" in capsys.readouterr().err


def test_tsv_split_is_seeded_and_disjoint(tmp_path):
    path = tmp_path / "pairs.tsv"
    path.write_text("".join(f"w{i} x\ty{i}\n" for i in range(30)), encoding="utf-8")
    a, b = tsv_splits(path, 1), tsv_splits(path, 1)
    assert a == b
    assert len(a["valid"]) == 3 and not {p.source for p in a["valid"]} & {p.source for p in a["train"]}


def test_text_file_gives_next_token_windows(tmp_path):
    path = tmp_path / "t.txt"
    path.write_text("machine learning using PyTorch " * 10, encoding="utf-8")
    data = text_data(path, seq_len=6)
    assert data.decoder_only
    e = data.train[0]
    assert e.tgt_in[0] == 50256 and e.tgt_in[1:] == e.labels[:-1]  # shifted right behind <|endoftext|>
    assert len(e.labels) == 6 and e.src == []


def test_text_training_runs_decoder_only(tmp_path):
    path = tmp_path / "t.txt"
    path.write_text("the cat sat on the mat and the dog sat on the log. " * 4, encoding="utf-8")
    opts = TrainOptions(task=None, text=str(path), out=str(tmp_path / "lm"), epochs=1, batch_tokens=64,
                        d_model=8, heads=2, layers=1, d_ff=16, seq_len=8, threads=1, valid_greedy=0)
    trainer = prepare(opts)
    assert trainer.model.config.n_encoder_layers == 0
    loss = trainer.train_step(collate(trainer.data.train[:4], torch.device("cpu")))
    assert math.isfinite(loss) and loss > 0


def test_guided_alignment_teaches_the_chosen_head(tmp_path):
    """Off by default; with --align-weight one head's cross-attention learns the gold alignment (reverse)."""
    import random

    from scratchformer.training import build_config
    from scratchformer.transformer.model import Transformer

    rng = random.Random(1)
    seqs = sorted({" ".join(rng.choice("abcdef") for _ in range(rng.randint(3, 6))) for _ in range(300)})
    pairs = [Pair(s, " ".join(reversed(s.split())), tuple(range(len(s.split()) - 1, -1, -1))) for s in seqs]
    data = pair_data({"train": pairs, "valid": pairs[:20]}, "reverse")
    opts = _tiny_options(tmp_path, d_model=16, heads=2, layers=1, warmup=20, max_steps=60, batch_tokens=200,
                         align_weight=1.0, align_head=1)
    torch.manual_seed(0)
    trainer = Trainer(Transformer(build_config(opts, data)), data, opts, torch.device("cpu"))
    assert trainer.model.config.extra["guided_alignment"] == {"layer": 0, "head": 1, "weight": 1.0}
    batch = collate(data.train[:32], torch.device("cpu"))
    with torch.no_grad():
        before = float(trainer.alignment_loss(*_cross_inputs(trainer, batch), batch))
    trainer.run(progress=False)
    with torch.no_grad():
        after = float(trainer.alignment_loss(*_cross_inputs(trainer, batch), batch))
    assert after < 0.7 * before


def _cross_inputs(trainer, batch):
    captured = {}
    layer = trainer.model.decoder[-1].cross_attn
    hook = layer.register_forward_hook(lambda m, args, out: captured.update(x=args[0], memory=args[1]))
    with torch.no_grad():
        trainer.model.eval()
        trainer.model(batch.src, batch.tgt_in, batch.src_pad, batch.tgt_pad)
    hook.remove()
    return captured["x"], captured["memory"]
