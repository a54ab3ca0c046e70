#!/usr/bin/python3
"""
schedule_free_ref.py — schedule-free AdamW's update in PyTorch, written to
tests/fixtures/schedule_free_ref.txt and checked by tests/test_schedule_free.c
(which does not need torch) against hpt's hpt_sf_step arithmetic.

The step is facebookresearch/schedule_free's AdamWScheduleFree.step (Defazio
et al. 2024, arXiv 2405.15682) with its defaults r = 0, weight_lr_power = 2,
in its own form: the params hold y, the state z; x is never stored (hpt keeps
z and x and forms y from them: the same update, other roundings). Two groups:
the first N_DECAY values with weight decay, the rest without (hpt's tensor
table). The gradient is a fixed function of y, evaluated here and written out,
so the C side reads it instead of recomputing it.

Layout (text): "params N N_DECAY STEPS WARMUP LR BETA1 BETA2 EPS WD", the
initial values, then per step three lines: "grad ...", "y ...", "z ...".
Usage: /usr/bin/python3 tools/ref/schedule_free_ref.py > tests/fixtures/schedule_free_ref.txt
"""
import torch

N, N_DECAY, STEPS, WARMUP = 8, 5, 12, 4
LR, BETA1, BETA2, EPS, WD = 0.05, 0.9, 0.999, 1e-8, 0.1


def step(groups, k):
    """One AdamWScheduleFree step (k: updates before it) over [(y, z, v, grad, decay)]."""
    sched = (k + 1) / WARMUP if k < WARMUP else 1.0
    lr = LR * sched
    step.lr_max = max(lr, step.lr_max)
    weight = step.lr_max ** 2
    step.weight_sum += weight
    ckp1 = weight / step.weight_sum
    bc2 = 1 - BETA2 ** (k + 1)
    for y, z, v, g, decay in groups:
        v.mul_(BETA2).addcmul_(g, g, value=1 - BETA2)
        gn = g / (v / bc2).sqrt().add_(EPS)
        if decay:
            gn.add_(y, alpha=decay)
        y.lerp_(z, ckp1)
        y.add_(gn, alpha=lr * (BETA1 * (1 - ckp1) - 1))
        z.sub_(gn, alpha=lr)


step.lr_max, step.weight_sum = -1.0, 0.0


def line(tag, t):
    return tag + " " + " ".join("%.9g" % x for x in t.tolist()) + "\n"


def main():
    torch.manual_seed(0)
    y = torch.randn(N, dtype=torch.float32)
    z, v = y.clone(), torch.zeros(N)
    out = ["# tools/ref/schedule_free_ref.py (torch %s)\n" % torch.__version__,
           "params %d %d %d %d %.9g %.9g %.9g %.9g %.9g\n" % (N, N_DECAY, STEPS, WARMUP, LR, BETA1, BETA2, EPS, WD),
           line("init", y)]
    for k in range(STEPS):
        g = torch.sin(3 * y + 0.7 * k) + 0.5 * y  # any fixed function of the gradient point
        out.append(line("grad", g))
        step([(y[:N_DECAY], z[:N_DECAY], v[:N_DECAY], g[:N_DECAY], WD),
              (y[N_DECAY:], z[N_DECAY:], v[N_DECAY:], g[N_DECAY:], 0.0)], k)
        out += [line("y", y), line("z", z)]
    print("".join(out), end="")


if __name__ == "__main__":
    main()
