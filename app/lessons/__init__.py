"""The lesson dock: a lesson's pages beside the window (lesson_panel.py), and what the window remembers of each
lesson between launches (lesson_progress.py)."""
