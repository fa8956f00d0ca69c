"""The Graph view's part that asks why attention moved it: Why attention? opens the QK panel (qk_panel.py)
aimed at the selection — an edge that crosses positions: its target's position as the query and its source's as
the key, in the attention just below its target; a node: its position as the query and the key the head attends to
most — and splits that head's score in a job (work.qk_split), never on the UI thread. The replacement model
the split reads is made again once per graph and kept for the next split. A head the core refuses (a soft-capped
score, QK-norm) is its one sentence in the status line. A mixin of GraphView (app/views/graph/view.py)."""

from __future__ import annotations

import json

from PySide6.QtWidgets import QApplication

from scratchformer.exporting.files import atomic_write_bytes, write_csv

from ...export.actions import save_numbers
from .qk_panel import Attention
from .work import QKMade, qk_split

QK_HEIGHT = 380  # pixels the panel (with the selection's text) gets below the plot when it opens in a smaller room
PLOT_KEEPS = 200  # and the pixels the plot keeps at least
DETAILS_HEIGHT = 48  # the selection's text above it: about two lines, scrolled


def _named(attentions: list[Attention], side: str, layer: int, cross: bool) -> str | None:
    """The attention of `side` at `layer` (or the nearest one below it, else the lowest) of that kind, or None."""
    kind = "cross_attn" if cross else "self_attn"
    layers = sorted(int(a.name.split(".")[1]) for a in attentions if a.query_side == side and a.name.endswith(kind))
    if not layers:
        return None
    below = [k for k in layers if k <= layer]
    return f"{side}.{below[-1] if below else layers[0]}.{kind}"


def aim_at(attentions: list[Attention], position: int, source=None, target=None, node=None):
    """(attention, head, query, key) the panel opens at (head and key None: the strongest, the most attended).
    An edge source → target (graph nodes): the attention of the target's layer, a cross-attention when the edge goes
    from the encoder to the decoder, with the target's position as the query and the source's as the key. A node:
    its layer's self-attention, its position as the query. Nothing: the last decoder layer's cross-attention (or
    self-attention) at the explained `position`."""
    if source is not None and target is not None:
        name = _named(attentions, target.side, target.layer, source.side != target.side)
        if name is not None:
            return name, None, target.position, source.position
    if node is not None:
        name = _named(attentions, node.side, max(node.layer, 0), False)
        if name is not None:
            return name, None, node.position, None
    last = 1 << 30  # the highest layer there is
    name = _named(attentions, "decoder", last, True) or _named(attentions, "decoder", last, False)
    name = name or attentions[0].name
    return name, None, position if name.startswith("decoder") else 0, None


class GraphQKPart:
    """Why attention moved it: the QK panel's defaults, its job, its node clicks and its exports."""

    def why_attention(self) -> None:
        """Open the QK panel aimed at the selection and split the score there."""
        if self.built is None or not self.qk_panel.attentions:
            self._say("Build a graph first: the split reads the nodes of the graph shown.", error=True)
            return
        edge = self.selected_edge_nodes()
        source, target = edge if edge is not None else (None, None)
        g = self.built.result.graph
        self.qk_panel.aim(*aim_at(self.qk_panel.attentions, g.position, source, target, self.selected_node()))
        self._show_qk(True)
        self.split_qk()

    def split_qk(self) -> None:
        """Split the score the panel names, in a job (the latest request only)."""
        built, ask = self.built, self.qk_panel.ask()
        if built is None or ask is None or self._closing:
            return
        kept = self._qk_replacement
        replacement = kept[1] if kept is not None and kept[0] is built.result else None
        self._qk_jobs.start(lambda job: qk_split(built, replacement, ask, job), on_result=self._qk_made,
                            on_error=self._qk_failed, on_progress=self._progressed,
                            doing="Splitting the attention score")  # fmt: skip
        again = " (the replacement model is made again first, once for this graph)" if replacement is None else ""
        self._working(f"Splitting the score of {ask.attention} at query {ask.query}{again}…")

    def _qk_made(self, made: QKMade | None) -> None:
        self._idle()
        if made is None or self._closing or self.built is None or made.result is not self.built.result:
            return
        self._qk_replacement = (made.result, made.replacement)
        self.qk_panel.show_made(made)
        s = made.split
        self._say(f"{s.attention} head {s.head}'s score at query {s.query} against key {s.key}, split into what the "
                  "graph's nodes put into its query and its key (below); click a node in the table to select it.")

    def _qk_failed(self, sentence: str) -> None:
        self._idle()
        self.qk_panel.clear()
        self._say(sentence, error=True)

    def _show_qk(self, shown: bool) -> None:
        """The panel below the plot (the card gives it the room), or hidden."""
        if shown:
            self.card_scroll.setVisible(False)
            self.details_scroll.setMaximumHeight(DETAILS_HEIGHT)
            sizes = self.split.sizes()
            below = min(QK_HEIGHT, sum(sizes) - PLOT_KEEPS)
            if len(sizes) == 2 and sizes[1] < below:
                self.split.setSizes([sum(sizes) - below, below])
        elif not self.card_scroll.isVisible():
            self.details_scroll.setMaximumHeight(16_777_215)  # (Qt's largest): the text has the room again
        self.qk_panel.setVisible(shown)

    def forget_qk(self) -> None:
        """A new graph, or none: the kept replacement model goes, the panel empties and closes."""
        self._qk_jobs.cancel()
        self._qk_replacement = None
        self.qk_panel.clear()
        self._show_qk(False)

    def pick_node(self, node_id: str) -> None:
        """Select the drawn node that shows graph node `node_id` (itself, or the supernode it is in)."""
        built = self.built
        if built is None:
            return
        lay, nodes = built.layout, built.result.graph.nodes
        index = next((j for j, n in enumerate(nodes) if n.id == node_id), None)
        drawn = next((i for i, members in enumerate(lay.members) if index in members), None)
        if drawn is None:
            self._say(f"{node_id} is pruned away at these thresholds: raise Nodes (or Edges) to draw it.", error=True)
            return
        self.select([drawn])

    def _export_qk(self, kind: str) -> None:
        panel = self.qk_panel
        if panel.made is None:
            return
        s = panel.made.split
        stem = f"qk-{s.attention}-head{s.head}-{s.query}-{s.key}"
        if kind == "copy":
            QApplication.clipboard().setText(panel.csv_text())
            self._say("Copied the table as CSV.")
        elif kind == "csv":
            save_numbers(self.main, "Export the split as CSV", f"{stem}.csv", "CSV (*.csv)",
                         lambda path: write_csv(path, panel.csv_text()), ("csv",))  # fmt: skip
        else:
            text = json.dumps(panel.payload(), ensure_ascii=False) + "\n"
            save_numbers(self.main, "Export the split as JSON", f"{stem}.json", "JSON (*.json)",
                         lambda path: atomic_write_bytes(path, text.encode("utf-8"), overwrite=True),
                         ("json",))  # fmt: skip
