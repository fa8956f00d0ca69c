"""Features: sparse dictionaries (SAEs and transcoders) trained on a model's named steps, read back into its trace.

dictionary (the SAE / transcoder module) · folder (SAELens's layout on disk) · points (which steps can be read) ·
activations (a corpus through the model in micro-batches) · training · quality (FVU, L0, CE loss recovered) ·
build (corpus → trained folder) · attach (a dictionary's steps in a trace, and clamping a feature)
"""
