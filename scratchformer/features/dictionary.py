"""A sparse dictionary: a sparse autoencoder (SAE) of one step's activations, or a transcoder from one step to another.

Both write an activation as a sparse, non-negative mix of learned directions (Bricken et al. 2023; Gao et al. 2024;
Dunefsky et al. 2024 for transcoders):

    pre  = (x − b_dec) W_enc + b_enc          (B…, d_sae)   the feature pre-activations (an SAE centres x on b_dec;
                                                            a transcoder reads x as it is: its b_dec is an output's)
    f    = σ(pre)                             (B…, d_sae)   the features: few non-zero, none negative
    x̂    = f W_dec + b_dec                    (B…, d_out)   the reconstruction (d_out = d_in for an SAE)

σ, the architecture:
- "topk":      keep the k largest pre-activations of each token, ReLU them, zero the rest;
- "batchtopk": in training, keep the k·n largest of a batch of n tokens; once trained it is stored and run as a
               JumpReLU whose threshold is the smallest activation BatchTopK still kept (as SAELens stores it);
- "jumprelu":  pre where pre > threshold (per feature), else 0;
- "standard":  ReLU(pre), trained with an L1 penalty.

The weights are laid out as SAELens lays them out (W_enc d_in × d_sae, W_dec d_sae × d_out), so the folder it
reads and writes (scratchformer.features.folder) is the same bytes.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
from torch import nn

ARCHITECTURES = ("topk", "batchtopk", "jumprelu", "standard")
KINDS = ("sae", "transcoder")


@dataclass
class DictionaryInfo:
    """What a dictionary reads and where it came from: the step it reads (`at`), the step it predicts (`to`, a
    transcoder's; the same as `at` for an SAE), the model's name, and what the trainer measured."""

    at: str
    to: str
    model: str = ""
    kind: str = "sae"
    trained: dict = field(default_factory=dict)  # fvu, l0, dead, … (scratchformer.features.quality)


class Dictionary(nn.Module):
    """An SAE or a transcoder (see the module's text). `forward` returns (pre, f, x̂)."""

    def __init__(self, d_in: int, d_sae: int, architecture: str = "topk", k: int = 8, d_out: int | None = None,
                 info: DictionaryInfo | None = None) -> None:  # fmt: skip
        super().__init__()
        if architecture not in ARCHITECTURES:
            raise ValueError(f"unknown architecture {architecture!r}")
        self.d_in, self.d_sae, self.d_out = d_in, d_sae, d_out or d_in
        self.architecture, self.k = architecture, k
        self.info = info or DictionaryInfo("", "")
        self.W_enc = nn.Parameter(torch.empty(d_in, d_sae))  # (d_in, d_sae)
        self.W_dec = nn.Parameter(torch.empty(d_sae, self.d_out))  # (d_sae, d_out)
        self.b_enc = nn.Parameter(torch.zeros(d_sae))
        self.b_dec = nn.Parameter(torch.zeros(self.d_out))
        self.register_buffer("threshold", torch.zeros(d_sae))  # JumpReLU's, and BatchTopK's once trained
        # SAELens's apply_b_dec_to_input: an SAE encodes x − b_dec; a transcoder x (its b_dec is an output's)
        self.apply_b_dec_to_input = not self.transcoder
        self.reset_parameters()

    @property
    def transcoder(self) -> bool:
        return self.info.kind == "transcoder"

    @property
    def centres_input(self) -> bool:
        """Whether x − b_dec is encoded (an SAE, as a rule) or x itself (a transcoder)."""
        return self.apply_b_dec_to_input

    def reset_parameters(self, generator: torch.Generator | None = None) -> None:
        """Unit-norm decoder rows, the encoder their transpose (Gao et al. 2024's initialisation), zero biases."""
        with torch.no_grad():
            w = torch.randn(self.d_sae, self.d_out, generator=generator)
            w /= w.norm(dim=1, keepdim=True)
            self.W_dec.copy_(w)
            if self.d_out == self.d_in:
                self.W_enc.copy_(w.T)
            else:
                self.W_enc.copy_(torch.randn(self.d_in, self.d_sae, generator=generator) / self.d_in**0.5)
            self.b_enc.zero_()
            self.b_dec.zero_()

    def pre(self, x: torch.Tensor) -> torch.Tensor:
        """(x − b_dec) W_enc + b_enc, the pre-activations: (…, d_in) → (…, d_sae)."""
        centred = x - self.b_dec if self.centres_input else x
        return centred @ self.W_enc + self.b_enc

    def activate(self, pre: torch.Tensor, batch_topk: bool = False) -> torch.Tensor:
        """σ(pre): the features (…, d_sae). batch_topk: training's BatchTopK over every token of `pre` at once."""
        arch = self.architecture
        if arch == "topk" or (arch == "batchtopk" and not batch_topk and not self.threshold.any()):
            values, index = pre.topk(min(self.k, self.d_sae), dim=-1)
            return torch.zeros_like(pre).scatter(-1, index, values.relu())
        if arch == "batchtopk" and batch_topk:
            flat = pre.relu().flatten()
            n_tokens = pre.numel() // self.d_sae
            values, index = flat.topk(min(self.k * n_tokens, flat.numel()))
            return torch.zeros_like(flat).scatter(0, index, values).view_as(pre)
        if arch in ("jumprelu", "batchtopk"):
            return pre.relu() * (pre > self.threshold)
        return pre.relu()

    def encode(self, x: torch.Tensor) -> torch.Tensor:
        """The features of x: (…, d_in) → (…, d_sae)."""
        return self.activate(self.pre(x))

    def decode(self, f: torch.Tensor) -> torch.Tensor:
        """f W_dec + b_dec: (…, d_sae) → (…, d_out)."""
        return f @ self.W_dec + self.b_dec

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        pre = self.pre(x)
        f = self.activate(pre)
        return pre, f, self.decode(f)

    def stored_architecture(self) -> str:
        """The architecture as the folder names it: a trained BatchTopK dictionary runs, and is stored, as JumpReLU."""
        if self.architecture == "batchtopk":
            return "jumprelu"
        return self.architecture

    def describe(self) -> str:
        """'TopK SAE, 512 features (k 8) on decoder.1.add_norm3.out'."""
        arch = {"topk": f"TopK (k {self.k})", "batchtopk": f"BatchTopK (k {self.k})", "jumprelu": "JumpReLU",
                "standard": "ReLU"}[self.architecture]  # fmt: skip
        what = f"transcoder {self.info.at} → {self.info.to}" if self.transcoder else f"SAE on {self.info.at}"
        return f"{arch} {what}, {self.d_sae} features"
