"""The examples of docs/python.md run: its python blocks, in order, as one
script in a directory holding data/corpus.txt."""
import os
import re
import subprocess
import sys

from conftest import ROOT, words_text


def blocks():
    with open(os.path.join(ROOT, "docs", "python.md")) as f:
        return re.findall(r"^```python\n(.*?)^```", f.read(), re.S | re.M)


def test_docs_examples_run(tmp_path):
    code = blocks()
    assert len(code) >= 4
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "corpus.txt").write_text(words_text(11))
    (tmp_path / "example.py").write_text("\n".join(code))
    env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "python"))
    p = subprocess.run([sys.executable, "example.py"], cwd=tmp_path, env=env, capture_output=True, text=True,
                       timeout=120)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "step 60 val" in p.stdout and "gpt2 L2 H2 C32" in p.stdout and "'tokens':" in p.stdout
    assert (tmp_path / "runs" / "py-demo" / "summary.json").exists()
