"""Models from Python: zero-copy views, gradients against finite differences
through the views, errors with the library's message, views after close()."""
import ctypes
import gc
import os
import subprocess
import sys
import weakref

import numpy as np
import pytest

import hpt
from hpt import _lib


def small_gpt2(seed=1):
    return hpt.GPT2(vocab_size=11, block_size=8, n_layer=1, n_head=2, n_embd=16, batch=2, seed=seed)


def batch(seed=0, V=11, B=2, T=8):
    rng = np.random.default_rng(seed)
    return rng.integers(0, V, (B, T)), rng.integers(0, V, (B, T))


def test_views_are_the_arenas():
    m = small_gpt2()
    n = ctypes.c_size_t()
    assert m.params.ctypes.data == _lib.lib.hpt_model_params(m._handle(), ctypes.byref(n))
    assert m.grads.ctypes.data == _lib.lib.hpt_model_grads(m._handle(), ctypes.byref(n))
    assert m.params.dtype == np.float32 and m.params.size == m.num_params == n.value
    assert not np.shares_memory(m.params, m.grads)
    covered = 0
    for t in m.tensors:
        v = m.tensor(t.name)
        assert np.shares_memory(v, m.params) and v.shape == t.shape
        covered += t.slice.stop - t.slice.start
    assert covered == m.num_params
    # writing a view changes the model: zeroed weights give the uniform loss
    x, y = batch()
    loss = m.forward(x, y)
    m.params[:] = 0
    assert abs(m.forward(x, y) - np.log(11)) < 1e-5 and loss != m.forward(x, y)
    # and the C side writes into the same memory: backward fills the view
    m.params[:] = np.random.default_rng(1).standard_normal(m.num_params).astype(np.float32) * 0.1
    m.forward(x, y)
    m.zero_grad()
    assert not m.grads.any()
    m.backward()
    assert np.abs(m.grads).sum() > 0


def fd_check(m, x, y, tensors, per_tensor=3, eps=1e-2):
    """Central differences in float64 arithmetic over float32 losses, at the
    coordinates of largest analytic gradient in each tensor."""
    m.forward(x, y)
    m.zero_grad()
    m.backward()
    g = m.grads.copy()
    checked = 0
    for t in m.tensors:
        if t.name not in tensors:
            continue
        idx = t.slice.start + np.argsort(-np.abs(g[t.slice]))[:per_tensor]
        for i in idx:
            old = m.params[i]
            m.params[i] = old + eps
            lp = m.forward(x, y)
            m.params[i] = old - eps
            lm = m.forward(x, y)
            m.params[i] = old
            fd = (lp - lm) / (2 * eps)
            assert abs(fd - g[i]) <= 2e-3 + 3e-2 * abs(g[i]), (t.name, int(i), fd, g[i])
            checked += 1
    assert checked == per_tensor * len(tensors)


def test_gpt2_gradients_match_finite_differences():
    m = small_gpt2(seed=3)
    x, y = batch(seed=4)
    fd_check(m, x, y, {"wte", "wpe", "ln1w", "qkvw", "attprojw", "fcw", "fcprojb", "lnfw"})


def test_classifier_gradients_match_finite_differences():
    rng = np.random.default_rng(5)
    mlp = hpt.MLP(n_in=12, hidden=(8,), n_classes=4, batch=3, seed=2)
    fd_check(mlp, rng.standard_normal((3, 12)), rng.integers(0, 4, 3), {"fc1w", "fc1b", "fc2w", "fc2b"})
    cnn = hpt.CNN(in_c=1, in_h=8, in_w=8, c1=2, c2=3, hidden=6, n_classes=4, batch=2, seed=2)
    fd_check(cnn, rng.standard_normal((2, 64)), rng.integers(0, 4, 2), {"conv1w", "conv2w", "fc1w", "fc2b"})


def test_logits_are_a_view_of_the_last_forward():
    m = small_gpt2()
    x, _ = batch()
    m.forward(x)
    lg = m.logits
    assert lg.shape == (2, 8, 11) and not lg.flags.writeable
    m.forward(x[:1, :4])
    assert m.logits.shape == (1, 4, 11)


