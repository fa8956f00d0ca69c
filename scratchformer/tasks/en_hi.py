"""A toy English → Hindi translation task: a seeded grammar that writes sentence pairs with gold word alignments.

The English side is lowercase words separated by single spaces, with no punctuation; the Hindi side is
Devanagari words (NFC) separated by single spaces, with no danda. Every Hindi word carries the index of
the English word it translates, so a model's cross-attention can be compared with a gold alignment.

What the grammar covers (see data/README.md for a table):

* simple present ("the boy eats an apple" → "लड़का सेब खाता है") and present continuous ("is eating" →
  "खा रहा है", also negated: "नहीं खा रहा है");
* copular sentences with an adjective, a noun or a place ("we are friends" → "हम दोस्त हैं"), also negated;
* pronouns I, you, he, she, we, they → मैं, तुम, वह, वह, हम, वे with हूँ, हो, है, है, हैं, हैं;
* nouns with gender and number, direct and oblique case (लड़का/लड़के/लड़कों, लड़की/लड़कियाँ/लड़कियों),
  adjectives that agree (अच्छा/अच्छी/अच्छे) and invariant ones (लाल, सुंदर), demonstratives (यह/इस, ये/इन),
  possessives that agree with the possessed noun (मेरा/मेरी/मेरे), numerals two to five;
* objects (animate ones take को), indirect objects (to the boy → लड़के को), places (in the house → घर में,
  on the table → मेज़ पर, under the tree → पेड़ के नीचे, near the river → नदी के पास), company (with the
  girl → लड़की के साथ), and motion (goes to the market → बाज़ार जाता है, comes from the school → स्कूल से
  आता है);
* subject-object-verb order in Hindi, with the verb agreeing with the subject's gender and number.

Conventions a reader of the data should know: "you" is always तुम; English pronouns and nouns that do not
show gender (I, you, we, they, friend, teacher, doctor…) are translated as masculine; a possessive never
refers to the sentence's own subject (Hindi would need अपना there), so "I read my book" is not generated.

Alignment conventions: articles (the/a/an) and the "to" of motion verbs have no Hindi word; the auxiliary
(है/हैं/हूँ/हो) aligns to the English verb in the simple present and to the copula (am/is/are) otherwise;
रहा/रही/रहे align to the -ing verb; postpositions align to the English preposition (के साथ → with, both
words); the object marker को, which has no English word, aligns to the object noun.

Run ``python -m scratchformer.tasks.en_hi --out data/en_hi`` to regenerate the shipped splits.
"""

from __future__ import annotations

import argparse
import functools
import random
import unicodedata
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from .splits import Pair, write_tsv

__all__ = [
    "ADJECTIVES", "DEFAULT_SIZES", "FIXED_PAIRS", "LEXICON_SIZE", "MAX_SOURCE_WORDS", "MAX_TARGET_WORDS", "NOUNS",
    "PRONOUNS",
    "VERBS", "Adjective", "Noun", "Pair", "Pronoun", "Verb", "generate_pairs", "lexicon_size", "make_splits",
    "vocabulary", "write_splits",
]  # fmt: skip

MAX_SOURCE_WORDS = 12  # English words per sentence, at most
MAX_TARGET_WORDS = 14  # Hindi words per sentence, at most
DEFAULT_SIZES = {"train": 20000, "valid": 1000, "test": 1000}

M, F = "m", "f"


def _nfc(text: str) -> str:
    return unicodedata.normalize("NFC", text)


# ----------------------------------------------------------------------------------------------- morphology


def _noun_forms(hi: str, gender: str) -> tuple[str, str, str, str]:
    """(singular direct, singular oblique, plural direct, plural oblique) of a regular Hindi noun."""
    if gender == M:
        if hi.endswith("ा"):  # लड़का: लड़के, लड़के, लड़कों
            return hi, hi[:-1] + "े", hi[:-1] + "े", hi[:-1] + "ों"
        if hi.endswith("ी"):  # आदमी: आदमियों
            return hi, hi, hi, hi[:-1] + "ियों"
        if hi.endswith("ई"):  # भाई: भाइयों
            return hi, hi, hi, hi[:-1] + "इयों"
        if hi.endswith("ू"):  # भालू: भालुओं
            return hi, hi, hi, hi[:-1] + "ुओं"
        return hi, hi, hi, hi + "ों"  # घर: घरों
    if hi.endswith("िया"):  # चिड़िया: चिड़ियाँ, चिड़ियों
        return hi, hi, hi + "ँ", hi[:-1] + "ों"
    if hi.endswith("ी"):  # लड़की: लड़कियाँ, लड़कियों
        return hi, hi, hi[:-1] + "ियाँ", hi[:-1] + "ियों"
    if hi.endswith("ई"):  # रसोई: रसोइयाँ, रसोइयों
        return hi, hi, hi[:-1] + "इयाँ", hi[:-1] + "इयों"
    if hi.endswith("ा"):  # छात्रा: छात्राएँ, छात्राओं
        return hi, hi, hi + "एँ", hi + "ओं"
    return hi, hi, hi + "ें", hi + "ों"  # किताब: किताबें, किताबों


def _agree(forms: tuple[str, str, str], gender: str, plural: bool, oblique: bool) -> str:
    """Pick the form of an -ā adjective (or possessive): masc. sg. direct, feminine, or masc. other."""
    if gender == F:
        return forms[1]
    return forms[0] if not plural and not oblique else forms[2]


def _adjective_forms(hi: str) -> tuple[str, str, str]:
    if hi.endswith("ा"):  # अच्छा/अच्छी/अच्छे
        return hi, hi[:-1] + "ी", hi[:-1] + "े"
    return hi, hi, hi  # लाल, सुंदर


def _verb_suffix(gender: str, plural: bool, continuous: bool) -> str:
    if continuous:
        return "रही" if gender == F else ("रहे" if plural else "रहा")
    return "ती" if gender == F else ("ते" if plural else "ता")


# ------------------------------------------------------------------------------------------------- lexicon


@dataclass(frozen=True)
class Noun:
    """A noun of the lexicon. `tags` say where the grammar may use it; `en_plural` is None when it has none."""

    en: str
    en_plural: str | None
    hi: str
    gender: str
    tags: tuple[str, ...]
    mass: bool = False  # uncountable: no a/an, no numeral, never plural (water, rice, bread)
    bare: bool = False  # games and languages: no article, no adjective ("plays cricket", "speaks hindi")
    fem: tuple[str, str] | None = None  # feminine (singular, plural) when used as a predicate: छात्रा
    forms: tuple[str, str, str, str] = field(default=("", "", "", ""), compare=False, repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "hi", _nfc(self.hi))
        if self.fem is not None:
            object.__setattr__(self, "fem", tuple(_nfc(w) for w in self.fem))
        object.__setattr__(self, "forms", _noun_forms(self.hi, self.gender))

    @property
    def countable(self) -> bool:
        return not self.mass and not self.bare

    def hindi(self, plural: bool, oblique: bool) -> str:
        return self.forms[2 * plural + oblique]

    def english(self, plural: bool) -> str:
        return self.en_plural if plural and self.en_plural else self.en


