"""The Python API: scratchformer in a notebook.

    import scratchformer as sf
    run = sf.run("en-hi", "the girl eats an apple")
    run.plot("decoder.0.cross_attn.weights", head=None)     # every head, inline in Jupyter

`sf.run` opens a model (any spec `--model` takes), reads the input with the rules of `scratchformer trace` and the
window (a typed target is teacher forcing; none: the model's own greedy output, or a decoder-only model's text
and its greedy continuation), and makes one traced forward pass. The `Run` it returns reads the trace by step
name, draws any step with the exporters' plot data and renderer (`Plot`, in scratchformer/notebook.py), shows the
interactive page inline (`run.show()`), and runs the analyses: each returns what its command's `--json` prints,
as Python objects (dicts and lists), computed on this run's trace.
"""

from __future__ import annotations

import difflib
import sys
import warnings
from dataclasses import dataclass

import torch

from .errors import UserError
from .loading.bundle import default_model_name, load_model
from .loading.memory import default_budget
from .recording.trace import Step, Trace
from .running.generation import Continuation


@dataclass(frozen=True)
class StepRow:
    """One row of `Run.steps`: a step's index (from 0), name, kind, shape, dims and title."""

    index: int
    name: str
    kind: str
    shape: tuple[int, ...]
    dims: tuple[str, ...]
    title: str


class StepTable(list):
    """`Run.steps`: a list of StepRow that prints as a table (and as an HTML table in Jupyter)."""

    @property
    def names(self) -> list[str]:
        """The step names in order."""
        return [r.name for r in self]

    def __repr__(self) -> str:
        width = max((len(r.name) for r in self), default=4)
        lines = [f"{'#':>4}  {'name':<{width}}  {'kind':<19}  {'shape':<18}  dims"]
        for r in self:
            shape = "×".join(map(str, r.shape))
            lines.append(f"{r.index:>4}  {r.name:<{width}}  {r.kind:<19}  {shape:<18}  {' × '.join(r.dims)}")
        return "\n".join(lines)

    def _repr_html_(self) -> str:
        from html import escape

        head = "".join(f"<th>{h}</th>" for h in ("#", "name", "kind", "shape", "dims", "title"))
        rows = "".join(
            f"<tr><td>{r.index}</td><td><code>{escape(r.name)}</code></td><td>{escape(r.kind)}</td>"
            f"<td>{'×'.join(map(str, r.shape))}</td><td>{escape(' × '.join(r.dims))}</td>"
            f"<td>{escape(r.title)}</td></tr>"
            for r in self
        )
        return f"<table><thead><tr>{head}</tr></thead><tbody>{rows}</tbody></table>"


def run(model: str | None = None, source: str | None = None, target: str | None = None, device: str | None = None,
        *, start_only: bool = False, precision: str = "float32", dictionaries: list | None = None,
        clamps: list[str] | None = None) -> Run:  # fmt: skip
    """Open `model` (a preset, a bundled model such as "en-hi", a folder, a Hugging Face id in the local cache, or
    any of these with "@step-N" for a training snapshot; None: the default model), read `source`, and trace one
    forward pass. `target`: a typed decoder input (teacher forcing); `start_only`: the decoder reads its start
    token alone; neither: the model's own greedy output. `device`: "cpu", "cuda", "cuda:1" (None: CPU).
    `precision`: "float32", or "stored" to keep a folder's stored dtype. `dictionaries`: sparse dictionary folders
    (or scratchformer.features Dictionary objects) to attach: the trace gains each one's `<step>.dict.…` steps;
    `clamps`: "STEP:FEATURE=VALUE[@POSITION]" texts, as --clamp takes them. Bad input raises UserError with the
    sentence the command line prints."""
    if source is None or not str(source).strip():
        raise UserError("Give a sentence to run, e.g. sf.run(\"en-hi\", \"the girl eats an apple\").")
    if start_only and target:
        raise UserError("start_only and target exclude each other: a typed target is the decoder input.")
    _quiet_progress_bars()
    bundle = load_model(model or default_model_name(), device or "cpu", precision=precision)
    inputs = bundle.prepare_run(source, target or "", start_only, continuation=Continuation())
    if clamps and not dictionaries:
        raise UserError("clamps set a dictionary's feature: attach the dictionary with dictionaries=[folder].")
    if dictionaries:
        from .features.attach import parse_clamp, traced
        from .features.folder import load

        dicts = [load(d) if isinstance(d, str | bytes) or hasattr(d, "__fspath__") else d for d in dictionaries]
        _, trace = traced(bundle, inputs, dicts, [parse_clamp(c) for c in clamps or []], keep_output=False,
                          budget=default_budget())  # fmt: skip
    else:
        _, trace = bundle.run(inputs, keep_output=False, budget=default_budget())
    return Run(bundle, inputs, trace, source, target, start_only, spec=model or default_model_name(),
               precision=precision)  # fmt: skip


