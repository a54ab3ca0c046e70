#!/usr/bin/python3
"""
gpt2_ref.py — PyTorch reference for hpt's GPT-2 (src/model/gpt2.c) and its
optimizer step (src/train/optim.c), written to tests/fixtures/gpt2_ref.bin and
checked by tests/test_gpt2_ref.c (which does not need torch).

Run with Debian's python (it has torch 1.13 and numpy):

    /usr/bin/python3 tools/ref/gpt2_ref.py [out_path]

The model is hpt's architecture exactly: wte (Vp, C) and wpe (maxT, C); L
pre-LayerNorm blocks (LayerNorm eps 1e-5; causal multi-head attention with a
fused qkv Linear whose output is q | k | v, head h at offset h*hs in each;
softmax scaled by 1/sqrt(hs); output projection; residual; LayerNorm; MLP
C -> 4C, GELU tanh approximation, 4C -> C; residual); final LayerNorm; logits
= lnf @ wte^T over the padded vocab Vp, cross-entropy (mean over B*T) over the
first V logits only. Everything is float32, single-threaded.

Fixture layout: ref_common.py's, with (i32 = int32, f32 = float32)

    magic                "HPTGPT2R"
    header   i32[8]      V, Vp, maxT, L, NH, C, B, T
             i32[3]      nsteps, warmup_iters, max_iters
             f32[7]      lr, min_lr, beta1, beta2, eps, weight_decay, grad_clip
    tensors  16, in gpt2.c's table order: wte wpe ln1w ln1b qkvw qkvb attprojw
             attprojb ln2w ln2b fcw fcb fcprojw fcprojb lnfw lnfb (weights
             (out, in) row-major)
    inputs   i32[B*T] tokens; i32[B*T] targets
    logits   f32[B*T*V], before softmax, only the V real columns

Training: nsteps steps on the same batch; each step is zero_grad, forward,
backward, clip_grad_norm_(1.0), AdamW (betas, eps; weight decay only on wte,
wpe, qkvw, attprojw, fcw, fcprojw) with lr = hpt_lr_at(it) (linear warmup,
cosine to min_lr; it 0-based).
"""
import math
import struct
import sys

import torch
import torch.nn.functional as F

from ref_common import reference_run, write_fixture

torch.set_num_threads(1)
torch.manual_seed(1234)

V, maxT, L, NH, C = 13, 8, 2, 2, 16
Vp = (V + 7) // 8 * 8 if V < 4096 else (V + 127) // 128 * 128  # hpt_gpt2_padded_vocab
B, T = 3, maxT
NSTEPS, WARMUP, MAX_ITERS = 10, 3, 10
LR, MIN_LR, BETA1, BETA2, EPS, WD, CLIP = 1e-2, 1e-3, 0.9, 0.99, 1e-8, 0.1, 1.0
hs = C // NH

# name, shape, decay, init: gpt2.c's tensor table
TABLE = [
    ("wte", (Vp, C), 1), ("wpe", (maxT, C), 1),
    ("ln1w", (L, C), 0), ("ln1b", (L, C), 0),
    ("qkvw", (L, 3 * C, C), 1), ("qkvb", (L, 3 * C), 0),
    ("attprojw", (L, C, C), 1), ("attprojb", (L, C), 0),
    ("ln2w", (L, C), 0), ("ln2b", (L, C), 0),
    ("fcw", (L, 4 * C, C), 1), ("fcb", (L, 4 * C), 0),
    ("fcprojw", (L, C, 4 * C), 1), ("fcprojb", (L, C), 0),
    ("lnfw", (C,), 0), ("lnfb", (C,), 0),
]


def init_param(name, shape):
    g = torch.randn(shape, dtype=torch.float32)
    if name.startswith("ln") and name.endswith("w"):
        return 1.0 + 0.1 * g                      # non-trivial LayerNorm gains
    if name.endswith("b"):
        return 0.1 * g                            # non-trivial biases
    if name in ("wte", "wpe"):
        t = 0.5 * g
        if name == "wte":
            t[V:] = 0.0                           # padded rows are 0 in hpt
        return t
    fan_in = shape[-1]
    return g / math.sqrt(fan_in)                  # matrices: unit-variance outputs


params = [torch.nn.Parameter(init_param(n, s)) for n, s, _ in TABLE]
P = {n: p for (n, _, _), p in zip(TABLE, params)}
tokens = torch.randint(0, V, (B, T), dtype=torch.int64)
targets = torch.randint(0, V, (B, T), dtype=torch.int64)


def forward(tok):
    Bn, Tn = tok.shape
    x = P["wte"][tok] + P["wpe"][:Tn].unsqueeze(0)
    mask = torch.tril(torch.ones(Tn, Tn, dtype=torch.bool))
    for l in range(L):
        h = F.layer_norm(x, (C,), P["ln1w"][l], P["ln1b"][l], 1e-5)
        qkv = F.linear(h, P["qkvw"][l], P["qkvb"][l])
        q, k, v = qkv.split(C, dim=2)
        q = q.view(Bn, Tn, NH, hs).transpose(1, 2)
        k = k.view(Bn, Tn, NH, hs).transpose(1, 2)
        v = v.view(Bn, Tn, NH, hs).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(hs))
        att = att.masked_fill(~mask, float("-inf")).softmax(dim=-1)
        y = (att @ v).transpose(1, 2).contiguous().view(Bn, Tn, C)
        x = x + F.linear(y, P["attprojw"][l], P["attprojb"][l])
        h = F.layer_norm(x, (C,), P["ln2w"][l], P["ln2b"][l], 1e-5)
        h = F.gelu(F.linear(h, P["fcw"][l], P["fcb"][l]), approximate="tanh")
        x = x + F.linear(h, P["fcprojw"][l], P["fcprojb"][l])
    x = F.layer_norm(x, (C,), P["lnfw"], P["lnfb"], 1e-5)
    return x @ P["wte"].t()                       # (B, T, Vp)


def loss_of(logits):
    return F.cross_entropy(logits[..., :V].reshape(-1, V), targets.reshape(-1))


def lr_at(it):  # hpt_lr_at
    if it < WARMUP:
        return LR * (it + 1) / WARMUP
    ratio = min((it - WARMUP) / (MAX_ITERS - WARMUP), 1.0)
    return MIN_LR + 0.5 * (1.0 + math.cos(math.pi * ratio)) * (LR - MIN_LR)


r = reference_run(TABLE, params, lambda: forward(tokens), loss_of, NSTEPS, lr_at, (BETA1, BETA2), EPS, WD,
                  CLIP)
header = (struct.pack("<8i", V, Vp, maxT, L, NH, C, B, T) + struct.pack("<3i", NSTEPS, WARMUP, MAX_ITERS) +
          struct.pack("<7f", LR, MIN_LR, BETA1, BETA2, EPS, WD, CLIP))
inputs = tokens.numpy().astype("<i4").tobytes() + targets.numpy().astype("<i4").tobytes()
write_fixture(sys.argv[1] if len(sys.argv) > 1 else "tests/fixtures/gpt2_ref.bin", b"HPTGPT2R", header,
              TABLE, inputs, r["logits"][..., :V].detach().numpy(), r)