@dataclass(frozen=True)
class Adjective:
    en: str
    hi: str
    tags: tuple[str, ...]  # the noun tags it may describe
    forms: tuple[str, str, str] = ("", "", "")

    def __post_init__(self) -> None:
        object.__setattr__(self, "hi", _nfc(self.hi))
        forms = tuple(_nfc(w) for w in self.forms) if self.forms[0] else _adjective_forms(self.hi)
        object.__setattr__(self, "forms", forms)

    def fits(self, noun: Noun) -> bool:
        return any(tag in noun.tags for tag in self.tags)


@dataclass(frozen=True)
class Pronoun:
    en: str
    hi: str
    person: int
    gender: str
    plural: bool  # for verb agreement: तुम, हम and वे take plural forms
    be: str  # am / is / are
    aux: str  # हूँ / है / हैं / हो

    def __post_init__(self) -> None:
        object.__setattr__(self, "hi", _nfc(self.hi))
        object.__setattr__(self, "aux", _nfc(self.aux))


@dataclass(frozen=True)
class Verb:
    """A verb with its English forms, its Hindi stem (a light-verb compound is two words) and its frame."""

    en: str
    en_s: str  # third person singular
    en_ing: str | None  # None: not used in the continuous ("is seeing", "is liking")
    hi: str  # stem; "साफ़ कर" for compounds
    subj: tuple[str, ...]  # noun tags of possible subjects ("person" also allows pronouns)
    obj: tuple[str, ...] = ()  # noun tags of possible objects; () for intransitive verbs
    obj_required: bool = True
    io: tuple[str, ...] = ()  # noun tags of a possible "to X" recipient (Hindi X को)
    places: tuple[tuple[str, str], ...] = ()  # (preposition, place noun) pairs for an optional location
    place_required: bool = False
    motion: str = ""  # "go": "to X"; "come": "to X" or "from X"
    company: bool = False  # may take "with X" (X के साथ)

    def __post_init__(self) -> None:
        object.__setattr__(self, "hi", _nfc(self.hi))

    @property
    def hi_words(self) -> list[str]:
        return self.hi.split()


N = Noun
NOUNS: tuple[Noun, ...] = (
    # people
    N("boy", "boys", "लड़का", M, ("person", "kid")),
    N("girl", "girls", "लड़की", F, ("person", "kid")),
    N("man", "men", "आदमी", M, ("person", "adult", "no-possessive")),
    N("woman", "women", "औरत", F, ("person", "adult", "no-possessive")),
    N("child", "children", "बच्चा", M, ("person", "kid")),
    N("friend", "friends", "दोस्त", M, ("person",), fem=("दोस्त", "दोस्त")),
    N("student", "students", "छात्र", M, ("person",), fem=("छात्रा", "छात्राएँ")),
    N("teacher", "teachers", "अध्यापक", M, ("person", "adult"), fem=("अध्यापिका", "अध्यापिकाएँ")),
    N("doctor", "doctors", "डॉक्टर", M, ("person", "adult"), fem=("डॉक्टर", "डॉक्टर")),
    N("farmer", "farmers", "किसान", M, ("person", "adult"), fem=("किसान", "किसान")),
    N("brother", "brothers", "भाई", M, ("person",)),
    N("sister", "sisters", "बहन", F, ("person",)),
    N("son", "sons", "बेटा", M, ("person", "kid")),
    N("daughter", "daughters", "बेटी", F, ("person", "kid")),
    # animals
    N("dog", "dogs", "कुत्ता", M, ("animal", "dog", "swimmer", "hunter", "pet")),
    N("cat", "cats", "बिल्ली", F, ("animal", "hunter", "pet")),
    N("horse", "horses", "घोड़ा", M, ("animal", "fast")),
    N("cow", "cows", "गाय", F, ("animal",)),
    N("lion", "lions", "शेर", M, ("animal", "fast")),
    N("elephant", "elephants", "हाथी", M, ("animal", "swimmer")),
    N("monkey", "monkeys", "बंदर", M, ("animal",)),
    N("bird", "birds", "चिड़िया", F, ("animal", "bird", "prey", "singer", "pet")),
    N("parrot", "parrots", "तोता", M, ("animal", "bird", "talker", "pet")),
    # no plural ("fish" would be ambiguous) and not "animal": it only swims, is caught, seen and described
    N("fish", None, "मछली", F, ("fish", "swimmer", "prey")),
    N("goat", "goats", "बकरी", F, ("animal",)),
    N("mouse", "mice", "चूहा", M, ("animal", "prey")),
    N("bear", "bears", "भालू", M, ("animal",)),
    # food and drink
    N("apple", "apples", "सेब", M, ("food", "fruit")),
    N("banana", "bananas", "केला", M, ("food", "fruit")),
    N("mango", "mangoes", "आम", M, ("food", "fruit")),
    N("orange", "oranges", "संतरा", M, ("food", "fruit")),
    N("egg", "eggs", "अंडा", M, ("food", "dish", "cookable")),
    N("carrot", "carrots", "गाजर", F, ("food", "veg")),
    N("tomato", "tomatoes", "टमाटर", M, ("food", "veg")),
    N("vegetable", "vegetables", "सब्ज़ी", F, ("food", "veg", "cookable")),
    N("cake", "cakes", "केक", M, ("food", "dish", "makeable", "sweet", "soft")),
    N("bread", None, "रोटी", F, ("food", "dish", "makeable", "soft"), mass=True),
    N("rice", None, "चावल", M, ("food", "dish", "cookable", "no-subject"), mass=True),
    N("food", None, "खाना", M, ("food", "dish", "cookable", "makeable"), mass=True),
    N("water", None, "पानी", M, ("drink",), mass=True),
    N("milk", None, "दूध", M, ("drink",), mass=True),
    N("tea", None, "चाय", F, ("drink", "makeable", "sweet"), mass=True),
    N("coffee", None, "कॉफ़ी", F, ("drink", "makeable", "sweet"), mass=True),
    N("juice", None, "जूस", M, ("drink", "makeable", "sweet"), mass=True),
    # things
    N("book", "books", "किताब", F, ("thing", "readable", "writable", "openable", "portable", "sendable")),
    N("pen", "pens", "कलम", F, ("thing", "portable")),
    N("letter", "letters", "चिट्ठी", F, ("thing", "readable", "writable", "portable", "sendable")),
    N("newspaper", "newspapers", "अख़बार", M, ("thing", "readable", "portable")),
    N("ball", "balls", "गेंद", F, ("thing", "portable", "ball")),
    N("chair", "chairs", "कुर्सी", F, ("thing", "furniture", "makeable", "cleanable")),
    N("table", "tables", "मेज़", F, ("thing", "furniture", "cleanable")),
    N("door", "doors", "दरवाज़ा", M, ("thing", "openable", "cleanable")),
    N("window", "windows", "खिड़की", F, ("thing", "openable", "cleanable")),
    N("bag", "bags", "बस्ता", M, ("thing", "portable", "openable", "container")),
    N("box", "boxes", "डिब्बा", M, ("thing", "portable", "openable", "container", "makeable")),
    N("toy", "toys", "खिलौना", M, ("thing", "portable", "makeable", "sendable")),
    N("flower", "flowers", "फूल", M, ("thing", "portable", "sendable")),
    N("car", "cars", "गाड़ी", F, ("thing", "vehicle", "car", "washable", "cleanable", "fast")),
    N("bicycle", "bicycles", "साइकिल", F, ("thing", "vehicle", "bicycle", "cleanable", "fast")),
    N("picture", "pictures", "तस्वीर", F, ("thing", "portable", "makeable", "sendable")),
    N("shirt", "shirts", "कमीज़", F, ("thing", "clothing", "washable", "portable", "soft")),
    N("shoe", "shoes", "जूता", M, ("thing", "clothing", "cleanable", "portable")),
    N("cap", "caps", "टोपी", F, ("thing", "clothing", "portable", "soft")),
    N("key", "keys", "चाबी", F, ("thing", "portable")),
    N("kite", "kites", "पतंग", F, ("thing", "portable", "makeable", "kite")),
    N("plate", "plates", "थाली", F, ("thing", "portable", "washable")),
    N("cup", "cups", "कप", M, ("thing", "portable", "washable", "container")),
    N("umbrella", "umbrellas", "छाता", M, ("thing", "portable", "openable")),
    N("bottle", "bottles", "बोतल", F, ("thing", "portable", "openable", "container")),
    # stories, songs, films
    N("story", "stories", "कहानी", F, ("work", "readable", "writable", "story", "long")),
    N("song", "songs", "गाना", M, ("work", "song")),
    N("film", "films", "फ़िल्म", F, ("work", "film", "long")),
    # places
    N("house", "houses", "घर", M, ("place", "building")),
    N("school", "schools", "स्कूल", M, ("place", "building")),
    N("market", "markets", "बाज़ार", M, ("place",)),
    N("garden", "gardens", "बगीचा", M, ("place", "outdoor")),
    N("room", "rooms", "कमरा", M, ("place", "room", "cleanable", "container")),
    N("kitchen", "kitchens", "रसोई", F, ("place", "room", "cleanable")),
    N("city", "cities", "शहर", M, ("place", "town")),
    N("village", "villages", "गाँव", M, ("place", "town")),
    N("park", "parks", "पार्क", M, ("place", "outdoor")),
    N("river", "rivers", "नदी", F, ("place", "water", "long")),
    N("forest", "forests", "जंगल", M, ("place", "outdoor")),
    N("shop", "shops", "दुकान", F, ("place", "building")),
    N("field", "fields", "मैदान", M, ("place", "outdoor")),
    N("pond", "ponds", "तालाब", M, ("place", "water")),
    N("hospital", "hospitals", "अस्पताल", M, ("place", "building")),
    N("office", "offices", "दफ़्तर", M, ("place", "building")),
    N("tree", "trees", "पेड़", M, ("place", "plant")),
    N("roof", "roofs", "छत", F, ("place",)),
    N("bed", "beds", "बिस्तर", M, ("place", "furniture", "cleanable", "soft")),
    # games and languages
    N("football", None, "फ़ुटबॉल", M, ("game",), bare=True),
    N("cricket", None, "क्रिकेट", M, ("game",), bare=True),
    N("chess", None, "शतरंज", M, ("game",), bare=True),
    N("hockey", None, "हॉकी", F, ("game",), bare=True),
    N("hindi", None, "हिंदी", F, ("lang",), bare=True),
    N("english", None, "अंग्रेज़ी", F, ("lang",), bare=True),
)
del N

