"""The window's menu bar (File, Run, View, Help) with its shortcuts, and the About and shortcuts dialogs."""

from __future__ import annotations

import html

from PySide6.QtCore import Qt
from PySide6.QtGui import QAction, QActionGroup, QKeySequence
from PySide6.QtWidgets import QMessageBox

EXPORT_MENU = (
    ("Current view as PNG…", "view_png", "Ctrl+E"),
    ("Current view as SVG…", "view_svg", ""),
    ("Current view as PDF…", "view_pdf", ""),
    ("All attention maps…", "all_attention", ""),
    ("Current tensor…", "tensor_current", ""),
    ("All tensors…", "tensors_all", ""),
    ("Interactive page…", "page", ""),  # one self-contained HTML file of the whole run (app/export/page_export.py)
    ("Copy current view to clipboard", "clipboard", "Ctrl+Shift+C"),
)


def add_action(window, menu, text: str, slot, shortcut=None) -> QAction:
    action = QAction(text, window)
    if shortcut:
        action.setShortcut(QKeySequence(shortcut))
    action.triggered.connect(lambda _checked=False: slot())
    menu.addAction(action)
    return action


def open_train_dialog(window) -> None:
    """File › Train…: the dialog that trains a model in a separate process (app/training/train_dialog.py)."""
    from ..training.train_dialog import open_train_dialog as show

    show(window)


def open_lesson_dialog(window) -> None:
    """File › Open lesson…: a lesson file from anywhere, shown in the lesson dock (a bad one: one sentence)."""
    from ..lessons.lesson_panel import open_lesson_dialog as show

    show(window)


GROUP_KEY = "Ctrl+{}"  # Ctrl+1 … Ctrl+7: a group of views (at the view last used in it)
VIEW_KEY = "Alt+{}"  # Alt+1 … Alt+9: the n-th view of the group shown
NEXT_VIEW_KEYS = ("Ctrl+PgDown", "Ctrl+PgUp")  # the next / previous view, across groups


def build_view_entries(window, menu) -> None:
    """The View menu's list of groups and views: each group (Ctrl+n) followed by its views (Alt+n once the group
    is shown; the one shown is ticked), then next / previous view. Sets window.group_actions (one per group) and
    window.view_actions (one per view, in the flat order of window.views)."""
    w, tabs = window, window.tabs
    w.group_actions, w.view_actions = [], []
    ticks = QActionGroup(menu)  # one view is shown at a time: drawn as a radio list
    for g in range(tabs.group_count()):
        menu.addSeparator()
        title = tabs.groups.tabText(g)
        key = GROUP_KEY.format(g + 1) if g < 9 else None
        group_action = add_action(w, menu, title, lambda g=g: tabs.set_group(g), key)
        font = group_action.font()
        font.setBold(True)
        group_action.setFont(font)
        group_action.setToolTip(f"Show the {title} group ({key})" if key else f"Show the {title} group")
        w.group_actions.append(group_action)
        for n, i in enumerate(tabs.views_of(g)):
            hint = f"\t{VIEW_KEY.format(n + 1)}" if n < 9 else ""  # the key shown; the Alt+n actions below act
            action = add_action(w, menu, f"    {tabs.tabText(i)}{hint}", lambda i=i: tabs.setCurrentIndex(i))
            action.setCheckable(True)
            action.setToolTip(tabs.tabToolTip(i))
            ticks.addAction(action)
            w.view_actions.append(action)
    menu.addSeparator()
    for n in range(9):  # window-wide, not in the menu: the n-th view of the group shown
        nth = QAction(f"View {n + 1} of the group", w)
        nth.setShortcut(QKeySequence(VIEW_KEY.format(n + 1)))
        nth.triggered.connect(lambda _checked=False, n=n: tabs.show_nth_of_group(n))
        w.addAction(nth)
    add_action(w, menu, "Ne&xt view", lambda: tabs.step(1), NEXT_VIEW_KEYS[0])
    add_action(w, menu, "Pre&vious view", lambda: tabs.step(-1), NEXT_VIEW_KEYS[1])

    def tick(index: int) -> None:
        if 0 <= index < len(w.view_actions):
            w.view_actions[index].setChecked(True)

    tabs.currentChanged.connect(tick)
    tick(tabs.currentIndex())


