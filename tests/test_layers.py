"""The import contracts (pyproject's [tool.importlinter], README "Layout") hold, and they would catch an inversion
of the layers or an import circle inside the adapters.

`nox -s lint` checks the contracts on the built wheel; here they run on the installed package and on a
copy of it (renamed `rlbench_copy`, so that no other `rlbench` on the path can answer for it): the copy
keeps them, and fails one once a low-layer module imports the CLI, or the lane machinery the registry.
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
    """pyproject's import-linter contracts, for the package named `root`, as a TOML file's text."""
    config = tomllib.loads((PROJECT_ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]

    def value(v):
        if isinstance(v, list):
            return "[" + ", ".join(value(x) for x in v) + "]"
        return f'"{v.replace("rlbench.", f"{root}.")}"' if isinstance(v, str) else str(v)

    text = f'[tool.importlinter]\nroot_packages = ["{root}"]\n'
    for contract in config["contracts"]:
        text += "\n[[tool.importlinter.contracts]]\n" + "".join(f"{k} = {value(v)}\n" for k, v in contract.items())
    return text


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
    assert done.returncode == 0 and "2 kept, 0 broken" in done.stdout, done.stdout[-3000:] + done.stderr[-2000:]


def _copy(tmp_path: Path) -> tuple[Path, Path, Path]:
    """The installed package copied as `rlbench_copy` under tmp_path/site, with its contracts: (site, copy, config);
    the copy keeps them."""
    site = tmp_path / "site"
    copy = site / "rlbench_copy"
    shutil.copytree(Path(rlbench.harness.__file__).parents[1], copy, ignore=shutil.ignore_patterns("__pycache__"))
    for module in copy.rglob("*.py"):
        module.write_text(re.sub(r"\brlbench\.", "rlbench_copy.", module.read_text()))
    config = tmp_path / "pyproject.toml"
    config.write_text(_contract("rlbench_copy"))
    kept = _lint(config, site)
    assert kept.returncode == 0 and "2 kept, 0 broken" in kept.stdout, kept.stdout[-3000:] + kept.stderr[-2000:]
    return site, copy, config


def test_an_inverted_import_breaks_the_layering(tmp_path):
    site, copy, config = _copy(tmp_path)

    low = copy / "harness" / "spec" / "runspec.py"  # the run's vocabulary, far below the CLI
    low.write_text(low.read_text() + "\n\ndef _inverted():\n    import rlbench_copy.harness.cli  # noqa: F401\n")
    broken = _lint(config, site)
    assert broken.returncode != 0 and "1 kept, 1 broken" in broken.stdout
    assert "rlbench_copy.harness.spec is not allowed to import rlbench_copy.harness.cli" in broken.stdout


def test_an_import_circle_inside_the_adapters_breaks_a_contract(tmp_path):
    """The circle the adapters once had: the lane machinery asking the registry, which imports the base, which
    imports the lane machinery. It stays inside one layer, so only the acyclic-siblings contract sees it."""
    site, copy, config = _copy(tmp_path)
    lane = copy / "adapters" / "cpu_lane" / "__init__.py"
    lane.write_text(
        lane.read_text() + "\n\ndef _circle():\n    from rlbench_copy.adapters.registry import lanes  # noqa: F401\n"
    )
    broken = _lint(config, site)
    assert broken.returncode != 0 and "1 kept, 1 broken" in broken.stdout, broken.stdout[-3000:]
    assert "no import circles among siblings BROKEN" in broken.stdout
    assert "in rlbench_copy.adapters." in broken.stdout and ".registry -> .base" in broken.stdout
