"""A dictionary's activations from a model without a padding token (a GPT-2 folder): inputs of different lengths
batched together give each token the same row as when each input runs alone (issue 44)."""

import torch
import transformers

from scratchformer.features.activations import Text, gather
from scratchformer.loading.bundle import load_model
from scratchformer.loading.tokenizers import gpt2_tokenizer

STEP = "decoder.1.add_norm3.residual"


def test_inputs_of_different_lengths_batch_without_a_padding_token(tmp_path):
    torch.manual_seed(0)
    transformers.GPT2LMHeadModel(transformers.GPT2Config(n_layer=2, n_embd=64, n_head=4)).save_pretrained(tmp_path)
    gpt2_tokenizer().hf.save_pretrained(tmp_path)
    bundle = load_model(str(tmp_path))
    assert bundle.config.pad_id is None
    texts = [Text("the girl eats an apple"), Text("a boy"), Text("the cat sat on the mat today")]
    together = gather(bundle, texts, [STEP], 2**30)[STEP]  # (tokens, 64)
    alone = torch.cat([gather(bundle, [t], [STEP], 2**30)[STEP] for t in texts])
    assert together.shape == alone.shape and together.shape[0] > 10
    torch.testing.assert_close(together, alone, atol=1e-5, rtol=0)
