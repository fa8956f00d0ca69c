"""Between cells and derivations: a click on a cell of a step's map derives it; a derivation's input goes back
to its step with those cells outlined. Views call these with the window; nothing here runs the model."""

from __future__ import annotations


def view_of(window, cls_name: str):
    return next((v for v in window.views if type(v).__name__ == cls_name), None)


def derive_cell(window, step_name: str, index: tuple[int, ...]) -> bool:
    """Open 'How this number was made' on this cell of the current run (False when there is no such view)."""
    view = view_of(window, "DerivationView")
    if view is None or window.current_trace() is None:
        return False
    view.derive(step_name, tuple(int(i) for i in index))
    return True


def derive_from_map(window, heatmap, row: int, col: int) -> bool:
    """A click on (row, col) of a map drawn from one step (plotdata.step_heatmap marks it `cell_of`) derives
    that step's cell; other maps (mosaics, similarities, statistics) do nothing."""
    from scratchformer.plotdata.cells import cell_index

    trace = window.current_trace()
    if heatmap is None or row < 0 or col < 0 or trace is None or "cell_of" not in heatmap.extra:
        return False
    name, batch, head = heatmap.extra["cell_of"]
    step = trace.find(name)
    if step is None:
        return False
    n_batch = step.shape[0] if "batch" in step.dims else 1
    n_head = step.n_heads
    index = cell_index(step, min(batch, n_batch - 1), min(head, n_head - 1), row, col, heatmap.extra.get("vocab_ids"))
    return derive_cell(window, name, index)


def show_cells(window, step_name: str, cells: list[tuple[int, ...]]) -> bool:
    """Go to a step in the Step view, on the batch item and head of the first cell, with the cells outlined."""
    from scratchformer.plotdata.cells import map_cell

    trace, step_view = window.current_trace(), view_of(window, "StepView")
    step = trace.find(step_name) if trace is not None else None
    if step is None or step_view is None or not cells:
        return False
    batch, head, _ = map_cell(step, cells[0])
    same = [c for c in cells if map_cell(step, c)[:2] == (batch, head)]  # one map shows one item and head
    window.tabs.setCurrentWidget(step_view)
    step_view.highlight(step_name, same)
    window.set_batch(batch)
    window.go_to_step(step_name, head=head)
    window.show_message(f"{len(same)} cell{'s' if len(same) > 1 else ''} of {step_name} outlined; click one to "
                        "see how it was made.")  # fmt: skip
    return True
