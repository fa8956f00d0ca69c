"""The local replacement model of one run (Ameisen et al. 2025, "Circuit Tracing", §2.2 and §3.1).

The model is run once on the input (the *capture* run). Then, for this input only, three things are frozen at
the values that run had, and one thing is replaced:

  attention patterns   A_h = softmax(Q_h K_hᵀ/√d_k + M) of every head, self- and cross-attention alike, so
                       attention is linear in what it reads:  Attn(x) = Σ_h A_h (x W_V,h + b_V,h) W_O,h + b_O
  normalisation scales σ of each LayerNorm call, rms of each RMSNorm call, so a norm is affine:
                       LN(z) = (z − mean(z))/σ_frozen · γ + β        RMSNorm(z) = z/rms_frozen · γ
  the feed-forwards    each replaced by its transcoder plus an error term:
                       FFN_l(x) = f_l W_dec + b_dec + e_l,   e_l = FFN_l(x) − (f_l W_dec + b_dec)  (this run's)

With the features f_l and errors e_l held as inputs, everything else is affine: the paper's post-LN layer
x_{l+1} = LN(x + Sublayer(x)), a pre-norm one x_{l+1} = x + Sublayer(Norm(x)), the decoder's cross-attention
(the encoder's features reach the decoder's through its frozen pattern, the V and W^O path), the final norm and
the output layer. So each feature's pre-activation pre_t = x W_enc[:, t] + b_enc[t] and each logit are an affine
function of the *nodes*: the input embeddings (token + position, one per position and side), the active
features, and the error vectors:

    y_t = Σ_s J_ts u_s + b_t                  (the graph's edges: J_ts u_s; its bias: b_t)

u_s is a node's value: a feature's activation, and 1 for an embedding or error node (a multiplier of its
vector). With every u_s at this run's value the replacement reproduces the model's logits exactly (up to
rounding), because e_l is exactly what the transcoder misses.

*Linear regime* (for checking the graph): the features respond to their pre-activations as an active JumpReLU,
TopK or ReLU feature does, f = pre (the active set kept), so removing a node moves the logit by its direct and
indirect effects together.

The replacement runs on a private copy of the model (in float64 when it is small): its attention, norm,
embedding and feed-forward modules get forwards of their own, so the model's own forward wires them — post-LN
or pre-norm, sandwich or parallel layers, encoder-decoder or decoder-only — and the model itself is untouched.
"""

from __future__ import annotations

import copy
import weakref
from collections import defaultdict
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from ..features.dictionary import Dictionary
from ..patching.interventions import HeadChange, active_interventions, change_head
from ..transformer.attention import MultiHeadAttention, expand_kv
from ..transformer.embeddings import Embeddings
from ..transformer.masks import causal_mask, pad_from_ids
from ..transformer.norms import RMSNorm
from .packing import Packing

SMALL_MODEL = 50_000_000  # parameters: below this the replacement runs in float64
BIG_TABLE = 1_000_000  # parameters of one tensor (a vocabulary's embeddings) copied straight into that precision


@dataclass
class Active:
    """One feed-forward's active features in this run: n of them, each at a position with a feature index."""

    pos: torch.Tensor  # (n,) int64
    feat: torch.Tensor  # (n,) int64
    value: torch.Tensor  # (n,) the activations f
    pre: torch.Tensor  # (n,) the pre-activations, as the transcoder computed them from the real input
    offset: torch.Tensor  # (n,) f − pre: 0 for JumpReLU, TopK and ReLU features, the linear regime's shift


@dataclass
class Leaves:
    """The node values a replacement pass reads, each with a batch axis B (one row per target when attributing):
    `emb[side]` (B, T) multipliers of the embedding vectors, `feat[step]` (B, n) the active features'
    activations, `err[step]` (B, T) multipliers of the error vectors."""

    emb: dict[str, torch.Tensor]
    feat: dict[str, torch.Tensor]
    err: dict[str, torch.Tensor]

    def tensors(self) -> list[torch.Tensor]:
        return [*self.feat.values(), *self.err.values(), *self.emb.values()]


