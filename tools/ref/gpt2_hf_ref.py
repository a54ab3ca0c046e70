#!/usr/bin/python3
"""
gpt2_hf_ref.py — a small random GPT-2 in Hugging Face's layout and the loss
PyTorch computes with it, for tests/cli_hf.sh (hpt import / eval / export).

Run with Debian's python (torch 1.13; no transformers package needed):

    /usr/bin/python3 tools/ref/gpt2_hf_ref.py [out_dir]   (default tests/fixtures/hf)

The tensor names are not written by hand: they are the state_dict() keys of
a module tree built like transformers' own (huggingface/transformers,
src/transformers/models/gpt2/modeling_gpt2.py: GPT2Model with wte and wpe
nn.Embedding, h an nn.ModuleList of GPT2Block (ln_1, attn = GPT2Attention
with c_attn, c_proj and the bias / masked_bias buffers, ln_2, mlp = GPT2MLP
with c_fc, c_proj), ln_f; GPT2LMHeadModel with transformer = GPT2Model and
lm_head = nn.Linear(n_embd, vocab_size, bias=False) tied to wte;
src/transformers/pytorch_utils.py: Conv1D(nf, nx) holds weight (nx, nf),
[in, out], and bias (nf)), so an nn.Embedding's parameter is "wte.weight" as
there. The weights are loaded into that tree with load_state_dict(strict=True),
which refuses any name the tree does not have. Writes, with safetensors
files written by hand (u64 little-endian header length, the JSON header, the
raw little-endian tensors, names in order):

    config.json, model.safetensors      F32, GPT2Model's state dict as the
                                        hub's openai-community/gpt2 file has
                                        it: bare names (wte.weight, wpe.weight,
                                        h.N.ln_1.weight, h.N.attn.c_attn.weight
                                        [in, out], ...) and the h.N.attn.bias /
                                        masked_bias buffers, which transformers
                                        saved while they were persistent
    prefixed/{config.json,model.safetensors}   F16, GPT2LMHeadModel's state
                                        dict as transformers has it today
                                        (buffers persistent=False, so none):
                                        transformer.wte.weight, ... and the
                                        tied lm_head.weight
    bf16/{config.json,model.safetensors}       BF16, what save_pretrained
                                        writes of it: the same without the
                                        tied lm_head.weight copy
    text.txt                            the evaluation text (bytes = tokens)
    expected.json                       the loss of each over text.txt

The model is GPT-2 exactly (pre-LayerNorm eps 1e-5, causal attention, GELU
tanh form, tied LM head), vocab 256 (hpt's byte tokenizer), 48 positions,
2 layers, 2 heads, 32 channels. The loss is hpt eval's: consecutive windows
of 48 inputs predicting the next 48 tokens, the last window shorter; the
mean over every predicted token, summed in float64 from float32 logits.
F16 / BF16 losses are those of the rounded weights (what hpt computes after
converting them to float32).
"""
import json
import math
import os
import struct
import sys

import torch
from torch import nn

V, P, L, NH, C = 256, 48, 2, 2, 32
TEXT = (b"It was the best of times, it was the worst of times, it was the age of wisdom, "
        b"it was the age of foolishness, it was the epoch of belief, it was the epoch of "
        b"incredulity, it was the season of Light, it was the season of Darkness, it was "
        b"the spring of hope, it was the winter of despair.\n")


# ------------------------------------------------ transformers' module tree
# Attribute names as in modeling_gpt2.py / pytorch_utils.py (see the top);
# only the names and shapes matter here, forward() below is our own.

class Conv1D(nn.Module):
    def __init__(self, nf, nx):
        super().__init__()
        self.weight = nn.Parameter(torch.empty(nx, nf))
        self.bias = nn.Parameter(torch.zeros(nf))


class GPT2Attention(nn.Module):
    def __init__(self, persistent):
        super().__init__()
        self.register_buffer("bias", torch.tril(torch.ones(P, P)).view(1, 1, P, P), persistent=persistent)
        self.register_buffer("masked_bias", torch.tensor(-1e4), persistent=persistent)
        self.c_attn = Conv1D(3 * C, C)
        self.c_proj = Conv1D(C, C)