def test_errors_raise_with_the_message():
    with pytest.raises(hpt.Error, match="n_embd 16 must be a positive multiple of n_head 3") as e:
        hpt.GPT2(11, 8, 1, 3, 16, 2, 1)
    assert e.value.status == "HPT_ERR_ARG"
    m = small_gpt2()
    with pytest.raises(hpt.Error, match=r"gpt2: token 11 out of range \[0,11\)"):
        m.forward(np.full((2, 8), 11), np.zeros((2, 8), dtype=int))
    with pytest.raises(hpt.Error, match="no tensor named 'nope'"):
        m.tensor("nope")
    with pytest.raises(hpt.Error, match="nowhere.bin") as e:
        hpt.load("/nowhere.bin")
    assert e.value.status == "HPT_ERR_IO"


def test_forward_refuses_the_wrong_input_width():
    """The classifiers once read (B, n_in) floats whatever the array
    held: too few features read past it (SIGSEGV for a big batch), too many
    were misread. The library refuses, naming both widths."""
    rng = np.random.default_rng(0)
    mlp = hpt.MLP(n_in=12, hidden=(8,), n_classes=4, batch=2, seed=2)
    cnn = hpt.CNN(in_c=1, in_h=8, in_w=8, c1=2, c2=3, hidden=6, n_classes=4, batch=2, seed=2)
    y = np.array([0, 1])
    for m, width in ((mlp, 12), (cnn, 64)):
        for bad in (1, 5, width - 1, width + 1, 100):
            with pytest.raises(hpt.Error, match=r"batch has %d features per sample \(x_dim\), the model takes %d"
                               % (bad, width)) as e:
                m.forward(rng.standard_normal((2, bad)), y)
            assert e.value.status == "HPT_ERR_ARG"
            with pytest.raises(hpt.Error, match="the model takes %d" % width):
                m.forward(rng.standard_normal((2, bad)))  # no targets: refused all the same
        assert np.isfinite(m.forward(rng.standard_normal((2, width)), y))
    # an image batch (B, C, H, W) flattens to the model's width
    assert np.isfinite(cnn.forward(rng.standard_normal((2, 1, 8, 8)), y))


def test_forward_of_a_narrow_batch_does_not_crash():
    """The issue's case: a batch of 4096 one-feature rows read as 784 each
    ran off the array and killed the process (exit 139). In a child, so a
    crash fails this test instead of ending the session."""
    code = ("import numpy as np, hpt\n"
            "hpt.set_threads(1)\n"
            "for m in (hpt.MLP(batch=4096), hpt.CNN(batch=512)):\n"
            "    try:\n"
            "        m.forward(np.zeros((m._batch, 1), np.float32), np.zeros(m._batch, int))\n"
            "    except hpt.Error as e:\n"
            "        print(e)\n")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                       env=dict(os.environ, PYTHONPATH=os.path.dirname(os.path.dirname(hpt.__file__))))
    assert p.returncode == 0, (p.returncode, p.stderr[-2000:])
    assert p.stdout.splitlines() == ["forward: the batch has 1 features per sample (x_dim), the model takes 784"] * 2


