"""Loading libhpt.so and the C declarations the binding uses (ctypes).

ctypes rather than cffi: it is in the standard library (nothing to install in
a virtual environment), and the binding needs only plain C calls, a few
structs of hpt.h mirrored below and two callbacks; cffi's ABI mode would ask
for the same declarations as text and its API mode for a compiler at install
time.
"""
import ctypes
import os
from ctypes import (CFUNCTYPE, POINTER, Structure, c_char_p, c_double, c_float, c_int, c_size_t, c_uint,
                    c_uint32, c_uint64, c_void_p)

_HERE = os.path.dirname(os.path.abspath(__file__))


class Error(Exception):
    """A failure reported by libhpt: .status is hpt_status's name ("HPT_ERR_ARG" ...), the message hpt_errmsg()."""

    def __init__(self, message, status="HPT_ERR_ARG"):
        super().__init__(message)
        self.status = status


def _find_library():
    """HPT_LIB, else the copy beside this package (make puts one there; pip
    installs it with the package), else the source tree's build/libhpt.so."""
    candidates = [os.environ.get("HPT_LIB"), os.path.join(_HERE, "libhpt.so"),
                  os.path.join(_HERE, "..", "..", "build", "libhpt.so")]
    for path in candidates:
        if path and os.path.exists(path):
            return os.path.abspath(path)
    raise ImportError("libhpt.so not found (looked at %s): run `make` in hpt's repository, or set HPT_LIB"
                      % ", ".join(p for p in candidates if p))


def _load():
    # Loading libhpt.so also settles OpenBLAS's kernels for this process
    # (hpt_blas_origin): the same as the CLI's, even where numpy loaded
    # OpenBLAS first.
    path = _find_library()
    return ctypes.CDLL(path), path


lib, LIBRARY_PATH = _load()

# ---------------------------------------------------------------- structs of hpt.h


class TensorInfo(Structure):
    _fields_ = [("name", c_char_p), ("offset", c_size_t), ("numel", c_size_t), ("ndim", c_int),
                ("shape", c_int * 4), ("decay", c_int)]


class Batch(Structure):
    _fields_ = [("B", c_int), ("T", c_int), ("tokens", POINTER(c_int)), ("x", POINTER(c_float)),
                ("x_dim", c_int), ("targets", POINTER(c_int))]


class GPT2Config(Structure):
    _fields_ = [("vocab_size", c_int), ("block_size", c_int), ("n_layer", c_int), ("n_head", c_int),
                ("n_embd", c_int)]


MLP_MAX_HIDDEN = 4


class MLPConfig(Structure):
    _fields_ = [("n_in", c_int), ("n_hidden", c_int), ("hidden", c_int * MLP_MAX_HIDDEN), ("n_classes", c_int)]


class CNNConfig(Structure):
    _fields_ = [("in_c", c_int), ("in_h", c_int), ("in_w", c_int), ("c1", c_int), ("c2", c_int),
                ("hidden", c_int), ("n_classes", c_int)]


class StepInfo(Structure):
    _fields_ = [("step", c_int), ("max_iters", c_int), ("train_loss", c_float), ("lr", c_float),
                ("grad_norm", c_float), ("step_s", c_double), ("time_s", c_double), ("tokens", c_double),
                ("evaluated", c_int), ("val_loss", c_float), ("val_accuracy", c_float),
                ("ema_val_loss", c_float), ("phase", c_char_p), ("backward", c_int), ("probes", c_int),
                ("predicted_loss", c_float), ("confidence", c_float), ("residual", c_float),
                ("predicted_steps", c_int), ("accepted", c_int), ("alpha", c_float)]


class Setting(Structure):
    _fields_ = [("flag", c_char_p), ("field", c_char_p), ("group", c_int), ("type", c_int), ("offset", c_size_t),
                ("min", c_double), ("max", c_double), ("flags", c_uint), ("meta", c_char_p), ("names", c_void_p),
                ("name_at", c_void_p), ("on", c_int), ("help", c_char_p)]


