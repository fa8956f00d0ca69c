"""torch.nn.Transformer importer, state_dict path: same outputs as the module the state_dict came from.

(Equality through from_torch_transformer(module) is pinned in test_reference.py.)
"""

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from torch import nn

from scratchformer.errors import UserError
from scratchformer.loading.importers import from_torch_state_dict, from_torch_transformer

VOCAB = 29


def _reference(d_model, n_heads, d_ff, n_enc, n_dec, activation, bias, final_norm, eps, seed):
    torch.manual_seed(seed)
    ref = nn.Transformer(d_model=d_model, nhead=n_heads, num_encoder_layers=n_enc, num_decoder_layers=n_dec,
                         dim_feedforward=d_ff, dropout=0.0, activation=activation, batch_first=True,
                         layer_norm_eps=eps, bias=bias).eval()  # fmt: skip
    if not bias:  # bias=False leaves nothing to see: give the norms' weights some spread instead
        with torch.no_grad():
            for p in ref.parameters():
                if p.dim() == 1:
                    p.uniform_(0.5, 1.5)
    if not final_norm:
        ref.encoder.norm = ref.decoder.norm = None
    return ref


def _max_diff(ours, ref, batch, s_len, t_len, pads, seed):
    gen = torch.Generator().manual_seed(seed)
    src = torch.randint(0, VOCAB, (batch, s_len), generator=gen)
    tgt = torch.randint(0, VOCAB, (batch, t_len), generator=gen)
    src_pad = torch.zeros(batch, s_len, dtype=torch.bool)
    tgt_pad = torch.zeros(batch, t_len, dtype=torch.bool)
    for b, (ps, pt) in enumerate(pads[:batch]):
        src_pad[b, s_len - min(ps, s_len - 1):] = True  # keep ≥ 1 real key per row
        tgt_pad[b, t_len - min(pt, t_len - 1):] = True
    causal = nn.Transformer.generate_square_subsequent_mask(t_len, dtype=torch.bool)
    with torch.no_grad():
        x_src, x_tgt = ours.src_embed(src), ours.tgt_embed(tgt)  # both get the same input vectors
        expected = ref(x_src, x_tgt, tgt_mask=causal, src_key_padding_mask=src_pad,
                       tgt_key_padding_mask=tgt_pad, memory_key_padding_mask=src_pad)  # fmt: skip
        _, trace = ours.run_with_trace(src, tgt, src_pad, tgt_pad)
    n = ours.config.n_decoder_layers
    got = trace["decoder.final_norm.out" if ours.config.final_layer_norm else f"decoder.{n - 1}.add_norm3.out"].tensor
    return (got - expected).abs().max().item()


@settings(max_examples=15, deadline=None)
@given(
    heads_and_dim=st.sampled_from([(1, 8), (2, 8), (4, 16), (3, 12)]),
    d_ff=st.sampled_from([8, 24, 64]),
    n_enc=st.integers(1, 3),
    n_dec=st.integers(1, 3),
    activation=st.sampled_from(["relu", "gelu"]),
    bias=st.booleans(),
    final_norm=st.booleans(),
    eps=st.sampled_from([1e-5, 1e-6]),
    wrapped=st.booleans(),
    batch=st.integers(1, 4),
    s_len=st.integers(2, 9),
    t_len=st.integers(2, 8),
    pads=st.lists(st.tuples(st.integers(0, 5), st.integers(0, 5)), min_size=4, max_size=4),
    seed=st.integers(0, 10_000),
)
def test_state_dict_import_equals_the_module(heads_and_dim, d_ff, n_enc, n_dec, activation, bias, final_norm, eps,
                                             wrapped, batch, s_len, t_len, pads, seed):  # fmt: skip
    n_heads, d_model = heads_and_dim
    ref = _reference(d_model, n_heads, d_ff, n_enc, n_dec, activation, bias, final_norm, eps, seed)
    state = ref.state_dict()
    if wrapped:  # the nn.Transformer inside a user's own model
        state = {f"model.transformer.{k}": v for k, v in state.items()}
    ours = from_torch_state_dict(state, n_heads=n_heads, activation=activation, layer_norm_eps=eps,
                                 src_vocab_size=VOCAB, tgt_vocab_size=VOCAB).eval()  # fmt: skip
    c = ours.config
    assert (c.d_model, c.d_ff, c.n_encoder_layers, c.n_decoder_layers) == (d_model, d_ff, n_enc, n_dec)
    assert c.final_layer_norm == final_norm
    assert _max_diff(ours, ref, batch, s_len, t_len, pads, seed) < 1e-5


