"""The built wheel is the whole product: every package folder and data file of the four source folders is in it,
and the suite imports rlbench from it, not from the checkout.

`nox -s tests` builds the wheel, installs it non-editable and names it in RLBENCH_WHEEL; without that variable
(a developer's editable environment) the test builds one itself.
"""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

import rlbench.harness
from tests.conftest import PROJECT_ROOT

# source folder -> its path inside the wheel: the folder's own path under the `rlbench` namespace, so that an
# import path is the file's folder path (`harness/run/runner.py` is `rlbench.harness.run.runner`)
FOLDERS = {folder: f"rlbench/{folder}" for folder in ("harness", "adapters", "workloads", "reports")}
# Developer notes beside the code; everything else under the source folders is product.
NOT_SHIPPED = {"README.md"}


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    built = os.environ.get("RLBENCH_WHEEL")
    if built:
        return Path(built)
    out = tmp_path_factory.mktemp("wheel")
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--quiet", "-w", str(out), str(PROJECT_ROOT)],
        check=True,
        capture_output=True,
        timeout=600,
    )
    (found,) = out.glob("rlbench-*.whl")
    return found


def _source_files() -> list[str]:
    listed = subprocess.run(
        ["git", "-C", str(PROJECT_ROOT), "ls-files", "--", *FOLDERS],
        capture_output=True,
        text=True,
        check=False,
    )
    if listed.returncode == 0 and listed.stdout.strip():
        return listed.stdout.split()
    # Not a git checkout: every file but caches.
    return [
        str(path.relative_to(PROJECT_ROOT))
        for folder in FOLDERS
        for path in (PROJECT_ROOT / folder).rglob("*")
        if path.is_file() and "__pycache__" not in path.parts
    ]


def _in_wheel(source: str) -> str:
    folder, _, rest = source.partition("/")
    return f"{FOLDERS[folder]}/{rest}"


def test_every_package_and_data_file_is_in_the_wheel(wheel: Path) -> None:
    names = set(zipfile.ZipFile(wheel).namelist())
    expected = {_in_wheel(f) for f in _source_files() if Path(f).name not in NOT_SHIPPED}
    assert expected, "no source files found"
    assert sorted(expected - names) == []
    # The kinds a hand-kept list once dropped: a subpackage, the data the embedded default reads offline.
    assert "rlbench/workloads/answers/__init__.py" in names
    assert {"rlbench/workloads/data/gsm8k/train.jsonl.gz", "rlbench/workloads/data/gsm8k/LICENSE"} <= names
    assert "rlbench/harness/build_commit.txt" in names
    assert "rlbench/__init__.py" not in names  # a namespace: no module outside the four folders


def test_every_package_folder_is_discovered(wheel: Path) -> None:
    # A folder with an __init__.py is a package; setup.py must discover each one without being told.
    names = set(zipfile.ZipFile(wheel).namelist())
    packages = [
        _in_wheel(str(init.relative_to(PROJECT_ROOT)))
        for folder in FOLDERS
        for init in (PROJECT_ROOT / folder).rglob("__init__.py")
        if "__pycache__" not in init.parts
    ]
    assert len(packages) >= 15
    assert sorted(set(packages) - names) == []


def test_the_suite_runs_against_the_installed_wheel() -> None:
    if not os.environ.get("RLBENCH_WHEEL"):
        pytest.skip("RLBENCH_WHEEL is not set: an editable environment, not `nox -s tests`")
    installed = Path(rlbench.harness.__file__).resolve()  # an editable install would resolve to the checkout's
    assert installed.parent.parent.name == "rlbench" and "site-packages" in installed.parts, installed


def test_records_name_the_wheels_commit_or_the_checkouts(tmp_path, monkeypatch) -> None:
    from rlbench.harness.spec import environment

    built = tmp_path / "rlbench" / "harness" / "build_commit.txt"  # an installed wheel's, under a folder "rlbench"
    built.parent.mkdir(parents=True)
    built.write_text("0123abc\n")
    monkeypatch.setattr(environment, "BUILD_COMMIT", built)
    assert environment.git_sha() == "0123abc"
    # No commit file: a source checkout, whatever its folder is called (a clone is often named "rlbench").
    monkeypatch.setattr(environment, "BUILD_COMMIT", tmp_path / "absent.txt")
    monkeypatch.setattr(environment, "PROJECT_ROOT", PROJECT_ROOT)
    head = subprocess.run(["git", "-C", str(PROJECT_ROOT), "rev-parse", "HEAD"], capture_output=True, text=True)
    if head.returncode != 0:
        pytest.skip("the tests do not run from a git checkout")
    assert (environment.git_sha() or "").removesuffix("-dirty") == head.stdout.strip()
