"""The `rlbench` command line: run, ls, validate, predict, calibrate, compare, report, nightly, sweep.

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

import functools
import sys
from pathlib import Path

import click

from rlbench.harness.errors import RLBenchError
from rlbench.harness.record.schema import Status

# compare: too few post-warm-up steps for the test to reach its level: neither a pass (0) nor a regression (1).
EXIT_UNDECIDABLE = 3
# The largest job `predict` plans: today's largest training clusters are ~100k GPUs; a larger count is a typo.
MAX_PREDICT_GPUS = 100_000


def _user_errors(fn):
    """Turn RLBenchError into one line on stderr and exit code 2."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        from rlbench.harness.run.runner import RunInterrupted
        from rlbench.harness.run.stop_signals import RunStop, describe

        try:
            return fn(*args, **kwargs)
        except RunInterrupted as exc:
            click.echo(f"error: {exc}", err=True)
            sys.exit(exc.exit_code)
        except RunStop as stop:  # SIGTERM/SIGHUP/SIGINT while `run` read its inputs, before any record
            click.echo(
                f"error: interrupted by {describe(stop.signum)} before the framework started; nothing was recorded",
                err=True,
            )
            sys.exit(128 + stop.signum)
        except RLBenchError as exc:
            click.echo(f"error: {exc}", err=True)
            sys.exit(2)
        except KeyboardInterrupt:
            click.echo("error: interrupted before the framework started; nothing was recorded", err=True)
            sys.exit(130)

    return wrapper


class _OneLineErrors(click.Group):
    """Click's own usage errors (`--steps abc`, a missing option, a typo in a flag) as one `error:` line and
    exit 2, the same shape as an RLBenchError, instead of click's usage block and capitalised "Error:"."""

    def main(self, args=None, prog_name=None, complete_var=None, standalone_mode=True, **extra):
        if not standalone_mode:
            return super().main(args, prog_name, complete_var, standalone_mode, **extra)
        try:
            code = super().main(args, prog_name, complete_var, standalone_mode=False, **extra)
        except getattr(click.exceptions, "NoArgsIsHelpError", ()) as exc:  # bare `rlbench`: the help, as click does
            click.echo(exc.format_message(), err=True)
            sys.exit(exc.exit_code)
        except click.ClickException as exc:
            ctx = getattr(exc, "ctx", None)
            hint = f"; see `{ctx.command_path} -h`" if ctx is not None else ""
            click.echo(f"error: {exc.format_message().rstrip('.')}{hint}", err=True)
            sys.exit(exc.exit_code)
        except click.exceptions.Abort:  # Ctrl-C or EOF outside a command (commands handle their own)
            click.echo("error: aborted", err=True)
            sys.exit(130)
        sys.exit(code if isinstance(code, int) else 0)  # --help and --version return 0


@click.group(cls=_OneLineErrors, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="rlbench")
def main() -> None:
    """Benchmark RL-for-LLM training frameworks on equal work."""


@main.command()
@click.option("--framework", required=True, help="Framework adapter: see `rlbench ls`.")
@click.option("--workload", required=True, help="Workload name (see `rlbench ls`) or path to a YAML file.")
@click.option("--steps", type=click.IntRange(min=1), help="Override the workload's number of RL steps.")
@click.option(
    "--parallel",
    "parallel",
    multiple=True,
    metavar="KEY=VALUE",
    help="Parallelism knob, repeatable: dp, tp (trainer), rollout_tp, pp, pp_virtual, cp, ep, etp (expert tp), sp, "
    "placement=colocated|disaggregated, fuse=NAME|none, async=off|one-step|K (README's knob table).",
)
@click.option(
    "--out",
    type=click.Path(file_okay=False, path_type=Path),
    default=Path("results"),
    show_default=True,
    help="Folder that receives one record folder per run.",
)
@click.option("--seed", type=int, default=0, show_default=True, help="Seed for data order, model init and sampling.")
@click.option("--dry-run", is_flag=True, help="Print the exact framework command and config; run nothing.")
@_user_errors
def run(
    framework: str, workload: str, steps: int | None, parallel: tuple[str, ...], out: Path, seed: int, dry_run: bool
) -> None:
    """Run one benchmark and write its record under --out."""
    from rlbench.adapters.registry import get_adapter
    from rlbench.harness.run.runner import dry_run as plan_only
    from rlbench.harness.run.runner import execute
    from rlbench.harness.run.spec import build_run_spec
    from rlbench.harness.run.stop_signals import stop_signals

    with stop_signals():  # SIGTERM/SIGHUP too, from here to the end of the record (the runner shares them)
        get_adapter(framework)  # an unknown framework is reported before the workload is read
        spec = build_run_spec(framework, workload, parallel, steps=steps, seed=seed, out=out)
        if dry_run:
            click.echo(plan_only(spec, echo=lambda line: click.echo(line, err=True)))
            return
        run_dir = execute(spec, echo=lambda line: click.echo(line, err=True))
    from rlbench.reports.headline import headline

    for line in headline(run_dir):  # the figures on stderr; stdout stays the record's path alone
        click.echo(line, err=True)
    click.echo(str(run_dir))


