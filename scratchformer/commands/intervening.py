"""The interventions options shared by `trace`, `translate` and `evaluate`: --ablate, --patch, --from-source."""

from __future__ import annotations

import argparse

from ..errors import UserError
from ..loading.bundle import Inputs, ModelBundle
from ..patching.interventions import HeadChange, KeyKnockout, Patch, parse_spec, patchable_steps


def add_ablate_arg(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--ablate", action="append", default=[], metavar="SPEC",
                        help="change one head or attention (repeatable): ATTENTION.headN[:zero|mean|keep|scale=F] or "
                        "ATTENTION.keys:P[,P…], e.g. decoder.1.cross_attn.head0 (layers, heads and positions from 0)")


def add_intervention_args(parser: argparse.ArgumentParser, encoder_only: bool = False) -> None:
    add_ablate_arg(parser)
    which = "an encoder step" if encoder_only else "a step"
    parser.add_argument("--patch", action="append", default=[], metavar="STEP",
                        help=f"activation patching (repeatable): {which} (e.g. encoder.1.add_norm2.out) takes "
                        "its value from the run of --from-source, a sentence of the same length"
                        + ("" if encoder_only else "; with --dictionary also a dictionary's step (e.g. "
                           "decoder.1.add_norm3.out.dict.features)"))  # fmt: skip
    parser.add_argument("--from-source", metavar="TEXT", help="with --patch: the clean source sentence")
    if not encoder_only:
        parser.add_argument("--from-target", metavar="TEXT",
                            help="with --patch: the clean run's target (default: this run's decoder input)")


def ablations(bundle: ModelBundle, args: argparse.Namespace) -> list[HeadChange | KeyKnockout]:
    return [parse_spec(spec, bundle.model) for spec in args.ablate]


def _length_check(side: str, clean, this) -> None:
    if clean is not None and this is not None and clean.shape != this.shape:
        raise UserError(f"The clean {side} (--from-{side}) has {clean.shape[-1]} tokens and this run's {side} "
                        f"{this.shape[-1]}; activation patching needs sentences of the same length.")


def patches(bundle: ModelBundle, args: argparse.Namespace, inputs: Inputs, encoder_only: bool = False) -> list[Patch]:
    """The --patch steps with their values from a traced, unchanged run of --from-source (and --from-target, or
    else this run's own decoder input); the two runs must have the same number of tokens."""
    from_source, from_target = args.from_source, getattr(args, "from_target", None)
    if not args.patch:
        if from_source or from_target:
            given = "--from-source and --from-target go" if hasattr(args, "from_target") else "--from-source goes"
            raise UserError(f"{given} with --patch STEP.")
        return []
    if not from_source:
        raise UserError("--patch needs the clean sentence: add --from-source TEXT.")
    valid = patchable_steps(bundle.model)
    folders = getattr(args, "dictionary", None) or []
    for step in args.patch:
        if _dictionary_step(step) is not None:
            if encoder_only or not folders:
                raise UserError(f"{step} is a dictionary's step: patch it in `trace` with the dictionary attached "
                                "(--dictionary DIR).")  # fmt: skip
            continue
        example = next((s for s in reversed(valid) if s.startswith("encoder.") and "add_norm" in s), next(iter(valid)))
        if encoder_only and step.split(".")[0] not in ("encoder", "src_embed"):
            raise UserError(f"{step} cannot be patched while generating: only the encoder's steps can (the decoder's "
                            f"positions change as it generates), e.g. {example}; `trace --patch` takes any step.")
        if step not in valid:
            raise UserError(f"{step} cannot be patched; patchable are each attention's q, k, v, weights, context and "
                            f"out, and the output of each embedding, feed-forward, Add & Norm and final norm "
                            f"(e.g. {example}).")
    clean = bundle.prepare(from_source, from_target or "")
    if bundle.config.has_encoder and bundle.config.has_decoder and not from_target:
        clean.tgt, clean.target_tokens = inputs.tgt, inputs.target_tokens  # the same decoder input as this run
    _length_check("source", clean.src, inputs.src)
    if not encoder_only:
        _length_check("target" if bundle.config.has_encoder else "source", clean.tgt, inputs.tgt)
    origin = f"'{from_source}'" if len(from_source) <= 40 else f"'{from_source[:37]}…'"
    if not any(_dictionary_step(step) for step in args.patch):
        _, trace = bundle.run(clean, keep_output=False)
        return [Patch(step, trace[step].tensor, origin) for step in args.patch]
    from ..features.attach import DictPatch, open_dictionaries, traced

    _, trace = traced(bundle, clean, open_dictionaries(folders), keep_output=False)  # unchanged, no clamps
    names = set(trace.names())
    out: list = []
    for step in args.patch:
        if step not in names:
            raise UserError(f"{step}: no attached dictionary reads {_dictionary_step(step)[0]} (attached: "
                            f"{', '.join(trace.dictionaries)}).")  # fmt: skip
        kind = DictPatch if _dictionary_step(step) else Patch
        out.append(kind(step, trace[step].tensor, origin))
    return out


def _dictionary_step(step: str):
    from ..features.attach import dictionary_step

    return dictionary_step(step)
