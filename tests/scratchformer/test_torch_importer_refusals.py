"""What the torch.nn.Transformer importer refuses, each in one sentence of its own: a stack without layers, mixed
activations, a final LayerNorm after one stack only, and state_dicts without decoder or encoder layers."""

from __future__ import annotations

import pytest
import torch.nn.functional as F
from torch import nn

from scratchformer.errors import UserError
from scratchformer.loading.importers import from_torch_state_dict, from_torch_transformer

VOCAB = dict(src_vocab_size=11, tgt_vocab_size=11)


def _ref(**kw) -> nn.Transformer:
    values = dict(d_model=8, nhead=2, num_encoder_layers=2, num_decoder_layers=2, dim_feedforward=16, dropout=0.0,
                  batch_first=True)
    return nn.Transformer(**{**values, **kw})


def test_a_stack_without_layers_is_refused():
    with pytest.raises(UserError, match="lacks an encoder or a decoder layer; scratchformer needs both"):
        from_torch_transformer(_ref(num_decoder_layers=0), **VOCAB)
    with pytest.raises(UserError, match="lacks an encoder or a decoder layer"):
        from_torch_transformer(_ref(num_encoder_layers=0), **VOCAB)


def test_mixed_activations_are_refused_by_name():
    ref = _ref()
    ref.decoder.layers[1].activation = F.gelu
    with pytest.raises(UserError, match=r"mixes activations \(gelu, relu\)"):
        from_torch_transformer(ref, **VOCAB)


def test_a_final_norm_after_one_stack_only_is_refused():
    ref = _ref()
    ref.decoder.norm = None
    with pytest.raises(UserError, match="final LayerNorm after only one of its stacks"):
        from_torch_transformer(ref, **VOCAB)
    state = ref.state_dict()
    with pytest.raises(UserError, match="final LayerNorm after only one of its stacks"):
        from_torch_state_dict(state, n_heads=2, **VOCAB)


def test_state_dicts_without_decoder_or_encoder_layers_are_refused():
    state = _ref().state_dict()
    no_decoder = {k: v for k, v in state.items() if not k.startswith("decoder.layers.")}
    with pytest.raises(UserError, match="The state_dict has no decoder layers"):
        from_torch_state_dict(no_decoder, n_heads=2, **VOCAB)
    no_encoder = {k: v for k, v in state.items() if not k.startswith("encoder.layers.")}
    with pytest.raises(UserError, match="The state_dict has no encoder layers"):
        from_torch_state_dict(no_encoder, n_heads=2, **VOCAB)
    # both stacks there, under a larger model's prefix: imported
    model = from_torch_state_dict({f"transformer.{k}": v for k, v in state.items()}, n_heads=2, **VOCAB)
    assert model.config.n_encoder_layers == model.config.n_decoder_layers == 2
