"""Bad input at the command line: one clear line, exit code 2, no traceback, nothing written."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from rlbench.harness.cli import main
from tests.conftest import run_cli


def _assert_clean_error(result, message: str, out) -> None:
    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and message in lines[0], result.stderr
    assert "Traceback" not in result.stderr + result.stdout
    assert not out.exists() or not any(out.iterdir())  # nothing recorded, nothing half-written


def test_unknown_framework(tmp_path):
    out = tmp_path / "out"
    result = run_cli("run", "--framework", "verll", "--workload", "gsm8k-grpo-tiny", "--out", str(out))
    _assert_clean_error(result, "unknown framework 'verll'", out)


def test_unknown_workload(tmp_path):
    out = tmp_path / "out"
    result = run_cli("run", "--framework", "trl", "--workload", "gsm8k-tiny", "--out", str(out))
    _assert_clean_error(result, "unknown workload 'gsm8k-tiny'; did you mean", out)


def test_malformed_yaml(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: bad\nsteps: [1, 2\n")
    out = tmp_path / "out"
    result = run_cli("run", "--framework", "trl", "--workload", str(bad), "--out", str(out))
    _assert_clean_error(result, "is not valid YAML at line", out)
    _assert_clean_error(run_cli("validate", str(bad)), "is not valid YAML", out)


def test_unsupported_parallel_knob(tmp_path):
    out = tmp_path / "out"
    result = run_cli(
        "run", "--framework", "trl", "--workload", "gsm8k-grpo-tiny", "--parallel", "pp=2", "--out", str(out)
    )
    _assert_clean_error(result, "--parallel pp=2: TRL 1.16 trains through accelerate", out)
    result = run_cli(
        "run", "--framework", "trl", "--workload", "gsm8k-grpo-tiny", "--parallel", "zp=2", "--out", str(out)
    )
    _assert_clean_error(result, "unknown knob 'zp'", out)


def test_missing_data(tmp_path):
    pytest.importorskip("trl")
    out = tmp_path / "out"
    empty = tmp_path / "no-data"
    empty.mkdir()
    result = run_cli(
        "run",
        "--framework",
        "trl",
        "--workload",
        "gsm8k-grpo-tiny",
        "--out",
        str(out),
        env={"RLBENCH_DATA_DIR": str(empty), "HF_HUB_OFFLINE": "1"},
    )
    _assert_clean_error(result, "RLBENCH_DATA_DIR", out)


def test_framework_not_installed(tmp_path, monkeypatch):
    from rlbench.adapters.trl.adapter import TRLAdapter

    monkeypatch.setattr(TRLAdapter, "version", lambda self: None)
    out = tmp_path / "out"
    result = CliRunner().invoke(main, ["run", "--framework", "trl", "--workload", "gsm8k-grpo-tiny", "--out", str(out)])
    assert result.exit_code == 2 and result.exception is not None and isinstance(result.exception, SystemExit)
    assert "framework 'trl' is not installed; install it with pip install 'rlbench[trl]'" in result.output
    assert not out.exists()


def test_dry_run_prints_the_command_and_runs_nothing(tmp_path, model_cache):
    pytest.importorskip("trl")
    out = tmp_path / "out"
    result = run_cli("run", "--framework", "trl", "--workload", "gsm8k-grpo-tiny", "--dry-run", "--out", str(out))
    assert result.returncode == 0, result.stderr
    assert "-m rlbench.adapters.trl.launcher" in result.stdout and '"max_completion_length": 32' in result.stdout
    assert not out.exists()


def test_validate_and_ls():
    result = run_cli("validate", "math-grpo")
    assert result.returncode == 0 and result.stdout.startswith("ok: math-grpo v1")
    listing = run_cli("ls")
    assert listing.returncode == 0 and "trl" in listing.stdout and "gsm8k-grpo-tiny" in listing.stdout


def test_framework_unusable_here_is_refused_before_any_record(tmp_path, monkeypatch):
    from rlbench.adapters.trl.adapter import TRLAdapter

    monkeypatch.setattr(TRLAdapter, "usable_here", lambda self: (False, "no NVIDIA GPU"))
    out = tmp_path / "out"
    result = CliRunner().invoke(main, ["run", "--framework", "trl", "--workload", "gsm8k-grpo-tiny", "--out", str(out)])
    assert result.exit_code == 2 and "framework 'trl' cannot run on this machine: no NVIDIA GPU" in result.output
    assert not out.exists()


def test_ctrl_c_names_the_command_it_stopped(capsys):
    """Ctrl-C during `report` said "interrupted before the framework started; nothing was recorded"."""
    from rlbench.harness.cli.user_errors import user_errors

    @user_errors
    def report():
        raise KeyboardInterrupt

    @user_errors
    def run():
        raise KeyboardInterrupt

    for command, line in (
        (report, "error: interrupted by Ctrl-C; rlbench report stopped before it finished"),
        (run, "error: interrupted before the framework started; nothing was recorded"),
    ):
        with pytest.raises(SystemExit) as stopped:
            command()
        assert stopped.value.code == 130 and capsys.readouterr().err.strip() == line