A = Adjective
ADJECTIVES: tuple[Adjective, ...] = (
    A("good", "अच्छा", ("person", "animal", "food", "drink", "thing", "work", "place")),
    A("bad", "बुरा", ("person", "animal", "work")),
    A("big", "बड़ा", ("fish", "person", "animal", "fruit", "thing", "place")),
    A("small", "छोटा", ("fish", "person", "animal", "fruit", "thing", "place")),
    A("tall", "लंबा", ("person",)),
    A("long", "लंबा", ("long",)),
    A("old", "बूढ़ा", ("adult", "animal")),
    A("old", "पुराना", ("thing", "work", "building", "town", "room", "plant")),
    A("new", "नया", ("thing", "work", "building", "room"), forms=("नया", "नई", "नए")),
    A("beautiful", "सुंदर", ("fish", "person", "animal", "thing", "place", "work")),
    A("red", "लाल", ("thing", "fruit", "veg")),
    A("green", "हरा", ("thing", "fruit", "veg", "plant")),
    A("yellow", "पीला", ("thing", "fruit")),
    A("blue", "नीला", ("thing",)),
    A("black", "काला", ("fish", "thing", "animal")),
    A("white", "सफ़ेद", ("fish", "thing", "animal")),
    A("brown", "भूरा", ("animal",)),
    A("sweet", "मीठा", ("fruit", "sweet")),
    A("sour", "खट्टा", ("fruit",)),
    A("hot", "गरम", ("dish", "drink")),
    A("cold", "ठंडा", ("dish", "drink")),
    A("delicious", "स्वादिष्ट", ("fruit", "dish", "veg")),
    A("hungry", "भूखा", ("fish", "person", "animal")),
    A("thirsty", "प्यासा", ("person", "animal")),
    A("happy", "खुश", ("person", "animal")),
    A("sad", "उदास", ("person", "animal")),
    A("clever", "होशियार", ("person", "talker")),
    A("brave", "बहादुर", ("person",)),
    A("lazy", "आलसी", ("person", "animal")),
    A("naughty", "शरारती", ("kid", "animal")),
    A("fat", "मोटा", ("person", "animal")),
    A("thin", "पतला", ("person", "animal")),
    A("strong", "मज़बूत", ("person", "animal", "furniture")),
    A("weak", "कमज़ोर", ("person", "animal")),
    A("sick", "बीमार", ("person", "animal")),
    A("rich", "अमीर", ("adult",)),
    A("poor", "ग़रीब", ("adult",)),
    A("honest", "ईमानदार", ("adult",)),
    A("kind", "दयालु", ("person",)),
    A("busy", "व्यस्त", ("adult",)),
    A("cute", "प्यारा", ("fish", "kid", "animal")),
    A("funny", "मज़ेदार", ("work", "kid")),
    A("interesting", "दिलचस्प", ("work",)),
    A("dirty", "गंदा", ("thing", "room", "building", "animal", "water")),
    A("clean", "साफ़", ("thing", "room", "building", "water")),
    A("cheap", "सस्ता", ("thing", "fruit", "veg")),
    A("expensive", "महँगा", ("thing", "fruit")),
    A("heavy", "भारी", ("thing",)),
    A("wet", "गीला", ("clothing", "portable")),
    A("dry", "सूखा", ("clothing", "portable")),
    A("fast", "तेज़", ("fast",)),
    A("soft", "नरम", ("soft",)),
    A("deep", "गहरा", ("water",)),
    A("empty", "खाली", ("container", "room")),
)
del A

