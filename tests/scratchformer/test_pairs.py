"""scratchformer.datasets.pairs.read_pairs: JSONL and CSV pairs files, corrupt or corrupt_word (the rule --corrupt-word
uses), optional fields, and every bad record refused in one sentence naming its line."""

from __future__ import annotations

import pytest

from scratchformer.analyses.sweep import corrupted_text
from scratchformer.datasets.pairs import PairSpec, read_pairs
from scratchformer.errors import UserError


def test_jsonl_pairs_with_corrupt_or_corrupt_word(tmp_path):
    f = tmp_path / "p.jsonl"
    f.write_text('{"source": "the girl eats an apple", "corrupt_word": "1=boy", "answer": "id:5"}\n\n'
                 '{"source": "a b c", "corrupt": "a d c", "target": "x y", "wrong": " John", "template": 3}\n'
                 '{"source": "a b c", "corrupt": "a d c", "target": "", "answer": null}\n',
                 encoding="utf-8")  # fmt: skip
    assert read_pairs(f) == [
        PairSpec("the girl eats an apple", None, "the boy eats an apple", "id:5", None, 1),
        PairSpec("a b c", "x y", "a d c", None, " John", 3),  # a metric token keeps its space
        PairSpec("a b c", None, "a d c", None, None, 4),
    ]
    assert read_pairs(f)[0].corrupt == corrupted_text("the girl eats an apple", None, "1=boy")


def test_csv_pairs_with_empty_cells_as_absent(tmp_path):
    f = tmp_path / "p.csv"
    f.write_text("source,corrupt,corrupt_word,answer\n"
                 "the girl eats,,0=a,\n"
                 '"x, y",z,,id:3\n', encoding="utf-8")  # fmt: skip
    assert read_pairs(f) == [PairSpec("the girl eats", None, "a girl eats", None, None, 2),
                             PairSpec("x, y", None, "z", "id:3", None, 3)]  # fmt: skip


@pytest.mark.parametrize("lines, expected", [
    ('{"source": "a b", "corrupt": "a c"}\n"a b"\n', r"line 2: each line must be one JSON object"),
    ('{"corrupt": "a c"}\n', r"line 1: the pair has no \"source\""),
    ('{"source": "a b"}\n', r"line 1: give a pair either \"corrupt\" .* not neither"),
    ('{"source": "a b", "corrupt": "a c", "corrupt_word": "1=c"}\n', r"line 1: .* not both"),
    ('\n{"source": "a b", "corrupt_word": "5=c"}\n', r"line 2: corrupt_word '5=c': the source has words 0 to 1"),
    ('{"source": "a b", "corrupt_word": "one=c"}\n', r"line 1: corrupt_word 'one=c': write I=WORD"),
    ('{"source": "a b", "corrupt": 7}\n', r"line 1: 'corrupt' must be text"),
    ('{"source": "a b", "corrupt": "a c"\n', r"line 1: not JSON"),
    ("\n\n", r"holds no pairs"),
])  # fmt: skip
def test_bad_jsonl_records_name_their_line(tmp_path, lines, expected):
    f = tmp_path / "p.jsonl"
    f.write_text(lines, encoding="utf-8")
    with pytest.raises(UserError, match=expected):
        read_pairs(f)


def test_bad_files(tmp_path):
    with pytest.raises(UserError, match="does not exist"):
        read_pairs(tmp_path / "none.jsonl")
    with pytest.raises(UserError, match="is a folder"):
        read_pairs(tmp_path)
    txt = tmp_path / "p.txt"
    txt.write_text("a b\n", encoding="utf-8")
    with pytest.raises(UserError, match=r"must be JSONL \(.jsonl"):
        read_pairs(txt)
    bad = tmp_path / "p.jsonl"
    bad.write_bytes(b'{"source": "a b", "corrupt": "a c"}\n{"source": "\xe9"}\n')
    with pytest.raises(UserError, match="not UTF-8 text: line 2 holds the byte 0xe9"):
        read_pairs(bad)
    c = tmp_path / "p.csv"
    c.write_text("clean,corrupt\na,b\n", encoding="utf-8")
    with pytest.raises(UserError, match="'source'"):
        read_pairs(c)
