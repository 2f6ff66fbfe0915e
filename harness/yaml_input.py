"""Read a YAML file a user wrote (workloads, the nightly matrix): UTF-8 text, each key once, one-line errors.

PyYAML keeps the last of two equal keys silently and raises UnicodeDecodeError on
bytes that are not UTF-8; both are refused here as one `RLBenchError` naming the
file, the line and the fix, so every command reads its YAML the same way.

    from rlbench.harness.yaml_input import read_yaml
    read_yaml(Path("workloads/_gsm8k.yaml"), "workload file")  # {'data': {...}, 'prompt': {...}, ...}
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from rlbench.harness.errors import RLBenchError


class _UniqueKeyLoader(yaml.SafeLoader):
    """safe_load that refuses a key given twice in one mapping."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: dict[Any, int] = {}
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=deep)
            if key in seen:
                raise yaml.constructor.ConstructorError(
                    None,
                    None,
                    f"key {key!r} appears twice (lines {seen[key]} and {key_node.start_mark.line + 1}); keep one",
                    key_node.start_mark,
                )
            seen[key] = key_node.start_mark.line + 1
        return super().construct_mapping(node, deep=deep)


def read_text(path: Path, what: str) -> str:
    """The file's text; a folder, an unreadable file or non-UTF-8 bytes are one RLBenchError."""
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise RLBenchError(f"{what} {path} cannot be read ({exc.strerror}); pass a YAML file") from None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise RLBenchError(
            f"{what} {path} is not UTF-8 text (byte 0x{data[exc.start]:02x} at line {line}); save it as UTF-8"
        ) from None


def read_yaml(path: Path, what: str) -> Any:
    """The parsed document of `path`; `what` ("workload file", "nightly config") starts every error."""
    try:
        return yaml.load(read_text(path, what), Loader=_UniqueKeyLoader)  # noqa: S506 - a SafeLoader subclass
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(exc, "problem", None) or "invalid syntax"
        raise RLBenchError(f"{what} {path} is not valid YAML{where}: {problem}; fix the file") from None
    except RecursionError:  # thousands of nested brackets: the parser's recursion gives out before any YAML error
        raise RLBenchError(f"{what} {path} is nested too deeply to read; fix the file") from None
