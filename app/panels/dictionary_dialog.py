"""Run › Train a dictionary…: a sparse dictionary (an SAE) of one step of the model now open, trained over a corpus
off the UI thread with progress and Cancel, written to a folder and attached to the run when it is done — what
`scratchformer features train` does on the command line (scratchformer.features.build)."""

from __future__ import annotations

import time
from pathlib import Path

from PySide6.QtWidgets import (
    QComboBox,
    QDialog,
    QDialogButtonBox,
    QFileDialog,
    QFormLayout,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QProgressBar,
    QPushButton,
    QSpinBox,
    QVBoxLayout,
)

from scratchformer.errors import UserError
from scratchformer.features.activations import corpus_texts, default_corpus
from scratchformer.features.build import Request, train_dictionary
from scratchformer.features.points import readable_steps
from scratchformer.features.training import TrainSettings

from ..widgets.memory_status import budget_bytes
from ..work.jobs import JobRunner


def default_folder(model: str, step: str) -> str:
    """~/.local/share/scratchformer/dictionaries/<model>-<step>-<time>: a new folder of the user's own."""
    stamp = time.strftime("%Y%m%d-%H%M%S")
    safe = model.replace("/", "_").replace("@", "_")
    return str(Path.home() / ".local" / "share" / "scratchformer" / "dictionaries" / f"{safe}-{step}-{stamp}")


