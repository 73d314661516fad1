"""The ``elastune`` command line: run, plan, status, resume, ls, stop, cloud, worker.

Exit codes: 0 success, 2 bad input (the message names the field), 1 any other failure. With
``--json`` stdout holds exactly one JSON object.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated, Any

import click
import typer

from tuner._errors import ConfigError
from tuner._extras import require

app = typer.Typer(add_completion=False, no_args_is_help=True,
                  help="Elastic hyperparameter tuning under a time and a cost budget.")


def _given(**options: Any) -> dict[str, Any]:
    """The command-line options the user gave, as overrides of the sweep's top-level keys."""
    return {k: v for k, v in options.items() if v is not None}


BROKER_HELP = ("Redis URL (default: an embedded one on a private socket); needs a password, and "
               "TLS (rediss://) unless on loopback or a unix socket; ELASTUNE_BROKER_URL keeps "
               "the password out of `ps`")
INSECURE_HELP = "accept a broker URL without a password, or a remote one without TLS"
VERBOSE_HELP = ("also print a line per trial event (started, promoted, pruned, completed, "
                "failed) above the live status")
QUIET_HELP = ("no live status (the default where stderr is not a terminal, and with --json); "
              "the summary is still printed")


def _emit_json(doc: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(doc) + "\n")
    sys.stdout.flush()


@app.command()
def run(
    sweep: Annotated[Path, typer.Argument(help="the sweep.yaml to run")],
    dir: Annotated[Path | None, typer.Option("--dir", help="experiment directory")] = None,
    time_budget: Annotated[str | None, typer.Option(help="e.g. 90s, 30m, 2h")] = None,
    cost_budget: Annotated[str | None, typer.Option(help="US dollars")] = None,
    provider: Annotated[str | None, typer.Option(help="local | aws | gcp | pool")] = None,
    broker: Annotated[str | None, typer.Option(help=BROKER_HELP,
                                               envvar="ELASTUNE_BROKER_URL")] = None,
    insecure: Annotated[bool, typer.Option("--insecure", help=INSECURE_HELP)] = False,
    json_out: Annotated[bool, typer.Option("--json", help="print one JSON object")] = False,
    verbose: Annotated[bool, typer.Option("--verbose", "-v", help=VERBOSE_HELP)] = False,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help=QUIET_HELP)] = False,
) -> None:
    """Run a sweep and print its best result and spend."""
    from tuner._tune import tune

    overrides = _given(time_budget=time_budget, cost_budget=cost_budget, provider=provider)
    result = tune(str(sweep), experiment_dir=dir, broker_url=broker, insecure_broker=insecure,
                  verbose=_verbosity(verbose, quiet, json_out), **overrides)
    if json_out:
        _emit_json(result.status)
    else:
        _print_summary(result.status, message=False)
    _exit_if_failed(result.status)


def _verbosity(verbose: bool, quiet: bool, json_out: bool) -> int | None:
    """``tune``'s verbose for the flags: --json alone keeps quiet (scripts read it), and
    whatever shows goes to stderr, so stdout keeps its one JSON object."""
    if verbose and quiet:
        raise ConfigError("--verbose", "and --quiet cannot be given together")
    if verbose:
        return 2
    if quiet or json_out:
        return 0
    return None


def _exit_if_failed(doc: dict[str, Any]) -> None:
    """A failed sweep: why on stderr (stdout keeps its one JSON object), exit status 1."""
    from worker.records import ExperimentState

    if doc["state"] != ExperimentState.FAILED:
        return
    print(f"error: the sweep failed: {doc['message'] or 'see the experiment directory'}",
          file=sys.stderr)
    raise typer.Exit(1)


