"""The temperature experiment's numbers, each rebuilt here: softmax(logits / T) by numpy from the model's own
forward pass, the sampled translation drawn token by token with a generator of the test's own, and a decoder-only
model's greedy continuation appended by hand."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from scratchformer.errors import UserError
from scratchformer.experiments import run_experiment, temperature
from scratchformer.experiments.temperature import sampled_translation
from scratchformer.loading.bundle import load_model
from scratchformer.running.generation import Continuation, continue_ids
from tests.scratchformer.test_derive import FAMILIES, family_bundle
from tests.scratchformer.test_rerun_device_moves import Moves

SOURCE = "the girl eats an apple"
SHUFFLED = "सेब लड़की है"  # three words of en-hi's target vocabulary, not the model's translation of SOURCE


@pytest.fixture(scope="module")
def en_hi():
    return load_model("en-hi")


def tempered(logits: np.ndarray, t: float) -> np.ndarray:
    p = np.exp((logits - logits.max()) / t)
    return p / p.sum()


def sample_by_hand(bundle, src: list[int], start: list[int], t: float, seed: int, steps: int, end) -> list[int]:
    """Tokens drawn one at a time from softmax(logits / t) with a CPU generator seeded `seed`, after `start` (the
    start token and any prefix): at most `steps` of them, stopping before `end`."""
    model, gen = bundle.model, torch.Generator().manual_seed(seed)
    ys, out = list(start), []
    with torch.inference_mode():
        memory = model.encode(torch.tensor([src]))
        while len(out) < steps:
            logits = model.generator(model.decode(torch.tensor([ys]), memory)[:, -1])[0]  # (vocab,)
            token = int(torch.multinomial((logits.float() / t).softmax(-1), 1, generator=gen))
            if token == end:
                break
            ys.append(token)
            out.append(token)
    return out


def greedy_by_hand(bundle, ids: list[int], steps: int) -> list[int]:
    """A decoder-only model's argmax at the last position, appended, `steps` times (the end token ends it)."""
    out = []
    with torch.inference_mode():
        for _ in range(steps):
            nxt = int(bundle.model.generator(bundle.model.decode(torch.tensor([ids + out]), None))[0, -1].argmax())
            out.append(nxt)
            if nxt == bundle.config.eos_id:
                break
    return out


def test_temperature_tempers_the_chosen_positions_logits(en_hi):
    r = run_experiment("temperature", en_hi, SOURCE, temperature=0.5, position=2, seed=3)
    inputs = en_hi.prepare_run(SOURCE)
    with torch.inference_mode():
        logits = en_hi.model(inputs.src, inputs.tgt)[0, 2].double().numpy()
    assert r["position"] == 2 and r["context_tokens"] == inputs.target_tokens[0][:3]
    p = tempered(logits, 0.5)
    order = np.argsort(-p)[:8]
    tok = en_hi.tgt_tokenizer
    assert [t["token"] for t in r["next_token"]["top"]] == tok.token_strings(order.tolist())
    assert [t["p"] for t in r["next_token"]["top"]] == pytest.approx(p[order].tolist())
    assert r["next_token"]["top_probability"] == pytest.approx(p.max())
    one = tempered(logits, 1)
    assert r["at_1"]["entropy"] == pytest.approx(float(-(one * np.log(one)).sum()))
    assert r["greedy_token"] == tok.token_strings([int(logits.argmax())])[0]
    assert [c["temperature"] for c in r["curve"]] == pytest.approx([0.1 * 10 ** (i / 10) for i in range(21)],
                                                                   rel=1e-3)  # fmt: skip
    for c in r["curve"]:
        q = tempered(logits, c["temperature"])
        assert c["entropy"] == pytest.approx(float(-(q[q > 0] * np.log(q[q > 0])).sum()), rel=1e-9, abs=1e-12)
    assert r["uniform_entropy"] == pytest.approx(math.log(en_hi.config.tgt_vocab_size))
    at_t = r["next_token"]
    assert r["summary"] == (
        f"At T = 0.5 the next token after “{r['context_tokens'][-1]}” has entropy "
        f"{at_t['entropy']:.2f} nats (at T = 1: {r['at_1']['entropy']:.2f}) and top probability "
        f"{at_t['top_probability']:.2f}; sampled with seed 3: “{r['sampled']['text']}”."
    )


def test_a_hot_sample_is_drawn_token_by_token_with_its_seed_and_leaves_the_greedy_translation(en_hi):
    src, tok = en_hi.encode_source(SOURCE), en_hi.tgt_tokenizer
    limit, end = en_hi.generation_limit(len(src)), en_hi.config.eos_id
    runs = {seed: run_experiment("temperature", en_hi, SOURCE, temperature=3.0, seed=seed) for seed in (3, 4)}
    for seed, r in runs.items():
        drawn = sample_by_hand(en_hi, src, [en_hi.start_id()], 3.0, seed, limit, end)
        assert r["sampled"] == {"text": tok.decode(drawn), "seed": seed}
    greedy = en_hi.prepare_run(SOURCE).generated
    assert runs[3]["greedy"]["text"] == tok.decode(greedy)
    # at T = 3 the draw leaves the greedy translation, and the seed decides where it goes
    assert len({runs[3]["sampled"]["text"], runs[4]["sampled"]["text"], tok.decode(greedy)}) == 3
    assert runs[3]["summary"].endswith(f"sampled with seed 3: “{runs[3]['sampled']['text']}”.")


