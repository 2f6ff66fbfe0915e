"""The `rlbench` command line: run, ls, validate, predict, calibrate, compare, report, nightly, sweep, one module
each in commands/.

User mistakes (`RLBenchError`) print one line, `error: <problem and fix>`, and
exit 2 with no traceback; Ctrl-C exits 130 with the partial record kept.
New knobs go into workload files or `--parallel key=value`, not new flags.

    rlbench run --framework trl --workload gsm8k-grpo-tiny
    rlbench ls
    rlbench validate gsm8k-grpo
    rlbench report results/ --out report.html
    rlbench sweep --framework trl --workload gsm8k-grpo-tiny --grid placement=colocated,disaggregated
    rlbench calibrate --framework trl
"""

from __future__ import annotations

import click

from rlbench.harness.cli.commands import (
    calibrate,
    compare,
    ls,
    nightly,
    predict,
    report,
    run,
    sweep,
    trace,
    validate,
)
from rlbench.harness.cli.user_errors import OneLineErrors


@click.group(cls=OneLineErrors, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="rlbench")
def main() -> None:
    """Benchmark RL-for-LLM training frameworks on equal work."""


COMMANDS = (
    run.run,
    ls.ls,
    validate.validate,
    predict.predict,
    calibrate.calibrate,
    compare.compare,
    report.report,
    nightly.nightly,
    sweep.sweep,
    trace.trace,
)
for command in COMMANDS:
    main.add_command(command)
