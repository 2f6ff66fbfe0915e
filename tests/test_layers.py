"""The layering contract (pyproject's [tool.importlinter], README "Layout") holds, and it would catch an inversion.

`nox -s lint` checks the contract on the built wheel; here it runs on the installed package and on a
copy of it (renamed `rlbench_copy`, so that no other `rlbench` on the path can answer for it): the copy
keeps the contract, and fails it once one low-layer module imports the CLI.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import rlbench.harness
from tests.conftest import PROJECT_ROOT

pytest.importorskip("importlinter")
tomllib = pytest.importorskip("tomllib")  # Python 3.11+
LINT_IMPORTS = Path(sys.executable).with_name("lint-imports")


def _contract(root: str) -> str:
    """pyproject's import-linter contract, for the package named `root`, as a TOML file's text."""
    config = tomllib.loads((PROJECT_ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]
    (contract,) = config["contracts"]
    layers = ",\n".join(f'  "{layer.replace("rlbench.", f"{root}.")}"' for layer in contract["layers"])
    return (
        f'[tool.importlinter]\nroot_packages = ["{root}"]\n\n[[tool.importlinter.contracts]]\n'
        f'name = "{contract["name"]}"\ntype = "{contract["type"]}"\nlayers = [\n{layers},\n]\n'
    )


def _lint(config: Path, path: Path | None = None) -> subprocess.CompletedProcess:
    env = {"PATH": str(Path(sys.executable).parent), **({"PYTHONPATH": str(path)} if path else {})}
    return subprocess.run(
        [str(LINT_IMPORTS), "--config", str(config), "--no-cache"],
        capture_output=True,
        text=True,
        cwd=config.parent,
        env=env,
        timeout=300,
    )


def test_the_installed_package_keeps_the_layering(tmp_path):
    config = tmp_path / "pyproject.toml"
    config.write_text(_contract("rlbench"))
    done = _lint(config)
    assert done.returncode == 0 and "1 kept, 0 broken" in done.stdout, done.stdout[-3000:] + done.stderr[-2000:]


def test_an_inverted_import_breaks_the_layering(tmp_path):
    site = tmp_path / "site"
    copy = site / "rlbench_copy"
    shutil.copytree(Path(rlbench.harness.__file__).parents[1], copy, ignore=shutil.ignore_patterns("__pycache__"))
    for module in copy.rglob("*.py"):
        module.write_text(re.sub(r"\brlbench\.", "rlbench_copy.", module.read_text()))
    config = tmp_path / "pyproject.toml"
    config.write_text(_contract("rlbench_copy"))

    kept = _lint(config, site)
    assert kept.returncode == 0 and "1 kept, 0 broken" in kept.stdout, kept.stdout[-3000:] + kept.stderr[-2000:]

    low = copy / "harness" / "spec" / "runspec.py"  # the run's vocabulary, far below the CLI
    low.write_text(low.read_text() + "\n\ndef _inverted():\n    import rlbench_copy.harness.cli  # noqa: F401\n")
    broken = _lint(config, site)
    assert broken.returncode != 0 and "0 kept, 1 broken" in broken.stdout
    assert "rlbench_copy.harness.spec is not allowed to import rlbench_copy.harness.cli" in broken.stdout
