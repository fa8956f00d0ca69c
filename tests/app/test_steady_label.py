"""SteadyLabel (app/widgets/steady_label.py): a new text re-lays out nothing around it unless it needs another
height, and a long title still wraps and shows whole."""

from __future__ import annotations

from PySide6.QtWidgets import QApplication, QLabel, QVBoxLayout, QWidget

from app.widgets.steady_label import SteadyLabel
from tests.app.conftest import LayoutRequests


def host(qtbot, label: QWidget) -> QWidget:
    parent = QWidget()
    qtbot.addWidget(parent)
    layout = QVBoxLayout(parent)
    layout.addWidget(label)
    layout.addWidget(QWidget(), 1)
    parent.resize(300, 200)
    parent.show()
    qtbot.waitExposed(parent)
    QApplication.processEvents()
    return parent


def test_a_new_text_of_the_same_height_lays_out_nothing_around_it(qtbot):
    label = SteadyLabel("Encoder 1 › Self-attention › scores")
    parent = host(qtbot, label)
    requests = LayoutRequests(parent)
    for text in ("Encoder 1 › Self-attention › weights", "8 × 512 × 512", "Decoder 2 › FFN › hidden"):
        label.setText(text)
        QApplication.processEvents()
        assert label.text() == text and label.label.text() == text
    assert requests.count == 0

    plain = QLabel("Encoder 1 › Self-attention › scores")  # what a QLabel does: each text re-lays out its parent
    plain_parent = host(qtbot, plain)
    plain_requests = LayoutRequests(plain_parent)
    plain.setText("8 × 512 × 512")
    QApplication.processEvents()
    assert plain_requests.count > 0


def test_a_long_title_wraps_and_the_label_grows_to_show_it_whole(qtbot):
    label = SteadyLabel("short", word_wrap=True)
    parent = host(qtbot, label)  # noqa: F841 (keeps the label alive)
    one_line = label.height()
    long = " ".join(["a long title that needs more than one line in a narrow panel"] * 3)
    label.setText(long)
    QApplication.processEvents()
    assert label.height() > one_line
    assert label.label.geometry().height() >= label.label.heightForWidth(label.width())
    label.setText("short")
    QApplication.processEvents()
    assert label.height() == one_line
