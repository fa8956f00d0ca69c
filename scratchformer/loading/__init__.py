"""Opening models: a model and its tokenizers found by name or path (bundle.py, model_bundle.py), checkpoint
folders (checkpoint.py, quantize.py for int8 snapshots), Hugging Face folders and the local cache (importers/,
hf_cache.py), tokenizers (tokenizers.py), the device (device.py) and the memory a traced run needs (memory.py)."""