def _print_summary(doc: dict[str, Any], message: bool = True) -> None:
    from rich.console import Console

    console = Console()
    best = doc["best"]
    t = doc["trials"]
    console.print(f"[bold]{doc['experiment']}[/] {doc['state']} in {doc['wall_s']:.1f} s "
                  f"({doc['dir']})")
    console.print(f"trials: {t['total']} ({t['completed']} completed, {t['pruned']} pruned, "
                  f"{t['failed']} failed, {t['running']} running, {t['paused']} paused, "
                  f"{t['stopped']} stopped)")
    planned = doc.get("predicted_wall_s")
    if planned is not None and doc["wall_s"] is not None:
        diff = doc["wall_s"] - planned
        console.print(f"wall time: {doc['wall_s']:.1f} s against {planned:.1f} s planned "
                      f"({abs(diff):.1f} s {'longer' if diff > 0 else 'shorter'})")
    if best:
        console.print(f"best {best['value']:.4f} ({best['trial_id']}): {best['params']}")
    else:
        console.print("best: no trial reported a value")
    budget = doc["cost_budget_usd"]
    console.print(f"spend: {doc['spend_usd']:.4f} USD"
                  + (f" of {budget:.2f} USD budget" if budget is not None else ""))
    for name, error in (doc.get("logger_errors") or {}).items():
        console.print(f"the {name} logger failed and stopped logging: {error}",
                      style="yellow", highlight=False, markup=False)
    if message and doc.get("message"):
        # (a traceback's brackets are text, not markup)
        console.print(doc["message"], style="red", highlight=False, markup=False)


@app.command("plan")
def plan_command(
    sweep: Annotated[Path, typer.Argument(help="the sweep.yaml to plan")],
    time_budget: Annotated[str | None, typer.Option(help="e.g. 90s, 30m, 2h")] = None,
    cost_budget: Annotated[str | None, typer.Option(help="US dollars")] = None,
    json_out: Annotated[bool, typer.Option("--json", help="print one JSON object")] = False,
) -> None:
    """Predict a sweep's plan, cost and time; spends nothing and starts nothing."""
    from dataclasses import replace

    from tuner._config import load_sweep
    from tuner._profiles import describe
    from tuner._tune import preview

    overrides = _given(time_budget=time_budget, cost_budget=cost_budget)
    spec = load_sweep(str(sweep), **overrides)
    result, source, too_short = preview(spec)
    if too_short is not None:   # reported, as a plan over the cost budget is
        result = replace(result, feasible=False, reason=too_short)
    if json_out:
        _emit_json({**result.to_json(), "profile_source": source})
    else:
        _print_plan(result)
        print(describe(source))
        if too_short is not None:
            print("elastune run refuses this sweep (exit status 2, budget.time): not even "
                  "one segment ends within the time budget by the profile")
        elif not result.feasible and spec.provider.follows_plan:
            from tuner._planning import late_only

            if not late_only(spec, result):
                print("elastune run refuses this sweep (exit status 2): only a sweep whose "
                      "plan fits the cost budget runs late")
            elif "step_scale" in result.inputs:
                print(f"elastune run follows this plan (made at {result.inputs['step_scale']:.3g}"
                      " times the profile's step times), re-planned as it measures, and stops "
                      "at the time budget")
            else:
                print("elastune run follows this fastest plan, re-planned as it measures, and "
                      "stops at the time budget")


def _print_plan(plan: Any) -> None:
    from rich.console import Console
    from rich.table import Table

    console = Console()
    rungs = Table(title=f"{plan.planner} plan: {plan.num_trials} trials")
    for name in ("rung", "trials", "steps", "GPUs/trial", "workers", "start s", "end s"):
        rungs.add_column(name, justify="right")
    for r in plan.rungs:
        rungs.add_row(str(r.rung), str(r.trials), str(r.resource), str(r.gpus_per_trial),
                      str(r.workers), f"{r.start_s:.0f}", f"{r.end_s:.0f}")
    console.print(rungs)
    timeline = Table(title="instances held (booting included)")
    for name in ("from s", "instances", "type", "spot"):
        timeline.add_column(name, justify="right")
    for p in plan.timeline:
        timeline.add_row(f"{p.t_s:.0f}", str(p.workers), p.instance_type, "yes" if p.spot else "no")
    console.print(timeline)
    verdict = "[green]feasible[/]" if plan.feasible else f"[red]infeasible[/]: {plan.reason}"
    console.print(f"predicted cost {plan.predicted_cost_usd:.4f} USD, wall "
                  f"{plan.predicted_wall_s:.0f} s; {verdict}")


