"""The encoder-decoder Transformer of "Attention Is All You Need" (2017), with encode/decode separable."""

from __future__ import annotations

import torch
from torch import nn

from ..errors import UserError
from ..recording import lazy as lazy_trace  # its output summary (a run_with_trace argument is called lazy)
from ..recording.intervention_context import active_interventions, patched
from ..recording.lazy import OutputSummary, RecomputeCache
from ..recording.trace import Trace, active_tracer, merge_chunks, tracing
from . import masks
from .config import TransformerConfig
from .embeddings import Embeddings
from .layers import ACTIVATIONS, NORM_NAMES, DecoderLayer, EncoderLayer, make_norm, norm_formula, norm_kind
from .rotary import RotaryEmbedding


def _final_norm(norm: nn.Module | None, x: torch.Tensor, stack: str, pos: str, kind: str = "layernorm"
                ) -> torch.Tensor:  # fmt: skip
    """The optional LayerNorm (or RMSNorm) after a whole stack (torch.nn.Transformer has one; the paper does not)."""
    if norm is None:
        return x
    x = patched(f"{stack}.final_norm.out", norm(x))  # (B, T, d_model)
    tracer = active_tracer()
    if tracer is not None:
        name = NORM_NAMES[kind]
        formula = "LayerNorm(x)" if kind == "layernorm" else norm_formula(kind, "x")
        tracer.add(f"{stack}.final_norm.out", "layer_norm", x, ("batch", pos, "d_model"),
                   f"Final {stack} {name}", formula, f"{stack}.final_norm", major=True)
    return x


