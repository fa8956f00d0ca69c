"""Model work off the UI thread: load a model, read the text, run the traced forward pass.

The window owns one ModelWorker living in its own QThread and talks to it only by queued signals. Each request
carries a generation number; a newer request supersedes older ones (a queued stale request is skipped, and
the window ignores a stale result), and shutdown() stops the thread cleanly even while work is running.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field, replace

from PySide6.QtCore import QObject, QThread, Signal, Slot

from scratchformer.errors import UserError
from scratchformer.loading.bundle import Inputs, ModelBundle, load_model
from scratchformer.patching.interventions import intervene
from scratchformer.plotdata import Heatmap, TensorStats, step_heatmap, tensor_stats
from scratchformer.recording.nonfinite import NonFinite, find_nonfinite
from scratchformer.recording.trace import Step, Trace
from scratchformer.running.generation import Continuation
from scratchformer.transformer.parameters import parameter_counts

from .gc_guard import no_collection_in_this_thread
from .jobs import friendly_error, yield_to_the_ui_thread


@dataclass
class RunRequest:
    generation: int
    model: str
    device: str
    source: str
    target: str = ""
    windows: tuple[int, int] | None = None  # (S, B): the walkthrough's batching of a long text
    start_only: bool = False  # an empty target means the start token alone, not the model's own output
    padded: bool = False  # a small padded batch built from the sentence (for the Masks tab)
    memory_budget: int | None = None  # bytes; a run that would need more is refused with one sentence
    interventions: tuple = ()  # scratchformer.patching.interventions items applied to this run (heads from 0)
    continuation: Continuation | None = None  # how a decoder-only model continues the text (None: it does not)
    precision: str = "float32"  # a Hugging Face folder's weights: float32, or "stored" (bfloat16 stays bfloat16)
    prepared: Inputs | None = None  # run these inputs as they are (a patching sweep's corrupted run), not `source`
    sides: Sides | None = None  # what Compare calls the runs without and with the interventions (None: before, after)
    dictionaries: tuple = ()  # folders of sparse dictionaries attached to the run (scratchformer.features.attach)
    clamps: tuple = ()  # scratchformer.features.attach.Clamp items: features set to a value, one more intervention


@dataclass(frozen=True)
class Sides:
    """The names of the two runs Compare sets side by side, where "before" and "after" would mislead: a patching
    sweep's cell is the corrupted run (before) and that run with one activation from the clean run (after)."""

    before: str  # 'Corrupted run'
    after: str  # 'Patched run'
    after_detail: str  # 'decoder layer 2 cross-attention head 1 taken from the clean run'


@dataclass
class RunResult:
    """What the window shows: the model, its inputs, the trace, and per-step numbers computed off the UI thread."""

    request: RunRequest
    bundle: ModelBundle
    inputs: Inputs
    trace: Trace
    heatmap_cache: dict = field(default_factory=dict)  # (step index, batch, head) → Heatmap, prefilled for vocab
    parameters: dict = field(default_factory=dict)  # block key → scratchformer.transformer.parameters.ParamCount
    explanations: dict = field(default_factory=dict)  # (step index, batch) → scratchformer.explain.Explanation
    seconds: float = 0.0
    forward_end: float = 0.0  # time.perf_counter() when the traced forward pass ended (benchmarks/bench_trace.py)
    stats: dict = field(default_factory=dict)  # (step index, batch or None) → TensorStats, filled when shown
    # With interventions: the same inputs run without them (see compute), and both models' own greedy outputs
    before: Trace | None = None
    before_output: str = ""
    after_output: str = ""
    nonfinite: NonFinite | None = None  # NaN or ±∞ in the weights or the steps (None: everything is finite)

    def stats_for(self, step: Step, batch: int) -> TensorStats:
        """The inspector's numbers: over the batch item shown when there are several (each is one sentence or
        window, and a lazy trace recomputes one item, not B), else over the whole tensor."""
        key = self._stats_key(step, batch)
        if key not in self.stats:
            if key[1] is None:
                self.stats[key] = tensor_stats(step.tensor)
            else:
                b = min(batch, step.shape[0] - 1)
                self.stats[key] = replace(tensor_stats(step.item(b)), scope=f"batch item {b + 1}")
        return self.stats[key]

    def has_stats(self, step: Step, batch: int) -> bool:
        return self._stats_key(step, batch) in self.stats

    @staticmethod
    def _stats_key(step: Step, batch: int) -> tuple:
        whole = "batch" not in step.dims or step.shape[0] == 1
        return step.index, None if whole else batch

    def heatmap_for(self, step: Step, batch: int, head: int) -> Heatmap:
        """The heatmap of a step; vocabulary-wide steps are made once (reducing 50 257 columns is slow) and copied,
        since views may retitle what they show. Safe to call off the UI thread."""
        if "vocab" not in step.dims:
            return step_heatmap(self.trace, step, batch, head, self.vocab_labels)
        key = (step.index, batch, 0)
        if key not in self.heatmap_cache:
            self.heatmap_cache[key] = step_heatmap(self.trace, step, batch, 0, self.vocab_labels)
        return Heatmap(**{**self.heatmap_cache[key].__dict__})

    @property
    def notes(self) -> list[str]:
        return self.inputs.notes

    def vocab_labels(self, ids: list[int]) -> list[str]:
        return self.bundle.tgt_tokenizer.token_strings(ids)