def fill_cache_menu(window, menu) -> None:
    """The models of supported families in the local Hugging Face cache, read when the menu opens (a folder scan,
    no network); choosing one opens it by its id."""
    from scratchformer.loading.hf_cache import cached_models, hub_cache

    menu.clear()
    models = cached_models()
    for m in models:
        add_action(window, menu, f"{m.repo_id}  ({m.model_type})", lambda _=False, i=m.repo_id: window.open_model(i))
    if not models:
        none = menu.addAction(f"No cached models of a supported family in {hub_cache()}")
        none.setEnabled(False)


def build_menus(window) -> dict[str, QAction]:
    """Fill the window's menu bar; returns the export actions by kind (enabled only once there is a run)."""
    w = window
    mb = w.menuBar()
    file_menu = mb.addMenu("&File")
    add_action(w, file_menu, "Open &text…", lambda: w.open_text_dialog(), QKeySequence.StandardKey.Open)
    add_action(w, file_menu, "Open &model…", lambda: w.open_model_dialog(), "Ctrl+Shift+O")
    cached = file_menu.addMenu("Open from the Hugging Face &cache")
    cached.setObjectName("hf_cache_menu")
    cached.aboutToShow.connect(lambda: fill_cache_menu(w, cached))
    add_action(w, file_menu, "&Train…", lambda: open_train_dialog(w), "Ctrl+Shift+T")
    add_action(w, file_menu, "Open &lesson…", lambda: open_lesson_dialog(w))  # app/lessons/lesson_panel.py
    export = file_menu.addMenu("&Export")
    export_actions: dict[str, QAction] = {}
    for text, kind, key in EXPORT_MENU:
        export_actions[kind] = add_action(w, export, text, lambda k=kind: w.request_export(k), key or None)
    file_menu.addSeparator()
    add_action(w, file_menu, "&Quit", w.close, QKeySequence.StandardKey.Quit).setShortcut("Ctrl+Q")
    run_menu = mb.addMenu("&Run")
    run = add_action(w, run_menu, "&Run model", w.run, "Ctrl+Return")
    run.setShortcuts([QKeySequence("Ctrl+Return"), QKeySequence("Ctrl+Enter"), QKeySequence("F5")])
    run_menu.addSeparator()
    add_action(w, run_menu, "&Next step", w.next_step, "Alt+Right")
    add_action(w, run_menu, "&Previous step", w.previous_step, "Alt+Left")
    add_action(w, run_menu, "&First step", w.first_step, "Alt+Home")
    add_action(w, run_menu, "&Last step", w.last_step, "Alt+End")
    add_action(w, run_menu, "Play / &pause", w.toggle_play, "Ctrl+Space")
    run_menu.addSeparator()
    add_action(w, run_menu, "&Compare with…", w.comparison.ask, "Ctrl+Shift+D")  # app/compare/model_diff.py
    add_action(w, run_menu, "S&top comparing", w.comparison.stop)
    run_menu.addSeparator()
    add_action(w, run_menu, "&Attach dictionary…", w.attach_dictionary_dialog)  # a sparse dictionary's folder
    add_action(w, run_menu, "Attach the &bundled dictionary", w.attach_bundled_dictionary)  # en-hi ships an SAE
    add_action(w, run_menu, "&Train a dictionary…", w.train_dictionary_dialog)  # app/panels/dictionary_dialog.py
    add_action(w, run_menu, "&Detach dictionaries", w.detach_dictionaries)
    run_menu.addSeparator()
    add_action(w, run_menu, "&Memory budget…", w.ask_memory_budget)
    stored = QAction("Open model folders in their &stored precision", w)
    stored.setCheckable(True)
    stored.setToolTip("A Hugging Face folder saved in bfloat16 opens as bfloat16 (half the memory, the published "
                      "model's own rounding) instead of float32; takes effect at the next Run")  # fmt: skip
    stored.toggled.connect(w.set_stored_precision)
    run_menu.addAction(stored)
    w.stored_precision_action = stored
    view_menu = mb.addMenu("&View")
    add_action(w, view_menu, "&Sublayers only", lambda: w.set_detail("major"), "Ctrl+Shift+S")
    add_action(w, view_menu, "&Every operation", lambda: w.set_detail("all"), "Ctrl+Shift+A")
    build_view_entries(w, view_menu)
    view_menu.addSeparator()
    view_menu.addAction(w.interventions_panel.toggleViewAction())  # the dock of active interventions
    help_menu = mb.addMenu("&Help")
    add_action(w, help_menu, "&Keyboard shortcuts", w.show_shortcuts, QKeySequence.StandardKey.HelpContents)
    add_action(w, help_menu, "&About scratchformer", w.show_about)
    return export_actions


