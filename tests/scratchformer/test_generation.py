"""A decoder-only model continues the text: `translate` greedy equals transformers' generate(), sampling equals
generate(do_sample=True) under the same seed and repeats with it, top-k 1 is greedy, bad options are one
sentence, `trace` reads the continuation, and the step-by-step timeline equals transformers' attention rows."""

import json

import pytest
import torch
from transformers import AutoTokenizer

from scratchformer.cli import main
from scratchformer.loading.bundle import load_model
from scratchformer.running.generation import Continuation, continuation_timeline, continue_ids
from tests.scratchformer.test_importers_gpt2 import _save_gpt2

PROMPT = "machine learning using PyTorch"  # 6 GPT-2 tokens; with the start token 7 of the fixture's 32 positions
N_POSITIONS = 32


@pytest.fixture(scope="module")
def gpt2(tmp_path_factory):
    directory = tmp_path_factory.mktemp("gpt2-generate")
    ref = _save_gpt2(directory, seed=1, n_positions=N_POSITIONS)
    with torch.no_grad():  # sharper logits (×5): the greedy argmax is never a near-tie that float noise could flip
        ref.transformer.ln_f.weight.mul_(5.0)
        ref.transformer.ln_f.bias.mul_(5.0)
    ref.save_pretrained(str(directory), safe_serialization=True)
    tokenizer = AutoTokenizer.from_pretrained(str(directory))
    start = tokenizer.convert_tokens_to_ids("<|endoftext|>")
    ids = torch.tensor([[start] + tokenizer.encode(PROMPT)])  # (1, 6): the text behind <|endoftext|>, as ours reads it
    return directory, ref.eval(), tokenizer, ids


def _generate(ref, ids, **kwargs):
    """transformers' continuation: the new ids, cut at the end token (ours stops there and does not print it)."""
    with torch.no_grad():
        out = ref.generate(ids, pad_token_id=50256, return_dict_in_generate=True, output_scores=True, **kwargs)
    new = out.sequences[0, ids.shape[1]:].tolist()
    return (new[: new.index(50256)] if 50256 in new else new), out.scores


