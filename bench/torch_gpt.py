#!/usr/bin/python3
"""
torch_gpt.py — the PyTorch peer for hpt's benchmarks: a nanoGPT-style GPT-2
with hpt's architecture and training recipe, timed per iteration.

Run it with Debian's python (torch 1.13; the python3 on PATH has no torch),
and give torch the OpenMP build of OpenBLAS so that BLAS and torch's own
OpenMP loops share one thread pool (the pthread build spins against it on
2 cores and halves throughput, see docs/references.md section 2.2):

    LD_LIBRARY_PATH=/usr/lib/x86_64-linux-gnu/openblas-openmp \\
      /usr/bin/python3 bench/torch_gpt.py --data bench/data/tinyshakespeare.txt \\
      --threads 2 --max-iters 150 --json bench/results/torch.json

Model (= src/model/gpt2.c): learned wte (Vp, C) and wpe (block_size, C); L
pre-LayerNorm blocks with biases (LayerNorm eps 1e-5; fused qkv Linear, q|k|v;
manual causal softmax attention scaled by 1/sqrt(hs); output projection;
MLP C -> 4C -> C with GELU tanh approximation); final LayerNorm; LM head tied
to wte. Like hpt, the vocabulary is padded (hpt_gpt2_padded_vocab: to 8 below
4096, to 128 above) and the loss is taken over the first V logits only; the
padded rows stay zero. --no-pad-vocab uses V rows instead (the peers file's
measurement). No dropout.

Data: char-level, the vocabulary is the sorted distinct characters of the
file, first 90% train, last 10% validation, batches of random windows.

Recipe (= src/train/trainer.c): GPT-2 init (N(0, 0.02), residual projections
scaled by 1/sqrt(2L), biases 0, LayerNorm gains 1); AdamW(betas 0.9/0.99, eps
1e-8, weight decay 0.1 on 2-D parameters only); lr linear warmup then cosine
to min_lr (hpt_lr_at); global-norm clip 1.0.

Timing: one iteration = batch sampling + zero_grad + forward + backward + clip
+ AdamW step, wall clock. The median excludes the first --skip (5) iterations;
evaluation is outside the timed region. Validation loss is the mean over
--eval-iters random validation batches, at every --eval-interval iterations
(0: only at the end) and at the end.
"""
import argparse
import json
import math
import os
import platform
import resource
import statistics
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F


def padded_vocab(V):
    m = 128 if V >= 4096 else 8
    return (V + m - 1) // m * m


class Block(nn.Module):
    def __init__(self, C, NH, T):
        super().__init__()
        self.NH = NH
        self.ln_1 = nn.LayerNorm(C, eps=1e-5)
        self.c_attn = nn.Linear(C, 3 * C)
        self.c_proj = nn.Linear(C, C)
        self.ln_2 = nn.LayerNorm(C, eps=1e-5)
        self.c_fc = nn.Linear(C, 4 * C)
        self.mlp_proj = nn.Linear(4 * C, C)
        self.register_buffer("mask", torch.tril(torch.ones(T, T, dtype=torch.bool)).view(1, 1, T, T))

    def forward(self, x):
        B, T, C = x.shape
        NH, hs = self.NH, C // self.NH
        q, k, v = self.c_attn(self.ln_1(x)).split(C, dim=2)
        q = q.view(B, T, NH, hs).transpose(1, 2)
        k = k.view(B, T, NH, hs).transpose(1, 2)
        v = v.view(B, T, NH, hs).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(hs))
        att = att.masked_fill(~self.mask[:, :, :T, :T], float("-inf"))
        att = F.softmax(att, dim=-1)
        y = (att @ v).transpose(1, 2).contiguous().view(B, T, C)
        x = x + self.c_proj(y)
        x = x + self.mlp_proj(F.gelu(self.c_fc(self.ln_2(x)), approximate="tanh"))
        return x


class GPT(nn.Module):
    def __init__(self, V, Vp, block_size, L, NH, C):
        super().__init__()
        self.V = V
        self.wte = nn.Embedding(Vp, C)
        self.wpe = nn.Embedding(block_size, C)
        self.blocks = nn.ModuleList([Block(C, NH, block_size) for _ in range(L)])
        self.ln_f = nn.LayerNorm(C, eps=1e-5)
        self.init_weights(L)

    def init_weights(self, L):
        for name, p in self.named_parameters():
            if name.endswith("bias"):
                nn.init.zeros_(p)
            elif name.startswith("ln") or ".ln_" in name:
                nn.init.ones_(p)
            else:
                std = 0.02 / math.sqrt(2 * L) if name.endswith(("c_proj.weight", "mlp_proj.weight")) else 0.02
                nn.init.normal_(p, mean=0.0, std=std)
        with torch.no_grad():
            self.wte.weight[self.V:].zero_()   # padded vocabulary rows (as hpt)

    def forward(self, idx, targets):
        B, T = idx.shape
        pos = torch.arange(T, dtype=torch.long)
        x = self.wte(idx) + self.wpe(pos)
        for blk in self.blocks:
            x = blk(x)
        x = self.ln_f(x)
        logits = F.linear(x, self.wte.weight)          # tied LM head over Vp rows
        if logits.shape[-1] != self.V:
            logits = logits[..., :self.V]
        return F.cross_entropy(logits.reshape(-1, self.V), targets.reshape(-1))