_SHARED: dict = {}  # the last loaded model, shared by every window in this process (tests open many)
_SHARED_LOCK = threading.Lock()


def compute(request: RunRequest, cache: dict | None = None, is_stale=lambda: False) -> RunResult | None:
    """Load (cached by model and device), prepare and run; None if superseded on the way."""
    import time

    t0 = time.perf_counter()
    key = (request.model, request.device, request.precision)
    with _SHARED_LOCK:
        cache = _SHARED if cache is None else cache
        bundle = cache.get(key)
        if bundle is None:
            cache.clear()  # keep one model in memory: the paper preset alone is 300 MB
            bundle = load_model(request.model, request.device, precision=request.precision)
            cache[key] = bundle
    if is_stale():
        return None
    changes = list(request.interventions)
    dictionaries = open_dictionaries(request.dictionaries)
    with changed(bundle, dictionaries, request.clamps, changes):  # a generated decoder input is the changed model's
        if request.prepared is not None:
            inputs = request.prepared
        elif request.windows:
            s, b = request.windows
            inputs = bundle.prepare_windows(request.source, s, b)
        elif request.padded:
            inputs = bundle.prepare_padded(request.source, request.target, request.start_only)
        else:
            # An empty target on an encoder-decoder: greedy-decode first, then trace with that output as decoder
            # input.
            inputs = bundle.prepare_run(request.source, request.target, request.start_only, truncate=True,
                                        continuation=request.continuation)
        _, trace = bundle.run(inputs, keep_output=False, budget=request.memory_budget)
    forward_end = time.perf_counter()
    if is_stale():
        return None
    result = RunResult(request, bundle, inputs, trace, seconds=0.0, parameters=parameter_counts(bundle.model),
                       forward_end=forward_end)
    result.nonfinite = find_nonfinite(bundle.model, trace)
    if changes or request.clamps:
        _compare(result, changes, dictionaries)
        if is_stale():
            return None
    for step in trace:  # vocab-wide steps are slow to reduce to their top columns: do it here, not on redraw
        if "vocab" in step.dims:
            result.heatmap_cache[(step.index, 0, 0)] = step_heatmap(trace, step, 0, 0, result.vocab_labels)
    trace.stored_bytes()  # counted once and kept: the memory status reads it on the UI thread (15 ms at 8 × 512)
    result.seconds = time.perf_counter() - t0
    return result


def changed(bundle: ModelBundle, dictionaries: list, clamps: tuple = (), changes: list = ()):
    """The context a run of the request's model runs in: its interventions, and its dictionaries attached with
    their clamps (one more intervention) when it has any."""
    if not dictionaries:
        return intervene(bundle.model, list(changes))
    from scratchformer.features.attach import attached

    return attached(bundle.model, dictionaries, list(clamps), others=list(changes))


