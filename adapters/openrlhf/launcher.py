"""OpenRLHF's pre-launch step, run inside the launched process: check the machine, write the run's prompts as
OpenRLHF's JSONL, record the arguments OpenRLHF's own parser resolves, then exec OpenRLHF's trainer.

    python -m rlbench.adapters.openrlhf.launcher PROMPTS JSONL -- COMMAND...
"""

from __future__ import annotations

import ast
import contextlib
import importlib.util
import io
import json
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from rlbench.adapters.openrlhf import machine
from rlbench.adapters.openrlhf.config import EVAL_JSONL_FILE, RESOLVED_FILE, TRAIN_MODULE
from rlbench.adapters.openrlhf.reward import label
from rlbench.adapters.prelaunch import run_prelaunch
from rlbench.harness.atomic import write_bytes
from rlbench.harness.errors import RLBenchError
from rlbench.harness.spec.environment import package_version
from rlbench.workloads.prompts import EVAL_PROMPTS_FILE, read_prompts


def openrlhf_row(record) -> dict[str, str]:
    """One rlbench prompt as a row of OpenRLHF's prompt JSONL (`--data.input_key input --data.label_key label`)."""
    return {
        "input": record.prompt,
        "label": label(record.dataset, record.ground_truth),
        "datasource": record.dataset,
        "uid": record.uid,
    }


def write_jsonl(prompts: Path, jsonl: Path) -> int:
    """Convert the run's prompts.jsonl into OpenRLHF's JSONL, atomically; returns the row count."""
    rows = [openrlhf_row(r) for r in read_prompts(prompts)]
    write_bytes(jsonl, "".join(json.dumps(row) + "\n" for row in rows).encode())
    return len(rows)


def write_inputs(prompts: Path, jsonl: Path) -> int:
    """The training JSONL, and where the run has held-out problems (eval_prompts.jsonl beside prompts.jsonl)
    OpenRLHF's eval JSONL beside it (--eval.dataset); returns the training row count."""
    held_out = prompts.with_name(EVAL_PROMPTS_FILE)
    if held_out.is_file():
        write_jsonl(held_out, jsonl.with_name(EVAL_JSONL_FILE))
    return write_jsonl(prompts, jsonl)


def _openrlhf_root() -> Path:
    found = importlib.util.find_spec("openrlhf")  # finds the package without importing it (its __init__ is heavy)
    if found is None or not found.submodule_search_locations:
        raise RLBenchError("openrlhf is not installed")
    return Path(list(found.submodule_search_locations)[0])


def _plain(value: Any) -> Any:
    """OpenRLHF's args (nested SimpleNamespaces after its `hierarchize`) as JSON values, nesting kept."""
    if isinstance(value, SimpleNamespace):
        return {key: _plain(item) for key, item in vars(value).items()}
    if isinstance(value, list | tuple):
        return [_plain(item) for item in value]
    if value is None or isinstance(value, bool | int | float | str):
        return value
    return repr(value)


def _stdlib_import(node: ast.stmt) -> bool:
    if isinstance(node, ast.Import):
        return all(alias.name.split(".")[0] in sys.stdlib_module_names for alias in node.names)
    return isinstance(node, ast.ImportFrom) and not node.level and node.module.split(".")[0] in sys.stdlib_module_names


def resolve_arguments(flags: list[str]) -> dict[str, Any]:
    """The arguments OpenRLHF's `train_ppo_ray` resolves from these flags, nested as it holds them
    (`--vllm.gpu_memory_utilization` -> args.vllm.gpu_memory_utilization -> {"vllm": {"gpu_memory_utilization": ..}}).

    OpenRLHF 0.11.2 builds its parser inside `if __name__ == "__main__":`, so nothing can import it: this runs
    the installed file's own `__main__` block (its argparse parser, `hierarchize` and its post-parse fixes, e.g.
    dynamic batching turning packing on) up to, not including, `train(args)`, with only its standard-library
    imports: nothing starts. Raises whatever that code raises (SystemExit for a flag OpenRLHF rejects)."""
    root = _openrlhf_root()
    path = root / "cli" / "train_ppo_ray.py"
    tree = ast.parse(path.read_text(), str(path))
    block = next(
        node for node in tree.body if isinstance(node, ast.If) and ast.unparse(node.test) == "__name__ == '__main__'"
    )
    calls = [
        i for i, node in enumerate(block.body) if isinstance(node, ast.Expr) and ast.unparse(node) == "train(args)"
    ]
    if not calls:
        raise RLBenchError(f"{path}: no train(args) call in its __main__ block")
    stdlib = [node for node in tree.body if _stdlib_import(node)]
    code = compile(ast.Module(body=[*stdlib, *block.body[: calls[0]]], type_ignores=[]), str(path), "exec")
    # `from openrlhf.utils.config import hierarchize` (stdlib only) without openrlhf.utils' DeepSpeed imports.
    name = "openrlhf.utils.config"
    config_spec = importlib.util.spec_from_file_location(name, root / "utils" / "config.py")
    config = importlib.util.module_from_spec(config_spec)
    config_spec.loader.exec_module(config)
    added = name not in sys.modules
    sys.modules.setdefault(name, config)
    argv, namespace = sys.argv, {"__name__": "__main__", "__file__": str(path)}
    sys.argv = [str(path), *flags]
    try:
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            exec(code, namespace)  # OpenRLHF prints its warnings again when it starts
    finally:
        sys.argv = argv
        if added:
            sys.modules.pop(name, None)
    return _plain(namespace["args"])


def write_resolved(data: Path, command: list[str]) -> None:
    """Pre-launch: OpenRLHF's resolved arguments for COMMAND to RESOLVED_FILE in the run folder (DATA's folder),
    atomically. Never raises: where they cannot be resolved, OpenRLHF reports its own error when it starts."""
    if command[1:3] != ["-m", TRAIN_MODULE]:
        return
    try:
        args = resolve_arguments(command[3:])
        document = {
            "openrlhf": package_version("openrlhf"),
            "resolved_by": f"{TRAIN_MODULE}'s own parser and post-parse checks (rlbench pre-launch)",
            "flags": command[3:],
            "args": args,
        }
        write_bytes(data.parent / RESOLVED_FILE, (json.dumps(document, indent=1) + "\n").encode())
    except (Exception, SystemExit) as error:  # SystemExit: argparse rejected a flag
        print(f"rlbench: OpenRLHF's arguments not recorded ({type(error).__name__}: {error})", flush=True)


def main(argv: list[str] | None = None) -> int:
    """Pre-launch step: PROMPTS JSONL -- COMMAND. Checks the machine, converts, records OpenRLHF's resolved
    arguments, then execs COMMAND."""
    return run_prelaunch(
        sys.argv[1:] if argv is None else argv,
        module="rlbench.adapters.openrlhf.launcher",
        data_name="JSONL",
        framework="OpenRLHF",
        machine_ready=machine.machine_ready,
        convert=write_inputs,
        note=" (it shuffles prompt order)",
        before_exec=write_resolved,
    )


if __name__ == "__main__":
    sys.exit(main())