class Generator(nn.Module):
    """Linear projection to the vocabulary, then softmax (paper §3.4).

    T5 v1.0 (config.scale_decoder_output) first multiplies the decoder output by d_model^-0.5: its output layer is
    the embedding table, whose rows are large (initialised with std 1), so the logits would otherwise be √d_model
    times too big. Gemma 2 (config.final_softcap c > 0) soft-caps the logits before the softmax:
    c·tanh(logits / c), traced as `generator.capped`; that is what forward() returns.
    """

    def __init__(self, config: TransformerConfig) -> None:
        super().__init__()
        self.proj = nn.Linear(config.d_model, config.tgt_vocab_size, bias=False)
        self.scale = config.d_model**-0.5 if config.scale_decoder_output else None
        self.d_model = config.d_model
        self.softcap = float(config.final_softcap)  # 0: no soft-capping
        if config.final_logits_bias:
            self.register_buffer("final_logits_bias", torch.zeros(config.tgt_vocab_size))
        else:
            self.final_logits_bias = None

    def logits(self, x: torch.Tensor) -> torch.Tensor:
        logits = self.proj(x)  # (B, T, d_model) → (B, T, vocab)
        if self.final_logits_bias is not None:
            logits = logits + self.final_logits_bias
        return logits

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        tracer = active_tracer()
        if self.scale is not None:
            x = x * self.scale  # (B, T, d_model)
            if tracer is not None:
                tracer.add("generator.scaled", "output_scale", x, ("batch", "tgt_pos", "d_model"),
                           "Decoder output × d_model^-0.5", f"x · d_model^-0.5  (1/√{self.d_model} = {self.scale:.4f})",
                           "generator")
        flag = self._unneeded(tracer, x)
        if flag is not None:  # nobody reads these logits now: placeholders, made by the rerun when first shown
            logits = capped = torch.empty((*x.shape[:-1], self.proj.out_features), device="meta")  # (B, T, vocab)
        else:
            logits = self.logits(x)  # (B, T, vocab)
            capped = self.cap(logits)  # (B, T, vocab), the logits themselves unless the model soft-caps them
        if tracer is not None:
            self._record(tracer, x, logits, capped, flag)
        return capped

    def _unneeded(self, tracer, x: torch.Tensor) -> torch.Tensor | None:
        """The logits' non-finite flag when a lazy trace neither keeps nor returns them (keep_output=False, and
        too large to keep): the (B, T, vocab) product, often the pass's largest, is then left to the rerun that
        shows it. None when they must be made now."""
        if tracer is None or not tracer.lazy or tracer.output_wanted:
            return None
        if x.shape[:-1].numel() * self.proj.out_features * x.element_size() <= tracer.keep_bytes:
            return None
        return self._finite_flag(x)

    def cap(self, logits: torch.Tensor) -> torch.Tensor:
        """Gemma 2's final soft-capping c·tanh(logits / c): every logit squashed into (−c, c); unchanged when off."""
        if not self.softcap:
            return logits
        return torch.tanh(logits / self.softcap) * self.softcap  # (B, T, vocab)

    def _record(self, tracer, x: torch.Tensor, logits: torch.Tensor, capped: torch.Tensor,
                flag: torch.Tensor | None = None) -> None:
        """Logits and probabilities, plus the trace's output summary (each position's top tokens and the
        probability of the token that follows it in the decoder input). A lazy trace that would not keep the
        (B, T, vocab) probabilities never builds them, nor the summary: the rerun that shows them makes the
        summary too, the first time something reads it (lazy_trace.LazyOutputSummary)."""
        xs, ids = x.detach().cpu(), tracer.target_ids

        def rerun() -> dict[str, torch.Tensor]:
            with torch.inference_mode():  # on the model's device, as an eager trace takes them: the same bits
                again = self.logits(xs.to(self.proj.weight.device))  # (b, T, vocab)
                final = self.cap(again)  # (b, T, vocab): the logits themselves unless the model soft-caps them
                probs = final.softmax(-1)  # (b, T, vocab)
                summary = lazy_trace.summary_tensors(OutputSummary.of([probs], ids))
                out = {"generator.logits": again.cpu(), "generator.probs": probs.cpu(), **summary}
                return {**out, "generator.capped": final.cpu()} if self.softcap else out

        whole = not tracer.lazy or logits.numel() * logits.element_size() <= tracer.keep_bytes
        probs = capped.softmax(-1) if whole else torch.empty(logits.shape, device="meta")
        dims = ("batch", "tgt_pos", "vocab")
        with tracer.recompute_from("generator", rerun, (xs,)) as source:
            tracer.add("generator.logits", "logits", logits, dims, "Logits", "logits = x W_vocab", "generator",
                       major=not self.softcap, nonfinite=flag if flag is not None else self._finite_flag(x))
            if self.softcap:  # c·tanh(·/c) of finite logits is finite: checked like any step when made
                c = self.softcap
                tracer.add("generator.capped", "softcap", capped, dims, f"Logits soft-capped at ±{c:g}",
                           f"{c:g}·tanh(logits / {c:g})", "generator", major=True, nonfinite=flag)
            tracer.add("generator.probs", "probabilities", probs, dims, "Output probabilities",
                       "P(next token) = softmax(logits)", "generator", major=True)
        if whole:
            tracer.output_summary = OutputSummary.of([probs], ids)
        else:  # made from the rerun when first read
            make = lambda: lazy_trace.summary_from(source.get())  # noqa: E731  (the rerun's dict → the summary)
            tracer.output_summary = lazy_trace.LazyOutputSummary([(logits.shape[0], make)])

    def _finite_flag(self, x: torch.Tensor) -> torch.Tensor | None:
        """The logits' non-finite flag (False) when their size vouches that they are finite, so the (B, T, vocab)
        logits need not be read for it; None when they must be (Tracer.add checks them then).

        |x_t · w_v + b_v| ≤ d_model · max|x| · max|W| + max|b|, and rounding the d_model products and their sum
        adds at most a factor 2 when d_model·ε ≤ 1/2: far below the largest float, no logit can overflow. NaN or
        ±∞ in x, W or b makes the bound NaN or ∞, and the answer "read them". max|W| is taken once per version of
        the weights (a pass over the whole vocabulary matrix, as large as one item's logits)."""
        w = self.proj.weight
        info = torch.finfo(w.dtype)
        if x.device.type != "cpu" or self.d_model * info.eps > 0.5:
            return None
        version = (w.data_ptr(), w._version)
        if getattr(self, "_largest_weight", (None,))[0] != version:
            self._largest_weight = (version, torch.linalg.vector_norm(w.detach(), float("inf")))
        bound = self.d_model * torch.linalg.vector_norm(x, float("inf")) * self._largest_weight[1]
        if self.final_logits_bias is not None:
            bound = bound + torch.linalg.vector_norm(self.final_logits_bias, float("inf"))
        return torch.tensor(False) if bool(bound <= info.max / 4) else None


