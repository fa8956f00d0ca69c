"""TransformerConfig: every size and switch of the model, validated, with named presets."""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import UserError

GPT2_VOCAB_SIZE = 50257
ACTIVATIONS = ("relu", "gelu", "gelu_tanh", "silu")
POSITIONAL = ("sinusoidal", "sinusoidal_halves", "learned", "rotary", "none")
QK_NORMS = ("none", "head", "full")
ROPE_SCALINGS = ("none", "linear", "llama3")
NORMS = ("layernorm", "rmsnorm")


@dataclass
class TransformerConfig:
    """Sizes of the 2017 encoder-decoder Transformer plus documented, off-by-default departures.

    The defaults are the paper's base model ("Attention Is All You Need", Table 3, row "base").
    Options that depart from the paper exist only so real pretrained models (BERT, RoBERTa, DistilBERT,
    MarianMT, GPT-2, T5) can be loaded into the same from-scratch core; each is off unless a preset or an importer
    turns it on. `scratchformer.transformer.departures.departures(config)` lists, in words, the ones a config turns on.

    A model without an encoder (n_encoder_layers=0) is decoder-only, like GPT-2: its decoder layers have no
    cross-attention and read the target alone under the causal mask. One without a decoder is encoder-only
    (BERT): it returns the encoder's hidden states and has no output layer (an imported masked-language-model head,
    mlm_head, is read by the logit lens only).
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
    tie_output: bool = True  # for an encoder-only model with mlm_head: the head's vocabulary projection is tied
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
    # layernorm (paper): γ·(x − μ)/√(σ² + ε) + β | rmsnorm (T5): γ·x/√(mean(x²) + ε), no mean subtracted, no β.
    # Every norm of the model (around the sublayers and after the stacks) is of this kind.
    norm: str = "layernorm"
    # Width of each head's queries, keys and values (T5's d_kv). None: d_model / n_heads (paper §3.2.2); T5 may
    # have n_heads · d_kv ≠ d_model, so W^Q, W^K, W^V are d_model × (n_heads · d_kv) and W^O the reverse.
    d_kv: int | None = None
    linear_bias: bool = True  # biases in the attention and feed-forward linear layers (T5 has none)
    scale_attention: bool = True  # divide QKᵀ by √d_k (paper §3.2.1); T5 folds it into the initialisation of W^Q
    # T5's relative position bias: the distance key − query falls into one of this many buckets (0 = off), each
    # with a learned number per head, added to the attention scores before the mask. The table lives in the first
    # layer's self-attention of each stack (`<stack>.0.self_attn.relative_bias`) and the bias it gives is shared
    # by every layer of that stack; bidirectional buckets in the encoder, causal ones in the decoder.
    relative_buckets: int = 0
    relative_max_distance: int = 128  # distances of at least this many positions share the last bucket
    # Gated feed-forward (T5 v1.1, Flan-T5: "gated-gelu"): FFN(x) = (act(x W_1) ⊙ x V) W_2, a third matrix V.
    ffn_gated: bool = False
    # Multiply the decoder output by d_model^-0.5 before the output layer (T5 v1.0, whose output is tied).
    scale_decoder_output: bool = False
    # A masked-language-model head over the encoder (BERT, RoBERTa, DistilBERT pretraining): encoder-only models
    # only. It is not run by forward(), which still returns the encoder's hidden states; the logit lens reads the
    # encoder through it (model.MaskedLMHead, scratchformer.analyses.lens).
    mlm_head: bool = False
    # --- departures of today's decoders (Llama, Mistral, Qwen, Gemma, Phi-3, OLMo, Pythia) ---
    # Rotary positions (positional = "rotary", Su et al. 2021 "RoFormer"): nothing is added to the embeddings;
    # each attention rotates every pair of q and k dimensions by position × its frequency θ^(−2i/d_rot), so the
    # score q_m·k_n depends on m − n only. rotary_fraction: the share of each head's dimensions that rotate
    # (Pythia 0.25; the first d_rot = fraction · d_head, the rest pass through). rope_scaling stretches the
    # frequencies for long contexts: "linear" divides every position by rope_factor, "llama3" (Llama 3.1+) slows
    # the low frequencies only, between rope_low_freq_factor and rope_high_freq_factor of the original length.
    rope_theta: float = 10000.0
    rotary_fraction: float = 1.0
    rope_scaling: str = "none"
    rope_factor: float = 1.0
    rope_low_freq_factor: float = 1.0
    rope_high_freq_factor: float = 4.0
    rope_original_max_len: int = 8192
    # Grouped-query attention (Ainslie et al. 2023): n_kv_heads key/value heads, each read by n_heads / n_kv_heads
    # query heads (None: one per query head, the paper's multi-head attention; 1: multi-query attention).
    n_kv_heads: int | None = None
    # Biases of W^Q, W^K, W^V alone (Qwen2 has them while W^O and the feed-forward have none) and of the
    # feed-forward's matrices; None: as linear_bias says.
    qkv_bias: bool | None = None
    ffn_bias: bool | None = None
    # RMSNorm on the queries and keys before the scores (and before the rotation): "head" normalises each head's
    # d_head-wide vector (Qwen3, Gemma 3), "full" the whole h·d_head-wide projection (OLMo 2).
    qk_norm: str = "none"
    # Sliding-window attention (Mistral): a position attends to itself and the sliding_window − 1 before it
    # (0: no window, the paper's full causal mask).
    sliding_window: int = 0
    # The layers (0-based) that use the window when only some do (Qwen's upper layers, Gemma 2's every other
    # layer); None: every layer.
    sliding_layers: list[int] | None = None
    # Parallel attention and feed-forward (GPT-J, GPT-NeoX/Pythia): both sublayers read the layer's input, each
    # through its own norm, and their outputs are added to it at once: x + Attention(LN₁(x)) + FFN(LN₂(x)).
    # Pre-norm decoder-only models only. A mixture of experts takes the feed-forward's place (n_experts), and
    # post_norm puts each sublayer's output through a norm of its own before the add (layers.DecoderLayer._parallel).
    parallel_residual: bool = False
    # Mixture of experts (Mixtral, Qwen3-MoE): the decoder's feed-forward becomes n_experts feed-forwards of their
    # own ("experts", each as ffn_gated and activation say, d_expert wide) and a router, a linear map d_model →
    # n_experts without bias. Each token goes to the experts_per_token experts its router softmax ranks highest,
    # and the sublayer's output is their outputs weighted by those probabilities — renormalised to add up to 1
    # over the chosen experts when moe_renormalize (Mixtral; Qwen3-MoE's norm_topk_prob). 0: the paper's one
    # feed-forward. moe_layers: the decoder layers (0-based) with experts (None: all; Qwen3-MoE can keep some
    # layers dense, and their feed-forward is d_ff wide).
    n_experts: int = 0
    experts_per_token: int = 2
    moe_renormalize: bool = True
    d_expert: int | None = None  # None: d_ff
    moe_layers: list[int] | None = None
    # --- Gemma's departures (Gemma 1, 2 and 3; all off for the paper's model) ---
    # RMSNorm multiplies by (1 + γ) instead of γ: the stored γ is an offset from 1 (initialised at 0), and the
    # product is taken in float32 before rounding to the input's precision. Every RMSNorm of the model, QK-norm's too.
    rmsnorm_plus_one: bool = False
    # The √d_model of the embeddings is rounded to the weights' precision before it multiplies them (bfloat16 turns
    # √3072 = 55.43 into 55.5); no change in float32. Needs scale_embedding.
    round_embed_scale: bool = False
    # "Sandwich" norms (Gemma 2, 3): a second norm after each sublayer, x + PostNorm(Sublayer(Norm(x))); traced as
    # `<layer>.add_normK.post_norm` (kind layer_norm). Needs norm_first.
    post_norm: bool = False
    # OLMo 2: the norm after each sublayer only, x + PostNorm(Sublayer(x)) — the sublayer reads the raw residual
    # stream, with no norm before it (the module has no `norm`). Needs post_norm; not with parallel_residual.
    post_norm_only: bool = False
    # Divide the attention scores by √attn_scale_dim instead of √d_k (Gemma 2, 3: query_pre_attn_scalar); None: √d_k.
    attn_scale_dim: float | None = None
    # Soft-capping (Gemma 2): s → cap·tanh(s / cap) squashes every number into (−cap, cap). attn_softcap acts on the
    # scaled attention scores before the mask (traced as `…self_attn.capped_scores`), final_softcap on the logits
    # (`generator.capped`); 0: off.
    attn_softcap: float = 0.0
    final_softcap: float = 0.0
    # The rotary base θ of the sliding-window layers when it differs from the others' (Gemma 3: 10 000 in the local
    # layers, 1 000 000 in the global ones; rope_scaling applies to the global layers only). None: rope_theta.
    rope_local_theta: float | None = None
    extra: dict = field(default_factory=dict)  # free-form facts for people (source model, tokenizer)

    def __post_init__(self) -> None:
        self.validate()

    @property
    def d_head(self) -> int:
        """d_k = d_v = d_model / h (paper §3.2.2), or d_kv when a model sets it (T5)."""
        return self.d_kv if self.d_kv is not None else self.d_model // self.n_heads

    @property
    def kv_heads(self) -> int:
        """How many key/value heads: n_kv_heads under grouped-query attention, else n_heads (paper §3.2.2)."""
        return self.n_kv_heads if self.n_kv_heads is not None else self.n_heads

    @property
    def d_rotary(self) -> int:
        """How many of each head's dimensions rotate under RoPE (an even number; 0 without rotary positions)."""
        if self.positional != "rotary":
            return 0
        return int(self.d_head * self.rotary_fraction) // 2 * 2

    def has_experts(self, layer: int) -> bool:
        """Whether decoder layer `layer` has a mixture of experts in place of its feed-forward."""
        return self.n_experts > 0 and (self.moe_layers is None or layer in self.moe_layers)

    def windowed(self, layer: int) -> bool:
        """Whether decoder layer `layer` attends through the sliding window."""
        return bool(self.sliding_window) and (self.sliding_layers is None or layer in self.sliding_layers)

    def local_rope(self, layer: int | None) -> bool:
        """Whether decoder layer `layer` turns q and k by the local layers' rotary table (rope_local_theta)."""
        return self.rope_local_theta is not None and layer is not None and self.windowed(layer)

    @property
    def d_attn(self) -> int:
        """h · d_k: the width of the concatenated heads (d_model in the paper)."""
        return self.n_heads * self.d_head

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
        if self.d_kv is not None and (not isinstance(self.d_kv, int) or isinstance(self.d_kv, bool) or self.d_kv < 1):
            raise UserError(f"d_kv must be a positive whole number (or null for d_model / n_heads), not {self.d_kv!r}.")
        if self.d_kv is None and self.d_model % self.n_heads:
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
        for name in ("norm_first", "linear_bias", "scale_attention", "ffn_gated", "scale_decoder_output",
                     "mlm_head"):
            if not isinstance(getattr(self, name), bool):
                raise UserError(f"{name} must be true or false, not {getattr(self, name)!r}.")
        if self.mlm_head and self.n_decoder_layers:
            raise UserError("mlm_head (a masked-language-model head) belongs to encoder-only models, and this one "
                            "has decoder layers.")
        self._validate_modern()
        if self.norm not in NORMS:
            raise UserError(f"norm {self.norm!r} is not one of {', '.join(NORMS)}.")
        for name in ("relative_buckets", "relative_max_distance"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 0:
                raise UserError(f"{name} must be zero or a positive whole number, not {value!r}.")
        if self.relative_buckets and self.relative_buckets < 4:
            raise UserError(f"relative_buckets must be 0 (no relative position bias) or at least 4, not "
                            f"{self.relative_buckets}.")  # fmt: skip
        if self.relative_buckets and self.relative_max_distance <= self.relative_buckets // 2:
            raise UserError(f"relative_max_distance {self.relative_max_distance} must exceed half the "
                            f"{self.relative_buckets} buckets, which count single distances.")  # fmt: skip
        if self.share_embeddings and self.src_vocab_size != self.tgt_vocab_size and self.has_encoder:
            raise UserError(
                f"share_embeddings needs equal vocabularies, but the source has {self.src_vocab_size} "
                f"and the target {self.tgt_vocab_size} tokens."
            )
        for name in ("pad_id", "bos_id", "eos_id"):
            value = getattr(self, name)
            if value is not None and not 0 <= value < max(self.src_vocab_size, self.tgt_vocab_size):
                raise UserError(f"{name} {value} lies outside the vocabulary.")

    def _validate_modern(self) -> None:
        """The options of today's decoders (rotary positions, grouped-query attention, QK-norm, sliding window)."""
        if self.n_kv_heads is not None:
            if not isinstance(self.n_kv_heads, int) or isinstance(self.n_kv_heads, bool) or self.n_kv_heads < 1:
                raise UserError(f"n_kv_heads must be a positive whole number (or null for one per query head), not "
                                f"{self.n_kv_heads!r}.")  # fmt: skip
            if self.n_heads % self.n_kv_heads:
                raise UserError(f"n_heads {self.n_heads} is not a multiple of n_kv_heads {self.n_kv_heads}: each "
                                "key/value head must serve the same number of query heads.")  # fmt: skip
        for name in ("qkv_bias", "ffn_bias"):
            if getattr(self, name) is not None and not isinstance(getattr(self, name), bool):
                raise UserError(f"{name} must be true, false or null, not {getattr(self, name)!r}.")
        if self.qk_norm not in QK_NORMS:
            raise UserError(f"qk_norm {self.qk_norm!r} is not one of {', '.join(QK_NORMS)}.")
        if self.rope_scaling not in ROPE_SCALINGS:
            raise UserError(f"rope_scaling {self.rope_scaling!r} is not one of {', '.join(ROPE_SCALINGS)}.")
        for name in ("rope_theta", "rope_factor", "rope_low_freq_factor", "rope_high_freq_factor"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
                raise UserError(f"{name} must be a positive number, not {value!r}.")
        if not isinstance(self.rotary_fraction, (int, float)) or not 0 < self.rotary_fraction <= 1:
            raise UserError(f"rotary_fraction must be in (0, 1], not {self.rotary_fraction!r}.")
        if self.positional == "rotary" and self.d_rotary < 2:
            raise UserError(f"rotary_fraction {self.rotary_fraction} of d_head {self.d_head} leaves no pair of "
                            "dimensions to rotate.")  # fmt: skip
        if self.positional == "rotary" and self.has_encoder:
            raise UserError("Rotary positions are supported in decoder-only models (n_encoder_layers = 0).")
        if not isinstance(self.sliding_window, int) or isinstance(self.sliding_window, bool) or self.sliding_window < 0:
            raise UserError(f"sliding_window must be 0 (no window) or a positive whole number, not "
                            f"{self.sliding_window!r}.")  # fmt: skip
        if self.parallel_residual is not False and (self.parallel_residual is not True or self.has_encoder
                                                    or not self.norm_first):
            raise UserError("parallel_residual (attention and feed-forward side by side) must be true or false, and "
                            "applies to pre-norm decoder-only models only.")  # fmt: skip
        if self.sliding_layers is not None and (
            not isinstance(self.sliding_layers, list)
            or not all(isinstance(i, int) and 0 <= i < self.n_decoder_layers for i in self.sliding_layers)
        ):
            raise UserError(f"sliding_layers must list decoder layers 0 to {self.n_decoder_layers - 1}, not "
                            f"{self.sliding_layers!r}.")  # fmt: skip
        if not isinstance(self.rope_original_max_len, int) or self.rope_original_max_len < 1:
            raise UserError(f"rope_original_max_len must be a positive whole number, not "
                            f"{self.rope_original_max_len!r}.")  # fmt: skip
        self._validate_experts()
        self._validate_gemma()

    def _validate_experts(self) -> None:
        """The mixture-of-experts options (n_experts 0, the paper's dense feed-forward, checks only that)."""
        whole = lambda v: isinstance(v, int) and not isinstance(v, bool)  # noqa: E731
        if not whole(self.n_experts) or self.n_experts < 0:
            raise UserError(f"n_experts must be 0 (one dense feed-forward) or a positive whole number, not "
                            f"{self.n_experts!r}.")  # fmt: skip
        if not self.n_experts:
            return
        if not self.has_decoder:
            raise UserError("n_experts gives the decoder's feed-forwards experts, and this model has no decoder.")
        if not whole(self.experts_per_token) or not 1 <= self.experts_per_token <= self.n_experts:
            raise UserError(f"experts_per_token must be a whole number from 1 to n_experts = {self.n_experts}, not "
                            f"{self.experts_per_token!r}.")  # fmt: skip
        if not isinstance(self.moe_renormalize, bool):
            raise UserError(f"moe_renormalize must be true or false, not {self.moe_renormalize!r}.")
        if self.d_expert is not None and (not whole(self.d_expert) or self.d_expert < 1):
            raise UserError(f"d_expert must be a positive whole number (or null for d_ff), not {self.d_expert!r}.")
        if self.moe_layers is not None and (
            not isinstance(self.moe_layers, list)
            or not all(whole(i) and 0 <= i < self.n_decoder_layers for i in self.moe_layers)
        ):
            raise UserError(f"moe_layers must list decoder layers 0 to {self.n_decoder_layers - 1}, not "
                            f"{self.moe_layers!r}.")  # fmt: skip

    def _validate_gemma(self) -> None:
        """Gemma's options: (1 + γ) norms, the rounded embedding scale, sandwich norms, soft-capping, the score
        scale and the local layers' rotary base."""
        for name in ("rmsnorm_plus_one", "round_embed_scale", "post_norm", "post_norm_only"):
            if not isinstance(getattr(self, name), bool):
                raise UserError(f"{name} must be true or false, not {getattr(self, name)!r}.")
        if self.rmsnorm_plus_one and self.norm != "rmsnorm":
            raise UserError("rmsnorm_plus_one changes RMSNorm's γ into (1 + γ), so it needs norm = rmsnorm.")
        if self.round_embed_scale and not self.scale_embedding:
            raise UserError("round_embed_scale rounds the embeddings' √d_model, so it needs scale_embedding.")
        if self.post_norm and not self.norm_first:
            raise UserError("post_norm adds a norm after each sublayer to the one before it, so it needs norm_first.")
        if self.post_norm_only and (not self.post_norm or self.parallel_residual):
            raise UserError("post_norm_only drops the norm before each sublayer and keeps the one after it, so it "
                            "needs post_norm and a sequential layer (parallel_residual false).")  # fmt: skip
        for name in ("attn_softcap", "final_softcap"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
                raise UserError(f"{name} must be 0 (off) or a positive number, not {value!r}.")
        for name in ("attn_scale_dim", "rope_local_theta"):
            value = getattr(self, name)
            if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0):
                raise UserError(f"{name} must be a positive number (or null), not {value!r}.")
        if self.attn_scale_dim is not None and not self.scale_attention:
            raise UserError("attn_scale_dim sets what the scores are divided by, so it needs scale_attention.")
        if self.rope_local_theta is not None and (self.positional != "rotary" or not self.sliding_window):
            raise UserError("rope_local_theta is the rotary base of the sliding-window layers, so it needs "
                            "positional = rotary and a sliding_window.")  # fmt: skip

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


def llama_tiny() -> TransformerConfig:
    """A Llama-shaped decoder small enough to read, with random weights: rotary positions, four query heads that
    share two key/value heads, RMSNorm before each sublayer, a SwiGLU feed-forward and no biases, over GPT-2's
    tokens. The bundled model `llama-tiny` (resources/models/llama-tiny) is this architecture trained on the
    reverse task (`scratchformer train --preset llama-tiny-random`); the lessons on rotary positions and shared keys
    and values run on that one."""
    return TransformerConfig(
        name="llama-tiny-random", d_model=64, n_heads=4, n_kv_heads=2, d_ff=128, n_encoder_layers=0, n_decoder_layers=2,
        dropout=0.0, max_len=256, share_embeddings=False, tie_output=True, bos_id=GPT2_VOCAB_SIZE - 1,
        eos_id=GPT2_VOCAB_SIZE - 1, activation="silu", positional="rotary", scale_embedding=False,
        final_layer_norm=True, norm_first=True, norm="rmsnorm", layer_norm_eps=1e-6, linear_bias=False,
        ffn_gated=True,
    )  # fmt: skip


PRESETS = {"paper": paper, "blog": blog, "llama-tiny-random": llama_tiny}
PAPER_PRESETS = ("paper", "blog")  # the presets built as the 2017 paper's model; llama-tiny-random departs from it


def preset(name: str) -> TransformerConfig:
    """A fresh config for a preset name, or UserError listing the names that exist."""
    try:
        return PRESETS[name]()
    except KeyError:
        raise UserError(f"Unknown preset {name!r}; choose one of: {', '.join(PRESETS)}.") from None
