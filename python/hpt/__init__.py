"""hpt from Python: libhpt's models with zero-copy numpy views of their
parameter and gradient arenas, the trainer (`hpt train`'s options as
keywords), compare, and model files (load, sample, eval).

    import hpt
    m = hpt.GPT2(vocab_size=65, block_size=32, n_layer=2, n_head=2, n_embd=32, batch=4, seed=1)
    loss = m.forward(x, y); m.zero_grad(); m.backward()
    m.params -= 1e-3 * m.grads          # the arena itself: the model changed

docs/python.md has the tour.
"""
import collections
import ctypes
import json
import os
import shutil
import signal
import subprocess
import sys

import numpy as np

from ._lib import Error, LIBRARY_PATH, lib, check
from . import _lib

__all__ = ["Error", "GPT2", "MLP", "CNN", "Model", "Tensor", "train", "train_options", "compare", "load",
           "set_threads", "get_threads", "blas_core", "blas_origin", "set_vocab_dir", "LIBRARY_PATH", "version", "__version__"]


def version():
    """libhpt's version: (string, (major, minor, patch)), from hpt_version;
    the same as `hpt --version` prints."""
    n = [ctypes.c_int(), ctypes.c_int(), ctypes.c_int()]
    s = lib.hpt_version(*[ctypes.byref(x) for x in n]).decode()
    return s, tuple(x.value for x in n)


__version__ = version()[0]

Tensor = collections.namedtuple("Tensor", "name shape slice decay")


def set_threads(n=0):
    """OpenMP and OpenBLAS threads (0: all cores, as the CLI's default). Like
    hpt_set_threads, it also sets flush-to-zero for denormal floats on the
    calling thread and the OpenMP workers."""
    lib.hpt_set_threads(int(n))


def set_vocab_dir(path=None):
    """Where the gpt2 tokenizer's encoder.json and vocab.bpe are read from by
    everything after it in this process (load, sample, eval, and train
    without vocab=): the CLI's --vocab DIR. None restores the default:
    $HPT_VOCAB, else /usr/local/share/hpt/gpt2 (scripts/install-deps.sh).
    hpt.train(vocab=DIR) sets it too."""
    lib.hpt_set_vocab_dir(None if path is None else os.fsencode(path))


def get_threads():
    return lib.hpt_get_threads()


def blas_core():
    """The OpenBLAS kernel family in use ("Haswell", "SkylakeX", ...)."""
    return lib.hpt_blas_core().decode()


def blas_origin():
    """Who chose blas_core: "openblas", "OPENBLAS_CORETYPE" (the user) or
    "hpt" (OpenBLAS fell back to Prescott on this CPU; hpt.h)."""
    return lib.hpt_blas_origin().decode()


_threads_set = False


def _default_threads():
    # the CLI's default (--threads 0: all cores), once, unless set_threads came first
    global _threads_set
    if not _threads_set:
        _threads_set = True
        lib.hpt_set_threads(0)


# ---------------------------------------------------------------- arenas and views

class _Arena:
    """Owns a model (and its tokenizer): freed when the last reference goes,
    the Model's own and every numpy view's (their base holds one), so no view
    can outlive the memory it points into."""

    def __init__(self, model, tok=None):
        self.model, self.tok = model, tok

    def __del__(self):
        if self.model:
            lib.hpt_model_free(self.model)
        if self.tok:
            lib.hpt_text_free(self.tok)
        self.model = self.tok = None


class _View:
    """A numpy array's base: the arena's address and a reference to its owner."""

    def __init__(self, addr, shape, owner, readonly=False, strides=None):
        self.__array_interface__ = {"data": (addr, readonly), "shape": tuple(shape), "typestr": "<f4",
                                    "strides": strides, "version": 3}
        self.owner = owner


def _view(addr, shape, owner, readonly=False, strides=None):
    return np.asarray(_View(addr, shape, owner, readonly, strides))


# ---------------------------------------------------------------- models

_INT32_MIN, _INT32_MAX = -2 ** 31, 2 ** 31 - 1


