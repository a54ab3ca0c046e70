"""Shared fixtures: the repository, the hpt program, a small reproducible corpus."""
import os
import sys

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "python"))

import pytest  # noqa: E402

import hpt  # noqa: E402

hpt.set_threads(1)  # tiny models: several threads would only wait on each other (2 shared cores)


WORDS = ("the of and a to in is you that it he was for on are as with his they at be this have from or one had "
         "by word but not what all were we when your can said").split()


def words_text(seed, nbytes=20000):
    """tests/lib.sh's words_text: sentences of common words drawn by an LCG."""
    s, out, line, n = seed, [], "", 0
    while n < nbytes:
        s = (s * 69069 + 1) % 4294967296
        line += WORDS[(s // 65536) % len(WORDS)] + " "
        if len(line) > 60:
            out.append(line)
            n += len(line) + 1
            line = ""
    return "\n".join(out) + "\n"


@pytest.fixture(scope="session")
def hpt_bin():
    path = os.environ.get("HPT") or os.path.join(ROOT, "hpt")
    path = os.path.abspath(os.path.join(ROOT, path)) if not os.path.isabs(path) else path
    if not os.path.exists(path):
        pytest.fail("the hpt program is not built (%s): run make" % path)
    return path


@pytest.fixture(scope="session")
def corpus(tmp_path_factory):
    p = tmp_path_factory.mktemp("data") / "corpus.txt"
    p.write_text(words_text(7))
    return str(p)
