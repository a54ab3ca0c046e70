#!/usr/bin/python3
"""
torch_step.py — bench_step's PyTorch peer: full training steps of the same
GPT-2 (bench/torch_gpt.py's GPT: hpt's architecture, tied LM head, vocab
padded as hpt pads it) on random tokens, at GPT-2 124M shapes by default
(L12 H12 C768, vocab 50257 -> 50304, block 1024, batch 4 x seq 64).

One step = zero_grad(set_to_none) + forward + backward + clip_grad_norm_(1.0)
+ AdamW (betas 0.9/0.99, eps 1e-8, decay 0.1 on 2-D tensors, lr 1e-4: the
optimizer bench_step runs), wall clock, with the same phase split as
bench_step (zero_grad / forward / backward / optimizer = clip + step).
Run with Debian's python and the OpenMP OpenBLAS, as bench/bench_124m.sh does:

    LD_LIBRARY_PATH=/usr/lib/x86_64-linux-gnu/openblas-openmp \\
      /usr/bin/python3 bench/torch_step.py --threads 2 --json /tmp/torch.json

The JSON records which BLAS torch ran (torch.__config__.show(), the
libraries mapped into the process, OpenBLAS' core) so that a comparison says
what it compared against.
"""
import argparse
import os
import resource
import statistics
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from torch_gpt import GPT, padded_vocab, blas_libraries, openblas_info, write_json  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n-layer", type=int, default=12)
    ap.add_argument("--n-head", type=int, default=12)
    ap.add_argument("--n-embd", type=int, default=768)
    ap.add_argument("--vocab", type=int, default=50257)
    ap.add_argument("--block-size", type=int, default=1024)
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--seq", type=int, default=64)
    ap.add_argument("--steps", type=int, default=5, help="timed steps")
    ap.add_argument("--warmup", type=int, default=1, help="untimed steps first")
    ap.add_argument("--threads", type=int, default=2, help="torch.set_num_threads")
    ap.add_argument("--seed", type=int, default=1337)
    ap.add_argument("--json", metavar="OUT")
    a = ap.parse_args()
    if a.n_embd % a.n_head or a.seq > a.block_size or a.steps < 1:
        ap.error("need n_embd % n_head == 0, seq <= block_size, steps >= 1")
    torch.manual_seed(a.seed)
    torch.set_num_threads(a.threads)
    V, Vp, B, T = a.vocab, padded_vocab(a.vocab), a.batch, a.seq
    t0 = time.perf_counter()
    model = GPT(V, Vp, a.block_size, a.n_layer, a.n_head, a.n_embd)
    init_s = time.perf_counter() - t0
    nparams = sum(p.numel() for p in model.parameters())
    decay = [p for p in model.parameters() if p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1}, {"params": no_decay, "weight_decay": 0.0}],
                            lr=1e-4, betas=(0.9, 0.99), eps=1e-8)
    flops = B * T * (6.0 * (nparams - model.wpe.weight.numel()) + 12.0 * a.n_layer * a.n_embd * T)
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, OpenBLAS core "
          f"{openblas_info()['core']}; L{a.n_layer} H{a.n_head} C{a.n_embd} V{V} (Vp {Vp}), B{B} T{T}, "
          f"{nparams} params, {flops * 1e-9:.2f} GFLOP/step", file=sys.stderr)
    steps, phases, losses = [], {"zero_grad": [], "forward": [], "backward": [], "optimizer": []}, []
    for s in range(a.warmup + a.steps):
        x = torch.randint(V, (B, T))
        y = torch.randint(V, (B, T))
        t0 = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        t1 = time.perf_counter()
        loss = model(x, y)
        t2 = time.perf_counter()
        loss.backward()
        t3 = time.perf_counter()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        t4 = time.perf_counter()
        losses.append(loss.item())
        k = s - a.warmup
        print(f"{'warmup' if k < 0 else 'step'} {s + 1 if k < 0 else k + 1}: {(t4 - t0) * 1e3:.1f} ms "
              f"(zero_grad {(t1 - t0) * 1e3:.1f}, forward {(t2 - t1) * 1e3:.1f}, backward {(t3 - t2) * 1e3:.1f}, "
              f"optimizer {(t4 - t3) * 1e3:.1f}), loss {losses[-1]:.4f}", file=sys.stderr)
        if k >= 0:
            steps.append((t4 - t0) * 1e3)
            for name, dt in zip(phases, (t1 - t0, t2 - t1, t3 - t2, t4 - t3)):
                phases[name].append(dt * 1e3)
    med = statistics.median(steps)
    print(f"torch median step {med:.1f} ms, {flops / (med * 1e-3) * 1e-9:.1f} GFLOP/s", file=sys.stderr)
    config = torch.__config__.show()
    # "BLAS_INFO=generic": torch calls libblas.so.3, which LD_LIBRARY_PATH points at the OpenMP OpenBLAS
    blas_line = [w.strip(" ,") for w in config.split() if w.startswith(("BLAS_INFO=", "LAPACK_INFO="))]
    res = {
        "benchmark": "torch_step", "torch": torch.__version__, "threads": torch.get_num_threads(),
        "openblas": openblas_info(), "blas_libraries": blas_libraries(), "torch_build_blas": blas_line,
        "ld_library_path": os.environ.get("LD_LIBRARY_PATH", ""),
        "omp_env": {k: v for k, v in os.environ.items() if k.startswith(("OMP_", "OPENBLAS_", "GOMP_"))},
        "config": {"n_layer": a.n_layer, "n_head": a.n_head, "n_embd": a.n_embd, "vocab": V, "padded_vocab": Vp,
                   "block_size": a.block_size, "batch": B, "seq": T, "steps": a.steps, "warmup": a.warmup},
        "params": nparams, "flops_per_step": flops, "median_step_ms": med, "step_ms": steps,
        "gflops_per_s": flops / (med * 1e-3) * 1e-9,
        "median_phase_ms": {k: statistics.median(v) for k, v in phases.items()},
        "losses": losses, "init_s": init_s,
        "peak_rss_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
    }
    if a.json:
        write_json(a.json, res)


if __name__ == "__main__":
    main()
