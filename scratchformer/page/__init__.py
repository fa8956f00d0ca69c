"""The one-file interactive page: a traced run as a self-contained HTML file, and the same page in a notebook.

    from scratchformer.page import page_data, page_html, write_page, notebook_html
    data = page_data(bundle, trace, inputs)        # what goes in (index + packed maps); bundle.run made trace
    write_page("run.html", data)                   # the file `scratchformer export --format html` writes
    notebook_html(page_html(data))                 # what `run.show()`'s _repr_html_ returns

What the page shows: the run's model, source, decoder input and translation; the architecture strip (the
window's diagram blocks, plotdata.architecture) and the list of every step, with a stepper (buttons, ← and →,
Home and End; "sublayers only" walks the major steps); each step's heatmap drawn from the same plot data as the
window and the exports (plotdata.step_heatmap / heads_grid: token labels, levels, colour maps), one head or all
heads side by side, and any stored batch item; a cell's value on hover; the step's explanation with this run's
numbers (scratchformer.explain); the derivation of a clicked cell where it was made ahead (derivations.py) and
otherwise the `scratchformer derive` command for it; the logit lens (analyses.lens) where the model has an output
layer.

Self-contained: code, styles and data are inline, and its Content-Security-Policy forbids loading anything, so it
opens from file:// offline and never touches the network. The data are gzip + base64 (packing.py); values are
float16 (float32 where float16 would change them), and large runs keep every attention weight of the first batch
item whole while other large maps are reduced to blocks within a byte budget (maps.py). The page says what was
reduced. It marks `<body data-ready="1">` once its first map is drawn.

A live page (page_data(…, live=live_text(model, source, target)), `export --format html --live`) also carries the
model's weights and reruns it in the browser on the text typed into its boxes (live/part.py, live/page.js);
`<body data-run="N">` counts the runs drawn, 0 for the recorded one it opens with.

In a notebook: `notebook_html(page)` puts the page in an `<iframe srcdoc="…">` of fixed height (NOTEBOOK_HEIGHT),
so each view is its own document — several views in one notebook never interfere, and the notebook grows by the
view's data only. JupyterLab, the classic notebook and VS Code run a trusted output's iframe scripts; a notebook
opened untrusted shows the output once it is trusted or run again.

The viewer itself is viewer.html, viewer.css and viewer.js beside this file (package data), written once for the
page and the notebook.
"""

from .data import MAX_ITEMS, page_data, run_arguments
from .derivations import DERIVE_CELLS
from .graph import page_graph
from .html import NOTEBOOK_HEIGHT, notebook_html, page_html, read_page, write_page
from .live.part import live_page_refusal, live_text
from .maps import PAGE_BYTES

__all__ = ["DERIVE_CELLS", "MAX_ITEMS", "NOTEBOOK_HEIGHT", "PAGE_BYTES", "live_page_refusal", "live_text",
           "notebook_html", "page_data", "page_graph", "page_html", "read_page", "run_arguments",
           "write_page"]  # fmt: skip