PRONOUNS: tuple[Pronoun, ...] = (
    Pronoun("i", "मैं", 1, M, False, "am", "हूँ"),
    Pronoun("you", "तुम", 2, M, True, "are", "हो"),
    Pronoun("he", "वह", 3, M, False, "is", "है"),
    Pronoun("she", "वह", 3, F, False, "is", "है"),
    Pronoun("we", "हम", 1, M, True, "are", "हैं"),
    Pronoun("they", "वे", 3, M, True, "are", "हैं"),
)

# Determiners. Demonstratives: English (singular, plural), Hindi (sg direct, sg oblique, pl direct, pl oblique).
_DEMONSTRATIVES = {
    "near": (("this", "these"), tuple(_nfc(w) for w in ("यह", "इस", "ये", "इन"))),
    "far": (("that", "those"), tuple(_nfc(w) for w in ("वह", "उस", "वे", "उन"))),
}
# Possessives agree with the possessed noun like -ā adjectives; the int is the possessor's person.
_POSSESSIVES = {
    "my": (_adjective_forms("मेरा"), 1),
    "your": (_adjective_forms(_nfc("तुम्हारा")), 2),
    "his": (_adjective_forms("उसका"), 3),
    "her": (_adjective_forms("उसका"), 3),
    "our": (_adjective_forms("हमारा"), 1),
    "their": (_adjective_forms("उनका"), 3),
}
_NUMERALS = {"two": "दो", "three": "तीन", "four": "चार", "five": _nfc("पाँच")}

# Prepositions → Hindi postpositions (after the noun in the oblique case).
_POSTPOSITIONS = {
    "in": ("में",),
    "on": ("पर",),
    "under": ("के", "नीचे"),
    "near": ("के", "पास"),
    "with": ("के", "साथ"),
    "to": ("को",),
    "from": ("से",),
}
_ACC = "को"
_NOT = _nfc("नहीं")
_BE_3 = {False: ("is", "है"), True: ("are", "हैं")}

_IN_HOME = (("in", "house"), ("in", "room"), ("in", "kitchen"))
_IN_OUTDOORS = (("in", "garden"), ("in", "park"), ("in", "field"), ("in", "forest"))
_IN_TOWN = (("in", "school"), ("in", "market"), ("in", "city"), ("in", "village"), ("in", "shop"),
            ("in", "hospital"), ("in", "office"))  # fmt: skip
_NEAR = (("near", "river"), ("near", "house"), ("near", "school"), ("near", "pond"), ("near", "tree"),
         ("near", "shop"))  # fmt: skip
_IN_WATER = (("in", "river"), ("in", "pond"))
_FOR_THINGS = (("on", "table"), ("on", "chair"), ("on", "bed"), ("under", "table"), ("under", "bed"),
               ("in", "bag"), ("in", "box"), ("in", "room"), ("in", "kitchen"), ("in", "house"))  # fmt: skip
_FOR_PEOPLE = _IN_HOME + _IN_OUTDOORS + _IN_TOWN + _NEAR + (("on", "roof"), ("under", "tree"))
_FOR_ANIMALS = _IN_OUTDOORS + _NEAR + (("in", "village"), ("under", "tree"))
_FOR_PETS = _FOR_ANIMALS + _IN_HOME + (("on", "roof"), ("on", "bed"))
# Destinations of "goes to" / "comes from": Hindi uses the bare oblique noun ("बाज़ार जाता है").
_DESTINATIONS = ("house", "school", "market", "city", "village", "park", "hospital", "office", "forest")