def test_module_and_state_dict_give_the_same_model():
    ref = _reference(16, 4, 32, 2, 2, "gelu", True, True, 1e-5, 0)
    a = from_torch_transformer(ref, src_vocab_size=VOCAB, tgt_vocab_size=VOCAB)
    b = from_torch_state_dict(ref.state_dict(), n_heads=4, activation="gelu", src_vocab_size=VOCAB,
                              tgt_vocab_size=VOCAB)  # fmt: skip
    assert a.config.activation == "gelu"
    skip = ("src_embed.", "tgt_embed.", "generator.")  # fresh embeddings: nn.Transformer has none
    for (name, x), (_, y) in zip(a.state_dict().items(), b.state_dict().items()):
        if not name.startswith(skip):
            assert torch.equal(x, y), name


def test_pre_norm_is_refused_from_a_module():
    ref = nn.Transformer(d_model=8, nhead=2, num_encoder_layers=1, num_decoder_layers=1, dim_feedforward=8,
                         norm_first=True, batch_first=True)  # fmt: skip
    with pytest.raises(UserError, match="pre-norm"):
        from_torch_transformer(ref, src_vocab_size=VOCAB, tgt_vocab_size=VOCAB)


def test_pre_norm_is_refused_from_a_state_dict():
    ref = _reference(8, 2, 8, 1, 1, "relu", True, True, 1e-5, 0)
    with pytest.raises(UserError, match="pre-norm"):
        from_torch_state_dict(ref.state_dict(), n_heads=2, norm_first=True)


def test_sizes_that_disagree_with_the_tensors():
    state = _reference(8, 2, 16, 2, 1, "relu", True, False, 1e-5, 0).state_dict()
    with pytest.raises(UserError, match="d_ff=32 was given, but the state_dict's tensors say 16"):
        from_torch_state_dict(state, n_heads=2, d_ff=32)
    with pytest.raises(UserError, match="n_encoder_layers=3 was given, but the state_dict's tensors say 2"):
        from_torch_state_dict(state, n_heads=2, n_encoder_layers=3)
    with pytest.raises(UserError, match="not divisible by n_heads 3"):
        from_torch_state_dict(state, n_heads=3)


def test_broken_state_dicts_are_one_sentence():
    state = _reference(8, 2, 16, 2, 1, "relu", True, False, 1e-5, 0).state_dict()
    with pytest.raises(UserError, match="not a torch.nn.Transformer state_dict"):
        from_torch_state_dict({"weight": torch.zeros(2)}, n_heads=2)
    missing = {k: v for k, v in state.items() if k != "decoder.layers.0.multihead_attn.out_proj.weight"}
    with pytest.raises(UserError, match="has no weight decoder.layers.0.multihead_attn.out_proj.weight"):
        from_torch_state_dict(missing, n_heads=2)
    wrong = dict(state, **{"encoder.layers.1.linear2.weight": torch.zeros(8, 12)})
    with pytest.raises(UserError, match=r"encoder\.layers\.1\.linear2\.weight has shape \(8, 12\) but the "
                                        r"configuration says \(8, 16\)"):  # fmt: skip
        from_torch_state_dict(wrong, n_heads=2)


def test_an_unsupported_activation_is_refused():
    ref = nn.Transformer(d_model=8, nhead=2, num_encoder_layers=1, num_decoder_layers=1, dim_feedforward=8,
                         activation=torch.tanh, batch_first=True)  # fmt: skip
    with pytest.raises(UserError, match="supports relu, gelu and silu"):
        from_torch_transformer(ref, src_vocab_size=VOCAB, tgt_vocab_size=VOCAB)
