"""Run › Compare with…: the second model chosen (compare_dialog.py), run and diffed (model_diff.py), and the bar and
the parameter table that show the difference (comparison_bar.py, parameter_diff_dialog.py)."""
