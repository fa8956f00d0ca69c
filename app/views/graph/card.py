"""The Graph view's part for one selected node: a feature's card (every card of its transcoder made once, in a job,
and kept on disk) and any node's step in the trace (the Step view). A mixin of GraphView (app/views/graph/view.py):
its methods read the view's `built`, card widgets, card jobs and `main`."""

from __future__ import annotations

from scratchformer.errors import UserError

from ...export.actions import save_numbers
from .work import cards_of, feature_step


class GraphCardPart:
    """A feature's card and a node's step."""

    def corpus(self) -> str:
        """The corpus the cards read: the Features view's field when it names one, else the model's own task."""
        from scratchformer.features.activations import default_corpus

        from ..features_view import FeaturesView

        features = next((v for v in self.main.views if isinstance(v, FeaturesView)), None)
        typed = features.corpus_edit.text().strip() if features is not None else ""
        return typed or default_corpus(self.main.current_bundle().name) or ""

    def show_card(self) -> None:
        """The selected feature's card (every card of its transcoder is made once, in a job, and kept on disk)."""
        node, built = self.selected_node(), self.built
        if node is None or node.kind != "feature":
            self._say("Click a feature first: its card shows what it reads and writes.", error=True)
            return
        bundle, corpus = self.main.current_bundle(), self.corpus()
        key = (node.step, built.ask.choice, corpus)
        self._card_node = (node.step, node.feature)
        self.qk_panel.setVisible(False)  # the card or the QK panel takes the room below, not both
        self.details_scroll.setMaximumHeight(110)  # the card takes the room below
        if key in self._cards:
            self._draw_card(key)
            return
        self._card_jobs.start(lambda job: cards_of(bundle, built, node.step, corpus, job),
                              on_result=lambda cards: self._cards_made(key, cards), on_error=self._failed_card,
                              on_progress=self._progressed, doing="Making the feature cards")  # fmt: skip
        self._working(f"Making every card of the transcoder of {node.step} over {corpus} (once; they are kept beside "
                      "it)…")  # fmt: skip

    def _cards_made(self, key: tuple, cards) -> None:
        self._idle()
        if cards is None:
            return
        self._cards[key] = cards
        self._draw_card(key)

    def _failed_card(self, sentence: str) -> None:
        self._idle()
        self._say(sentence, error=True)

    def _draw_card(self, key: tuple) -> None:
        from scratchformer.plotdata.feature_cards import card_plot

        if self._card_node is None or self._card_node[0] != key[0]:
            return
        try:
            self.card.show_card(card_plot(self._cards[key], self._card_node[1]))
        except UserError as exc:
            self._say(str(exc), error=True)
            return
        self.card_scroll.setVisible(True)
        self._say(f"The card of feature {self._card_node[1]} of the transcoder of {key[0]}, over {key[2]}.")

    def node_step(self, node) -> str | None:
        """The trace step a node's numbers come from: a feature's features step (or the step its transcoder reads),
        an error's feed-forward output, an embedding's token + position as the layers read them (the last step of
        its side's embedding), the logit's logits; None when the run has no such step."""
        result = self.main.current_result()
        if node is None or result is None:
            return None
        if node.kind == "embedding":
            prefix = "src_embed." if node.side == "encoder" else "tgt_embed."
            names = [n for n in result.trace.names() if n.startswith(prefix)]
            return names[-1] if names else None
        if node.kind == "logit":
            return "generator.logits" if result.trace.find("generator.logits") is not None else None
        if not node.step:
            return None
        if node.kind == "feature":
            return feature_step(result.trace, result.bundle, node.step, self.built.ask.choice, self.main.dictionaries)
        return node.step

    def go_to_step(self) -> None:
        """Show the selected node's step in the Step view."""
        from ..step_view import StepView

        node = self.selected_node()
        step = self.node_step(node)
        if step is None:
            self._say("Click a node first: its step in the trace is where its numbers are.", error=True)
            return
        if not self.main.go_to_step(step):
            return
        view = next((v for v in self.main.views if isinstance(v, StepView)), None)
        if view is not None:
            self.main.tabs.setCurrentWidget(view)
        where = f"feature {node.feature}, position {node.position}" if node.kind == "feature" else \
            f"position {node.position}"  # fmt: skip
        self.main.show_message(f"{step}: the graph's {node.kind} node is {where} there.")

    def _export_card_dialog(self) -> None:
        from ...export.card_render import save_card

        if self.card.plot is None:
            return
        save_numbers(self.main, "Export the feature card", "feature-card.png", "PNG (*.png);;SVG (*.svg);;PDF (*.pdf)",
                     lambda path: save_card(self.card.plot, path), ("png", "svg", "pdf"))  # fmt: skip
