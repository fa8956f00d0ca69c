"""Closing the window while a model trains: ask first, then keep it training, stop and save, or stay open.

"Keep training" lets the window close and leaves the training process running on its own (it saves the model
in its folder as it goes and when it ends, and writes its progress beside it, in <out>.training/progress.jsonl).
"Stop and save" asks the process to stop after its current step; the window closes once the model is saved, so
no run is cut off in the middle of writing a checkpoint.
"""

from __future__ import annotations

from PySide6.QtWidgets import QMessageBox

from .training_runner import TrainingRunner, log_folder

# What the question answers (QMessageBox's standard buttons, relabelled).
KEEP, STOP, STAY = (QMessageBox.StandardButton.Yes, QMessageBox.StandardButton.Save,
                    QMessageBox.StandardButton.Cancel)


def ask_about_closing(parent, runner: TrainingRunner) -> QMessageBox.StandardButton:
    """Keep training in the background, stop and save, or do not close."""
    request = runner.request
    where = request.out if request is not None else "its output folder"
    log = f"{log_folder(request.out) / 'progress.jsonl'}" if request is not None else "beside it"
    step = f"step {runner.step} of {runner.planned_steps}" if runner.planned_steps else "starting"
    box = QMessageBox(QMessageBox.Icon.Question, "Training in progress",
                      f"Training {request.label() if request else 'a model'} is still running ({step}).",
                      KEEP | STOP | STAY, parent)
    box.setInformativeText(f"Keep training in the background (it saves the model in {where} on its own and writes "
                           f"its progress to {log}), stop now and save what it has learnt, or don't close the "
                           "window?")
    box.button(KEEP).setText("Keep training")
    box.button(STOP).setText("Stop and save")
    box.button(STAY).setText("Don't close")
    box.setDefaultButton(STAY)
    answer = box.exec()
    box.deleteLater()
    return QMessageBox.StandardButton(answer)


def window_may_close(window) -> bool:
    """Asked by the window's closeEvent; also stops the Train… dialog's own work when the window does close."""
    runner: TrainingRunner | None = getattr(window, "training_runner", None)
    dialog = getattr(window, "train_dialog", None)
    if runner is not None and runner.is_running():
        if runner.stopping:  # stopping already: close when it has saved
            window.close_after_training = True
            return False
        answer = ask_about_closing(window, runner)
        if answer == STOP:
            window.close_after_training = True
            if dialog is not None:
                dialog.cancel()
            else:
                runner.stop()
            window.show_message("Stopping the training and saving; the window closes when the model is saved…")
            return False
        if answer != KEEP:  # STAY, or the question was dismissed
            return False
        runner.detach()  # the process trains on without the window
    if dialog is not None:
        dialog.shutdown()
        dialog.close()
    return True
