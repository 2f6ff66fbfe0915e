"""The README's knob table is what the adapters declare: each framework column is its adapter's
`knob_support`, its header the adapter's tested version, and every `--parallel` knob has a row.
docs/parallelism.md's strategy table says which frameworks map each knob and which versions its
framework columns describe: both are the adapters' declarations too.

The README table's framework columns are generated: after changing an adapter's declarations, or adding a
framework, rewrite them with `python -m tests.adapters.test_knob_table --write` (the knob and meaning columns
are prose and stay as written)."""

from __future__ import annotations

import re
import sys

from rlbench.adapters.registry import available, get_adapter
from rlbench.harness.spec.parallel import KNOBS
from tests.conftest import PROJECT_ROOT, readme_section


def _lowest(name: str) -> str:
    """The lowest version the adapter is tested with: what a table's column header names."""
    return re.search(r">=\s*([0-9][0-9.]*)", get_adapter(name).tested_versions).group(1)


def _table(text: str) -> tuple[list[str], list[list[str]]]:
    rows = [re.split(r"(?<!\\)\|", line.strip())[1:-1] for line in text.splitlines() if line.startswith("|")]
    header, body = rows[0], rows[2:]
    return [cell.strip() for cell in header], [[cell.strip() for cell in row] for row in body]


def knob_table(current: str) -> str:
    """The README knob table `current` with its framework columns rebuilt from the adapters' declarations: one
    column per registered framework (those already there keep their place and display name, a new one is
    appended under its registry name), headed by the lowest tested version, each cell its `knob_support`."""
    header, rows = _table(current)
    shown = {cell.split()[0].lower(): cell.split()[0] for cell in header[2:]}
    names = [name for name in shown if name in available()] + [name for name in available() if name not in shown]
    lines = [
        "| " + " | ".join([*header[:2], *(f"{shown.get(name, name)} {_lowest(name)}" for name in names)]) + " |",
        "|" + "---|" * (2 + len(names)),
    ]
    for row in rows:
        knob = re.findall(r"`([a-z_]+)=", row[0])[0]  # a row's knobs share their support (pp, pp_virtual)
        lines.append("| " + " | ".join([*row[:2], *(get_adapter(name).knob_support(knob) for name in names)]) + " |")
    return "\n".join(lines) + "\n"


def _readme_table() -> str:
    return readme_section("| knob | meaning |", "\n\n") + "\n"


def test_readme_knob_table_is_generated_from_the_declarations():
    assert _readme_table() == knob_table(_readme_table()), (
        "README knob table is stale: python -m tests.adapters.test_knob_table --write"
    )


def test_readme_knob_table_is_the_adapters_declarations():
    header, rows = _table(readme_section("| knob | meaning |", "\n\n"))
    columns = {cell.split()[0].lower(): i for i, cell in enumerate(header[2:], start=2)}
    assert sorted(columns) == available()
    for name, column in columns.items():
        assert header[column].split()[1] == _lowest(name), f"README column {header[column]!r}: tests {_lowest(name)}"
    seen = []
    for row in rows:
        knobs = re.findall(r"`([a-z_]+)=", row[0])
        seen += knobs
        for name, column in columns.items():
            declared = {get_adapter(name).knob_support(knob) for knob in knobs}
            assert declared == {row[column]}, f"README {row[0]} / {name}: {row[column]!r}, declared {declared}"
    assert sorted(seen) == sorted(KNOBS)


def test_parallelism_doc_names_the_frameworks_that_map_each_knob():
    doc = (PROJECT_ROOT / "docs" / "parallelism.md").read_text()
    start = doc.index("| strategy | knob")
    header, rows = _table(doc[start : doc.index("\n\n", start)])
    for cell in header[3:-1]:  # the framework columns: "verl 0.9.1 FSDP", "OpenRLHF 0.11.2", ...
        name, version = cell.split()[:2]
        assert version == _lowest(name.lower()), f"docs/parallelism.md column {cell!r}: tests {_lowest(name.lower())}"
    checked = set()
    for row in rows:
        knobs, _, frameworks = row[2].partition(":")
        for knob in re.findall(r"`([a-z_]+)=", knobs)[:1]:
            checked.add(knob)
            named = {n for n in available() if "all three" in frameworks or re.search(rf"\b{n}\b", frameworks, re.I)}
            mapping = {n for n in available() if knob in get_adapter(n).supported_knobs}
            assert named == mapping, (
                f"docs/parallelism.md {row[0]!r}: names {sorted(named)}, adapters {sorted(mapping)}"
            )
    assert checked, "no knob rows found in docs/parallelism.md"


if __name__ == "__main__" and sys.argv[1:] == ["--write"]:
    readme = PROJECT_ROOT / "README.md"
    table = _readme_table()
    readme.write_text(readme.read_text().replace(table, knob_table(table), 1))