@main.command(name="ls")
def list_command() -> None:
    """List frameworks (installed, version, usable here) and workloads."""
    from rlbench.adapters.registry import available, get_adapter
    from rlbench.workloads.catalog import available_workloads, load_workload

    click.echo("frameworks:")
    for name in available():
        adapter = get_adapter(name)
        usable, why = adapter.usable_here()
        version = adapter.version() or "-"
        tested = (
            ""
            if not adapter.version() or adapter.version_is_tested()
            else f" (untested; tested: {adapter.tested_versions})"
        )
        click.echo(f"  {name:<10} {version:<10} {'usable' if usable else 'not usable'}: {why}{tested}")
    click.echo("workloads:")
    for name in available_workloads():
        try:
            w = load_workload(name)
            click.echo(f"  {name:<18} v{w.version}  {w.description}")
        except RLBenchError as exc:
            click.echo(f"  {name:<18} invalid: {exc}")


@main.command()
@click.argument("workload")
@_user_errors
def validate(workload: str) -> None:
    """Load and check a workload file (by name or path) and the data `run` would read for it."""
    from rlbench.workloads.catalog import load_workload
    from rlbench.workloads.prompts import render, shuffled, workload_problems

    w = load_workload(workload)
    split = workload_problems(w)  # what `run` reads first: the files exist, decode, are not empty
    render(w, shuffled(w, split, seed=0)[0])
    click.echo(
        f"ok: {w.name} v{w.version}: {w.algorithm.name} on {w.data.dataset}/{w.data.split} "
        f"({len(split.problems)} problems, {split.origin}: {split.location}), model {w.model.name}, "
        f"{w.prompts_per_step} prompts x {w.algorithm.group_size} responses per step, {w.steps} steps"
    )


@main.command()
@click.argument("baseline")
@click.argument("candidate")
@click.option("--threshold", default="5%", show_default=True, help="Smallest change that counts (e.g. 5% or 0.05).")
@click.option(
    "--accept-undecidable", is_flag=True, help="Exit 0 when too few steps leave a metric undecidable (default: exit 3)."
)
@_user_errors
def compare(baseline: str, candidate: str, threshold: str, accept_undecidable: bool) -> None:
    """Compare two run records; exit 1 when a metric regresses significantly beyond --threshold, 3 when too few
    steps let the test decide nothing."""
    from rlbench.harness.record.compare import compare_records, format_table, parse_threshold

    results = compare_records(
        baseline, candidate, parse_threshold(threshold), notice=functools.partial(click.echo, err=True)
    )
    click.echo(format_table(results))
    regressed = [name for name, c in results if c.verdict == "regressed"]
    if regressed:
        click.echo(f"regressed: {', '.join(regressed)}")
        sys.exit(1)
    if not accept_undecidable and any(c.verdict == "undecidable" for _, c in results):
        sys.exit(EXIT_UNDECIDABLE)


