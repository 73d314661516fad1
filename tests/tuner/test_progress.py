"""What a sweep shows as it runs: the one status renderer, ``verbose`` (0, 1, 2, or chosen by
where it runs: a terminal, a notebook, neither), and a line per trial event at 2."""

from __future__ import annotations

import io
import re
import sys
import types

import pytest
from rich.console import Console

from tuner import ConfigError
from tuner._live import LogView, duration, render, status_line
from tuner._progress import Progress, TrialEvents, check_verbose, in_notebook, resolve_verbose
from tuner.cli import main
from tuner.sim import SAMPLE_DIR, discover, load_curves, simulate


def _snapshot(by_trial=None, **more):
    snap = {"elapsed_s": 125.0, "time_budget_s": 600.0, "spend_usd": 0.5,
            "cost_budget_usd": 2.0, "trials": {"running": 2, "pruned": 3}, "total": 5,
            "best_value": 0.91234, "best_trial_id": "t0004", "workers": 2,
            "running_segments": 2, "metric": "accuracy", "mode": "max",
            "by_trial": by_trial or {}}
    return snap | more


def _text(table):
    console = Console(file=io.StringIO(), width=120, record=True, color_system=None)
    console.print(table)
    return console.export_text()


def test_the_status_shows_trials_best_spend_and_time_left():
    text = _text(render(_snapshot(), "elastune demo"))
    assert "elastune demo" in text
    assert "5 started: 3 pruned, 2 running" in text
    assert "best accuracy  0.9123 (t0004)" in text
    assert "0.50/2.00 USD" in text and "[#####" in text
    assert "125.00/600.00 s (7m 55s left)" in text
    assert "2 ready, 2 segments running" in text
    line = status_line(_snapshot(time_budget_s=None, cost_budget_usd=None))
    assert line == ("[ 2m 05s] trials 5 started: 3 pruned, 2 running; best 0.9123 (t0004); "
                    "spend 0.50 USD; no time budget")
    assert "0 started;" in status_line(_snapshot(trials={}, total=0, best_value=None))


@pytest.mark.parametrize(("seconds", "shown"), [
    (0, "0s"), (59.4, "59s"), (61, "1m 01s"), (3600, "1h 00m"), (7325, "2h 02m"), (-3, "0s")])
def test_durations_read_as_people_write_them(seconds, shown):
    assert duration(seconds) == shown


class _Stream(io.StringIO):
    def __init__(self, tty):
        super().__init__()
        self._tty = tty

    def isatty(self):
        return self._tty


def _fake_ipython(monkeypatch, shell):
    module = types.ModuleType("IPython")
    module.get_ipython = lambda: shell
    monkeypatch.setitem(sys.modules, "IPython", module)


def test_verbose_unset_shows_on_a_terminal_or_in_a_notebook_only(monkeypatch):
    monkeypatch.delitem(sys.modules, "IPython", raising=False)
    assert not in_notebook()
    assert resolve_verbose(None, _Stream(tty=True)) == 1
    assert resolve_verbose(None, _Stream(tty=False)) == 0
    assert resolve_verbose(None, object()) == 0          # (no isatty at all)
    for given in (0, 1, 2):
        assert resolve_verbose(given, _Stream(tty=False)) == given
        assert resolve_verbose(given, _Stream(tty=True)) == given

    ZMQInteractiveShell = type("ZMQInteractiveShell", (), {"config": {}})
    _fake_ipython(monkeypatch, ZMQInteractiveShell())
    assert in_notebook() and resolve_verbose(None, _Stream(tty=False)) == 1
    ColabShell = type("Shell", (), {"config": {"IPKernelApp": {}}})
    _fake_ipython(monkeypatch, ColabShell())
    assert in_notebook()
    TerminalInteractiveShell = type("TerminalInteractiveShell", (), {"config": {}})
    _fake_ipython(monkeypatch, TerminalInteractiveShell())   # IPython in a terminal
    assert not in_notebook() and resolve_verbose(None, _Stream(tty=False)) == 0
    _fake_ipython(monkeypatch, None)                        # imported, but no shell
    assert not in_notebook()


@pytest.mark.parametrize("bad", [3, -1, True, "1", 1.0])
def test_a_bad_verbose_is_refused_naming_it(bad):
    with pytest.raises(ConfigError, match=r"^verbose: expected 0, 1, 2 or None"):
        check_verbose(bad)


def _trial(state, step=0, to_step=None, value=None, params=None):
    return {"state": state, "step": step, "to_step": to_step, "value": value,
            "params": params or {"lr": 0.012345, "hidden": 64, "opt": "adam"}}


