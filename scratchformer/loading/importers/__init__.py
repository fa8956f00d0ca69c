"""Load weights from other implementations into scratchformer's own from-scratch modules."""

from .torch_transformer import from_torch_state_dict, from_torch_transformer

__all__ = ["from_torch_state_dict", "from_torch_transformer", "load_hf_directory"]


def load_hf_directory(path, device="cpu"):
    """A local Hugging Face model directory → ModelBundle (BERT, RoBERTa, DistilBERT, GPT-2, MarianMT,
    BART, mBART)."""
    from .hf import load_hf_directory as load

    return load(path, device)