class GPT2MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.c_fc = Conv1D(4 * C, C)
        self.c_proj = Conv1D(C, 4 * C)


class GPT2Block(nn.Module):
    def __init__(self, persistent):
        super().__init__()
        self.ln_1 = nn.LayerNorm(C, eps=1e-5)
        self.attn = GPT2Attention(persistent)
        self.ln_2 = nn.LayerNorm(C, eps=1e-5)
        self.mlp = GPT2MLP()


class GPT2Model(nn.Module):
    def __init__(self, persistent=False):
        super().__init__()
        self.wte = nn.Embedding(V, C)
        self.wpe = nn.Embedding(P, C)
        self.h = nn.ModuleList([GPT2Block(persistent) for _ in range(L)])
        self.ln_f = nn.LayerNorm(C, eps=1e-5)


class GPT2LMHeadModel(nn.Module):
    def __init__(self):
        super().__init__()
        self.transformer = GPT2Model()
        self.lm_head = nn.Linear(C, V, bias=False)
        self.lm_head.weight = self.transformer.wte.weight   # tied (_tied_weights_keys)


def make_weights(g):
    """name -> tensor by GPT2Model's parameter names (the same random draws,
    in the same order, as before those names were the module tree's)"""
    def rnd(*shape, std=0.1):
        return (torch.randn(*shape, generator=g) * std).float()
    w = {"wte.weight": rnd(V, C, std=0.3), "wpe.weight": rnd(P, C, std=0.1)}
    for l in range(L):
        h = f"h.{l}."
        w[h + "ln_1.weight"] = 1 + rnd(C); w[h + "ln_1.bias"] = rnd(C)
        w[h + "attn.c_attn.weight"] = rnd(C, 3 * C, std=0.2); w[h + "attn.c_attn.bias"] = rnd(3 * C)
        w[h + "attn.c_proj.weight"] = rnd(C, C, std=0.2); w[h + "attn.c_proj.bias"] = rnd(C)
        w[h + "ln_2.weight"] = 1 + rnd(C); w[h + "ln_2.bias"] = rnd(C)
        w[h + "mlp.c_fc.weight"] = rnd(C, 4 * C, std=0.2); w[h + "mlp.c_fc.bias"] = rnd(4 * C)
        w[h + "mlp.c_proj.weight"] = rnd(4 * C, C, std=0.1); w[h + "mlp.c_proj.bias"] = rnd(C)
    w["ln_f.weight"] = 1 + rnd(C); w["ln_f.bias"] = rnd(C)
    return w


def state_dict(module):
    """module's state dict, detached: the names transformers would save"""
    return {k: v.detach().clone() for k, v in module.state_dict().items()}


def layer_norm(x, w, b):
    return torch.nn.functional.layer_norm(x, (C,), w, b, eps=1e-5)


def forward(w, idx):
    """logits (T, V) for token ids idx (T,), GPT-2's forward with Conv1D weights."""
    T = idx.shape[0]
    x = w["wte.weight"][idx] + w["wpe.weight"][:T]
    mask = torch.tril(torch.ones(T, T, dtype=torch.bool))
    hs = C // NH
    for l in range(L):
        h = f"h.{l}."
        a = layer_norm(x, w[h + "ln_1.weight"], w[h + "ln_1.bias"])
        qkv = a @ w[h + "attn.c_attn.weight"] + w[h + "attn.c_attn.bias"]
        q, k, v = qkv.split(C, dim=1)
        q, k, v = (t.view(T, NH, hs).transpose(0, 1) for t in (q, k, v))
        att = (q @ k.transpose(1, 2)) / math.sqrt(hs)
        att = att.masked_fill(~mask, float("-inf")).softmax(dim=-1)
        y = (att @ v).transpose(0, 1).reshape(T, C)
        x = x + y @ w[h + "attn.c_proj.weight"] + w[h + "attn.c_proj.bias"]
        a = layer_norm(x, w[h + "ln_2.weight"], w[h + "ln_2.bias"])
        f = torch.nn.functional.gelu(a @ w[h + "mlp.c_fc.weight"] + w[h + "mlp.c_fc.bias"], approximate="tanh")
        x = x + f @ w[h + "mlp.c_proj.weight"] + w[h + "mlp.c_proj.bias"]
    x = layer_norm(x, w["ln_f.weight"], w["ln_f.bias"])
    return x @ w["wte.weight"].t()


