"""
ref_common.py — what the PyTorch reference scripts (gpt2_ref.py, cnn_ref.py)
share: the reference run (logits, loss and gradients at the initial
parameters, then a few AdamW steps on the same batch) and the part of the
fixture layout both write after their model-specific header and inputs.
tests/ref_fixture.h reads that part back.

Both fixtures are laid out as (little-endian, no padding; i32 = int32,
f32 = float32):

    char[8]  magic
    i32      version     1
    ...      header      the model's (see each script)
    i32      ntensors
    ntensors x { char[16] name (NUL-padded); i32 ndim; i32[4] shape (unused = 1) }
    ...      inputs, targets (see each script)
    f32[P]   params      initial parameters, tensors concatenated in table
                         order (P = total numel)
    f32[...] logits      at the initial parameters (see each script)
    f32      loss        mean cross-entropy
    f32[P]   grads       d loss / d params, table order
    f32[nsteps] losses   loss of each training step, before its update
    f32[nsteps] norms    global grad norm of each step, before clipping
    f32[P]   final       parameters after nsteps steps
"""
import struct

import numpy as np
import torch


def flat(ts):
    """The tensors concatenated as little-endian float32."""
    return np.concatenate([t.detach().numpy().astype("<f4").ravel() for t in ts])


def reference_run(table, params, forward, loss_of, nsteps, lr_at, betas, eps, wd, clip):
    """The initial forward and backward, then nsteps training steps on the
    same batch: zero_grad, forward, backward, clip_grad_norm_(clip), AdamW
    (weight decay wd only on the tensors the table marks) at lr_at(it).
    table rows are (name, shape, decay); forward() gives the logits,
    loss_of(logits) the loss. Returns the results the fixture records."""
    r = {"init": flat(params)}
    logits = forward()
    loss = loss_of(logits)
    loss.backward()
    r["logits"], r["loss"] = logits, loss.item()
    r["grads"] = flat([p.grad for p in params])

    decay = [p for (_, _, d), p in zip(table, params) if d]
    no_decay = [p for (_, _, d), p in zip(table, params) if not d]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": wd},
                             {"params": no_decay, "weight_decay": 0.0}],
                            lr=lr_at(0), betas=betas, eps=eps)
    r["losses"], r["norms"] = [], []
    for it in range(nsteps):
        for g in opt.param_groups:
            g["lr"] = lr_at(it)
        opt.zero_grad(set_to_none=False)
        l = loss_of(forward())
        l.backward()
        n = torch.nn.utils.clip_grad_norm_(params, clip)
        opt.step()
        r["losses"].append(l.item())
        r["norms"].append(n.item())
    r["final"] = flat(params)
    return r


def write_fixture(path, magic, header, table, inputs, logits, r):
    """Writes the fixture: magic, version 1, the model's header bytes, the
    tensor table, the input bytes, then the results of reference_run with
    logits (a float32 array, laid out as the test reads them)."""
    with open(path, "wb") as f:
        f.write(magic)
        f.write(struct.pack("<i", 1))
        f.write(header)
        f.write(struct.pack("<i", len(table)))
        for name, shape, _ in table:
            dims = list(shape) + [1] * (4 - len(shape))
            f.write(struct.pack("<16s5i", name.encode(), len(shape), *dims))
        f.write(inputs)
        f.write(r["init"].tobytes())
        f.write(logits.astype("<f4").ravel().tobytes())
        f.write(struct.pack("<f", r["loss"]))
        f.write(r["grads"].tobytes())
        f.write(np.array(r["losses"], dtype="<f4").tobytes())
        f.write(np.array(r["norms"], dtype="<f4").tobytes())
        f.write(r["final"].tobytes())
    print("wrote %s: %d params, loss %.6f, losses %s, norms %s" % (
        path, r["init"].size, r["loss"], " ".join("%.4f" % v for v in r["losses"]),
        " ".join("%.3f" % v for v in r["norms"])))