def _ids(a, what):
    """Token or class ids as a contiguous int32 array (the library's int).
    numpy's cast would truncate a float (1.7 -> 1) and wrap a value outside
    int32 (2**32 + 1 -> 1), training on an id the caller never gave, so a
    non-integer dtype (float, bool, object) and a value outside int32 raise
    instead; the range inside int32 (the vocabulary, the classes) is the
    library's to check."""
    a = np.asarray(a)
    if a.size == 0:  # np.asarray([]) is float64: no value to lose
        return np.ascontiguousarray(a, dtype=np.int32)
    if a.dtype.kind not in "iu":
        raise Error("forward: %s must be integer ids, got dtype %s%s"
                    % (what, a.dtype, " (values beyond 64 bits, or not numbers)" if a.dtype.kind == "O" else ""))
    out = a > _INT32_MAX if a.dtype.kind == "u" else (a < _INT32_MIN) | (a > _INT32_MAX)
    if out.any():
        raise Error("forward: %s id %d is outside int32 [%d, %d]" % (what, a[out].flat[0], _INT32_MIN, _INT32_MAX))
    return np.ascontiguousarray(a, dtype=np.int32)


class Model:
    """A libhpt model. params / grads: float32 views of its two arenas
    (writing them changes the model); tensors: name, shape and slice of each
    tensor in them. close() frees nothing a view still uses: the model
    refuses further calls, and the arena goes when the last view does."""

    def __init__(self, handle, tok=None, batch=1, seq=1, kind="model"):
        self._arena = _Arena(handle, tok)
        self._batch, self._seq, self.kind = batch, seq, kind
        self._inputs = None     # the last forward's arrays: the model reads them again in backward
        self._last = (0, 0)     # the last forward's B, T
        n = ctypes.c_size_t()
        self._params = _view(lib.hpt_model_params(handle, ctypes.byref(n)), (n.value,), self._arena)
        self._grads = _view(lib.hpt_model_grads(handle, ctypes.byref(n)), (n.value,), self._arena)
        cnt = ctypes.c_int()
        info = lib.hpt_model_tensors(handle, ctypes.byref(cnt))
        self._tensors = [Tensor(info[i].name.decode(), tuple(info[i].shape[:info[i].ndim]),
                                slice(info[i].offset, info[i].offset + info[i].numel), bool(info[i].decay))
                         for i in range(cnt.value)]

    # -- lifetime
    def _handle(self):
        if self._arena is None:
            raise Error("the model is closed", "HPT_ERR_ARG")
        return self._arena.model

    def close(self):
        """Ends the model: every later call raises hpt.Error. Views taken
        before stay valid memory (they keep the arena) but are no longer the
        model's; the arena is freed when the last of them is gone."""
        self._arena = None
        self._params = self._grads = self._inputs = None

    @property
    def closed(self):
        return self._arena is None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    # -- arenas
    @property
    def params(self):
        self._handle()
        return self._params

    @params.setter
    def params(self, value):
        # `m.params -= d` lands here with the arena itself; anything else is
        # copied into the arena (the model never points at another array)
        if value is not self.params:
            self._params[...] = value

    @property
    def grads(self):
        self._handle()
        return self._grads

    @grads.setter
    def grads(self, value):
        if value is not self.grads:
            self._grads[...] = value

    @property
    def tensors(self):
        self._handle()
        return list(self._tensors)

    def tensor(self, name, grad=False):
        """One tensor of the params (or grads) arena as a view of its shape."""
        for t in self.tensors:
            if t.name == name:
                return (self.grads if grad else self.params)[t.slice].reshape(t.shape)
        raise Error("no tensor named '%s' (have %s)" % (name, ", ".join(t.name for t in self._tensors)))

    @property
    def num_params(self):
        return lib.hpt_model_num_params(self._handle())

    def __repr__(self):
        if self.closed:
            return "<hpt.Model closed>"
        return "<hpt.Model %s>" % lib.hpt_model_describe(self._handle()).decode()

    # -- passes
    def forward(self, x, y=None):
        """x: tokens (B, T) ints for GPT-2, features (B, n) floats for the
        classifiers (n: the model's input width, n_in or in_c*in_h*in_w);
        y: targets (B, T) / (B,), or None (then no loss). Ids must be of an
        integer dtype and within int32 and the vocabulary / classes; a wrong
        width or id raises hpt.Error. Returns the mean loss (a float) or None."""
        h = self._handle()
        if self.kind == "gpt2":
            x = _ids(x, "tokens")
            if x.ndim == 1:
                x = x[None, :]
            if x.ndim != 2:
                raise Error("forward: tokens must be (B, T), got shape %s" % (x.shape,))
            B, T = x.shape
            b = _lib.Batch(B=B, T=T, tokens=x.ctypes.data_as(ctypes.POINTER(ctypes.c_int)))
        else:
            x = np.ascontiguousarray(x, dtype=np.float32)
            if x.ndim == 1:
                x = x[None, :]
            B, T = x.shape[0], 1
            x = x.reshape(B, int(np.prod(x.shape[1:])))  # (B, C, H, W) images flatten to their width
            b = _lib.Batch(B=B, T=1, x=x.ctypes.data_as(ctypes.POINTER(ctypes.c_float)), x_dim=x.shape[1])
        if y is not None:
            y = _ids(y, "targets")
            if y.size != B * T:
                raise Error("forward: targets must have %d entries (B x T), got shape %s" % (B * T, y.shape))
            b.targets = y.ctypes.data_as(ctypes.POINTER(ctypes.c_int))
        loss = ctypes.c_float()
        check(lib.hpt_model_forward(h, ctypes.byref(b), ctypes.byref(loss) if y is not None else None))
        self._inputs, self._last = (x, y), (B, T)
        return float(loss.value) if y is not None else None

    def backward(self, loss_scale=1.0):
        """Gradients of the last forward (with targets) ADDED into grads,
        scaled by loss_scale: call zero_grad() first for a fresh gradient."""
        check(lib.hpt_model_backward(self._handle(), float(loss_scale)))

    def zero_grad(self):
        lib.hpt_model_zero_grad(self._handle())

    @property
    def logits(self):
        """The last forward's outputs, (B, T, V) for GPT-2 and (B, classes)
        for the classifiers, a read-only view of the activations (valid until
        the next pass). After a forward with targets they are probabilities
        (the loss computes the softmax in place: the same argmax)."""
        h = self._handle()
        n_out, row = ctypes.c_int(), ctypes.c_int()
        addr = lib.hpt_model_logits(h, ctypes.byref(n_out), ctypes.byref(row))
        B, T = self._last
        if not B:
            raise Error("logits: no forward pass yet")
        full = _view(addr, (B, T, row.value), self._arena, readonly=True)[:, :, :n_out.value]
        return full if self.kind == "gpt2" else full[:, 0, :]

    # -- files
    def save(self, path):
        """Writes the model file (model.bin's format; hpt sample reads it). A
        GPT-2 file needs a tokenizer: a model built here with vocab_size 256
        is saved with the byte tokenizer; another size is refused (train it
        with hpt.train, whose model.bin has its corpus's tokenizer)."""
        h = self._handle()
        if self.kind == "gpt2" and not self._arena.tok:
            V = getattr(self, "_vocab", None)
            if V != 256:
                raise Error("save: a GPT-2 model file needs a tokenizer: this model (vocab_size %s) has none; only "
                            "vocab_size 256 is saved with the byte tokenizer" % V)
            tok = ctypes.c_void_p()
            check(lib.hpt_text_from_vocab(ctypes.byref(tok), 0, None, 256))
            self._arena.tok = tok.value
        check(lib.hpt_weights_save(os.fsencode(path), h, self._arena.tok))

    @property
    def vocab_size(self):
        """The tokenizer's vocabulary (None: the model has no tokenizer)."""
        self._handle()  # closed: raises, as every other attribute does
        tok = self._arena.tok
        return lib.hpt_text_vocab_size(tok) if tok else None

    def sample(self, tokens=500, temperature=1.0, top_k=0, seed=1, prompt=None, device="cpu"):
        """Text from a language model, as `hpt sample` draws it (the same
        seed gives the same text): the prompt, then `tokens` new ones
        (0 to 1e8, --tokens' range). On
        another `device` (--device's names) the model is loaded from its file
        onto that device for the call, as `hpt sample --device` does."""
        h = self._handle()
        tok = self._arena.tok
        if not tok:
            raise Error("sample needs a language model with a tokenizer (one from hpt.load of a text run)")
        # --tokens' range and message: unbounded, 2**31 tokens asked for an
        # 8 GiB context up front, and -1 raised a bare IndexError
        if isinstance(tokens, bool) or not isinstance(tokens, (int, np.integer)) or not 0 <= tokens <= 100000000:
            raise Error("--tokens must be in [0, 100000000], got %r" % (tokens,))
        tokens = int(tokens)
        if not temperature > 0:
            raise Error("--temperature must be > 0")
        V, maxT = lib.hpt_text_vocab_size(tok), lib.hpt_model_block_size(h)
        pb = (prompt or "").encode()
        enc = (ctypes.c_int * (len(pb) + 1))()  # a token has at least one byte
        bad, count = ctypes.c_size_t(), ctypes.c_int()
        if pb:
            st = lib.hpt_text_encode(tok, pb, enc, len(enc), ctypes.byref(count), ctypes.byref(bad))
            if st == _lib.STATUS.index("HPT_ERR_DATA"):
                raise Error("the prompt's character at byte %d is not in the model's vocabulary" % bad.value,
                            "HPT_ERR_DATA")
            check(st)
            n = count.value
        else:
            st = lib.hpt_text_encode(tok, b"\n", enc, len(enc), ctypes.byref(count), None)
            n = count.value
            if st != 0 or n != 1:
                enc[0], n = 0, 1
        # The context the model sees is the last maxT tokens (as hpt sample's
        # window), so the buffer holds 2 maxT and slides back when full: its
        # size is the model's, not the number of tokens asked for.
        W = 2 * maxT
        ctx = (ctypes.c_int * W)()
        keep = min(n, maxT)
        ctx[:keep] = enc[n - keep:n]
        n = keep
        rs = ctypes.c_uint64((_c_seed(seed) * 0x9E3779B97F4A7C15 + 1) & 0xFFFFFFFFFFFFFFFF)
        probs, order = (ctypes.c_float * V)(), (ctypes.c_int * V)()
        buf, out = ctypes.create_string_buffer(256), bytearray(pb)  # 256: HPT_TOKEN_MAX_BYTES
        base = ctypes.addressof(ctx)
        logits = (ctypes.c_float * V)()
        dev = self._on_device(device) if device != "cpu" else None
        try:
            m = dev or h
            for k in range(tokens):
                T = min(n, maxT)
                b = _lib.Batch(B=1, T=T, tokens=ctypes.cast(base + 4 * (n - T), ctypes.POINTER(ctypes.c_int)))
                check(lib.hpt_model_forward(m, ctypes.byref(b), None))
                check(lib.hpt_model_logits_copy(m, T - 1, logits))  # to host memory, from any device
                pick = lib.hpt_sample_token(logits, V, float(temperature), int(top_k), ctypes.byref(rs), probs, order)
                if pick < 0:  # non-finite logits: no distribution, a constant token would pass for text
                    raise Error("the logits for token %d are not finite (NaN or inf): the model's weights are not "
                                "finite, or it overflows" % (k + 1), "HPT_ERR_NUMERIC")
                if n == W:  # full: keep the last maxT - 1, the window after this token
                    ctypes.memmove(base, base + 4 * (W - maxT + 1), 4 * (maxT - 1))
                    n = maxT - 1
                ctx[n] = pick
                n += 1
                nb = lib.hpt_text_decode(tok, pick, buf)
                out += buf.raw[:nb]
        finally:
            if dev:
                lib.hpt_model_free(dev)
        self._last = (0, 0)
        return out.decode("utf-8", "replace")

    def _file(self, what):
        """The file this model was loaded from, which `what` reads."""
        path = getattr(self, "path", None)
        if not path:
            raise Error("%s reads the model from its file: save() it and hpt.load() it, or use hpt.load(path)" % what)
        return path

    def _on_device(self, device):
        """This model's file loaded onto `device` for one batch-1 call: a
        model handle the caller frees (its tokenizer is this model's own)."""
        path = self._file("sample on a device")
        dh, dtok = ctypes.c_void_p(), ctypes.c_void_p()
        check(lib.hpt_weights_load(os.fsencode(path), 1, 0, os.fsencode(device), ctypes.byref(dh),
                                   ctypes.byref(dtok)))
        if dtok.value:
            lib.hpt_text_free(dtok)
        return dh.value

    def eval(self, data, device="cpu"):
        """Mean next-token loss of a model file over a text file (`hpt eval`):
        {"loss", "ppl", "tokens"}, on `device` (--device's names). Needs the
        model loaded from a file."""
        self._handle()
        path = self._file("eval")
        loss, n = ctypes.c_double(), ctypes.c_size_t()
        check(lib.hpt_eval_text(os.fsencode(path), os.fsencode(data), os.fsencode(device), ctypes.byref(loss),
                                ctypes.byref(n)))
        return {"loss": loss.value, "ppl": float(np.exp(loss.value)), "tokens": n.value}