@dataclass
class FullPass:
    """One replacement pass with every node at its value (before a final soft-capping, which the graph does not
    explain)."""

    pre: dict[str, torch.Tensor]  # step → (1, n): the active features' pre-activations
    hidden: torch.Tensor  # (1, T, d_model)
    logits: torch.Tensor  # (vocab,) float64 at the explained position
    captured: torch.Tensor  # (vocab,) float64: the capture run's there


def ffn_side(step: str) -> str:
    """'encoder' or 'decoder' for a feed-forward step name."""
    return "encoder" if step.startswith("encoder") else "decoder"


class LocalReplacement:
    """The replacement model of one input (see the module's text).

    `transcoders`: ffn output step → Dictionary (scratchformer.graph.transcoders.open_set); src/tgt: (1, S) and
    (1, T) ids. `keep`: per step, a (T, d_sae) bool mask of the features to keep as nodes (None: every active one);
    the others are folded into that layer's error, so the replacement stays exact.

    `versus`: a token id whose logit is subtracted from the explained one (a logit difference, "why this token
    rather than that one"; it takes the place of `demeaned`, whose mean would cancel).
    circuit-tracer's conventions, each off by default: `demeaned`, the explained logit minus the mean of every
    logit at that position; `token_embeddings`, embedding nodes of the token's vector alone, the positional
    encoding (and token types) a constant; `held`, the first `held` positions of each side hold their features
    and error at this run's values as constants (circuit-tracer so holds the start token: its error nodes stay,
    with zero vectors)."""

    def __init__(self, bundle, transcoders: dict[str, Dictionary], src: torch.Tensor | None, tgt: torch.Tensor,
                 dtype: torch.dtype | None = None, keep: dict[str, torch.Tensor] | None = None,
                 demeaned: bool = False, token_embeddings: bool = False, held: int = 0,
                 versus: int | None = None) -> None:  # fmt: skip
        model = bundle.model
        n_params = sum(p.numel() for p in model.parameters())
        self.dtype = dtype or (torch.float64 if n_params < SMALL_MODEL else torch.float32)
        self.device = next(model.parameters()).device
        self.config = model.config
        # parameters already in the replacement's precision are shared, not copied (it only reads them); the large
        # tables (a vocabulary's embeddings) are copied once, straight into it
        memo = {id(p): nn.Parameter(p.detach().to(self.dtype), requires_grad=False)
                for p in model.parameters() if p.numel() >= BIG_TABLE or p.dtype == self.dtype}  # fmt: skip
        self.model = copy.deepcopy(model, memo).to(self.dtype).eval().requires_grad_(False)
        self.transcoders = {s: copy.deepcopy(d).to(self.device, self.dtype).requires_grad_(False)
                            for s, d in transcoders.items()}  # fmt: skip
        c = self.config
        self.src = None if src is None else src.to(self.device)
        self.tgt = tgt.to(self.device)
        self.src_pad = pad_from_ids(self.src, c.pad_id) if self.src is not None else None
        self.tgt_pad = pad_from_ids(self.tgt, c.pad_id, start=True)
        # what the capture run froze
        self.patterns: dict[str, torch.Tensor] = {}  # attention module → (1, h, Tq, Tk)
        self.scales: dict[str, list[torch.Tensor]] = defaultdict(list)  # norm module → per call (1, T, 1)
        self.embeddings: dict[str, torch.Tensor] = {}  # side → (T, d_model): token + position, as the layers read it
        self.demeaned, self.token_embeddings, self.held = demeaned, token_embeddings, held
        self.versus = versus  # a token whose logit the explained one is taken against (a logit difference)
        self.embedding_rest: dict[str, torch.Tensor] = {}  # side → (T, d_model): the constant part (token_embeddings)
        self.held_errors: dict[str, torch.Tensor] = {}  # step → (T, d_model): the errors held as constants
        self._output_weight = model.generator.proj.weight if model.generator is not None else None  # the model's
        self._mean_row: torch.Tensor | None = None  # the output layer's mean row (demeaned)
        self.ffn_in: dict[str, torch.Tensor] = {}  # step → (T, d_model)
        self.ffn_out: dict[str, torch.Tensor] = {}  # step → (T, d_model)
        self._mode = "capture"
        self._calls: dict[str, int] = defaultdict(int)
        self._leaves: Leaves | None = None
        self._linear = False
        self._gates: dict[str, torch.Tensor] = {}
        self._pre: dict[str, torch.Tensor] = {}
        self._pads: dict[str, tuple[torch.Tensor, torch.Tensor, torch.Tensor] | None] = {}
        self._packing: Packing | None = None  # the decoder's rows laid end to end in this pass (packing.py)
        self._install()
        with torch.no_grad():
            self.captured_hidden = self._run()[0]  # (T, d_model)
        self._mode = "replace"
        self.packable = self._causal_decoder()
        self.active: dict[str, Active] = {}
        self.all_active: dict[str, torch.Tensor] = {}  # step → (T, d_sae) bool
        self.errors: dict[str, torch.Tensor] = {}  # step → (T, d_model): FFN output − reconstruction of kept features
        self._transcode(keep)

    # --- the capture run and the frozen forwards ---------------------------------------------------------------

    def _install(self) -> None:
        m = self.model
        inside = set()  # the norms inside attention (QK-norm) and embeddings act on frozen or replaced paths
        for name, mod in m.named_modules():
            if isinstance(mod, MultiHeadAttention):
                mod.forward = self._attention(name, mod)
                inside |= {id(x) for x in mod.modules()}
            elif isinstance(mod, Embeddings):
                mod.forward = self._embedding("encoder" if name == "src_embed" else "decoder", mod)
                inside |= {id(x) for x in mod.modules()}
        for name, mod in m.named_modules():
            if id(mod) not in inside and isinstance(mod, nn.LayerNorm | RMSNorm):
                mod.forward = self._norm(name, mod)
        for step in self.transcoders:
            mod = m.get_submodule(step.rsplit(".", 1)[0])  # 'decoder.1.ffn.out' → model.decoder[1].ffn
            mod.forward = self._ffn(step, mod)

    def _attention(self, name: str, mod: MultiHeadAttention):
        decoder = name.startswith("decoder")

        def forward(x, memory=None, mask=None, cache=None, is_causal=False, position_bias=None, rope=None):
            if self._mode == "capture":
                if mask is None and is_causal:
                    n_q, n_k = x.shape[1], (memory if mod.cross else x).shape[1]
                    mask = causal_mask(n_q, n_k, n_k - n_q, x.device)[None]  # (1, Tq, Tk)
                named = mod.interior(x, memory, mask, position_bias, None, False, rope)
                self.patterns[name] = _changed(mod, named["weights"].detach())  # (1, h, Tq, Tk)
                return named["out"]
            if decoder and self._packing is not None:  # packed queries (packing.py): (1, N, d) → (1, N, d_model)
                w, b = _value_weights(mod)
                values = F.linear(memory if mod.cross else x, w, b)  # (B, S, h_kv·d_head) or (1, N, h_kv·d_head)
                concat = self._packing.attend(self.patterns[name], values, not mod.cross, mod.d_head)  # (N, h·d_head)
                return mod.out_proj(concat)[None]
            v = _values(mod, memory if mod.cross else x)  # (B, h, Tk, d_head)
            context = self.patterns[name] @ v  # (1, h, Tq, Tk) @ (B, h, Tk, d_head) → (B, h, Tq, d_head)
            return mod.combine(context)[1]  # (B, Tq, d_model): Σ_h A_h V_h W_O,h + b_O

        return forward

    def _norm(self, name: str, mod: nn.Module):
        original, rms = mod.forward, isinstance(mod, RMSNorm)
        decoder = name.startswith("decoder")

        def forward(z):
            if self._mode == "capture":
                if rms:
                    scale = torch.sqrt(z.pow(2).mean(-1, keepdim=True) + mod.eps)  # (1, T, 1)
                else:
                    scale = torch.sqrt(z.var(-1, unbiased=False, keepdim=True) + mod.eps)  # (1, T, 1)
                self.scales[name].append(scale.detach())
                return original(z)
            scale = self.scales[name][self._calls[name]]  # (1, T, 1)
            self._calls[name] += 1
            if decoder and self._packing is not None:
                scale = scale[:, self._packing.pos]  # (1, N, 1)
            if rms:  # z/rms_frozen · γ   (Gemma's (1 + γ))
                gain = 1.0 + mod.weight if mod.plus_one else mod.weight
                return z / scale * gain
            out = (z - z.mean(-1, keepdim=True)) / scale  # (B, T, d): (z − mean(z))/σ_frozen
            if mod.weight is not None:
                out = out * mod.weight
            return out + mod.bias if mod.bias is not None else out

        return forward

    def _embedding(self, side: str, mod: Embeddings):
        original = mod.forward

        def forward(ids, offset=0, token_type_ids=None):
            if self._mode == "capture":
                out = original(ids, offset, token_type_ids)  # (1, T, d_model)
                self.embeddings[side] = out[0].detach()
                if self.token_embeddings:
                    if mod.layer_norm is not None:
                        raise ValueError("embedding nodes of the token alone need embeddings without a LayerNorm")
                    looked = mod.tokens(ids)  # (1, T, d_model)
                    token = looked * mod.scale_factor(looked.dtype) if mod.scale != 1.0 else looked
                    self.embeddings[side] = token[0].detach()
                    self.embedding_rest[side] = (out - token)[0].detach()  # positional encoding (+ token types)
                return out
            x = self._leaves.emb[side][..., None] * self.embeddings[side]  # (B, T, 1)·(T, d) → (B, T, d)
            x = x + self.embedding_rest[side] if side in self.embedding_rest else x
            return self._packing.pack(x) if side == "decoder" and self._packing is not None else x  # (1, N, d)

        return forward

    def _ffn(self, step: str, mod: nn.Module):
        original = mod.forward

        def forward(x):
            if self._mode == "capture":
                out = original(x)  # (1, T, d_model)
                self.ffn_in[step], self.ffn_out[step] = x[0].detach(), out[0].detach()
                return out
            if ffn_side(step) == "decoder" and self._packing is not None:  # (1, N, d) → (B, T, d) → (1, N, d)
                return self._packing.pack(self._replaced_ffn(step, self._packing.unpack(x)))
            return self._replaced_ffn(step, x)

        return forward

    def _replaced_ffn(self, step: str, x: torch.Tensor) -> torch.Tensor:
        """f W_dec + b_dec + e for the active features (the leaves, or in the linear regime their pre-activations),
        recording the pre-activations pre = x W_enc + b_enc of the active features: x (B, T, d) → (B, T, d)."""
        d, act, pads = self.transcoders[step], self.active[step], self._pads[step]
        if pads is not None:  # per position, a product with the encoder rows of its features (see _pad)
            slot, enc, dec = pads
            pre = torch.bmm(enc, x.permute(1, 2, 0))[act.pos, slot].T  # (T, m, d)(T, d, B) → (T, m, B) → (B, n)
        else:
            read = x[:, act.pos]  # (B, n, d_model): each active feature's position
            pre = (read * d.W_enc.T[act.feat]).sum(-1)  # (B, n)
        pre = pre + d.b_enc[act.feat]
        self._pre[step] = pre
        f = (pre + act.offset) * self._gates[step] if self._linear else self._leaves.feat[step]  # (B, n)
        out = d.b_dec + self._leaves.err[step][..., None] * self.errors[step]  # (B, T, d_model)
        if step in self.held_errors:
            out = out + self.held_errors[step]
        if pads is not None:  # Σ_i f_i W_dec[i] at pos_i, per position
            placed = f.new_zeros(dec.shape[0], dec.shape[1], f.shape[0]).index_put((act.pos, slot), f.T)  # (T, m, B)
            return out + torch.bmm(placed.transpose(1, 2), dec).transpose(0, 1)  # (T, B, m)(T, m, d) → (B, T, d)
        return out.index_add(1, act.pos, f[..., None] * d.W_dec[act.feat])  # + Σ_i f_i W_dec[i] at pos_i

    def _run(self) -> torch.Tensor:
        """The model's own forward from the embeddings to the final hidden state (B, T, d_model)."""
        m = self.model
        self._calls.clear()
        memory = m.encode(self.src, self.src_pad) if self.config.has_encoder else None  # (B, S, d_model)
        if self._packing is None:
            return m.decode(self.tgt, memory, self.src_pad, self.tgt_pad)  # (B, T, d_model)
        # packed rows: the frozen patterns do the masking, so the decoder builds no (N, N) mask for them
        return self._packing.unpack(m.decode(self.tgt, memory, self.src_pad, None, causal=False))  # (B, T, d)

    def _causal_decoder(self) -> bool:
        """Whether the decoder's rows may be packed (packing.py): every self-attention pattern of the decoder is
        causal, and no relative position bias would be built for the packed length."""
        m = self.model
        if m.decoder is None or (len(m.decoder) and m.decoder[0].self_attn.relative_bias is not None):
            return False
        mods = dict(m.named_modules())
        return all(not bool(torch.triu(a[0], 1).any()) for name, a in self.patterns.items()
                   if name.startswith("decoder") and not mods[name].cross)  # fmt: skip

    def _transcode(self, keep: dict[str, torch.Tensor] | None) -> None:
        """Each transcoder on its feed-forward's real input: the active features, and the error that closes the gap
        to the real output (features not kept folded in)."""
        with torch.no_grad():
            for step, d in self.transcoders.items():
                pre = d.pre(self.ffn_in[step])  # (T, d_sae)
                f = d.activate(pre)  # (T, d_sae)
                on = f != 0
                self.all_active[step] = on.clone()  # every active feature, kept as a node or not
                if keep is not None:
                    on &= keep[step].to(on.device)
                on[: self.held] = False  # held positions: their features are part of the held error
                pos, feat = on.nonzero(as_tuple=True)  # (n,), (n,)
                self.active[step] = Active(pos, feat, f[pos, feat], pre[pos, feat], f[pos, feat] - pre[pos, feat])
                self._pads[step] = _pad(d, pos, feat, f.shape[0])
                kept = torch.zeros_like(f).index_put((pos, feat), f[pos, feat])  # (T, d_sae)
                self.errors[step] = self.ffn_out[step] - (kept @ d.W_dec + d.b_dec)  # (T, d_model)
                if self.held:
                    self.held_errors[step] = torch.zeros_like(self.errors[step])
                    self.held_errors[step][: self.held] = self.errors[step][: self.held]
                    self.errors[step][: self.held] = 0.0
                self._gates[step] = torch.ones(len(pos), dtype=self.dtype, device=self.device)

    def keep_only(self, keep: dict[str, torch.Tensor]) -> None:
        """Keep only the features of `keep` (step → (T, d_sae) bool) as nodes; the others join the errors."""
        self._transcode(keep)

    # --- passes -----------------------------------------------------------------------------------------------

    def lengths(self) -> dict[str, int]:
        """side → number of positions."""
        return {side: e.shape[0] for side, e in self.embeddings.items()}

    def leaves(self, batch: int = 1, fill: str = "real", grad: bool = False) -> Leaves:
        """Leaves of B rows: the run's own node values ("real") or zeros ("zero")."""

        def make(t: torch.Tensor) -> torch.Tensor:
            t = t if fill == "real" else torch.zeros_like(t)
            return t.expand(batch, *t.shape).clone().requires_grad_(grad)

        one = lambda n: torch.ones(n, dtype=self.dtype, device=self.device)  # noqa: E731
        return Leaves({s: make(one(n)) for s, n in self.lengths().items()},
                      {s: make(a.value) for s, a in self.active.items()},
                      {s: make(one(e.shape[0])) for s, e in self.errors.items()})  # fmt: skip

    def forward(self, leaves: Leaves, linear: bool = False, gates: dict[str, torch.Tensor] | None = None,
                lengths: list[int] | None = None) -> tuple[dict[str, torch.Tensor], torch.Tensor]:  # fmt: skip
        """One replacement pass: ({step: pre-activations of its active features (B, n)}, hidden (B, T, d_model)).
        `linear`: features follow their pre-activations (the linear regime), each times its gate in `gates`
        (step → (n,), 1 where not given: 0 removes a feature). `lengths`: row b computes the decoder's first
        lengths[b] positions only (packing.py; when `packable`): its hidden state is 0 after them, and the
        pre-activations of its decoder features there read nothing of the run."""
        self._leaves, self._linear, self._pre = leaves, linear, {}
        saved = self._gates
        if gates:
            self._gates = {**saved, **gates}
        if lengths is not None and self.packable and 0 < sum(lengths) < len(lengths) * self.tgt.shape[1]:
            self._packing = Packing.of(lengths, self.tgt.shape[1], self.device)
        try:
            hidden = self._run()
        finally:
            self._gates, self._leaves, self._packing = saved, None, None
        return dict(self._pre), hidden

    def full_pass(self, position: int) -> FullPass:
        """The replacement with every node at its value, and its logits and the capture run's (the model's own
        forward, in the replacement's precision) at a decoder position: both read in one product with the output
        layer, whose vocabulary-wide weight is the costliest read of a small model's graph."""
        with torch.no_grad():
            pre, hidden = self.forward(self.leaves(1))  # (1, n) per step, (1, T, d_model)
            both = self.logits(torch.cat([hidden, self.captured_hidden[None]]), position, pair=True)  # (2, vocab)
        both = both.double().cpu()
        return FullPass(pre, hidden, both[0], both[1])

    def mean_row(self) -> torch.Tensor:
        """The output layer's mean row (d_model,), which a demeaned logit subtracts: averaged (in float64) once per
        model, since every replacement of it is a new copy."""
        if self._mean_row is None:
            self._mean_row = mean_output_row(self._output_weight).to(self.device, self.dtype)
        return self._mean_row

    def logits(self, hidden: torch.Tensor, position: int, token: int | None = None, pair: bool = False
               ) -> torch.Tensor:  # fmt: skip
        """The output layer at one decoder position: hidden (B, T, d) → logits (B, vocab), or (B,) for one token
        (`demeaned`: minus the mean of every logit). Gemma 2's final soft-capping is not applied: the graph explains
        the logit before it. `pair`: B is 2, and the product is taken as (W x^T)^T, which this machine's CPU
        PyTorch (2.13) reads 4.7× as fast as x W^T at two rows of GPT-2's vocabulary (2.6 against 12.1 ms)."""
        g = self.model.generator
        x = hidden[:, position]  # (B, d_model)
        if g.scale is not None:
            x = x * g.scale
        if token is None and pair:
            out = (g.proj.weight @ x.T).T  # (vocab, d)(d, 2) → (2, vocab)
            out = out if g.proj.bias is None else out + g.proj.bias
            return out if g.final_logits_bias is None else out + g.final_logits_bias.reshape(-1)
        if token is None:
            return g.logits(x)  # (B, vocab)
        w = g.proj.weight[token]  # (d_model,)
        if self.versus is not None:  # logit − another's = x (W[token] − W[versus]) (+ the same of the bias)
            w = w - g.proj.weight[self.versus]
        elif self.demeaned:  # logit − mean logit = x (W[token] − mean_j W[j]) (+ the same of the bias)
            w = w - self.mean_row()
        out = x @ w  # (B,)
        if g.final_logits_bias is not None:
            bias = g.final_logits_bias.reshape(-1)
            against = bias[self.versus] if self.versus is not None else bias.mean() if self.demeaned else 0.0
            out = out + (bias[token] - against)
        return out


