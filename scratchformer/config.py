"""TransformerConfig: every size and switch of the model, validated, with named presets."""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from pathlib import Path

from .errors import UserError

GPT2_VOCAB_SIZE = 50257
ACTIVATIONS = ("relu", "gelu", "gelu_tanh", "silu")
POSITIONAL = ("sinusoidal", "sinusoidal_halves", "learned", "none")


@dataclass
class TransformerConfig:
    """Sizes of the 2017 encoder-decoder Transformer plus documented, off-by-default departures.

    The defaults are the paper's base model ("Attention Is All You Need", Table 3, row "base").
    Options that depart from the paper exist only so real pretrained models (BERT, RoBERTa, DistilBERT,
    MarianMT, GPT-2) can be loaded into the same from-scratch core; each is off unless a preset or an importer
    turns it on. `scratchformer.departures.departures(config)` lists, in words, the ones a config turns on.

    A model without an encoder (n_encoder_layers=0) is decoder-only, like GPT-2: its decoder layers have no
    cross-attention and read the target alone under the causal mask. One without a decoder is encoder-only
    (BERT): it returns the encoder's hidden states and has no output layer.
    """

    d_model: int = 512
    n_heads: int = 8
    d_ff: int = 2048
    n_encoder_layers: int = 6
    n_decoder_layers: int = 6
    dropout: float = 0.1
    src_vocab_size: int = GPT2_VOCAB_SIZE
    tgt_vocab_size: int = GPT2_VOCAB_SIZE
    max_len: int = 512
    # Paper §3.4: "we share the same weight matrix between the two embedding layers and the
    # pre-softmax linear transformation". Only possible when both vocabularies are the same.
    share_embeddings: bool = True
    tie_output: bool = True
    pad_id: int | None = None
    bos_id: int | None = None
    eos_id: int | None = None
    name: str = "transformer"
    # --- departures from the paper, for imported models (all off by default) ---
    activation: str = "relu"  # FFN non-linearity: relu (paper) | gelu (BERT) | silu (Marian "swish")
    # sinusoidal (paper, interleaved sin/cos) | sinusoidal_halves (Marian) | learned (BERT, GPT-2) | none
    positional: str = "sinusoidal"
    # Position ids start here instead of 0, and the position table has max_len + position_offset rows (RoBERTa
    # counts from padding_idx + 1 = 2). Rows below the offset are kept (they are in the weights) but never read.
    position_offset: int = 0
    scale_embedding: bool = True  # multiply embeddings by sqrt(d_model) (paper §3.4)
    embed_layer_norm: bool = False  # LayerNorm after embeddings + positions (BERT)
    type_vocab_size: int = 0  # token-type (segment) embeddings (BERT)
    final_layer_norm: bool = False  # LayerNorm after each stack (torch.nn.Transformer's default; GPT-2's ln_f)
    # Pre-LN (GPT-2): x + Dropout(Sublayer(LayerNorm(x))) instead of the paper's LayerNorm(x + Dropout(Sublayer(x))).
    # The LayerNorm is still the Add & Norm module's `norm`; it is traced before the sublayer as
    # `<layer>.add_normK.norm` (kind layer_norm), and the block's output is then `<layer>.add_normK.residual`.
    norm_first: bool = False
    final_logits_bias: bool = False  # a learned bias added to the output logits (Marian)
    layer_norm_eps: float = 1e-5
    extra: dict = field(default_factory=dict)  # free-form facts for people (source model, tokenizer)

    def __post_init__(self) -> None:
        self.validate()

    @property
    def d_head(self) -> int:
        """d_k = d_v = d_model / h (paper §3.2.2)."""
        return self.d_model // self.n_heads

    @property
    def has_encoder(self) -> bool:
        return self.n_encoder_layers > 0

    @property
    def has_decoder(self) -> bool:
        return self.n_decoder_layers > 0

    def validate(self) -> None:
        """Raise UserError with one sentence naming the first thing that is wrong."""
        for name in ("d_model", "n_heads", "d_ff", "max_len", "src_vocab_size", "tgt_vocab_size"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise UserError(f"{name} must be a positive whole number, not {value!r}.")
        for name in ("n_encoder_layers", "n_decoder_layers", "type_vocab_size", "position_offset"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 0:
                raise UserError(f"{name} must be zero or a positive whole number, not {value!r}.")
        if self.d_model % self.n_heads:
            raise UserError(f"d_model {self.d_model} is not divisible by n_heads {self.n_heads}.")
        if self.n_encoder_layers == 0 and self.n_decoder_layers == 0:
            raise UserError("A model needs at least one encoder layer or one decoder layer.")
        if not 0.0 <= float(self.dropout) < 1.0:
            raise UserError(f"dropout must be in [0, 1), not {self.dropout!r}.")
        if self.activation not in ACTIVATIONS:
            raise UserError(f"activation {self.activation!r} is not one of {', '.join(ACTIVATIONS)}.")
        if self.positional not in POSITIONAL:
            raise UserError(f"positional {self.positional!r} is not one of {', '.join(POSITIONAL)}.")
        if self.position_offset and self.positional != "learned":
            raise UserError("position_offset applies to learned position embeddings only (positional = learned).")
        if not isinstance(self.norm_first, bool):
            raise UserError(f"norm_first must be true or false, not {self.norm_first!r}.")
        if self.share_embeddings and self.src_vocab_size != self.tgt_vocab_size and self.has_encoder:
            raise UserError(
                f"share_embeddings needs equal vocabularies, but the source has {self.src_vocab_size} "
                f"and the target {self.tgt_vocab_size} tokens."
            )
        for name in ("pad_id", "bos_id", "eos_id"):
            value = getattr(self, name)
            if value is not None and not 0 <= value < max(self.src_vocab_size, self.tgt_vocab_size):
                raise UserError(f"{name} {value} lies outside the vocabulary.")

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict) -> TransformerConfig:
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise UserError(f"The model config has unknown fields: {', '.join(unknown)}.")
        return cls(**data)

    def save(self, path: str | Path) -> None:
        Path(path).write_text(json.dumps(self.to_dict(), indent=2, ensure_ascii=False) + "\n", encoding="utf-8")

    @classmethod
    def load(cls, path: str | Path) -> TransformerConfig:
        try:
            data = json.loads(Path(path).read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise UserError(f"Cannot read the model config {path}: {exc}.") from exc
        if not isinstance(data, dict):
            raise UserError(f"The model config {path} is not a JSON object.")
        return cls.from_dict(data)


def paper() -> TransformerConfig:
    """The base model of the 2017 paper, over GPT-2's byte-level BPE vocabulary."""
    return TransformerConfig(name="paper", bos_id=GPT2_VOCAB_SIZE - 1, eos_id=GPT2_VOCAB_SIZE - 1)


def blog() -> TransformerConfig:
    """The tiny model of the "Transformers from Scratch" walkthrough: every number fits on a slide."""
    return TransformerConfig(
        name="blog",
        d_model=6,
        n_heads=2,
        d_ff=12,
        n_encoder_layers=1,
        n_decoder_layers=1,
        dropout=0.1,
        max_len=10,
        bos_id=GPT2_VOCAB_SIZE - 1,
        eos_id=GPT2_VOCAB_SIZE - 1,
    )


PRESETS = {"paper": paper, "blog": blog}


def preset(name: str) -> TransformerConfig:
    """A fresh config for a preset name, or UserError listing the names that exist."""
    try:
        return PRESETS[name]()
    except KeyError:
        raise UserError(f"Unknown preset {name!r}; choose one of: {', '.join(PRESETS)}.") from None
