"""A lazy trace reruns a sublayer from the inputs it kept on the CPU, and the Output view reads next-token
probabilities with ids it holds on the CPU: both must move those tensors to the model's device first, or a model
on a GPU fails ("Expected all tensors to be on the same device"). This machine has no GPU and "meta" cannot stand
in (the reruns copy their results back to the CPU), so these tests watch every Tensor.to call the code makes and
check that each names the device the model's weights (or the probabilities) are on."""

from __future__ import annotations

import torch
from torch.overrides import TorchFunctionMode

from scratchformer import Transformer, TransformerConfig
from scratchformer.recording.lazy import OutputSummary

SMALL = dict(src_vocab_size=30, tgt_vocab_size=30, share_embeddings=False, d_model=16, n_heads=4,
             n_encoder_layers=1, n_decoder_layers=1, d_ff=24, max_len=32, dropout=0.0)  # fmt: skip


class Moves(TorchFunctionMode):
    """Records the first argument of every Tensor.to call made inside it (a device, a dtype or None) in `targets`,
    and the (device, dtype) every torch.tensor call names (None where it names none) in `made`."""

    def __init__(self) -> None:
        super().__init__()
        self.targets: list = []
        self.made: list[tuple] = []

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func is torch.Tensor.to:
            self.targets.append(args[1] if len(args) > 1 else kwargs.get("device"))
        elif func is torch.tensor:
            self.made.append((kwargs.get("device"), kwargs.get("dtype")))
        return func(*args, **kwargs)


def test_a_lazy_reruns_inputs_go_to_the_models_device():
    torch.manual_seed(0)
    model = Transformer(TransformerConfig(**SMALL)).eval()
    src, tgt = torch.randint(4, 30, (2, 5)), torch.randint(4, 30, (2, 4))
    _, trace = model.run_with_trace(src, tgt, keep_bytes=0)
    device = next(model.parameters()).device
    for name in ("encoder.0.self_attn.weights", "decoder.0.cross_attn.weights", "decoder.0.ffn.hidden"):
        step = trace[name]
        assert step in trace.recomputed_steps(), name  # a rerun, not a stored tensor
        with Moves() as moves:
            step.item(1)
        devices = [t for t in moves.targets if not isinstance(t, torch.dtype)]
        assert devices, f"{name}: the rerun moved nothing to the model's device"
        assert all(t is not None and torch.device(t) == device for t in devices), (name, devices)


def test_the_output_summary_reads_next_tokens_on_the_probabilities_device():
    probs = torch.softmax(torch.randn(2, 3, 7, generator=torch.Generator().manual_seed(1)), -1)  # (B, T, vocab)
    ids = torch.tensor([[0, 4, 2], [0, 6, 5]])
    with Moves() as moves:
        summary = OutputSummary.of([probs[:1], probs[1:]], ids, k=2)
    devices = [t for t in moves.targets if not isinstance(t, torch.dtype)]
    assert devices and all(t is not None and torch.device(t) == probs.device for t in devices), devices
    want = torch.stack([probs[b, torch.arange(2), ids[b, 1:]] for b in range(2)])  # P(next id) at positions 0, 1
    assert torch.equal(summary.next_probs, want)


def test_head_importance_over_pairs_moves_each_batch_to_the_models_device():
    from scratchformer.loading.bundle import load_model
    from scratchformer.patching.head_importance import head_importance_on_pairs
    from scratchformer.tasks.splits import Pair

    bundle = load_model("en-hi")
    with Moves() as moves:
        head_importance_on_pairs(bundle, [Pair("we are friends", "हम दोस्त हैं"), Pair("the girl eats", "लड़की खाती है")])
    devices = [t for t in moves.targets if not isinstance(t, torch.dtype)]
    assert devices and all(t is not None and torch.device(t) == bundle.model.device for t in devices), devices


def test_attribution_moves_the_ids_and_masks_it_reads_to_the_models_device():
    from scratchformer.analyses import attribute
    from scratchformer.loading.bundle import load_model

    bundle = load_model("en-hi")
    inputs = bundle.prepare("we are friends", "हम दोस्त हैं")
    _, trace = bundle.run(inputs)
    with Moves() as moves:
        attribute.compute(bundle, inputs, trace, 1, "grad-input")
    devices = [t for t in moves.targets if not isinstance(t, torch.dtype)]
    assert devices and all(t is not None and torch.device(t) == bundle.model.device for t in devices), devices


def test_integrated_gradients_makes_its_path_points_on_the_models_device_and_in_its_precision():
    from scratchformer.analyses import attribute
    from scratchformer.loading.bundle import load_model

    bundle = load_model("en-hi")
    inputs = bundle.prepare("we are friends", "हम दोस्त हैं")
    _, trace = bundle.run(inputs)
    with Moves() as moves:
        attribute.compute(bundle, inputs, trace, 1, "ig", steps=4)
    device, dtype = bundle.model.device, next(bundle.model.parameters()).dtype
    assert moves.made, "no path points were made"
    assert all(d is not None and torch.device(d) == device and t == dtype for d, t in moves.made), moves.made


def test_the_pad_baseline_is_on_the_device_of_the_inputs_it_replaces():
    """The padding's embeddings are traced (on the CPU); the baseline must go where the inputs are. "meta" stands
    in for a GPU here: a baseline left on the CPU would meet the inputs in the path points and fail there."""
    from scratchformer.analyses import attribute

    torch.manual_seed(0)
    model = Transformer(TransformerConfig(**SMALL, pad_id=0)).eval()
    ids = torch.randint(4, 30, (1, 5))
    x = torch.empty(5, 16, device="meta", dtype=torch.float64)  # (L, d_model) where the inputs are
    for kind in ("zero", "pad"):
        base = attribute._baseline(model, "src_embed.sum", ids, x, kind)
        assert base.device == x.device and base.dtype == x.dtype and base.shape == x.shape, kind