V = Verb
_ANIMATE = ("person", "animal")
# fmt: off
VERBS: tuple[Verb, ...] = (
    V("eat", "eats", "eating", "खा", _ANIMATE, ("food",), obj_required=False, company=True,
      places=_IN_HOME + _IN_OUTDOORS + (("in", "school"), ("under", "tree"), ("on", "roof"))),
    V("drink", "drinks", "drinking", "पी", _ANIMATE, ("drink",), obj_required=False, company=True,
      places=_IN_HOME + _IN_OUTDOORS),
    V("read", "reads", "reading", "पढ़", ("person",), ("readable",), obj_required=False,
      places=_IN_HOME + (("in", "school"), ("in", "garden"), ("in", "park"), ("on", "bed"), ("under", "tree"))),
    V("write", "writes", "writing", "लिख", ("person",), ("writable",), obj_required=False,
      places=_IN_HOME + (("in", "school"), ("in", "office"))),
    V("see", "sees", None, "देख", _ANIMATE, ("person", "animal", "fish", "thing", "plant"),
      places=_IN_OUTDOORS + (("in", "market"), ("in", "city"), ("near", "river"))),
    V("watch", "watches", "watching", "देख", ("person",), ("film", "game", "person", "animal", "fish"),
      company=True, places=_IN_HOME + (("in", "park"), ("in", "field"))),
    V("like", "likes", None, "पसंद कर", ("person",), ("food", "drink", "thing", "work", "game", "animal")),
    V("want", "wants", None, "चाह", ("person",), ("food", "drink", "thing")),
    V("buy", "buys", "buying", "ख़रीद", ("person",), ("food", "thing"), company=True,
      places=(("in", "market"), ("in", "shop"), ("in", "city"), ("in", "village"))),
    V("sell", "sells", "selling", "बेच", ("person",), ("food", "thing"), io=("person",),
      places=(("in", "market"), ("in", "shop"), ("in", "city"), ("in", "village"))),
    V("make", "makes", "making", "बना", ("person",), ("makeable",), company=True,
      places=_IN_HOME + (("in", "school"),)),
    V("cook", "cooks", "cooking", "पका", ("person",), ("cookable",), places=(("in", "kitchen"), ("in", "house"))),
    V("wash", "washes", "washing", "धो", ("person",), ("washable",),
      places=(("in", "kitchen"), ("in", "house"), ("in", "river"), ("in", "pond"))),
    V("open", "opens", "opening", "खोल", ("person",), ("openable",)),
    V("close", "closes", "closing", "बंद कर", ("person",), ("openable",)),
    V("clean", "cleans", "cleaning", "साफ़ कर", ("person",), ("cleanable",)),
    V("bring", "brings", "bringing", "ला", ("person", "dog"), ("food", "drink", "portable")),
    V("give", "gives", "giving", "दे", ("person",), ("food", "drink", "portable"), io=_ANIMATE),
    V("show", "shows", "showing", "दिखा", ("person",), ("portable",), io=("person",)),
    V("send", "sends", "sending", "भेज", ("person",), ("sendable",), io=("person",)),
    V("tell", "tells", "telling", "सुना", ("person",), ("story",), io=("person",)),
    V("sing", "sings", "singing", "गा", ("person", "singer"), ("song",), obj_required=False, company=True,
      places=_IN_HOME + (("in", "school"), ("in", "garden"))),
    V("catch", "catches", "catching", "पकड़", ("person", "hunter"), ("prey", "ball")),
    V("throw", "throws", "throwing", "फेंक", ("person",), ("ball",), places=_IN_OUTDOORS),
    V("play", "plays", "playing", "खेल", ("person",), ("game",), obj_required=False, company=True,
      places=_IN_OUTDOORS + (("in", "school"), ("in", "house"))),
    V("play", "plays", "playing", "खेल", ("animal",), company=True, places=_IN_OUTDOORS + (("in", "house"),)),
    V("drive", "drives", "driving", "चला", ("adult",), ("car",), places=(("in", "city"), ("in", "village"))),
    V("ride", "rides", "riding", "चला", ("person",), ("bicycle",), company=True,
      places=(("in", "park"), ("in", "city"), ("in", "village"))),
    V("fly", "flies", "flying", "उड़ा", ("person",), ("kite",), company=True,
      places=_IN_OUTDOORS + (("on", "roof"),)),
    V("learn", "learns", "learning", "सीख", ("person",), ("lang", "song"), places=(("in", "school"),)),
    V("speak", "speaks", "speaking", "बोल", ("person", "talker"), ("lang",)),
    V("teach", "teaches", "teaching", "पढ़ा", ("adult",), ("lang",), io=("person",), places=(("in", "school"),)),
    V("call", "calls", "calling", "बुला", ("person",), ("person", "animal")),
    V("sleep", "sleeps", "sleeping", "सो", _ANIMATE,
      places=_IN_HOME + (("on", "bed"), ("on", "roof"), ("under", "tree"))),
    V("run", "runs", "running", "दौड़", _ANIMATE, company=True, places=_IN_OUTDOORS),
    V("walk", "walks", "walking", "टहल", ("person",), company=True,
      places=_IN_OUTDOORS + (("near", "river"), ("near", "pond"))),
    V("sit", "sits", None, "बैठ", _ANIMATE, company=True,
      places=(("on", "chair"), ("on", "bed"), ("on", "roof"), ("on", "tree"), ("under", "tree"),
              ("near", "river"), ("in", "room"), ("in", "garden"))),
    V("laugh", "laughs", "laughing", "हँस", ("person",), company=True),
    V("cry", "cries", "crying", "रो", ("person",)),
    V("dance", "dances", "dancing", "नाच", ("person",), company=True,
      places=(("in", "garden"), ("in", "house"), ("in", "school"), ("in", "room"))),
    V("swim", "swims", "swimming", "तैर", ("person", "swimmer"), company=True, places=_IN_WATER),
    V("work", "works", "working", "काम कर", ("adult",), company=True,
      places=_IN_TOWN + (("in", "field"), ("in", "house"), ("in", "kitchen"))),
    V("live", "lives", None, "रह", _ANIMATE, company=True, place_required=True,
      places=(("in", "house"), ("in", "city"), ("in", "village"), ("in", "forest"), ("near", "river"))),
    V("fly", "flies", "flying", "उड़", ("bird",)),
    V("bark", "barks", "barking", "भौंक", ("dog",)),
    V("go", "goes", "going", "जा", ("person", "pet"), company=True, motion="go"),
    V("come", "comes", "coming", "आ", ("person", "pet"), company=True, motion="come"),
)
# fmt: on
del V

_NOUN_BY_EN = {n.en: n for n in NOUNS}
_VOWEL_SOUND_EXCEPTIONS = {"honest": True, "hour": True, "one": False, "uniform": False, "useful": False}


# Adjectives of one scale: "the cold water is hot" or "the red ball is blue" is never generated.
_SCALES = (
    ("hot", "cold"),
    ("big", "small"),
    ("old", "new"),
    ("good", "bad"),
    ("clean", "dirty"),
    ("cheap", "expensive"),
    ("wet", "dry"),
    ("fat", "thin"),
    ("strong", "weak"),
    ("rich", "poor"),
    ("happy", "sad"),
    ("red", "green", "yellow", "blue", "black", "white", "brown"),
)


def _clash(predicate: Adjective, attribute: Adjective | None) -> bool:
    if attribute is None:
        return False
    return predicate.en == attribute.en or any(predicate.en in s and attribute.en in s for s in _SCALES)


def _indefinite_article(next_word: str) -> str:
    vowel = _VOWEL_SOUND_EXCEPTIONS.get(next_word, next_word[0] in "aeiou")
    return "an" if vowel else "a"


# ----------------------------------------------------------------------------------------------- sentences


@dataclass(frozen=True)
class _NP:
    """A noun phrase before it is written out: a pronoun, or determiner + adjective + noun."""

    noun: Noun | None = None
    pronoun: Pronoun | None = None
    plural: bool = False
    det: str = "the"  # the, a (a/an, or nothing before plurals and mass nouns), near, far, a possessive, a numeral
    adj: Adjective | None = None

    @property
    def gender(self) -> str:
        return self.pronoun.gender if self.pronoun else self.noun.gender

    @property
    def agrees_plural(self) -> bool:
        return self.pronoun.plural if self.pronoun else self.plural

    @property
    def person(self) -> int:
        return self.pronoun.person if self.pronoun else 3


class _Writer:
    """Collects English words left to right; Hindi pieces are (word, English index) lists put in Hindi order."""

    def __init__(self) -> None:
        self.en: list[str] = []

    def word(self, text: str) -> int:
        self.en.append(text)
        return len(self.en) - 1

    def np(self, np: _NP, oblique: bool) -> list[tuple[str, int]]:
        if np.pronoun is not None:
            return [(np.pronoun.hi, self.word(np.pronoun.en))]
        noun, plural, gender = np.noun, np.plural, np.noun.gender
        head = np.adj.en if np.adj else noun.english(plural)
        out: list[tuple[str, int]] = []
        if np.det == "the":
            self.word("the")
        elif np.det == "a":
            if noun.countable and not plural:
                self.word(_indefinite_article(head))
        elif np.det in _DEMONSTRATIVES:
            en, hi = _DEMONSTRATIVES[np.det]
            out.append((hi[2 * plural + oblique], self.word(en[plural])))
        elif np.det in _POSSESSIVES:
            out.append((_agree(_POSSESSIVES[np.det][0], gender, plural, oblique), self.word(np.det)))
        elif np.det in _NUMERALS:
            out.append((_NUMERALS[np.det], self.word(np.det)))
        else:  # pragma: no cover - a bug in the sampler
            raise AssertionError(np.det)
        if np.adj:
            out.append((_agree(np.adj.forms, gender, plural, oblique), self.word(np.adj.en)))
        out.append((noun.hindi(plural, oblique), self.word(noun.english(plural))))
        return out

    def pp(self, prep: str, np: _NP) -> list[tuple[str, int]]:
        """A prepositional phrase: English "prep NP" → Hindi "NP(oblique) postposition"."""
        i = self.word(prep)
        return self.np(np, oblique=True) + [(p, i) for p in _POSTPOSITIONS[prep]]


