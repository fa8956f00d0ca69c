"""The main window's parts around the views: the input bar and its continuation controls, the run banner, the
architecture diagram, the stepper, the inspector and the explanation (side panel), the interventions list, the view
tabs, the menus, the Open… dialog, and what the window says to teach a step (teaching.py)."""
