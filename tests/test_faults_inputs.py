"""Fault injection for readers, `validate` and input parsing: every bad input is one `error:` line, exit 2.

Each case runs the real CLI in a fresh process (`python -m rlbench.harness`) on a real input that
is damaged the way disks, editors and people damage them: a truncated run.json, a parquet
file cut short, a workload with a stray brace, a config.json with 2.7 layers. The records
are copies of a real TRL run (tests/data/records/trl-tiny). Asserted every time: the exit
code, exactly one line starting `error:` that names the problem, and no traceback.
The run-lifecycle half of issue 19 (signals, full disks, stale records) is in tests/fault/.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import PROJECT_ROOT, run_cli

GOLDEN = PROJECT_ROOT / "tests" / "data" / "records" / "trl-tiny"
WORKLOADS = PROJECT_ROOT / "workloads"


def assert_refused(result: subprocess.CompletedProcess, *needles: str) -> str:
    """Exit 2, one `error:` line holding every needle, no traceback; returns that line."""
    output = result.stdout + result.stderr
    assert "Traceback" not in output, output
    errors = [line for line in output.splitlines() if line.startswith("error:")]
    assert result.returncode == 2 and len(errors) == 1, output
    assert all(needle in errors[0] for needle in needles), errors[0]
    return errors[0]


def assert_no_traceback(result: subprocess.CompletedProcess) -> None:
    assert "Traceback" not in result.stdout + result.stderr, result.stderr


# ---------------------------------------------------------------- damaged records


def _cut(path: Path, keep: int) -> None:
    path.write_bytes(path.read_bytes()[:keep])


def _rewrite(path: Path, change) -> None:
    import pandas as pd

    change(pd.read_parquet(path)).to_parquet(path)


def _edit_json(path: Path, keys: tuple[str, ...], value) -> None:
    record = json.loads(path.read_text())
    node = record
    for key in keys[:-1]:
        node = node[key]
    node[keys[-1]] = value
    path.write_text(json.dumps(record))


DAMAGES = {
    "truncated-run-json": ("run.json", lambda d: _cut(d / "run.json", 300), "run.json is not valid JSON"),
    "empty-run-json": ("run.json", lambda d: (d / "run.json").write_bytes(b""), "run.json is not valid JSON"),
    "binary-run-json": (
        "run.json",
        lambda d: (d / "run.json").write_bytes(b"\x89PNG\r\n\x1a\n\xff\xfe"),
        "run.json is not UTF-8 text",
    ),
    "run-json-not-an-object": (
        "run.json",
        lambda d: (d / "run.json").write_text("[1, 2]\n"),
        "run.json is not a JSON object",
    ),
    "run-json-without-framework": (
        "run.json",
        lambda d: (d / "run.json").write_text(
            json.dumps({k: v for k, v in json.loads((GOLDEN / "run.json").read_text()).items() if k != "framework"})
        ),
        "run.json field 'framework' is missing",
    ),
    "truncated-steps": ("steps.parquet", lambda d: _cut(d / "steps.parquet", 500), "steps.parquet is not a readable"),
    "garbage-telemetry": (
        "telemetry.parquet",
        lambda d: (d / "telemetry.parquet").write_bytes(b"not parquet\n"),
        "telemetry.parquet is not a readable",
    ),
    "steps-without-step": (
        "steps.parquet",
        lambda d: _rewrite(d / "steps.parquet", lambda t: t.drop(columns="step")),
        "steps.parquet has no 'step' column",
    ),
    "telemetry-time-as-text": (
        "telemetry.parquet",
        lambda d: _rewrite(d / "telemetry.parquet", lambda t: t.assign(time_unix_s=t["time_unix_s"].astype(str))),
        "telemetry.parquet column 'time_unix_s' is not numeric",
    ),
    "summary-median-text": (
        "run.json",
        lambda d: _edit_json(d / "run.json", ("summary", "step_time_s", "median"), "x"),
        "run.json field summary.step_time_s lacks a numeric median",
    ),
    "gpus-not-a-list": (
        "run.json",
        lambda d: _edit_json(d / "run.json", ("environment", "gpus"), "H100"),
        "run.json field environment.gpus is not a list of mappings",
    ),
    "vs-model-stage-not-a-mapping": (
        "run.json",
        lambda d: _edit_json(d / "run.json", ("vs_model", "stages"), {"gen": 1}),
        "run.json field vs_model.stages is not a mapping of mappings",
    ),
    "truncated-prediction": (
        "prediction.json",
        lambda d: _cut(d / "prediction.json", 100),
        "prediction.json is not valid JSON",
    ),
}


@pytest.fixture(scope="module")
def results(tmp_path_factory) -> Path:
    """One good record copy and one copy per kind of damage, in one results folder."""
    folder = tmp_path_factory.mktemp("damaged-results")
    shutil.copytree(GOLDEN, folder / "good")
    for name, (_, damage, _) in DAMAGES.items():
        shutil.copytree(GOLDEN, folder / name)
        damage(folder / name)
    return folder


def test_report_names_and_skips_each_damaged_record(results, tmp_path):
    out = tmp_path / "report.html"
    result = run_cli("report", str(results), "--out", str(out))
    assert result.returncode == 0 and out.is_file(), result.stderr
    assert_no_traceback(result)
    warnings = [line for line in result.stderr.splitlines() if line.startswith("warning: skipped")]
    assert len(warnings) == len(DAMAGES)
    for name, (_, _, problem) in DAMAGES.items():
        assert any(f"{results / name}: damaged run record: {problem}" in w for w in warnings), (name, warnings)
    html = out.read_text()
    assert html.count("damaged record") == len(DAMAGES) and "gsm8k-grpo-tiny" in html  # the good run is reported


def test_history_names_and_skips_each_damaged_record(results, tmp_path):
    out = tmp_path / "history.html"
    result = run_cli("report", "--history", str(results), "--out", str(out))
    assert result.returncode == 0 and out.is_file(), result.stderr
    assert_no_traceback(result)
    assert result.stderr.count("warning: skipped") == len(DAMAGES)


def test_report_of_only_damaged_records_is_refused(results, tmp_path):
    assert_refused(
        run_cli("report", str(results / "truncated-run-json"), "--out", str(tmp_path / "r.html")),
        "no readable run record",
        "run.json is not valid JSON",
        "restore",
    )
    assert not (tmp_path / "r.html").exists()


@pytest.mark.parametrize("damage", ["truncated-run-json", "run-json-not-an-object", "truncated-steps"])
def test_compare_refuses_a_damaged_record(results, damage):
    problem = DAMAGES[damage][2]
    assert_refused(run_cli("compare", str(results / "good"), str(results / damage)), problem, str(results / damage))
    assert_refused(run_cli("compare", str(results / damage), str(results / "good")), problem)


def test_compare_refuses_a_record_of_a_newer_schema(tmp_path):
    newer = tmp_path / "newer"
    shutil.copytree(GOLDEN, newer)
    _edit_json(newer / "run.json", ("schema_version",), 99)
    assert_refused(run_cli("compare", str(GOLDEN), str(newer)), "unreadable run record", "upgrade rlbench")


def test_compare_of_a_record_with_itself_says_so(results):
    result = run_cli("compare", str(results / "good"), str(results / "good"))
    assert_no_traceback(result)
    assert result.returncode != 2 and "notice:" in result.stderr and "are the same run" in result.stderr


def test_report_out_under_a_regular_file(results, tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("x")
    assert_refused(
        run_cli("report", str(results / "good"), "--out", str(blocker / "sub" / "report.html")),
        "--out",
        f"{blocker} is a file, not a folder",
    )


@pytest.mark.parametrize(
    "command",
    [
        ("sweep", "--framework", "trl", "--workload", "gsm8k-grpo-tiny"),
        ("calibrate", "--framework", "trl"),
    ],
)
def test_sweep_and_calibrate_out_under_a_regular_file(tmp_path, command):
    blocker = tmp_path / "a-file"
    blocker.write_text("x")
    assert_refused(run_cli(*command, "--out", str(blocker / "sub")), "--out", f"{blocker} is a file, not a folder")


def _in_read_only_mount(mount: Path, *args: str) -> subprocess.CompletedProcess:
    """`python -m rlbench.harness ARGS` in a private mount namespace where `mount` is a read-only tmpfs."""
    mount.mkdir(exist_ok=True)
    script = f'mount -t tmpfs -o ro,size=64k tmpfs {mount} && exec "$@"'
    return subprocess.run(
        ["unshare", "--mount", "sh", "-c", script, "sh", sys.executable, "-m", "rlbench.harness", *args],
        capture_output=True,
        text=True,
        cwd=PROJECT_ROOT,
        timeout=120,
    )


@pytest.fixture
def read_only_dir(tmp_path) -> Path:
    probe = subprocess.run(
        ["unshare", "--mount", "sh", "-c", f"mount -t tmpfs -o ro tmpfs {tmp_path}"], capture_output=True
    )
    if shutil.which("unshare") is None or probe.returncode != 0:
        pytest.skip("no private mount namespace here (needs unshare and CAP_SYS_ADMIN)")
    return tmp_path / "ro"


def test_report_out_on_a_read_only_filesystem(results, read_only_dir):
    result = _in_read_only_mount(read_only_dir, "report", str(results / "good"), "--out", str(read_only_dir / "r.html"))
    assert_refused(result, "--out", "Read-only file system")


def _sweep_index() -> dict:
    cell = {
        "id": "c000",
        "framework": "trl",
        "workload": "gsm8k-grpo-tiny",
        "parallel": {},
        "repeat": 1,
        "status": "succeeded",
        "reason": None,
        "error": None,
        "record": None,
        "previous_records": [],
        "executor": None,
        "started_at": None,
        "ended_at": None,
    }
    request = {
        "frameworks": ["trl"],
        "workloads": ["gsm8k-grpo-tiny"],
        "grid": {},
        "parallel": [],
        "steps": 1,
        "seed": 0,
        "repeats": 1,
        "timeout_s": 60,
    }
    return {"schema_version": 1, "sweep_id": "s", "status": "interrupted", "request": request, "cells": [cell]}


SWEEP_DAMAGES = {
    "truncated": (lambda text: text[:150], "not valid JSON"),
    "a-list": (lambda text: "[]", "holds a list"),
    "request-mistyped": (
        lambda text: json.dumps({**json.loads(text), "request": {**json.loads(text)["request"], "frameworks": 3}}),
        "its request is malformed",
    ),
    "cell-without-status": (lambda text: text.replace('"status": "succeeded", ', ""), "field 'status'"),
}


@pytest.mark.parametrize("damage", SWEEP_DAMAGES)
def test_sweep_resume_refuses_a_damaged_index(tmp_path, damage):
    change, problem = SWEEP_DAMAGES[damage]
    (tmp_path / "sweep.json").write_text(change(json.dumps(_sweep_index())))
    assert_refused(run_cli("sweep", "--resume", str(tmp_path)), "damaged sweep index", problem)


def test_nightly_skips_damaged_history_and_ends_terminal(tmp_path):
    """A real night (one TRL run, stopped by a 1 s timeout) over results holding a damaged old record."""
    results = tmp_path / "results"
    shutil.copytree(GOLDEN, results / "old" / "good")
    shutil.copytree(GOLDEN, results / "old" / "bad")
    _cut(results / "old" / "bad" / "run.json", 200)
    config = tmp_path / "nightly.yaml"
    config.write_text(
        f"results: {results}\nbaseline: {tmp_path / 'baseline'}\nthreshold: 5%\n"
        "matrix:\n  - framework: trl\n    workload: gsm8k-grpo-tiny\n    steps: 2\n"
    )
    pytest.importorskip("trl")
    result = run_cli(
        "nightly", "--config", str(config), env={"RLBENCH_RUN_TIMEOUT_S": "1", "RLBENCH_CACHE": str(tmp_path / "cache")}
    )
    assert_no_traceback(result)
    assert result.returncode == 1, result.stderr  # the timed-out benchmark failed the night
    assert f"warning: skipped {results / 'old' / 'bad'}: damaged run record" in result.stderr
    night = json.loads(next(results.glob("*-night-*/nightly.json")).read_text())
    assert night["status"] == "failed" and night["ended_at"] and (results / "history.html").is_file()


@pytest.mark.parametrize(("folder", "flags"), [("results", ()), ("baseline", ("--update-baseline",))])
def test_nightly_folder_under_a_regular_file_is_refused_before_the_night(tmp_path, folder, flags):
    blocker = tmp_path / "a-file"
    blocker.write_text("x")
    paths = {"results": tmp_path / "runs", "baseline": tmp_path / "baseline", folder: blocker / folder}
    config = tmp_path / "nightly.yaml"
    config.write_text(
        f"results: {paths['results']}\nbaseline: {paths['baseline']}\n"
        "matrix:\n  - framework: trl\n    workload: gsm8k-grpo-tiny\n"
    )
    assert_refused(
        run_cli("nightly", "--config", str(config), *flags), f"nightly {folder} folder", "is a file, not a folder"
    )


# ---------------------------------------------------------------- validate: every check `run` makes

BASE_WORKLOAD = """include: [_gsm8k.yaml, _tiny-model.yaml]
name: {name}
version: 1
algorithm:
  name: grpo
  group_size: 4