def _wchoice(rng: random.Random, options: Sequence[tuple[object, float]]):
    """Weighted choice that draws exactly one rng.random() (stable across Python versions)."""
    total = sum(w for _, w in options)
    r = rng.random() * total
    for value, weight in options:
        r -= weight
        if r < 0:
            return value
    return options[-1][0]


@functools.cache
def _tagged(tags: tuple[str, ...]) -> tuple[Noun, ...]:
    return tuple(n for n in NOUNS if any(t in n.tags for t in tags))


def _nouns_with(tags: Sequence[str], exclude: Sequence[Noun] = ()) -> list[Noun]:
    return [n for n in _tagged(tuple(tags)) if n not in exclude]


_DET_WEIGHTS = {
    # role: (the, a/bare, demonstrative, possessive, numeral)
    "subject": (0.62, 0.06, 0.14, 0.12, 0.06),
    "object": (0.35, 0.30, 0.10, 0.15, 0.10),
    "other": (0.55, 0.10, 0.15, 0.15, 0.05),
    "place": (0.72, 0.00, 0.12, 0.16, 0.00),
    "destination": (0.75, 0.00, 0.00, 0.25, 0.00),  # "मेरे घर जाता है"; "इस पार्क जाता है" sounds off
}
_ADJ_PROB = {"subject": 0.25, "object": 0.3, "other": 0.2, "place": 0.15, "destination": 0.15}


def _sample_np(
    rng: random.Random,
    noun: Noun,
    role: str,
    subject_person: int | None,
    plural: bool | None = None,
    with_adj: bool = True,
) -> _NP:
    """Choose number, determiner and adjective for `noun` in a role (a key of _DET_WEIGHTS)."""
    if noun.bare:
        return _NP(noun=noun, det="a")
    if plural is None:
        plural = (
            noun.en_plural is not None
            and noun.countable
            and role not in ("place", "destination")
            and rng.random() < 0.35
        )
    w_the, w_a, w_dem, w_poss, w_num = _DET_WEIGHTS[role]
    if not noun.countable or (role == "subject" and plural):
        w_a = 0.0  # no "a water"; a bare plural subject reads as a generic statement, keep "the"
    if not plural:
        w_num = 0.0
    if "no-possessive" in noun.tags:  # "my woman" is not "my wife"
        w_poss = 0.0
    possessives = [p for p, (_, person) in _POSSESSIVES.items() if person != subject_person]
    kind = _wchoice(rng, [("the", w_the), ("a", w_a), ("dem", w_dem), ("poss", w_poss), ("num", w_num)])
    if kind == "dem":
        det = rng.choice(("near", "far"))
    elif kind == "poss":
        det = rng.choice(possessives)
    elif kind == "num":
        det = rng.choice(tuple(_NUMERALS))
    else:
        det = str(kind)
    adj = None
    if with_adj and rng.random() < _ADJ_PROB[role]:
        fitting = _described_adjectives(noun)
        adj = rng.choice(fitting) if fitting else None
    return _NP(noun=noun, plural=plural, det=det, adj=adj)


def _sample_subject(
    rng: random.Random, tags: Sequence[str], pronoun_prob: float = 0.3, candidates: Sequence[Noun] | None = None
) -> _NP:
    if "person" in tags and rng.random() < pronoun_prob:
        return _NP(pronoun=rng.choice(PRONOUNS))
    if candidates is None:
        candidates = [n for n in _nouns_with(tags) if n.countable]
    return _sample_np(rng, rng.choice(candidates), "subject", None)


@functools.cache
def _described_adjectives(noun: Noun) -> tuple[Adjective, ...]:
    return tuple(a for a in ADJECTIVES if a.fits(noun))


# Subjects of "X is ADJ": nouns with at least two adjectives (one may already be used before the noun).
_ADJECTIVE_SUBJECTS = [
    n for n in NOUNS if not n.bare and "no-subject" not in n.tags and len(_described_adjectives(n)) >= 2
]


def _subject_agreement(subject: _NP) -> tuple[str, str, str]:
    """(English 'be' form, English verb form key, Hindi auxiliary) for a subject."""
    if subject.pronoun is not None:
        p = subject.pronoun
        return p.be, ("s" if p.person == 3 and not p.plural else "base"), p.aux
    be, aux = _BE_3[subject.plural]
    return be, ("base" if subject.plural else "s"), _nfc(aux)


@dataclass(frozen=True)
class _Clause:
    """A sentence before it is written out: either a verb clause or a copular one (verb is None)."""

    subject: _NP
    verb: Verb | None = None
    continuous: bool = False
    negate: bool = False
    obj: _NP | None = None
    io: _NP | None = None  # "to X"
    motion: tuple[str, _NP] | None = None  # ("to" or "from", destination)
    company: _NP | None = None  # "with X"
    place: tuple[str, _NP] | None = None  # (preposition, place); for copular clauses, the predicate
    pred_adj: Adjective | None = None  # "X is ADJ"
    pred_noun: _NP | None = None  # "X is a NOUN" (its det is "a": a/an in the singular, nothing in the plural)


