"""Parameter counts per block of the architecture diagram, each with its formula in this model's numbers.

    parameter_counts(Transformer(paper()))["decoder.0"].count  →  4,204,032   (the decoder tutorial's ≈ 4.2 M)

Keys are the diagram's block keys (`plotdata.block_key` of the steps inside the block: `src_embed.embedding`,
`src_embed.positional`, `encoder.0.self_attn`, `encoder.0.add_norm1`, `encoder.0.ffn`, …, `encoder.final_norm`,
`decoder.0.cross_attn`, `generator.linear`, `generator.softmax`), then one key per layer (`encoder.0`), per stack
(`encoder`, `decoder`), `src_embed` / `tgt_embed` / `embeddings`, `generator`, `mlm_head` (an encoder's masked-LM
head, when it has one) and `total`.

A tensor shared by several blocks (the paper ties the two embeddings and the output projection, §3.4) is counted
once, in the first block that uses it in reading order (source embedding → encoder → target embedding → decoder
→ output); later blocks count 0 for it, give its size in `shared` and say so in `note`. So the leaf blocks add up
to `total`, which equals sum(p.numel() for p in model.parameters()) (PyTorch lists a shared tensor once), and for
every block `count + shared` is the size of its modules' parameters.

Buffers are not parameters: the sinusoidal table PE and Marian's final_logits_bias are mentioned, not counted.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from torch import nn


@dataclass
class ParamCount:
    """Trainable numbers of one block (new ones only: see `shared`), and how they come about."""

    count: int
    formula: str  # symbolic with this model's numbers: "4·(d_model² + d_model) = 4·(512² + 512) = 1,050,624"
    note: str = ""
    shared: int = 0  # numbers of this block's tensors already counted in an earlier block (tied weights)
    modules: tuple[str, ...] = ()  # the module paths whose parameters make up the block (empty for aggregates)


def _n(x: int) -> str:
    return f"{x:,}"


def _sum_formula(names: list[str], counts: list[int], total: int) -> str:
    """'a + b + c = 1 + 2 + 3 = 6', or 'N × x = …' when every part is equal and there are several."""
    if not names:
        return "0"
    if len(counts) > 2 and len(set(counts)) == 1:
        return f"{len(counts)} × {_n(counts[0])} = {_n(total)}"
    if len(counts) == 1:
        return f"{names[0]} = {_n(total)}"
    return f"{' + '.join(names)} = {' + '.join(_n(c) for c in counts)} = {_n(total)}"


class _Counter:
    """Walks the model in reading order; each parameter tensor is counted by the first block that owns it."""

    def __init__(self, model: nn.Module) -> None:
        self.model = model
        self.config = model.config
        self.owner: dict[int, str] = {}  # id(parameter) → key of the block that counted it
        self.out: dict[str, ParamCount] = {}

    def params(self, modules: Iterable[nn.Module | None]) -> list[nn.Parameter]:
        seen: dict[int, nn.Parameter] = {}
        for m in modules:
            if m is not None:
                for p in m.parameters():
                    seen.setdefault(id(p), p)
        return list(seen.values())

    def block(self, key: str, paths: list[str], formula_count: int, formula: str, note: str = "",
              shared_note: str | None = None) -> ParamCount:
        """Count the block made of the modules at `paths`; `formula` must give `formula_count` new numbers."""
        modules = [self.model.get_submodule(p) for p in paths if _has(self.model, p)]
        new = shared = 0
        shared_from: list[str] = []
        for p in self.params(modules):
            if id(p) in self.owner:
                shared += p.numel()
                if self.owner[id(p)] not in shared_from:
                    shared_from.append(self.owner[id(p)])
            else:
                self.owner[id(p)] = key
                new += p.numel()
        if shared and formula_count == new + shared:  # tied weights: the formula gives the size, not the count
            part = "all" if new == 0 else f"{_n(shared)} of them"
            formula = f"{_n(new)} new ({formula}, {part} shared)"
        elif formula_count != new:  # an unexpected layout: say what was summed
            formula = f"{_n(new)} (the sum of the sizes of the parameters of {', '.join(paths) or 'nothing'})"
        notes = [note] if note else []
        if shared:
            where = ", ".join(shared_from)
            notes.append((shared_note or "shares {n} numbers with {where}, counted there").format(
                n=_n(shared), where=where))
        pc = ParamCount(new, formula, "; ".join(notes), shared, tuple(p for p in paths if _has(self.model, p)))
        self.out[key] = pc
        return pc

    def aggregate(self, key: str, parts: list[str], formula_names: list[str] | None = None,
                  note: str = "") -> ParamCount:
        parts = [p for p in parts if p in self.out]
        counts = [self.out[p].count for p in parts]
        total = sum(counts)
        names = formula_names if formula_names is not None else parts
        pc = ParamCount(total, _sum_formula(names, counts, total), note,
                        sum(self.out[p].shared for p in parts))
        self.out[key] = pc
        return pc


def _has(model: nn.Module, path: str) -> bool:
    try:
        return model.get_submodule(path) is not None
    except AttributeError:
        return False


def _embeddings(c: _Counter, stack: str) -> None:
    cfg = c.config
    emb = c.model.get_submodule(stack)
    d = cfg.d_model
    vocab = emb.tokens.num_embeddings
    side = "source" if stack == "src_embed" else "target"
    # the input embedding: the token table (and BERT's token-type table, another lookup added to it)
    paths = [f"{stack}.tokens"]
    formula_count, formula = vocab * d, f"vocab·d_model = {_n(vocab)}·{d} = {_n(vocab * d)}"
    note = f"one learned row of d_model numbers per {side} token"
    if emb.token_types is not None:
        types = emb.token_types.num_embeddings
        paths.append(f"{stack}.token_types")
        formula_count = (vocab + types) * d
        formula = (f"(vocab + token_types)·d_model = ({_n(vocab)} + {types})·{d} = {_n(formula_count)}")
        note += f"; plus {types} token-type (segment) rows, added to every token (BERT)"
    c.block(f"{stack}.embedding", paths, formula_count, formula, note,
            shared_note="shares the embedding matrix with the source embedding, counted under {where} "
                        "(paper §3.4)")
    # the positional encoding, and the LayerNorm BERT applies to the sum (its step is drawn in this block)
    paths, parts, values, count = [], [], [], 0
    notes = []
    if emb.positions is not None:
        n_pos = emb.positions.num_embeddings
        paths.append(f"{stack}.positions")
        parts.append("max_len·d_model")
        values.append(f"{n_pos}·{d}")
        count += n_pos * d
        notes.append(f"a learned vector per position (up to {n_pos})")
    elif cfg.positional == "none":
        notes.append("this model adds no positional encoding")
    elif cfg.positional == "rotary":
        notes.append("nothing is added here: rotary positions turn the queries and keys inside each attention, by "
                     "angles computed from the formula, nothing learned")
    else:
        notes.append("the sinusoids are computed from the formula: a fixed table (buffer), nothing learned")
    if emb.layer_norm is not None:
        paths.append(f"{stack}.layer_norm")
        parts.append("2·d_model")
        values.append(f"2·{d}")
        count += 2 * d
        notes.append("includes the LayerNorm of the embedding sum (γ and β per feature), drawn in this block")
    if parts:
        formula = f"{' + '.join(parts)} = {' + '.join(values)} = {_n(count)}"
    else:
        formula = "0"
    c.block(f"{stack}.positional", paths, count, formula, "; ".join(notes))
    c.aggregate(stack, [f"{stack}.embedding", f"{stack}.positional"])


def _attention(c: _Counter, key: str, cross: bool) -> None:
    cfg = c.config
    d, inner, h = cfg.d_model, cfg.d_attn, cfg.n_heads
    mha = c.model.get_submodule(key)
    table = getattr(mha, "relative_bias", None)
    kv, h_kv = mha.d_kv_attn, mha.n_kv_heads  # K and V widths: narrower under grouped-query attention
    in_bias = (mha.q_proj if cross else mha.qkv).bias is not None
    out_bias = mha.out_proj.bias is not None
    paper = inner == d and in_bias and out_bias and table is None and kv == inner and mha.qk_norm == "none"
    if paper:
        count = 4 * (d * d + d)
        formula = f"4·(d_model² + d_model) = 4·({d}² + {d}) = {_n(count)}"
        if cross:
            note = ("W^Q (on the decoder), W^K and W^V (on the encoder output) and W^O, each d_model × d_model, "
                    "with their biases")
        else:
            note = "W^Q, W^K, W^V and W^O, each d_model × d_model, with their biases"
        note += f"; the {h} heads split these matrices, they add nothing"
        c.block(key, [key], count, formula, note)
        return
    # h·d_k ≠ d_model, shared key/value heads, biases on some matrices only, QK-norm, or T5's relative bias table
    if kv == inner:
        parts, values, count = ["4·d_model·h·d_k"], [f"4·{d}·{inner}"], 4 * d * inner
        notes = [f"W^Q, W^K, W^V (d_model × h·d_k, h·d_k = {h}·{cfg.d_head} = {inner}) and W^O (h·d_k × d_model)"]
    else:
        parts, values = ["2·d_model·h·d_k + 2·d_model·h_kv·d_k"], [f"2·{d}·{inner} + 2·{d}·{kv}"]
        count = 2 * d * inner + 2 * d * kv
        serve = "key/value heads serve" if h_kv > 1 else "key/value head serves"
        notes = [f"W^Q and W^O (d_model × h·d_k, h·d_k = {h}·{cfg.d_head} = {inner}); W^K and W^V are only d_model × "
                 f"h_kv·d_k = {h_kv}·{cfg.d_head} = {kv}, as {h_kv} {serve} the {h} query heads "
                 f"(grouped-query attention), {_n(2 * d * (inner - kv))} numbers fewer than one per query head"]
    if in_bias or out_bias:
        bias_parts = ([("h·d_k + 2·h_kv·d_k" if kv != inner else "3·h·d_k"), ] if in_bias else []) + (
            ["d_model"] if out_bias else [])
        bias_values = ([f"{inner} + 2·{kv}" if kv != inner else f"3·{inner}"] if in_bias else []) + (
            [f"{d}"] if out_bias else [])
        parts += bias_parts
        values += bias_values
        count += (inner + 2 * kv if in_bias else 0) + (d if out_bias else 0)
        notes[0] += ", with their biases" if in_bias and out_bias else (
            ", biases on W^Q, W^K and W^V only" if in_bias else ", a bias on W^O only")
    else:
        notes[0] += ", no biases"
    if mha.qk_norm != "none":
        widths = (mha.q_norm.weight.numel(), mha.k_norm.weight.numel())
        parts.append("2·d_k" if mha.qk_norm == "head" else "h·d_k + h_kv·d_k")
        values.append(f"2·{cfg.d_head}" if mha.qk_norm == "head" else f"{inner} + {kv}")
        count += sum(widths)
        notes.append("plus QK-norm's γ for the queries and the keys")
    if table is not None:
        buckets = table.weight.shape[0]
        parts.append("buckets·h")
        values.append(f"{buckets}·{h}")
        count += buckets * h
        notes.append(f"plus the relative position bias table: one number per head for each of {buckets} distance "
                     "buckets, used by every layer of the stack")  # fmt: skip
    notes.append(f"the {h} heads split these matrices, they add nothing")
    formula = f"{' + '.join(parts)} = {' + '.join(values)} = {_n(count)}"
    c.block(key, [key], count, formula, "; ".join(notes))


def _norm(c: _Counter, key: str, path: str, what: str) -> None:
    d = c.config.d_model
    if c.config.norm == "rmsnorm":  # γ only: RMSNorm neither centres nor shifts
        if key.endswith("final_norm"):
            note = "γ of the RMSNorm after the whole stack (not in the paper); RMSNorm has no β"
        else:
            note = "RMSNorm's γ (scale), one per feature; RMSNorm has no β"
            if key.endswith(".post_norm"):
                second = "its only norm" if c.config.post_norm_only else "a sandwich's second norm"
                note = f"the γ of the RMSNorm after the sublayer ({second}), one per feature"
            elif not key.endswith(".norm"):
                note += "; the residual add has none"
        if c.config.rmsnorm_plus_one:
            note += "; it scales by (1 + γ)"
        c.block(key, [path], d, f"d_model = {d}", note)
        return
    c.block(key, [path], 2 * d, f"2·d_model = 2·{d} = {_n(2 * d)}", what)


def _ffn(c: _Counter, key: str) -> None:
    cfg = c.config
    d, f = cfg.d_model, cfg.d_ff
    bias = cfg.linear_bias if cfg.ffn_bias is None else cfg.ffn_bias
    if not cfg.ffn_gated and bias:  # the paper's
        count = 2 * d * f + f + d
        formula = f"2·d_model·d_ff + d_ff + d_model = 2·{d}·{_n(f)} + {_n(f)} + {d} = {_n(count)}"
        c.block(key, [key], count, formula, "W_1 (d_model × d_ff) + b_1, W_2 (d_ff × d_model) + b_2")
        return
    k = 3 if cfg.ffn_gated else 2
    count = k * d * f
    formula = f"{k}·d_model·d_ff = {k}·{d}·{_n(f)}"
    note = "W_1 (d_model × d_ff), " + ("V (d_model × d_ff, the gated unit's linear branch), " if cfg.ffn_gated else "")
    note += "W_2 (d_ff × d_model)"
    if bias:
        count += (k - 1) * f + d
        formula += f" + {k - 1}·d_ff + d_model = {k}·{d}·{_n(f)} + {k - 1}·{_n(f)} + {d}"
        note += ", with their biases"
    else:
        note += ", no biases"
    c.block(key, [key], count, f"{formula} = {_n(count)}", note)


def _moe(c: _Counter, key: str) -> None:
    """A mixture of experts (scratchformer.transformer.moe): the router, then n_experts feed-forwards; a token uses k
    of them."""
    cfg = c.config
    d, f, n, top = cfg.d_model, cfg.d_expert or cfg.d_ff, cfg.n_experts, cfg.experts_per_token
    bias = cfg.linear_bias if cfg.ffn_bias is None else cfg.ffn_bias
    k = 3 if cfg.ffn_gated else 2  # W_1, (V,) W_2
    one = k * d * f + ((k - 1) * f + d if bias else 0)  # one expert
    count = d * n + n * one
    plus = f" + {k - 1}·d_expert + d_model" if bias else ""
    formula = (f"d_model·E + E·({k}·d_model·d_expert{plus}) = {d}·{n} + {n}·{_n(one)} = {_n(count)}")
    matrices = "W_1, V and W_2" if cfg.ffn_gated else "W_1 and W_2"
    note = (f"the router W_router (d_model × E, no bias) and E = {n} experts, each with its own {matrices} "
            f"(d_model × d_expert, d_expert = {f}{', with biases' if bias else ''}); each token runs {top} of them, "
            f"so {_n(d * n + top * one)} of these {_n(count)} numbers work for any one token")
    c.block(key, [key], count, formula, note)


_ADD_NORM_NOTE = "LayerNorm's γ (scale) and β (shift), one each per feature; the residual add has none"


def _layer(c: _Counter, stack: str, i: int, layer: nn.Module) -> None:
    n = f"{stack}.{i}"
    parts: list[str] = []
    order = ("self_attn", "add_norm1", "ffn", "add_norm2") if stack == "encoder" else (
        "self_attn", "add_norm1", "cross_attn", "add_norm2", "ffn", "moe", "add_norm3")
    for name in order:
        if getattr(layer, name, None) is None:
            continue
        key = f"{n}.{name}"
        if name.endswith("attn"):
            _attention(c, key, name == "cross_attn")
        elif name == "ffn":
            _ffn(c, key)
        elif name == "moe":
            _moe(c, key)
        elif c.config.norm_first:  # pre-LN: the diagram's "LayerNorm" block before the sublayer, then "Add"
            if not c.config.post_norm_only:  # OLMo 2 has no norm before the sublayer
                _norm(c, f"{key}.norm", f"{key}.norm", "LayerNorm's γ (scale) and β (shift), one each per feature")
                parts.append(f"{key}.norm")
            if c.config.post_norm:  # Gemma 2 and 3: the norm after the sublayer, a block of its own
                _norm(c, f"{key}.post_norm", f"{key}.post_norm", "LayerNorm's γ and β after the sublayer")
                parts.append(f"{key}.post_norm")
            c.block(key, [], 0, "0", "the residual add has no parameters")
        else:
            _norm(c, key, f"{key}.norm", _ADD_NORM_NOTE)
        parts.append(key)
    c.aggregate(n, parts, [p[len(n) + 1:] for p in parts])  # "self_attn", …, "add_norm1.norm" under pre-LN


def _stack(c: _Counter, stack: str, layers: nn.ModuleList, norm: nn.Module | None) -> None:
    parts = []
    for i, layer in enumerate(layers):
        _layer(c, stack, i, layer)
        parts.append(f"{stack}.{i}")
    names = [f"layer {i + 1}" for i in range(len(parts))]
    if norm is not None:
        attr = "encoder_norm" if stack == "encoder" else "decoder_norm"
        _norm(c, f"{stack}.final_norm", attr, "γ and β of the LayerNorm after the whole stack (not in the paper)")
        parts.append(f"{stack}.final_norm")
        names.append("final_norm")
    pc = c.aggregate(stack, parts, names)
    n_layers = len(layers)
    if n_layers > 1 and norm is None and len({c.out[p].count for p in parts}) == 1:
        pc.formula = f"{n_layers} layers × {_n(c.out[parts[0]].count)} = {_n(pc.count)}"


def _generator(c: _Counter) -> None:
    cfg = c.config
    gen = c.model.generator
    d, vocab = cfg.d_model, gen.proj.out_features
    count = vocab * d
    notes = []
    if gen.proj.bias is not None:
        count += vocab
    bias = " + vocab" if gen.proj.bias is not None else ""
    formula = f"vocab·d_model{bias} = {_n(vocab)}·{d}{' + ' + _n(vocab) if bias else ''} = {_n(count)}"
    if getattr(gen, "scale", None) is not None:
        notes.append("the decoder output is first multiplied by d_model^-0.5, a fixed number: nothing learned")
    if getattr(gen, "final_logits_bias", None) is not None:
        notes.append(f"plus final_logits_bias ({_n(vocab)} numbers): a fixed buffer loaded with the model, "
                     "not a trainable parameter, so not counted")
    c.block("generator.linear", ["generator.proj"], count, formula, "; ".join(notes),
            shared_note="shares the embedding matrix, counted under {where} (paper §3.4: the pre-softmax "
                        "linear is tied to the embedding)")
    c.out["generator.softmax"] = ParamCount(0, "0", "softmax has no parameters")
    c.aggregate("generator", ["generator.linear", "generator.softmax"], ["linear", "softmax"])


def _mlm_head(c: _Counter) -> None:
    """An encoder-only model's masked-LM head (model.MaskedLMHead): dense, LayerNorm, vocabulary projection."""
    d, vocab = c.config.d_model, c.model.mlm_head.proj.out_features
    count = d * d + d + 2 * d + vocab * d + vocab
    formula = (f"d_model² + d_model + 2·d_model + vocab·d_model + vocab = {d}² + {d} + 2·{d} + {_n(vocab)}·{d} + "
               f"{_n(vocab)} = {_n(count)}")  # fmt: skip
    c.block("mlm_head", ["mlm_head"], count, formula, "the masked-language-model head, read by the logit lens only",
            shared_note="its vocabulary projection shares the embedding matrix, counted under {where}")