def _c_int(name, v):
    """v as a C int, else Error naming it: ctypes wraps a Python int past the
    type silently (batch=2**31 was refused as "batch -2147483648")."""
    if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or not -2 ** 31 <= v < 2 ** 31:
        raise Error("%s must be an integer that fits a C int, got %r" % (name, v))
    return int(v)


def _c_seed(v):
    """A seed as the library's uint64, else Error: -1 and 2**70 were reduced
    modulo 2**64 without a word."""
    if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or not 0 <= v < 2 ** 64:
        raise Error("seed must be an integer in [0, 2**64 - 1], got %r" % (v,))
    return int(v)


def _init(fn, cfg, *args):
    _default_threads()
    h = ctypes.c_void_p()
    check(fn(ctypes.byref(h), ctypes.byref(cfg), *args))
    return h.value


def GPT2(vocab_size, block_size, n_layer, n_head, n_embd, batch, seed=1337):
    """A GPT-2 with activations for batches of up to `batch` sequences of up
    to block_size tokens, initialised as GPT-2 from seed."""
    dims = dict(vocab_size=vocab_size, block_size=block_size, n_layer=n_layer, n_head=n_head, n_embd=n_embd,
                batch=batch)
    vocab_size, block_size, n_layer, n_head, n_embd, batch = (_c_int(k, v) for k, v in dims.items())
    cfg = _lib.GPT2Config(vocab_size, block_size, n_layer, n_head, n_embd)
    m = Model(_init(lib.hpt_gpt2_init, cfg, batch, block_size, _c_seed(seed), None), None, batch, block_size, "gpt2")
    m._vocab = int(vocab_size)
    return m


