"""The Graph view (What if › Graph): the attribution graph of the current run's prediction (scratchformer.graph).

    view.py      GraphView: the controls, the plot and the details, put together from the parts below
    work.py      what its jobs do off the UI thread: build, prune again, cards, the replacement for a QK split
    source.py    which graph: the transcoders it is read through, the position, why a run has none
    progress.py  the status line, progress and Cancel
    prune.py     the Nodes and Edges sliders, supernodes
    select.py    drawing, hover, selection and the details text
    card.py      a feature's card and its step in the trace
    qk.py        Why attention?: a head's score split at an edge; qk_panel.py the panel that shows it
    export.py    PNG, SVG, PDF and JSON
"""
