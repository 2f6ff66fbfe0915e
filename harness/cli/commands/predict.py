"""`rlbench predict`: a workload's per-stage cost from the work-depth model, or layouts ranked; no GPU needed."""

from __future__ import annotations

import json

import click

from rlbench.harness.cli.options import finite_non_negative
from rlbench.harness.cli.user_errors import user_errors
from rlbench.harness.errors import RLBenchError

# The largest job `predict` plans: today's largest training clusters are ~100k GPUs; a larger count is a typo.
MAX_PREDICT_GPUS = 100_000


@click.command()
@click.option(
    "--model-config", help="HF config.json, a model folder, or a built-in name (required without --from-record)."
)
@click.option("--workload", help="Workload name or YAML path (required without --from-record).")
@click.option(
    "--hardware",
    help="Hardware row, e.g. H100-SXM, H200, A100-80GB, or 'cpu' (measured); required without --from-record.",
)
@click.option(
    "--gpus",
    type=click.IntRange(min=1, max=MAX_PREDICT_GPUS),
    help=f"GPUs of the job (default 1, or the run's with --from-record; at most {MAX_PREDICT_GPUS:,}: beyond that "
    "a count is a typo, not a plan).",
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
@click.option(
    "--gpu-hour-usd",
    type=float,
    callback=finite_non_negative,
    help="Price per GPU-hour (default: the hardware row's cited price).",
)
@click.option(
    "--framework",
    help="Use this framework's launch shape (its adapter's micro-batching, packing, engine "
    "mode) and its refusals; on --hardware cpu also its floor measured by "
    "`rlbench calibrate`.",
)
@click.option(
    "--lengths",
    metavar="mean=T,p90=T|prior",
    help="Response lengths as a distribution: the mean and a p90 (or p99) in tokens, capped at the workload's "
    "max new tokens, or `prior`, the published lengths declared for the workload's dataset and model; a "
    "synchronous step then decodes to the expected longest of its batch, not the cap.",
)
@click.option(
    "--lengths-from",
    metavar="RUN",
    help="Response lengths measured by a run record: its median mean length, and a tail fitted to the longest "
    "response (or the clipped share) its framework logged.",
)
@click.option(
    "--from-record",
    metavar="RUN",
    help="Scale a measured run to --gpus and --parallel: its lengths and each stage's measured ratio to the "
    "model carried over, the change of layout modelled (model and workload are the run's; with --hardware "
    "another device, only the lengths carry over).",
)
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
@user_errors
def predict(as_json: bool, **options) -> None:
    """Predict per-stage cost of a workload with the work-depth model (no GPU needed)."""
    from rlbench.harness.predict.plan import plan_job
    from rlbench.harness.predict.tables import stage_table, sweep_table

    if options["from_record"]:
        from rlbench.harness.predict.from_record import from_record_table, plan_from_record

        taken = ("model_config", "workload", "sweeps", "lengths", "lengths_from")
        clash = [
            f"--{key.replace('_', '-').removesuffix('s') if key == 'sweeps' else key.replace('_', '-')}"
            for key in taken
            if options[key]
        ]
        if clash:
            raise RLBenchError(f"--from-record takes the model, workload and lengths from the run; drop {clash[0]}")
        result = plan_from_record(options["from_record"], options["gpus"], options["parallel"], options["hardware"])
        click.echo(json.dumps(result, indent=2) if as_json else from_record_table(result))
        return
    missing = [f"--{k.replace('_', '-')}" for k in ("model_config", "workload", "hardware") if not options[k]]
    if missing:
        raise RLBenchError(f"{missing[0]} is required (or give --from-record RUN to scale a measured run)")
    options.pop("from_record")
    options["gpus"] = options["gpus"] or 1
    result, ranked = plan_job(**options)  # the options above, by name
    if as_json:
        click.echo(json.dumps(result, indent=2))
    elif ranked:
        click.echo(sweep_table(result["ranked"], result["skipped"], result["notes"]))
    else:
        click.echo(stage_table(result))
