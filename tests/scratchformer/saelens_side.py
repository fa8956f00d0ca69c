"""SAELens's side of tests/scratchformer/test_saelens_compat.py, run by .venv-saelens's Python (scripts/saelens-env.sh).

It imports SAELens and never scratchformer: the two sides meet only in files. Each line on standard input is one
JSON job; each answer is one JSON line on standard output ({"ok": …} or {"error": "…"}); anything else SAELens
prints goes to standard error.

    {"op": "make", "architecture": A, "d_in": …, "d_sae": …, "d_out": …, "k": …, "seed": …, "folder": F}
        an inference SAE of SAELens's class for A with random weights, written with sae.save_model(F); "rescale":
        true makes a TopK SAE that ranks and decodes by its decoder rows' norms (its trainer's default)
    {"op": "train_batchtopk", "inputs": P, "d_sae": …, "k": …, "steps": …, "folder": F}
        SAELens's BatchTopK SAE trained by its own SAETrainer on the rows of P's "x", written as the JumpReLU it
        runs as (save_inference_model)
    {"op": "run", "folder": F, "inputs": P, "out": O}
        SAE.load_from_disk(F); O gets encode(x) as "features" and decode(features) as "recon"
"""

from __future__ import annotations

import json
import os
import sys


def make(job: dict) -> dict:
    import torch
    from sae_lens import (
        JumpReLUSAE,
        JumpReLUSAEConfig,
        JumpReLUTranscoder,
        JumpReLUTranscoderConfig,
        StandardSAE,
        StandardSAEConfig,
        TopKSAE,
        TopKSAEConfig,
        Transcoder,
        TranscoderConfig,
    )

    arch, d_in, d_sae = job["architecture"], job["d_in"], job["d_sae"]
    made = {
        "topk": lambda: TopKSAE(TopKSAEConfig(d_in=d_in, d_sae=d_sae, k=job["k"],
                                               rescale_acts_by_decoder_norm=job.get("rescale", False))),
        "jumprelu": lambda: JumpReLUSAE(JumpReLUSAEConfig(d_in=d_in, d_sae=d_sae)),
        "standard": lambda: StandardSAE(StandardSAEConfig(d_in=d_in, d_sae=d_sae)),
        "transcoder": lambda: Transcoder(TranscoderConfig(d_in=d_in, d_sae=d_sae, d_out=job["d_out"],
                                                          apply_b_dec_to_input=False)),
        "jumprelu_transcoder": lambda: JumpReLUTranscoder(JumpReLUTranscoderConfig(
            d_in=d_in, d_sae=d_sae, d_out=job["d_out"], apply_b_dec_to_input=False)),
    }[arch]()  # fmt: skip
    made.cfg.metadata.hook_name = job.get("hook_name", "blocks.0.hook_resid_post")
    g = torch.Generator().manual_seed(job["seed"])
    with torch.no_grad():
        for name, p in made.named_parameters():
            if name == "threshold":
                p.copy_(torch.rand(p.shape, generator=g) * 0.5)
            else:
                p.copy_(torch.randn(p.shape, generator=g))
    made.save_model(job["folder"])
    return {"class": type(made).__name__}


def train_batchtopk(job: dict) -> dict:
    import torch
    from sae_lens import BatchTopKTrainingSAE, BatchTopKTrainingSAEConfig
    from sae_lens.config import SAETrainerConfig
    from sae_lens.training.sae_trainer import SAETrainer
    from safetensors.torch import load_file

    x = load_file(job["inputs"])["x"]
    torch.manual_seed(job.get("seed", 0))
    sae = BatchTopKTrainingSAE(BatchTopKTrainingSAEConfig(d_in=x.shape[1], d_sae=job["d_sae"], k=job["k"]))
    batch = job.get("batch", 64)

    def rows():
        g = torch.Generator().manual_seed(0)
        while True:
            yield x[torch.randint(0, len(x), (batch,), generator=g)]

    trainer = SAETrainer(SAETrainerConfig(total_training_samples=batch * job["steps"], train_batch_size_samples=batch,
                                          lr=job.get("lr", 1e-3), lr_end=job.get("lr", 1e-3)), sae, rows())  # fmt: skip
    trainer.fit()
    sae.cfg.metadata.hook_name = job.get("hook_name", "blocks.0.hook_resid_post")
    sae.save_inference_model(job["folder"])
    return {"threshold": float(sae.topk_threshold)}


def run(job: dict) -> dict:
    import torch
    from sae_lens import SAE
    from safetensors.torch import load_file, save_file

    sae = SAE.load_from_disk(job["folder"])
    x = load_file(job["inputs"])["x"]
    with torch.no_grad():
        f = sae.encode(x)
        recon = sae.decode(f)
    save_file({"features": f.contiguous(), "recon": recon.contiguous()}, job["out"])
    cfg = sae.cfg
    return {"class": type(sae).__name__, "architecture": cfg.architecture(), "d_in": cfg.d_in, "d_sae": cfg.d_sae,
            "hook_name": cfg.metadata.hook_name, "apply_b_dec_to_input": cfg.apply_b_dec_to_input}  # fmt: skip


def main() -> None:
    answers = os.fdopen(os.dup(sys.stdout.fileno()), "w", buffering=1)
    sys.stdout = sys.stderr  # SAELens's own prints and progress bars stay off the answer channel
    import sae_lens

    answers.write(json.dumps({"ok": {"sae_lens": sae_lens.__version__}}) + "\n")
    ops = {"make": make, "train_batchtopk": train_batchtopk, "run": run}
    for line in sys.stdin:
        if not line.strip():
            continue
        job = json.loads(line)
        try:
            answer = {"ok": ops[job["op"]](job)}
        except Exception as exc:  # the test shows SAELens's complaint as it is
            answer = {"error": f"{type(exc).__name__}: {exc}"}
        answers.write(json.dumps(answer) + "\n")


if __name__ == "__main__":
    main()
