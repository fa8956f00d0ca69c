"""A model with its tokenizers, found by name (preset, bundled model) or path; and text → model inputs."""

from __future__ import annotations

import importlib.resources
from dataclasses import dataclass, field
from pathlib import Path

import torch

from .batching import sliding_windows
from .checkpoint import is_checkpoint, is_hf_config, load_checkpoint
from .config import PRESETS, preset
from .device import resolve_device
from .errors import UserError
from .masks import pad_from_ids
from .model import Transformer
from .tokenizers import TextTokenizer, gpt2_tokenizer
from .trace import Trace

DEFAULT_MODEL = "en-hi"


@dataclass
class Inputs:
    """Everything one forward pass needs, plus what to tell the user about how the text was read."""

    src: torch.Tensor | None  # (B, S) ids, or None for a decoder-only model
    tgt: torch.Tensor | None  # (B, T) decoder input ids starting with the start token, or None (encoder-only)
    src_pad: torch.Tensor | None
    tgt_pad: torch.Tensor | None
    source_tokens: list[list[str]]
    target_tokens: list[list[str]]
    notes: list[str] = field(default_factory=list)  # e.g. "The source was cut to 512 tokens."
    unknown_words: list[str] = field(default_factory=list)  # source words outside the vocabulary
    unknown_target_words: list[str] = field(default_factory=list)


@dataclass
class ModelBundle:
    model: Transformer
    src_tokenizer: TextTokenizer
    tgt_tokenizer: TextTokenizer
    name: str  # what people see: "en-hi", "blog", "all-MiniLM-L6-v2"
    origin: str  # "preset", "bundled", a checkpoint path, or a Hugging Face directory

    @property
    def config(self):
        return self.model.config

    @property
    def device(self) -> torch.device:
        return self.model.device

    def describe(self) -> str:
        c = self.config
        stacks = []
        if c.has_encoder:
            stacks.append(f"{c.n_encoder_layers} encoder")
        if c.has_decoder:
            stacks.append(f"{c.n_decoder_layers} decoder")
        n = sum(p.numel() for p in self.model.parameters())
        return (
            f"{self.name}: {' + '.join(stacks)} layers, d_model {c.d_model}, {c.n_heads} heads, d_ff {c.d_ff}, "
            f"{n / 1e6:.2f} M parameters, tokenizer {self.src_tokenizer.name}"
        )

    def _special(self, key: str, tok: TextTokenizer) -> list[int]:
        return [tid for t in self.config.extra.get(key, []) if (tid := tok.token_id(t)) is not None]

    def _ids(self, text: str, tok: TextTokenizer, side: str, budget: int, truncate: bool, notes: list) -> list[int]:
        ids = tok.encode(text)
        if len(ids) > budget:
            if not truncate:
                raise UserError(
                    f"The {side} has {len(ids)} tokens but this model reads at most {budget}; shorten the text."
                )
            notes.append(f"The {side} had {len(ids)} tokens and was cut to the model's maximum of {budget}.")
            ids = ids[:budget]
        return ids

    def encode_source(self, text: str, truncate: bool = False, notes: list | None = None) -> list[int]:
        notes = [] if notes is None else notes
        prefix = self._special("src_prefix", self.src_tokenizer)
        suffix = self._special("src_suffix", self.src_tokenizer)
        budget = self.config.max_len - len(prefix) - len(suffix)
        return prefix + self._ids(text, self.src_tokenizer, "source", budget, truncate, notes) + suffix

    def start_id(self) -> int:
        c, tok = self.config, self.tgt_tokenizer
        for candidate in (c.bos_id, tok.bos_id, tok.eos_id):
            if candidate is not None:
                return candidate
        raise UserError("This model's tokenizer has no start token for the decoder.")

    def prepare(self, source: str, target: str = "", truncate: bool = False) -> Inputs:
        """Text → ids for one sentence. The decoder input is the start token followed by the target."""
        source, target = (source or "").strip(), (target or "").strip()
        c, notes = self.config, []
        if not source:
            raise UserError("The source text is empty; type a sentence first.")
        src = src_tokens = None
        if c.has_encoder:
            src_ids = self.encode_source(source, truncate, notes)
            src = torch.tensor([src_ids], dtype=torch.long)  # (1, S)
            src_tokens = [self.src_tokenizer.token_strings(src_ids)]
        unknown = self.src_tokenizer.unknown_words(source)
        unknown_target: list[str] = []
        tgt = tgt_tokens = None
        if c.has_decoder:
            text = target if c.has_encoder else source
            tgt_ids = [self.start_id()] + self._ids(text, self.tgt_tokenizer, "target", c.max_len - 1, truncate, notes)
            tgt = torch.tensor([tgt_ids], dtype=torch.long)  # (1, T)
            tgt_tokens = [self.tgt_tokenizer.token_strings(tgt_ids)]
            if c.has_encoder:
                unknown_target = self.tgt_tokenizer.unknown_words(target)
        if not c.has_encoder:
            src_tokens = tgt_tokens
        return Inputs(src, tgt, None, None, src_tokens or [], tgt_tokens or [], notes, unknown, unknown_target)

    def prepare_windows(self, text: str, seq_len: int, batch: int) -> Inputs:
        """The walkthrough's batching of a long text: B windows of S tokens, stride 1 (see batching.py)."""
        if seq_len > self.config.max_len:
            raise UserError(f"--seq-len {seq_len} exceeds this model's maximum length {self.config.max_len}.")
        ids = self.src_tokenizer.encode(text)
        start = self.start_id() if self.config.has_decoder else 0  # an encoder-only model has no decoder batch
        src, tgt = sliding_windows(ids, seq_len, batch, start)
        src_tokens = [self.src_tokenizer.token_strings(row) for row in src.tolist()]
        tgt_tokens = [self.tgt_tokenizer.token_strings(row) for row in tgt.tolist()]
        if not self.config.has_encoder:
            return Inputs(None, tgt, None, None, tgt_tokens, tgt_tokens)
        if not self.config.has_decoder:
            return Inputs(src, None, None, None, src_tokens, [])
        return Inputs(src, tgt, None, None, src_tokens, tgt_tokens)

    def run(self, inputs: Inputs) -> tuple[torch.Tensor, Trace]:
        """One traced forward pass on the model's device."""
        dev = self.device
        to = (lambda t: None if t is None else t.to(dev))  # noqa: E731
        c = self.config
        src_pad = inputs.src_pad if inputs.src_pad is not None else pad_from_ids(inputs.src, c.pad_id)
        tgt_pad = inputs.tgt_pad if inputs.tgt_pad is not None else pad_from_ids(inputs.tgt, c.pad_id, start=True)
        if c.has_encoder:
            return self.model.run_with_trace(
                to(inputs.src), to(inputs.tgt), to(src_pad), to(tgt_pad), inputs.source_tokens, inputs.target_tokens
            )
        return self.model.run_with_trace(
            None, to(inputs.tgt), None, to(tgt_pad), inputs.source_tokens, inputs.target_tokens
        )


