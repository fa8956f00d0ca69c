"""Attribution graphs of one prediction through transcoder features (Ameisen et al. 2025; issue 45).

transcoders.py   the transcoder set: one transcoder per feed-forward, checked against the model
replacement.py   the local replacement model of one run: attention patterns and norm scales frozen, each
                 feed-forward replaced by its transcoder plus an error term; linear in its nodes
attribution.py   the nodes and the direct effects between them (the adjacency), with each target's bias
influence.py     influence on the logit, pruning, the replacement and completeness scores, total effects
build.py         model + input → the graph (`build_graph`), and the JSON `scratchformer graph` prints
report.py        the readable summary

from scratchformer.graph import build_graph
result = build_graph(bundle, bundle.prepare_run("the girl eats an apple"))   # en-hi's bundled transcoders
result.to_dict()       # what `scratchformer graph --json` prints
"""

from .build import GraphResult, build_graph

__all__ = ["GraphResult", "build_graph"]
