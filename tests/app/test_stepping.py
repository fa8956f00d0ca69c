"""Stepping through a whole walkthrough with the buttons, keys, slider and detail switch."""

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QApplication

from scratchformer.plotdata import block_key


def test_buttons_walk_every_step_forward_and_back(qtbot, ran_window):
    w = ran_window
    w.set_detail("all")
    trace = w.current_trace()
    w.first_step()
    assert w.current_step().index == 0
    seen = [0]
    while w.next_button.isEnabled():
        qtbot.mouseClick(w.next_button, Qt.MouseButton.LeftButton)
        seen.append(w.current_step().index)
    assert seen == list(range(len(trace)))
    assert w.current_step().name == "generator.probs"
    assert w.crumb.text() == "Output › Output probabilities"
    qtbot.mouseClick(w.prev_button, Qt.MouseButton.LeftButton)
    assert w.current_step().name == "generator.logits"
    qtbot.mouseClick(w.first_button, Qt.MouseButton.LeftButton)
    assert w.current_step().index == 0 and not w.prev_button.isEnabled()
    qtbot.mouseClick(w.last_button, Qt.MouseButton.LeftButton)
    assert w.current_step().index == len(trace) - 1


def test_arrow_keys_step_but_not_while_typing(qtbot, ran_window):
    w = ran_window
    w.set_detail("all")
    w.first_step()
    # the keys are window shortcuts, which Qt matches in the active window only: a user types into the window in
    # front; on a loaded machine the window can still be waiting to be activated here
    w.activateWindow()
    qtbot.waitUntil(lambda: QApplication.activeWindow() is w, timeout=10_000)
    w.tabs.setFocus()
    qtbot.keyClick(w.tabs, Qt.Key.Key_Right)
    qtbot.keyClick(w.tabs, Qt.Key.Key_Right)
    assert w.current_step().index == 2
    qtbot.keyClick(w.tabs, Qt.Key.Key_Left)
    assert w.current_step().index == 1
    qtbot.keyClick(w.tabs, Qt.Key.Key_End)
    assert w.current_step().index == len(w.current_trace()) - 1
    qtbot.keyClick(w.tabs, Qt.Key.Key_Home)
    assert w.current_step().index == 0
    w.source_edit.setFocus()
    w.source_edit.setCursorPosition(0)
    qtbot.keyClick(w.source_edit, Qt.Key.Key_Right)
    assert w.current_step().index == 0  # the cursor moved, not the walkthrough
    assert w.source_edit.cursorPosition() == 1


def test_sublayers_only_visits_major_steps(qtbot, ran_window):
    w = ran_window
    w.set_detail("major")
    trace = w.current_trace()
    major = [s.index for s in trace if s.major]
    assert w.visible_steps() == major
    w.first_step()
    names = [w.current_step().name]
    while w.next_button.isEnabled():
        w.next_step()
        names.append(w.current_step().name)
    assert names == [trace[i].name for i in major]
    assert "encoder.0.self_attn.weights" in names and "encoder.0.self_attn.q" not in names
    assert w.slider.maximum() == len(major) - 1


def test_slider_moves_to_that_step(ran_window):
    w = ran_window
    w.set_detail("all")
    w.slider.setValue(10)
    assert w.current_step().index == 10
    assert w.counter.text() == f"11 / {len(w.current_trace())}"


def test_play_advances_and_stops_at_the_end(qtbot, ran_window):
    w = ran_window
    w.set_detail("major")
    w.speed_combo.setCurrentIndex(0)
    w.last_step()
    w.previous_step()
    w.toggle_play()
    assert w.play_timer.isActive()
    qtbot.waitUntil(lambda: not w.play_timer.isActive(), timeout=5000)
    assert w.current_step().name == "generator.probs"


def test_clicking_a_diagram_block_jumps_there(qtbot, ran_window):
    w = ran_window
    w.set_detail("major")
    pos = w.diagram.block_center("decoder.0.cross_attn")
    qtbot.mouseClick(w.diagram.viewport(), Qt.MouseButton.LeftButton, pos=pos)
    step = w.current_step()
    assert block_key(step) == "decoder.0.cross_attn"
    assert step.name == "decoder.0.cross_attn.weights"  # the block's first step shown in "sublayers only"
    assert w.diagram.current_key == "decoder.0.cross_attn"
    w.set_detail("all")
    pos = w.diagram.block_center("encoder.0.ffn")
    qtbot.mouseClick(w.diagram.viewport(), Qt.MouseButton.LeftButton, pos=pos)
    assert w.current_step().name == "encoder.0.ffn.hidden"


def test_diagram_shows_live_shapes(ran_window):
    w = ran_window
    items = w.diagram.items_by_key
    assert items["encoder.0.self_attn"].shape_text.text() == "1 × 6 × 6"
    assert items["decoder.0.cross_attn"].shape_text.text() == "1 × 3 × 6"
    assert items["generator.softmax"].shape_text.text() == "1 × 3 × 50257"


def test_step_option_names_a_step(ran_window):
    w = ran_window
    assert w.go_to_step("decoder.0.self_attn.mask")
    assert w.current_step().name == "decoder.0.self_attn.mask"
    assert not w.go_to_step("decoder.9.nothing")
    assert "no step named" in w.message_text()


def test_space_plays_but_presses_a_focused_button(qtbot, ran_window):
    w = ran_window
    w.set_detail("all")
    w.first_step()
    w.tabs.setFocus()
    qtbot.keyClick(w.tabs, Qt.Key.Key_Space)
    assert w.play_timer.isActive()  # Space plays
    qtbot.keyClick(w.tabs, Qt.Key.Key_Space)
    assert not w.play_timer.isActive()  # and pauses
    w.first_step()
    w.next_button.setFocus()
    qtbot.keyClick(w.next_button, Qt.Key.Key_Space)
    qtbot.waitUntil(lambda: w.current_step().index == 1, timeout=2000)  # the focused button was pressed
    assert not w.play_timer.isActive()


def test_a_new_runs_diagram_comes_on_the_turn_after_its_first_step_with_the_step_marked(qtbot, make_window):
    """The first step is drawn as the run arrives; the diagram's blocks and shapes follow on the next turn of the
    event loop (the window counts as drawing until then), the current block marked."""
    w = make_window()
    w.run()
    qtbot.waitUntil(lambda: not w.is_busy(), timeout=60_000)
    w.set_model("en-hi")
    w.source_edit.setText("the girl eats an apple")
    w.run()
    qtbot.waitUntil(lambda: not w.busy.isVisible(), timeout=60_000)
    assert w.current_step() is not None
    qtbot.waitUntil(lambda: not w.is_drawing(), timeout=60_000)
    step = w.current_step()
    assert w.diagram.current_key == block_key(step)
    assert "decoder.0.cross_attn" in w.diagram.items_by_key  # en-hi's architecture, not the blog model's
    assert w.diagram.items_by_key["decoder.0.cross_attn"].shape_text.text()
