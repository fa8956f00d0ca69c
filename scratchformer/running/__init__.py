"""Running an opened model: greedy and beam decoding with a key/value cache (decoding.py), continuing a text
(generation.py), the walkthrough's batches of windows (batching.py) and the example inputs every model carries
(examples.py)."""