def MLP(n_in=784, hidden=(256, 128), n_classes=10, batch=128, seed=1337):
    """Multi-layer perceptron: len(hidden) x (Linear, ReLU), Linear to the logits."""
    cfg = _lib.MLPConfig()
    lib.hpt_mlp_config_default(ctypes.byref(cfg))
    if len(hidden) > _lib.MLP_MAX_HIDDEN:
        raise Error("MLP: at most %d hidden layers, got %d" % (_lib.MLP_MAX_HIDDEN, len(hidden)))
    cfg.n_in, cfg.n_hidden, cfg.n_classes = n_in, len(hidden), n_classes
    for i, w in enumerate(hidden):
        cfg.hidden[i] = w
    return Model(_init(lib.hpt_mlp_init, cfg, _c_int("batch", batch), _c_seed(seed)), None, batch, 1, "mlp")


def CNN(in_c=1, in_h=28, in_w=28, c1=32, c2=64, hidden=128, n_classes=10, batch=128, seed=1337):
    """Two conv3x3-ReLU-maxpool blocks, then Linear-ReLU-Linear (hpt.h)."""
    cfg = _lib.CNNConfig(in_c, in_h, in_w, c1, c2, hidden, n_classes)
    return Model(_init(lib.hpt_cnn_init, cfg, _c_int("batch", batch), _c_seed(seed)), None, batch, 1, "cnn")