@app.command()
def status(
    dir: Annotated[Path, typer.Argument(help="experiment directory")],
    json_out: Annotated[bool, typer.Option("--json", help="print one JSON object")] = False,
) -> None:
    """Show an experiment's state, best result and spend (works while it runs)."""
    from tuner._status import status_document
    from tuner._store import STORE_NAME, Store

    if not (dir / STORE_NAME).exists():
        raise ConfigError("DIR", f"{dir} holds no experiment ({STORE_NAME} not found)")
    store = Store(dir, readonly=True)
    try:
        doc = status_document(store, dir)
    finally:
        store.close()
    if json_out:
        _emit_json(doc)
    else:
        _print_summary(doc)


@app.command("profile")
def profile_command(
    dir: Annotated[Path, typer.Argument(help="experiment directory")],
    json_out: Annotated[bool, typer.Option("--json", help="print one JSON object")] = False,
) -> None:
    """Print what an experiment measured of its trainable, as a sweep's profile: section
    (a later sweep starts from it with profile: {from: DIR})."""
    from tuner._profiles import measurement, profile_yaml

    try:
        found = measurement(dir)
    except ConfigError as exc:
        raise ConfigError("DIR", exc.message) from None
    if json_out:
        _emit_json({"dir": str(dir.resolve()), **found})
    else:
        print(profile_yaml(found, dir), end="")


@app.command("export")
def export_command(
    dir: Annotated[Path, typer.Argument(help="experiment directory")],
    optuna: Annotated[str, typer.Option(
        "--optuna", help="Optuna storage URL to write the study to, e.g. sqlite:///optuna.db")],
    study_name: Annotated[str | None, typer.Option(
        help="the study's name (default: the experiment's id)")] = None,
    overwrite: Annotated[bool, typer.Option(
        "--overwrite", help="replace a study of that name already in the storage")] = False,
    json_out: Annotated[bool, typer.Option("--json", help="print one JSON object")] = False,
) -> None:
    """Write a sweep as an Optuna study (optuna.load_study and optuna-dashboard open it)."""
    from tuner._export import export_optuna, shown_url

    names = {"experiment_dir": "DIR", "storage": "--optuna", "study_name": "--study-name"}
    try:
        study = export_optuna(dir, optuna, study_name=study_name, overwrite=overwrite)
    except ConfigError as exc:
        raise ConfigError(names.get(exc.field, exc.field), exc.message) from None
    doc = {"dir": str(dir.resolve()), "storage": shown_url(optuna),
           "study_name": study.study_name, "trials": len(study.trials)}
    if json_out:
        _emit_json(doc)
    else:
        print(f"wrote {doc['trials']} trials to study {study.study_name!r} in {doc['storage']}"
              f"\nopen it: optuna-dashboard '{doc['storage']}'")


