"""Models from Python: zero-copy views, gradients against finite differences
through the views, errors with the library's message, views after close()."""
import ctypes
import gc
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
        m.forward(np.full((2, 8), 11), np.zeros((2, 8)))
    with pytest.raises(hpt.Error, match="no tensor named 'nope'"):
        m.tensor("nope")
    with pytest.raises(hpt.Error, match="nowhere.bin") as e:
        hpt.load("/nowhere.bin")
    assert e.value.status == "HPT_ERR_IO"


def test_close_refuses_calls_and_keeps_views_valid():
    m = small_gpt2()
    x, y = batch()
    m.forward(x, y)
    params, grads = m.params, m.grads
    snapshot = params.copy()
    arena = weakref.ref(m._arena)
    m.close()
    for call in (lambda: m.forward(x, y), m.backward, m.zero_grad, lambda: m.params, lambda: m.grads,
                 lambda: m.logits, lambda: m.num_params, lambda: m.tensors):
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
