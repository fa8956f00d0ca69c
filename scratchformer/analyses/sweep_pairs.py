"""A patching sweep over many pairs (`scratchformer sweep --pairs FILE`): every pair of a pairs file
(scratchformer.datasets.pairs) swept as `sweep` sweeps one, and each component's effect reported as its mean over
the pairs with the spread beside it:

    effect = (1/n) Σ_j effect_j        std = sqrt( Σ_j (effect_j − effect)² / (n − 1) )   (0 for one pair)

effect_j = (m_patched,j − m_corrupt,j) / (m_clean,j − m_corrupt,j), each pair normalised by its own gap, as a
TransformerLens user's batched metric averages them. Averaging position by position needs the same grid for every
pair: all pairs must have the clean input's token lengths of the first pair.

The patched runs of several pairs share each forward pass (scratchformer.patching.many). Under torchrun each rank
sweeps every world_size-th chunk of pairs; the per-pair effects are summed into one table on every rank (each row
written by one rank, zeros elsewhere, so the sum is exact) and reduced in pair order: rank 0 prints what one
process prints.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

import torch

from ..datasets.pairs import PairSpec, read_pairs
from ..errors import UserError
from ..loading.memory import default_budget
from ..patching import attribution, components
from ..patching.batched import bytes_per_item, start_position
from ..patching.many import pairs_per_chunk, patched_metrics_many, recorded_bytes
from ..patching.metric import OPTION_NAMES
from ..patching.pair import Pair, make_pair, same_length
from ..patching.result import Grid, Sweep
from ..training.distributed import Distributed

METHODS = ("exact", "attribution", "both")


@dataclass
class PairsSweep:
    """The mean sweep (`mean`: a Sweep whose grids hold the mean effects and estimates, whose m_clean and m_corrupt
    are the means, and whose metric and tokens are the first pair's), the spreads, and every pair's numbers."""

    mean: Sweep
    specs: list[PairSpec]
    effects: torch.Tensor | None  # (P, n) float64, every pair's exact effect per component (grid order)
    estimates: torch.Tensor | None  # (P, n) float64, attribution patching's
    m_clean: torch.Tensor  # (P,) float64
    m_corrupt: torch.Tensor  # (P,)
    answers: list[tuple[int, str]]  # each pair's answer token (id, text)
    wrongs: list[tuple[int, str] | None]
    notes: list[str] = field(default_factory=list)

    @property
    def n(self) -> int:
        return len(self.specs)

    def to_dict(self, per_pair: bool = False) -> dict:
        out = self.mean.to_dict()
        out["pairs"] = self.n
        out["clean_std"] = float(_std(self.m_clean[:, None])[0])
        out["corrupt_std"] = float(_std(self.m_corrupt[:, None])[0])
        shown = self.effects if self.effects is not None else self.estimates
        spread = _std(shown).tolist()
        est_spread = _std(self.estimates).tolist() if self.mean.method == "both" else None
        i = 0
        for family in ("heads", "positions", "mlp"):
            for row in out[family]:
                row["std"] = spread[i]
                if est_spread is not None:
                    row["estimate_std"] = est_spread[i]
                i += 1
        if len({a for a in self.answers}) > 1 or len({w for w in self.wrongs}) > 1:
            metric = out["metric"]
            metric["answer"] = "each pair's own (see per_pair with --per-pair)"
            if metric["kind"] == "logit-diff":
                metric["wrong"] = metric["answer"]
            diff = metric["kind"] == "logit-diff"
            tail = " minus logit of its wrong token" if diff else ""
            metric["description"] = f"{'logit' if diff else 'log-probability'} of each pair's answer{tail}"
        out["tokens"]["of"] = "the first pair (the positions of every pair)"
        out["notes"] = self.notes
        if per_pair:
            out["per_pair"] = [self._pair_dict(j) for j in range(self.n)]
        return out

    def _pair_dict(self, j: int) -> dict:
        s = self.specs[j]
        row = {"line": s.line, "source": s.source, "corrupt_source": s.corrupt, "target": s.target,
               "answer": {"id": self.answers[j][0], "token": self.answers[j][1]}, "clean": float(self.m_clean[j]),
               "corrupt": float(self.m_corrupt[j])}  # fmt: skip
        if self.wrongs[j] is not None:
            row["wrong"] = {"id": self.wrongs[j][0], "token": self.wrongs[j][1]}
        if self.effects is not None:
            row["effects"] = self.effects[j].tolist()
        if self.estimates is not None:
            row["estimates"] = self.estimates[j].tolist()
        return row


def _std(values: torch.Tensor) -> torch.Tensor:
    """The sample standard deviation over pairs (dim 0) of a (P, n) float64 table; 0 for one pair."""
    if values.shape[0] < 2:
        return torch.zeros(values.shape[1], dtype=torch.float64)
    return values.std(0, correction=1)


@contextmanager
def _line(spec: PairSpec) -> Iterator[None]:
    """A UserError's sentence inside the block, prefixed by the pair's line."""
    try:
        yield
    except UserError as exc:
        raise UserError(f"The pair on line {spec.line}: {exc}") from None


def prepare(bundle, specs: list[PairSpec], start_only: bool = False) -> list[tuple]:
    """Each pair's (clean, corrupt) Inputs, read as `sweep` reads one sentence; one sentence naming the first pair
    whose clean and corrupted inputs differ in length, or whose lengths differ from the first pair's."""
    c = bundle.config
    out, first = [], None
    for s in specs:
        target = s.target or ""
        with _line(s):
            clean = bundle.prepare_run(s.source, target, start_only and not target)
            corrupt = bundle.prepare(s.corrupt, target)
            if c.has_encoder:
                same_length("source", clean.src, corrupt.src, clean.source_tokens[0], corrupt.source_tokens[0])
            else:
                same_length("text", clean.tgt, corrupt.tgt, clean.target_tokens[0], corrupt.target_tokens[0])
        shape = (clean.src.shape[-1] if c.has_encoder else 0, clean.tgt.shape[-1])
        if first is None:
            first = (s, shape)
        elif shape != first[1]:
            what = lambda sh: f"{sh[0]} source and {sh[1]} decoder tokens" if c.has_encoder else f"{sh[1]} tokens"  # noqa: E731
            raise UserError(f"The pair on line {s.line} has {what(shape)} and the first pair (line {first[0].line}) "
                            f"{what(first[1])}; averaging effects position by position needs pairs of the same "
                            "token lengths: put pairs of other lengths in a file of their own.")  # fmt: skip
        out.append((clean, corrupt))
    return out


def sweep_pairs(bundle, specs: list[PairSpec], metric: str = "logit-diff", method: str = "exact",
                per_position: bool = False, start_only: bool = False, budget: int | None = None,
                progress: Callable[[int, int], None] | None = None, cancelled: Callable[[], bool] | None = None,
                dist: Distributed | None = None, answer: str | None = None,
                wrong: str | None = None) -> PairsSweep | None:  # fmt: skip
    """The sweep of every pair (see the module doc); None when cancelled() turns true. progress(done, total) counts
    this rank's pairs. `answer`/`wrong`: the tokens for pairs whose record gives none."""
    if method not in METHODS:
        raise UserError(f"--method is one of {', '.join(METHODS)}, not {method!r}.")
    budget = default_budget() if budget is None else budget
    dist = dist or Distributed()
    model = bundle.model
    inputs = prepare(bundle, specs, start_only)
    n_src = inputs[0][0].src.shape[-1] if bundle.config.has_encoder else 0
    n_tgt = inputs[0][0].tgt.shape[-1]
    heads = components.head_components(model, n_tgt, n_src, per_position)
    points = components.residual_components(model, n_tgt, n_src)
    families = [heads, points, components.mlp_components(model, n_tgt, n_src)]
    every = [c for f in families for c in f]
    notes: list[str] = []

    def made(j: int) -> Pair:
        s, (clean, corrupt) = specs[j], inputs[j]
        with _line(s):
            return make_pair(bundle, clean, corrupt, s.answer or answer, s.wrong or wrong, metric, OPTION_NAMES)

    first = made(0)
    largest = max(_layer_groups(first, every), default=1)
    chunk = pairs_per_chunk(model, len(specs), largest, bytes_per_item(first), recorded_bytes(first), budget,
                            notes)  # fmt: skip
    chunks = [list(range(a, min(a + chunk, len(specs)))) for a in range(0, len(specs), chunk)]
    mine = dist.shard(chunks)
    n, P = len(every), len(specs)
    # the table every rank fills its own rows of: m_clean, m_corrupt, answer, wrong, effects (n), estimates (n)
    table = torch.zeros(P, 4 + 2 * n, dtype=torch.float64)
    total, done = sum(len(c) for c in mine), 0
    for which in mine:
        if cancelled is not None and cancelled():
            return None
        pairs = [first if j == 0 else made(j) for j in which]
        for j, p in zip(which, pairs):
            table[j, 0], table[j, 1] = p.m_clean, p.m_corrupt
            table[j, 2], table[j, 3] = p.metric.answer, -1 if p.metric.wrong is None else p.metric.wrong
        if method != "attribution":
            m = patched_metrics_many(pairs, every, budget=budget, notes=notes, cancelled=cancelled)  # (k, n)
            if m is None:
                return None
            for row, (j, p) in enumerate(zip(which, pairs)):
                table[j, 4 : 4 + n] = p.effect(m[row]).double()
        if method != "exact":
            for j, p in zip(which, pairs):
                table[j, 4 + n :] = p.share(attribution.estimate(p, every)).double()
        done += len(which)
        if progress is not None:
            progress(done, total)
    table = torch.tensor(dist.sum(table.flatten().tolist()), dtype=torch.float64).view(P, -1) if dist.active \
        else table  # fmt: skip
    return _result(bundle, specs, first, families, table, method, per_position, notes)


def _layer_groups(pair: Pair, every: list) -> list[int]:
    """How many of one pair's patches fall in each layer (the size of its batched passes)."""
    counts: dict[tuple[str, int], int] = {}
    for c in every:
        if start_position(c, pair.clean, pair.corrupt) is not None:
            counts[(c.stack, c.layer)] = counts.get((c.stack, c.layer), 0) + 1
    return list(counts.values())


def _result(bundle, specs, first: Pair, families, table: torch.Tensor, method: str, per_position: bool,
            notes: list[str]) -> PairsSweep:  # fmt: skip
    n = sum(len(f) for f in families)
    effects = table[:, 4 : 4 + n] if method != "attribution" else None
    estimates = table[:, 4 + n :] if method != "exact" else None
    grids, a = [], 0
    for f in families:
        g = Grid(f)
        if effects is not None:
            g.effects = effects[:, a : a + len(f)].mean(0)
        if estimates is not None:
            g.estimates = estimates[:, a : a + len(f)].mean(0)
        grids.append(g)
        a += len(f)
    gaps = table[:, 0] - table[:, 1]
    flat = [s.line for s, g in zip(specs, gaps.tolist()) if g == 0]
    if flat:
        notes.append(f"m_clean equals m_corrupt for {len(flat)} pair(s) (line {', '.join(map(str, flat[:5]))}"
                     f"{' …' if len(flat) > 5 else ''}): nothing to restore, their effects count as 0.")  # fmt: skip
    small = [s.line for s, g in zip(specs, gaps.tolist()) if 0 < abs(g) < 0.1]
    if small:
        notes.append(f"m_clean − m_corrupt is below 0.1 for {len(small)} pair(s) (line "
                     f"{', '.join(map(str, small[:5]))}{' …' if len(small) > 5 else ''}): their effects divide by it "
                     "and are noisy.")  # fmt: skip
    tok = bundle.tgt_tokenizer
    name = lambda i: tok.token_strings([int(i)])[0]  # noqa: E731
    answers = [(int(a), name(a)) for a in table[:, 2].tolist()]
    wrongs = [None if w < 0 else (int(w), name(w)) for w in table[:, 3].tolist()]
    mean = Sweep(first.metric, float(table[:, 0].mean()), float(table[:, 1].mean()), method, per_position, *grids,
                 first.source_tokens, first.corrupt_tokens, first.target_tokens, notes=notes)  # fmt: skip
    return PairsSweep(mean, specs, effects, estimates, table[:, 0], table[:, 1], answers, wrongs, notes)


# --- command line ------------------------------------------------------------------------------------------------


def run(args, text_report: Callable[[Sweep], str]) -> int:
    """`sweep --pairs FILE`: the options sweep.run has checked; rank 0 alone prints. `text_report`: the single
    sweep's table (analyses.sweep), which draws the mean sweep."""
    from ..commands.common import memory_budget, open_model, print_result
    from ..training.distributed import session

    taken = [o for o, v in (("--source", args.source), ("--corrupt-source", args.corrupt_source),
                            ("--corrupt-word", args.corrupt_word), ("--text-file", args.text_file),
                            ("--target", args.target), ("--path", args.path),
                            ("--check-top", args.check_top)) if v]  # fmt: skip
    if taken:
        raise UserError(f"--pairs reads every pair's inputs from the file; drop {', '.join(taken)} (a pair's target "
                        "is its record's \"target\").")  # fmt: skip
    specs = read_pairs(args.pairs)
    with session(args.device) as dist:
        bundle = open_model(args)
        bar = _progress_bar(len(specs), dist) if dist.is_main else None
        result = sweep_pairs(bundle, specs, args.metric, args.method, args.per_position, args.start_only,
                             memory_budget(args), progress=bar.update if bar else None, dist=dist,
                             answer=args.answer, wrong=args.wrong)  # fmt: skip
        if bar is not None:
            bar.close()
        features = None
        if getattr(args, "dictionary", None):
            from ..features.folder import load

            features = feature_rows(bundle, specs, load(args.dictionary), args, dist)
    if not dist.is_main:
        return 0
    payload = result.to_dict(args.per_pair)
    if features is not None:
        payload["features"] = features
    for note in result.notes:
        print(f"note: {note}", file=sys.stderr)
    return print_result(args.json, payload,
                        lambda: f"{result.n} pairs, each effect the mean over pairs (± std)\n"
                        + text_report(result.mean, features=features))  # fmt: skip


def feature_rows(bundle, specs: list[PairSpec], d, args, dist: Distributed | None = None) -> list[dict]:
    """The feature sweep (scratchformer.features.patching) of every pair, averaged: one row per (feature,
    position) that differs in any pair, its mean effect over all pairs (0 for a pair where it does not differ) with
    the std, and how many pairs it differs in. Largest |mean| first. Under torchrun each rank sweeps every N-th
    pair and every rank gathers all of them, in pair order, so the rows are one process's."""
    from ..features.patching import feature_sweep

    dist = dist or Distributed()
    inputs = prepare(bundle, specs, args.start_only)
    mine: dict[int, list[dict]] = {}
    for j in dist.shard(list(range(len(specs)))):
        spec, (clean, corrupt) = specs[j], inputs[j]
        with _line(spec):
            pair = make_pair(bundle, clean, corrupt, spec.answer or args.answer, spec.wrong or args.wrong,
                             args.metric)  # fmt: skip
            mine[j], _notes = feature_sweep(pair, d)
    by_pair = {j: rows for part in dist.gather(mine) for j, rows in part.items()}
    effects: dict[tuple[int, int], list[float]] = {}
    base: dict[tuple[int, int], dict] = {}
    for j in range(len(specs)):
        for r in by_pair[j]:
            key = (r["feature"], r["position"])
            base.setdefault(key, {k: r[k] for k in ("step", "feature", "position", "axis")})
            effects.setdefault(key, [0.0] * len(specs))[j] = r["effect"]
    out = []
    for key, values in effects.items():
        v = torch.tensor(values, dtype=torch.float64)
        out.append(base[key] | {"effect": float(v.mean()), "std": float(_std(v[:, None])[0]),
                                "pairs_differing": sum(1 for j in range(len(specs)) if values[j] != 0.0)})
    out.sort(key=lambda r: -abs(r["effect"]))
    return out


class _Bar:
    """progress(done, total) → a tqdm bar on stderr, drawn only when stderr is a terminal."""

    def __init__(self, total: int, shard: int):
        from tqdm import tqdm

        self.bar = tqdm(total=shard, unit="pair", desc="sweep", file=sys.stderr, leave=False)
        self.shown = 0

    def update(self, done: int, total: int) -> None:
        if self.bar.total != total:
            self.bar.total = total
        self.bar.update(done - self.shown)
        self.shown = done

    def close(self) -> None:
        self.bar.close()


def _progress_bar(n: int, dist: Distributed) -> _Bar | None:
    if not sys.stderr.isatty():
        return None
    return _Bar(n, -(-n // dist.world_size))