def resources_dir() -> Path:
    return Path(str(importlib.resources.files("resources")))


def bundled_models() -> dict[str, Path]:
    """Trained models shipped in resources/models/<name>/ (name → directory)."""
    root = resources_dir() / "models"
    if not root.is_dir():
        return {}
    return {p.name: p for p in sorted(root.iterdir()) if is_checkpoint(p)}


def model_names() -> list[str]:
    """Bundled models first (the default among them first), then presets."""
    bundled = sorted(bundled_models(), key=lambda n: (n != DEFAULT_MODEL, n))
    return bundled + list(PRESETS)


def default_model_name() -> str:
    names = bundled_models()
    return DEFAULT_MODEL if DEFAULT_MODEL in names else (next(iter(names), "blog"))


def load_model(spec: str, device: str | torch.device = "cpu", seed: int = 0) -> ModelBundle:
    """A preset name (random weights from `seed`), a bundled model's name, or a path to a model directory."""
    dev = resolve_device(device)
    spec = (spec or "").strip()
    if not spec:
        raise UserError("No model was named; give a preset, a bundled model or a folder.")
    bundled = bundled_models()
    if spec in bundled:
        model, src_tok, tgt_tok = load_checkpoint(bundled[spec], dev)
        return ModelBundle(model, src_tok, tgt_tok, spec, "bundled")
    if spec in PRESETS:
        config = preset(spec)
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            model = Transformer(config)
        tok = gpt2_tokenizer()
        return ModelBundle(model.to(dev).eval(), tok, tok, spec, "preset")
    path = Path(spec).expanduser()
    if path.exists():
        if not path.is_dir():
            raise UserError(f"{path} is a file; a model is a folder (config.json, model.safetensors, tokenizer).")
        if not (path / "config.json").is_file():
            raise UserError(f"{path} is not a model folder: it has no config.json.")
        if is_hf_config(path / "config.json"):
            from .importers import load_hf_directory  # Hugging Face directories (BERT, MarianMT)

            return load_hf_directory(path, dev)
        model, src_tok, tgt_tok = load_checkpoint(path, dev)  # says precisely what is missing or damaged
        return ModelBundle(model, src_tok, tgt_tok, model.config.name or path.name, str(path))
    choices = ", ".join(model_names())
    raise UserError(f"Unknown model {spec!r}: not a preset, a bundled model or an existing folder ({choices}).")
