"""Why LayerNorm and not BatchNorm (paper §3.1; Ba et al. 2016). LayerNorm normalises each token over its own
d_model features, so a sentence's normalised values depend on that sentence alone. BatchNorm normalises each
feature over every row of the batch (all sentences, all positions), so one sentence's values move when another
sentence of its batch changes, and the padding rows that fill short sentences to the batch's length enter its
mean and variance too.

Measured on a padded batch built from the sentence (it and shorter versions of it, padded at the end): the input
of the model's first norm, normalised both ways (no γ, β), before and after one word of another sentence of the
batch is replaced.
"""

from __future__ import annotations

import torch

from ..errors import UserError
from ..plotdata.norms import layer_norm_input, layer_norm_steps
from .inputs import replacement, special_ids
from .measures import max_abs_diff

TITLE = "LayerNorm, not BatchNorm"
CLAIM = ("Under LayerNorm a sentence's normalised values never move when another sentence of its batch changes; "
         "under BatchNorm they do, and padding enters BatchNorm's statistics.")  # fmt: skip
CONTROLS = {"batchnorm": False, "seed": 0}


def applies(bundle) -> str | None:
    return None  # every model has a norm and can be run on a padded batch


def layer_norm(x: torch.Tensor, eps: float) -> torch.Tensor:
    """(x − μ)/√(σ² + ε) over the features of each token: (B, T, d) → (B, T, d)."""
    mean = x.mean(-1, keepdim=True)
    var = x.var(-1, unbiased=False, keepdim=True)
    return (x - mean) / torch.sqrt(var + eps)


def batch_norm(x: torch.Tensor, eps: float, rows: torch.Tensor | None = None) -> torch.Tensor:
    """(x − μ_f)/√(σ²_f + ε) with each feature's statistics over the rows of the batch — every (item, position),
    or only those where `rows` (B, T) is True: (B, T, d) → (B, T, d)."""
    flat = x.reshape(-1, x.shape[-1])  # (B·T, d)
    used = flat if rows is None else flat[rows.reshape(-1)]  # (rows used, d)
    mean, var = used.mean(0), used.var(0, unbiased=False)  # (d,)
    return (x - mean) / torch.sqrt(var + eps)


def _first_norm_input(bundle, inputs) -> tuple[torch.Tensor, str, str]:
    """(B, T, d) input of the model's first norm on this batch, its step name and its position axis."""
    _, trace = bundle.run(inputs, keep_output=False)
    for step in layer_norm_steps(trace):
        source = layer_norm_input(trace, step)
        if source is not None:
            x = torch.stack([source.item(b) for b in range(source.shape[0])])  # (B, T, d)
            return x.double(), source.name, source.dims[1]
    raise UserError(f"{bundle.name} has no norm whose input this experiment can read.")


def _changed(bundle, inputs, side: str, item: int, seed: int):
    """The same batch with one word of sentence `item` replaced by a seeded random token; (inputs, position,
    old token, new token)."""
    from dataclasses import replace

    ids = (inputs.src if side == "src" else inputs.tgt).clone()  # (B, L)
    pad = inputs.src_pad if side == "src" else inputs.tgt_pad
    tok = bundle.src_tokenizer if side == "src" else bundle.tgt_tokenizer
    special = special_ids(bundle, side)  # the decoder's start token among them: it stays
    real = [p for p in range(ids.shape[1]) if not bool(pad[item, p]) and int(ids[item, p]) not in special]
    if not real:
        raise UserError("The norm experiment found no word to change in the batch's second sentence.")
    pos = real[0]
    old = int(ids[item, pos])
    new = replacement(bundle, side, old, torch.Generator().manual_seed(int(seed)))
    ids[item, pos] = new
    changed = replace(inputs, src=ids) if side == "src" else replace(inputs, tgt=ids)
    return changed, pos, tok.token_strings([old])[0], tok.token_strings([new])[0]


def run(bundle, source: str, target: str | None = None, batchnorm: bool = False, seed: int = 0) -> dict:
    # the first norm reads the source (or a decoder-only model's text) alone: no translation is made for it, and
    # a typed target is not read
    inputs = bundle.prepare_padded(source, start_only=True)
    c = bundle.config
    x, step, pos_dim = _first_norm_input(bundle, inputs)  # (B, T, d)
    side = "src" if pos_dim == "src_pos" else "tgt"
    pad = inputs.src_pad if side == "src" else inputs.tgt_pad  # (B, T) True at padding
    labels = inputs.source_tokens if side == "src" else inputs.target_tokens
    changed_inputs, pos, old, new = _changed(bundle, inputs, side, 1, seed)
    x2, _, _ = _first_norm_input(bundle, changed_inputs)
    other = x.clone()
    other[1] = x2[1]  # sentence 0 (and 2) exactly as before; only sentence 1 changed
    eps = c.layer_norm_eps
    real = ~pad  # (B, T)
    result = {}
    for key, norm in (("layernorm", lambda t: layer_norm(t, eps)), ("batchnorm", lambda t: batch_norm(t, eps))):
        before, after = norm(x)[0], norm(other)[0]  # (T, d): sentence 0
        per_position = (after - before).abs().amax(-1)  # (T,)
        result[key] = {"change_from_other_items": max_abs_diff(after, before),
                       "per_position": [float(v) for v in per_position],
                       "change_map": [[float(v) for v in row] for row in (after - before).tolist()]}
    # padding: BatchNorm's statistics over every row against over the real tokens only (LayerNorm has none)
    bn_all, bn_real = batch_norm(x, eps)[0], batch_norm(x, eps, real)[0]
    result["batchnorm"]["padding_shift"] = max_abs_diff(bn_all, bn_real)
    result["layernorm"]["padding_shift"] = 0.0
    n_pad = int(pad.sum())
    shift = result["batchnorm"]["padding_shift"]
    result.update(
        input_step=step, tokens=labels, changed={"item": 1, "position": pos, "from": old, "to": new},
        padding={"rows": int(pad.numel()), "padded": n_pad},
        summary=(f"Replacing “{old}” by “{new}” in sentence 2 moves sentence 1's normalised values by "
                 f"{result['layernorm']['change_from_other_items']:g} under LayerNorm and by up to "
                 f"{result['batchnorm']['change_from_other_items']:.3g} under BatchNorm; the batch's {n_pad} padding "
                 f"rows (of {pad.numel()}) shift BatchNorm's values by up to {shift:.3g}."),
    )
    return result