def sweep_pairs(model: str | None, pairs, metric: str = "logit-diff", method: str = "exact",
                per_position: bool = False, start_only: bool = False, per_pair: bool = False,
                device: str | None = None) -> dict:  # fmt: skip
    """Activation patching over every pair of a pairs file (`scratchformer sweep --pairs FILE --json`): `pairs` is
    the file's path (JSONL or CSV: source, corrupt or corrupt_word, optional target, answer, wrong); each effect is
    the mean over pairs with its "std"; `per_pair` adds each pair's effects."""
    from .analyses.sweep_pairs import sweep_pairs as sweep_all
    from .datasets.pairs import read_pairs

    specs = read_pairs(pairs)
    bundle = load_model(model or default_model_name(), device or "cpu")
    result = sweep_all(bundle, specs, metric, method, per_position, start_only, default_budget())
    return result.to_dict(per_pair)


def _quiet_progress_bars() -> None:
    """Import tqdm.auto before transformers and huggingface_hub do, with its one warning ignored. In a Jupyter
    kernel without ipywidgets, tqdm.auto warns "IProgress not found. Please update jupyter and ipywidgets" on
    stderr (a red box under the first cell, read as an error) and then uses its text bars all the same; with the
    warning ignored it makes the same choice silently. Imported once, it never warns again in this process."""
    if "tqdm.auto" in sys.modules:
        return
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="IProgress not found")
        try:
            import tqdm.auto  # noqa: F401 - imported for its side effect: the choice of bars, made quietly
        except ImportError:
            pass


