"""Download the wheels rlbench needs on the GPU machine beyond its image, for the offline GPU check.

The GPU machine (benchmarks/gpu_check.sh) has no network; its image already holds torch,
transformers, accelerate and most of the scientific stack (benchmarks/gpu_wheels.image.txt).
This script walks the requirements of rlbench itself and of its `trl` and `gpu` extras
(pyproject.toml), skips every package the image has, and downloads a wheel of each one it
lacks for CPython 3.12 on manylinux x86-64, following their requirements the same way. A
package published only as an sdist (antlr4-python3-runtime 4.9.3, the runtime math-verify's
`antlr4_9_3` extra pins) is built into a pure-Python wheel here. Each carried package takes the
version installed in the Python running this script when it fits (the versions the tests here
pass with), else the newest that fits. Requirements on image packages are checked against the
image versions where they are known and listed where they are not.

    .nox/tests/bin/python benchmarks/gpu_wheels.py --dest .gpu-wheels
    # then, on the GPU machine: bash benchmarks/gpu_check.sh .gpu-wheels

The check's workloads read the GSM8K copy rlbench ships in its package, so no data travels
beside the wheels. It writes `manifest.json` into DEST (each
wheel, its version, size and who required it) and the carried set into benchmarks/gpu_wheels.txt
(committed, so a test sees when rlbench needs a package neither the image nor the set holds), and
exits 1 when a requirement on an image package is known to fail or the folder passes --max-mib.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import json
import shutil
import subprocess
import sys
import tempfile
import zipfile
from collections.abc import Iterable
from dataclasses import dataclass, field
from email.parser import Parser
from pathlib import Path

import tomllib
from packaging.markers import Marker
from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parents[1]
IMAGE_LIST = Path(__file__).with_name("gpu_wheels.image.txt")
LOCK = Path(__file__).with_name("gpu_wheels.txt")  # the carried set, name==version, rewritten by each run
EXTRAS = ("trl", "gpu")  # the pyproject extras the GPU check runs with
PYTHON = "3.12"
# pip matches a manylinux tag exactly, so name each glibc level a wheel may be built for
# (the image is Ubuntu 24.04-based: glibc 2.39).
PLATFORMS = [
    "manylinux_2_39_x86_64",
    "manylinux_2_35_x86_64",
    "manylinux_2_34_x86_64",
    "manylinux_2_31_x86_64",
    "manylinux_2_28_x86_64",
    "manylinux_2_27_x86_64",
    "manylinux_2_24_x86_64",
    "manylinux_2_17_x86_64",
    "manylinux2014_x86_64",
    "manylinux_2_5_x86_64",
    "manylinux1_x86_64",
]
MARKER_ENV = {
    "python_version": PYTHON,
    "python_full_version": "3.12.3",
    "sys_platform": "linux",
    "platform_system": "Linux",
    "platform_machine": "x86_64",
    "os_name": "posix",
    "implementation_name": "cpython",
    "platform_python_implementation": "CPython",
}
TRANSFER_LIMIT_MIB = 64  # what one device call carries: the working tree and this folder together


@dataclass
class Plan:
    """The walk's result: carried wheels, and what it found about the image's packages."""

    wheels: dict[str, dict] = field(default_factory=dict)  # name -> {version, file, bytes, required_by}
    image_ok: list[str] = field(default_factory=list)  # "name version satisfies spec (from X)"
    image_unknown: list[str] = field(default_factory=list)  # requirement on an image package of unknown version
    conflicts: list[str] = field(default_factory=list)


def read_image(path: Path = IMAGE_LIST) -> dict[str, str | None]:
    """{canonical name: version or None} from the image list (name or name==version per line)."""
    image: dict[str, str | None] = {}
    for line in path.read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            name, _, version = line.partition("==")
            image[canonicalize_name(name)] = version or None
    return image


def root_requirements(pyproject: Path = ROOT / "pyproject.toml", extras: Iterable[str] = EXTRAS) -> list[Requirement]:
    """rlbench's own dependencies plus those of `extras`."""
    project = tomllib.loads(pyproject.read_text())["project"]
    texts = list(project["dependencies"])
    for extra in extras:
        texts += project["optional-dependencies"][extra]
    return [Requirement(text) for text in texts]


