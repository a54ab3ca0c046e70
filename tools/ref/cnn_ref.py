#!/usr/bin/python3
"""
cnn_ref.py — PyTorch reference for hpt's CNN classifier (src/model/cnn.c)
and its optimizer step (src/train/optim.c), written to
tests/fixtures/cnn_ref.bin and checked by tests/test_cnn_ref.c (which does
not need torch).

Run with Debian's python (it has torch 1.13 and numpy):

    /usr/bin/python3 tools/ref/cnn_ref.py [out_path]

The model is hpt's architecture exactly, NCHW float32, single-threaded:
conv2d 3x3 (in_c -> c1, padding 1, bias) -> ReLU -> max_pool2d(2)
-> conv2d 3x3 (c1 -> c2, padding 1, bias) -> ReLU -> max_pool2d(2)
-> flatten (c2 * H/4 * W/4, channel-major) -> Linear (hidden) -> ReLU
-> Linear (n_classes); loss = cross-entropy, mean over the batch.

Fixture layout: ref_common.py's, with (i32 = int32, f32 = float32)

    magic                "HPTCNNRF"
    header   i32[8]      in_c, in_h, in_w, c1, c2, hidden, n_classes, B
             i32         nsteps
             f32[6]      lr, beta1, beta2, eps, weight_decay, grad_clip
    tensors  8, in cnn.c's table order: conv1w conv1b conv2w conv2b fc1w fc1b
             fc2w fc2b (conv weights (out, in, 3, 3), linear weights (out, in))
    inputs   f32[B*in_c*in_h*in_w] x, input images, NCHW; i32[B] targets
    logits   f32[B*n_classes]

Training: nsteps steps on the same batch; each step is zero_grad, forward,
backward, clip_grad_norm_(clip), AdamW (betas, eps; weight decay only on the
weights, not the biases) at a constant lr.
"""
import struct
import sys

import numpy as np
import torch
import torch.nn.functional as F

from ref_common import reference_run, write_fixture

torch.set_num_threads(1)
torch.manual_seed(4321)

IN_C, IN_H, IN_W, C1, C2, HID, K, B = 1, 12, 12, 3, 4, 8, 10, 4
NSTEPS = 5
LR, BETA1, BETA2, EPS, WD, CLIP = 1e-2, 0.9, 0.99, 1e-8, 0.1, 1.0
H2, W2 = IN_H // 2 // 2, IN_W // 2 // 2
FLAT = C2 * H2 * W2

# name, shape, decay: cnn.c's tensor table
TABLE = [
    ("conv1w", (C1, IN_C, 3, 3), 1), ("conv1b", (C1,), 0),
    ("conv2w", (C2, C1, 3, 3), 1), ("conv2b", (C2,), 0),
    ("fc1w", (HID, FLAT), 1), ("fc1b", (HID,), 0),
    ("fc2w", (K, HID), 1), ("fc2b", (K,), 0),
]


def init_param(shape):
    g = torch.randn(shape, dtype=torch.float32)
    if len(shape) == 1:
        return 0.1 * g                            # non-trivial biases
    fan_in = int(np.prod(shape[1:]))
    return g * (2.0 / fan_in) ** 0.5              # He normal, as hpt


params = [torch.nn.Parameter(init_param(s)) for _, s, _ in TABLE]
P = {n: p for (n, _, _), p in zip(TABLE, params)}
x = torch.randn(B, IN_C, IN_H, IN_W, dtype=torch.float32)
targets = torch.randint(0, K, (B,), dtype=torch.int64)


def forward(inp):
    h = F.max_pool2d(F.relu(F.conv2d(inp, P["conv1w"], P["conv1b"], padding=1)), 2)
    h = F.max_pool2d(F.relu(F.conv2d(h, P["conv2w"], P["conv2b"], padding=1)), 2)
    h = F.relu(F.linear(h.flatten(1), P["fc1w"], P["fc1b"]))
    return F.linear(h, P["fc2w"], P["fc2b"])


r = reference_run(TABLE, params, lambda: forward(x), lambda lg: F.cross_entropy(lg, targets), NSTEPS,
                  lambda it: LR, (BETA1, BETA2), EPS, WD, CLIP)
header = (struct.pack("<8i", IN_C, IN_H, IN_W, C1, C2, HID, K, B) + struct.pack("<i", NSTEPS) +
          struct.pack("<6f", LR, BETA1, BETA2, EPS, WD, CLIP))
inputs = x.numpy().astype("<f4").tobytes() + targets.numpy().astype("<i4").tobytes()
write_fixture(sys.argv[1] if len(sys.argv) > 1 else "tests/fixtures/cnn_ref.bin", b"HPTCNNRF", header,
              TABLE, inputs, r["logits"].detach().numpy(), r)
