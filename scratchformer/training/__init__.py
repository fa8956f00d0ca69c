"""Training (paper §5): teacher forcing under the causal mask, label-smoothed cross-entropy, Adam with warm-up.

Data comes from a built-in task (en-hi, copy, reverse, sort), a user's TSV of source/target pairs, or a plain
text file (next-token prediction). The best model by validation loss is saved as a checkpoint directory;
the full training state (model, Adam moments, step, random-number states) goes to `<out>/resume/`, all in
safetensors + JSON, so a run can be resumed and a fixed seed reproduces it.

Modules: formulas (the paper's learning-rate schedule and label-smoothed loss), data (examples, batches and
where they come from), options (what a run is asked to do and the model it builds), trainer (the Trainer,
its resume state, and the prepare / train driver), snapshots (which steps a run keeps with --snapshots N) and
distributed (torchrun's process group and DDP: one process's share of each batch); evaluation (test-split
figures of a trained model: exact-match accuracy and how well cross-attention aligns words). Import the names
from here.
"""

from .data import (
    Batch,
    Example,
    TrainData,
    collate,
    pair_data,
    task_splits,
    text_data,
    token_batches,
    tsv_splits,
)
from .distributed import Distributed, session
from .formulas import (
    IGNORE,
    label_smoothed_loss,
    noam_lr,
)
from .options import (
    TrainOptions,
    build_config,
    load_data,
)
from .snapshots import snapshot_steps
from .trainer import (
    OPTIMIZER_FILE,
    RESUME_DIR,
    STATE_FILE,
    EpochResult,
    Trainer,
    exact_match,
    prepare,
    resume_dir,
    resumed_options,
    train,
)

__all__ = [
    "Batch",
    "Distributed",
    "EpochResult",
    "Example",
    "IGNORE",
    "OPTIMIZER_FILE",
    "RESUME_DIR",
    "STATE_FILE",
    "TrainData",
    "TrainOptions",
    "Trainer",
    "build_config",
    "collate",
    "exact_match",
    "label_smoothed_loss",
    "load_data",
    "noam_lr",
    "pair_data",
    "prepare",
    "resume_dir",
    "resumed_options",
    "session",
    "snapshot_steps",
    "task_splits",
    "text_data",
    "token_batches",
    "train",
    "tsv_splits",
]