ABOUT_ICON_SIZE = 96


def about_box(parent) -> QMessageBox:
    """Help › About: the application icon, what the app does and what it is made with (not shown yet)."""
    from ..startup.icon import icon_pixmap

    box = QMessageBox(parent)
    box.setWindowTitle("About scratchformer")
    box.setTextFormat(Qt.TextFormat.RichText)
    box.setText(
        "<h3>scratchformer</h3><p>Step a sentence through the 2017 encoder-decoder Transformer "
        "(“Attention Is All You Need”), sublayer by sublayer, with live shapes and heatmaps.</p>"
        "<p>The model is written from scratch in PyTorch; the window uses PySide6 and pyqtgraph.</p>"
    )
    box.setIconPixmap(icon_pixmap(ABOUT_ICON_SIZE))
    box.setStandardButtons(QMessageBox.StandardButton.Ok)
    return box


def show_about(parent) -> None:
    box = about_box(parent)
    box.exec()
    box.deleteLater()


def shortcut_rows(window) -> list[tuple[str, str]]:
    """The keyboard shortcuts dialog's rows (key, what it does)."""
    tabs = window.tabs
    groups = [tabs.groups.tabText(g) for g in range(min(9, tabs.group_count()))]
    return [
        ("→ / ←", "next / previous step (when not typing)"),
        ("Home / End", "first / last step"),
        ("Alt+→ / Alt+←", "next / previous step, anywhere"),
        ("Space", "play / pause"),
        ("Ctrl+Space", "play / pause, anywhere"),
        ("Ctrl+Enter, F5", "run the model"),
        ("Ctrl+O", "open a text file"),
        ("Ctrl+Shift+O", "open a model folder"),
        ("Ctrl+Shift+T", "train a model (File › Train…)"),
        ("Ctrl+Shift+D", "compare with a second model or snapshot (Run › Compare with…)"),
        ("Ctrl+E", "export the current view as PNG"),
        ("Ctrl+Shift+C", "copy the current view to the clipboard"),
        (f"Ctrl+1 … Ctrl+{len(groups)}", "show a group of views: " + ", ".join(groups)),
        ("Alt+1 … Alt+9", "show the first, second, … view of the group shown (View menu)"),
        ("Ctrl+PgDown / Ctrl+PgUp", "next / previous view"),
        ("Ctrl+Shift+S / Ctrl+Shift+A", "step through sublayers only / every operation"),
        ("F1", "this list"),
        ("Ctrl+Q", "quit"),
    ]


def show_shortcuts(parent) -> None:
    rows = shortcut_rows(parent)
    body = "".join(f"<tr><td><b>{html.escape(k)}</b></td><td>{html.escape(v)}</td></tr>" for k, v in rows)
    QMessageBox.information(parent, "Keyboard shortcuts", f"<table cellspacing=6>{body}</table>")