def test_trial_events_come_from_what_changed_between_snapshots():
    events = TrialEvents()
    assert events.lines(_snapshot({"t0001": _trial("running", 0, 1)})) == [
        "[ 2m 05s] t0001 started: lr=0.01235, hidden=64, opt='adam'"]
    assert events.lines(_snapshot({"t0001": _trial("paused", 1, None, 0.5)})) == []
    assert events.lines(_snapshot({"t0001": _trial("running", 1, 3, 0.5)})) == [
        "[ 2m 05s] t0001 promoted to step 3"]
    # the same segment again (re-run after a lost worker, or widened): no event
    assert events.lines(_snapshot({"t0001": _trial("running", 1, 3, 0.5)})) == []
    snap = _snapshot({"t0001": _trial("completed", 3, None, 0.9), "t0002": _trial(
        "pruned", 1, None, 0.25), "t0003": _trial("failed", 0)}, best_trial_id="t0001",
        elapsed_s=7.0)
    assert events.lines(snap) == [
        "[     7s] t0001 completed at step 3: accuracy=0.9 (best so far)",
        "[     7s] t0002 started: lr=0.01235, hidden=64, opt='adam'",
        "[     7s] t0002 pruned at step 1: accuracy=0.25",
        "[     7s] t0003 started: lr=0.01235, hidden=64, opt='adam'",
        "[     7s] t0003 failed at step 0"]
    assert events.lines(snap) == []


def test_a_resumed_sweeps_earlier_trials_get_no_lines():
    events = TrialEvents()
    events.seed(_snapshot({"t0001": _trial("completed", 9, None, 0.9),
                           "t0002": _trial("paused", 3, None, 0.7)}))
    assert events.lines(_snapshot({"t0001": _trial("completed", 9, None, 0.9),
                                   "t0002": _trial("running", 3, 9, 0.7)})) == [
        "[ 2m 05s] t0002 promoted to step 9"]


def test_a_log_gets_a_status_line_now_and_then_and_the_last_one_at_the_end():
    out = io.StringIO()
    view = LogView(out, every_s=3600)
    view.update(_snapshot(total=1))
    view.update(_snapshot(total=2))     # within the hour: not shown
    view.close()                        # the last one is
    assert [line.split("] ")[1].split(";")[0] for line in out.getvalue().splitlines()] == [
        "trials 1 started: 3 pruned, 2 running", "trials 2 started: 3 pruned, 2 running"]


def test_nothing_is_fed_at_verbose_0_and_the_callers_observer_still_is():
    seen = []
    assert Progress(0, "x", None, _Stream(tty=True)).observer is None
    quiet = Progress(0, "x", seen.append, _Stream(tty=True))
    with quiet:
        quiet.observer(_snapshot())
    assert seen == [_snapshot()]


def test_verbose_2_prints_each_trials_events_of_a_simulated_sweep(capsys):
    curves = load_curves(SAMPLE_DIR, discover(SAMPLE_DIR)[0], max_configs=27)
    seen = []
    run = simulate({"scheduler": {"type": "asha", "min_resource": 1, "max_resource": 9},
                    "num_trials": 9, "provider": {"type": "local", "workers": 3}},
                   curves, seed=0, time_budget="2h", cost_budget=10.0, verbose=2,
                   observer=seen.append)
    captured = capsys.readouterr()
    assert captured.out == ""                     # the status goes to stderr
    lines = captured.err.splitlines()
    rows = {r["trial_id"]: r for r in run.store.trial_rows()}
    assert len(rows) == 9
    for trial_id, row in rows.items():
        mine = [line for line in lines if f"] {trial_id} " in line]
        assert re.search(rf"{trial_id} started: config=\d+$", mine[0]), mine
        assert f"{trial_id} {row['state']} at step {row['last_step']}" in mine[-1], mine
    promoted = [line for line in lines if " promoted to step " in line]
    assert promoted and len(promoted) == len(
        {(s["trial_id"], s["stop_step"]) for s in run.store.segments() if s["start_step"] > 0})
    assert lines[-1].startswith("[") and "trials 9 started" in lines[-1]
    assert seen and seen[-1]["total"] == 9        # the caller's observer too
    quiet = simulate({"scheduler": {"type": "asha", "min_resource": 1, "max_resource": 9},
                      "num_trials": 3, "provider": {"type": "local", "workers": 3}},
                     curves, seed=0, time_budget="2h", cost_budget=10.0)
    assert capsys.readouterr().err == "" and len(quiet.trials) == 3


def test_the_cli_refuses_verbose_with_quiet(tmp_path, capsys):
    sweep = tmp_path / "s.yaml"
    sweep.write_text("trainable: tests.trainables:quadratic\n")
    assert main(["run", str(sweep), "-v", "-q"]) == 2
    assert "--verbose: and --quiet cannot be given together" in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == [sweep]
