#!/usr/bin/env python3
"""
torch_gpu.py — bench_gpu.sh's PyTorch peer on the GPU: full training steps
of a GPT-2 as PyTorch's users run it (nanoGPT's model: pre-LN blocks,
scaled_dot_product_attention with is_causal, tanh GELU, LM head tied to the
token embedding; fused AdamW, gradient clip 1) on random tokens, in each
precision mode: fp32 (TF32 off), tf32 (TF32 matmuls), bf16 (autocast), and
bf16 + torch.compile.

One step = forward + backward + clip_grad_norm_(1.0) + AdamW step +
zero_grad(set_to_none). Warm-up steps first (torch.compile compiles there),
then the median of the timed steps (each synchronised). Peak memory is
torch.cuda.max_memory_allocated (the caching allocator's live tensors:
below what the driver sees, which also counts the cache and the context).

    python3 bench/torch_gpu.py --layers 12 --heads 12 --embd 768 --vocab 50257 \\
        --batch 16 --block 1024 --modes fp32,tf32,bf16,bf16+compile --json out.json
"""
import argparse
import json
import os
import statistics
import time

import torch
import torch.nn as nn
import torch.nn.functional as F


def build(L, NH, C, V, T):
    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln1, self.ln2 = nn.LayerNorm(C), nn.LayerNorm(C)
            self.qkv, self.proj = nn.Linear(C, 3 * C), nn.Linear(C, C)
            self.fc, self.fcp = nn.Linear(C, 4 * C), nn.Linear(4 * C, C)

        def forward(self, x):
            B = x.shape[0]
            q, k, v = self.qkv(self.ln1(x)).split(C, 2)
            q, k, v = (t.view(B, T, NH, C // NH).transpose(1, 2) for t in (q, k, v))
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            x = x + self.proj(y.transpose(1, 2).contiguous().view(B, T, C))
            return x + self.fcp(F.gelu(self.fc(self.ln2(x)), approximate="tanh"))

    class GPT(nn.Module):
        def __init__(self):
            super().__init__()
            self.wte, self.wpe = nn.Embedding(V, C), nn.Embedding(T, C)
            self.h = nn.ModuleList(Block() for _ in range(L))
            self.lnf = nn.LayerNorm(C)

        def forward(self, idx, tgt):
            x = self.wte(idx) + self.wpe(torch.arange(T, device=idx.device))
            for b in self.h:
                x = b(x)
            logits = F.linear(self.lnf(x), self.wte.weight)
            return F.cross_entropy(logits.view(-1, logits.shape[-1]).float(), tgt.reshape(-1))

    return GPT()


def time_mode(a, mode):
    torch.backends.cuda.matmul.allow_tf32 = mode != "fp32"
    torch.backends.cudnn.allow_tf32 = mode != "fp32"
    torch.manual_seed(0)
    Vp = (a.vocab + 127) // 128 * 128 if a.vocab >= 4096 else (a.vocab + 7) // 8 * 8   # hpt's padding
    m = build(a.layers, a.heads, a.embd, Vp, a.block).cuda()
    opt = torch.optim.AdamW(m.parameters(), lr=6e-4, weight_decay=0.1, fused=True)
    f = torch.compile(m) if "compile" in mode else m
    data = torch.randint(0, a.vocab, (a.batch, a.block + 1), device="cuda")

    def step():
        with torch.autocast("cuda", dtype=torch.bfloat16, enabled=mode.startswith("bf16")):
            loss = f(data[:, :-1], data[:, 1:])
        loss.backward()
        torch.nn.utils.clip_grad_norm_(m.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        return loss

    for _ in range(a.warmup):
        step()
    torch.cuda.synchronize()
    times = []
    for _ in range(a.steps):
        t0 = time.perf_counter()
        loss = step()
        torch.cuda.synchronize()
        times.append(time.perf_counter() - t0)
    dt = statistics.median(times)
    r = {"ms_per_step": round(dt * 1e3, 3), "tokens_per_s": round(a.batch * a.block / dt),
         "peak_mem_bytes": torch.cuda.max_memory_allocated(), "loss": round(loss.item(), 4)}
    del m, opt, f
    torch.cuda.empty_cache()
    torch.cuda.reset_peak_memory_stats()
    return r


def main():
    p = argparse.ArgumentParser()
    for k, v in [("layers", 12), ("heads", 12), ("embd", 768), ("vocab", 50257), ("batch", 16), ("block", 1024),
                 ("warmup", 5), ("steps", 20)]:
        p.add_argument("--" + k, type=int, default=v)
    p.add_argument("--modes", default="fp32,tf32,bf16,bf16+compile")
    p.add_argument("--json")
    a = p.parse_args()
    res = {"gpu": torch.cuda.get_device_name(), "torch": torch.__version__, "shape": vars(a).copy(), "modes": {}}
    for mode in a.modes.split(","):
        try:
            res["modes"][mode] = time_mode(a, mode)
        except Exception as e:   # one mode's failure (out of memory, a compile error) is a result too
            res["modes"][mode] = {"error": "%s: %s" % (type(e).__name__, str(e)[:300])}
            torch.cuda.empty_cache()
        print(mode, res["modes"][mode], flush=True)
        # after every mode: a run stopped by bench_gpu.sh's time limit (in
        # bf16+compile's compilation, say) keeps the modes it finished
        if a.json:
            with open(a.json + ".tmp", "w") as fh:   # then renamed: never half a file
                json.dump(res, fh, indent=1)
            os.replace(a.json + ".tmp", a.json)


if __name__ == "__main__":
    main()
