"""The window's views, grouped: the one place that says which views exist, in which group and in which order.

The window shows one top-level tab per group and, inside it, one tab per view; the View menu lists the same
groups (Ctrl+1 … Ctrl+7) and views. A new view is one line: add its class to its group's list below, e.g.
`("Attention", [OverviewView, NeuronView]),`. Keep at most seven groups, so the group tabs fit a 1024 px window.
The flat list of views (VIEWS, and window.views / window.tabs indices) is the groups read in order.
"""

from __future__ import annotations

from .attribution_view import AttributionView
from .base import View
from .compare_view import CompareView
from .decoding_view import DecodingView
from .derivation_view import DerivationView
from .experiments_view import ExperimentsView
from .features_view import FeaturesView
from .graph.view import GraphView
from .heads_view import HeadsView
from .importance_view import ImportanceView
from .lens_view import LensView
from .lessons_view import LessonsView
from .masks_view import MasksView
from .neuron_view import NeuronView
from .norm_view import NormView
from .output_view import OutputView
from .overview_view import OverviewView
from .patching_view import PatchingView
from .pe_view import PositionalView
from .rollout_view import RolloutView
from .rotary_view import RotaryView
from .step_view import StepView
from .training_view import TrainingView
from .trajectory_view import TrajectoryView
from .weighted_sum_view import WeightedSumView

# (group title, its views in tab order). One line per group; a new view is one more class in a list.
GROUPS: list[tuple[str, list[type[View]]]] = [
    ("Step", [StepView, HeadsView, DerivationView]),
    ("Encoding", [PositionalView, RotaryView, MasksView, NormView]),
    ("Attention", [OverviewView, NeuronView, WeightedSumView, RolloutView]),
    ("Output", [OutputView, DecodingView, LensView, TrajectoryView, AttributionView]),
    ("What if", [CompareView, ImportanceView, PatchingView, ExperimentsView, FeaturesView, GraphView]),
    ("Training", [TrainingView]),
    ("Learn", [LessonsView]),  # the guided lessons; a lesson's pages show in a dock (app/lessons/lesson_panel.py)
]

MAX_GROUPS = 7  # Ctrl+1 … Ctrl+7, and what fits a 1024 px tab bar


def flat_views(groups: list[tuple[str, list[type[View]]]] | None = None) -> list[type[View]]:
    """Every view class in group order: the window's flat view list (its tab indices, the saved "tab")."""
    return [cls for _title, classes in (GROUPS if groups is None else groups) for cls in classes]