def _cli(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_greedy_continuation_equals_transformers_generate(gpt2, capsys):
    directory, ref, tokenizer, ids = gpt2
    expected, scores = _generate(ref, ids, max_new_tokens=12, do_sample=False)
    for logits in scores:  # every step's winner clears the runner-up: the comparison is not decided by noise
        top2 = logits[0].topk(2).values
        assert top2[0] - top2[1] > 1e-3
    assert len(expected) == 12 and len(set(expected)) > 3
    code, out, err = _cli(capsys, "translate", "--model", str(directory), "--source", PROMPT, "--max-new", "12")
    assert code == 0, err
    assert out == tokenizer.decode(expected) + "\n"  # the continuation alone, not the prompt


def test_sampling_equals_transformers_under_the_same_seed(gpt2):
    directory, ref, _, ids = gpt2
    bundle = load_model(str(directory))
    prompt = ids[0, 1:].tolist()
    for temperature, top_k, seed in ((1.0, None, 0), (0.7, 40, 3)):
        ours = continue_ids(bundle, prompt, Continuation(10, True, temperature, top_k, seed))
        torch.manual_seed(seed)  # transformers draws with torch.multinomial from the global generator
        theirs, _ = _generate(ref, ids, max_new_tokens=10, do_sample=True, temperature=temperature,
                              top_k=top_k or 0, top_p=1.0)  # fmt: skip
        assert ours == theirs, (temperature, top_k, seed)


def test_sampling_repeats_with_a_seed_and_differs_across_seeds(gpt2, capsys):
    directory = str(gpt2[0])

    def sampled(seed):
        code, out, err = _cli(capsys, "translate", "--model", directory, "--source", PROMPT, "--max-new", "8",
                              "--temperature", "1.2", "--seed", str(seed))  # fmt: skip
        assert code == 0, err
        return out

    first = sampled(4)
    assert sampled(4) == first
    assert len({first, sampled(5), sampled(6)}) == 3


def test_top_k_1_is_greedy(gpt2, capsys):
    directory = str(gpt2[0])
    _, greedy, _ = _cli(capsys, "translate", "--model", directory, "--source", PROMPT, "--max-new", "10")
    for seed in ("0", "9"):
        code, out, err = _cli(capsys, "translate", "--model", directory, "--source", PROMPT, "--max-new", "10",
                              "--top-k", "1", "--temperature", "3", "--seed", seed)  # fmt: skip
        assert code == 0, err
        assert out == greedy


@pytest.mark.parametrize(("options", "message"), [
    (["--temperature", "0"], "--temperature must be above 0, not 0."),
    (["--temperature", "-0.5"], "--temperature must be above 0, not -0.5."),
    (["--top-k", "0"], "--top-k must be at least 1, not 0."),
    (["--max-new", "0"], "--max-new must be at least 1, not 0."),
    (["--max-new", "26"], "26 new tokens do not fit: the text has 6 tokens and this model reads at most 32 positions "
                          "(with the start token), so ask for at most 25."),
])  # fmt: skip
def test_bad_options_are_one_sentence(gpt2, capsys, options, message):
    code, out, err = _cli(capsys, "translate", "--model", str(gpt2[0]), "--source", PROMPT, *options)
    assert code == 2 and out == ""
    assert err.strip() == f"scratchformer: {message}"


def test_the_longest_continuation_that_fits_is_allowed(gpt2, capsys):
    directory, ref, tokenizer, ids = gpt2
    expected, _ = _generate(ref, ids, max_new_tokens=25, do_sample=False)  # 32 − 1 − 6
    code, out, err = _cli(capsys, "translate", "--model", str(directory), "--source", PROMPT, "--max-new", "25")
    assert code == 0, err
    assert out == tokenizer.decode(expected) + "\n"


def test_sampling_options_are_refused_for_a_translation_model(capsys):
    code, out, err = _cli(capsys, "translate", "--model", "blog", "--source", "machine learning", "--seed", "3")
    assert code == 2 and "continue a decoder-only model's text" in err and len(err.strip().splitlines()) == 1


def test_trace_reads_the_greedy_continuation_behind_the_text(gpt2, capsys):
    directory, ref, tokenizer, ids = gpt2
    expected, _ = _generate(ref, ids, max_new_tokens=20, do_sample=False)  # trace continues 20 tokens
    code, out, err = _cli(capsys, "trace", "--model", str(directory), "--source", PROMPT, "--json")
    assert code == 0, err
    data = json.loads(out)
    assert data["decoder_input"] == "generated"
    assert data["translation"] == tokenizer.decode(expected)
    every = ids[0].tolist() + expected
    assert len(data["target_tokens"][0]) == len(every) and data["target_tokens"][0][0] == "<|endoftext|>"
    shapes = {s["name"]: s["shape"] for s in data["steps"]}
    assert shapes["decoder.0.self_attn.weights"] == [1, 4, len(every), len(every)]
    code, out, _ = _cli(capsys, "trace", "--model", str(directory), "--source", PROMPT, "--json", "--start-only")
    alone = json.loads(out)
    assert alone["decoder_input"] == "typed" and len(alone["target_tokens"][0]) == ids.shape[1]


def test_the_timeline_steps_through_the_continuation_with_transformers_rows(gpt2):
    """Each step's new self-attention row and top-k equal row t of transformers' pass over the whole text."""
    directory, ref, _, ids = gpt2
    bundle = load_model(str(directory))
    prompt = ids[0, 1:].tolist()
    how = Continuation(max_new=6)
    made = continue_ids(bundle, prompt, how)
    tl = continuation_timeline(bundle, prompt, how, forced=made, k=5)
    assert [s.token_id for s in tl.steps] == made and tl.mode == "free"
    assert tl.source_tokens[0] == "<|endoftext|>" and len(tl.source_tokens) == ids.shape[1]
    full = torch.tensor([ids[0].tolist() + made])  # (1, 7 + 6)
    with torch.no_grad():
        out = ref(full, output_attentions=True)
    probs = out.logits[0].softmax(-1)  # (T, vocab)
    for t, step in enumerate(tl.steps):
        row = ids.shape[1] - 1 + t  # the position read at step t: the text's last token, then each new token
        assert step.position == row and step.cross_attention is None
        for layer, attention in enumerate(out.attentions):
            torch.testing.assert_close(torch.from_numpy(step.self_attention[layer]), attention[0, :, row, : row + 1],
                                       atol=1e-4, rtol=0)  # fmt: skip
        top_p, top_i = probs[row].topk(5)
        assert [p for _, p in step.top_k] == pytest.approx(top_p.tolist(), abs=1e-4)
        assert step.token == bundle.tgt_tokenizer.token_strings([made[t]])[0]
    assert top_i[0].item() == made[-1]  # greedy: the last step's most likely token is the one it emitted
    # forced tokens that stop short of max_new: the model chose its end token there, and a last step says so
    short = continuation_timeline(bundle, prompt, how, forced=made[:2])
    assert [s.token_id for s in short.steps] == made[:2] + [50256]


def test_a_text_longer_than_the_model_reads_is_one_sentence(gpt2, capsys):
    code, out, err = _cli(capsys, "translate", "--model", str(gpt2[0]), "--source", " ".join(["word"] * 40))
    assert code == 2 and out == ""
    assert err.strip() == ("scratchformer: The text has 40 tokens but this model reads at most 31; shorten the "
                           "text.")
