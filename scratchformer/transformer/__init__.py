"""The Transformer itself, in the paper's names: its config and presets (config.py), embeddings and positional
encodings (embeddings.py), rotary positions (rotary.py), attention (attention.py), masks (masks.py), norms
(norms.py), the feed-forward (feed_forward.py), a mixture of experts (moe.py), encoder and decoder layers
(layers.py), the whole model (model.py), how a model departs from the paper (departures.py) and its parameter
counts (parameters.py). It records its steps through scratchformer.recording and knows nothing of files."""
