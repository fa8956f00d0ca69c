"""Plot data: pure functions from trace steps to what a heatmap shows (numpy + labels + levels).

The window (app/) and every exporter draw from these objects and nothing else, so what is exported is exactly
what is shown: same numbers, colour map, levels, labels and title.

One module per view: heatmap (one step, per-head grids), reduction (fewer cells than pixels on screen), stats,
blocks (the architecture diagram), positional, masks, overview (layers × heads), output (top-k) and norms
(LayerNorm vs BatchNorm). Import the names from here: `from scratchformer.plotdata import step_heatmap`.
"""

from .blocks import (
    EMBEDDING_KINDS,
    Block,
    architecture,
    block_key,
    block_steps,
)
from .compare import ChangedRow, Comparison, compare_step, first_changed_step, top_k_changes  # noqa: F401
from .decoding import timeline_heatmap
from .heatmap import (
    DIVERGING,
    MASK,
    PROBABILITY_KINDS,
    SEQUENTIAL,
    VOCAB_COLUMNS,
    Heatmap,
    VocabLabels,
    abbreviate,
    axis_labels,
    format_value,
    head_count,
    heads_grid,
    levels_for,
    matrix_of,
    step_heatmap,
    top_columns,
)
from .importance import importance_heatmaps, importance_step  # noqa: F401
from .masks import (
    ATTENTION_TITLES,
    attention_types,
    before_after_softmax,
    mask_heatmaps,
    mask_step,
)
from .norms import (
    NormComparison,
    layer_norm_input,
    layer_norm_step_near,
    layer_norm_steps,
    norm_comparison,
)
from .output import (
    TopKRow,
    top_k_table,
)
from .overview import (
    overview_cell,
    overview_mosaic,
    overview_tick_positions,
)
from .positional import (
    Curve,
    default_pe_dims,
    pe_curves,
    pe_similarity,
    pe_wavelength_heatmap,
    pe_wavelengths,
    positional_heatmap,
)
from .reduction import (
    EXTREME,
    MAX,
    block_reduce,
    display_blocks,
    display_reduction,
)
from .stats import (
    TensorStats,
    tensor_stats,
)
from .training import (  # noqa: F401 (exported; __all__ lists the older names)
    TrainingCurves,
    aligned_head,
    alignment_scores,
    guided_head,
    head_labels,
    shared_decoder_input,
    snapshot_heatmap,
    training_curves,
    training_record,
)

__all__ = [
    "ATTENTION_TITLES",
    "Block",
    "Curve",
    "DIVERGING",
    "EMBEDDING_KINDS",
    "EXTREME",
    "Heatmap",
    "MASK",
    "MAX",
    "NormComparison",
    "PROBABILITY_KINDS",
    "SEQUENTIAL",
    "TensorStats",
    "TopKRow",
    "VOCAB_COLUMNS",
    "VocabLabels",
    "abbreviate",
    "architecture",
    "attention_types",
    "axis_labels",
    "before_after_softmax",
    "block_key",
    "block_reduce",
    "block_steps",
    "default_pe_dims",
    "display_blocks",
    "display_reduction",
    "format_value",
    "head_count",
    "heads_grid",
    "layer_norm_input",
    "layer_norm_step_near",
    "layer_norm_steps",
    "levels_for",
    "mask_heatmaps",
    "mask_step",
    "matrix_of",
    "norm_comparison",
    "overview_cell",
    "overview_mosaic",
    "overview_tick_positions",
    "pe_curves",
    "pe_similarity",
    "pe_wavelength_heatmap",
    "pe_wavelengths",
    "positional_heatmap",
    "step_heatmap",
    "tensor_stats",
    "top_columns",
    "timeline_heatmap",
    "top_k_table",
]