_MEAN_ROWS: dict[int, tuple] = {}  # id(weight) → (weakref to it, its version, its mean row)


def mean_output_row(weight: torch.Tensor) -> torch.Tensor:
    """mean_j W[j] (float64) of a model's output weight (vocab, d_model), kept while that tensor lives unchanged:
    a 50 257-row vocabulary takes milliseconds to average, and every graph of the model reads the same row."""
    held = _MEAN_ROWS.get(id(weight))
    if held is not None and held[0]() is weight and held[1] == weight._version:
        return held[2]
    for key in [k for k, v in _MEAN_ROWS.items() if v[0]() is None]:  # tensors gone since
        del _MEAN_ROWS[key]
    row = weight.detach().double().mean(0)  # (d_model,)
    _MEAN_ROWS[id(weight)] = (weakref.ref(weight), weight._version, row)
    return row


def _pad(d: Dictionary, pos: torch.Tensor, feat: torch.Tensor, length: int):
    """The active features' encoder and decoder rows laid out per position, so a pass reads them with two batched
    products instead of gathering a (B, n, d_model) copy of its input (and its gradient) for n features:
    (slot (n,): each feature's place among its position's, enc (T, m, d_in), dec (T, m, d_out)), m the most
    features active at one position, zero rows in the free places. None when one position holds so many more
    features than the others that the padding would cost more than it saves (the gathering path then)."""
    counts = torch.bincount(pos, minlength=length)  # (T,)
    m = int(counts.max()) if len(pos) else 0
    if m == 0 or length * m > 4 * len(pos) + length:
        return None
    start = torch.cumsum(counts, 0) - counts  # (T,): where each position's features begin (pos is sorted)
    slot = torch.arange(len(pos), device=pos.device) - start[pos]  # (n,)
    enc = d.W_enc.new_zeros(length, m, d.d_in).index_put((pos, slot), d.W_enc.T[feat])
    dec = d.W_dec.new_zeros(length, m, d.d_out).index_put((pos, slot), d.W_dec[feat])
    return slot, enc, dec


