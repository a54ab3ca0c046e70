#!/usr/bin/python3
"""
schedule_ref.py — PyTorch's learning rates for hpt's schedules
(src/train/schedule.c), written to tests/fixtures/schedule_ref.txt and
checked by tests/test_schedule.c (which does not need torch).

Each case runs a dummy SGD optimizer through torch.optim.lr_scheduler and
records param_groups[0]["lr"] before each of its max_iters steps (hpt's
hpt_lr_at(c, it) for it = 0 .. max_iters - 1):
  warmup      LinearLR(start 1/W, end 1 over W - 1 steps): lr (it + 1) / W
  cosine      CosineAnnealingLR(T_max = max_iters - W, eta_min = min_lr)
  linear      LinearLR(1 -> min_lr / lr over max_iters - W steps)
  constant    ConstantLR(factor 1)
  wsd         LambdaLR: 1 until the last D = decay_frac x max_iters steps
              (rounded to whole steps, at most those after the warmup), then 1 - p or 1 - sqrt(p) at
              cooldown progress p = (step - (max_iters - D)) / D, mapped onto
              [min_lr, lr] (torch has no WSD; this is Hägele et al. 2024's
              formula written in steps, not in hpt's post-warmup progress)
joined after the warmup by SequentialLR (milestone W).

Layout (text): per case a line
  case SCHEDULE COOLDOWN WARMUP MAX_ITERS LR MIN_LR DECAY_FRAC
then MAX_ITERS lines, one learning rate each (%.9g).
Usage: /usr/bin/python3 tools/ref/schedule_ref.py > tests/fixtures/schedule_ref.txt
"""
import math
import sys
import warnings

import torch
from torch.optim import lr_scheduler as S

CASES = [
    # schedule, cooldown, warmup, max_iters, lr, min_lr, decay_frac
    ("cosine", "sqrt", 10, 100, 1e-3, 1e-4, 0.2),
    ("cosine", "sqrt", 0, 40, 3e-3, 0.0, 0.2),
    ("linear", "sqrt", 10, 100, 6e-3, 0.0, 0.2),   # D2Z
    ("linear", "sqrt", 5, 60, 1e-3, 1e-4, 0.2),
    ("constant", "sqrt", 10, 50, 2e-3, 1e-4, 0.2),
    ("wsd", "sqrt", 10, 100, 1e-3, 0.0, 0.2),
    ("wsd", "linear", 10, 100, 1e-3, 1e-4, 0.3),
    ("wsd", "sqrt", 20, 103, 2e-3, 2e-4, 0.25),  # 25.75 cooldown steps: 26
    ("wsd", "sqrt", 60, 100, 1e-3, 0.0, 0.5),    # longer than the steps after the warmup: clamped
]


def wsd_lambda(cooldown, warmup, max_iters, lr, min_lr, frac):
    d = min(math.floor(frac * max_iters + 0.5), max_iters - warmup)  # whole steps
    start = max_iters - d  # the cooldown's first step

    def f(k):  # k: steps since the warmup's end
        step = warmup + k
        if d <= 0 or step <= start:
            return 1.0
        p = (step - start) / d
        shape = 1 - p if cooldown == "linear" else 1 - math.sqrt(p)
        return (min_lr + shape * (lr - min_lr)) / lr
    return f


def decay(opt, sched, cooldown, warmup, max_iters, lr, min_lr, frac):
    span = max_iters - warmup
    if sched == "cosine":
        return S.CosineAnnealingLR(opt, T_max=span, eta_min=min_lr)
    if sched == "linear":
        return S.LinearLR(opt, start_factor=1.0, end_factor=min_lr / lr, total_iters=span)
    if sched == "constant":
        return S.ConstantLR(opt, factor=1.0, total_iters=span)
    return S.LambdaLR(opt, wsd_lambda(cooldown, warmup, max_iters, lr, min_lr, frac))


def run(sched, cooldown, warmup, max_iters, lr, min_lr, frac):
    w = torch.zeros(1, requires_grad=True)
    opt = torch.optim.SGD([w], lr=lr)
    dec = decay(opt, sched, cooldown, warmup, max_iters, lr, min_lr, frac)
    if warmup > 0:
        # a fresh optimizer: each scheduler records the group's initial lr
        opt = torch.optim.SGD([w], lr=lr)
        warm = S.LinearLR(opt, start_factor=1.0 / warmup, end_factor=1.0, total_iters=max(warmup - 1, 1))
        dec = decay(opt, sched, cooldown, warmup, max_iters, lr, min_lr, frac)
        s = S.SequentialLR(opt, [warm, dec], milestones=[warmup])
    else:
        s = dec
    out = []
    for _ in range(max_iters):
        out.append(opt.param_groups[0]["lr"])
        opt.step()
        s.step()
    return out


def main():
    warnings.filterwarnings("ignore", category=UserWarning)  # SequentialLR's step(0) at the milestone
    f = sys.stdout
    f.write("# tools/ref/schedule_ref.py (torch %s): learning rate before each step\n" % torch.__version__)
    for c in CASES:
        f.write("case %s %s %d %d %.9g %.9g %.9g\n" % c)
        for v in run(*c):
            f.write("%.9g\n" % v)


if __name__ == "__main__":
    main()