def test_ids_must_be_int32_integers():
    """Ids were once cast to int32 unchecked (2**32 + 1 became 1, 1.7
    became 1): a float, bool or object dtype and a value outside int32 are
    refused, tokens and targets alike; integer dtypes of any width in range
    still work."""
    m = small_gpt2()
    x, y = batch()
    loss = m.forward(x, y)
    for dt in (np.int8, np.uint8, np.int16, np.uint32, np.int64, np.uint64):
        assert m.forward(x.astype(dt), y.astype(dt)) == loss
    assert m.forward(x.tolist(), y.tolist()) == loss  # lists of Python ints
    wrap = x.copy()
    wrap[0, 0] = 2 ** 32 + 1  # int32 of it is 1, a valid token
    for bad, what, msg in (
            (x + 0.7, "tokens", "integer ids, got dtype float64"),
            (x.astype(np.float32), "tokens", "integer ids, got dtype float32"),
            (x > 3, "tokens", "integer ids, got dtype bool"),
            (wrap, "tokens", r"tokens id 4294967297 is outside int32"),
            (np.full((2, 8), -2 ** 31 - 1), "tokens", "outside int32"),
            (np.full((2, 8), 2 ** 63, dtype=np.uint64), "tokens", "outside int32"),
            (np.array([[2 ** 70] * 8] * 2, dtype=object), "tokens", "got dtype object"),
            (y + 0.5, "targets", "integer ids, got dtype float64"),
            (np.where(y == y, 2 ** 32 + 1, y), "targets", r"targets id 4294967297 is outside int32")):
        args = (bad, y) if what == "tokens" else (x, bad)
        with pytest.raises(hpt.Error, match=msg) as e:
            m.forward(*args)
        assert e.value.status == "HPT_ERR_ARG"
    # inside int32 the library checks the vocabulary and the classes, as before
    with pytest.raises(hpt.Error, match=r"token 2147483647 out of range \[0,11\)"):
        m.forward(np.full((2, 8), 2 ** 31 - 1), y)
    mlp = hpt.MLP(n_in=12, hidden=(8,), n_classes=4, batch=2, seed=2)
    feats = np.zeros((2, 12))
    for bad in (np.array([1.7, 0.0]), np.array([2 ** 32 + 1, 0])):
        with pytest.raises(hpt.Error, match="targets"):
            mlp.forward(feats, bad)
    with pytest.raises(hpt.Error, match=r"mlp: target 4 out of range \[0,4\)"):
        mlp.forward(feats, np.array([4, 0]))
    assert np.isfinite(mlp.forward(feats, np.array([3, 0], dtype=np.uint8)))


def test_close_refuses_calls_and_keeps_views_valid():
    m = small_gpt2()
    x, y = batch()
    m.forward(x, y)
    params, grads = m.params, m.grads
    snapshot = params.copy()
    arena = weakref.ref(m._arena)
    m.close()
    for call in (lambda: m.forward(x, y), m.backward, m.zero_grad, lambda: m.params, lambda: m.grads,
                 lambda: m.logits, lambda: m.num_params, lambda: m.tensors, lambda: m.vocab_size):
        with pytest.raises(hpt.Error, match="the model is closed"):
            call()
    # the views still own the arena: reading and writing them is safe memory
    assert arena() is not None
    assert np.array_equal(params, snapshot)
    params[:] = 1.0
    grads[:] = 2.0
    del params
    gc.collect()
    assert arena() is not None  # grads still holds it
    del grads
    gc.collect()
    assert arena() is None      # the last view gone: hpt_model_free ran
    # a model dropped without close() frees its arena the same way
    m2 = small_gpt2()
    arena2 = weakref.ref(m2._arena)
    del m2
    gc.collect()
    assert arena2() is None


def test_save_and_load_round_trip(tmp_path):
    rng = np.random.default_rng(0)
    mlp = hpt.MLP(n_in=12, hidden=(8,), n_classes=4, batch=3, seed=2)
    mlp.save(str(tmp_path / "mlp.bin"))
    back = hpt.load(str(tmp_path / "mlp.bin"), batch=3)
    x, y = rng.standard_normal((3, 12)), rng.integers(0, 4, 3)
    assert np.array_equal(back.params, mlp.params) and back.forward(x, y) == mlp.forward(x, y)
    with pytest.raises(hpt.Error, match="not a language model|needs a language model"):
        back.sample(5)
    g = hpt.GPT2(vocab_size=256, block_size=8, n_layer=1, n_head=2, n_embd=16, batch=1, seed=4)
    g.save(str(tmp_path / "g.bin"))
    gb = hpt.load(str(tmp_path / "g.bin"))
    assert np.array_equal(gb.params, g.params) and gb.vocab_size == 256 and len(gb.sample(tokens=5)) >= 1
    with pytest.raises(hpt.Error, match="needs a tokenizer"):
        small_gpt2().save(str(tmp_path / "v11.bin"))
