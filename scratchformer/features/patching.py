"""Activation patching of features: which features of a dictionary carry the behaviour a sweep measures.

For each position p and each feature i whose value differs between the clean and the corrupted run (at the step S
the dictionary reads), the corrupted run is made again with that one feature set to its clean value at p — a
clamp, so S carries on as x_corrupt + (f_clean[p, i] − f_corrupt[p, i]) W_dec[i] — and the metric's change is
reported as the sweep's effect, (m_patched − m_corrupt) / (m_clean − m_corrupt). The features compared are the
largest changes first, |Δf| · ‖W_dec,i‖, up to `limit`; how many were left out is said.
"""

from __future__ import annotations

import torch

from ..errors import UserError
from ..patching.interventions import intervene
from ..patching.pair import Pair, final_hidden, recorders
from .attach import Attached, Clamp
from .dictionary import Dictionary

LIMIT = 256  # feature × position cells patched at most


def _features(d: Dictionary, x: torch.Tensor) -> torch.Tensor:
    with torch.no_grad():
        return d.encode(x.float())[0]  # (P, d_sae)


def feature_sweep(pair: Pair, d: Dictionary, limit: int = LIMIT) -> tuple[list[dict], list[str]]:
    """(rows {step, feature, position, clean, corrupt, effect}, notes) for the dictionary `d` on this pair."""
    model = pair.model
    att = Attached(model, [d])
    (step, (d, at, to)), = att.by_step.items()
    if at != to:
        raise UserError("A feature sweep patches an SAE's features; a transcoder's belong in an attribution graph.")
    src_side = at.startswith(("encoder", "src_embed"))
    values: dict[str, dict[str, torch.Tensor]] = {}
    for side, src, tgt in (("clean", pair.src_clean, pair.tgt_clean), ("corrupt", pair.src_corrupt, pair.tgt_corrupt)):
        kept, edits = recorders([at])
        with torch.inference_mode(), intervene(model, edits):
            final_hidden(model, src, tgt)
        if at not in kept:
            raise UserError(f"The sweep's runs never reach {at}.")
        values[side] = kept[at]
    f_clean, f_corrupt = _features(d, values["clean"]), _features(d, values["corrupt"])  # (P, d_sae) each
    if f_clean.shape != f_corrupt.shape:
        raise UserError("The clean and corrupted runs differ in length at the dictionary's step.")
    delta = (f_clean - f_corrupt).abs() * d.W_dec.detach().norm(dim=1)  # (P, d_sae)
    cells = delta.flatten().nonzero()[:, 0]
    order = cells[delta.flatten()[cells].argsort(descending=True)]
    notes = []
    if len(order) > limit:
        notes.append(f"{len(order)} feature × position cells differ between the runs at {at}; the {limit} that "
                     "change the stream most were patched.")  # fmt: skip
    rows = []
    n_feat = f_clean.shape[1]
    src, tgt = pair.src_corrupt, pair.tgt_corrupt
    for flat in order[:limit].tolist():
        p, i = divmod(flat, n_feat)
        clamp = Clamp(at, i, float(f_clean[p, i]), p)
        patched = Attached(model, [d], [clamp])
        with torch.inference_mode(), intervene(model, patched.edits()):
            m = pair.metric.values(model, final_hidden(model, src, tgt))
        rows.append({"step": at, "feature": i, "position": p, "axis": "src" if src_side else "tgt",
                     "clean": float(f_clean[p, i]), "corrupt": float(f_corrupt[p, i]),
                     "effect": float(pair.effect(m.double())[0])})  # fmt: skip
    rows.sort(key=lambda r: -abs(r["effect"]))
    return rows, notes
