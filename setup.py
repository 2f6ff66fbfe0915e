"""Wheel layout: package discovery over the four source folders, and the commit the wheel was built from.

The import package `rlbench` is a namespace over four top-level folders, each its subpackage under the
folder's own name (`harness/run/runner.py` is `rlbench.harness.run.runner`, `adapters/verl/` is
`rlbench.adapters.verl`), so an import path is the file's folder path; pyproject.toml's declarative
`packages.find` cannot map folders under a common prefix. Discovering the subpackages here, instead of
listing them by hand, keeps a new folder from silently missing from the wheel (it once dropped
`rlbench.workloads.answers`).
An installed wheel has no git checkout to ask, so the build writes the commit into the package
(`rlbench/harness/build_commit.txt`), which every record then names. Everything else is in pyproject.toml.
"""

import subprocess
from pathlib import Path

from setuptools import find_packages, setup
from setuptools.command.build_py import build_py

# import package -> source folder; a subpackage's folder follows from its parent's.
SOURCE_FOLDERS = {
    "rlbench.harness": "harness",
    "rlbench.adapters": "adapters",
    "rlbench.workloads": "workloads",
    "rlbench.reports": "reports",
}
SOURCE_PACKAGE = "rlbench.harness"  # the package the commit file goes in
BUILD_COMMIT_FILE = "build_commit.txt"  # read by rlbench.harness.spec.environment.git_sha


def _packages() -> list[str]:
    found = []
    for package, folder in SOURCE_FOLDERS.items():
        found.append(package)
        found.extend(f"{package}.{sub}" for sub in find_packages(folder))
    return found


def _commit() -> str:
    """HEAD's sha, "-dirty" when tracked files differ from it; empty outside a git checkout."""
    here = Path(__file__).resolve().parent
    try:
        sha = subprocess.run(["git", "-C", here, "rev-parse", "HEAD"], capture_output=True, text=True, timeout=10)
        if sha.returncode != 0:
            return ""
        dirty = subprocess.run(
            ["git", "-C", here, "status", "--porcelain", "--untracked-files=no"],
            capture_output=True,
            text=True,
            timeout=10,
        )
    except (OSError, subprocess.TimeoutExpired):
        return ""
    return sha.stdout.strip() + ("-dirty" if dirty.stdout.strip() else "")


class BuildWithCommit(build_py):
    def run(self) -> None:
        super().run()
        if not self.dry_run:
            target = Path(self.build_lib, *SOURCE_PACKAGE.split("."), BUILD_COMMIT_FILE)
            target.write_text(_commit() + "\n")


setup(package_dir=SOURCE_FOLDERS, packages=_packages(), cmdclass={"build_py": BuildWithCommit})
