"""Every registered framework's folder has the shape adapters/README.md gives it, so a reader finds the same
concern in the same file for each: the README's shape row names exactly the modules a folder may hold."""

from __future__ import annotations

import importlib
import re
from pathlib import Path

from rlbench.adapters.base import LaneAdapter
from rlbench.adapters.registry import ADAPTERS, available, get_adapter, lanes
from tests.conftest import PROJECT_ROOT

EVERY_FOLDER = {"__init__.py", "adapter.py", "config.py", "metrics.py", "machine.py", "launcher.py"}
WHERE_IT_APPLIES = {"reward.py", "cpu_lane.py", "hooks.py", "checkpoint_engine.py"}


def _folder(name: str) -> Path:
    module = importlib.import_module(ADAPTERS[name].partition(":")[0])
    return Path(module.__file__).parent


def test_the_readme_names_the_modules_of_a_framework_folder():
    row = next(
        line for line in (PROJECT_ROOT / "adapters" / "README.md").read_text().splitlines() if "<framework>/" in line
    )
    assert set(re.findall(r"`(\w+\.py)`", row)) == (EVERY_FOLDER | WHERE_IT_APPLIES) - {"__init__.py"}


def test_every_framework_folder_has_the_shape():
    for name in available():
        modules = {path.name for path in _folder(name).glob("*.py")}
        assert EVERY_FOLDER <= modules, f"{name}: missing {sorted(EVERY_FOLDER - modules)}"
        assert modules <= EVERY_FOLDER | WHERE_IT_APPLIES, (
            f"{name}: {sorted(modules - EVERY_FOLDER - WHERE_IT_APPLIES)}"
        )
        # A CPU lane is declared by the adapter (LaneAdapter) and its shims sit beside it, nowhere else.
        assert ("cpu_lane.py" in modules) == isinstance(get_adapter(name), LaneAdapter), name
        assert ADAPTERS[name].startswith(f"rlbench.adapters.{name}.adapter:"), ADAPTERS[name]


def test_a_lane_module_declares_its_shims():
    from rlbench.adapters import cpu_lane

    for name in lanes():
        shims = cpu_lane.lane_module(name)
        assert shims.SHIMS and callable(shims.install), name