LOG_FN = CFUNCTYPE(None, c_void_p, c_char_p)
STEP_FN = CFUNCTYPE(None, c_void_p, POINTER(StepInfo))
START_FN = CFUNCTYPE(c_int, c_void_p, c_void_p, c_void_p)  # (user, hpt_trainer *, const hpt_hybrid_config *)
END_FN = CFUNCTYPE(None, c_void_p, c_int, c_char_p)        # (user, status, out_dir)


class TrainCallbacks(Structure):
    _fields_ = [("user", c_void_p), ("log", LOG_FN), ("step", STEP_FN), ("start", START_FN), ("end", END_FN)]


SET_TRAIN, SET_RUN, SET_HYBRID = 0, 1, 2
SET_TYPES = ["int", "u64", "float", "str", "enum", "name", "switch"]
SET_SWITCH = 6
STATUS = ["HPT_OK", "HPT_ERR_ARG", "HPT_ERR_NOMEM", "HPT_ERR_IO", "HPT_ERR_FORMAT", "HPT_ERR_DATA",
          "HPT_ERR_NUMERIC", "HPT_ERR_INTERRUPTED"]
ERR_INTERRUPTED = 7

# The structs above against the library's own sizeof (hpt_struct_size):
# a libhpt.so built from another hpt.h (a field added, a type changed) would
# otherwise be read through the wrong layout without a word.
MIRRORED = {"hpt_tensor_info": TensorInfo, "hpt_batch": Batch, "hpt_gpt2_config": GPT2Config,
            "hpt_mlp_config": MLPConfig, "hpt_cnn_config": CNNConfig, "hpt_step_info": StepInfo,
            "hpt_setting": Setting, "hpt_train_callbacks": TrainCallbacks}


def check_struct_sizes(library, path):
    """Raises ImportError naming every struct whose ctypes mirror's size is
    not the library's (or a library without hpt_struct_size)."""
    try:
        size_of = library.hpt_struct_size
    except AttributeError:
        raise ImportError("%s has no hpt_struct_size: it is older than this binding (python/hpt); rebuild it "
                          "with `make`, or set HPT_LIB to a matching one" % path) from None
    size_of.restype, size_of.argtypes = c_size_t, [c_char_p]
    bad = []
    for cname, mirror in MIRRORED.items():
        want, got = size_of(cname.encode()), ctypes.sizeof(mirror)
        if want != got:
            bad.append("%s is %d bytes in the library, %d in hpt._lib.%s" % (cname, want, got, mirror.__name__))
    if bad:
        raise ImportError("libhpt.so at %s does not match this binding's copies of hpt.h's structs (%s): rebuild "
                          "it with `make` from the same tree, or update python/hpt/_lib.py" % (path, "; ".join(bad)))


check_struct_sizes(lib, LIBRARY_PATH)

# ---------------------------------------------------------------- functions