def parameter_counts(model: nn.Module) -> dict[str, ParamCount]:
    """Parameter counts of a scratchformer Transformer by diagram block, layer, stack, embeddings and total,
    in reading order. Shared tensors are counted once (see the module docstring)."""
    c = _Counter(model)
    top: list[str] = []
    if model.src_embed is not None:
        _embeddings(c, "src_embed")
    if model.config.has_encoder:
        _stack(c, "encoder", model.encoder, model.encoder_norm)
        top.append("encoder")
    if model.config.has_decoder:
        _embeddings(c, "tgt_embed")
        _stack(c, "decoder", model.decoder, model.decoder_norm)
        top.append("decoder")
        _generator(c)
    if getattr(model, "mlm_head", None) is not None:
        _mlm_head(c)
    embeds = [k for k in ("src_embed", "tgt_embed") if k in c.out]
    c.aggregate("embeddings", embeds)
    parts = ["embeddings", *top] + [k for k in ("generator", "mlm_head") if k in c.out]
    c.aggregate("total", parts)
    expected = sum(p.numel() for p in model.parameters())
    if c.out["total"].count != expected:  # a parameter outside the known modules: never hide it
        missing = expected - c.out["total"].count
        c.out["total"] = ParamCount(expected, f"{c.out['total'].formula} + {_n(missing)} elsewhere = {_n(expected)}",
                                    "some parameters live outside the diagram's blocks")
    tensors = len(list(model.parameters()))
    total = c.out["total"]
    total.note = (f"{tensors} parameter tensors; "
                  + (f"{_n(total.shared)} numbers of later blocks are tied to earlier ones and counted once"
                     if total.shared else "no tensor is shared between blocks"))
    return c.out


def parameter_table(model: nn.Module) -> list[tuple[str, int, str]]:
    """(key, count, formula — note) rows in reading order, for printing."""
    rows = []
    for key, pc in parameter_counts(model).items():
        text = pc.formula + (f"  — {pc.note}" if pc.note else "")
        rows.append((key, pc.count, text))
    return rows


def format_parameter_table(model: nn.Module) -> str:
    """The table as aligned text: key, count, formula and note."""
    rows = parameter_table(model)
    width = max(len(k) for k, _, _ in rows)
    cw = max(len(_n(n)) for _, n, _ in rows)
    return "\n".join(f"{k:<{width}}  {_n(n):>{cw}}  {text}" for k, n, text in rows)