def open_dictionaries(folders: tuple) -> list:
    """The dictionaries of `folders`, loaded afresh (a folder retrained since the last run is read again)."""
    if not folders:
        return []
    from scratchformer.features.folder import load

    return [load(f) for f in folders]


def _compare(result: RunResult, changes: list, dictionaries: list = ()) -> None:
    """The run without the interventions, for the Compare tab: the same inputs, so both runs read the same decoder
    input (for a generated one, the changed model's own output). And each model's own greedy output for one
    sentence, so the Output tab can say what the change does to the translation."""
    bundle, inputs, request = result.bundle, result.inputs, result.request
    budget = request.memory_budget
    if budget is not None:  # the changed run's trace stays in memory beside this one
        budget = max(budget - result.trace.stored_bytes(), 0)
    try:
        with changed(bundle, list(dictionaries)):  # the dictionaries' steps on both sides, no clamp
            _, result.before = bundle.run(inputs, keep_output=False, budget=budget)
    except UserError as exc:
        raise UserError(f"Comparing needs a second run without the interventions, which does not fit: {exc}") from None
    c = bundle.config
    if request.prepared is not None:  # a patch fits its own input's length only: nothing to decode afresh
        return
    if c.has_encoder and c.has_decoder and request.windows is None and inputs.src is not None:
        result.before_output = bundle.prepare_run(request.source, "", truncate=True).translation
        if inputs.decoder_input == "generated":
            result.after_output = inputs.translation
        else:
            with changed(bundle, list(dictionaries), request.clamps, changes):
                result.after_output = bundle.prepare_run(request.source, "", truncate=True).translation


class ModelWorker(QObject):
    """Lives in a QThread. `run(request)` is queued to it; results and errors come back by signal."""

    finished = Signal(int, object)  # generation, RunResult
    failed = Signal(int, str)  # generation, one sentence
    started = Signal(int)

    def __init__(self) -> None:
        super().__init__()
        self.latest = 0  # written by the UI thread; an int store is atomic under the GIL

    @Slot(object)
    def run(self, request: RunRequest) -> None:
        yield_to_the_ui_thread()  # the window stays answerable while a run uses every core (app/work/jobs.py)
        with no_collection_in_this_thread():  # see gc_guard: never collect UI-thread objects on this thread
            if request.generation != self.latest:
                return  # superseded while queued
            self.started.emit(request.generation)
            try:
                result = compute(request, None, lambda: request.generation != self.latest)
            except Exception as exc:  # noqa: BLE001 - every failure becomes a sentence in the window
                self.failed.emit(request.generation, friendly_error(exc))
                return
            if result is not None:
                self.finished.emit(request.generation, result)


class WorkerThread(QObject):
    """The QThread plus its worker, with submit() and a shutdown() that always leaves no thread running."""

    submit_signal = Signal(object)

    def __init__(self, parent=None) -> None:
        super().__init__(parent)
        self.thread = QThread()
        self.thread.setObjectName("scratchformer-model")
        self.worker = ModelWorker()
        self.worker.moveToThread(self.thread)
        self.submit_signal.connect(self.worker.run)
        self.generation = 0
        self.thread.start()

    def submit(self, **kwargs) -> int:
        """Queue a run; returns its generation. Older queued or running requests are superseded."""
        self.generation += 1
        self.worker.latest = self.generation
        self.submit_signal.emit(RunRequest(generation=self.generation, **kwargs))
        return self.generation

    def is_current(self, generation: int) -> bool:
        return generation == self.generation

    def shutdown(self, timeout_ms: int = 60_000) -> bool:
        """Supersede everything, stop the thread's event loop and wait for the work in progress to end."""
        self.generation += 1
        self.worker.latest = -1
        if self.thread.isRunning():
            self.thread.quit()
            return self.thread.wait(timeout_ms)
        return True
