#!/usr/bin/env python3
"""Pure-PyTorch log-space CRF forward algorithm (the normaliser), written as pytorch-crf's
CRF._compute_normalizer does it, timed over the same (B, T, L) shapes as crfx_gpu_bench:
forward only, and forward + backward through autograd (the gradient of log Z w.r.t. emissions
and transitions, i.e. what a training step needs). Double precision, to match crfx.

usage: pytorch_forward.py [--labels 5,23,45,128] [--batches 1,32,512] [--length 30] [--sentences 4096]
"""
import argparse
import time

import torch


def normalizer(emissions, transitions, mask):
    # emissions (T, B, L), mask (T, B): pytorch-crf's loop (no start/end transitions in crfx).
    score = emissions[0]
    for i in range(1, emissions.size(0)):
        nxt = score.unsqueeze(2) + transitions + emissions[i].unsqueeze(1)
        nxt = torch.logsumexp(nxt, dim=1)
        score = torch.where(mask[i].unsqueeze(1), nxt, score)
    return torch.logsumexp(score, dim=1)


def bench(L, B, T, sentences, device, backward, repeat=3):
    g = torch.Generator(device="cpu").manual_seed(L * 1000 + B)
    batches = max(1, sentences // B)
    em = (0.1 * torch.randn(T, B, L, generator=g, dtype=torch.float64)).to(device)
    tr = (0.1 * torch.randn(L, L, generator=g, dtype=torch.float64)).to(device)
    mask = torch.ones(T, B, dtype=torch.bool, device=device)
    em.requires_grad_(backward)
    tr.requires_grad_(backward)

    def one_pass():
        for _ in range(batches):
            z = normalizer(em, tr, mask).sum()
            if backward:
                em.grad = None
                tr.grad = None
                z.backward()
        if device == "cuda":
            torch.cuda.synchronize()

    one_pass()  # warm-up
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        one_pass()
        times.append(time.perf_counter() - t0)
    times.sort()
    med = times[len(times) // 2]
    tokens = batches * B * T
    return tokens, med


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--labels", default="5,23,45,128")
    ap.add_argument("--batches", default="1,32,512")
    ap.add_argument("--length", type=int, default=30)
    ap.add_argument("--sentences", type=int, default=4096)
    a = ap.parse_args()
    device = "cuda" if torch.cuda.is_available() else "cpu"
    print(f"pytorch {torch.__version__} on {device}"
          + (f" ({torch.cuda.get_device_name(0)})" if device == "cuda" else ""))
    for L in map(int, a.labels.split(",")):
        for B in map(int, a.batches.split(",")):
            # B = 1 runs T Python-level steps per sentence: cap the work so the run stays short.
            sentences = min(a.sentences, 256) if B == 1 else a.sentences
            for backward in (False, True):
                tokens, med = bench(L, B, a.length, sentences, device, backward)
                what = "forward+backward" if backward else "forward"
                print(f"pytorch {what:16s} L={L:4d} B={B:5d} T={a.length}  {tokens:8d} tokens  "
                      f"median {med:.4f} s  {tokens / med / 1e6:10.3f} M tokens/s", flush=True)


if __name__ == "__main__":
    main()
