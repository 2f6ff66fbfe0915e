"""GPU rows measured on real machines: the datasheet row with what the GPU probe measured in its place.

`benchmarks/gpu_check_results.py publish` writes one JSON file per GPU and driver into
`measured/` beside this module, from `python -m rlbench.harness.predict.gpu_probe` run by the GPU check;
each file cites its method and the dated entry in docs/measurements/ it came from. A measured
row keeps the datasheet's name-independent facts (memory size, links, TDP, price) and takes
the measured bf16 matmul peak, HBM copy bandwidth, per-layer latency and matmul rates by shape.
MFU is never computed from it: MFU divides by the datasheet's dense peak.

    from rlbench.harness.perfmodel.gpu_measured import measured_hardware
    row = measured_hardware("NVIDIA H200")          # None until a check on an H200 was published
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

from rlbench.harness.perfmodel.hardware import Hardware, find_hardware

MEASURED_DIR = Path(__file__).with_name("measured")


def measured_entries(folder: Path = MEASURED_DIR) -> list[dict[str, Any]]:
    """Every measured GPU file in `folder` (fixtures, marked `fixture`, left out), sorted by file name."""
    entries = []
    for path in sorted(folder.glob("*.json")) if folder.is_dir() else ():
        data = json.loads(path.read_text())
        if not data.get("fixture"):
            entries.append(data | {"file": path.name})
    return entries


def load_measured(gpu_name: str, driver: str | None = None, folder: Path = MEASURED_DIR) -> dict[str, Any] | None:
    """The measured constants of this GPU (NVML name or table name) and driver; without a driver, the
    last file of that GPU. None where nothing was measured."""
    sheet = find_hardware(gpu_name)
    wanted = sheet.name if sheet else gpu_name

    def same_gpu(entry: dict[str, Any]) -> bool:
        found = find_hardware(str(entry.get("gpu_name")))
        return (found.name if found else entry.get("gpu_name")) == wanted

    matches = [e for e in measured_entries(folder) if same_gpu(e) and (driver is None or e.get("driver") == driver)]
    return matches[-1] if matches else None


def measured_hardware(gpu_name: str, driver: str | None = None, folder: Path = MEASURED_DIR) -> Hardware | None:
    """The datasheet row of this GPU with its measured figures, or None (no measurement or no datasheet row)."""
    data = load_measured(gpu_name, driver, folder)
    sheet = find_hardware(gpu_name)
    if data is None or sheet is None:
        return None
    rates = tuple((int(m), int(k), float(r)) for m, k, r in data.get("matmul_rates") or ())
    return replace(
        sheet,
        name=f"{sheet.name} (measured, driver {data.get('driver')})",
        bf16_flops=float(data["bf16_flops_per_s"]),
        hbm_bytes_per_s=float(data["mem_bytes_per_s"]),
        op_latency_s=data.get("op_latency_s"),
        matmul_rates=rates,
        source=f"{data.get('source')}; other fields: {sheet.source}",
    )