def wheel_requirements(wheel: Path, extras: set[str]) -> list[Requirement]:
    """Requires-Dist of a wheel whose markers hold on the GPU machine for one of `extras` ("" = no extra)."""
    with zipfile.ZipFile(wheel) as archive:
        name = next(n for n in archive.namelist() if n.endswith(".dist-info/METADATA"))
        metadata = Parser().parsestr(archive.read(name).decode())
    found = []
    for text in metadata.get_all("Requires-Dist") or []:
        requirement = Requirement(text)
        marker = requirement.marker
        if marker is None and "" in extras or marker is not None and any(_holds(marker, e) for e in extras):
            requirement.marker = None
            found.append(requirement)
    return found


def _holds(marker: Marker, extra: str) -> bool:
    return marker.evaluate(MARKER_ENV | {"extra": extra})


def _pip(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pip", *args], capture_output=True, text=True)


def fetch_wheel(spec: str, dest: Path) -> Path:
    """One wheel for the GPU machine matching `spec` (name==version or name + specifier), into dest."""
    with tempfile.TemporaryDirectory() as tmp:
        flags = [f"--platform={p}" for p in PLATFORMS]
        abi = "cp" + MARKER_ENV["python_version"].replace(".", "")
        done = _pip(
            "download",
            "--no-deps",
            "--only-binary=:all:",
            f"--python-version={MARKER_ENV['python_version']}",
            "--implementation=cp",
            f"--abi={abi}",
            "--abi=abi3",
            "--abi=none",
            *flags,
            "-d",
            tmp,
            spec,
        )
        if done.returncode != 0:
            # sdist only (antlr4-python3-runtime 4.9.3): build it here, and keep it only if pure Python.
            done = _pip("wheel", "--no-deps", "-w", tmp, spec)
        wheels = list(Path(tmp).glob("*.whl"))
        if done.returncode != 0 or len(wheels) != 1:
            raise SystemExit(
                f"error: no wheel of {spec} for CPython {MARKER_ENV['python_version']} manylinux "
                f"x86_64:\n{done.stderr[-2000:]}"
            )
        wheel = wheels[0]
        tags = wheel.name.removesuffix(".whl").split("-")[-3:]
        if tags[2] != "any" and "x86_64" not in tags[2]:
            raise SystemExit(f"error: {wheel.name} was built for this machine ({tags[2]}), not the GPU machine")
        target = dest / wheel.name
        shutil.move(str(wheel), target)
        return target


def _preferred(name: str, spec: SpecifierSet) -> str:
    """name==V when the installed version V fits spec (a version the tests here ran with), else name+spec."""
    try:
        installed = importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return f"{name}{spec}"
    return f"{name}=={installed}" if spec.contains(installed, prereleases=True) else f"{name}{spec}"


def plan_wheels(dest: Path, image: dict[str, str | None], roots: list[Requirement]) -> Plan:
    plan = Plan()
    pending = [(req, "rlbench") for req in roots]
    extras_done: dict[str, set[str]] = {}
    while pending:
        req, source = pending.pop(0)
        name = canonicalize_name(req.name)
        where = f"{req} (from {source})"
        if name in image:
            version = image[name]
            if version is None:
                if str(req.specifier):
                    plan.image_unknown.append(where)
            elif req.specifier.contains(version, prereleases=True):
                plan.image_ok.append(f"{name} {version} satisfies {where}")
            else:
                plan.conflicts.append(f"the image's {name} {version} fails {where}")
            continue
        chosen = plan.wheels.get(name)
        if chosen is None:
            path = fetch_wheel(_preferred(name, req.specifier), dest)
            version = path.name.split("-")[1]
            chosen = plan.wheels[name] = {
                "version": version,
                "file": path.name,
                "bytes": path.stat().st_size,
                "required_by": [],
            }
        elif not req.specifier.contains(chosen["version"], prereleases=True):
            plan.conflicts.append(f"carried {name} {chosen['version']} fails {where}")
        chosen["required_by"].append(where)
        todo = ({""} | {canonicalize_name(e) for e in req.extras}) - extras_done.setdefault(name, set())
        extras_done[name] |= todo
        for sub in wheel_requirements(dest / chosen["file"], todo) if todo else ():
            pending.append((sub, f"{name} {chosen['version']}"))
    return plan


def read_lock(path: Path = LOCK) -> dict[str, str]:
    """{canonical name: version} of the carried set."""
    pins = (line.split("#", 1)[0].strip() for line in path.read_text().splitlines())
    return {canonicalize_name(pin.split("==")[0]): pin.split("==")[1] for pin in pins if pin}


def uncovered(roots: list[Requirement], covered: set[str], requires) -> list[str]:
    """Requirements reachable from `roots` whose package is in neither the image nor the carried set.

    `requires(name, extras)` gives a covered carried package's requirements (e.g. from installed
    metadata); image packages are not walked (their own needs are the image's)."""
    pending, seen, missing = [(r, "rlbench") for r in roots], set(), []
    image = set(read_image())
    while pending:
        req, source = pending.pop()
        name = canonicalize_name(req.name)
        key = (name, frozenset(canonicalize_name(e) for e in req.extras))
        if name in image or key in seen:
            continue
        seen.add(key)
        if name not in covered:
            missing.append(f"{req} (from {source})")
            continue
        pending += [(sub, name) for sub in requires(name, {""} | set(key[1]))]
    return missing


def folder_bytes(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())


def tree_bytes(root: Path = ROOT) -> int:
    """What travels with the working tree: tracked and untracked-not-ignored files."""
    listed = subprocess.run(
        ["git", "-C", str(root), "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        capture_output=True,
        check=True,
    ).stdout.split(b"\0")
    return sum((root / name.decode()).stat().st_size for name in listed if name and (root / name.decode()).is_file())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dest", type=Path, default=ROOT / ".gpu-wheels", help="wheel folder (emptied first)")
    parser.add_argument(
        "--python-version",
        default=PYTHON,
        help="another CPython (e.g. 3.11) for a CPU rehearsal of the check; the lock is not rewritten",
    )
    parser.add_argument(
        "--max-mib",
        type=float,
        default=TRANSFER_LIMIT_MIB,
        help="fail when this folder plus the working tree exceeds this many MiB",
    )
    args = parser.parse_args(argv)
    MARKER_ENV.update(python_version=args.python_version, python_full_version=f"{args.python_version}.0")
    if args.dest.exists():
        shutil.rmtree(args.dest)
    args.dest.mkdir(parents=True)
    plan = plan_wheels(args.dest, read_image(), root_requirements())
    wheel_bytes, tree = folder_bytes(args.dest), tree_bytes()
    manifest = {
        "python": args.python_version,
        "platforms": PLATFORMS,
        "wheels": plan.wheels,
        "image_checked": plan.image_ok,
        "image_version_unknown": plan.image_unknown,
        "conflicts": plan.conflicts,
        "wheel_bytes": wheel_bytes,
        "tree_bytes": tree,
    }
    (args.dest / "manifest.json").write_text(json.dumps(manifest, indent=2) + "\n")
    if args.python_version == PYTHON:
        LOCK.write_text(
            "# Wheels benchmarks/gpu_wheels.py carries to the GPU machine (written by it; do not edit)\n"
            + "".join(f"{name}=={wheel['version']}\n" for name, wheel in sorted(plan.wheels.items()))
        )
    for _name, wheel in sorted(plan.wheels.items()):
        print(f"{wheel['bytes'] / 2**20:7.2f} MiB  {wheel['file']}")
    for line in plan.image_unknown:
        print(f"unverified (image version unknown): {line}")
    print(
        f"{len(plan.wheels)} wheels, {wheel_bytes / 2**20:.2f} MiB; with the working tree "
        f"({tree / 2**20:.2f} MiB): {(wheel_bytes + tree) / 2**20:.2f} MiB of {args.max_mib:g}"
    )
    for line in plan.conflicts:
        print(f"error: {line}", file=sys.stderr)
    if (wheel_bytes + tree) / 2**20 > args.max_mib:
        print(f"error: wheels and tree exceed {args.max_mib:g} MiB; one device call carries no more", file=sys.stderr)
        return 1
    return 1 if plan.conflicts else 0


if __name__ == "__main__":
    sys.exit(main())