class MaskedLMHead(nn.Module):
    """The masked-language-model head of BERT's pretraining (Devlin et al. 2019, §3.1 "Masked LM"), which
    RoBERTa and DistilBERT keep: each position's final encoder vector → one score per vocabulary entry, a guess
    for the token *at* that position (what a [MASK] there should be), not the next one.

        h      = LayerNorm(act(x W_t + b_t))          x (…, d_model) → h (…, d_model)
        logits = h W_vocabᵀ + b_vocab                 (…, d_model) → (…, vocab)
        P      = softmax(logits)

    act is the model's own activation (GELU for all three families); W_vocab is the token-embedding matrix when
    config.tie_output says the head is tied to it, as in the published models. Not in the 2017 paper, and not
    run by Transformer.forward(): an encoder-only model still ends with its hidden states, and the logit lens
    (scratchformer.analyses.lens) reads the encoder's residual stream through this head.
    """

    def __init__(self, config: TransformerConfig) -> None:
        super().__init__()
        d = config.d_model
        self.dense = nn.Linear(d, d)  # W_t (d_model × d_model), b_t
        self.activation = ACTIVATIONS[config.activation]
        self.norm = nn.LayerNorm(d, eps=config.layer_norm_eps)
        self.proj = nn.Linear(d, config.src_vocab_size)  # W_vocab (vocab × d_model), b_vocab

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.norm(self.activation(self.dense(x)))  # (…, d_model)
        return self.proj(h)  # (…, vocab): logits


CHUNK_ROWS = 256  # a lazy trace runs the batch in chunks of about this many positions (see chunk_items)


