"""Changing the forward pass on purpose: interventions (interventions.py: ablate, scale, replace a head or a step),
head importance (head_importance.py: the confidence lost when one head is zeroed), and activation patching over a
whole grid of components, fast: which heads, positions and feed-forwards carry a behaviour, and through which
paths.

A clean input and a corrupted one of the same token length give two runs. Each component's activation is copied
from the clean run into the corrupted one, and the metric (metric.py: a logit difference, or a log-probability)
says how much of the clean answer comes back:

    effect = (m_patched − m_corrupt) / (m_clean − m_corrupt)      1: fully restored, 0: nothing

- pair.py      the two runs: their recorded activations, the metric's m_clean and m_corrupt
- components.py the grid: each head's output before W^O (TransformerLens's hook_z) of every attention type,
               every residual-stream point, every feed-forward output; all positions or one
- batched.py   exact patching, many patched runs in one forward pass that starts at the patched layer on the
               corrupted run's stored activations (and, in a causal decoder, at the first position that changes,
               on the corrupted run's keys and values); `one_at_a_time` is the reference it must equal
- attribution.py attribution patching (Nanda 2023): gradient × (clean − corrupt) from one backward pass
- paths.py     path patching (Wang et al. 2022): a sender head's change carried only into one receiver's q, k or v

Everything acts through interventions (interventions.py: StepEdit, Patch, head changes) that live in a context
variable, so a sweep changes only its own passes, never the model the window is showing.
"""
