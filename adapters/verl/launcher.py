"""verl's pre-launch step, run inside the launched process: check the machine, write the run's prompts as verl's RL
parquet, then exec verl's trainer.

    python -m rlbench.adapters.verl.launcher PROMPTS PARQUET -- COMMAND...
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from rlbench.adapters.prelaunch import run_prelaunch
from rlbench.adapters.verl import machine
from rlbench.adapters.verl.config import VAL_PARQUET_FILE
from rlbench.harness.atomic import replacing
from rlbench.workloads.prompts import EVAL_PROMPTS_FILE, EVAL_SPLIT, read_prompts


def verl_row(index: int, record, split: str = "train") -> dict[str, Any]:
    """One rlbench prompt as a row of verl's RL parquet (the layout of verl's data_preprocess scripts)."""
    return {
        "data_source": record.dataset,
        "prompt": [{"role": "user", "content": record.prompt}],
        "ability": "math",
        "reward_model": {"style": "rule", "ground_truth": record.ground_truth},
        "extra_info": {"index": index, "uid": record.uid, "split": split},
    }


def write_parquet(prompts: Path, parquet: Path, split: str = "train") -> int:
    """Convert the run's prompts.jsonl into verl's parquet, atomically; returns the row count."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    rows = [verl_row(i, r, split) for i, r in enumerate(read_prompts(prompts))]
    with replacing(parquet) as tmp:
        pq.write_table(pa.Table.from_pylist(rows), tmp)
    return len(rows)


def write_inputs(prompts: Path, parquet: Path) -> int:
    """The training parquet, and where the run has held-out problems (eval_prompts.jsonl beside prompts.jsonl)
    verl's validation parquet beside it (data.val_files); returns the training row count."""
    held_out = prompts.with_name(EVAL_PROMPTS_FILE)
    if held_out.is_file():
        write_parquet(held_out, parquet.with_name(VAL_PARQUET_FILE), EVAL_SPLIT)
    return write_parquet(prompts, parquet)


def main(argv: list[str] | None = None) -> int:
    """Pre-launch step: PROMPTS PARQUET -- COMMAND. Checks the machine, converts, then execs COMMAND."""
    return run_prelaunch(
        sys.argv[1:] if argv is None else argv,
        module="rlbench.adapters.verl.launcher",
        data_name="PARQUET",
        framework="verl",
        machine_ready=machine.machine_ready,
        convert=write_inputs,
    )


if __name__ == "__main__":
    sys.exit(main())
