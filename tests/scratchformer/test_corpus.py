"""scratchformer.datasets.corpus.read_corpus: text, JSONL and CSV corpora and bundled tasks read in order, and each
kind of bad input refused in one sentence that says where."""

from __future__ import annotations

import pytest

from scratchformer.datasets.corpus import read_corpus
from scratchformer.errors import UserError
from scratchformer.tasks import TASKS, load_task_splits


def test_a_text_file_gives_one_input_a_line_without_blank_lines(tmp_path):
    f = tmp_path / "c.txt"
    f.write_text("\ufeffthe girl eats an apple\n\n  the boy runs  \r\nलड़का सेब खाता है\n", encoding="utf-8")
    assert read_corpus(str(f)) == ["the girl eats an apple", "the boy runs", "लड़का सेब खाता है"]
    assert read_corpus(str(f), limit=2) == ["the girl eats an apple", "the boy runs"]


def test_jsonl_and_csv_read_the_source_field(tmp_path):
    j = tmp_path / "c.jsonl"
    j.write_text('{"source": "a b", "target": "x"}\n\n{"source": "c d", "id": 2}\n', encoding="utf-8")
    assert read_corpus(str(j)) == ["a b", "c d"]
    c = tmp_path / "c.csv"
    c.write_text('id,source\n1,"a, b"\n2,c d\n', encoding="utf-8")
    assert read_corpus(str(c)) == ["a, b", "c d"]


def test_a_task_gives_its_training_sources_in_the_split_order():
    for name in ("en-hi", "copy"):
        train = load_task_splits(name)["train"]
        assert read_corpus(f"task:{name}", limit=50) == [p.source for p in train[:50]]
    assert len(read_corpus("task:reverse")) == len(load_task_splits("reverse")["train"])


def test_reading_stops_at_the_limit_without_decoding_the_rest(tmp_path):
    f = tmp_path / "big.txt"
    f.write_bytes(b"one\ntwo\n" + b"\xff\xfe broken\n" * 1000)
    assert read_corpus(str(f), limit=2) == ["one", "two"]  # the bad bytes after the limit are never read
    with pytest.raises(UserError, match="line 3 holds the byte 0xff"):
        read_corpus(str(f))


@pytest.mark.parametrize("content, expected", [
    (b"", "holds no inputs"),
    (b"\n  \n", "holds no inputs"),
])  # fmt: skip
def test_an_empty_corpus_is_one_sentence(tmp_path, content, expected):
    f = tmp_path / "e.txt"
    f.write_bytes(content)
    with pytest.raises(UserError, match=expected):
        read_corpus(str(f))


def test_bad_records_name_their_line(tmp_path):
    j = tmp_path / "c.jsonl"
    j.write_text('{"source": "a"}\n["a"]\n', encoding="utf-8")
    with pytest.raises(UserError, match=r"line 2: each line must be one JSON object"):
        read_corpus(str(j))
    j.write_text('{"source": "a"}\n\n{"text": "b"}\n', encoding="utf-8")
    with pytest.raises(UserError, match=r"line 3: the record has no \"source\" field"):
        read_corpus(str(j))
    j.write_text('{"source": "a"}\n{"source": \n', encoding="utf-8")
    with pytest.raises(UserError, match=r"line 2: not JSON"):
        read_corpus(str(j))
    c = tmp_path / "c.csv"
    c.write_text("text,id\na,1\n", encoding="utf-8")
    with pytest.raises(UserError, match=r"must name the columns, one of them 'source'"):
        read_corpus(str(c))


def test_missing_paths_folders_unknown_tasks_and_bad_limits(tmp_path):
    with pytest.raises(UserError, match="does not exist"):
        read_corpus(str(tmp_path / "nope.txt"))
    with pytest.raises(UserError, match="is a folder"):
        read_corpus(str(tmp_path))
    with pytest.raises(UserError, match="There is no bundled task 'fr-de'; the tasks are " + ", ".join(TASKS)):
        read_corpus("task:fr-de")
    with pytest.raises(UserError, match="limit"):
        read_corpus("task:copy", limit=0)