_P = c_void_p  # opaque handles (hpt_model *, hpt_text *, hpt_train_args *)
_SIGS = {
    "hpt_version": (c_char_p, [POINTER(c_int), POINTER(c_int), POINTER(c_int)]),
    "hpt_struct_size": (c_size_t, [c_char_p]),
    "hpt_errmsg": (c_char_p, []),
    "hpt_status_str": (c_char_p, [c_int]),
    "hpt_set_threads": (None, [c_int]),
    "hpt_get_threads": (c_int, []),
    "hpt_blas_core": (c_char_p, []),
    "hpt_blas_origin": (c_char_p, []),
    "hpt_gpt2_init": (c_int, [POINTER(_P), POINTER(GPT2Config), c_int, c_int, c_uint64, _P]),
    "hpt_mlp_init": (c_int, [POINTER(_P), POINTER(MLPConfig), c_int, c_uint64]),
    "hpt_mlp_config_default": (None, [POINTER(MLPConfig)]),
    "hpt_cnn_init": (c_int, [POINTER(_P), POINTER(CNNConfig), c_int, c_uint64]),
    "hpt_cnn_config_default": (None, [POINTER(CNNConfig)]),
    "hpt_model_free": (None, [_P]),
    "hpt_model_forward": (c_int, [_P, POINTER(Batch), POINTER(c_float)]),
    "hpt_model_backward": (c_int, [_P, c_float]),
    "hpt_model_zero_grad": (None, [_P]),
    "hpt_model_params": (c_void_p, [_P, POINTER(c_size_t)]),
    "hpt_model_grads": (c_void_p, [_P, POINTER(c_size_t)]),
    "hpt_model_tensors": (POINTER(TensorInfo), [_P, POINTER(c_int)]),
    "hpt_model_logits": (c_void_p, [_P, POINTER(c_int), POINTER(c_int)]),
    "hpt_model_num_params": (c_size_t, [_P]),
    "hpt_model_block_size": (c_int, [_P]),
    "hpt_model_describe": (c_char_p, [_P]),
    "hpt_weights_load": (c_int, [c_char_p, c_int, c_int, c_char_p, POINTER(_P), POINTER(_P)]),
    "hpt_model_logits_copy": (c_int, [_P, c_int, POINTER(c_float)]),
    "hpt_weights_save": (c_int, [c_char_p, _P, _P]),
    "hpt_text_free": (None, [_P]),
    "hpt_set_vocab_dir": (None, [c_char_p]),
    "hpt_text_from_vocab": (c_int, [POINTER(_P), c_int, c_void_p, c_int]),
    "hpt_text_vocab_size": (c_int, [_P]),
    "hpt_text_encode": (c_int, [_P, c_char_p, POINTER(c_int), c_int, POINTER(c_int), POINTER(c_size_t)]),
    "hpt_text_decode": (c_int, [_P, c_int, c_char_p]),
    "hpt_sample_token": (c_int, [c_void_p, c_int, c_float, c_int, POINTER(c_uint64), POINTER(c_float),
                                 POINTER(c_int)]),
    "hpt_eval_text": (c_int, [c_char_p, c_char_p, c_char_p, POINTER(c_double), POINTER(c_size_t)]),
    "hpt_settings": (POINTER(Setting), [c_int, POINTER(c_int)]),
    "hpt_setting_find": (POINTER(Setting), [c_char_p]),
    "hpt_setting_name": (c_char_p, [POINTER(Setting), c_int]),
    "hpt_setting_format": (c_int, [POINTER(Setting), c_void_p, c_char_p, c_size_t]),
    "hpt_train_args_sizeof": (c_size_t, []),
    "hpt_train_args_parse": (c_int, [c_void_p, c_int, POINTER(c_char_p)]),
    "hpt_train_args_resolve": (c_int, [c_void_p]),
    "hpt_train_args_group": (c_void_p, [c_void_p, c_int]),
    "hpt_train_args_run": (c_int, [c_void_p, POINTER(TrainCallbacks)]),
    "hpt_request_stop": (None, []),
    "hpt_crc32": (c_uint32, [c_uint32, c_void_p, c_size_t]),
}
for _name, (_res, _args) in _SIGS.items():
    _f = getattr(lib, _name)
    _f.restype = _res
    _f.argtypes = _args


def check(st):
    """Raises Error with hpt_errmsg() when a call failed."""
    if st != 0:
        msg = lib.hpt_errmsg().decode("utf-8", "replace")
        raise Error(msg, STATUS[st] if 0 <= st < len(STATUS) else str(st))


def setting_names(s):
    """The allowed values of an ENUM / NAME row."""
    out, i = [], 0
    while True:
        n = lib.hpt_setting_name(s, i)
        if n is None:
            return out
        out.append(n.decode())
        i += 1