def lr_at(it, lr, min_lr, warmup, max_iters):
    """hpt_lr_at (src/train/trainer.c), 0-based it."""
    if it < warmup:
        return lr * (it + 1) / warmup
    span = max_iters - warmup
    if span <= 0:
        return min_lr
    ratio = min((it - warmup) / span, 1.0)
    return min_lr + 0.5 * (1.0 + math.cos(math.pi * ratio)) * (lr - min_lr)


def blas_libraries():
    """Shared BLAS/OpenMP libraries mapped into this process (which OpenBLAS ran)."""
    libs = set()
    try:
        with open("/proc/self/maps") as f:
            for line in f:
                path = line.split()[-1] if len(line.split()) >= 6 else ""
                base = os.path.basename(path)
                if any(s in base for s in ("blas", "gomp", "omp.so", "lapack")):
                    libs.add(os.path.realpath(path))
    except OSError:
        pass
    return sorted(libs)


def openblas_info():
    """Config and core name of the OpenBLAS this process loaded (DYNAMIC_ARCH picks
    the kernels at load time; an unknown CPU falls back to slow ones, e.g. Prescott)."""
    import ctypes
    for path in blas_libraries():
        if "openblas" not in path and "libblas" not in path:
            continue
        try:
            lib = ctypes.CDLL(path)
            lib.openblas_get_config.restype = ctypes.c_char_p
            lib.openblas_get_corename.restype = ctypes.c_char_p
            return {"config": lib.openblas_get_config().decode(), "core": lib.openblas_get_corename().decode()}
        except (OSError, AttributeError):
            continue
    return {"config": None, "core": None}


