"""hpt_version and the binding's struct checks: the
version is the library's one definition (hpt --version, hpt.version(),
pyproject's), and every struct python/hpt/_lib.py mirrors by hand has the
library's sizeof; a mirror that does not stops `import hpt` with an
ImportError naming the struct."""
import ctypes
import os
import re
import subprocess
import sys

import hpt
from hpt import _lib

from conftest import ROOT


def test_version_one_definition(hpt_bin):
    s, (major, minor, patch) = hpt.version()
    assert s == "%d.%d.%d" % (major, minor, patch) and hpt.__version__ == s
    out = subprocess.run([hpt_bin, "--version"], capture_output=True, text=True, timeout=60)
    lines = out.stdout.splitlines()
    assert out.returncode == 0 and lines[0] == "hpt %s" % s, out.stdout
    assert lines[1] == "blas %s (chosen by %s)" % (hpt.blas_core(), hpt.blas_origin()), out.stdout
    with open(os.path.join(ROOT, "python", "pyproject.toml")) as f:
        assert re.search(r'^version = "%s"$' % re.escape(s), f.read(), re.M), "pyproject.toml's version is not " + s


def test_struct_sizes_match():
    assert set(_lib.MIRRORED) == {"hpt_tensor_info", "hpt_batch", "hpt_gpt2_config", "hpt_mlp_config",
                                  "hpt_cnn_config", "hpt_step_info", "hpt_setting", "hpt_train_callbacks"}
    for name, mirror in _lib.MIRRORED.items():
        assert _lib.lib.hpt_struct_size(name.encode()) == ctypes.sizeof(mirror) > 0, name
    assert _lib.lib.hpt_struct_size(b"hpt_no_such_struct") == 0
    assert _lib.lib.hpt_struct_size(None) == 0
    for name in ("hpt_train_config", "hpt_hybrid_config", "hpt_run_options"):
        assert _lib.lib.hpt_struct_size(name.encode()) > 0, name


def test_struct_mismatch_is_an_import_error():
    # a mirror with a field the library does not have
    class Longer(ctypes.Structure):
        _fields_ = _lib.StepInfo._fields_ + [("extra", ctypes.c_double)]

    saved = dict(_lib.MIRRORED)
    try:
        _lib.MIRRORED["hpt_step_info"] = Longer
        try:
            _lib.check_struct_sizes(_lib.lib, "libhpt.so")
        except ImportError as e:
            msg = str(e)
        else:
            raise AssertionError("no ImportError for a longer hpt_step_info")
    finally:
        _lib.MIRRORED.clear()
        _lib.MIRRORED.update(saved)
    assert "hpt_step_info is %d bytes in the library, %d in hpt._lib.Longer" % (
        ctypes.sizeof(_lib.StepInfo), ctypes.sizeof(Longer)) in msg, msg
    assert "rebuild" in msg


def test_import_fails_on_mismatch():
    # import hpt in a fresh process whose ctypes.sizeof lies about StepInfo
    code = ("import ctypes, sys; real = ctypes.sizeof\n"
            "ctypes.sizeof = lambda t: real(t) + (8 if getattr(t, '__name__', '') == 'StepInfo' else 0)\n"
            "sys.path.insert(0, sys.argv[1])\n"
            "try:\n    import hpt\nexcept ImportError as e:\n    print('ImportError:', e); sys.exit(3)\n")
    p = subprocess.run([sys.executable, "-c", code, os.path.join(ROOT, "python")], capture_output=True, text=True,
                       timeout=120)
    assert p.returncode == 3 and "hpt_step_info is" in p.stdout and "StepInfo" in p.stdout, p.stdout + p.stderr