@main.command()
@click.argument("results", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option(
    "--out",
    type=click.Path(dir_okay=False, path_type=Path),
    default=Path("report.html"),
    show_default=True,
    help="The HTML file to write (self-contained, opens offline).",
)
@click.option("--history", is_flag=True, help="Show each metric over nights with detected change points.")
@click.option("--threshold", default="5%", show_default=True, help="With --history: smallest change that counts.")
@_user_errors
def report(results: tuple[Path, ...], out: Path, history: bool, threshold: str) -> None:
    """Render run records (folders, or results folders holding them) into one HTML report."""
    from rlbench.harness.record.compare import parse_threshold
    from rlbench.reports.html import render_report

    click.echo(
        str(
            render_report(
                list(results),
                out,
                history=history,
                threshold=parse_threshold(threshold),
                warn=functools.partial(click.echo, err=True),
            )
        )
    )


@main.command()
@click.option(
    "--config",
    "config_path",
    type=click.Path(dir_okay=False, path_type=Path),
    required=True,
    help="Matrix, baseline folder, threshold: one file per framework environment (benchmarks/nightly-<env>.yaml).",
)
@click.option("--update-baseline", is_flag=True, help="After a clean night, copy its records into the baseline folder.")
@_user_errors
def nightly(config_path: Path, update_baseline: bool) -> None:
    """Run the nightly matrix, compare with the baseline, write reports; exit 1 on regression or failure."""
    from rlbench.harness.nightly.config import load_nightly_config
    from rlbench.harness.nightly.gate import format_night, run_night

    night_dir, night = run_night(
        load_nightly_config(config_path), update_baseline=update_baseline, echo=lambda line: click.echo(line, err=True)
    )
    click.echo(format_night(night))
    click.echo(str(night_dir))
    if night["status"] != Status.PASSED:
        sys.exit(1)


@main.command()
@click.option("--model-config", required=True, help="HF config.json, a model folder, or a built-in name.")
@click.option("--workload", required=True, help="Workload name or YAML path.")
@click.option("--hardware", required=True, help="Hardware row, e.g. H100-SXM, H200, A100-80GB, or 'cpu' (measured).")
@click.option(
    "--gpus",
    type=click.IntRange(min=1, max=MAX_PREDICT_GPUS),
    default=1,
    show_default=True,
    help=f"GPUs of the job (at most {MAX_PREDICT_GPUS:,}: beyond that a count is a typo, not a plan).",
)
@click.option("--parallel", "parallel", multiple=True, metavar="KEY=VALUE", help="As for `run`.")
@click.option(
    "--sweep",
    "sweeps",
    multiple=True,
    metavar="all|KEY=V1,V2",
    help="Rank layouts (tp, pp, cp, ep, sp, rollout_tp, placement): `all` sweeps every axis over its "
    "default range, KEY=V1,V2 one axis over these values (others stay at --parallel); repeatable.",
)
@click.option("--gpu-hour-usd", type=float, help="Price per GPU-hour (default: the hardware row's cited price).")
@click.option(
    "--framework",
    help="Use this framework's launch shape (its adapter's micro-batching, packing, engine "
    "mode) and its refusals; on --hardware cpu also its floor measured by "
    "`rlbench calibrate`.",
)
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
@_user_errors
def predict(
    model_config: str,
    workload: str,
    hardware: str,
    gpus: int,
    parallel: tuple[str, ...],
    sweeps: tuple[str, ...],
    gpu_hour_usd: float | None,
    framework: str | None,
    as_json: bool,
) -> None:
    """Predict per-stage cost of a workload with the work-depth model (no GPU needed)."""
    import json

    from rlbench.harness.perfmodel import get_hardware
    from rlbench.harness.predict.run_prediction import (
        LAYOUT_AXES,
        arch_for,
        hardware_for,
        launch_shape,
        predict_layout,
        refuse_for_framework,
        sweep_layout_table,
    )
    from rlbench.harness.predict.tables import stage_table, sweep_table
    from rlbench.harness.run.parallel import parse_grid
    from rlbench.workloads.catalog import load_workload

    arch = arch_for(model_config)
    on_cpu = hardware.lower() == "cpu"  # a framework runs its CPU lane there: its lane's launch shape
    row = hardware_for({}) if on_cpu else get_hardware(hardware)
    loaded = load_workload(workload)
    floor, note = None, ""
    if framework:  # the framework's own launch of this workload (any row); its measured floor on the CPU row only
        _known_framework(framework)
        if on_cpu:
            floor = _measured_floor(framework)
        else:
            note = (
                f"--framework {framework}: its launch shape is used; no framework floor on {row.name} (the floor "
                "is measured on this machine's CPU by `rlbench calibrate` and applies to --hardware cpu only)"
            )
    else:
        note = (
            f"no --framework: neutral launch shape, token-packed micro-batches of "
            f"{launch_shape(loaded, None, ()).micro_batch_tokens} tokens per GPU and a CUDA-graph rollout "
            "engine (docs/perfmodel.md)"
        )
    grid, every = parse_grid(sweeps, flag="--sweep", knobs=LAYOUT_AXES, word="all")
    if clash := sorted({pair.partition("=")[0].strip() for pair in parallel} & set(grid)):
        raise RLBenchError(f"knob {clash[0]!r} is both fixed (--parallel) and swept (--sweep); keep one")
    if not grid and not every:
        if framework:  # what `rlbench run --framework` would refuse, refused here too
            refuse_for_framework(framework, loaded, parallel)
        result = predict_layout(
            arch, launch_shape(loaded, framework, parallel, on_cpu), parallel, gpus, row, gpu_hour_usd, floor
        )
        result["notes"] = [note, *result["notes"]]
        click.echo(json.dumps(result, indent=2) if as_json else stage_table(result))
        return
    table = sweep_layout_table(
        arch, loaded, framework, parallel, grid, every, gpus, row, gpu_hour_usd, floor, lane=on_cpu
    )
    table["notes"] = [note, *table["notes"]]
    click.echo(
        json.dumps(table, indent=2) if as_json else sweep_table(table["ranked"], table["skipped"], table["notes"])
    )


def _known_framework(framework: str) -> None:
    """An unknown name is one error line with the nearest one (the registry's did-you-mean)."""
    from rlbench.adapters.registry import get_adapter

    get_adapter(framework)


def _measured_floor(framework: str):
    """The floor `rlbench calibrate` cached for this framework here; only this machine's CPU has one."""
    from rlbench.harness.predict.floor_cache import load_floor

    floor, why_not = load_floor(framework)
    if floor is None:
        raise RLBenchError(f"--framework {framework}: {why_not}")
    return floor


@main.command()
@click.option("--framework", required=True, help="Framework adapter to calibrate: see `rlbench ls`.")
@click.option(
    "--lengths",
    default="8,16",
    show_default=True,
    help="Response lengths of the calibration runs, comma-separated (two at least).",
)
@click.option(
    "--steps",
    type=click.IntRange(min=2),
    default=16,
    show_default=True,
    help="RL steps per calibration run (up to 3 warm-up steps are left out).",
)
@click.option(
    "--out",
    type=click.Path(file_okay=False, path_type=Path),
    default=Path("results/calibration"),
    show_default=True,
    help="Folder that receives the calibration runs' records.",
)
@_user_errors
def calibrate(framework: str, lengths: str, steps: int, out: Path) -> None:
    """Measure a framework's per-step floor here with tiny real runs; later predictions include it."""
    from rlbench.harness.out_dir import check_writable
    from rlbench.harness.predict.calibrate import calibrate as run_calibration
    from rlbench.harness.predict.calibrate import describe, parse_lengths

    check_writable(out)  # refused before the calibration runs, not when their records are written
    floor, cells, cache = run_calibration(
        framework, parse_lengths(lengths), steps=steps, out=out, echo=functools.partial(click.echo, err=True)
    )
    click.echo(describe(floor, cells))
    click.echo(str(cache))


@main.command()
@click.option("--framework", help="Framework adapters, comma-separated: verl,openrlhf,trl.")
@click.option("--workload", help="Workloads (names or YAML paths), comma-separated.")
@click.option(
    "--grid",
    "grid",
    multiple=True,
    metavar="KNOB=V1,V2",
    help="Sweep a --parallel knob over values, repeatable: the grid is their product.",
)
@click.option("--parallel", "parallel", multiple=True, metavar="KEY=VALUE", help="A knob fixed for every run.")
@click.option("--steps", type=click.IntRange(min=1), help="Override the workloads' number of RL steps.")
@click.option(
    "--repeats",
    type=click.IntRange(min=1),
    default=1,
    show_default=True,
    help="Runs of each configuration (reported with their spread).",
)
@click.option("--seed", type=int, default=0, show_default=True, help="Seed of every run (repeats share it).")
@click.option(
    "--out",
    type=click.Path(file_okay=False, path_type=Path),
    default=Path("results"),
    show_default=True,
    help="Folder that receives the sweep folder (index and one record per run).",
)
@click.option(
    "--executor",
    "executor_kind",
    type=click.Choice(["local", "ray"]),
    default="local",
    show_default=True,
    help="local: one run after another here; ray: each run a job on a Ray cluster.",
)
@click.option(
    "--ray-address", help="Ray dashboard (job API) address, e.g. http://127.0.0.1:8265 (default $RAY_ADDRESS)."
)
@click.option(
    "--env",
    "envs",
    multiple=True,
    metavar="FRAMEWORK=VIRTUALENV",
    help="Run that framework's cells in its own virtualenv (e.g. verl=.nox/verl_cpu), repeatable.",
)
@click.option(
    "--resume",
    type=click.Path(exists=True, file_okay=False, path_type=Path),
    help="Continue an interrupted sweep folder: runs only the cells not finished.",
)
@_user_errors
def sweep(
    framework: str | None,
    workload: str | None,
    grid: tuple[str, ...],
    parallel: tuple[str, ...],
    steps: int | None,
    repeats: int,
    seed: int,
    out: Path,
    executor_kind: str,
    ray_address: str | None,
    envs: tuple[str, ...],
    resume: Path | None,
) -> None:
    """Run a grid of benchmarks, one record per run plus a sweep index; exit 1 if a run failed."""
    from rlbench.harness.run.parallel import parse_grid
    from rlbench.harness.settings import run_timeout_s
    from rlbench.harness.sweep import driver as sweeps
    from rlbench.harness.sweep.executors import make_executor, sigterm_as_ctrl_c
    from rlbench.harness.sweep.index import load_index
    from rlbench.harness.sweep.spread import format_summary, refusals

    request = None
    if framework or workload or grid:
        if not (framework and workload):
            raise RLBenchError("sweep: give both --framework and --workload (or only --resume SWEEP_DIR)")
        request = sweeps.SweepRequest(
            frameworks=sweeps.parse_list(framework),
            workloads=sweeps.parse_list(workload),
            grid=parse_grid(grid)[0],
            parallel=parallel,
            steps=steps,
            seed=seed,
            repeats=repeats,
            timeout_s=run_timeout_s(),
        )
    elif resume is None:
        raise RLBenchError("sweep: give --framework and --workload, or --resume SWEEP_DIR")
    executor = make_executor(executor_kind, ray_address, envs)
    sigterm_as_ctrl_c()  # `kill` stops the current run cleanly, like Ctrl-C
    if resume is not None:
        sweeps.check_resume(resume, request)
        sweep_dir = resume
    else:
        from rlbench.harness.out_dir import check_writable

        sweep_dir = sweeps.start(request, executor, check_writable(out))
    echo = functools.partial(click.echo, err=True)
    index = load_index(sweep_dir)
    todo = sum(cell["status"] not in (Status.SUCCEEDED, Status.FAILED, Status.REFUSED) for cell in index["cells"])
    echo(f"sweep {sweep_dir}: {len(index['cells'])} cells, {todo} to run")
    for line in refusals(index):
        echo(f"  {line}")
    try:
        index = sweeps.run(sweep_dir, executor, echo)
    except sweeps.SweepInterrupted:
        click.echo(format_summary(load_index(sweep_dir)))
        raise
    click.echo(format_summary(index))
    report = sweeps.final_report(sweep_dir, index, echo)
    if report is not None:
        click.echo(f"report: {report}")
    click.echo(str(sweep_dir))
    statuses = [cell["status"] for cell in index["cells"]]
    if Status.FAILED in statuses or Status.SUCCEEDED not in statuses:
        sys.exit(1)


if __name__ == "__main__":
    main()
