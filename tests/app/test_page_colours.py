"""The page paints with the window's colours: the tables it carries are the ones the window and the exported
figures draw with, byte for byte, and so are the colours of masked and broken cells."""

import numpy as np

from app.widgets.colormaps import SPECIAL_RGBA, colormap, lookup_table
from scratchformer.loading.bundle import load_model
from scratchformer.page import page_data
from scratchformer.plotdata.special import MASKED, NAN


def test_the_page_carries_the_windows_colour_tables():
    bundle = load_model("copy", "cpu")
    inputs = bundle.prepare_run("a b c")
    _, trace = bundle.run(inputs, keep_output=False)
    colours = page_data(bundle, trace, inputs, derive_cells=0)["index"]["colours"]
    for name in ("viridis", "RdBu_r", "mask"):
        carried = np.frombuffer(bytes.fromhex(colours["tables"][name]), np.uint8).reshape(256, 3)
        assert np.array_equal(carried, lookup_table(name)[:, :3]), name
        bar = np.asarray(colormap(name).getLookupTable(0.0, 1.0, 256, alpha=True, mode="byte"), np.uint8)
        assert np.array_equal(bar, lookup_table(name))  # the window's colour bar shows the cells' colours
    assert colours["special"]["masked"] == list(SPECIAL_RGBA[MASKED])
    assert colours["special"]["nan"] == list(SPECIAL_RGBA[NAN])
