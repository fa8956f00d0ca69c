"""A transcoder set for a graph: one transcoder per feed-forward of the model, each reading the feed-forward's
input and predicting its output (Dunefsky et al. 2024):

    pre_l = x_l W_enc + b_enc          (T, d_model) → (T, d_sae)   x_l: what feed-forward l reads
    f_l   = σ(pre_l)                   (T, d_sae)                  few non-zero
    ŷ_l   = f_l W_dec + b_dec          (T, d_sae) → (T, d_model)   stands in for FFN_l(x_l)

The folder holds `<ffn step>/` per feed-forward (`features train --kind transcoder --every-layer` writes it;
DESIGN.md calls it a transcoder set). A set that leaves a feed-forward out cannot stand in for the model, so it
is refused, naming what is missing.
"""

from __future__ import annotations

from pathlib import Path

from ..errors import UserError
from ..features.dictionary import Dictionary
from ..features.folder import CFG, hook_step, load
from ..features.points import ffn_input, ffn_steps, readable_steps


def bundled_set(bundle) -> Path | None:
    """The transcoder set shipped with a bundled model (resources/models/<name>/dictionaries/transcoders/)."""
    from ..features.bundled import bundled_transcoders

    return bundled_transcoders(bundle.name)


def open_set(bundle, folder: str | Path | None = None, dictionaries: list[str | Path] = ()) -> dict[str, Dictionary]:
    """The transcoders of the set `folder` and of the single transcoder folders `dictionaries` (neither: the bundled
    model's own set), keyed by the feed-forward output step each stands in for, in the order the forward pass
    reaches them; UserError when they do not fit the model or leave a feed-forward out."""
    model = bundle.model
    wanted = ffn_steps(model)
    if not wanted:
        raise UserError(f"{bundle.name} has no feed-forward layers for transcoders to stand in for.")
    if folder is None and not dictionaries:
        folder = bundled_set(bundle)
        if folder is None:
            raise UserError(f"{bundle.name} ships no transcoder set: give one with --transcoders DIR (train one "
                            "with `scratchformer features train --kind transcoder --every-layer`).")  # fmt: skip
    subs = [Path(d) for d in dictionaries]
    if folder is not None:
        folder = Path(folder)
        if not folder.is_dir():
            raise UserError(f"The transcoder set {folder} is not a folder: a set holds one folder per feed-forward "
                            f"({', '.join(wanted)}).")  # fmt: skip
        subs += sorted(p for p in folder.iterdir() if (p / CFG).is_file())
    readable = readable_steps(model)
    found: dict[str, Dictionary] = {}
    for sub in subs:
        d = load(sub)
        if not d.transcoder:
            if sub.parent != folder:
                raise UserError(f"{sub} holds an SAE; a graph needs transcoders (a feed-forward's input → its "
                                "output).")  # fmt: skip
            continue
        to = hook_step(model, d.info.to, readable)
        if to not in wanted:
            continue
        at = hook_step(model, d.info.at, readable)
        if at != ffn_input(model, to):
            raise UserError(f"The transcoder in {sub} reads {at}, but the feed-forward {to} reads "
                            f"{ffn_input(model, to)}: it does not stand in for that feed-forward.")  # fmt: skip
        if d.d_in != model.config.d_model or d.d_out != model.config.d_model:
            raise UserError(f"The transcoder in {sub} reads vectors of {d.d_in} numbers, but this model's "
                            f"stream holds {model.config.d_model}: it was trained on another model.")  # fmt: skip
        if to in found:
            raise UserError(f"Two transcoders stand in for {to}; give one per feed-forward.")
        found[to] = d.eval().requires_grad_(False)
    missing = [s for s in wanted if s not in found]
    if missing:
        one_set = folder is not None and not dictionaries
        where = f"The transcoder set {folder} does" if one_set else "The transcoders given do"
        have = f" (the {'set covers' if one_set else 'transcoders cover'} {', '.join(s for s in wanted if s in found)})"
        raise UserError(f"{where} not cover every feed-forward layer: {', '.join(missing)} "
                        f"{'is' if len(missing) == 1 else 'are'} missing{have if found else ''}.")  # fmt: skip
    return {s: found[s] for s in wanted}