@app.command("resume")
def resume_command(
    dir: Annotated[Path, typer.Argument(help="experiment directory")],
    time_budget: Annotated[str | None, typer.Option(help="new total, e.g. 2h")] = None,
    cost_budget: Annotated[str | None, typer.Option(help="new total, US dollars")] = None,
    num_trials: Annotated[int | None, typer.Option(help="new total number of trials")] = None,
    broker: Annotated[str | None, typer.Option(help=BROKER_HELP,
                                               envvar="ELASTUNE_BROKER_URL")] = None,
    insecure: Annotated[bool, typer.Option("--insecure", help=INSECURE_HELP)] = False,
    json_out: Annotated[bool, typer.Option("--json", help="print one JSON object")] = False,
    verbose: Annotated[bool, typer.Option("--verbose", "-v", help=VERBOSE_HELP)] = False,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help=QUIET_HELP)] = False,
) -> None:
    """Take up a stopped, crashed or finished sweep where it stopped (budgets are totals)."""
    from tuner._tune import resume

    overrides = _given(time_budget=time_budget, cost_budget=cost_budget, num_trials=num_trials)
    result = resume(dir, broker_url=broker, insecure_broker=insecure,
                    verbose=_verbosity(verbose, quiet, json_out), **overrides)
    if json_out:
        _emit_json(result.status)
    else:
        _print_summary(result.status, message=False)
    _exit_if_failed(result.status)


@app.command("ls")
def ls_command(
    root: Annotated[Path, typer.Argument(help="experiments root (or one experiment)")] = Path(
        "experiments"),
    json_out: Annotated[bool, typer.Option("--json", help="print one JSON object")] = False,
) -> None:
    """List experiments under ROOT with state, best score and spend."""
    from rich.console import Console
    from rich.table import Table

    from tuner._cli_experiments import list_experiments

    docs = list_experiments(root)
    if json_out:
        _emit_json({"root": str(root.resolve()), "experiments": docs})
        return
    table = Table("experiment", "state", "best", "trials", "spend $", "wall s")
    for d in docs:
        best = d["best"]["value"] if d["best"] else None
        table.add_row(d["experiment"], d["state"], "-" if best is None else f"{best:.4g}",
                      str(d["trials"]["total"]), f"{d['spend_usd']:.4f}",
                      "-" if d["wall_s"] is None else f"{d['wall_s']:.1f}")
    Console().print(table)


@app.command()
def stop(dir: Annotated[Path, typer.Argument(help="experiment directory")]) -> None:
    """Stop a running sweep: segments checkpoint, VMs are terminated, results are kept."""
    from tuner._cli_experiments import request_stop
    from tuner._tune import STOP_FILE

    doc = request_stop(dir, STOP_FILE)
    print(f"asked experiment {doc['experiment']} to stop")


cloud_app = typer.Typer(no_args_is_help=True,
                        help="Find and remove the VMs elastune launched (by their tags).")
app.add_typer(cloud_app, name="cloud")


def _cloud_options(provider: str, region: str | None, zone: str | None,
                   project: str | None) -> Any:
    from tuner._cli_cloud import cloud_provider

    return cloud_provider(provider, region, zone, project)


@cloud_app.command("ls")
def cloud_ls(
    provider: Annotated[str, typer.Option(help="aws | gcp")],
    region: Annotated[str | None, typer.Option(help="aws region")] = None,
    zone: Annotated[str | None, typer.Option(help="gcp zone")] = None,
    project: Annotated[str | None, typer.Option(help="gcp project")] = None,
    experiment: Annotated[str | None, typer.Option(help="only this experiment")] = None,
    all_states: Annotated[bool, typer.Option("--all", help="terminated ones too")] = False,
    json_out: Annotated[bool, typer.Option("--json", help="print one JSON object")] = False,
) -> None:
    """List the instances elastune launched (live ones unless --all)."""
    from tuner._cli_cloud import instance_row, live

    found = _cloud_options(provider, region, zone, project).list(experiment)
    rows = [instance_row(i) for i in (found if all_states else live(found))]
    if json_out:
        _emit_json({"provider": provider, "instances": rows})
        return
    for r in rows:
        print(f"{r['instance_id']}\t{r['experiment']}\t{r['instance_type']}\t"
              f"{'spot' if r['spot'] else 'on-demand'}\t{r['zone']}\t{r['state']}")
    if not rows:
        print("no instances")