def load(path, batch=1):
    """A model file (model.bin) or a checkpoint (DIR/checkpoints/ckpt-*.bin:
    its PARM arena; for a schedule-free run that is the gradient point y, not
    the average x that model.bin holds), with its tokenizer if it has one;
    activations for batches of `batch` sequences of its full context."""
    _default_threads()
    h, tok = ctypes.c_void_p(), ctypes.c_void_p()
    check(lib.hpt_weights_load(os.fsencode(path), int(batch), 0, None, ctypes.byref(h), ctypes.byref(tok)))
    desc = lib.hpt_model_describe(h).decode()
    kind = desc.split()[0] if desc else "model"
    m = Model(h.value, tok.value, batch, lib.hpt_model_block_size(h), kind)
    m.path = os.fspath(path)
    return m


# ---------------------------------------------------------------- train

def _key(flag):
    return flag[2:].replace("-", "_")


def train_options():
    """Every `hpt train` option, from the settings table the CLI parses with:
    {keyword: {"flag", "type", "group", "default", "help", "choices"}}."""
    out = {}
    for g, group in ((_lib.SET_TRAIN, "train"), (_lib.SET_RUN, "run"), (_lib.SET_HYBRID, "hybrid")):
        n = ctypes.c_int()
        rows = lib.hpt_settings(g, ctypes.byref(n))
        for i in range(n.value):
            s = rows[i]
            row = {"flag": s.flag.decode(), "type": _lib.SET_TYPES[s.type], "group": group,
                   "help": s.help.decode() if s.help else ""}
            if s.type in (4, 5):
                row["choices"] = _lib.setting_names(ctypes.pointer(s))
            out[_key(row["flag"])] = row
    return out


