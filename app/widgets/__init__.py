"""Reusable widgets: the labelled heatmap and the one colour-map table that screen and exports share."""
