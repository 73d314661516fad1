"""A sweep whose number of trials the planner chose keeps every worker of a fixed cluster busy
under ASHA: when a worker is free and the scheduler has no job for it, the controller admits one
more trial if the budgets allow (journaled, so a resumed sweep replays it). Synchronous
halving, a cluster that follows the plan and a sweep of a given number of trials run as
before."""

from __future__ import annotations

from dataclasses import replace

import pytest

from tests._sims import Synth, sim_controller
from tuner._build import shaped
from tuner._journal import RestoreError, replay
from tuner._store import Store
from tuner.schedulers import ASHA, PASHA, SuccessiveHalving
from tuner.sim import SIM_SETTINGS, simulate
from tuner.sim._simulate import run_to_end, simulated_sweep

# Synth's steps take 10 s; the profile says 20 s, so the planner's count runs out before
# the budget does, and the last promotions would train with workers idle beside them.
SWEEP = {"scheduler": {"type": "asha", "min_resource": 1, "max_resource": 9,
                       "reduction_factor": 3},
         "provider": {"type": "local", "workers": 4, "price_per_hour": 3.6},
         "profile": {"seconds_per_step": 20.0}, "metric": "acc", "mode": "max"}


def _sweep(**changes) -> dict:
    return {**SWEEP, **changes}


def _admitted(store: Store) -> int:
    return sum(e["step"] for e in store.journal() if e["kind"] == "admit")


def test_asha_admits_more_trials_only_once_its_count_has_started_and_admission_is_open():
    asha = ASHA(1, 9, 3, "max", num_trials=2)
    job = asha.next_job("t0")
    with pytest.raises(ValueError, match="every admitted trial has started"):
        asha.admit_more(1)
    asha.next_job("t1")
    assert asha.next_job("t2") is None              # both run: nothing to give a third slot
    with pytest.raises(ValueError, match="num_trials"):
        asha.admit_more(0)
    asha.admit_more(1)
    assert asha.total_trials == 3 and asha.next_job("t2").new
    # The new trial joins the same rungs, while t0 and t1 still train.
    asha.on_rung(job.trial_id, 1, 0.5)
    asha.close_admission()
    with pytest.raises(ValueError, match="admission is open"):
        asha.admit_more(1)
    # PASHA is an ASHA; synchronous halving has stages to keep, so it cannot.
    assert hasattr(PASHA(1, 9, 3, "max", 3), "admit_more")
    assert not hasattr(SuccessiveHalving(1, 9, 3, "max", 3), "admit_more")


def test_an_admission_is_replayed_and_refused_by_a_scheduler_that_cannot(tmp_path):
    store = Store(tmp_path)
    store.create_experiment("e", "e", {}, "m", "max", None, None)
    asha = ASHA(1, 9, 3, "max", num_trials=1)
    for kind, tid, step, flag in [("job", "t0001", 1, True), ("admit", "*", 2, False),
                                  ("job", "t0002", 1, True)]:
        store.journal_add(kind, tid, step, bracket=0, flag=flag)
    assert replay(asha, store.journal()) == 3
    assert asha.total_trials == 3 and asha.next_job("t0003").new
    with pytest.raises(RestoreError, match="admit"):
        replay(SuccessiveHalving(1, 9, 3, "max", 1), store.journal())


def test_a_chosen_count_asha_sweep_fills_idle_workers_within_its_budgets():
    chosen = simulate(_sweep(), Synth(n=81), seed=0, time_budget=None, cost_budget=2.0)
    count = chosen.store.experiment()["config"]["num_trials"]
    admitted = _admitted(chosen.store)
    assert admitted > 0 and len(chosen.trials) == count + admitted
    assert chosen.budget_respected and chosen.spend_usd <= 2.0
    # The first trial admitted beyond the count started while earlier trials still trained
    # (the tail that would have idled), not once the sweep had finished.
    segs = chosen.store.query("SELECT trial_id, started_at, finished_at FROM segments")
    first_extra = f"t{count + 1:04d}"
    began = min(s["started_at"] for s in segs if s["trial_id"] == first_extra)
    assert any(s["started_at"] < began < s["finished_at"] for s in segs
               if int(s["trial_id"][1:]) <= count)
    # The same sweep with that count given keeps it, ends when its ladder does, and finds
    # no more than the one that kept its workers busy.
    fixed = simulate(_sweep(num_trials=count), Synth(n=81), seed=0, time_budget=None,
                     cost_budget=2.0)
    assert len(fixed.trials) == count and _admitted(fixed.store) == 0
    assert fixed.outcome.reason == "done" and fixed.spend_usd < chosen.spend_usd
    assert chosen.best_value >= fixed.best_value


def test_a_chosen_count_sweep_admits_only_what_ends_before_its_deadline():
    run = simulate(_sweep(), Synth(n=81), seed=0, time_budget=300, cost_budget=100.0)
    count = run.store.experiment()["config"]["num_trials"]
    assert _admitted(run.store) > 0 and run.deadline_met and run.budget_respected
    extra = run.store.query("SELECT s.started_at FROM segments s JOIN trials t "
                            "ON s.trial_id = t.trial_id WHERE t.number > ? AND "
                            "s.start_step = 0", (count,))
    # Each admitted trial's first rung (one 10 s step, reserved at 1.5 times the median
    # step time) was to end by the deadline.
    assert extra and max(r["started_at"] for r in extra) + 15.0 <= 300.0 + 1e-6