def _argv(options):
    """Keywords as `hpt train` flags: True for a switch, anything else as text."""
    argv = []
    for k, v in options.items():
        s = lib.hpt_setting_find(("--" + k.replace("_", "-")).encode())
        if not s:
            raise Error("unknown option '%s' for hpt.train (hpt.train_options() lists them)" % k)
        flag = s.contents.flag.decode()
        if s.contents.type == _lib.SET_SWITCH:
            if v is True:
                argv.append(flag)
            elif v is not False and v is not None:
                raise Error("%s is a switch: give True or False, got %r" % (k, v))
        elif v is not None:
            argv += [flag, os.fspath(v) if isinstance(v, os.PathLike) else str(v)]
    return argv


def _step_dict(p):
    s = p.contents
    d = {f: getattr(s, f) for f, _ in _lib.StepInfo._fields_}
    if d["phase"] is None:
        for f in ("phase", "backward", "probes", "predicted_loss", "confidence", "residual", "predicted_steps",
                  "accepted", "alpha"):
            d.pop(f)
    else:
        d["phase"] = d["phase"].decode()
    if not d["evaluated"]:
        d.pop("val_loss"), d.pop("val_accuracy"), d.pop("ema_val_loss")
    return d


def train(progress=None, log=None, **options):
    """Runs `hpt train` in this process: every CLI option as a keyword (the
    flag without its dashes, '-' as '_': data=, out=, max_iters=, mode=
    "hybrid", cost_by_time=True, resume=DIR, ...), parsed by the same code
    and table as the CLI. progress(info: dict) is called after every step,
    log(line: str) with the trainer's log lines (None: discarded). Returns
    summary.json as a dict. Ctrl-C (KeyboardInterrupt) or an exception in a
    callback stops the run after the step in flight with a checkpoint (resume
    with resume=DIR), then propagates."""
    _default_threads()
    args = [a.encode() for a in _argv(options)]
    argv = (ctypes.c_char_p * (len(args) + 1))(*args, None)
    ta = ctypes.create_string_buffer(lib.hpt_train_args_sizeof())
    check(lib.hpt_train_args_parse(ta, len(args), argv))
    run = lib.hpt_train_args_group(ta, _lib.SET_RUN)
    resume = _format(ta, "--resume")
    if not resume:
        check(lib.hpt_train_args_resolve(ta))
    out_dir = resume or _format(ta, "--out")
    raised = []

    def on_log(_ctx, line):
        try:
            if log:
                log(line.decode("utf-8", "replace"))
        except BaseException as e:  # noqa: B902 (Ctrl-C included): stop with a checkpoint, raise after
            raised.append(e)
            lib.hpt_request_stop()

    def on_step(_ctx, info):
        try:
            if progress:
                progress(_step_dict(info))
        except BaseException as e:  # noqa: B902
            raised.append(e)
            lib.hpt_request_stop()

    def on_sigint(_sig, _frame):
        # Python runs this between the bytecodes of a callback: raising here
        # would escape the callback (ctypes can only print and drop it), so
        # Ctrl-C asks for a stop, as hpt train's handler does, and is raised
        # once the run has saved its checkpoint
        raised.append(KeyboardInterrupt())
        lib.hpt_request_stop()

    callbacks = _lib.TrainCallbacks(log=_lib.LOG_FN(on_log), step=_lib.STEP_FN(on_step))
    del run
    try:
        previous = signal.signal(signal.SIGINT, on_sigint)
    except ValueError:  # not the main thread: signals go to the main thread's handler
        previous = None
    try:
        st = lib.hpt_train_args_run(ta, ctypes.byref(callbacks))
    finally:
        if previous is not None:
            signal.signal(signal.SIGINT, previous)
    if raised:
        raise raised[0]
    check(st)
    with open(os.path.join(out_dir, "summary.json")) as f:
        return json.load(f)


