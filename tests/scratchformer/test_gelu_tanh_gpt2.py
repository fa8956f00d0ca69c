"""GPT-2's feed-forward uses GELU in its tanh form ("gelu_new"). At a fresh model's tiny MLP weights the tanh and
the exact (erf) GELU agree to 1e-4, so here the MLPs are sharpened until they do not: the import must match
transformers on the logits, its hidden layer must be the tanh formula written out, and the same model with the
exact GELU put in its place must visibly fail the comparison."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F
from transformers import GPT2Config, GPT2LMHeadModel

from scratchformer.loading.bundle import load_model
from scratchformer.loading.tokenizers import gpt2_tokenizer


@pytest.fixture(scope="module")
def sharp_gpt2(tmp_path_factory):
    directory = tmp_path_factory.mktemp("gpt2-sharp-mlp")
    torch.manual_seed(4)
    ref = GPT2LMHeadModel(GPT2Config(vocab_size=50257, n_positions=16, n_embd=32, n_layer=2, n_head=4,
                                     resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0))
    with torch.no_grad():  # pre-activations of a few units, where tanh-GELU and erf-GELU part by ~1e-3 each
        for block in ref.transformer.h:
            block.mlp.c_fc.weight.mul_(60.0)
            block.mlp.c_fc.bias.normal_(0, 1.0)
            block.mlp.c_proj.weight.mul_(20.0)
    ref.save_pretrained(str(directory), safe_serialization=True)
    gpt2_tokenizer().hf.save_pretrained(str(directory))
    return load_model(str(directory)), GPT2LMHeadModel.from_pretrained(str(directory)).eval()


def tanh_gelu(x: torch.Tensor) -> torch.Tensor:
    """GPT-2's gelu_new: 0.5 x (1 + tanh(√(2/π) (x + 0.044715 x³)))."""
    return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x**3)))


def test_gpt2_logits_need_the_tanh_gelu(sharp_gpt2):
    bundle, ref = sharp_gpt2
    ids = torch.tensor([[bundle.start_id()] + bundle.tgt_tokenizer.encode("machine learning using PyTorch")])
    with torch.no_grad():
        expected = ref(input_ids=ids).logits
        got = bundle.model(None, ids)
    assert (got - expected).abs().max() < 1e-5 * expected.abs().max()  # exact GELU: 6e-5 of it here
    # the hidden layer is the formula applied to x W_1 + b_1, computed here from the trace's own input
    _, trace = bundle.model.run_with_trace(None, ids)
    ffn = bundle.model.decoder[0].ffn
    x = trace["decoder.0.add_norm3.norm"].tensor  # pre-LN: the FFN reads the normed stream
    with torch.no_grad():
        pre = x @ ffn.w_1.weight.T + ffn.w_1.bias
    assert pre.abs().max() > 3  # sharpened: well into the range where the two GELUs differ
    assert torch.allclose(trace["decoder.0.ffn.hidden"].tensor, tanh_gelu(pre), atol=1e-4)
    # the exact GELU in its place: the same weights no longer give transformers' logits
    for layer in bundle.model.decoder:
        layer.ffn.activation = F.gelu
    try:
        with torch.no_grad():
            wrong = bundle.model(None, ids)
    finally:
        for layer in bundle.model.decoder:
            layer.ffn.activation = lambda t: F.gelu(t, approximate="tanh")
    assert (wrong - expected).abs().max() > 20 * (got - expected).abs().max()