def eval_loss(w, ids):
    """hpt eval's windows: inputs ids[k*P : k*P+P], targets one ahead."""
    total, count, pos = 0.0, 0, 0
    with torch.no_grad():
        while pos + 1 < len(ids):
            T = min(P, len(ids) - 1 - pos)
            x = torch.tensor(ids[pos:pos + T]); y = torch.tensor(ids[pos + 1:pos + 1 + T])
            lp = forward(w, x).log_softmax(dim=-1)
            total += -lp[torch.arange(T), y].double().sum().item()
            count += T
            pos += T
    return total / count, count


def write_safetensors(path, tensors, dtype):
    """tensors: name -> tensor (in name order, as safetensors writes them)."""
    tdt = {"F32": torch.float32, "F16": torch.float16, "BF16": torch.bfloat16}[dtype]
    header, blobs, off = {"__metadata__": {"format": "pt"}}, [], 0
    for name in sorted(tensors):
        t = tensors[name].to(tdt).contiguous()   # a 0-d tensor (masked_bias) has shape []
        raw = t.view(torch.int16).numpy().tobytes() if tdt != torch.float32 else t.numpy().tobytes()
        header[name] = {"dtype": dtype, "shape": list(t.shape), "data_offsets": [off, off + len(raw)]}
        blobs.append(raw)
        off += len(raw)
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))


def rounded(w, dtype):
    tdt = {"F16": torch.float16, "BF16": torch.bfloat16}[dtype]
    return {k: v.to(tdt).float() for k, v in w.items()}


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else "tests/fixtures/hf"
    g = torch.Generator().manual_seed(14)
    w = make_weights(g)
    config = {"model_type": "gpt2", "vocab_size": V, "n_positions": P, "n_layer": L, "n_head": NH, "n_embd": C,
              "layer_norm_epsilon": 1e-05, "activation_function": "gelu_new"}
    ids = list(TEXT)
    for sub in ("", "prefixed", "bf16"):
        os.makedirs(os.path.join(out, sub), exist_ok=True)
        with open(os.path.join(out, sub, "config.json"), "w") as f:
            json.dump(config, f, indent=2)
    with torch.no_grad():
        # the hub's file: GPT2Model, mask buffers saved (persistent)
        hub = GPT2Model(persistent=True)
        r = hub.load_state_dict(w, strict=False)   # every parameter; the buffers keep their values
        assert not r.unexpected_keys and r.missing_keys == [
            f"h.{l}.attn.{b}" for l in range(L) for b in ("bias", "masked_bias")], r
        write_safetensors(os.path.join(out, "model.safetensors"), state_dict(hub), "F32")
        # GPT2LMHeadModel as transformers builds it today: no buffers saved,
        # transformer.-prefixed names, lm_head.weight tied to wte
        lm = GPT2LMHeadModel()
        lm.transformer.load_state_dict(w, strict=True)
        sd = state_dict(lm)
        assert torch.equal(sd["lm_head.weight"], sd["transformer.wte.weight"])
        write_safetensors(os.path.join(out, "prefixed", "model.safetensors"), sd, "F16")
        # save_pretrained drops the tied copy
        sd.pop("lm_head.weight")
        write_safetensors(os.path.join(out, "bf16", "model.safetensors"), sd, "BF16")
    with open(os.path.join(out, "text.txt"), "wb") as f:
        f.write(TEXT)
    f32, n = eval_loss(w, ids)
    f16, _ = eval_loss(rounded(w, "F16"), ids)
    bf16, _ = eval_loss(rounded(w, "BF16"), ids)
    with open(os.path.join(out, "expected.json"), "w") as f:
        json.dump({"f32": f32, "f16": f16, "bf16": bf16, "tokens": n, "block_size": P}, f, indent=2)
        f.write("\n")
    print(f"loss f32 {f32:.6f} f16 {f16:.6f} bf16 {bf16:.6f} over {n} tokens")


if __name__ == "__main__":
    torch.set_num_threads(1)
    main()