def _format(ta, flag):
    s = lib.hpt_setting_find(flag.encode())
    buf = ctypes.create_string_buffer(4200)
    lib.hpt_setting_format(s, lib.hpt_train_args_group(ta, s.contents.group), buf, len(buf))
    return buf.value.decode()


# ---------------------------------------------------------------- compare

def _hpt_binary():
    for path in (os.environ.get("HPT_BIN"), os.path.join(os.path.dirname(__file__), "..", "..", "hpt"),
                 shutil.which("hpt")):
        if path and os.path.isfile(path) and os.access(path, os.X_OK):
            return os.path.abspath(path)
    raise Error("hpt.compare runs the hpt program: not found (set HPT_BIN, or put hpt on PATH)", "HPT_ERR_IO")


def compare(out="runs/compare", **options):
    """`hpt compare` as a subprocess (the program, not the library: compare
    runs its arms as child `hpt train` processes itself), options as for
    train (lists are joined with commas). Returns results.json as a dict;
    a failure raises hpt.Error with hpt's message."""
    argv = [_hpt_binary(), "compare", "--out", os.fspath(out)]
    for k, v in options.items():
        flag = "--" + k.replace("_", "-")
        if v is True:
            argv.append(flag)
        elif v is not False and v is not None:
            argv += [flag, ",".join(map(str, v)) if isinstance(v, (list, tuple)) else str(v)]
    p = subprocess.run(argv, capture_output=True, text=True)
    if p.returncode != 0:
        lines = [ln for ln in p.stderr.splitlines() if ln.startswith("hpt")] or p.stderr.splitlines() or [""]
        raise Error(lines[-1].removeprefix("hpt: ").removeprefix("error: "),
                    "HPT_ERR_ARG" if p.returncode == 2 else "HPT_ERR_IO")
    with open(os.path.join(out, "results.json")) as f:
        return json.load(f)