def _render(clause: _Clause) -> Pair:
    """Write a clause in English (left to right) and in Hindi (subject, adjuncts, object, verb)."""
    w = _Writer()
    subject = clause.subject
    hi = w.np(subject, oblique=False)
    be, form, aux = _subject_agreement(subject)
    gender, plural = subject.gender, subject.agrees_plural
    verb = clause.verb
    if verb is None:  # copular: subject + predicate + [नहीं] + auxiliary
        i_be = w.word(be)
        hi_not = [(_NOT, w.word("not"))] if clause.negate else []
        if clause.pred_adj is not None:
            adj = clause.pred_adj
            hi.append((_agree(adj.forms, gender, plural, False), w.word(adj.en)))
        elif clause.pred_noun is not None:
            pred = clause.pred_noun
            if not pred.plural:
                w.word(_indefinite_article(pred.adj.en if pred.adj else pred.noun.en))
            if pred.adj:  # तुम takes plural agreement: "तुम अच्छे डॉक्टर हो"
                hi.append((_agree(pred.adj.forms, gender, plural or pred.plural, False), w.word(pred.adj.en)))
            hi_noun = pred.noun.fem[pred.plural] if gender == F else pred.noun.hindi(pred.plural, False)
            hi.append((hi_noun, w.word(pred.noun.english(pred.plural))))
        else:
            assert clause.place is not None
            hi += w.pp(*clause.place)
        return _pair(w, hi + hi_not + [(aux, i_be)])

    if clause.continuous:
        i_aux = w.word(be)
        i_not = w.word("not") if clause.negate else -1
        i_verb = w.word(verb.en_ing)
    else:
        i_verb = w.word(verb.en_s if form == "s" else verb.en)
        i_aux, i_not = i_verb, -1
    hi_obj: list[tuple[str, int]] = []
    if clause.obj is not None:
        animate = any(t in clause.obj.noun.tags for t in _ANIMATE)
        hi_obj = w.np(clause.obj, oblique=animate)
        if animate:  # को has no English word: it goes with the object noun
            hi_obj.append((_ACC, hi_obj[-1][1]))
    hi_io = w.pp("to", clause.io) if clause.io is not None else []
    hi_motion: list[tuple[str, int]] = []
    if clause.motion is not None:
        prep, place = clause.motion
        if prep == "from":
            hi_motion = w.pp("from", place)
        else:  # "goes to the market" → "बाज़ार जाता है": the oblique noun alone, no word for "to"
            w.word("to")
            hi_motion = w.np(place, oblique=True)
    hi_company = w.pp("with", clause.company) if clause.company is not None else []
    hi_place = w.pp(*clause.place) if clause.place is not None else []

    *light, stem = verb.hi_words
    verb_words = [(word, i_verb) for word in light]
    if clause.negate:  # before the inflected verb: "सेब नहीं खा रहा है", "कमरा साफ़ नहीं कर रहा है"
        verb_words.append((_NOT, i_not))
    if clause.continuous:
        verb_words += [(stem, i_verb), (_verb_suffix(gender, plural, True), i_verb)]
    else:
        verb_words.append((stem + _verb_suffix(gender, plural, False), i_verb))
    verb_words.append((aux, i_aux))
    return _pair(w, hi + hi_place + hi_company + hi_io + hi_obj + hi_motion + verb_words)


def _pair(w: _Writer, hi: list[tuple[str, int]]) -> Pair:
    return Pair(" ".join(w.en), " ".join(_nfc(word) for word, _ in hi), tuple(i for _, i in hi))


def _sample_verb_clause(rng: random.Random, continuous: bool) -> _Clause:
    verb = rng.choice([v for v in VERBS if v.en_ing] if continuous else VERBS)
    subject = _sample_subject(rng, verb.subj)
    person = subject.person
    exclude = [subject.noun] if subject.noun else []

    def pick(tags: Sequence[str]) -> Noun:
        noun = rng.choice(_nouns_with(tags, exclude))
        exclude.append(noun)
        return noun

    obj = io = company = None
    motion = place = None
    if verb.obj and (verb.obj_required or rng.random() < 0.6):
        obj = _sample_np(rng, pick(verb.obj), "object", person)
    if verb.io and rng.random() < 0.5:
        io = _sample_np(rng, pick(verb.io), "other", person)
    if verb.motion:
        destination = _sample_np(rng, _NOUN_BY_EN[rng.choice(_DESTINATIONS)], "destination", person)
        motion = ("from" if verb.motion == "come" and rng.random() < 0.5 else "to", destination)
    if verb.company and rng.random() < 0.15:
        company = _sample_np(rng, pick(("person", "pet")), "other", person)
    places = [p for p in verb.places if _NOUN_BY_EN[p[1]] not in exclude]
    if places and (verb.place_required or rng.random() < 0.3):
        prep, noun = rng.choice(places)
        place = (prep, _sample_np(rng, _NOUN_BY_EN[noun], "place", person))
    negate = continuous and rng.random() < 0.15
    return _Clause(subject, verb, continuous, negate, obj, io, motion, company, place)


def _sample_copular_clause(rng: random.Random, kind: str) -> _Clause:
    """ "X is [not] ADJ", "X is [not] a NOUN" or "X is [not] PREP PLACE"."""
    negate = rng.random() < 0.2
    if kind == "adjective":
        subject = _sample_subject(rng, ("person",), 0.3, candidates=_ADJECTIVE_SUBJECTS)
        if subject.noun is not None:
            fitting = [a for a in _described_adjectives(subject.noun) if not _clash(a, subject.adj)]
        else:
            fitting = [a for a in ADJECTIVES if "person" in a.tags]
        return _Clause(subject, negate=negate, pred_adj=rng.choice(fitting))
    if kind == "noun":
        subject = _sample_subject(rng, ("person",), 0.35)
        noun = rng.choice([n for n in NOUNS if n.fem is not None and n != subject.noun])
        you = subject.pronoun is not None and subject.pronoun.en == "you"
        en_plural = rng.random() < 0.5 if you else subject.agrees_plural
        adj = rng.choice(_described_adjectives(noun)) if rng.random() < 0.25 else None
        return _Clause(subject, negate=negate, pred_noun=_NP(noun=noun, plural=en_plural, det="a", adj=adj))
    subject = _sample_subject(rng, ("person", "animal", "portable"), 0.25)
    tags = subject.noun.tags if subject.noun is not None else ("person",)
    if "person" in tags:
        places = _FOR_PEOPLE
    elif "pet" in tags:
        places = _FOR_PETS
    elif "animal" in tags:
        places = _FOR_ANIMALS
    else:
        places = _FOR_THINGS
    places = [p for p in places if subject.noun is None or p[1] != subject.noun.en]
    prep, place = rng.choice(places)
    return _Clause(subject, negate=negate, place=(prep, _sample_np(rng, _NOUN_BY_EN[place], "place", 3)))


_KINDS = (("simple", 0.40), ("continuous", 0.22), ("adjective", 0.16), ("noun", 0.08), ("place", 0.14))


def _sentence(rng: random.Random) -> Pair:
    """One sentence pair (at most MAX_SOURCE_WORDS English and MAX_TARGET_WORDS Hindi words)."""
    while True:
        kind = str(_wchoice(rng, _KINDS))
        if kind in ("simple", "continuous"):
            clause = _sample_verb_clause(rng, continuous=kind == "continuous")
        else:
            clause = _sample_copular_clause(rng, kind)
        pair = _render(clause)
        if len(pair.source.split()) <= MAX_SOURCE_WORDS and len(pair.target.split()) <= MAX_TARGET_WORDS:
            return pair


def _iter_pairs(seed: int) -> Iterator[Pair]:
    rng = random.Random(seed)
    while True:
        yield _sentence(rng)


def generate_pairs(n: int, seed: int = 0) -> list[Pair]:
    """`n` sentence pairs sampled from the grammar (the same seed always gives the same list).

    Pairs are independent draws, so a long list can repeat a sentence; `make_splits` removes repeats.
    """
    if n < 0:
        raise ValueError(f"n must be at least 0, not {n}")
    pairs = _iter_pairs(seed)
    return [next(pairs) for _ in range(n)]


def _noun(en: str) -> Noun:
    return _NOUN_BY_EN[en]


def _verb(en: str) -> Verb:
    return next(v for v in VERBS if v.en == en)