class DictionaryDialog(QDialog):
    """The form, the progress and the outcome of training one dictionary on the window's model."""

    def __init__(self, window, bundle) -> None:
        super().__init__(window)
        self.setWindowTitle("Train a dictionary")
        self.window_, self.bundle = window, bundle
        self.jobs = JobRunner("scratchformer-dictionary", latest_only=True)
        self.folder: str | None = None
        self.figures: dict | None = None
        layout = QVBoxLayout(self)
        intro = QLabel("A sparse autoencoder of one step: each token's vector written as a few of many features. "
                       "When it is trained, it is attached to the run and the Features view reads it.")  # fmt: skip
        intro.setWordWrap(True)
        layout.addWidget(intro)
        form = QFormLayout()
        self.step = QComboBox()
        steps = [s for s in readable_steps(bundle.model) if s.endswith((".out", ".residual", ".norm", ".sum"))]
        self.step.addItems(steps)
        last = next((s for s in reversed(steps) if s.startswith("decoder") and "add_norm" in s), steps[-1])
        self.step.setCurrentText(last)
        form.addRow("Step", self.step)
        self.corpus = QLineEdit(default_corpus(bundle.name) or "")
        self.corpus.setPlaceholderText("task:NAME, or a text / JSONL / CSV file")
        form.addRow("Corpus", self.corpus)
        self.width_box = QSpinBox()
        self.width_box.setRange(8, 65536)
        self.width_box.setValue(512)
        form.addRow("Features", self.width_box)
        self.k_box = QSpinBox()
        self.k_box.setRange(1, 256)
        self.k_box.setValue(8)
        form.addRow("Active per token (k)", self.k_box)
        self.tokens_box = QSpinBox()
        self.tokens_box.setRange(100, 10_000_000)
        self.tokens_box.setSingleStep(10_000)
        self.tokens_box.setValue(200_000)
        form.addRow("Tokens read, at most", self.tokens_box)
        where = QHBoxLayout()
        self.out = QLineEdit(default_folder(bundle.name, last))
        pick = QPushButton("…")
        pick.clicked.connect(self._pick_folder)
        where.addWidget(self.out, 1)
        where.addWidget(pick)
        form.addRow("Folder", where)
        self._default_out = self.out.text()
        self.step.currentTextChanged.connect(self._step_changed)
        layout.addLayout(form)
        self.progress = QProgressBar()
        self.progress.setVisible(False)
        layout.addWidget(self.progress)
        self.status = QLabel("")
        self.status.setWordWrap(True)
        layout.addWidget(self.status)
        self.buttons = QDialogButtonBox()
        self.train_button = self.buttons.addButton("Train", QDialogButtonBox.ButtonRole.AcceptRole)
        self.cancel_button = self.buttons.addButton("Cancel training", QDialogButtonBox.ButtonRole.ActionRole)
        self.cancel_button.setVisible(False)
        self.close_button = self.buttons.addButton(QDialogButtonBox.StandardButton.Close)
        self.train_button.clicked.connect(self.train)
        self.cancel_button.clicked.connect(self.cancel)
        self.close_button.clicked.connect(self.reject)
        layout.addWidget(self.buttons)
        self.resize(560, self.sizeHint().height())

    def _step_changed(self, step: str) -> None:
        """A folder named after the step follows the step, unless the user typed or picked another."""
        if self.out.text() == self._default_out:
            self._default_out = default_folder(self.bundle.name, step)
            self.out.setText(self._default_out)

    def _pick_folder(self) -> None:
        folder = QFileDialog.getExistingDirectory(self, "Where to write the dictionary")
        if folder:
            self.out.setText(str(Path(folder) / f"{self.bundle.name}-{self.step.currentText()}"))

    def _say(self, text: str, error: bool = False) -> None:
        self.status.setStyleSheet("color: #b00020; font-weight: bold;" if error else "")
        self.status.setText(text)

    def train(self) -> None:
        """Start training (in the background); the form's mistakes are one sentence here."""
        corpus, out = self.corpus.text().strip(), self.out.text().strip()
        if not corpus:
            self._say("Name a corpus: task:NAME, or a text, JSONL or CSV file with one input a line.", error=True)
            return
        if not out:
            self._say("Name the folder to write the dictionary to.", error=True)
            return
        req = Request(self.step.currentText(), None, "sae", None, self.width_box.value(), self.k_box.value(),
                      self.tokens_box.value())  # fmt: skip
        bundle, budget = self.bundle, budget_bytes(self.window_.settings)
        self.folder = out

        def work(job):
            texts = corpus_texts(corpus)
            return train_dictionary(bundle, req, texts, out, TrainSettings(), budget,
                                    progress=lambda what, a, b: job.progress(what, a, b), cancelled=job.cancelled)

        self.jobs.start(work, on_result=self._done, on_error=lambda s: self._failed(s),
                        on_progress=self._progressed, doing="Training the dictionary")  # fmt: skip
        self.progress.setVisible(True)
        self.progress.setRange(0, 0)
        self.train_button.setEnabled(False)
        self.cancel_button.setVisible(True)
        self._say(f"Reading the activations of {req.at} over {corpus}…")

    def _progressed(self, what: str, done: int, total: int) -> None:
        self.progress.setRange(0, max(total, 1))
        self.progress.setValue(done)
        self.progress.setFormat(f"{what}: %v of %m")

    def _idle(self) -> None:
        self.progress.setVisible(False)
        self.cancel_button.setVisible(False)
        self.train_button.setEnabled(True)

    def cancel(self) -> None:
        """Stop training: what was learned so far stays in the folder (it is written as training stops)."""
        if self.jobs.busy():
            self.jobs.cancel()
        self._idle()
        self._say(f"Cancelled; nothing is attached. If training had begun, what it learned is written to "
                  f"{self.folder} as it stops (its last checkpoint); Run › Attach dictionary… opens it.")

    def _failed(self, sentence: str) -> None:
        self._idle()
        self._say(sentence, error=True)

    def _done(self, figures: dict | None) -> None:
        self._idle()
        if figures is None:
            return
        self.figures = figures
        ce = figures.get("ce_recovered")
        ce_text = "n/a" if ce is None else f"{ce:.1%}"
        self._say(f"Trained in {figures['seconds']:.1f} s on {figures['tokens']} tokens: FVU {figures['fvu']:.3f}, "
                  f"L0 {figures['l0']:.1f}, {figures['dead']} dead, CE loss recovered {ce_text}. Written to "
                  f"{self.folder} and attached to the run.")  # fmt: skip
        self.window_.attach_dictionary(self.folder)

    def reject(self) -> None:
        if self.jobs.busy():
            self.cancel()
        super().reject()


def open_dictionary_dialog(window) -> DictionaryDialog | None:
    """Run › Train a dictionary…: the dialog for the model of the current run (None, said, without one)."""
    result = window.current_result()
    if result is None:
        window.show_message("Run a model first: a dictionary is trained on the model of the current run.")
        return None
    try:
        dialog = DictionaryDialog(window, result.bundle)
    except UserError as exc:
        window.show_message(str(exc))
        return None
    dialog.show()
    return dialog
