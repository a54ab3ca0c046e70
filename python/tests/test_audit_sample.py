"""Model.sample's bounds and a model that is not finite (the audit's
defects 11 and 13), and saves that must not replace a FIFO (defect 4).
tier: fast
"""
import os
import struct
import subprocess
import zlib

import pytest

import hpt

OPTS = dict(n_layer=1, n_head=2, n_embd=16, block_size=8, batch_size=4, max_iters=4, eval_interval=4,
            eval_iters=1, threads=1, seed=3)


@pytest.fixture(scope="module")
def model_path(corpus, tmp_path_factory):
    out = tmp_path_factory.mktemp("audit") / "r"
    hpt.train(data=corpus, out=str(out), **OPTS)
    return str(out / "model.bin")


@pytest.mark.parametrize("tokens", [-1, 100000001, 2 ** 31, 2 ** 70, 2.5, "5", True])
def test_sample_tokens_out_of_range_raise_hpt_error(model_path, tokens):
    # --tokens' range [0, 1e8] and its message; -1 was a bare IndexError, 2**31
    # an 8 GiB context allocated before the first draw
    m = hpt.load(model_path)
    with pytest.raises(hpt.Error, match=r"--tokens must be in \[0, 100000000\]"):
        m.sample(tokens=tokens)


def test_sample_past_the_window_equals_the_cli(hpt_bin, model_path):
    # the context buffer is the model's window (2 x block 8), slid back as it
    # fills: 50 tokens and a 20-byte prompt, longer than the window, give the
    # CLI's text
    m = hpt.load(model_path)
    assert m.sample(tokens=0) == "" and m.sample(tokens=0, prompt="the ") == "the "
    for kw in (dict(tokens=50, seed=4), dict(tokens=30, seed=2, prompt="the of and a to in is")):
        argv = [hpt_bin, "sample", "--model", model_path, "--threads", "1"]
        for k, v in kw.items():
            argv += ["--" + k, str(v)]
        cli = subprocess.run(argv, capture_output=True, text=True, check=True).stdout
        assert m.sample(**kw) == cli[:-1]


def test_sample_of_a_nan_model_raises(hpt_bin, model_path, tmp_path):
    # a NaN weight: sample drew one constant token and returned it as text;
    # the binding's loader keeps --init's contract (loads), the draw refuses
    b = bytearray(open(model_path, "rb").read())
    i = b.find(b"PARM") + 16 + 8
    b[i:i + 4] = struct.pack("<f", float("nan"))
    b[-4:] = struct.pack("<I", zlib.crc32(bytes(b[:-4])))
    bad = tmp_path / "nan.bin"
    bad.write_bytes(bytes(b))
    m = hpt.load(str(bad))
    with pytest.raises(hpt.Error, match="not finite") as e:
        m.sample(tokens=5)
    assert e.value.status == "HPT_ERR_NUMERIC"
    p = subprocess.run([hpt_bin, "sample", "--model", str(bad), "--tokens", "5"], capture_output=True, text=True)
    assert p.returncode == 1 and "not finite" in p.stderr and "'wte', element 0" in p.stderr, p.stderr


def test_save_over_a_fifo_is_refused(model_path, tmp_path):
    # the atomic save renamed its file over whatever the path named
    fifo = tmp_path / "ff"
    os.mkfifo(fifo)
    with pytest.raises(hpt.Error, match="not a regular file"):
        hpt.load(model_path).save(str(fifo))
    assert not os.path.isfile(fifo) and os.path.exists(fifo)


@pytest.mark.parametrize("kw", [dict(batch=2 ** 31), dict(batch=2, seed=-1), dict(batch=2, seed=2 ** 70),
                                dict(batch=2, n_embd=2 ** 32 + 16)])
def test_constructor_ints_that_ctypes_would_wrap_raise(kw):
    # batch=2**31 was refused as "batch -2147483648"; seed=-1 and 2**70 were
    # reduced modulo 2**64 without a word
    args = dict(vocab_size=256, block_size=8, n_layer=1, n_head=2, n_embd=16, batch=2, seed=1)
    args.update(kw)
    with pytest.raises(hpt.Error, match="must be an integer"):
        hpt.GPT2(**args)
    if "seed" in kw:
        with pytest.raises(hpt.Error, match="seed must be an integer"):
            hpt.MLP(n_in=4, hidden=(4,), n_classes=2, batch=2, seed=kw["seed"])