def chunk_items(length: int) -> int:
    """How many batch items a lazy trace runs together: enough rows for the matrix products to run at speed on
    short inputs (8 × 64 together, not 8 × 1), one item alone on long ones, so that showing a recomputed step of
    one item reruns no more than about CHUNK_ROWS positions of work."""
    return max(1, CHUNK_ROWS // max(length, 1))


class Transformer(nn.Module):
    """Embeddings → N encoder layers → N decoder layers (cross-attending to the encoder) → Linear → Softmax."""

    def __init__(self, config: TransformerConfig) -> None:
        super().__init__()
        config.validate()
        self.config = config
        c = config
        self.src_embed = Embeddings(c, c.src_vocab_size, "src_pos", "src_embed") if c.has_encoder else None
        self.encoder = nn.ModuleList(EncoderLayer(c, i) for i in range(c.n_encoder_layers))
        final_norm = c.final_layer_norm and c.has_encoder
        self.encoder_norm = make_norm(c) if final_norm else None
        if c.has_decoder:
            self.tgt_embed = Embeddings(c, c.tgt_vocab_size, "tgt_pos", "tgt_embed")
            self.decoder = nn.ModuleList(DecoderLayer(c, i) for i in range(c.n_decoder_layers))
            self.decoder_norm = make_norm(c) if c.final_layer_norm else None
            self.generator = Generator(c)
        else:
            self.tgt_embed = self.decoder = self.decoder_norm = self.generator = None
        self.mlm_head = MaskedLMHead(c) if c.mlm_head else None  # read by the logit lens only, not by forward()
        # RoPE's angles, computed once per pass and handed to every decoder layer (no weights: a buffer)
        self.rotary = RotaryEmbedding(c) if c.positional == "rotary" else None
        # Gemma 3: the sliding-window layers turn q and k by a table of their own (rope_local_theta)
        self.rotary_local = RotaryEmbedding(c, local=True) if c.rope_local_theta is not None else None
        self.tie_weights()
        self.reset_parameters()

    def tie_weights(self) -> None:
        """One tensor for the matrices the config shares (paper §3.4): the source and target embeddings, and the
        output layer with the target embedding (or an encoder's masked-LM head with the source embedding)."""
        c = self.config
        if self.generator is not None:
            if c.share_embeddings and self.src_embed is not None:
                self.tgt_embed.tokens.weight = self.src_embed.tokens.weight
            if c.tie_output:
                self.generator.proj.weight = self.tgt_embed.tokens.weight
        if self.mlm_head is not None and c.tie_output:
            self.mlm_head.proj.weight = self.src_embed.tokens.weight

    def fill_computed_buffers(self, device: torch.device | str = "cpu") -> None:
        """Compute again the tables that are derived from the config rather than stored (the sinusoids, RoPE's
        frequencies) where they are placeholders: a model built on the meta device (no memory) and then given its
        weights from a file (scratchformer.loading.importers.weights.build_model)."""
        for module in self.modules():
            if isinstance(module, RotaryEmbedding) and module.inv_freq.is_meta:
                module.inv_freq = module.frequencies().to(device)
            elif isinstance(module, Embeddings) and module.pe is not None and module.pe.is_meta:
                module.pe = module.table().to(device)

    def reset_parameters(self) -> None:
        """Xavier-uniform for every matrix, as the Annotated Transformer and torch.nn.Transformer do."""
        for p in self.parameters():
            if p.dim() > 1:
                nn.init.xavier_uniform_(p)

    @staticmethod
    def _position_bias(layers: nn.ModuleList, n_q: int, n_k: int, offset: int = 0) -> torch.Tensor | None:
        """T5's relative position bias (h, n_q, n_k) from the table in the stack's first layer, or None.

        Computed once per stack and handed to every layer (T5 shares it); the first layer traces it."""
        table = layers[0].self_attn.relative_bias if len(layers) else None
        return table(n_q, n_k, offset) if table is not None else None

    @property
    def device(self) -> torch.device:
        return next(self.parameters()).device

    def _check_length(self, ids: torch.Tensor, side: str, offset: int = 0) -> None:
        if ids.dim() != 2:
            raise UserError(f"The {side} ids must have shape (batch, length), not {tuple(ids.shape)}.")
        n = ids.shape[1] + offset
        if n > self.config.max_len:
            raise UserError(
                f"The {side} has {n} tokens but this model reads at most {self.config.max_len}; shorten the text."
            )
        if ids.shape[1] == 0:
            raise UserError(f"The {side} is empty; type at least one word.")

    def encode(
        self, src: torch.Tensor, src_pad: torch.Tensor | None = None, token_type_ids: torch.Tensor | None = None
    ) -> torch.Tensor:
        """src: (B, S) ids → memory: (B, S, d_model). src_pad: (B, S) bool, True at padding."""
        if not self.config.has_encoder:
            raise UserError("This model has no encoder.")
        self._check_length(src, "source")
        x = self.src_embed(src, token_type_ids=token_type_ids)  # (B, S, d_model)
        return self.encode_layers(x, src_pad)

    def encode_layers(self, x: torch.Tensor, src_pad: torch.Tensor | None = None, first: int = 0) -> torch.Tensor:
        """The encoder's layers from `first` on, and its final norm: x (B, S, d_model), the input of layer
        `first` → memory (B, S, d_model). encode() starts at 0; the patching sweeps start later, on a corrupted
        run's stored layer input (scratchformer.patching)."""
        b, s = x.shape[:2]
        mask = masks.encoder_self_mask(src_pad, b, s, x.device)  # (B, S, S) or None
        bias = self._position_bias(self.encoder, s, s)  # (h, S, S) or None
        for layer in self.encoder[first:]:
            x = layer(x, mask, bias)
        return _final_norm(self.encoder_norm, x, "encoder", "src_pos", norm_kind(self.config))

    def decode(
        self,
        tgt: torch.Tensor,
        memory: torch.Tensor | None = None,
        src_pad: torch.Tensor | None = None,
        tgt_pad: torch.Tensor | None = None,
        cache: list[dict] | None = None,
        offset: int = 0,
        causal: bool = True,
    ) -> torch.Tensor:
        """tgt: (B, T) ids (decoder input, starting with the start token) → hidden: (B, T, d_model).

        With `cache` (one dict per layer, filled as it goes) only the new positions are passed in; `offset`
        is the number of positions decoded before them. causal=False drops the causal mask (padding stays
        masked): every position sees the later ones too, as the `mask` experiment shows.
        """
        if not self.config.has_decoder:
            raise UserError("This model has no decoder.")
        self._check_length(tgt, "target", offset)
        if self.config.has_encoder and memory is None:
            raise UserError("The decoder needs the encoder output (memory); call encode() first.")
        x = self.tgt_embed(tgt, offset=offset)  # (B, T, d_model)
        return self.decode_layers(x, memory, src_pad, tgt_pad, cache, offset, causal)

    def decode_layers(self, x: torch.Tensor, memory: torch.Tensor | None = None, src_pad: torch.Tensor | None = None,
                      tgt_pad: torch.Tensor | None = None, cache: list[dict] | None = None, offset: int = 0,
                      causal: bool = True, first: int = 0) -> torch.Tensor:  # fmt: skip
        """The decoder's layers from `first` on, and its final norm: x (B, T, d_model), the input of layer `first`
        at positions offset … offset + T − 1 → hidden (B, T, d_model). decode() starts at 0; the patching sweeps
        start later, on a corrupted run's stored layer input and keys and values (scratchformer.patching); then
        `cache` holds a dict per layer, of which those from `first` on are read."""
        b, t = x.shape[:2]
        device = x.device
        # One new token with nothing padded (cached decoding) may see every earlier position: no mask needed.
        one_free_token = tgt_pad is None and t == 1
        self_mask = None if one_free_token else masks.decoder_self_mask(tgt_pad, b, t, offset, device)
        if not causal:  # padding only: (B, T, offset + T), or None when nothing is padded
            self_mask = None if tgt_pad is None else masks.padding_mask(tgt_pad).expand(b, t, offset + t)
        window = self.config.sliding_window
        cut = window and causal and offset + t > window  # some key lies outside a query's window
        window_mask = masks.decoder_self_mask(tgt_pad, b, t, offset, device, window) if cut else self_mask
        cross = masks.cross_mask(src_pad, b, t, memory.shape[1], device) if memory is not None else None
        pure_causal = causal and tgt_pad is None and offset == 0 and t > 1  # exactly the causal triangle
        bias = self._position_bias(self.decoder, t, offset + t, offset)  # (h, T, T_past + T) or None
        rope = self.rotary(t, offset) if self.rotary is not None else None  # (cos, sin), each (T, d_rot)
        rope_local = self.rotary_local(t, offset) if self.rotary_local is not None else None  # Gemma 3's local θ
        for i, layer in enumerate(self.decoder):
            if i < first:
                continue
            local = cut and self.config.windowed(i)  # this layer's queries see the last `window` keys only
            angles = rope_local if self.config.local_rope(i) else rope
            x = layer(x, memory, window_mask if local else self_mask, cross, cache[i] if cache is not None else None,
                      pure_causal and not local, bias, angles)  # fmt: skip
        return _final_norm(self.decoder_norm, x, "decoder", "tgt_pos", norm_kind(self.config))

    def forward(
        self,
        src: torch.Tensor | None,
        tgt: torch.Tensor | None = None,
        src_pad: torch.Tensor | None = None,
        tgt_pad: torch.Tensor | None = None,
        token_type_ids: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """Logits (B, T, tgt_vocab) for an encoder-decoder or decoder-only model; hidden states for encoder-only."""
        memory = self.encode(src, src_pad, token_type_ids) if self.config.has_encoder else None
        if not self.config.has_decoder:
            return memory  # (B, S, d_model)
        if tgt is None:
            raise UserError("This model has a decoder: give it a target (decoder input) too.")
        return self.generator(self.decode(tgt, memory, src_pad, tgt_pad))  # (B, T, vocab)

    def run_with_trace(
        self,
        src: torch.Tensor | None,
        tgt: torch.Tensor | None = None,
        src_pad: torch.Tensor | None = None,
        tgt_pad: torch.Tensor | None = None,
        source_tokens: list[list[str]] | None = None,
        target_tokens: list[list[str]] | None = None,
        token_type_ids: torch.Tensor | None = None,
        lazy: bool = True,
        keep_bytes: int = 256 * 1024,
        cache: RecomputeCache | None = None,
        keep_output: bool = True,
    ) -> tuple[torch.Tensor | None, Trace]:
        """Run forward() with every intermediate recorded; returns (output, Trace). No autograd graph is kept.

        The batch goes through the model in chunks of items (one item each for long inputs, more for short ones:
        `chunk_items`), so that a chunk's sublayer can be rerun alone later and give the same bits — a matrix
        product's rounding can depend on how many rows it is given, so a rerun must see exactly the traced rows.
        `lazy` (the default; eval mode only) keeps tensors larger than `keep_bytes` inside sublayers as recipes
        (see scratchformer.recording.trace), so long inputs fit in memory; lazy=False holds every tensor. With
        keep_output=False the output is None (the trace has what it shows of it)."""
        lazy = lazy and not self.training
        cache = cache if cache is not None else RecomputeCache()
        ids = src if src is not None else tgt
        n_items = ids.shape[0] if ids is not None and ids.dim() == 2 else 1
        step = chunk_items(ids.shape[1] if ids is not None and ids.dim() == 2 else 1)  # eager or lazy: same numbers
        pick = (lambda t, a, z: None if t is None else t[a:z])  # noqa: E731
        out, per_chunk, summaries = None, [], []
        for a in range(0, n_items, step):
            z = min(a + step, n_items)
            with torch.inference_mode(), tracing(lazy, keep_bytes, cache) as tracer:
                tracer.key_prefix = f"{a}:"
                tracer.target_ids = pick(tgt, a, z)
                tracer.output_wanted = keep_output
                part = self.forward(pick(src, a, z), pick(tgt, a, z), pick(src_pad, a, z), pick(tgt_pad, a, z),
                                    pick(token_type_ids, a, z))  # (b, T, vocab), or (b, S, d_model) with no decoder
                if keep_output and out is None:  # filled chunk by chunk, never held twice (B × T × vocab is large)
                    out = part if z - a == n_items else part.new_empty((n_items, *part.shape[1:]))
                if keep_output and z - a < n_items:
                    out[a:z] = part
                del part
            per_chunk.append(tracer.steps)
            summaries.append(tracer.output_summary)
        cpu = (lambda t: None if t is None else t.detach().cpu())  # noqa: E731
        summary = lazy_trace.LazyOutputSummary.join(summaries) if summaries[0] is not None else None
        trace = Trace(merge_chunks(per_chunk), source_tokens or [], target_tokens or [], cpu(src_pad), cpu(tgt_pad),
                      cache, summary)  # fmt: skip
        changes = active_interventions()
        trace.interventions = list(changes.items) if changes is not None else []
        return out, trace

    def new_cache(self) -> list[dict]:
        """Empty key/value caches for step-by-step decoding, one per decoder layer."""
        return [{} for _ in range(self.config.n_decoder_layers)]
