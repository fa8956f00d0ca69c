"""Tests of the training tasks: the toy English→Hindi grammar, copy/reverse/sort, and TSV splits."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import unicodedata
from collections import Counter
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scratchformer.tasks import TASKS, Pair, algorithmic, en_hi, load_task_splits, read_pairs_tsv, read_tsv, write_tsv
from scratchformer.tasks.en_hi import _NP, ADJECTIVES, NOUNS, PRONOUNS, VERBS, _Clause, _render

ROOT = Path(__file__).resolve().parents[2]
AUX = {"है", "हैं", "हूँ", "हो"}
POSTPOSITIONS = {"में", "पर", "को", "के", "से"}


def nfc(text: str) -> str:
    return unicodedata.normalize("NFC", text)


@pytest.fixture(scope="module")
def splits() -> dict[str, list[Pair]]:
    return en_hi.make_splits()


@pytest.fixture(scope="module")
def sample(splits) -> list[Pair]:
    return [p for part in splits.values() for p in part]


def noun(en: str):
    return next(n for n in NOUNS if n.en == en)


def verb(en: str, hi: str | None = None):
    return next(v for v in VERBS if v.en == en and (hi is None or v.hi == nfc(hi)))


def adjective(en: str, hi: str | None = None):
    return next(a for a in ADJECTIVES if a.en == en and (hi is None or a.hi == nfc(hi)))


def pronoun(en: str):
    return next(p for p in PRONOUNS if p.en == en)


# ------------------------------------------------------------------------------------------- fixed pairs


REQUIRED = [
    ("the boy eats an apple", "लड़का सेब खाता है", (1, 4, 2, 2)),
    ("the girl eats an apple", "लड़की सेब खाती है", (1, 4, 2, 2)),
    ("we are friends", "हम दोस्त हैं", (0, 2, 1)),
]


@pytest.mark.parametrize("source,target,alignment", REQUIRED)
def test_required_pairs_are_in_train(splits, source, target, alignment):
    expected = Pair(source, nfc(target), alignment)
    assert expected in en_hi.FIXED_PAIRS
    assert expected in splits["train"]
    assert all(p.source != source for p in splits["valid"] + splits["test"])


def test_required_pairs_come_from_the_grammar():
    # rendered from clauses by the same code that writes every other sentence
    boy = _render(_Clause(_NP(noun=noun("boy")), verb("eat"), obj=_NP(noun=noun("apple"), det="a")))
    assert (boy.source, boy.target, boy.alignment) == ("the boy eats an apple", nfc("लड़का सेब खाता है"), (1, 4, 2, 2))
    we = _render(_Clause(_NP(pronoun=pronoun("we")), pred_noun=_NP(noun=noun("friend"), plural=True, det="a")))
    assert (we.source, we.target) == ("we are friends", nfc("हम दोस्त हैं"))


# ----------------------------------------------------------------------------------- hand-checked sentences


HAND_CHECKED = [
    # oblique plural before a postposition, masculine plural agreement, company
    (
        _Clause(_NP(noun=noun("boy"), plural=True), verb("play"), company=_NP(noun=noun("girl"), plural=True)),
        "the boys play with the girls",
        "लड़के लड़कियों के साथ खेलते हैं",
        (1, 5, 3, 3, 2, 2),
    ),
    # indirect object (oblique singular + को) before the direct object; feminine plural object
    (
        _Clause(
            _NP(noun=noun("girl")),
            verb("give"),
            obj=_NP(noun=noun("book"), plural=True, det="a"),
            io=_NP(noun=noun("boy")),
        ),
        "the girl gives books to the boy",
        "लड़की लड़के को किताबें देती है",
        (1, 6, 4, 3, 2, 2),
    ),
    # continuous, negated, light-verb compound: नहीं goes before कर
    (
        _Clause(_NP(pronoun=pronoun("she")), verb("clean"), continuous=True, negate=True, obj=_NP(noun=noun("room"))),
        "she is not cleaning the room",
        "वह कमरा साफ़ नहीं कर रही है",
        (0, 5, 3, 2, 3, 3, 1),
    ),
    # adjective and possessive in the oblique masculine: -e forms; the place goes before the verb
    (
        _Clause(
            _NP(pronoun=pronoun("i")),
            verb("sleep"),
            place=("in", _NP(noun=noun("room"), det="his", adj=adjective("big"))),
        ),
        "i sleep in his big room",
        "मैं उसके बड़े कमरे में सोता हूँ",
        (0, 3, 4, 5, 2, 1, 1),
    ),
    # animate object takes को and the oblique; numeral; feminine plural subject
    (
        _Clause(
            _NP(noun=noun("girl"), plural=True, det="two"),
            verb("call"),
            continuous=True,
            obj=_NP(noun=noun("dog"), plural=True),
        ),
        "two girls are calling the dogs",
        "दो लड़कियाँ कुत्तों को बुला रही हैं",
        (0, 1, 5, 5, 3, 3, 2),
    ),
    # motion: "to" has no Hindi word; the destination is a bare oblique noun
    (
        _Clause(
            _NP(pronoun=pronoun("they")), verb("go"), motion=("to", _NP(noun=noun("village"), adj=adjective("big")))
        ),
        "they go to the big village",
        "वे बड़े गाँव जाते हैं",
        (0, 4, 5, 1, 1),
    ),
    # copula with an -ā adjective agreeing with a feminine plural subject, and with तुम
    (
        _Clause(_NP(noun=noun("girl"), plural=True), pred_adj=adjective("tall")),
        "the girls are tall",
        "लड़कियाँ लंबी हैं",
        (1, 3, 2),
    ),
    (
        _Clause(_NP(pronoun=pronoun("you")), pred_adj=adjective("hungry"), negate=True),
        "you are not hungry",
        "तुम भूखे नहीं हो",
        (0, 3, 2, 1),
    ),
    # feminine predicate noun; a/an before a vowel sound
    (
        _Clause(_NP(pronoun=pronoun("she")), pred_noun=_NP(noun=noun("student"), det="a", adj=adjective("honest"))),
        "she is an honest student",
        "वह ईमानदार छात्रा है",
        (0, 3, 4, 1),
    ),
    # locative copula with a two-word postposition and a demonstrative in the oblique
    (
        _Clause(_NP(noun=noun("cat"), plural=True, det="near"), place=("under", _NP(noun=noun("tree"), det="far"))),
        "these cats are under that tree",
        "ये बिल्लियाँ उस पेड़ के नीचे हैं",
        (0, 1, 4, 5, 3, 3, 2),
    ),
    # ditransitive + place, mass noun object without article
    (
        _Clause(
            _NP(noun=noun("man")),
            verb("sell"),
            obj=_NP(noun=noun("rice"), det="a"),
            io=_NP(noun=noun("woman"), plural=True),
            place=("in", _NP(noun=noun("market"))),
        ),
        "the man sells rice to the women in the market",
        "आदमी बाज़ार में औरतों को चावल बेचता है",
        (1, 9, 7, 6, 4, 3, 2, 2),
    ),
]


@pytest.mark.parametrize("clause,source,target,alignment", HAND_CHECKED)
def test_hand_checked_sentences(clause, source, target, alignment):
    pair = _render(clause)
    assert pair.source == source
    assert pair.target == nfc(target)
    assert pair.alignment == alignment


# -------------------------------------------------------------------------------------------- determinism


@settings(max_examples=15, deadline=None)
@given(seed=st.integers(min_value=0, max_value=2**32 - 1))
def test_same_seed_same_pairs_other_seed_other_pairs(seed):
    first = en_hi.generate_pairs(60, seed=seed)
    assert first == en_hi.generate_pairs(60, seed=seed)
    assert first != en_hi.generate_pairs(60, seed=seed + 1)


def test_generation_does_not_depend_on_the_hash_seed():
    code = (
        "import hashlib; from scratchformer.tasks import en_hi, algorithmic\n"
        "text = repr(en_hi.generate_pairs(300, seed=7)) + repr(algorithmic.generate_task('sort', 50, seed=3))\n"
        "print(hashlib.sha256(text.encode()).hexdigest())"
    )
    digests = set()
    for hash_seed in ("1", "2"):
        env = dict(os.environ, PYTHONHASHSEED=hash_seed, PYTHONPATH=str(ROOT))
        out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
        digests.add(out.stdout.strip())
    here = repr(en_hi.generate_pairs(300, seed=7)) + repr(algorithmic.generate_task("sort", 50, seed=3))
    digests.add(hashlib.sha256(here.encode()).hexdigest())
    assert len(digests) == 1


def test_committed_splits_are_regenerated_byte_identically(tmp_path):
    paths = en_hi.write_splits(tmp_path)
    for name, path in paths.items():
        committed = ROOT / "data" / "en_hi" / f"{name}.tsv"
        assert committed.read_bytes() == path.read_bytes(), f"data/en_hi/{name}.tsv is stale: regenerate it"


def test_committed_samples_are_regenerated_byte_identically(tmp_path):
    for name, path in en_hi.write_samples(tmp_path).items():
        assert (ROOT / "data" / "samples" / path.name).read_bytes() == path.read_bytes(), name


# ------------------------------------------------------------------------------------------------- splits


def test_splits_are_disjoint_deduplicated_and_sized(splits):
    assert {k: len(v) for k, v in splits.items()} == en_hi.DEFAULT_SIZES
    sources = {k: [p.source for p in v] for k, v in splits.items()}
    for name, items in sources.items():
        assert len(set(items)) == len(items), f"{name} repeats a sentence"
    assert not set(sources["train"]) & set(sources["valid"])
    assert not set(sources["train"]) & set(sources["test"])
    assert not set(sources["valid"]) & set(sources["test"])


def test_small_splits_keep_fixed_pairs_and_stay_disjoint():
    small = en_hi.make_splits(seed=3, n_train=50, n_valid=20, n_test=20)
    assert small["train"][:3] == list(en_hi.FIXED_PAIRS)
    assert [len(small[k]) for k in ("train", "valid", "test")] == [50, 20, 20]
    seen = [p.source for part in small.values() for p in part]
    assert len(seen) == len(set(seen))
    with pytest.raises(ValueError):
        en_hi.make_splits(n_train=2)


def test_the_grammar_is_a_function(sample):
    # one English sentence never gets two Hindi translations (make_splits would also refuse)
    translations: dict[str, str] = {}
    for pair in sample + en_hi.generate_pairs(20000, seed=11):
        assert translations.setdefault(pair.source, pair.target) == pair.target


# ---------------------------------------------------------------------------------------- form and lexicon


def test_surface_form(sample):
    for pair in sample:
        assert pair.source == " ".join(pair.source.split()) and pair.target == " ".join(pair.target.split())
        assert all(word.isascii() and word.isalpha() and word.islower() for word in pair.source.split())
        assert pair.target == nfc(pair.target)
        assert "।" not in pair.target and not any(c.isascii() for c in pair.target.replace(" ", ""))
        assert 2 <= len(pair.source.split()) <= en_hi.MAX_SOURCE_WORDS
        assert 2 <= len(pair.target.split()) <= en_hi.MAX_TARGET_WORDS


def test_every_target_word_has_one_valid_source_index(sample):
    for pair in sample:
        src, tgt = pair.source.split(), pair.target.split()
        assert len(pair.alignment) == len(tgt)
        assert all(isinstance(i, int) and 0 <= i < len(src) for i in pair.alignment)
        # articles have no Hindi word, so no Hindi word points at one
        assert all(src[i] not in ("the", "a", "an") for i in pair.alignment)


def test_auxiliaries_align_to_the_verb_or_copula(sample):
    for pair in sample:
        src, tgt = pair.source.split(), pair.target.split()
        assert tgt[-1] in AUX
        aligned = src[pair.alignment[-1]]
        assert aligned in ("am", "is", "are") or any(aligned in (v.en, v.en_s) for v in VERBS)


def test_vocabulary_is_exact(splits, sample):
    vocab = en_hi.vocabulary()
    assert en_hi.LEXICON_SIZE == {lang: len(words) for lang, words in vocab.items()} == en_hi.lexicon_size()
    for lang, side in (("en", "source"), ("hi", "target")):
        used = {w for p in sample for w in getattr(p, side).split()}
        assert used <= set(vocab[lang]), sorted(used - set(vocab[lang]))
        in_train = {w for p in splits["train"] for w in getattr(p, side).split()}
        assert in_train == set(vocab[lang]), f"{lang} words missing from train: {sorted(set(vocab[lang]) - in_train)}"


def test_lexicon_size_and_consistency():
    lemmas = {n.en for n in NOUNS} | {a.en for a in ADJECTIVES} | {v.en for v in VERBS} | {p.en for p in PRONOUNS}
    assert 120 <= len(lemmas) <= 220
    assert 300 <= en_hi.LEXICON_SIZE["en"] <= 600 and 300 <= en_hi.LEXICON_SIZE["hi"] <= 700
    # nouns never share an English word with adjectives or verbs (the tests below rely on it)
    nouns = {n.en for n in NOUNS} | {n.en_plural for n in NOUNS if n.en_plural}
    verbs = {f for v in VERBS for f in (v.en, v.en_s, v.en_ing) if f}
    assert not nouns & {a.en for a in ADJECTIVES} and not nouns & verbs
    assert verbs & {a.en for a in ADJECTIVES} == {"clean"}  # "they clean the room", "the room is clean"
    # an English adjective with two Hindi words ("old": बूढ़ा, पुराना) never fits the same noun twice
    for n in NOUNS:
        fitting = [a.en for a in ADJECTIVES if a.fits(n)]
        assert len(fitting) == len(set(fitting)), n.en


# -------------------------------------------------------------------------------------------- agreement


def _subject_and_verb(pair: Pair):
    """(subject head word, index of the word after it) when the sentence starts with [det] [adj] head."""
    src = pair.source.split()
    heads = {n.en for n in NOUNS} | {n.en_plural for n in NOUNS if n.en_plural} | {p.en for p in PRONOUNS}
    for i, word in enumerate(src[:4]):
        if word in heads:
            return word, i + 1
    raise AssertionError(pair.source)


FEM_SG = {n.en for n in NOUNS if n.gender == "f"} | {"she"}
FEM_PL = {n.en_plural for n in NOUNS if n.gender == "f" and n.en_plural}
MASC_PL = {n.en_plural for n in NOUNS if n.gender == "m" and n.en_plural} | {"we", "they", "you"}
PRESENT_3SG = {v.en_s for v in VERBS}
PRESENT_BASE = {v.en for v in VERBS}
PRESENT_ING = {v.en_ing for v in VERBS if v.en_ing}


def _verb_words(pair: Pair, index: int) -> list[str]:
    return [w for w, i in zip(pair.target.split(), pair.alignment) if i == index]


def test_feminine_singular_subjects_take_ti(sample):
    checked = 0
    for pair in sample:
        head, v = _subject_and_verb(pair)
        src = pair.source.split()
        if head in FEM_SG and src[v] in PRESENT_3SG:
            words = _verb_words(pair, v)
            assert words[-1] == "है" and words[-2].endswith("ती"), (pair.source, pair.target)
            checked += 1
        elif head in FEM_SG and src[v] == "is":
            ing = v + 2 if src[v + 1] == "not" else v + 1
            if src[ing] in PRESENT_ING:  # continuous: "is eating" → "खा रही है"
                assert _verb_words(pair, ing)[-1] == "रही", (pair.source, pair.target)
                checked += 1
    assert checked > 1500


def test_plural_subjects_take_plural_agreement(sample):
    checked = Counter()
    for pair in sample:
        head, v = _subject_and_verb(pair)
        src = pair.source.split()
        if src[v] not in PRESENT_BASE or head == "i":
            continue
        words = _verb_words(pair, v)
        expected_aux = "हो" if head == "you" else "हैं"
        if head in MASC_PL:
            assert words[-1] == expected_aux and words[-2].endswith("ते"), (pair.source, pair.target)
            checked["m"] += 1
        elif head in FEM_PL:
            assert words[-1] == "हैं" and words[-2].endswith("ती"), (pair.source, pair.target)
            checked["f"] += 1
    assert checked["m"] > 500 and checked["f"] > 200


def test_masculine_singular_subjects_take_ta(sample):
    masc_sg = {n.en for n in NOUNS if n.gender == "m"} | {"he"}
    for pair in sample:
        head, v = _subject_and_verb(pair)
        if head in masc_sg and pair.source.split()[v] in PRESENT_3SG:
            words = _verb_words(pair, v)
            assert words[-1] == "है" and words[-2].endswith("ता"), (pair.source, pair.target)


def test_pronouns_take_their_auxiliary(sample):
    expected = {"i": "हूँ", "you": "हो", "he": "है", "she": "है", "we": "हैं", "they": "हैं"}
    first_hindi = {"i": "मैं", "you": "तुम", "he": "वह", "she": "वह", "we": "हम", "they": "वे"}
    for pair in sample:
        first = pair.source.split()[0]
        if first in expected:
            assert pair.target.split()[-1] == expected[first], pair
            assert pair.target.split()[0] == first_hindi[first], pair


def test_nouns_before_postpositions_are_oblique(sample):
    direct_only = set()
    for n in NOUNS:
        sg_dir, sg_obl, pl_dir, pl_obl = n.forms
        direct_only |= {sg_dir, pl_dir} - {sg_obl, pl_obl}
    for pair in sample:
        tgt = pair.target.split()
        for before, word in zip(tgt, tgt[1:]):
            if word in POSTPOSITIONS:
                assert before not in direct_only, (pair.source, pair.target)


def _main_verb(pair: Pair) -> int | None:
    """Index of the English main verb: right after the subject, or after "is [not]"; None for copulas."""
    src = pair.source.split()
    _, v = _subject_and_verb(pair)
    if src[v] in ("am", "is", "are"):
        v += 1 + (src[v + 1] == "not")
        return v if src[v] in PRESENT_ING else None
    assert src[v] in PRESENT_3SG | PRESENT_BASE, pair
    return v


def test_hindi_is_verb_final(sample):
    reordered = 0
    for pair in sample:
        src, tgt, al = pair.source.split(), pair.target.split(), pair.alignment
        v = _main_verb(pair)
        if v is None:
            continue
        positions = [j for j, i in enumerate(al) if i == v]
        # the verb's words end the sentence, apart from नहीं, रहा/रही/रहे and the auxiliary after them
        tail = tgt[positions[0] :]
        assert all(
            w in AUX or w in ("नहीं", "रहा", "रही", "रहे") or al[j] == v for j, w in enumerate(tail, start=positions[0])
        ), pair
        assert tgt[-1] in AUX and (al[-1] == v or src[al[-1]] in ("am", "is", "are"))
        # everything the English puts after the verb comes before it in Hindi
        after = [j for j, i in enumerate(al) if i > v]
        assert all(j < positions[0] for j in after), pair
        reordered += bool(after)
    assert reordered > 3000


def test_attributive_adjectives_agree(sample):
    feminine = {a.en: set() for a in ADJECTIVES if len(set(a.forms)) == 3}
    for a in ADJECTIVES:
        if a.en in feminine:
            feminine[a.en].add(a.forms[1])
    fem_forms = {f for n in NOUNS if n.gender == "f" for f in n.forms}
    fem_forms -= {f for n in NOUNS if n.gender == "m" for f in n.forms}
    checked = 0
    for pair in sample:
        src, tgt, al = pair.source.split(), pair.target.split(), pair.alignment
        for j, i in enumerate(al[:-1]):
            if src[i] in feminine and al[j + 1] == i + 1 and tgt[j + 1] in fem_forms:
                assert tgt[j] in feminine[src[i]], (pair.source, pair.target)
                checked += 1
    assert checked > 500


# ---------------------------------------------------------------------------------------- algorithmic tasks


@settings(max_examples=40, deadline=None)
@given(
    name=st.sampled_from(algorithmic.ALGORITHMIC_TASKS),
    seed=st.integers(min_value=0, max_value=10**6),
    lengths=st.tuples(st.integers(1, 15), st.integers(0, 10)),
)
def test_algorithmic_alignments_reproduce_the_target(name, seed, lengths):
    min_len, extra = lengths
    pairs = algorithmic.generate_task(name, 30, seed=seed, min_len=min_len, max_len=min_len + extra)
    assert pairs == algorithmic.generate_task(name, 30, seed=seed, min_len=min_len, max_len=min_len + extra)
    for pair in pairs:
        src, tgt, al = pair.source.split(), pair.target.split(), pair.alignment
        n = len(src)
        assert min_len <= n <= min_len + extra and len(tgt) == n
        assert tgt == [src[i] for i in al]
        assert sorted(al) == list(range(n))
        if name == "copy":
            assert al == tuple(range(n))
        elif name == "reverse":
            assert al == tuple(range(n - 1, -1, -1))
        else:
            assert tgt == sorted(src)
            assert all(al[j] < al[j + 1] for j in range(n - 1) if tgt[j] == tgt[j + 1])  # stable


def test_sort_uses_the_alphabet_order():
    (pair,) = algorithmic.generate_task("sort", 1, seed=0, alphabet=("z", "y", "x"), min_len=12, max_len=12)
    order = {"z": 0, "y": 1, "x": 2}
    assert [order[t] for t in pair.target.split()] == sorted(order[t] for t in pair.source.split())


@pytest.mark.parametrize("name", algorithmic.ALGORITHMIC_TASKS)
def test_algorithmic_splits_are_disjoint(name):
    parts = algorithmic.make_task_splits(name, seed=1, n_train=3000, n_valid=200, n_test=200)
    sources = [p.source for part in parts.values() for p in part]
    assert len(sources) == len(set(sources)) == 3400
    assert parts == algorithmic.make_task_splits(name, seed=1, n_train=3000, n_valid=200, n_test=200)
    assert parts != algorithmic.make_task_splits(name, seed=2, n_train=3000, n_valid=200, n_test=200)


def test_algorithmic_arguments_are_checked():
    with pytest.raises(ValueError, match="unknown task"):
        algorithmic.generate_task("shuffle", 3)
    with pytest.raises(ValueError):
        algorithmic.generate_task("copy", 3, min_len=5, max_len=4)
    with pytest.raises(ValueError, match="allow only"):
        algorithmic.make_task_splits("copy", n_train=100, n_valid=0, n_test=0, min_len=1, max_len=1)


def test_load_task_splits_dispatches(splits):
    assert TASKS == ("en-hi", "copy", "reverse", "sort")
    assert load_task_splits("en-hi") == splits
    for name in TASKS[1:]:
        parts = load_task_splits(name)
        assert set(parts) == {"train", "valid", "test"} and all(parts.values())
        assert parts["test"][0].target.split() == [
            parts["test"][0].source.split()[i] for i in parts["test"][0].alignment
        ]
    with pytest.raises(ValueError, match="unknown task"):
        load_task_splits("fr-en")


# ------------------------------------------------------------------------------------------------ TSV files


def test_tsv_round_trip(tmp_path):
    pairs = en_hi.generate_pairs(50, seed=2) + algorithmic.generate_task("reverse", 20)
    write_tsv(pairs, tmp_path / "x.tsv")
    assert read_tsv(tmp_path / "x.tsv") == pairs
    assert read_pairs_tsv(tmp_path / "x.tsv") == pairs
    line = (tmp_path / "x.tsv").read_text(encoding="utf-8").splitlines()[0]
    assert line.count("\t") == 2


def test_read_pairs_tsv_accepts_two_columns(tmp_path):
    path = tmp_path / "mine.tsv"
    path.write_text("hello  world\tनमस्ते दुनिया\r\n\nthe boy\tलड़का\t1\n", encoding="utf-8")
    assert read_pairs_tsv(path) == [Pair("hello world", "नमस्ते दुनिया"), Pair("the boy", "लड़का", (1,))]


def _error(path) -> str:
    with pytest.raises(ValueError) as info:
        read_pairs_tsv(path)
    message = str(info.value)
    assert "\n" not in message and message.endswith("."), message
    return message


def test_read_pairs_tsv_errors(tmp_path):
    assert _error(tmp_path / "missing.tsv") == f"{tmp_path / 'missing.tsv'} does not exist."

    bad = tmp_path / "bad.tsv"
    bad.write_bytes(b"\xff\xfe\x00bad")
    assert _error(bad) == f"{bad} is not UTF-8 text."

    empty = tmp_path / "empty.tsv"
    empty.write_text("", encoding="utf-8")
    assert _error(empty) == f"{empty} is empty."
    empty.write_text("\n  \n", encoding="utf-8")
    assert _error(empty) == f"{empty} is empty."

    lines = [f"a b\tc d{i}" for i in range(6)] + ["only one column"]
    one = tmp_path / "one.tsv"
    one.write_text("\n".join(lines) + "\n", encoding="utf-8")
    assert "line 7 has 1 column; expected source<TAB>target" in _error(one)

    four = tmp_path / "four.tsv"
    four.write_text("a\tb\t0\textra\n", encoding="utf-8")
    assert "line 1 has 4 columns; expected source<TAB>target" in _error(four)

    no_source = tmp_path / "no_source.tsv"
    no_source.write_text("a\tb\n \tc\n", encoding="utf-8")
    assert _error(no_source) == f"{no_source}: line 2 has an empty source."

    no_target = tmp_path / "no_target.tsv"
    no_target.write_text("a\t\n", encoding="utf-8")
    assert _error(no_target) == f"{no_target}: line 1 has an empty target."

    for text in ("a b\tc\tx\n", "a b\tc d\t0\n", "a b\tc\t5\n"):
        bad_alignment = tmp_path / "alignment.tsv"
        bad_alignment.write_text(text, encoding="utf-8")
        assert "line 1 has a bad alignment" in _error(bad_alignment)


def test_read_tsv_needs_the_alignment(tmp_path):
    path = tmp_path / "two.tsv"
    path.write_text("a\tb\n", encoding="utf-8")
    with pytest.raises(ValueError, match="line 1 has 2 columns; expected source<TAB>target<TAB>alignment"):
        read_tsv(path)


def test_pair_checks_its_alignment():
    with pytest.raises(ValueError):
        Pair("a b", "c d", (0,))
    with pytest.raises(ValueError):
        Pair("a b", "c", (2,))
    assert Pair("a b", "c", [1]).alignment == (1,)


# --------------------------------------------------------------------------------------------- sample texts


def test_sample_texts():
    samples = ROOT / "data" / "samples"
    vocab = set(en_hi.vocabulary()["en"])
    sentences = (samples / "en_sentences.txt").read_text(encoding="utf-8").splitlines()
    assert len(sentences) >= 20 and all(set(s.split()) <= vocab for s in sentences)
    assert len((samples / "long_text.txt").read_text(encoding="utf-8").split()) >= 3000
    assert 250 <= len((samples / "walkthrough.txt").read_text(encoding="utf-8").split()) <= 400
