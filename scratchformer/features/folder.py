"""A dictionary's folder, in SAELens's layout: `cfg.json` and `sae_weights.safetensors`.

    cfg.json                 d_in, d_sae, architecture, hook_name (also in metadata), apply_b_dec_to_input, k
                             (TopK), d_out (a transcoder), and a `scratchformer` entry: the model, the steps read
                             and predicted, the kind, the architecture it was trained as, and what training measured
    sae_weights.safetensors  W_enc (d_in × d_sae), W_dec (d_sae × d_out), b_enc (d_sae), b_dec (d_out), and
                             threshold (d_sae) for JumpReLU (a BatchTopK dictionary is stored as one)

So SAELens's `SAE.load_from_disk` opens what scratchformer trains, and scratchformer opens a SAELens dictionary a user
has on disk: its TransformerLens hook name is mapped to this model's step (`hook_step`), or refused in one sentence.
Weights load through safetensors: nothing in the folder is executed.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import torch
from safetensors import SafetensorError
from safetensors.torch import load_file, save_file

from ..errors import UserError
from .dictionary import ARCHITECTURES, Dictionary, DictionaryInfo

CFG, WEIGHTS = "cfg.json", "sae_weights.safetensors"
FORMAT_VERSION = 1
# SAELens's architecture names → (ours, whether it is a transcoder)
_STORED = {"topk": ("topk", False), "jumprelu": ("jumprelu", False), "standard": ("standard", False),
           "transcoder": ("standard", True), "jumprelu_transcoder": ("jumprelu", True)}  # fmt: skip


def cfg_of(d: Dictionary) -> dict:
    """The cfg.json of a dictionary (SAELens's fields, then ours)."""
    info = d.info
    arch = d.stored_architecture()
    cfg = {
        "architecture": (("jumprelu_" if arch == "jumprelu" else "") + "transcoder") if d.transcoder else arch,
        "d_in": d.d_in, "d_sae": d.d_sae, "dtype": "float32", "device": "cpu",
        "apply_b_dec_to_input": d.centres_input, "normalize_activations": "none", "reshape_activations": "none",
        "hook_name": info.at,
        "metadata": {"hook_name": info.at, "model_name": info.model, "sae_lens_training_version": None},
    }  # fmt: skip
    if arch == "topk":
        cfg["k"] = d.k
    if d.transcoder:
        cfg["d_out"] = d.d_out
        cfg["metadata"]["hook_name_out"] = info.to
    cfg["scratchformer"] = {"version": FORMAT_VERSION, "model": info.model, "kind": info.kind, "at": info.at,
                            "to": info.to, "trained_as": d.architecture, "k": d.k, "trained": info.trained}  # fmt: skip
    return cfg


def save(d: Dictionary, folder: str | Path) -> Path:
    """Write the dictionary's folder (made if missing); the weights first to a temporary name, so a folder is never
    left half written."""
    folder = Path(folder)
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UserError(f"Cannot make the folder {folder}: {exc.strerror or exc}.") from None
    tensors = {"W_enc": d.W_enc, "W_dec": d.W_dec, "b_enc": d.b_enc, "b_dec": d.b_dec}
    if d.stored_architecture() == "jumprelu":
        tensors["threshold"] = d.threshold
    tensors = {k: v.detach().float().cpu().contiguous() for k, v in tensors.items()}
    part = folder / (WEIGHTS + ".part")
    save_file(tensors, str(part))
    part.replace(folder / WEIGHTS)
    (folder / CFG).write_text(json.dumps(cfg_of(d), indent=2) + "\n", encoding="utf-8")
    return folder


def load(folder: str | Path) -> Dictionary:
    """A dictionary folder (ours or SAELens's) → Dictionary on CPU. Its step names are as stored: a SAELens hook
    name is mapped to this model's steps by `hook_step` when the dictionary is attached to a model."""
    folder = Path(folder)
    if not folder.exists():
        raise UserError(f"The dictionary folder {folder} does not exist.")
    if not folder.is_dir():
        raise UserError(f"{folder} is a file; a dictionary is a folder holding {CFG} and {WEIGHTS}.")
    for name in (CFG, WEIGHTS):
        if not (folder / name).is_file():
            raise UserError(f"{folder} holds no {name}: a dictionary folder holds {CFG} and {WEIGHTS} (SAELens's "
                            "layout).")  # fmt: skip
    try:
        cfg = json.loads((folder / CFG).read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise UserError(f"{folder / CFG} is not valid JSON ({exc.__class__.__name__}).") from None
    if not isinstance(cfg, dict):
        raise UserError(f"{folder / CFG} holds no JSON object.")
    try:
        tensors = load_file(str(folder / WEIGHTS))
    except (SafetensorError, OSError, ValueError) as exc:
        first = (str(exc).splitlines() or [type(exc).__name__])[0][:120]
        raise UserError(f"{folder / WEIGHTS} cannot be read as safetensors: {first}.") from None
    return from_parts(cfg, tensors, str(folder))


def from_parts(cfg: dict, tensors: dict[str, torch.Tensor], where: str) -> Dictionary:
    ours = cfg.get("scratchformer") if isinstance(cfg.get("scratchformer"), dict) else {}
    stored = cfg.get("architecture", "standard")
    if stored not in _STORED:
        raise UserError(f"{where}: the architecture {stored!r} is not one scratchformer runs (it runs "
                        f"{', '.join(sorted(_STORED))}).")  # fmt: skip
    arch, transcoder = _STORED[stored]
    missing = [k for k in ("W_enc", "W_dec", "b_enc", "b_dec") if k not in tensors]
    if arch == "jumprelu" and "threshold" not in tensors:
        missing.append("threshold")
    if missing:
        raise UserError(f"{where}: the weights lack {', '.join(missing)}.")
    w_enc, w_dec = tensors["W_enc"].float(), tensors["W_dec"].float()
    if w_enc.dim() != 2 or w_dec.dim() != 2 or w_enc.shape[1] != w_dec.shape[0]:
        raise UserError(f"{where}: W_enc {tuple(w_enc.shape)} and W_dec {tuple(w_dec.shape)} do not fit together "
                        "(W_enc is d_in × d_sae, W_dec d_sae × d_out).")  # fmt: skip
    d_in, d_sae, d_out = w_enc.shape[0], w_enc.shape[1], w_dec.shape[1]
    for key, want in (("d_in", d_in), ("d_sae", d_sae)):
        if key in cfg and cfg[key] != want:
            raise UserError(f"{where}: cfg.json says {key} {cfg[key]} but the weights have {want}.")
    hook = cfg.get("hook_name") or (cfg.get("metadata") or {}).get("hook_name") or ""
    hook_out = (cfg.get("metadata") or {}).get("hook_name_out") or hook
    trained_as = ours.get("trained_as") if ours.get("trained_as") in ARCHITECTURES else arch
    kind = "transcoder" if transcoder or ours.get("kind") == "transcoder" else "sae"
    info = DictionaryInfo(at=ours.get("at") or hook, to=ours.get("to") or hook_out, model=ours.get("model") or
                          (cfg.get("metadata") or {}).get("model_name") or "", kind=kind,
                          trained=ours.get("trained") if isinstance(ours.get("trained"), dict) else {})  # fmt: skip
    k = int(cfg.get("k") or ours.get("k") or 8)
    d = Dictionary(d_in, d_sae, trained_as, k, d_out, info)
    if not d.centres_input and cfg.get("apply_b_dec_to_input"):
        raise UserError(f"{where}: a transcoder cannot subtract its output bias from its input.")
    if cfg.get("apply_b_dec_to_input") is False:
        d.apply_b_dec_to_input = False
    with torch.no_grad():
        d.W_enc.copy_(w_enc)
        d.W_dec.copy_(w_dec)
        d.b_enc.copy_(tensors["b_enc"].float().reshape(d_sae))
        d.b_dec.copy_(tensors["b_dec"].float().reshape(d_out))
        if "threshold" in tensors:
            d.threshold.copy_(tensors["threshold"].float().reshape(d_sae))
        if arch == "topk" and cfg.get("rescale_acts_by_decoder_norm"):
            # SAELens's TopK then ranks pre · ‖W_dec,i‖ and decodes f / ‖W_dec,i‖ (its training default, kept in the
            # folders its trainer writes): folding the norms into the weights gives the same features and output
            n = d.W_dec.norm(dim=1).clamp_min(1e-8)  # (d_sae,)
            d.W_enc.mul_(n)
            d.b_enc.mul_(n)
            d.W_dec.div_(n[:, None])
    d.eval()
    return d


# TransformerLens's hook names (SAELens dictionaries of GPT-2, Gemma, Llama …) → this model's steps
_TL_HOOK = re.compile(r"blocks\.(\d+)\.(hook_resid_pre|hook_resid_mid|hook_resid_post|hook_mlp_out|hook_attn_out|"
                      r"ln2\.hook_normalized|hook_mlp_in|attn\.hook_z)")  # fmt: skip


def hook_step(model, hook: str, readable: list[str]) -> str:
    """The step of this model a dictionary's stored hook name reads: our own step names as they are, and
    TransformerLens's `blocks.L.hook_…` mapped for a decoder-only model; UserError when it cannot be mapped."""
    if hook in readable:
        return hook
    m = _TL_HOOK.fullmatch(hook)
    c = model.config
    if m is None or c.has_encoder:
        raise UserError(f"The dictionary reads {hook!r}, which names no step of this model and no TransformerLens "
                        "hook scratchformer can map (it maps blocks.L.hook_resid_pre/mid/post, hook_mlp_out, "
                        "hook_attn_out and ln2.hook_normalized of decoder-only models).")  # fmt: skip
    layer, what = int(m[1]), m[2]
    part = "residual" if c.norm_first else "out"
    post = f"decoder.{layer}.add_norm3.{part}"
    mapped = {
        "hook_resid_mid": f"decoder.{layer}.add_norm1.{part}",
        "hook_resid_post": post,
        "hook_mlp_out": f"decoder.{layer}.ffn.out",
        "hook_attn_out": f"decoder.{layer}.self_attn.out",
        "ln2.hook_normalized": f"decoder.{layer}.add_norm3.norm",
        "hook_mlp_in": f"decoder.{layer}.add_norm3.norm",
        "attn.hook_z": f"decoder.{layer}.self_attn.context",
        "hook_resid_pre": f"decoder.{layer - 1}.add_norm3.{part}" if layer > 0 else None,
    }[what]  # fmt: skip
    if mapped is None:  # the first layer's input: the embeddings' output
        mapped = next((s for s in readable if s.startswith("tgt_embed")), None)
    if mapped not in readable:
        raise UserError(f"The dictionary reads {hook!r}; this model would call that {mapped or 'nothing'}, which it "
                        "does not have (fewer layers, or another layout).")  # fmt: skip
    return mapped
