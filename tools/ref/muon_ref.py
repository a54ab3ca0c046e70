#!/usr/bin/python3
"""
muon_ref.py — Muon's step (with AdamW on the other tensors) in PyTorch,
written to tests/fixtures/muon_ref.txt and checked by tests/test_muon.c
(which does not need torch) against hpt's hpt_muon_step.

Muon is torch.optim.Muon's step (PyTorch 2.9; Keller Jordan's Muon, as
modded-nanogpt runs it) written out here, since Debian's PyTorch (1.13)
predates it: Nesterov momentum by lerp, the Newton-Schulz iteration with
coefficients (3.4445, -4.7750, 2.0315) on the update normalised by its
Frobenius norm + eps, on the short side (transposed where rows > cols), the
decoupled weight decay, then the step at lr scaled by max(1, rows/cols)^0.5
("spectral", torch's adjust_lr_fn "original") or 0.2 sqrt(max(rows, cols))
("rms", "match_rms_adamw", Moonlight's). Two differences from torch 2.9, both
hpt's: the iteration runs in float32 (torch's in bfloat16; hpt has no bf16
on the CPU), and eps is added to the norm (Keller Jordan's, X / (|X| + eps))
rather than clamped under it (no difference unless the norm is below 1e-7).
AdamW is torch.optim.AdamW itself on the other tensors, the gradients of all
clipped first by torch.nn.utils.clip_grad_norm_.

The tensors are a small model's kinds: a per-layer stack of matrices taller
than wide (the transposed path, as GPT-2's qkv and fc), a square stack, a
wide matrix (an MLP's hidden layer), a convolution kernel (out-channels x
in-channels x 3 x 3, Muon's matrix out x the rest), an embedding (AdamW with
decay) and a bias (AdamW without). The gradient is a fixed function of the
parameters, evaluated here and written out, so the C side reads it instead
of recomputing it; it is large enough that clipping acts on some steps.

Layout (text): "tensors K", K lines "tensor NAME HIDDEN DECAY NDIM D0 D1 D2
D3"; then per run: "run SCALE NS_STEPS MOMENTUM WD BETA1 BETA2 EPS CLIP
STEPS", "init ..." (every value, in table order), then per step "lr MUON_LR
ADAM_LR", "grad ..." (unclipped), "params ..." (after the step).
Usage: /usr/bin/python3 tools/ref/muon_ref.py > tests/fixtures/muon_ref.txt
"""
import math

import torch

# name, hidden (Muon), decay, shape
TABLE = [("qkvw", 1, 1, (2, 12, 4)), ("projw", 1, 1, (2, 4, 4)), ("fcw", 1, 1, (5, 9)),
         ("convw", 1, 1, (3, 2, 3, 3)), ("wte", 0, 1, (7, 4)), ("bias", 0, 0, (6,))]
STEPS, WARMUP = 8, 3
NS_COEF, NS_EPS = (3.4445, -4.7750, 2.0315), 1e-7
# (scale, ns steps, momentum, muon lr, adam lr, weight decay, clip)
RUNS = [("spectral", 5, 0.95, 0.02, 3e-3, 0.1, 8.0), ("rms", 3, 0.9, 3e-3, 3e-3, 0.05, 0.0)]
BETA1, BETA2, EPS = 0.9, 0.99, 1e-8


def matrices(p):
    """The Muon matrices of tensor p: a 3-D stack's own, else one (first dim x the rest)."""
    return list(p) if p.dim() == 3 else [p.view(p.shape[0], -1)]


def newton_schulz(g, steps):
    a, b, c = NS_COEF
    x = g.T if g.size(0) > g.size(1) else g
    x = x / (x.norm() + NS_EPS)
    for _ in range(steps):
        A = x @ x.T
        B = torch.addmm(A, A, A, beta=b, alpha=c)
        x = torch.addmm(x, B, x, beta=a)
    return x.T if g.size(0) > g.size(1) else x


def muon_step(p, g, buf, lr, wd, mom, ns_steps, scale):
    """torch.optim.Muon's update of one matrix (in place)."""
    buf.lerp_(g, 1 - mom)
    u = g.lerp(buf, mom)
    o = newton_schulz(u, ns_steps)
    rows, cols = p.shape
    adj = lr * (0.2 * math.sqrt(max(rows, cols)) if scale == "rms" else math.sqrt(max(1, rows / cols)))
    p.mul_(1 - lr * wd)
    p.add_(o, alpha=-adj)


def line(tag, ts):
    return tag + " " + " ".join("%.9g" % v for t in ts for v in t.reshape(-1).tolist()) + "\n"


def main():
    out = ["# tools/ref/muon_ref.py (torch %s)\n" % torch.__version__, "tensors %d\n" % len(TABLE)]
    for name, hidden, decay, shape in TABLE:
        dims = list(shape) + [1] * (4 - len(shape))
        out.append("tensor %s %d %d %d %s\n" % (name, hidden, decay, len(shape), " ".join(map(str, dims))))
    for scale, ns_steps, mom, lr, adam_lr, wd, clip in RUNS:
        torch.manual_seed(0)
        ps = [torch.randn(shape, dtype=torch.float32) * 0.5 for _, _, _, shape in TABLE]
        bufs = [torch.zeros_like(p) if h else None for p, (_, h, _, _) in zip(ps, TABLE)]
        adam = [p for p, (_, h, _, _) in zip(ps, TABLE) if not h]
        adam_decay = [d for _, h, d, _ in TABLE if not h]
        opt = torch.optim.AdamW([{"params": [p], "weight_decay": wd if d else 0.0} for p, d in zip(adam, adam_decay)],
                                lr=adam_lr, betas=(BETA1, BETA2), eps=EPS)
        out.append("run %s %d %.9g %.9g %.9g %.9g %.9g %.9g %d\n" % (scale, ns_steps, mom, wd, BETA1, BETA2, EPS, clip,
                                                                     STEPS))
        out.append(line("init", ps))
        for k in range(STEPS):
            sched = (k + 1) / WARMUP if k < WARMUP else 1.0 - 0.5 * (k - WARMUP) / (STEPS - WARMUP)
            mlr, alr = float(torch.tensor(lr * sched)), float(torch.tensor(adam_lr * sched))  # float32 rates
            # any fixed function of the parameters, a few units in norm
            gs = [torch.sin(3 * p + 0.7 * k) * 2 + 0.5 * p for p in ps]
            out.append("lr %.9g %.9g\n" % (mlr, alr))
            out.append(line("grad", gs))
            if clip > 0:
                for p, g in zip(ps, gs):
                    p.grad = g.clone()
                torch.nn.utils.clip_grad_norm_(ps, clip)
                gs = [p.grad for p in ps]
            with torch.no_grad():
                for p, g, buf, (_, h, _, _) in zip(ps, gs, bufs, TABLE):
                    if h:
                        for pm, gm, bm in zip(matrices(p), matrices(g), matrices(buf)):
                            muon_step(pm, gm, bm, mlr, wd, mom, ns_steps, scale)
            for p, g, (_, h, _, _) in zip(ps, gs, TABLE):
                p.grad = None if h else g.clone()
            for grp in opt.param_groups:
                grp["lr"] = alr
            opt.step()
            out.append(line("params", ps))
    print("".join(out), end="")


if __name__ == "__main__":
    main()