def test_a_sampled_translation_follows_the_target_prefix_and_stops_at_the_tokenizers_end_token(en_hi):
    tok = en_hi.tgt_tokenizer
    extra = {**en_hi.config.extra, "tgt_prefix": ["सेब", "<no such token>"]}  # an unknown one is left out
    model = family_bundle(en_hi, {**FAMILIES["bart_like"], "eos_id": None, "max_len": 16, "extra": extra})
    end = tok.eos_id
    assert end is not None  # the config names no end token, so the tokenizer's ends the draw
    src = model.encode_source(SOURCE)
    start = [model.start_id(), tok.token_id("सेब")]
    limit = model.generation_limit(len(src)) - 1  # the prefix takes one of the positions the draw may fill
    drawn = sample_by_hand(model, src, start, 1.5, 2, limit, end)
    assert len(drawn) == limit  # the random model never draws the end token: the draw runs to the limit
    assert run_experiment("temperature", model, SOURCE, temperature=1.5, seed=2)["sampled"]["text"] == tok.decode(drawn)
    with torch.no_grad():  # now the end token is likely enough to come up within a few tokens
        model.model.generator.final_logits_bias[end] += 5.0
    drawn = sample_by_hand(model, src, start, 1.5, 2, limit, end)
    assert 0 < len(drawn) < limit
    assert run_experiment("temperature", model, SOURCE, temperature=1.5, seed=2)["sampled"]["text"] == tok.decode(drawn)


def test_the_draw_is_made_on_the_models_device(en_hi, monkeypatch):
    """A model on a GPU needs its ids and its generator there; this machine has no GPU, so the calls are watched."""
    src = torch.tensor([en_hi.encode_source(SOURCE)])
    made, real = [], torch.Generator

    def generator(*args, **kwargs):
        made.append(kwargs.get("device"))
        return real(*args, **kwargs)

    monkeypatch.setattr(torch, "Generator", generator)
    with Moves() as moves:
        sampled_translation(en_hi, src, Continuation(max_new=1, sample=True, temperature=2.0, seed=1))
    assert made == [en_hi.device]
    assert moves.made and all(d is not None and torch.device(d) == en_hi.device for d, _ in moves.made), moves.made


def test_a_typed_target_is_the_decoder_input_and_position_0_is_the_default(en_hi):
    inputs, tok = en_hi.prepare(SOURCE, SHUFFLED), en_hi.tgt_tokenizer
    assert inputs.target_tokens[0] != en_hi.prepare_run(SOURCE).target_tokens[0][:4]  # not what it would say
    with torch.inference_mode():
        logits = en_hi.model(inputs.src, inputs.tgt)[0].double().numpy()  # (T, vocab)
    r = run_experiment("temperature", en_hi, SOURCE, target=SHUFFLED, position=3)
    assert r["context_tokens"] == inputs.target_tokens[0]
    assert r["greedy_token"] == tok.token_strings([int(logits[3].argmax())])[0]
    assert r["next_token"]["top_probability"] == pytest.approx(tempered(logits[3], 1).max())
    for first in (
        run_experiment("temperature", en_hi, SOURCE, target=SHUFFLED),
        temperature.run(en_hi, SOURCE, SHUFFLED),
    ):
        assert first["position"] == 0 and first["context_tokens"] == inputs.target_tokens[0][:1]
        assert first["next_token"]["top_probability"] == pytest.approx(tempered(logits[0], 1).max())


def test_temperature_refuses_what_it_cannot_take(en_hi):
    for t in (0, -1, 100.5, float("nan")):
        with pytest.raises(UserError, match="above 0 and at most 100"):
            run_experiment("temperature", en_hi, SOURCE, temperature=t)
    assert run_experiment("temperature", en_hi, SOURCE, temperature=100)["temperature"] == 100.0
    n = len(en_hi.prepare_run(SOURCE).target_tokens[0])
    for position in (-1, n):
        with pytest.raises(UserError, match=f"Position {position} is outside the decoder input .positions 0 to "
                                            f"{n - 1}."):  # fmt: skip
            run_experiment("temperature", en_hi, SOURCE, position=position)


@pytest.mark.parametrize("max_len, room", [(12, 8), (40, 20), (5, 1)])
def test_a_decoder_only_model_continues_into_the_positions_left_greedily_and_sampled(en_hi, max_len, room):
    """room: the new tokens there is space for after the start token and three words, at most 20."""
    gpt = family_bundle(en_hi, {**FAMILIES["gpt2_like"], "max_len": max_len})
    tok = gpt.tgt_tokenizer
    r = run_experiment("temperature", gpt, SHUFFLED, temperature=2.0, seed=3)
    prompt = tok.encode(SHUFFLED)
    greedy = greedy_by_hand(gpt, [gpt.start_id(), *prompt], room)
    assert len(greedy) == room  # the random model does not end early
    assert r["greedy"]["text"] == tok.decode(greedy)
    sampled = continue_ids(gpt, prompt, Continuation(max_new=room, sample=True, temperature=2.0, seed=3))
    assert r["sampled"] == {"text": tok.decode(sampled), "seed": 3}
    if room > 1:
        other = continue_ids(gpt, prompt, Continuation(max_new=room, sample=True, temperature=2.0, seed=4))
        assert sampled != other
    assert f"(at T = 1: {r['at_1']['entropy']:.2f})" in r["summary"]
    cool = run_experiment("temperature", gpt, SHUFFLED, temperature=1.0, seed=3)["summary"]
    assert (
        f"has entropy {r['at_1']['entropy']:.2f} nats and top probability {r['at_1']['top_probability']:.2f}; "
        "sampled with seed 3"
    ) in cool  # at T = 1 there is no T = 1 figure to add