@cloud_app.command("cleanup")
def cloud_cleanup(
    provider: Annotated[str, typer.Option(help="aws | gcp")],
    region: Annotated[str | None, typer.Option(help="aws region")] = None,
    zone: Annotated[str | None, typer.Option(help="gcp zone")] = None,
    project: Annotated[str | None, typer.Option(help="gcp project")] = None,
    experiment: Annotated[str | None, typer.Option(help="only this experiment")] = None,
    json_out: Annotated[bool, typer.Option("--json", help="print one JSON object")] = False,
) -> None:
    """Terminate every live instance elastune launched (of one experiment, or all), and
    delete the broker secrets their sweeps left behind."""
    from tuner._cli_cloud import instance_row

    cloud = _cloud_options(provider, region, zone, project)
    gone = cloud.cleanup(experiment)
    secrets = cloud.cleanup_secrets(experiment)
    rows = [instance_row(i) for i in gone]
    if json_out:
        _emit_json({"provider": provider, "terminated": rows, "secrets_deleted": secrets})
        return
    print(f"terminated {len(rows)} instance(s)"
          + ("".join(f"\n  {r['instance_id']}" for r in rows)))
    print(f"deleted {len(secrets)} secret(s)" + "".join(f"\n  {n}" for n in secrets))


@app.command(context_settings={"allow_extra_args": True, "ignore_unknown_options": True},
             add_help_option=False)
def worker(ctx: typer.Context) -> None:
    """Start a worker: elastune worker --broker URL [--queue Q] [--slots N] [--gpus IDS]
    [--pool NAME] [--insecure] [--preload MODULE]; modules are imported from its working
    directory too. With --pool it runs the segments of any sweep on that pool."""
    from worker._main import main as worker_main

    raise typer.Exit(worker_main(list(ctx.args)))



@app.command()
def dashboard(
    path: Annotated[Path, typer.Argument(
        help="an experiment directory, or a folder of them")] = Path("experiments"),
    host: Annotated[str, typer.Option(help="address to listen on")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="port to listen on")] = 8265,
    token: Annotated[str | None, typer.Option(
        envvar="ELASTUNE_DASHBOARD_TOKEN",
        help="required of every request; needed to listen beyond loopback")] = None,
) -> None:
    """Serve the dashboard: cost against accuracy, live while sweeps run."""
    require("dashboard", "dashboard", "elastune dashboard")
    from tuner.dashboard import check_bind, serve

    if not path.is_dir():
        raise ConfigError("DIR", f"{path} is not a directory (an experiment directory or a "
                                 "folder of experiments)")
    check_bind(host, port, token)
    serve(path, host=host, port=port, token=token)


@app.command()
def report(
    dir: Annotated[Path, typer.Argument(help="experiment directory")],
    output: Annotated[Path, typer.Option("--output", "-o", help="the HTML file to write")] = Path(
        "report.html"),
) -> None:
    """Write one self-contained HTML report of an experiment (opens offline)."""
    require("dashboard", "report", "elastune report")
    from tuner.dashboard import write_report

    out = write_report(dir, output)
    print(f"wrote {out} ({out.stat().st_size / 1e6:.1f} MB)")

def _usage_errors() -> tuple[type[Exception], ...]:
    """Click's usage error, and typer's own copy of it (typer 0.2x carries its own click)."""
    try:
        from typer._click.exceptions import UsageError
    except ImportError:
        return (click.UsageError,)
    return (click.UsageError, UsageError)


def main(argv: list[str] | None = None) -> int:
    try:
        # Without standalone mode click hands back a typer.Exit's code instead of raising it.
        code = app(args=argv, prog_name="elastune", standalone_mode=False)
    except ConfigError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except click.exceptions.Exit as exc:
        return exc.exit_code
    except _usage_errors() as exc:
        exc.show()  # type: ignore[attr-defined]
        return 2
    except click.exceptions.Abort:
        print("aborted", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 1
    except Exception as exc:  # the last line of defence: exit 1 with the reason
        print(f"error: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
    return code if isinstance(code, int) else 0


if __name__ == "__main__":
    sys.exit(main())
