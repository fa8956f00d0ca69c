"""What a training run is asked to do (TrainOptions) and the model configuration it builds from them."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path

from ..errors import UserError
from ..loading.tokenizers import TextTokenizer
from ..transformer.config import GPT2_VOCAB_SIZE, PRESETS, TransformerConfig, preset
from .data import TrainData, _pair_examples, pair_data, task_splits, text_data, tsv_splits
from .sequences import sequence_data


@dataclass
class TrainOptions:
    task: str | None = "en-hi"  # en-hi | copy | reverse | sort, or None with data/text
    data: str | None = None  # a TSV of source<TAB>target pairs
    text: str | None = None  # a plain UTF-8 text file (next-token prediction)
    out: str = "runs/model"
    epochs: int = 10
    batch_tokens: int = 1500
    d_model: int = 128
    heads: int = 4
    layers: int = 2
    d_ff: int = 256
    dropout: float = 0.1
    warmup: int = 400
    lr_scale: float = 1.0
    label_smoothing: float = 0.1
    seq_len: int = 32  # --text windows
    seed: int = 0
    device: str = "cpu"
    # "bf16": the training forward and backward under torch.autocast(bfloat16) on CUDA (weights, Adam and the
    # loss stay float32); "fp32": everything float32. Not in the paper; off by default.
    precision: str = "fp32"
    max_minutes: float | None = None
    max_steps: int | None = None
    threads: int = 2
    resume_state: bool = True  # write <out>/resume/ (model + Adam moments) to resume from
    valid_greedy: int = 200  # validation sentences decoded greedily each epoch for exact match (0 = none)
    # Guided alignment (Garg et al. 2019, "Jointly Learning to Align and Translate"): a departure from the
    # paper, off by default. Adds align_weight × cross-entropy between one cross-attention head's row and
    # the gold source word, for tasks that know their alignment.
    align_weight: float = 0.0
    align_layer: int = -1
    align_head: int = 0
    name: str | None = None
    # A preset whose architecture and sizes the model takes (norms, positions, heads and key/value heads, the
    # feed-forward, d_model, layers), with the data's vocabulary; d_model, heads, layers and d_ff above are not
    # used. A decoder-only preset (llama-tiny-random) reads each pair as one sequence: source <sep> target
    # (sequences.py).
    preset: str | None = None
    # Snapshots (see snapshots.py): keep the model at this many steps spread over the run, denser early, in
    # <out>/snapshots/step-NNNNNN/ — over the first `snapshots_until` steps when given; their weights as float32,
    # float16 (half the size) or int8 rows (a quarter, quantize.py), all loaded back as float32.
    snapshots: int = 0
    snapshots_until: int | None = None
    snapshot_dtype: str = "float32"
    # The model's own checkpoint in <out>: float32, or float16 (half the size, loaded back as float32). The
    # resume state stays float32 whatever this says.
    weights_dtype: str = "float32"

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict) -> TrainOptions:
        known = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in known})


def _examples(data: TrainData, n: int = 3) -> list[str]:
    """A few validation sources as text: the example inputs the window offers for the trained model."""
    tok = data.tgt_tokenizer if data.decoder_only else data.src_tokenizer
    texts = [" ".join(tok.decode(e.tgt_in if data.decoder_only else e.src).split()) for e in data.valid[:n]]
    return [t for t in texts if t]


def preset_decoder_only(opts: TrainOptions) -> bool:
    """Whether --preset names a decoder-only architecture (UserError for a name that is no preset)."""
    if opts.preset is None:
        return False
    if opts.preset not in PRESETS:
        raise UserError(f"Unknown preset {opts.preset!r} for --preset; choose one of: {', '.join(PRESETS)}.")
    config = preset(opts.preset)
    return not config.has_encoder and config.has_decoder


def _preset_config(opts: TrainOptions, data: TrainData, longest: int) -> TransformerConfig:
    """The preset's architecture with the data's vocabulary and special tokens, named and described as trained."""
    base = preset(opts.preset)
    if not base.has_encoder and not data.decoder_only:
        raise UserError(f"--preset {opts.preset} is decoder-only; train it on --task, --data or --text.")
    if base.has_encoder and data.decoder_only:
        raise UserError(f"--preset {opts.preset} has an encoder, and --text trains a decoder-only model; choose a "
                        "decoder-only preset or train on --task or --data.")
    changes = {"name": opts.name or opts.task or Path(opts.data or opts.text or "").stem,
               "src_vocab_size": data.src_tokenizer.vocab_size, "tgt_vocab_size": data.tgt_tokenizer.vocab_size,
               "max_len": max(base.max_len, longest), "extra": {}}  # fmt: skip
    if data.src_tokenizer.kind == "gpt2-bpe":  # --text: GPT-2's tokens, as the preset has them
        changes["extra"] = {"task": "next-token", "tokenizer": "gpt2", "examples": _examples(data)}
    else:
        tok = data.tgt_tokenizer
        changes.update(pad_id=tok.pad_id, bos_id=tok.bos_id, eos_id=tok.eos_id)
        changes["extra"] = {"task": opts.task if not opts.data else "pairs", "seed": opts.seed, "preset": opts.preset,
                            "tokenizer": "word-level (Hugging Face WordLevel), built on the training split",
                            "examples": _examples(data)}  # fmt: skip
        if data.decoder_only:
            changes["extra"]["sequence"] = "source <sep> target"  # sequences.py: one text per pair
            changes["extra"]["examples"] = [p.source + " <sep>" for p in data.pairs.get("valid", [])[:3]]
        else:
            changes["extra"]["src_suffix"] = ["</s>"]
    return dataclasses.replace(base, **changes)


def build_config(opts: TrainOptions, data: TrainData) -> TransformerConfig:
    longest = max(max(len(e.src), len(e.tgt_in)) for e in data.train + data.valid + data.test)
    if opts.preset is not None:
        return _preset_config(opts, data, longest)
    if data.decoder_only:
        return TransformerConfig(
            d_model=opts.d_model, n_heads=opts.heads, d_ff=opts.d_ff, n_encoder_layers=0,
            n_decoder_layers=opts.layers, dropout=opts.dropout, src_vocab_size=GPT2_VOCAB_SIZE,
            tgt_vocab_size=GPT2_VOCAB_SIZE, max_len=opts.seq_len, share_embeddings=True, tie_output=True,
            bos_id=GPT2_VOCAB_SIZE - 1, eos_id=GPT2_VOCAB_SIZE - 1, name=opts.name or "text-lm",
            extra={"task": "next-token", "tokenizer": "gpt2", "examples": _examples(data)},
        )  # fmt: skip
    return TransformerConfig(
        d_model=opts.d_model, n_heads=opts.heads, d_ff=opts.d_ff, n_encoder_layers=opts.layers,
        n_decoder_layers=opts.layers, dropout=opts.dropout, src_vocab_size=data.src_tokenizer.vocab_size,
        tgt_vocab_size=data.tgt_tokenizer.vocab_size, max_len=max(32, 2 * longest), share_embeddings=False,
        tie_output=True, pad_id=0, bos_id=1, eos_id=2, name=opts.name or opts.task or Path(opts.data or "").stem,
        extra={"src_suffix": ["</s>"], "task": opts.task if not opts.data else "pairs", "seed": opts.seed,
               "tokenizer": "word-level (Hugging Face WordLevel), built on the training split",
               "examples": _examples(data),
               **({"guided_alignment": {"layer": opts.align_layer % opts.layers, "head": opts.align_head,
                                        "weight": opts.align_weight}} if opts.align_weight > 0 else {})},
    )  # fmt: skip


# What a run's options ask to be read (data.py knows nothing of the options: no import circle).
def load_data(opts: TrainOptions) -> TrainData:
    given = [x for x in (opts.data, opts.text) if x]
    if len(given) > 1:
        raise UserError("Give either --data or --text, not both.")
    if opts.text:
        return text_data(opts.text, opts.seq_len)
    read = sequence_data if preset_decoder_only(opts) else pair_data  # one sequence per pair, or source → target
    if opts.data:
        return read(tsv_splits(opts.data, opts.seed), f"pairs from {opts.data}")
    if not opts.task:
        raise UserError("Choose what to train on: --task, --data FILE.tsv or --text FILE.txt.")
    return read(task_splits(opts.task, opts.seed), f"task {opts.task} (seed {opts.seed})")


def _retokenize(opts: TrainOptions, src_tok: TextTokenizer, tgt_tok: TextTokenizer) -> TrainData:
    splits = tsv_splits(opts.data, opts.seed) if opts.data else task_splits(opts.task, opts.seed)
    if preset_decoder_only(opts):
        return sequence_data(splits, "", tgt_tok)
    return TrainData(_pair_examples(splits["train"], src_tok, tgt_tok), _pair_examples(splits["valid"], src_tok,
                     tgt_tok), src_tok, tgt_tok, test=_pair_examples(splits.get("test", []), src_tok, tgt_tok),
                     pairs=splits)