def _changed(mod: MultiHeadAttention, pattern: torch.Tensor) -> torch.Tensor:
    """The pattern (1, h, Tq, Tk) whose product with the values is the context of this run's interventions: a head
    zeroed, scaled, kept alone or mean-ablated (its rows averaged, as its context is) — keys knocked out are in the
    weights already. Unchanged when the pass changes nothing."""
    changes = active_interventions()
    for item in changes.items if changes is not None else ():
        if isinstance(item, HeadChange) and item.attention == mod.trace_name:
            pattern = change_head(pattern, item, mod.q_dim == "tgt_pos", None)
    return pattern


def _value_weights(mod: MultiHeadAttention) -> tuple[torch.Tensor, torch.Tensor | None]:
    """W_V (h_kv·d_head, d_model) and b_V of every head, from the fused projection."""
    if mod.cross:
        w, b = mod.kv_proj.weight[mod.d_attn :], mod.kv_proj.bias  # V's rows of the fused [W^K W^V]
        return w, None if b is None else b[mod.d_attn :]
    start = mod.d_attn + mod.d_kv_attn  # [Q K V]: V's rows come after Q's and K's
    return mod.qkv.weight[start:], None if mod.qkv.bias is None else mod.qkv.bias[start:]


def _values(mod: MultiHeadAttention, source: torch.Tensor) -> torch.Tensor:
    """The values every head reads, V_h = x W_V,h + b_V,h: source (B, Tk, d_model) → (B, h, Tk, d_head), each
    key/value head repeated for its query heads under grouped-query attention."""
    v = mod.split_heads(F.linear(source, *_value_weights(mod)))  # (B, Tk, h_kv·d_head) → (B, h_kv, Tk, d_head)
    return expand_kv(v, mod.n_heads)  # (B, h, Tk, d_head)
