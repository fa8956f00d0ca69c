"""The decoder's causal mask (paper §3.2.3): position i may attend to positions 0 … i only. So nothing a later
decoder-input token does can reach an earlier position's output: replace the token at position j and every
position i < j keeps exactly the same numbers. Without the mask, every position reads the later tokens too —
and in training, where the decoder input is the target shifted right, position i would see the very token it
must predict at position i + 1 and could learn to copy it instead of to translate.

Measured with the model's own decoder (Transformer.decode, causal=True or False), one replaced token at a time.
"""

from __future__ import annotations

import torch

from .inputs import encoded, need_two_tokens, read_text, replacement

TITLE = "The causal mask"
CLAIM = ("With the causal mask, changing a later decoder-input token changes no earlier position's output at all "
         "(exactly 0); without it, earlier positions read the future.")  # fmt: skip
CONTROLS = {"masked": True, "seed": 0}


def applies(bundle) -> str | None:
    if not bundle.config.has_decoder:
        return (f"The mask experiment needs a decoder, and {bundle.name} has none: its encoder lets every token "
                "see every other, so there is no causal mask to remove.")  # fmt: skip
    return None


def changes(model, tgt: torch.Tensor, memory, replacements: list[int], causal: bool) -> torch.Tensor:
    """(T, T) change[i, j]: the largest |Δ| of decoder position i's output when token j is replaced (column 0,
    the start token, is never replaced and stays 0). Each variant runs alone, shaped as the original run."""
    t = tgt.shape[1]
    out = torch.zeros(t, t, dtype=torch.float64)
    with torch.inference_mode():
        base = model.decode(tgt, memory, causal=causal)  # (1, T, d_model)
        for j in range(1, t):
            other = tgt.clone()
            other[0, j] = replacements[j]
            moved = model.decode(other, memory, causal=causal)  # (1, T, d_model)
            out[:, j] = (moved[0].double() - base[0].double()).abs().amax(-1)  # (T,)
    return out


def run(bundle, source: str, target: str | None = None, masked: bool = True, seed: int = 0) -> dict:
    text = read_text(bundle, source, target)
    need_two_tokens(text.target_tokens, "mask experiment's decoder input")
    model = bundle.model
    memory = encoded(model, text.src)
    gen = torch.Generator().manual_seed(int(seed))
    ids = text.tgt[0].tolist()
    replacements = [ids[0]] + [replacement(bundle, "tgt", i, gen) for i in ids[1:]]
    result = {}
    for key, causal in (("with_mask", True), ("without_mask", False)):
        change = changes(model, text.tgt, memory, replacements, causal)  # (T, T)
        future = torch.triu(change, diagonal=1)  # i < j: position i, a later token j
        result[key] = {"max_change_from_future": float(future.max()),
                       "changes": [[float(x) for x in row] for row in change.tolist()]}
    new_tokens = bundle.tgt_tokenizer.token_strings(replacements)
    with_mask, without = result["with_mask"]["max_change_from_future"], result["without_mask"]["max_change_from_future"]
    result.update(
        decoder_tokens=text.target_tokens, replaced_with=["—"] + new_tokens[1:], decoder_input=text.decoder_input,
        summary=(f"Replacing a later token moves an earlier position's output by "
                 f"{'exactly 0' if with_mask == 0 else f'at most {with_mask:.3g}'} with the mask and by up to "
                 f"{without:.3g} without it."),
    )
    return result