def write_json(path, obj):
    """obj as indented JSON at path, its folder made if missing; written to
    path.tmp and renamed, so a reader never sees half a file"""
    d = os.path.dirname(path)
    if d:
        os.makedirs(d, exist_ok=True)
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(obj, f, indent=1)
        f.write("\n")
    os.replace(tmp, path)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", default=os.path.join(os.path.dirname(__file__), "data", "tinyshakespeare.txt"))
    ap.add_argument("--n-layer", type=int, default=4)
    ap.add_argument("--n-head", type=int, default=4)
    ap.add_argument("--n-embd", type=int, default=128)
    ap.add_argument("--block-size", type=int, default=64)
    ap.add_argument("--batch-size", type=int, default=12)
    ap.add_argument("--max-iters", type=int, default=2000)
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--min-lr", type=float, default=1e-4)
    ap.add_argument("--warmup-iters", type=int, default=100)
    ap.add_argument("--weight-decay", type=float, default=0.1)
    ap.add_argument("--grad-clip", type=float, default=1.0)
    ap.add_argument("--eval-interval", type=int, default=250, help="0: evaluate only at the end")
    ap.add_argument("--eval-iters", type=int, default=20)
    ap.add_argument("--threads", type=int, default=2, help="torch.set_num_threads")
    ap.add_argument("--seed", type=int, default=1337)
    ap.add_argument("--skip", type=int, default=5, help="iterations left out of the median")
    ap.add_argument("--log-interval", type=int, default=0, help="progress line every N iterations (0: ~20 lines)")
    ap.add_argument("--no-pad-vocab", action="store_true", help="V rows in wte instead of hpt's padded Vp")
    ap.add_argument("--json", metavar="OUT", help="write the results here")
    a = ap.parse_args()
    if a.n_embd % a.n_head:
        ap.error("--n-embd must be divisible by --n-head")
    if a.max_iters < 1 or a.eval_iters < 1:
        ap.error("--max-iters and --eval-iters must be >= 1")

    torch.manual_seed(a.seed)
    if a.threads > 0:
        torch.set_num_threads(a.threads)

    # ---- data: char tokenizer, 90/10 split
    with open(a.data, "r", encoding="utf-8", errors="surrogateescape") as f:
        text = f.read()
    chars = sorted(set(text))
    V = len(chars)
    stoi = {ch: i for i, ch in enumerate(chars)}
    data = torch.tensor([stoi[ch] for ch in text], dtype=torch.long)
    n_train = int(len(data) * 0.9)
    train_data, val_data = data[:n_train], data[n_train:]
    B, T = a.batch_size, a.block_size
    if len(train_data) <= T + 1 or len(val_data) <= T + 1:
        sys.exit(f"torch_gpt.py: {a.data} is too small for --block-size {T}")

    def get_batch(split):
        d = train_data if split == "train" else val_data
        ix = torch.randint(len(d) - T, (B,))
        x = torch.stack([d[i:i + T] for i in ix])
        y = torch.stack([d[i + 1:i + 1 + T] for i in ix])
        return x, y

    # ---- model and optimizer
    Vp = V if a.no_pad_vocab else padded_vocab(V)
    model = GPT(V, Vp, T, a.n_layer, a.n_head, a.n_embd)
    nparams = sum(p.numel() for p in model.parameters())
    decay = [p for p in model.parameters() if p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": a.weight_decay},
                             {"params": no_decay, "weight_decay": 0.0}],
                            lr=a.lr, betas=(0.9, 0.99), eps=1e-8)
    # hpt_model_train_flops: 6 * (params - wpe) + 12 * L * C * T per token
    n_flop = nparams - model.wpe.weight.numel()
    flops = B * T * (6.0 * n_flop + 12.0 * a.n_layer * a.n_embd * T)

    @torch.no_grad()
    def evaluate():
        model.eval()
        s = 0.0
        for _ in range(a.eval_iters):
            x, y = get_batch("val")
            s += model(x, y).item()
        model.train()
        return s / a.eval_iters

    log_every = a.log_interval or max(1, a.max_iters // 20)
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, OpenBLAS core {openblas_info()['core']}; model L{a.n_layer} H{a.n_head} "
          f"C{a.n_embd} V{V} (Vp {Vp}) block {T}, {nparams} params; batch {B}; {a.max_iters} iters",
          file=sys.stderr)
    times, evals = [], []
    loss_v = float("nan")
    val = float("nan")
    wall0 = time.perf_counter()
    for it in range(a.max_iters):
        t0 = time.perf_counter()
        lr = lr_at(it, a.lr, a.min_lr, a.warmup_iters, a.max_iters)
        for g in opt.param_groups:
            g["lr"] = lr
        x, y = get_batch("train")
        opt.zero_grad(set_to_none=True)
        loss = model(x, y)
        loss.backward()
        if a.grad_clip > 0:
            torch.nn.utils.clip_grad_norm_(model.parameters(), a.grad_clip)
        opt.step()
        loss_v = loss.item()   # forces completion; inside the timed region as hpt's loss is
        times.append(time.perf_counter() - t0)
        step = it + 1
        last = step == a.max_iters
        if last or (a.eval_interval > 0 and step % a.eval_interval == 0):
            val = evaluate()
            evals.append({"step": step, "val_loss": val})
            print(f"step {step}: val loss {val:.4f}", file=sys.stderr)
        if step % log_every == 0 or step == 1 or last:
            print(f"step {step}/{a.max_iters} | loss {loss_v:.4f} | lr {lr:.2e} | {times[-1] * 1e3:.1f} ms",
                  file=sys.stderr)
    wall = time.perf_counter() - wall0

    timed = times[a.skip:] if len(times) > a.skip else times
    med = statistics.median(timed)
    res = {
        "peer": "torch",
        "torch_version": torch.__version__,
        "python": platform.python_version(),
        "threads": torch.get_num_threads(),
        "blas_libraries": blas_libraries(),
        "openblas": openblas_info(),
        "ld_library_path": os.environ.get("LD_LIBRARY_PATH", ""),
        "omp_env": {k: v for k, v in os.environ.items() if k.startswith(("OMP_", "OPENBLAS_", "GOMP_"))},
        "config": {"data": os.path.abspath(a.data), "n_layer": a.n_layer, "n_head": a.n_head, "n_embd": a.n_embd,
                   "block_size": T, "batch_size": B, "max_iters": a.max_iters, "lr": a.lr, "min_lr": a.min_lr,
                   "warmup_iters": a.warmup_iters, "weight_decay": a.weight_decay, "grad_clip": a.grad_clip,
                   "eval_interval": a.eval_interval, "eval_iters": a.eval_iters, "seed": a.seed,
                   "vocab_size": V, "padded_vocab": Vp},
        "params": nparams,
        "skipped_iters": len(times) - len(timed),
        "median_ms": med * 1e3,
        "mean_ms": statistics.fmean(timed) * 1e3,
        "min_ms": min(timed) * 1e3,
        "max_ms": max(timed) * 1e3,
        "tokens_per_s": B * T / med,
        "tokens_per_s_mean": B * T * len(timed) / sum(timed),
        "flops_per_iter": flops,
        "gflops_per_s": flops / med * 1e-9,
        "final_train_loss": loss_v,
        "final_val_loss": val,
        "evals": evals,
        "train_s": sum(times),
        "wall_s": wall,
        "peak_rss_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
        "iter_ms": [round(t * 1e3, 3) for t in times],
    }
    print(f"done: median {res['median_ms']:.1f} ms/iter (first {res['skipped_iters']} left out), "
          f"{res['tokens_per_s']:.0f} tok/s, {res['gflops_per_s']:.1f} GFLOP/s, final val {val:.4f}",
          file=sys.stderr)
    if a.json:
        write_json(a.json, res)


if __name__ == "__main__":
    main()