class Run:
    """One traced forward pass: `run[step]` is a step's tensor, `run.steps` the table of steps; `plot`, `show`,
    `explain` and the analyses read it. Made by `scratchformer.run(...)`."""

    def __init__(self, bundle, inputs, trace: Trace, source: str, target: str | None = None,
                 start_only: bool = False, spec: str | None = None, precision: str = "float32") -> None:  # fmt: skip
        self.bundle = bundle  # the model, its tokenizers and name (scratchformer.loading.model_bundle.ModelBundle)
        self.inputs = inputs  # token ids and how the text was read (scratchformer.loading.model_bundle.Inputs)
        self.trace = trace  # every step's tensor, by name (scratchformer.recording.trace.Trace)
        self.source = source
        self.target = target
        self._start_only = start_only
        self.spec = spec or bundle.name  # what opened the model: a folder's path, not its display name
        self.precision = precision  # what it was opened in; a model this run opens later (diff) is opened alike

    def __repr__(self) -> str:
        tokens = " ".join((self.trace.source_tokens or self.trace.target_tokens or [[]])[0])
        return f"<scratchformer run: {self.bundle.name}, {len(self.trace)} steps, tokens: {tokens[:80]}>"

    # --- the trace -------------------------------------------------------------------------------------------

    def step(self, name: str | int) -> Step:
        """The Step of a name (or its index from 0). An unknown name raises KeyError naming the closest ones."""
        if isinstance(name, int) and not isinstance(name, bool):
            if not -len(self.trace) <= name < len(self.trace):
                raise KeyError(f"step index {name} is out of range; this run has {len(self.trace)} steps (0 to "
                               f"{len(self.trace) - 1}).")  # fmt: skip
            return self.trace[name % len(self.trace)]
        names = [s.name for s in self.trace]
        if name in names:
            return self.trace[name]
        close = difflib.get_close_matches(str(name), names, n=5, cutoff=0.4)
        hint = f"; the closest are {', '.join(close)}" if close else "; run.steps lists them all"
        raise KeyError(f"no step named {name!r} in this run{hint}.")

    def __getitem__(self, name: str | int) -> torch.Tensor:
        """A step's tensor (its shape and dims are in `run.steps`)."""
        return self.step(name).tensor

    def __len__(self) -> int:
        return len(self.trace)

    def __iter__(self):
        return iter(s.name for s in self.trace)

    def __contains__(self, name) -> bool:
        return any(s.name == name for s in self.trace)

    @property
    def steps(self) -> StepTable:
        """Every step: index, name, kind, shape, dims and title."""
        return StepTable(StepRow(s.index, s.name, s.kind, tuple(s.shape), tuple(s.dims), s.title) for s in self.trace)

    @property
    def translation(self) -> str:
        """The model's own output as text when the decoder read it ("" when a target was typed, or there is no
        decoder): a translation, or a decoder-only model's continuation."""
        return self.inputs.translation

    @property
    def tokens(self) -> dict[str, list[str]]:
        """The tokens of the first batch item: {"source": [...], "target": [...]} (a side the model lacks: [])."""
        src, tgt = self.trace.source_tokens, self.trace.target_tokens
        return {"source": list(src[0]) if src else [], "target": list(tgt[0]) if tgt else []}

    def explain(self, step: str | int, batch: int = 0) -> str:
        """What the step computes, in words and with this run's numbers (the window's explanation panel)."""
        from .explain import explain_step

        labels = self.bundle.tgt_tokenizer.token_strings
        return explain_step(self.trace, self.step(step), self.bundle.config, batch, vocab_labels=labels).text()

    # --- pictures --------------------------------------------------------------------------------------------

    def plot(self, step: str | int, head: int | None = 0, batch: int = 0):
        """A figure of one step, drawn like the exports (PNG/SVG/PDF): head `head` (from 0; a step without heads
        ignores it), or with head=None every head side by side. Jupyter shows it inline; `.save("map.svg")`
        writes a file."""
        from .notebook import step_plot

        return step_plot(self.trace, self.step(step), head, batch, self.bundle.tgt_tokenizer.token_strings)

    def show(self, height: int | None = None, graph: bool = False, transcoders=None, live: bool = False):
        """The interactive page of this run (the one `scratchformer export --format html` writes), inline in
        Jupyter, JupyterLab and VS Code in a frame `height` pixels high; works offline. `.save("run.html")`
        writes it as a file. `graph=True` adds the attribution graph of the run's prediction (`export --graph`),
        through `transcoders` (a set's folder; None: the set a bundled model ships). `live=True` makes the page
        carry the model and rerun it in the browser on the sentence typed into it (`export --live`); for a run it
        cannot rerun, the recorded page is shown with one sentence above it saying why (`.note`)."""
        from .notebook import PageView

        note = None
        if live:
            from .page import live_page_refusal

            why = live_page_refusal(self.bundle, self.trace)
            if why is not None:
                live, note = False, f"{why} The page below is the recorded one."
        return PageView(self, height, graph, transcoders, live, note)

    # --- analyses: what each command's --json prints, as objects ------------------------------------------------

    def derive(self, step: str | int, index) -> dict:
        """How one cell was computed from its inputs (`scratchformer derive --json`). `index`: one index per axis."""
        from .analyses import derive

        idx = (index,) if isinstance(index, int) else tuple(index)
        return derive.compute(self.bundle, self.trace, self.step(step).name, idx).to_dict()

    def lens(self, top: int = 5, batch: int = 0) -> dict:
        """The logit lens (`scratchformer lens --json`): each residual-stream point read through the output layer."""
        from .analyses import lens

        if top < 1:
            raise UserError(f"top must be at least 1, not {top}.")
        return lens.compute(self.bundle, self.trace, batch, top).to_dict()

    def rollout(self, method: str = "rollout", batch: int = 0) -> dict:
        """Attention rollout or flow (`scratchformer rollout --json`)."""
        from .analyses import rollout

        return rollout.compute(self.bundle, self.trace, method, batch).to_dict()

    def attribute(self, position: int, method: str = "ig", steps: int | None = None, baseline: str = "zero",
                  max_steps: int | None = None, batch: int = 0) -> dict:  # fmt: skip
        """Which input tokens the prediction at decoder `position` rests on (`scratchformer attribute --json`):
        Integrated Gradients ("ig", refined until complete within 1 %) or gradient × input."""
        from .analyses import attribute as a

        steps = a.DEFAULT_STEPS if steps is None else steps
        if method == "ig" and steps < 1:
            raise UserError(f"Integrated Gradients needs at least 1 step, not {steps}.")
        max_steps = a.MAX_STEPS if max_steps is None else max_steps
        result = a.compute(self.bundle, self.inputs, self.trace, position, method, steps, baseline, batch, max_steps)
        return result.to_dict()

    def graph_inputs(self):
        """The inputs a graph explains: the run's, but a decoder-only model's text read as it is, never continued
        (as `scratchformer graph` reads it)."""
        if self.bundle.config.has_encoder:
            return self.inputs
        return self.bundle.prepare_run(self.source, self.target or "", self._start_only)

    def graph(self, transcoders=None, position: int | None = None, node_threshold: float = 0.8,
              edge_threshold: float = 0.98, prune: bool = True, max_features: int | None = None,
              dictionaries: list | None = None, token: str | int | None = None,
              versus: str | int | None = None) -> dict:  # fmt: skip
        """The attribution graph of the prediction at decoder `position` (from 0; default: the last of a typed
        decoder input, the first generated token when the model wrote its own) through transcoder features
        (`scratchformer graph --json`): `transcoders` is a transcoder set's folder (None: the set a bundled model
        ships), `dictionaries` single transcoder folders, `token` the token whose logit is explained (default: the
        most likely; an id, or one token's text) and `versus` a second token, which makes it the logit difference
        token − versus. A decoder-only model's text is read as it is, never continued, as the command reads it."""
        from .graph.build import MAX_FEATURES, build_graph

        result = build_graph(self.bundle, self.graph_inputs(), transcoders, position, node_threshold,
                             edge_threshold, prune, MAX_FEATURES if max_features is None else max_features,
                             default_budget(), list(dictionaries or []), token=token, versus=versus)  # fmt: skip
        return result.to_dict()

    def sweep(self, corrupt_source: str | None = None, corrupt_word: str | None = None, answer: str | None = None,
              wrong: str | None = None, metric: str = "logit-diff", per_position: bool = False, method: str = "exact",
              path: tuple[str, str] | None = None, check_top: int = 0) -> dict:  # fmt: skip
        """Activation patching from this run's sentence (clean) into a corrupted one (`scratchformer sweep --json`):
        give `corrupt_source` (the same number of tokens) or `corrupt_word="I=WORD"` (word I, from 0, replaced).
        Each head, residual point and feed-forward is patched in turn (batched); `method` "attribution" or
        "both" adds attribution patching's estimates; `path=(sender, receiver)` patches one path. The sentence is
        read as `sweep` reads it: a decoder-only model's text as it is, never continued."""
        from .analyses import sweep

        if check_top < 0:
            raise UserError(f"check_top must be 0 or more, not {check_top}.")
        text = sweep.corrupted_text(self.source, corrupt_source, corrupt_word)
        clean = self.bundle.prepare_run(self.source, self.target or "", self._start_only)
        corrupt = self.bundle.prepare(text, self.target or "")
        result = sweep.compute(self.bundle, clean, corrupt, answer, wrong, metric, method=method,
                               per_position=per_position, path=tuple(path) if path else None, check_top=check_top,
                               budget=default_budget())  # fmt: skip
        return result.to_dict()

    def diff(self, against, tolerance: float | None = None) -> dict:
        """This run's sentence through a second model, step by step (`scratchformer diff --json`): `against` is
        anything `model` takes (e.g. "en-hi@step-000032"), opened in this run's precision as `scratchformer diff
        --precision` opens both, or another Run; per step the largest and relative difference, the first step that
        differs beyond `tolerance`, and the parameters that differ."""
        from .analyses import diff

        if isinstance(against, Run):
            other = against.bundle
        else:
            other = load_model(str(against), self.bundle.device, precision=self.precision)
        tolerance = diff.TOLERANCE if tolerance is None else tolerance
        return diff.compute(self.bundle, other, self.source, self.target or "", self._start_only, tolerance).to_dict()

    def trajectory(self, fit_on: str | None = None, batch: int = 0) -> dict:
        """Every token's path through the residual stream on two principal components (`scratchformer trajectory
        --json`), fitted on every point or on step `fit_on`'s vectors."""
        from .analyses import trajectory

        return trajectory.compute(self.bundle, self.trace, batch, fit_on).to_dict()

    def head_metrics(self, pairs: int | None = None) -> dict:
        """Per head and training snapshot of this model: attention entropy, alignment with the gold alignment
        where the task has one, and importance (`scratchformer head-metrics --json`), on the first `pairs`
        validation pairs of its task."""
        from .analyses import head_metrics

        n = head_metrics.DEFAULT_PAIRS if pairs is None else pairs
        if n < 1:
            raise UserError(f"pairs must be at least 1, not {n}.")
        return head_metrics.compute(self.spec, n_pairs=n, device=str(self.bundle.device)).to_dict()

    def experiment(self, name: str, **controls) -> dict:
        """A live experiment on this model and input (`scratchformer experiment NAME --json`): mask, order, norm,
        scaling, teacher-forcing, temperature …; `controls` as the command's options (d_k=…, temperature=…)."""
        from .experiments import run_experiment

        return run_experiment(name, self.bundle, self.source, self.target, **controls)
