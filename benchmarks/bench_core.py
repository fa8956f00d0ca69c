"""Core speed against torch.nn.Transformer, measured in the same run (paper preset, batch 8, 64 tokens, CPU).

    python benchmarks/bench_core.py [--repeats 10] [--threads 2]

Both models get the same embeddings and output projection (ours), so the ratios compare the stacks' work:
    forward, no trace   target ≤ 1.05 × nn.Transformer
    forward, full trace target ≤ 1.5  × nn.Transformer
    train step (f + b)  target ≤ 1.05 × nn.Transformer
A "stacks only" line leaves out the 50 257-way output projection, which dominates the full model's time.
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch
from torch import nn

from scratchformer import Transformer, preset
from scratchformer.loading.importers.torch_transformer import from_torch_transformer


class Reference(nn.Module):
    """torch.nn.Transformer between our embeddings and our output layer."""

    def __init__(self, ref: nn.Transformer, ours: Transformer) -> None:
        super().__init__()
        self.ref, self.src_embed, self.tgt_embed, self.generator = ref, ours.src_embed, ours.tgt_embed, ours.generator
        self.causal: dict[int, torch.Tensor] = {}

    def stacks(self, src, tgt):
        t = tgt.shape[1]
        mask = self.causal.setdefault(t, nn.Transformer.generate_square_subsequent_mask(t, dtype=torch.bool))
        return self.ref(self.src_embed(src), self.tgt_embed(tgt), tgt_mask=mask, tgt_is_causal=True)

    def forward(self, src, tgt):
        return self.generator(self.stacks(src, tgt))


def timed(fn, repeats: int) -> float:
    fn()  # warm-up
    samples = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - t0)
    return statistics.median(samples)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--tokens", type=int, default=64)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    cfg = preset("paper")
    ref_stacks = nn.Transformer(d_model=cfg.d_model, nhead=cfg.n_heads, num_encoder_layers=cfg.n_encoder_layers,
                                num_decoder_layers=cfg.n_decoder_layers, dim_feedforward=cfg.d_ff,
                                dropout=cfg.dropout, batch_first=True)
    ref_stacks.encoder.norm = ref_stacks.decoder.norm = None  # the paper's post-LN stacks end on Add & Norm
    ours = from_torch_transformer(ref_stacks, share_embeddings=True, tie_output=True, name="paper",
                                  src_vocab_size=cfg.src_vocab_size, tgt_vocab_size=cfg.tgt_vocab_size)
    ref = Reference(ref_stacks, ours)
    src = torch.randint(0, cfg.src_vocab_size, (args.batch, args.tokens))
    tgt = torch.randint(0, cfg.tgt_vocab_size, (args.batch, args.tokens))

    rows = []

    def compare(label, ours_fn, ref_fn, target):
        # interleave the two so machine noise hits both alike
        a, b = [], []
        for _ in range(3):
            a.append(timed(ours_fn, max(1, args.repeats // 3)))
            b.append(timed(ref_fn, max(1, args.repeats // 3)))
        mine, theirs = min(a), min(b)
        rows.append((label, mine, theirs, mine / theirs, target))

    ours.eval()
    ref.eval()
    with torch.inference_mode():
        compare("forward, no trace (stacks only)", lambda: ours.decode(tgt, ours.encode(src)),
                lambda: ref.stacks(src, tgt), 1.05)
        compare("forward, no trace", lambda: ours(src, tgt), lambda: ref(src, tgt), 1.05)
    compare("forward, full trace", lambda: ours.run_with_trace(src, tgt), lambda: _no_grad(ref, src, tgt), 1.5)

    ours.train()
    ref.train()
    targets = torch.randint(0, cfg.tgt_vocab_size, (args.batch, args.tokens))
    loss_fn = nn.CrossEntropyLoss()

    def step(model):
        def run():
            model.zero_grad(set_to_none=True)
            logits = model(src, tgt)
            loss_fn(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1)).backward()

        return run

    def stack_step(run_stacks):
        def run():
            ours.zero_grad(set_to_none=True)
            ref.zero_grad(set_to_none=True)
            run_stacks().square().mean().backward()

        return run

    compare("train step (stacks only)", stack_step(lambda: ours.decode(tgt, ours.encode(src))),
            stack_step(lambda: ref.stacks(src, tgt)), 1.05)
    compare("train step, forward + backward", step(ours), step(ref), 1.05)

    print(f"paper preset, batch {args.batch}, {args.tokens} source and target tokens, CPU, "
          f"{torch.get_num_threads()} threads, torch {torch.__version__}")
    print(f"{'measure':<34} {'scratchformer':>14} {'nn.Transformer':>15} {'ratio':>7} {'target':>7}")
    for label, mine, theirs, ratio, target in rows:
        flag = "ok" if ratio <= target else "OVER"
        bound = f"≤{target}"
        print(f"{label:<34} {mine * 1e3:>11.1f} ms {theirs * 1e3:>12.1f} ms {ratio:>7.2f} {bound:>7} {flag}")


def _no_grad(model, src, tgt):
    with torch.inference_mode():
        return model(src, tgt)


if __name__ == "__main__":
    main()
