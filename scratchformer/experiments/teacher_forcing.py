"""Teacher forcing (training) against free-running decoding (inference). In training the decoder reads the
correct previous tokens whatever it predicted; at inference it reads its own output, so one wrong token changes
what every later position reads and errors compound. An early training snapshot, which still makes mistakes,
shows the gap: per position, is the token right when the decoder reads the reference (teacher forcing) and when
it reads its own greedy output (free-running)?

The reference is the typed target, or else the fully trained model's own translation.
"""

from __future__ import annotations

import torch

from ..errors import UserError
from .inputs import encoded
from .snapshots import is_snapshot, load, snapshots_for, trained_spec

TITLE = "Teacher forcing and free-running"
CLAIM = ("With teacher forcing every position reads the right previous tokens; free-running, the model reads its "
         "own mistakes and they compound, so an early snapshot is right less often.")  # fmt: skip
CONTROLS = {"snapshot": None}  # a training step; None: the earliest snapshot


def applies(bundle) -> str | None:
    if not bundle.config.has_decoder:
        return (f"The teacher-forcing experiment needs a decoder, and {bundle.name} has none: an encoder-only model "
                "does not generate text.")  # fmt: skip
    return None


def reference_ids(bundle, source: str, target: str | None) -> tuple[list[int], list[int], list[int]]:
    """(source ids, forced start ids, reference ids to predict): the typed target, else the trained model's
    greedy translation, followed by the end token (an encoder-decoder's); a decoder-only model's text itself."""
    c = bundle.config
    start = [bundle.start_id()]
    if not c.has_encoder:
        ids = bundle.tgt_tokenizer.encode(source.strip())[: c.max_len - 1]
        if len(ids) < 2:
            raise UserError("The teacher-forcing experiment needs a text of at least two tokens.")
        return [], start, ids
    prefix = bundle.target_prefix()
    src = bundle.encode_source(source.strip(), truncate=True)
    if target and target.strip():
        ref = bundle.tgt_tokenizer.encode(target.strip())
    else:
        final = load(trained_spec(bundle), bundle.device) if is_snapshot(bundle) and trained_spec(bundle) else bundle
        ref = final.prepare_run(source).generated
    end = bundle.end_id()
    ref = ref[: c.max_len - 1 - len(prefix) - 1] + ([end] if end is not None else [])
    if not ref:
        raise UserError("The teacher-forcing experiment has no reference to compare with; give a target.")
    return src, start + prefix, ref


def decode_both(bundle, src: list[int], forced: list[int], ref: list[int]) -> tuple[list[int], list[int | None]]:
    """(teacher-forced argmax per reference position, free-running greedy tokens, None after the model ended)."""
    model = bundle.model
    dev = bundle.device
    memory = encoded(model, torch.tensor([src], device=dev) if src else None)
    end = bundle.end_id()
    with torch.inference_mode():
        tgt = torch.tensor([forced + ref[:-1]], device=dev)  # (1, F + R − 1): the reference shifted right
        logits = model.generator(model.decode(tgt, memory))  # (1, F + R − 1, vocab)
        teacher = logits[0, len(forced) - 1 :].argmax(-1).tolist()  # (R,)
        ys, free = list(forced), []
        for _ in range(len(ref)):
            hidden = model.decode(torch.tensor([ys], device=dev), memory)  # (1, len(ys), d_model)
            token = int(model.generator(hidden[:, -1])[0].argmax())
            free.append(token)
            if token == end:
                break
            ys.append(token)
    return teacher, free + [None] * (len(ref) - len(free))


def accuracy(predicted: list, ref: list[int]) -> float:
    return sum(p == r for p, r in zip(predicted, ref)) / len(ref)


def _first_error(correct: list[bool]) -> int | None:
    return next((i for i, ok in enumerate(correct) if not ok), None)


def _decoded(bundle, src, forced, ref) -> dict:
    teacher, free = decode_both(bundle, src, forced, ref)
    return {"teacher": teacher, "free": free, "teacher_forced": accuracy(teacher, ref),
            "free_running": accuracy(free, ref)}


