"""How a newcomer follows one run through the code: the path of the `RunSpec` from `runner.execute` on.

Runs `rlbench run` (in this process, for real: the framework runs as its own process as always) under
`sys.setprofile` and follows every rlbench function that receives the run's `RunSpec` or one of its parts (the
workload, the knobs, the profile request: an argument that *is* one of them), in order, each function at its
first call only (a reader reads it once; a loop over prompts is not a path): control enters a module by a
call, and comes back to the caller's module by a return. Consecutive steps within one module
collapse into one visit. It prints:

- modules visited: distinct modules on the path;
- re-entries: visits to a module already left (by a call, or by a return to it), in all and for the modules
  re-entered most;
- moves up a layer: steps of the path from a module to one in a higher layer of pyproject's layers contract
  (a call back up, which a reader must follow against the layering).

    python benchmarks/run_call_path.py --framework trl --workload gsm8k-grpo-tiny --steps 2

The same script on two commits (installed in turn) gives the before/after figures of a refactor.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from collections import Counter
from pathlib import Path

import tomllib

from rlbench.harness.run import runner
from rlbench.harness.spec.runspec import RunSpec, build_run_spec

PYPROJECT = Path(__file__).resolve().parents[1] / "pyproject.toml"


def _layers() -> list[list[str]]:
    contracts = tomllib.loads(PYPROJECT.read_text())["tool"]["importlinter"]["contracts"]
    layers = next(c["layers"] for c in contracts if c["type"] == "layers")
    return [[name.strip() for name in layer.split("|")] for layer in layers]


def _layer_of(module: str, layers: list[list[str]]) -> int | None:
    """Index of the module's layer (0 is the top), or None outside the contract."""
    for index, names in enumerate(layers):
        if any(module == name or module.startswith(name + ".") for name in names):
            return index
    return None


def trace(spec: RunSpec) -> tuple[list[str], int]:
    """Modules the path of `spec` passes through, in order, consecutive repeats collapsed; and how many of those
    steps were returns to a module already left."""
    parts = {id(spec), id(spec.workload), id(spec.parallel)} | ({id(spec.profile)} if spec.profile else set())
    path: list[str] = []
    stack: list[tuple[object, str]] = []  # the followed frames, innermost last
    read: set[object] = set()  # functions already on the path: a reader reads each once (loops are not a path)
    returns = [0]

    def visit(module: str, by_return: bool) -> None:
        if path and path[-1] == module:
            return
        if by_return and module in path:
            returns[0] += 1
        path.append(module)

    def profile(frame, event, arg) -> None:
        if event == "return" and stack and stack[-1][0] is frame:
            stack.pop()
            if stack:
                visit(stack[-1][1], by_return=True)
            return
        if event != "call":
            return
        module = frame.f_globals.get("__name__", "")
        if not module.startswith("rlbench."):
            return
        code = frame.f_code
        arguments = code.co_varnames[: code.co_argcount + code.co_kwonlyargcount]
        if code not in read and any(id(frame.f_locals.get(name)) in parts for name in arguments):
            read.add(code)
            stack.append((frame, module))
            visit(module, by_return=False)

    sys.setprofile(profile)
    try:
        runner.execute(spec, echo=lambda line: None)
    finally:
        sys.setprofile(None)
    return path, returns[0]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--framework", default="trl")
    parser.add_argument("--workload", default="gsm8k-grpo-tiny")
    parser.add_argument("--steps", type=int, default=2)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as out:
        spec = build_run_spec(args.framework, args.workload, [], steps=args.steps, seed=0, out=Path(out))
        path, returns = trace(spec)
    layers = _layers()
    visits = Counter(path)
    reentries = {module: n - 1 for module, n in visits.items() if n > 1}
    up = sum(
        1
        for before, after in zip(path, path[1:])
        if None not in (_layer_of(before, layers), _layer_of(after, layers))
        and _layer_of(after, layers) < _layer_of(before, layers)
    )
    print(f"path: {len(path)} visits, {len(visits)} modules visited")
    print(f"re-entries: {sum(reentries.values())} in all ({returns} by a return); moves up a layer: {up}")
    for module, n in sorted(reentries.items(), key=lambda item: -item[1])[:8]:
        print(f"  {module}: re-entered {n} times")


if __name__ == "__main__":
    main()