max_prompt_length: 192
max_response_length: 32
prompts_per_step: 4
mini_batch_prompts: 4
steps: 3
warmup_steps: 1
"""

BAD_WORKLOADS = {
    "unknown-field": ('prompt:\n  template: "{question} Answer: {answer}"\n', "prompt.template", "{answer}"),
    "literal-braces": ('prompt:\n  template: "{question} f(x) = {x+1}"\n', "prompt.template", "{{ or }}"),
    "lone-brace": ('prompt:\n  template: "{question} }"\n', "prompt.template", "Single '}'"),
    "string-seed": ('data:\n  shuffle_seed: "abc"\n', "data.shuffle_seed", "must be an integer"),
    "bool-warmup": ("warmup_steps_override", "warmup_steps", "must be an integer, got True"),
    "string-chat": ('prompt:\n  chat: "no"\n', "prompt.chat", "must be true or false, got 'no'"),
    "missing-include": ("include_override:_nope.yaml", "include:", "does not exist"),
    "folder-include": ("include_override:_folder.yaml", "include:", "is a folder"),
    "not-utf8": ('description: "caf\xe9"\n', "is not UTF-8 text", "line 13"),
    "duplicate-key": ("steps: 9\n", "key 'steps' appears twice", "keep one"),
}


def _workload(folder: Path, name: str, extra: str = "") -> Path:
    for base in ("_gsm8k.yaml", "_tiny-model.yaml"):
        shutil.copy(WORKLOADS / base, folder / base)
    (folder / "_folder.yaml").mkdir(exist_ok=True)
    text = BASE_WORKLOAD.format(name=name)
    if extra == "warmup_steps_override":
        text = text.replace("warmup_steps: 1", "warmup_steps: true")
    elif extra.startswith("include_override:"):
        text = text.replace("_tiny-model.yaml", extra.split(":", 1)[1])
    else:
        text += extra
    path = folder / f"{name}.yaml"
    path.write_bytes(text.encode("latin-1"))  # latin-1 writes the one non-UTF-8 byte of "not-utf8" as is
    return path


def test_validate_accepts_the_base_workload(tmp_path):
    result = run_cli("validate", str(_workload(tmp_path, "fine")))
    assert result.returncode == 0 and result.stdout.startswith("ok: fine v1") and "problems" in result.stdout


@pytest.mark.parametrize("case", BAD_WORKLOADS)
def test_validate_refuses_what_run_would_trip_on(tmp_path, case):
    extra, *needles = BAD_WORKLOADS[case]
    path = _workload(tmp_path, case, extra)
    assert_refused(run_cli("validate", str(path)), str(path), *needles)


def test_validate_applies_runs_prompt_length_filter(tmp_path):
    """validate said ok for a workload whose prompts run then refused: it now keeps the prompts run would keep."""
    path = _workload(tmp_path, "short")
    path.write_text(path.read_text().replace("max_prompt_length: ", "max_prompt_length: 2 #"))
    assert_refused(run_cli("validate", str(path)), "no prompt fits max_prompt_length=2")


def test_run_refuses_the_same_workload_before_launching(tmp_path):
    path = _workload(tmp_path, "bad-template", BAD_WORKLOADS["unknown-field"][0])
    out = tmp_path / "out"
    assert_refused(run_cli("run", "--framework", "trl", "--workload", str(path), "--out", str(out)), "{answer}")
    assert not out.exists()


# ---------------------------------------------------------------- data files


def _data_dir(tmp_path: Path, train: bytes) -> Path:
    (tmp_path / "data" / "gsm8k").mkdir(parents=True)
    (tmp_path / "data" / "gsm8k" / "train.jsonl").write_bytes(train)
    return tmp_path / "data"


def test_non_utf8_bytes_in_a_data_file_are_named_by_line(tmp_path):
    good = json.dumps({"question": "1+1?", "answer": "2 #### 2"}).encode()
    data = _data_dir(tmp_path, good + b"\n" + good.replace(b"1+1", b"caf\xe9") + b"\n")
    result = run_cli("validate", "gsm8k-grpo-tiny", env={"RLBENCH_DATA_DIR": str(data), "HF_HUB_OFFLINE": "1"})
    assert_refused(result, "train.jsonl:2: not UTF-8 text", "0xe9")


def test_an_empty_train_file_is_empty_and_no_tiny_model_is_cached(tmp_path):
    data, cache = _data_dir(tmp_path, b""), tmp_path / "cache"
    env = {"RLBENCH_DATA_DIR": str(data), "HF_HUB_OFFLINE": "1", "RLBENCH_CACHE": str(cache)}
    assert_refused(run_cli("validate", "gsm8k-grpo-tiny", env=env), "is empty")
    out = tmp_path / "out"
    assert_refused(
        run_cli("run", "--framework", "trl", "--workload", "gsm8k-grpo-tiny", "--out", str(out), env=env),
        "train.jsonl is empty",
    )
    assert not (cache / "tiny-models").exists() or not any((cache / "tiny-models").iterdir())


# ---------------------------------------------------------------- environment and command line


@pytest.mark.parametrize(
    "name, value, needle",
    [
        ("RLBENCH_RUN_TIMEOUT_S", "abc", "RLBENCH_RUN_TIMEOUT_S='abc': expected a number of seconds"),
        ("RLBENCH_RUN_TIMEOUT_S", "-5", "RLBENCH_RUN_TIMEOUT_S='-5'"),
        ("RLBENCH_SAMPLE_HZ", "abc", "RLBENCH_SAMPLE_HZ='abc'"),
        ("RLBENCH_GPU_HOUR_USD", "two dollars", "RLBENCH_GPU_HOUR_USD='two dollars'"),
        ("RLBENCH_KWH_USD", "-1", "RLBENCH_KWH_USD='-1'"),
        ("RLBENCH_CACHE", "{file}", "is a file, not a folder"),
        ("RLBENCH_NCCL_LOG", "maybe", "RLBENCH_NCCL_LOG='maybe': expected 1 or 0"),
    ],
)
def test_a_bad_environment_setting_is_one_line(tmp_path, name, value, needle):
    blocker = tmp_path / "a-file"
    blocker.write_text("x")
    out = tmp_path / "out"
    env = {name: value.format(file=blocker)}
    assert_refused(
        run_cli("run", "--framework", "trl", "--workload", "gsm8k-grpo-tiny", "--out", str(out), env=env, timeout=120),
        needle,
    )
    assert not out.exists() or not any(out.iterdir())


def test_a_repeated_parallel_knob_is_refused(tmp_path):
    result = run_cli(
        "run",
        "--framework",
        "trl",
        "--workload",
        "gsm8k-grpo-tiny",
        "--parallel",
        "dp=1",
        "--parallel",
        "dp=2",
        "--dry-run",
    )
    assert_refused(result, "--parallel dp= is given twice", "dp=1 and dp=2")


# ---------------------------------------------------------------- predict on damaged model configs

GOOD_CONFIG = {
    "num_hidden_layers": 24,
    "hidden_size": 896,
    "num_attention_heads": 14,
    "num_key_value_heads": 2,
    "intermediate_size": 4864,
    "vocab_size": 151936,
}
BAD_CONFIGS = {
    "zero-layers": ({"num_hidden_layers": 0}, "num_hidden_layers=0 must be a whole number >= 1"),
    "negative-heads": ({"num_attention_heads": -14}, "num_attention_heads=-14"),
    "string-heads": ({"num_attention_heads": "many"}, 'num_attention_heads="many"'),
    "fractional-layers": ({"num_hidden_layers": 2.7}, "num_hidden_layers=2.7 must be a whole number"),
    "kv-heads-do-not-divide": ({"num_key_value_heads": 3}, "num_key_value_heads=3 must divide num_attention_heads=14"),
    "string-head-dim": ({"head_dim": "64"}, 'head_dim="64"'),
    "moe-top-k-zero": ({"num_experts": 8, "num_experts_per_tok": 0}, "num_experts_per_tok=0 must be in 1..num_experts"),
}
PREDICT = ("--workload", "gsm8k-grpo", "--hardware", "H100-SXM", "--gpus", "8")


@pytest.mark.parametrize("case", BAD_CONFIGS)
def test_predict_refuses_a_damaged_model_config(tmp_path, case):
    change, needle = BAD_CONFIGS[case]
    config = tmp_path / "config.json"
    config.write_text(json.dumps(GOOD_CONFIG | change))
    assert_refused(run_cli("predict", "--model-config", str(config), *PREDICT), str(config), needle)


def test_predict_accepts_the_good_config_and_whole_floats(tmp_path):
    config = tmp_path / "config.json"
    config.write_text(json.dumps(GOOD_CONFIG | {"num_hidden_layers": 24.0}))
    result = run_cli("predict", "--model-config", str(config), *PREDICT, "--json")
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["step_time_s"] > 0


def test_predict_on_a_missing_config_file_says_so(tmp_path):
    missing = tmp_path / "x.json"
    line = assert_refused(run_cli("predict", "--model-config", str(missing), *PREDICT), str(missing), "no such file")
    assert "architecture" not in line


# ---------------------------------------------------------------- a sweep stopped by SIGTERM


def test_a_sweep_stopped_by_sigterm_never_says_ctrl_c(tmp_path):
    """`kill` (SIGTERM) to a real sweep while its one TRL run starts: the index and output name SIGTERM."""
    import signal
    import time

    pytest.importorskip("trl")
    env = {**__import__("os").environ, "RLBENCH_CACHE": str(tmp_path / "cache")}
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "rlbench.harness",
            "sweep",
            "--framework",
            "trl",
            "--workload",
            "gsm8k-grpo-tiny",
            "--steps",
            "2",
            "--out",
            str(tmp_path / "out"),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=PROJECT_ROOT,
        env=env,
    )
    deadline = time.monotonic() + 120
    while not list((tmp_path / "out").glob("*-sweep-*/*/run.json")) and time.monotonic() < deadline:
        time.sleep(0.2)  # the run's record folder exists: the cell has started
    process.send_signal(signal.SIGTERM)
    stdout, stderr = process.communicate(timeout=120)
    assert process.returncode != 0 and "Traceback" not in stdout + stderr
    assert "Ctrl-C" not in stdout + stderr
    index = json.loads(next((tmp_path / "out").glob("*-sweep-*/sweep.json")).read_text())
    assert index["status"] == "interrupted" and "SIGTERM" in index["cells"][0]["reason"], index["cells"][0]


# ---------------------------------------------------------------- the nightly config, read like a workload


@pytest.mark.parametrize(
    "text, needle",
    [
        (b"results: x\nbaseline: /tmp/b\nmatrix:\n  - framework: trl\n    workload: caf\xe9\n", "is not UTF-8 text"),
        (b"results: x\nresults: /tmp/y\nbaseline: /tmp/b\nmatrix: []\n", "key 'results' appears twice"),
        (
            b"results: x\nbaseline: /tmp/b\nmatrix:\n  - {framework: trl, workload: w, seed: abc}\n",
            "'seed' 'abc': must be a whole number from 0 to 4294967295",
        ),
        (  # past what numpy takes: bounded as `run --seed` is (it was an OverflowError deep in the run)
            b"results: x\nbaseline: /tmp/b\nmatrix:\n  - {framework: trl, workload: w, seed: 99999999999999999999}\n",
            "'seed' 99999999999999999999: must be a whole number from 0 to 4294967295",
        ),
        (
            b"results: x\nbaseline: /tmp/b\nmatrix:\n  - {framework: trl, workload: w, seed: -1}\n",
            "'seed' -1: must be a whole number from 0 to 4294967295",
        ),
        (
            b"results: x\nbaseline: /tmp/b\nmatrix:\n  - {framework: trl, workload: w, steps: true}\n",
            "'steps' must be a positive integer",
        ),
    ],
)
def test_a_damaged_nightly_config_is_one_line(tmp_path, text, needle):
    config = tmp_path / "nightly.yaml"
    config.write_bytes(text)
    assert_refused(run_cli("nightly", "--config", str(config)), str(config), needle)
    assert not (tmp_path / "x").exists()


def test_sweep_out_on_a_read_only_filesystem(read_only_dir):
    result = _in_read_only_mount(
        read_only_dir,
        "sweep",
        "--framework",
        "trl",
        "--workload",
        "gsm8k-grpo-tiny",
        "--out",
        str(read_only_dir / "sweeps"),
    )
    assert_refused(result, "--out", "Read-only file system")


def test_nightly_results_on_a_read_only_filesystem(tmp_path, read_only_dir):
    config = tmp_path / "nightly.yaml"
    config.write_text(
        f"results: {read_only_dir / 'runs'}\nbaseline: {tmp_path / 'baseline'}\n"
        "matrix:\n  - framework: trl\n    workload: gsm8k-grpo-tiny\n"
    )
    result = _in_read_only_mount(read_only_dir, "nightly", "--config", str(config))
    assert_refused(result, "nightly results folder", "Read-only file system")

    assert not list((tmp_path / "runs").glob("*-night-*"))  # no night was started


@pytest.mark.parametrize(
    "args, needle",
    [
        (
            ("run", "--framework", "trl", "--workload", "gsm8k-grpo-tiny", "--steps", "abc"),
            "Invalid value for '--steps'",
        ),
        (("run", "--workload", "gsm8k-grpo-tiny"), "Missing option '--framework'"),
        (("reprot", "results"), "No such command 'reprot'"),
        (("compare",), "Missing argument 'BASELINE'"),  # one path alone is a sweep to compare within
    ],
)
def test_click_usage_errors_are_one_error_line(args, needle):
    assert_refused(run_cli(*args), needle, "-h`")


# ---------------------------------------------------------------- read-only cache, deeply nested input


def test_predict_on_the_cpu_row_works_with_a_read_only_cache(read_only_dir, monkeypatch):
    """HOME (and so the cache) on a read-only mount: the CPU probe measures and answers, it just is not cached."""
    monkeypatch.setenv("RLBENCH_CACHE", str(read_only_dir / "cache"))
    args = ("predict", "--workload", "gsm8k-grpo-tiny", "--model-config", "Qwen2.5-0.5B-Instruct", "--hardware", "cpu")
    result = _in_read_only_mount(read_only_dir, *args)
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr and "generation_decode" in result.stdout


def test_a_run_whose_cache_is_read_only_is_one_line(read_only_dir, monkeypatch):
    monkeypatch.setenv("RLBENCH_CACHE", str(read_only_dir / "cache"))
    result = _in_read_only_mount(
        read_only_dir, "run", "--framework", "trl", "--workload", "gsm8k-grpo-tiny", "--dry-run"
    )
    assert_refused(result, "Read-only file system", "writable folder")


def test_a_deeply_nested_model_config_is_one_line(tmp_path):
    config = tmp_path / "config.json"
    config.write_text("[" * 100_000 + "]" * 100_000)
    assert_refused(run_cli("predict", "--model-config", str(config), *PREDICT), str(config))


def test_a_sweep_whose_last_repeat_seed_is_past_the_bound_is_refused_before_it_starts(tmp_path):
    """--vary-seed gives repeat r the seed + r - 1: the last one is checked as `run --seed` is, before any cell."""
    result = run_cli(
        "sweep", "--framework", "trl", "--workload", "gsm8k-grpo-tiny", "--seed", "4294967295", "--repeats", "2",
        "--vary-seed", "--out", str(tmp_path / "out"),
    )  # fmt: skip
    assert_refused(result, "the last repeat's seed 4294967296: must be a whole number from 0 to 4294967295")
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").iterdir())
