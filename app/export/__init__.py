"""Export from the window and headless: Qt rendering (render.py) and the window's actions (actions.py).

What to export, file names, safe writes and the index live in scratchformer.exporting (Qt-free).
"""
