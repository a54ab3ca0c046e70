"""hpt.train against `hpt train`: the same options give the same run bit for
bit (param_crc32); sample and eval against the CLI's; errors and stops."""
import json
import os
import signal
import subprocess
import sys
import time

import pytest

import hpt

OPTS = dict(n_layer=1, n_head=2, n_embd=32, block_size=16, batch_size=4, max_iters=30, eval_interval=10,
            eval_iters=2, threads=1, lr=4e-3, seed=5)
HYBRID = dict(mode="hybrid", warmup_steps=5, full_steps=4, predictor="outer", outer_interval=4)


def cli_train(hpt_bin, out, **opts):
    argv = [hpt_bin, "train"]
    for k, v in opts.items():
        argv += ["--" + k.replace("_", "-")] + ([] if v is True else [str(v)])
    p = subprocess.run(argv + ["--out", str(out)], capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    with open(os.path.join(out, "summary.json")) as f:
        return json.load(f)


def metrics(out):
    with open(os.path.join(out, "metrics.jsonl")) as f:
        rows = [json.loads(line) for line in f]
    clock = ("_s", "_ms", "rss_bytes")  # times and memory differ from run to run
    return [{k: v for k, v in r.items() if not k.endswith(clock)} for r in rows]


@pytest.mark.parametrize("extra", [{}, HYBRID], ids=["baseline", "hybrid"])
def test_train_equals_the_cli_bit_for_bit(hpt_bin, corpus, tmp_path, extra):
    cli = cli_train(hpt_bin, tmp_path / "cli", data=corpus, **OPTS, **extra)
    steps = []
    py = hpt.train(data=corpus, out=str(tmp_path / "py"), progress=steps.append, **OPTS, **extra)
    assert py["param_crc32"] == cli["param_crc32"]
    assert py["final_val_loss"] == cli["final_val_loss"]
    assert py["blas_core"] == cli["blas_core"] == hpt.blas_core()  # one choice in every process (hpt_blas_origin)
    assert metrics(tmp_path / "py") == metrics(tmp_path / "cli")
    assert [s["step"] for s in steps][-1] == 30 and ("phase" in steps[0]) == bool(extra)
    # another seed is another run: the comparison can fail
    other = hpt.train(data=corpus, out=str(tmp_path / "py2"), **dict(OPTS, seed=6), **extra)
    assert other["param_crc32"] != cli["param_crc32"]


def test_sample_and_eval_equal_the_cli(hpt_bin, corpus, tmp_path):
    hpt.train(data=corpus, out=str(tmp_path / "r"), **OPTS)
    path = str(tmp_path / "r" / "model.bin")
    m = hpt.load(path)
    for kw in (dict(tokens=60, temperature=0.8, top_k=5, seed=3, prompt="the "), dict(tokens=40, seed=9)):
        argv = [hpt_bin, "sample", "--model", path, "--threads", "1"]
        for k, v in kw.items():
            argv += ["--" + k.replace("_", "-"), str(v)]
        cli = subprocess.run(argv, capture_output=True, text=True, check=True).stdout
        assert m.sample(**kw) == cli[:-1]  # hpt sample ends with a newline
        # on the guard device (the model loaded where the host may not read it): the same text
        assert m.sample(**kw, device="guard") == cli[:-1]
    with pytest.raises(hpt.Error, match="nosuch"):
        m.sample(tokens=5, device="nosuch")
    cli = json.loads(subprocess.run([hpt_bin, "eval", "--model", path, "--data", corpus, "--threads", "1"], capture_output=True,
                                    text=True, check=True).stdout)
    ev = m.eval(corpus)
    assert ev["tokens"] == cli["tokens"] and abs(ev["loss"] - cli["loss"]) <= 1e-8 * cli["loss"]
    # on the guard device (the CPU's kernels behind the device table): the same loss, bit for bit
    assert m.eval(corpus, device="guard") == ev
    # a prompt character outside the char vocabulary: HPT_ERR_DATA from hpt_text_encode, and the CLI's exit 2
    with pytest.raises(hpt.Error) as e:
        m.sample(tokens=5, prompt="the \u00e9")
    assert e.value.status == "HPT_ERR_DATA" and "at byte 4" in str(e.value)
    p = subprocess.run([hpt_bin, "sample", "--model", path, "--tokens", "5", "--prompt", "the \u00e9"],
                       capture_output=True, text=True)
    assert p.returncode == 2 and "at byte 4 is not in the model's vocabulary" in p.stderr, p.stderr
    # a checkpoint loads as a model too
    hpt.train(data=corpus, out=str(tmp_path / "c"), save_interval=10, **OPTS)
    ck = hpt.load(str(tmp_path / "c" / "checkpoints" / "ckpt-00000030.bin"))
    assert (ck.params == m.params).all()


def test_options_come_from_the_settings_table():
    opts = hpt.train_options()
    assert opts["max_iters"]["flag"] == "--max-iters" and opts["cost_by_time"]["type"] == "switch"
    assert "hybrid" in opts["mode"]["choices"] and opts["resume"]["group"] == "run"
    assert opts["outer_interval"]["group"] == "hybrid"


def test_train_errors_raise_with_the_cli_message(hpt_bin, corpus, tmp_path):
    cases = [
        (dict(n_layer=0), None),
        (dict(bogus=1), "unknown option 'bogus'"),
        (dict(schedule="nope"), None),
        (dict(warmup_steps=3), "--warmup-steps only applies with --mode hybrid"),
        (dict(max_iters=5, epochs=2, task="fashion-mnist", model="mlp"), "give --max-iters or --epochs, not both"),
    ]
    for opts, msg in cases:
        with pytest.raises(hpt.Error) as e:
            hpt.train(data=corpus, out=str(tmp_path / "x"), **opts)
        if msg is None:  # the CLI's own words
            argv = [hpt_bin, "train", "--data", corpus, "--out", str(tmp_path / "x")]
            for k, v in opts.items():
                argv += ["--" + k.replace("_", "-"), str(v)]
            p = subprocess.run(argv, capture_output=True, text=True)
            assert p.returncode == 2 and str(e.value) in p.stderr, (str(e.value), p.stderr)
        else:
            assert msg in str(e.value)
    with pytest.raises(hpt.Error, match="missing.txt"):
        hpt.train(data=str(tmp_path / "missing.txt"), out=str(tmp_path / "m"), **OPTS)


def test_a_callback_exception_stops_with_a_checkpoint_and_resume_continues(corpus, tmp_path):
    full = hpt.train(data=corpus, out=str(tmp_path / "full"), **OPTS)

    def stop_at_12(info):
        if info["step"] == 12:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        hpt.train(data=corpus, out=str(tmp_path / "cut"), progress=stop_at_12, **OPTS)
    assert os.listdir(tmp_path / "cut" / "checkpoints") and not os.path.exists(tmp_path / "cut" / "summary.json")
    resumed = hpt.train(resume=str(tmp_path / "cut"))
    assert resumed["param_crc32"] == full["param_crc32"]


def test_compare_runs_the_program_and_returns_results(hpt_bin, corpus, tmp_path, monkeypatch):
    monkeypatch.setenv("HPT_BIN", hpt_bin)
    res = hpt.compare(out=str(tmp_path / "cmp"), data=corpus, arms=["baseline", "ema"], lrs=[4e-3], seeds=1,
                      n_layer=1, n_head=2, n_embd=16, block_size=16, batch_size=4, max_iters=20, eval_iters=2,
                      threads=1)
    assert sorted(res["arms"]) == ["baseline", "ema"] and res["seeds"] == [1337] and res["lrs"] == [4e-3]
    with open(tmp_path / "cmp" / "results.json") as f:
        assert json.load(f) == res
    with pytest.raises(hpt.Error, match="unknown arm 'nope'") as e:
        hpt.compare(out=str(tmp_path / "bad"), data=corpus, arms="baseline,nope")
    assert e.value.status == "HPT_ERR_ARG"


def test_a_users_openblas_core_is_kept(tmp_path):
    # a user's OPENBLAS_CORETYPE is kept, and takes effect (tests/cli_blas.sh
    # has the kernels hpt chooses itself)
    code = "import hpt; print(hpt.blas_core())"
    env = dict(os.environ, OPENBLAS_CORETYPE="Haswell", PYTHONPATH=os.path.dirname(os.path.dirname(hpt.__file__)))
    p = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert p.stdout.strip() == "Haswell"


def test_a_stop_requested_in_the_last_step_does_not_stop_the_next_run(corpus, tmp_path):
    def late(info):
        if info["step"] == OPTS["max_iters"]:
            raise ValueError("late")

    with pytest.raises(ValueError, match="late"):
        hpt.train(data=corpus, out=str(tmp_path / "a"), progress=late, **OPTS)
    assert hpt.train(data=corpus, out=str(tmp_path / "b"), **OPTS)["steps"] == OPTS["max_iters"]


def test_sigint_stops_with_a_checkpoint_and_keyboardinterrupt(corpus, tmp_path):
    out = tmp_path / "sig"
    code = ("import hpt, sys; hpt.train(data=sys.argv[1], out=sys.argv[2], n_layer=1, n_head=2, n_embd=16, "
            "block_size=16, batch_size=4, max_iters=1000000, eval_interval=0, threads=1)")
    env = dict(os.environ, PYTHONPATH=os.path.dirname(os.path.dirname(hpt.__file__)))
    p = subprocess.Popen([sys.executable, "-c", code, corpus, str(out)], env=env, stderr=subprocess.PIPE, text=True)
    try:
        for _ in range(3000):  # until it is training
            if (out / "metrics.jsonl").exists() and (out / "metrics.jsonl").stat().st_size > 0:
                break
            time.sleep(0.01)
        p.send_signal(signal.SIGINT)
        _, err = p.communicate(timeout=60)
    finally:
        p.kill()
    assert p.returncode != 0 and "KeyboardInterrupt" in err, err
    assert os.listdir(out / "checkpoints")


def test_set_vocab_dir_is_the_clis_vocab_for_the_process(corpus, tmp_path):
    """hpt.set_vocab_dir: a directory without GPT-2's files makes a gpt2-tokenizer
    run fail naming it (train without vocab= keeps the process's choice); None
    restores the default, where scripts/install-deps.sh puts them."""
    empty = tmp_path / "no-vocab-here"
    empty.mkdir()
    opts = dict(OPTS, max_iters=2, eval_interval=0, tokenizer="gpt2")
    hpt.set_vocab_dir(empty)
    try:
        with pytest.raises(hpt.Error, match="no-vocab-here"):
            hpt.train(data=corpus, out=str(tmp_path / "a"), **opts)
    finally:
        hpt.set_vocab_dir(None)
    default = os.environ.get("HPT_VOCAB") or "/usr/local/share/hpt/gpt2"
    if not os.path.exists(os.path.join(default, "encoder.json")):
        pytest.skip("GPT-2's vocabulary is not installed (scripts/install-deps.sh)")
    s = hpt.train(data=corpus, out=str(tmp_path / "b"), **opts)
    assert s["steps"] == 2
