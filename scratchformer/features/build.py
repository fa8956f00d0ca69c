"""From a model and a corpus to a trained dictionary folder: what `scratchformer features train` and the window's
*Features › Train dictionary…* both run.

The corpus's last tenth (at least one input) is held out: the dictionary trains on the rest's activations and is
measured on these (scratchformer.features.quality). Under torchrun each rank reads every world_size-th input.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

from ..errors import UserError
from .activations import Text, batches, gather
from .dictionary import ARCHITECTURES, Dictionary, DictionaryInfo
from .points import check_step, ffn_input, ffn_steps
from .quality import ce_recovered, reconstruction
from .training import TrainSettings, train

MAX_WEIGHTS_BYTES = 2 * 2**30  # a dictionary's weights and Adam's state beyond this are refused before training


@dataclass
class Request:
    at: str
    to: str | None = None  # a transcoder's target step (None: an SAE)
    kind: str = "sae"
    architecture: str | None = None  # None: topk for an SAE, batchtopk for a transcoder
    width: int = 512
    k: int = 8
    tokens: int | None = 200_000  # activations read, at most


def check(bundle, req: Request) -> Request:
    """The request with its defaults filled in, or UserError for each thing that cannot be trained."""
    model = bundle.model
    if req.kind not in ("sae", "transcoder"):
        raise UserError(f"--kind is sae or transcoder, not {req.kind!r}.")
    at = check_step(model, req.at, "--at")
    to = req.to
    if req.kind == "transcoder":
        to = check_step(model, to, "--to") if to else None
        if to is None:
            raise UserError("A transcoder reads --at and predicts --to: give --to (e.g. a feed-forward's output, "
                            "decoder.0.ffn.out), or use --every-layer.")  # fmt: skip
    elif to not in (None, at):
        raise UserError("--to is a transcoder's target; add --kind transcoder, or leave --to out for an SAE.")
    arch = req.architecture or ("batchtopk" if req.kind == "transcoder" else "topk")
    if arch not in ARCHITECTURES:
        raise UserError(f"--architecture is one of {', '.join(ARCHITECTURES)}, not {arch!r}.")
    if req.kind == "transcoder" and arch == "topk":
        raise UserError("SAELens stores no TopK transcoder; train it as batchtopk (the default for transcoders), "
                        "which keeps k features a token on average and runs as a JumpReLU.")  # fmt: skip
    if req.width < 1 or req.k < 1:
        raise UserError(f"--width and --k must be 1 or more (got {req.width} and {req.k}).")
    if req.k > req.width:
        raise UserError(f"--k {req.k} is more than the dictionary's {req.width} features.")
    d_model = bundle.config.d_model
    weights = 4 * req.width * (2 * d_model + 2) * 4  # W_enc, W_dec and biases, with Adam's two moments and grads
    if weights > MAX_WEIGHTS_BYTES:
        raise UserError(f"--width {req.width} would need about {weights / 2**30:.1f} GiB for its weights and "
                        f"optimiser; keep it under {MAX_WEIGHTS_BYTES // 2**30} GiB (a width of "
                        f"{MAX_WEIGHTS_BYTES // (16 * (2 * d_model + 2))} at most).")  # fmt: skip
    return Request(at, to or at, req.kind, arch, req.width, req.k, req.tokens)


def split(texts: list[Text]) -> tuple[list[Text], list[Text]]:
    """(training inputs, held-out inputs): the last tenth held out, at least one input (none for a one-input
    corpus, whose figures are then measured on what it trained on)."""
    if len(texts) < 2:
        return texts, texts
    n = max(1, len(texts) // 10)
    return texts[:-n], texts[-n:]


def train_dictionary(bundle, req: Request, texts: list[Text], out: str | Path | None, settings: TrainSettings,
                     budget: int, progress: Callable[[str, int, int], None] | None = None,
                     cancelled: Callable[[], bool] | None = None, dist=None) -> dict | None:  # fmt: skip
    """Train one dictionary and write its folder; returns the figures `--json` prints (None when cancelled while
    reading activations; a cancel during training keeps what was learned and says so: "cancelled": true)."""
    from ..training.distributed import Distributed

    dist = dist or Distributed()
    req = check(bundle, req)
    if not texts:
        raise UserError("The corpus is empty: give at least one input.")
    train_texts, held = split(texts)
    mine = dist.shard(train_texts)
    steps = list(dict.fromkeys([req.at, req.to]))
    report = (lambda what: (lambda a, b: progress(what, a, b))) if progress else (lambda what: None)  # noqa: E731
    acts = gather(bundle, mine, steps, budget, req.tokens and -(-req.tokens // dist.world_size),
                  report("reading activations"), cancelled)  # fmt: skip
    if acts is None:
        return None
    x, y = acts[req.at], acts[req.to]
    info = DictionaryInfo(req.at, req.to, bundle.name, req.kind)
    d = Dictionary(x.shape[1], req.width, req.architecture, req.k, y.shape[1], info)
    settings = replace(settings, width=req.width, k=req.k, architecture=req.architecture)
    outcome = train(d, x, None if req.kind == "sae" else y, settings, out,
                    (lambda a, b, loss: progress("training", a, b)) if progress else None, cancelled, dist)  # fmt: skip
    d.eval()
    held_acts = gather(bundle, held, steps, budget, 20_000)
    figures = reconstruction(d, held_acts[req.at], None if req.kind == "sae" else held_acts[req.to])
    figures["ce_recovered"] = ce_recovered(bundle, d, list(batches(bundle, held[:256], budget)))
    figures |= {"tokens": int(dist.sum([len(x)])[0]), "seconds": round(outcome.seconds, 2), "steps": outcome.steps}
    if outcome.cancelled:
        figures["cancelled"] = True
    d.info.trained = {k: v for k, v in figures.items() if k != "cancelled"}
    if out is not None and dist.is_main:
        from .folder import save

        save(d, out)
    return figures


def transcoder_requests(bundle, width: int, k: int, tokens: int | None, architecture: str | None) -> list[Request]:
    """One transcoder per feed-forward (encoder layers first): its input → its output (`--every-layer`)."""
    outs = ffn_steps(bundle.model)
    if not outs:
        raise UserError("This model has no feed-forward sublayer a transcoder can stand in for.")
    return [Request(ffn_input(bundle.model, o), o, "transcoder", architecture, width, k, tokens) for o in outs]