def run(bundle, source: str, target: str | None = None, snapshot: int | None = None) -> dict:
    """`snapshot`: the training step of the snapshot to decode. By default the loaded model when it is itself a
    snapshot, else the earliest snapshot that already gets half of the reference right with teacher forcing and
    is right less often free-running (else the earliest with half right, else the last): early enough to make
    mistakes, late enough that they are not all mistakes."""
    src, forced, ref = reference_ids(bundle, source, target)
    snaps = snapshots_for(bundle)
    notes = []
    runs = {s.step: _decoded(load(s.spec, bundle.device), src, forced, ref) for s in snaps}
    if snapshot is not None:
        chosen = next((s for s in snaps if s.step == int(snapshot)), None)
        if chosen is None:
            where = f"its snapshots are at steps {', '.join(str(s.step) for s in snaps)}" if snaps else "it has none"
            raise UserError(f"{bundle.name} has no training snapshot at step {snapshot}; {where}.")
    elif is_snapshot(bundle):
        step = int(bundle.name.rsplit("@step-", 1)[1])
        chosen = next((s for s in snaps if s.step == step), None)
    else:
        half = [s for s in snaps if runs[s.step]["teacher_forced"] >= 0.5]
        gap = [s for s in half if runs[s.step]["teacher_forced"] > runs[s.step]["free_running"]]
        chosen = (gap or half or snaps[-1:] or [None])[0]
    if chosen is not None:
        snap_info, decoded = {"spec": chosen.spec, "step": chosen.step}, runs[chosen.step]
    else:
        snap_info, decoded = {"spec": bundle.name, "step": None}, _decoded(bundle, src, forced, ref)
        notes.append(f"{bundle.name} has no training snapshots, so the loaded model itself is decoded both ways.")
    curve = [{"step": s.step, "teacher_forced": runs[s.step]["teacher_forced"],
              "free_running": runs[s.step]["free_running"]} for s in snaps]
    if snaps:
        final = _decoded(load(trained_spec(bundle), bundle.device) if is_snapshot(bundle) else bundle, src, forced,
                         ref)  # fmt: skip
        curve.append({"step": "final", "teacher_forced": final["teacher_forced"],
                      "free_running": final["free_running"]})
    tok = bundle.tgt_tokenizer
    teacher, free = decoded["teacher"], decoded["free"]
    t_ok = [p == r for p, r in zip(teacher, ref)]
    f_ok = [p == r for p, r in zip(free, ref)]
    err = _first_error(f_ok)
    after = slice(err + 1, None) if err is not None else slice(len(ref), None)
    n_after = len(ref[after])
    words = lambda ids: [tok.token_strings([i])[0] if i is not None else "—" for i in ids]  # noqa: E731
    free_text = tok.decode([i for i in free if i is not None and i != bundle.end_id()])
    result = {
        "snapshot": snap_info,
        "reference": {"tokens": words(ref), "text": tok.decode([i for i in ref if i != bundle.end_id()])},
        "teacher_forced": {"accuracy": accuracy(teacher, ref), "correct": t_ok, "predicted": words(teacher),
                           "first_error": _first_error(t_ok)},
        "free_running": {"accuracy": accuracy(free, ref), "correct": f_ok, "predicted": words(free),
                         "first_error": err, "text": free_text},
        "after_first_free_error": {
            "positions": n_after,
            "teacher_forced": sum(t_ok[after]) / n_after if n_after else None,
            "free_running": sum(f_ok[after]) / n_after if n_after else None,
        },
        "snapshots": curve,
        "notes": notes,
    }
    step = f"step {snap_info['step']}" if snap_info["step"] is not None else bundle.name
    result["summary"] = (f"At {step}, {result['teacher_forced']['accuracy']:.0%} of the {len(ref)} reference tokens "
                         f"are right with teacher forcing and {result['free_running']['accuracy']:.0%} free-running"
                         + (f" (its first mistake at position {err + 1})." if err is not None else "."))
    return result
