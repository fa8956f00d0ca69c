"""What one opened model is: the Transformer with its two tokenizers (ModelBundle), and the inputs of one run
(Inputs). The importers of every family build a ModelBundle; scratchformer.loading.bundle opens models by name or folder
and returns one. Kept apart from bundle.py so that the importers, which bundle.load_model calls, need nothing of it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from ..errors import UserError
from ..recording.trace import Trace
from ..running.batching import sliding_windows
from ..running.decoding import greedy
from ..running.examples import Example, examples_for
from ..running.generation import Continuation, continue_ids, fitted
from ..transformer.masks import pad_from_ids
from ..transformer.model import Transformer
from .memory import MemoryEstimate, check_budget, estimate_run
from .tokenizers import TextTokenizer

GENERATION_CAP = 64  # longest output generated for the decoder input: a random-weight model never says "stop"


@dataclass
class Inputs:
    """Everything one forward pass needs, plus what to tell the user about how the text was read."""

    src: torch.Tensor | None  # (B, S) ids, or None for a decoder-only model
    tgt: torch.Tensor | None  # (B, T) decoder input ids starting with the start token, or None (encoder-only)
    src_pad: torch.Tensor | None
    tgt_pad: torch.Tensor | None
    source_tokens: list[list[str]]
    target_tokens: list[list[str]]
    notes: list[str] = field(default_factory=list)  # e.g. "The source was cut to 512 tokens."
    unknown_words: list[str] = field(default_factory=list)  # source words outside the vocabulary
    unknown_target_words: list[str] = field(default_factory=list)
    # What the decoder reads behind its start token: "typed" (teacher forcing on the given target, or a
    # decoder-only model's prompt), "generated" (the model's own greedy output), "start_only", "windows" (the
    # walkthrough's batch, shifted right) or "none" (an encoder-only model).
    decoder_input: str = "typed"
    translation: str = ""  # the generated output as text, when decoder_input == "generated"
    generated: list[int] = field(default_factory=list)  # its ids (no start, prefix or end token)
    continuation: Continuation | None = None  # how a decoder-only model's generated continuation was chosen
    # What the tokenizer could not keep, by side ("source", "target", "text"): (the text's characters, what they
    # became), e.g. ("pizza", "<unk>"), ("Café", "cafe"), ("\u200b", "nothing (dropped)"); notes say it in words.
    lost: dict[str, list[tuple[str, str]]] = field(default_factory=dict)


@dataclass
class ModelBundle:
    model: Transformer
    src_tokenizer: TextTokenizer
    tgt_tokenizer: TextTokenizer
    name: str  # what people see: "en-hi", "blog", "all-MiniLM-L6-v2"
    origin: str  # "preset", "bundled", a checkpoint path, or a Hugging Face directory

    @property
    def config(self):
        return self.model.config

    @property
    def device(self) -> torch.device:
        return self.model.device

    def describe(self) -> str:
        c = self.config
        stacks = []
        if c.has_encoder:
            stacks.append(f"{c.n_encoder_layers} encoder")
        if c.has_decoder:
            stacks.append(f"{c.n_decoder_layers} decoder")
        n = sum(p.numel() for p in self.model.parameters())
        return (
            f"{self.name}: {' + '.join(stacks)} layers, d_model {c.d_model}, {c.n_heads} heads, d_ff {c.d_ff}, "
            f"{n / 1e6:.2f} M parameters, tokenizer {self.src_tokenizer.name}"
        )

    @property
    def untrained(self) -> bool:
        """Presets have seeded random weights: their attention carries no meaning yet."""
        return self.origin == "preset"

    @property
    def can_generate(self) -> bool:
        """An encoder-decoder: it can write its own output for the decoder to read."""
        return self.config.has_encoder and self.config.has_decoder

    def examples(self) -> list[Example]:
        return examples_for(self.name, self.origin, self.config.extra)

    def generation_limit(self, n_source: int) -> int:
        """How many tokens greedy decoding may write for a source of n tokens: 2n + 10, at most GENERATION_CAP,
        and no more than the decoder's positions allow."""
        return max(1, min(2 * n_source + 10, GENERATION_CAP, self.config.max_len - 1))

    def _special(self, key: str, tok: TextTokenizer) -> list[int]:
        return [tid for t in self.config.extra.get(key, []) if (tid := tok.token_id(t)) is not None]

    def _ids(self, text: str, tok: TextTokenizer, side: str, budget: int, truncate: bool, notes: list) -> list[int]:
        ids = tok.encode(text)
        if len(ids) > budget:
            if not truncate:
                raise UserError(
                    f"The {side} has {len(ids)} tokens but this model reads at most {budget}; shorten the text."
                )
            notes.append(f"The {side} had {len(ids)} tokens and was cut to the model's maximum of {budget}.")
            ids = ids[:budget]
        return ids

    def encode_source(self, text: str, truncate: bool = False, notes: list | None = None) -> list[int]:
        notes = [] if notes is None else notes
        prefix = self._special("src_prefix", self.src_tokenizer)
        suffix = self._special("src_suffix", self.src_tokenizer)
        budget = self.config.max_len - len(prefix) - len(suffix)
        return prefix + self._ids(text, self.src_tokenizer, "source", budget, truncate, notes) + suffix

    def end_id(self) -> int | None:
        """The token that ends a translation: the config's eos_id, else the target tokenizer's (None: no end)."""
        c = self.config
        return c.eos_id if c.eos_id is not None else self.tgt_tokenizer.eos_id

    def target_prefix(self) -> list[int]:
        """Ids an encoder-decoder reads right after the start token (mBART's language code: extra["tgt_prefix"]);
        tokens the tokenizer does not know are left out."""
        return self._special("tgt_prefix", self.tgt_tokenizer)

    def start_id(self) -> int:
        c, tok = self.config, self.tgt_tokenizer
        for candidate in (c.bos_id, tok.bos_id, tok.eos_id):
            if candidate is not None:
                return candidate
        raise UserError("This model's tokenizer has no start token for the decoder.")

    def prepare(self, source: str, target: str = "", truncate: bool = False) -> Inputs:
        """Text → ids for one sentence. The decoder input is the start token followed by the target."""
        source, target = (source or "").strip(), (target or "").strip()
        c, notes = self.config, []
        if not source:
            raise UserError("The source text is empty; type a sentence first.")
        src = src_tokens = None
        if c.has_encoder:
            src_ids = self.encode_source(source, truncate, notes)
            src = torch.tensor([src_ids], dtype=torch.long)  # (1, S)
            src_tokens = [self.src_tokenizer.token_strings(src_ids)]
        unknown = self.src_tokenizer.unknown_words(source)
        lost = {}
        lost["source" if c.has_encoder else "text"] = (self.src_tokenizer if c.has_encoder else
                                                       self.tgt_tokenizer).losses(source)  # fmt: skip
        unknown_target: list[str] = []
        tgt = tgt_tokens = None
        if c.has_decoder:
            text = target if c.has_encoder else source
            # tgt_prefix: tokens a model is trained to read right after the start token (BART's forced <s>)
            prefix = self.target_prefix() if c.has_encoder else []
            side = "target" if c.has_encoder else "text"  # a decoder-only model's text is its decoder input
            typed = self._ids(text, self.tgt_tokenizer, side, c.max_len - 1 - len(prefix), truncate, notes)
            tgt_ids = [self.start_id()] + prefix + typed
            tgt = torch.tensor([tgt_ids], dtype=torch.long)  # (1, T)
            tgt_tokens = [self.tgt_tokenizer.token_strings(tgt_ids)]
            if c.has_encoder:
                unknown_target = self.tgt_tokenizer.unknown_words(target)
                lost["target"] = self.tgt_tokenizer.losses(target)
        lost = {side: pairs for side, pairs in lost.items() if pairs}
        for side, pairs in lost.items():
            lost_note(notes, side, pairs)
        if not c.has_encoder:
            src_tokens = tgt_tokens
        mode = "typed" if c.has_decoder else "none"
        if c.has_encoder and c.has_decoder and not target:
            mode = "start_only"
        return Inputs(src, tgt, None, None, src_tokens or [], tgt_tokens or [], notes, unknown, unknown_target, mode,
                      lost=lost)

    def prepare_run(self, source: str, target: str = "", start_only: bool = False, truncate: bool = False,
                    continuation: Continuation | None = None) -> Inputs:
        """The inputs of one walkthrough, with the decoder-input rule of the window and `trace`: a typed target
        is teacher forcing; an empty one means the model's own output (greedy decoding with the KV cache, at most
        generation_limit() tokens) behind the start token, or the start token alone when `start_only`.
        A decoder-only model reads the text itself, followed by its own continuation when `continuation` says how
        to make one (cut to the positions left, with a note)."""
        inputs = self.prepare(source, target, truncate)
        if not self.config.has_encoder and self.config.has_decoder:
            wanted = continuation is not None and not start_only and not (target or "").strip()
            return self._continue(inputs, continuation) if wanted else inputs
        if inputs.decoder_input != "start_only" or start_only:
            return inputs
        src_ids = inputs.src[0].tolist()
        prefix = self.target_prefix()
        limit = max(1, self.generation_limit(len(src_ids)) - len(prefix))
        ids = greedy(self, src_ids, limit, prefix=prefix)  # (T_gen,) without start, prefix or end token
        if not ids:
            return inputs  # the model ended at once: the start token (and prefix) is all there is to read
        tgt_ids = [self.start_id()] + prefix + ids
        inputs.tgt = torch.tensor([tgt_ids], dtype=torch.long)  # (1, 1 + T_gen)
        inputs.target_tokens = [self.tgt_tokenizer.token_strings(tgt_ids)]
        inputs.decoder_input = "generated"
        inputs.translation = self.tgt_tokenizer.decode(ids)
        inputs.generated = ids
        return inputs

    def _continue(self, inputs: Inputs, how: Continuation) -> Inputs:
        """A decoder-only model's text followed by its own continuation (scratchformer.running.generation)."""
        prompt = inputs.tgt[0, 1:].tolist()  # the text's ids, behind the start token
        how, note = fitted(how, self.config, len(prompt))
        if note:
            inputs.notes.append(note)
        if how is None:
            return inputs
        ids = continue_ids(self, prompt, how)  # (T_new,) without the end token
        if not ids:
            inputs.notes.append("The model ended the text at once: it chose its end token first.")
            return inputs
        tgt_ids = [self.start_id(), *prompt, *ids]
        inputs.tgt = torch.tensor([tgt_ids], dtype=torch.long)  # (1, 1 + P + T_new)
        inputs.target_tokens = [self.tgt_tokenizer.token_strings(tgt_ids)]
        inputs.source_tokens = inputs.target_tokens
        inputs.decoder_input = "generated"
        inputs.translation = self.tgt_tokenizer.decode(ids)
        inputs.generated = ids
        inputs.continuation = how
        return inputs

    def prepare_padded(self, source: str, target: str = "", start_only: bool = False, variants: int = 3) -> Inputs:
        """A small padded batch built from one sentence, so the padding masks have something to show: row 0 is
        the sentence (with prepare_run's decoder input), row k drops its last k words (and the decoder input its
        last k tokens), padded at the end to row 0's length. The padding is given explicitly (src_pad, tgt_pad),
        so it works for models without a pad token too."""
        base = self.prepare_run(source, target, start_only)
        c = self.config
        words = " ".join(source.split()).split(" ")
        n = max(1, min(variants, len(words)))
        if n < 2:
            raise UserError("A padded batch needs a sentence of at least two words.")
        pad_value = next((v for v in (c.pad_id, c.eos_id, 0) if v is not None), 0)

        def padded(rows: list[list[int]], tokenizer) -> tuple[torch.Tensor, torch.Tensor, list[list[str]]]:
            width = max(len(r) for r in rows)
            ids = torch.tensor([r + [pad_value] * (width - len(r)) for r in rows], dtype=torch.long)  # (B, L)
            pad = torch.tensor([[False] * len(r) + [True] * (width - len(r)) for r in rows])  # (B, L)
            labels = [tokenizer.token_strings(r) + ["<pad>"] * (width - len(r)) for r in rows]
            return ids, pad, labels

        inputs = Inputs(None, None, None, None, [], [], list(base.notes), base.unknown_words,
                        base.unknown_target_words, base.decoder_input, base.translation, lost=base.lost)
        if c.has_encoder:
            rows = [self.encode_source(" ".join(words[: len(words) - k]), truncate=True) for k in range(n)]
            inputs.src, inputs.src_pad, inputs.source_tokens = padded(rows, self.src_tokenizer)
        if c.has_decoder:
            first = base.tgt[0].tolist()
            if c.has_encoder:  # the decoder input shortened with the source (always keeping the start token)
                rows = [first[: max(1, len(first) - k)] for k in range(n)]
            else:  # decoder-only: the source variants are the decoder input
                rows = [[self.start_id()] + self.tgt_tokenizer.encode(" ".join(words[: len(words) - k]))
                        for k in range(n)]
            inputs.tgt, inputs.tgt_pad, inputs.target_tokens = padded(rows, self.tgt_tokenizer)
            if not c.has_encoder:
                inputs.source_tokens = inputs.target_tokens
        inputs.notes.append(f"A padded batch of {n}: the sentence and {n - 1} shorter version(s), padded at the end.")
        return inputs

    def prepare_windows(self, text: str, seq_len: int, batch: int) -> Inputs:
        """The walkthrough's batching of a long text: B windows of S tokens, stride 1 (see batching.py)."""
        if seq_len > self.config.max_len:
            raise UserError(f"--seq-len {seq_len} exceeds this model's maximum length {self.config.max_len}.")
        ids = self.src_tokenizer.encode(text)
        start = self.start_id() if self.config.has_decoder else 0  # an encoder-only model has no decoder batch
        src, tgt = sliding_windows(ids, seq_len, batch, start)
        src_tokens = [self.src_tokenizer.token_strings(row) for row in src.tolist()]
        tgt_tokens = [self.tgt_tokenizer.token_strings(row) for row in tgt.tolist()]
        lost, notes = self.src_tokenizer.losses(text), []  # the whole text, as the token stream reads it
        lost_note(notes, "text", lost)
        said = {"notes": notes, "lost": {"text": lost} if lost else {}}
        if not self.config.has_encoder:
            return Inputs(None, tgt, None, None, tgt_tokens, tgt_tokens, decoder_input="windows", **said)
        if not self.config.has_decoder:
            return Inputs(src, None, None, None, src_tokens, [], decoder_input="none", **said)
        return Inputs(src, tgt, None, None, src_tokens, tgt_tokens, decoder_input="windows", **said)

    def memory_estimate(self, inputs: Inputs, keep_output: bool = False) -> MemoryEstimate:
        """What tracing these inputs will need (scratchformer.loading.memory)."""
        ids = inputs.src if inputs.src is not None else inputs.tgt
        n_items = ids.shape[0] if ids is not None else 1
        n_src = inputs.src.shape[1] if inputs.src is not None else 0
        n_tgt = inputs.tgt.shape[1] if inputs.tgt is not None else 0
        weights = sum(p.numel() * p.element_size() for p in self.model.parameters())
        return estimate_run(self.config, n_items, n_src, n_tgt, weights, keep_output=keep_output)

    def run(self, inputs: Inputs, keep_output: bool = True, budget: int | None = None
            ) -> tuple[torch.Tensor | None, Trace]:  # fmt: skip
        """One traced forward pass on the model's device. keep_output=False returns no output (the logits of a
        long batch are the largest tensor of all; the trace keeps what it shows of them). With a memory
        `budget` (bytes), a run that would need more is refused with one sentence before it starts."""
        if budget is not None:
            ids = inputs.src if inputs.src is not None else inputs.tgt
            n_items, length = (ids.shape[0], ids.shape[1]) if ids is not None else (1, 0)
            check_budget(self.memory_estimate(inputs, keep_output), budget, n_items, length)
        dev = self.device
        to = (lambda t: None if t is None else t.to(dev))  # noqa: E731
        c = self.config
        src_pad = inputs.src_pad if inputs.src_pad is not None else pad_from_ids(inputs.src, c.pad_id)
        tgt_pad = inputs.tgt_pad if inputs.tgt_pad is not None else pad_from_ids(inputs.tgt, c.pad_id, start=True)
        if c.has_encoder:
            return self.model.run_with_trace(
                to(inputs.src), to(inputs.tgt), to(src_pad), to(tgt_pad), inputs.source_tokens, inputs.target_tokens,
                keep_output=keep_output,
            )
        return self.model.run_with_trace(
            None, to(inputs.tgt), None, to(tgt_pad), inputs.source_tokens, inputs.target_tokens,
            keep_output=keep_output,
        )


def visible(text: str) -> str:
    """Text with its invisible characters written out (a bell as \\x07, a zero-width space as \\u200b)."""
    return "".join(ch if ch.isprintable() and not ch.isspace() or ch == " " else ascii(ch)[1:-1] for ch in text)


def lost_note(notes: list[str], side: str, lost: list[tuple[str, str]], shown: int = 6) -> None:
    """One sentence saying which parts of the text the tokenizer could not keep, and what they became."""
    if not lost:
        return
    listed = ", ".join(f"“{visible(a)}” → {visible(b)}" for a, b in lost[:shown])
    more = f" and {len(lost) - shown} more" if len(lost) > shown else ""
    notes.append(f"The tokenizer could not keep all of the {side}: {listed}{more}.")
