"""Interventions belong to the run that asked for them: nothing is put on the shared model, so another thread
running the same model at the same moment (the window recomputing a step while Integrated Gradients patches its
path points in) runs it unchanged, and each gets the numbers it would get alone."""

import threading

import pytest
import torch

from scratchformer.analyses import attribute
from scratchformer.loading.bundle import load_model
from scratchformer.patching.interventions import Patch, intervene

SOURCE, TARGET = "the girl eats an apple", "लड़की सेब खाती है"
CORRUPTED = "the boy eats an apple"


@pytest.fixture(scope="module")
def bundle():
    return load_model("en-hi")


def test_integrated_gradients_and_a_recompute_at_the_same_time_each_get_their_own_numbers(bundle):
    inputs = bundle.prepare(SOURCE, TARGET)
    _, reference = bundle.run(inputs)
    alone = attribute.compute(bundle, inputs, reference, 2, "ig", steps=8, max_steps=8)
    watched = ("src_embed.sum", "encoder.0.self_attn.weights", "decoder.1.add_norm3.out", "generator.logits")

    ig_done, failures, recomputes = threading.Event(), [], []
    results: list = []

    def attribute_in_background() -> None:
        try:
            while len(recomputes) < 3 and len(results) < 200:  # until several recomputes ran meanwhile
                results.append(attribute.compute(bundle, inputs, reference, 2, "ig", steps=8, max_steps=8))
        except Exception as exc:  # noqa: BLE001 - reported by the assertion below
            failures.append(exc)
        finally:
            ig_done.set()

    worker = threading.Thread(target=attribute_in_background)
    worker.start()
    try:
        while not ig_done.is_set():  # the window's side: traced runs of the same model, unchanged
            _, trace = bundle.run(inputs)
            for name in watched:
                torch.testing.assert_close(trace[name].tensor, reference[name].tensor, rtol=0, atol=0)
            assert trace.interventions == [] and "patched" not in trace["src_embed.sum"].title
            recomputes.append(1)
    finally:
        worker.join()
    assert not failures, failures
    assert len(recomputes) >= 3  # the two really ran side by side
    for result in results:
        torch.testing.assert_close(result.target, alone.target, rtol=0, atol=1e-12)
        torch.testing.assert_close(result.source, alone.source, rtol=0, atol=1e-12)


def test_a_patch_made_in_one_thread_is_not_seen_by_another(bundle):
    clean_out, clean = bundle.run(bundle.prepare(SOURCE, TARGET))
    corrupted = bundle.prepare(CORRUPTED, TARGET)
    corrupted_out, _ = bundle.run(corrupted)
    inside, other = threading.Event(), threading.Event()
    seen: dict = {}

    def other_thread() -> None:
        inside.wait(30)
        with torch.inference_mode():
            seen["out"] = bundle.model(corrupted.src, corrupted.tgt)
        other.set()

    thread = threading.Thread(target=other_thread)
    thread.start()
    with intervene(bundle.model, [Patch("encoder.1.add_norm2.out", clean["encoder.1.add_norm2.out"].tensor)]):
        inside.set()
        other.wait(30)
        with torch.inference_mode():
            patched = bundle.model(corrupted.src, corrupted.tgt)
    thread.join()
    torch.testing.assert_close(patched, clean_out, rtol=0, atol=1e-5)  # this thread's pass is patched
    torch.testing.assert_close(seen["out"], corrupted_out, rtol=0, atol=1e-5)  # the other one is not


def test_an_attention_output_is_patched_on_the_untraced_path_too(bundle):
    """The output projection of an attention is a patch point whether or not the pass is traced: a patched
    attention leaves the fused kernel for the written-out path, which has the point."""
    clean_out, clean = bundle.run(bundle.prepare(SOURCE, TARGET))
    corrupted = bundle.prepare(CORRUPTED, TARGET)
    patches = [Patch(f"encoder.{i}.self_attn.out", clean[f"encoder.{i}.self_attn.out"].tensor) for i in range(2)]
    patches += [Patch(f"encoder.{i}.ffn.out", clean[f"encoder.{i}.ffn.out"].tensor) for i in range(2)]
    patches.append(Patch("src_embed.sum", clean["src_embed.sum"].tensor))
    with intervene(bundle.model, patches), torch.inference_mode():
        untraced = bundle.model(corrupted.src, corrupted.tgt)
    torch.testing.assert_close(untraced, clean_out, rtol=0, atol=1e-5)
