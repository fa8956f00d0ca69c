"""What a tab says depends on the kind of model it shows: an encoder-decoder (the paper's, BART, T5, Marian), an
encoder alone (BERT, MiniLM: with or without an output layer over a vocabulary) or a decoder alone (GPT-2).
TAB_TEXTS (tabs.py) is written for the paper's encoder-decoder; these are the tabs whose sentences change for the
other kinds, and the numbers they quote."""

from __future__ import annotations

from ..recording.trace import Trace
from ..transformer.config import TransformerConfig

ENCODER_DECODER, ENCODER_ONLY, EMBEDDING_ONLY, DECODER_ONLY = (
    "encoder-decoder", "encoder-only", "encoder-only, no output layer", "decoder-only")  # fmt: skip


def model_kind(config: TransformerConfig, trace: Trace | None = None) -> str:
    """One of the four kinds above; an encoder without `generator.probs` in its trace has no output layer."""
    if config.has_encoder and config.has_decoder:
        return ENCODER_DECODER
    if config.has_decoder:
        return DECODER_ONLY
    if trace is not None and trace.find("generator.probs") is None:
        return EMBEDDING_ONLY
    return ENCODER_ONLY


_NO_CAUSAL = {
    "what": "What each attention may not look at. A blocked cell gets −∞ added to its score, so the softmax gives "
            "it weight 0. Below, the current attention's scores with the mask added, and the weights after the "
            "softmax, side by side.",
    "why": "Padding is not part of the text, so no position may attend to it. This model has no decoder, so "
           "there is no causal mask: every token reads every other token, before and after it — that is what "
           "lets an encoder build each word's vector from its whole context.",
}
_NO_DECODER = {
    "what": "This model has no decoder, so it generates nothing: it reads the whole text at once, every token "
            "seeing every other, and hands on one vector per token.",
    "why": "Encoders such as BERT and MiniLM are built to represent text for other tasks — classifying it, "
           "searching it, answering questions about it — not to write it. Generation needs a decoder, which "
           "reads its own earlier output through a causal mask.",
}

KIND_TEXTS: dict[tuple[str, str], dict[str, str]] = {
    ("masks", ENCODER_ONLY): _NO_CAUSAL,
    ("masks", EMBEDDING_ONLY): _NO_CAUSAL,
    ("masks", DECODER_ONLY): {
        "what": "What each attention may not look at. A blocked cell gets −∞ added to its score, so the softmax "
                "gives it weight 0. This model has one attention type: the decoder's masked self-attention.",
        "why": "There is no encoder and no second sentence: the model reads one text, and its causal mask lets "
               "position t read positions 0 … t only. So every row can learn to predict the token after it in "
               "one pass, exactly as it will when it writes one token at a time.",
    },
    ("output", ENCODER_ONLY): {
        "what": "The last step: an output layer turns each position's vector into one score per vocabulary "
                "entry, and the softmax turns the scores into probabilities. The table lists each position's most "
                "likely tokens.",
        "why": "An encoder's output layer (BERT's masked-language-model head) guesses the token at each position "
               "itself — what a [MASK] there should be — from the words on both sides, not the next token.",
    },
    ("output", EMBEDDING_ONLY): {
        "what": "This model has no output layer over a vocabulary: it ends with the encoder's last Add & Norm, one "
                "vector per token. A sentence-embedding model averages those vectors into one for the whole text.",
        "why": "Models such as all-MiniLM are trained so that texts of similar meaning get nearby vectors, not to "
               "predict words; their output is the vectors themselves, which search and clustering compare.",
    },
    ("output", DECODER_ONLY): {
        "what": "The last step: the final linear layer turns each position's vector into one score per "
                "vocabulary token, and the softmax turns the scores into probabilities. The table lists each "
                "position's most likely next tokens.",
        "why": "Row t has read the text up to token t and predicts token t + 1. Training raises the probability "
               "of the true next token at every row at once; continuing the text picks one token from the last "
               "row and appends it.",
    },
    ("decoding", ENCODER_ONLY): _NO_DECODER,
    ("decoding", EMBEDDING_ONLY): _NO_DECODER,
    ("decoding", DECODER_ONLY): {
        "what": "Continuing the text one token at a time: each step reads the text so far, takes the last row's "
                "probabilities and appends a token (the most likely, or one sampled with a temperature and "
                "top-k), then reads again. Each step shows the new token's self-attention over everything before "
                "it and its top candidates.",
        "why": "This is how GPT-style models write: they only ever predict the next token and read their own "
               "output back in. The causal mask makes every step's rows equal to the one-pass trace.",
    },
}


def kind_numbers(tab: str, kind: str, trace: Trace, config: TransformerConfig, tokens: int, facts: dict) -> str | None:
    """This run's numbers for a tab whose text changes with the kind of model; None where tabs.py's apply."""
    if tab == "output" and kind == EMBEDDING_ONLY:
        return f"{tokens} tokens × d_model = {config.d_model} numbers leave the last encoder layer."
    if tab == "output" and kind == ENCODER_ONLY:
        return (f"{tokens} positions × {config.tgt_vocab_size:,} vocabulary entries: each row's probabilities sum to "
                "1, and its top token is the model's guess for that position.")
    if tab == "output" and kind == DECODER_ONLY:
        return (f"{tokens} positions × {config.tgt_vocab_size:,} vocabulary entries: each row's probabilities sum to "
                "1, and its top token is the model's guess for the next one.")
    if tab == "decoding" and kind in (ENCODER_ONLY, EMBEDDING_ONLY):
        return f"This run read {tokens} tokens in one pass; there is nothing to generate."
    if tab == "decoding" and kind == DECODER_ONLY:
        added = facts.get("translation", "")
        if added:
            return f"Run continued the text with “{added.strip()}”; the steps replay it one token at a time."
        return "This run added no tokens (new tokens: none), so there is nothing to replay; ask for some and Run."
    return None