# Sentences the shipped model must know: always the first pairs of the training split.
FIXED_PAIRS: tuple[Pair, ...] = (
    _render(_Clause(_NP(noun=_noun("boy")), _verb("eat"), obj=_NP(noun=_noun("apple"), det="a"))),
    _render(_Clause(_NP(noun=_noun("girl")), _verb("eat"), obj=_NP(noun=_noun("apple"), det="a"))),
    _render(_Clause(_NP(pronoun=PRONOUNS[4]), pred_noun=_NP(noun=_noun("friend"), plural=True, det="a"))),
)


def make_splits(
    seed: int = 0,
    n_train: int = DEFAULT_SIZES["train"],
    n_valid: int = DEFAULT_SIZES["valid"],
    n_test: int = DEFAULT_SIZES["test"],
) -> dict[str, list[Pair]]:
    """Train/valid/test splits of distinct sentences: no English sentence is in two splits.

    The FIXED_PAIRS are the first pairs of "train"; the rest of each split is in generation order.
    """
    if min(n_train, n_valid, n_test) < 0 or n_train < len(FIXED_PAIRS):
        raise ValueError(f"split sizes must be at least 0, and n_train at least {len(FIXED_PAIRS)}")
    seen = {p.source: p for p in FIXED_PAIRS}
    wanted = n_valid + n_test + n_train - len(FIXED_PAIRS)
    fresh: list[Pair] = []
    for pair in _iter_pairs(seed):
        if len(fresh) == wanted:
            break
        known = seen.get(pair.source)
        if known is None:
            seen[pair.source] = pair
            fresh.append(pair)
        elif known.target != pair.target:  # pragma: no cover - the grammar must be a function
            raise AssertionError(f"{pair.source!r} has two translations: {known.target!r}, {pair.target!r}")
    return {
        "train": list(FIXED_PAIRS) + fresh[n_valid + n_test :],
        "valid": fresh[:n_valid],
        "test": fresh[n_valid : n_valid + n_test],
    }


# ---------------------------------------------------------------------------------------------- vocabulary


def _possible_words() -> tuple[list[str], list[str]]:
    en: list[str] = ["the", "a", "an", "am", "is", "are", "not", "to"] + list(_POSTPOSITIONS)
    hi: list[str] = [_NOT, _ACC, "रहा", "रही", "रहे"] + [w for ws in _POSTPOSITIONS.values() for w in ws]
    for p in PRONOUNS:
        en.append(p.en)
        hi += [p.hi, p.aux]
    for (sg, pl), forms in _DEMONSTRATIVES.values():
        en += [sg, pl]
        hi += list(forms)
    for word, (forms, _) in _POSSESSIVES.items():
        en.append(word)
        hi += list(forms)
    for word, numeral in _NUMERALS.items():
        en.append(word)
        hi.append(numeral)
    animate_nouns = _nouns_with(_ANIMATE)
    for n in NOUNS:
        en.append(n.en)
        hi.append(n.hindi(False, False))
        if n.en_plural:
            en.append(n.en_plural)
            hi.append(n.hindi(True, False))
        if n in animate_nouns or "place" in n.tags or "container" in n.tags:  # the nouns used obliquely
            hi.append(n.hindi(False, True))
        if n in animate_nouns and n.en_plural:
            hi.append(n.hindi(True, True))
        if n.fem:
            hi += list(n.fem)
    subject_genders = {
        v: {n.gender for n in _nouns_with(v.subj)} | ({M, F} if "person" in v.subj else set()) for v in VERBS
    }
    for a in ADJECTIVES:
        en.append(a.en)
        genders = {n.gender for n in NOUNS if a.fits(n)} | ({M, F} if "person" in a.tags else set())
        hi += ([a.forms[0], a.forms[2]] if M in genders else []) + ([a.forms[1]] if F in genders else [])
    for v in VERBS:
        en += [v.en, v.en_s] + ([v.en_ing] if v.en_ing else [])
        *light, stem = v.hi_words
        suffixes = (["ता", "ते"] if M in subject_genders[v] else []) + (["ती"] if F in subject_genders[v] else [])
        hi += light + [stem + suffix for suffix in suffixes] + ([stem] if v.en_ing else [])
    return en, hi


def vocabulary() -> dict[str, list[str]]:
    """Every word the grammar can write, sorted, per language: {"en": [...], "hi": [...]}."""
    en, hi = _possible_words()
    return {"en": sorted(set(en)), "hi": sorted({_nfc(w) for w in hi})}


def lexicon_size() -> dict[str, int]:
    """The number of distinct words per language: {"en": …, "hi": …} (see `vocabulary`)."""
    return {lang: len(words) for lang, words in vocabulary().items()}


LEXICON_SIZE: dict[str, int] = lexicon_size()


# ------------------------------------------------------------------------------------------------- command


def write_splits(out: str | Path, seed: int = 0, **sizes: int) -> dict[str, Path]:
    """Write train.tsv, valid.tsv and test.tsv under `out`; returns their paths."""
    out = Path(out)
    paths = {}
    for name, pairs in make_splits(seed, **sizes).items():
        paths[name] = out / f"{name}.tsv"
        write_tsv(pairs, paths[name])
    return paths


def write_samples(out: str | Path, seed: int = 0) -> dict[str, Path]:
    """Write en_sentences.txt (60 toy sentences) and long_text.txt (≥ 3000 words) under `out`."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    splits = make_splits(seed)
    short = [p for p in splits["train"] if len(p.source.split()) <= 8]
    sentences = [p.source for p in short[:40]] + [p.source for p in splits["test"][:20]]
    paths = {"en_sentences": out / "en_sentences.txt", "long_text": out / "long_text.txt"}
    paths["en_sentences"].write_text("\n".join(sentences) + "\n", encoding="utf-8")
    lines, words = [], 0
    for pair in _iter_pairs(seed + 1000):
        if words >= 3000:
            break
        lines.append(pair.source)
        words += len(pair.source.split())
    paths["long_text"].write_text("\n".join(lines) + "\n", encoding="utf-8")
    return paths


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m scratchformer.tasks.en_hi",
        description="Write the toy English→Hindi splits (train/valid/test.tsv) with gold alignments.",
    )
    parser.add_argument("--out", default="data/en_hi", help="folder for the TSV files (default: data/en_hi)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--train", type=int, default=DEFAULT_SIZES["train"])
    parser.add_argument("--valid", type=int, default=DEFAULT_SIZES["valid"])
    parser.add_argument("--test", type=int, default=DEFAULT_SIZES["test"])
    parser.add_argument("--samples", metavar="DIR", help="also write en_sentences.txt and long_text.txt here")
    args = parser.parse_args(argv)
    paths = write_splits(args.out, args.seed, n_train=args.train, n_valid=args.valid, n_test=args.test)
    if args.samples:
        paths.update(write_samples(args.samples, args.seed))
    for path in paths.values():
        print(path)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