def test_a_cluster_that_follows_the_plan_starts_another_bracket_instead():
    # Its idle workers go, and its re-planner plans the next bracket (ASHA: more trials) on
    # a cluster sized for it once the sweep has ended.
    run = simulate(_sweep(provider={**SWEEP["provider"], "scaling": "plan"}), Synth(n=81),
                   seed=0, time_budget=None, cost_budget=2.0)
    kinds = [e["kind"] for e in run.store.journal()]
    assert "admit" not in kinds and "bracket" in kinds and run.budget_respected


def test_synchronous_halving_and_a_given_count_keep_their_count():
    sha = simulate(_sweep(scheduler={**SWEEP["scheduler"], "type": "sha"}), Synth(n=81),
                   seed=0, time_budget=None, cost_budget=2.0)
    assert _admitted(sha.store) == 0
    assert len(sha.trials) == sha.store.experiment()["config"]["num_trials"]
    given = simulate(_sweep(num_trials=9), Synth(n=81), seed=0, time_budget=None,
                     cost_budget=2.0)
    assert len(given.trials) == 9 and _admitted(given.store) == 0


def test_a_finite_space_bounds_what_is_admitted():
    # 20 configurations to choose from: the sampler asks each once before it repeats one, so
    # the planner's count (18 for these budgets) grows to 20 and no further.
    space = {"config": {"choice": list(range(20))}}
    run = simulate(_sweep(space=space), Synth(n=20), seed=0, time_budget=None,
                   cost_budget=1.5)
    count = run.store.experiment()["config"]["num_trials"]
    assert count < 20 and _admitted(run.store) == 20 - count and len(run.trials) == 20
    assert run.outcome.reason == "done" and run.budget_respected


def test_a_stopped_chosen_count_sweep_replays_its_admissions_on_resume(tmp_path):
    stop_file = tmp_path / "STOP"
    settings = replace(SIM_SETTINGS, stop_file=stop_file)
    spec = simulated_sweep(_sweep(), Synth(n=81), seed=0, time_budget=None, cost_budget=2.0)
    spec, _, chosen = shaped(spec)
    assert chosen
    store = Store(tmp_path / "sweep")
    store.create_experiment("sim", spec.name, {"simulated": "synth"}, "acc", "max", None, 2.0)

    def stop_once_filling(snapshot):
        if snapshot["total"] > spec.num_trials + 3:
            stop_file.touch()

    first, provider, executor = sim_controller(spec, store, settings, chosen=True,
                                               observer=stop_once_filling)
    stopped = run_to_end(first, settings, True, provider, executor)
    assert stopped.outcome.reason == "requested"
    before = {r["trial_id"]: (r["last_step"], r["value"], r["state"]) for r in
              store.query("SELECT * FROM trials")}
    finished = {t: v[:2] for t, v in before.items() if v[2] == "completed"}
    admitted = _admitted(store)
    started = len(stopped.trials)
    assert admitted > 0 and started == spec.num_trials + admitted
    stop_file.unlink()

    second, provider, executor = sim_controller(spec, store, settings, chosen=True,
                                                prior=(stopped.spend_usd, stopped.wall_s))
    assert second.restore() == started
    # The rebuilt scheduler admits what the stopped run had: the count and the admissions.
    assert second.journaled.total_trials == started
    resumed = run_to_end(second, settings, True, provider, executor)
    assert resumed.outcome.reason in ("done", "budget")
    # (The resumed ledger counts the earlier run's spend: its total is the experiment's.)
    assert stopped.spend_usd < resumed.spend_usd <= 2.0 + 1e-9
    rows = {r["trial_id"]: r for r in store.query("SELECT * FROM trials")}
    # Nothing finished was lost or run again, every trial went on from where it stood (the
    # paused ones at the stop, promoted now as the scheduler decides), and the resumed
    # sweep went on admitting.
    assert finished and {t: (rows[t]["last_step"], rows[t]["value"]) for t in finished} \
        == finished
    assert all(rows[t]["last_step"] >= step for t, (step, _, _) in before.items())
    assert _admitted(store) > admitted and len(rows) == spec.num_trials + _admitted(store)


def test_a_finished_chosen_count_sweep_has_work_on_resume_only_with_larger_budgets(tmp_path):
    # With larger budgets a resumed sweep may admit more (it asked when its workers idled);
    # with those it ended on, it asked then and was refused.
    from tuner._config import load_sweep
    from tuner._tune import _nothing_to_do

    kw = {"seed": 0, "time_budget": None, "cost_budget": 1.5}
    space = {"config": {"choice": list(range(20))}}
    run = simulate(_sweep(space=space), Synth(n=20), store_path=tmp_path / "exp", **kw)
    row = run.store.experiment()
    assert row["message"] == "done" and _admitted(run.store) > 0
    # The sweep as resume loads it: with the count the planner chose.
    spec = shaped(simulated_sweep(_sweep(space=space), Synth(n=20), **kw))[0]
    assert _nothing_to_do(spec, run.store, row, chosen=True)
    larger = load_sweep(spec, cost_budget=3.0)
    assert not _nothing_to_do(larger, run.store, row, chosen=True)
    assert _nothing_to_do(larger, run.store, row, chosen=False)     # a count the user set
