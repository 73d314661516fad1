"""Asynchronous Hyperband: ASHA whose new trials enter at several rungs (``brackets``), in
Hyperband's proportions, deterministically (a resumed sweep's replay enters each trial where
it entered), and competing there with the trials promoted into that rung."""

from __future__ import annotations

from collections import Counter
from dataclasses import replace

import pytest

from budgets import JobShape, entry_shares
from tests._sims import Synth, sim_controller
from tests.tuner.test_config import base, raises
from tuner import load_sweep
from tuner._journal import RestoreError, replay
from tuner._planning import plan_for
from tuner._store import Store
from tuner.schedulers import ASHA, make_scheduler
from tuner.sim import SIM_SETTINGS, simulate
from tuner.sim._simulate import run_to_end, simulated_sweep

SWEEP = {"scheduler": {"type": "asha", "min_resource": 1, "max_resource": 27,
                       "reduction_factor": 3, "brackets": 4},
         "num_trials": 40, "provider": {"type": "local", "workers": 4, "price_per_hour": 3.6},
         "metric": "acc", "mode": "max"}


def test_new_trials_enter_every_rung_in_hyperbands_proportions():
    asha = ASHA(1, 27, 3, "max", num_trials=49, brackets=4)
    jobs = [asha.next_job(f"t{i}") for i in range(49)]
    # Hyperband's brackets for 1..27, eta 3: 27, 12, 6 and 4 trials.
    assert Counter(j.to_step for j in jobs) == {1: 27, 3: 12, 9: 6, 27: 4}
    assert all(j.new and j.bracket == [1, 3, 9, 27].index(j.to_step) for j in jobs)
    # Most aggressive first, each trial to the rung furthest behind its share.
    assert [j.to_step for j in jobs[:6]] == [1, 3, 1, 9, 1, 27]
    assert entry_shares(4, 3, 2) == pytest.approx([27 / 39, 12 / 39])
    # One bracket is plain ASHA.
    plain = ASHA(1, 27, 3, "max", num_trials=9)
    assert {plain.next_job(f"t{i}").to_step for i in range(9)} == {1}


def test_a_trial_entering_a_rung_competes_there_with_the_promoted_ones():
    asha = ASHA(1, 9, 3, "max", num_trials=3, brackets=2)
    a, b, c = (asha.next_job(t) for t in ("a", "b", "c"))
    assert (a.to_step, b.to_step, c.to_step) == (1, 3, 1)
    asha.on_rung("a", 1, 0.9)
    asha.on_rung("c", 1, 0.1)
    assert asha.next_job("d") == replace(a, to_step=3, new=False)   # top third of rung 1
    asha.on_rung("a", 3, 0.5)
    asha.on_rung("b", 3, 0.8)                   # entered at rung 3, and best there
    assert asha.next_job("d").trial_id == "b"


def test_brackets_are_checked_where_they_are_given():
    for bad in (0, 5, True, 1.5):
        with pytest.raises(ValueError, match="brackets"):
            ASHA(1, 27, 3, "max", brackets=bad)
    for kind, extra in (("sha", {}), ("hyperband", {}), ("asha", {"pasha": True})):
        with pytest.raises(ValueError, match="brackets"):
            make_scheduler(kind, 1, 27, 3, "max", 27, brackets=2, **extra)
    assert make_scheduler("asha", 1, 27, 3, "max", 27, brackets=4).num_brackets == 4
    for bad in ({"brackets": 5}, {"brackets": 0}, {"brackets": 2, "first_reduction": 2}):
        with pytest.raises(ValueError, match="brackets"):
            JobShape(27, 1, 27, 3, **bad)
    scheduler = {"type": "asha", "max_resource": 27}
    assert load_sweep(base(scheduler={**scheduler, "brackets": 4})).scheduler.brackets == 4
    assert load_sweep(base(scheduler=scheduler)).scheduler.brackets == 1
    with raises("scheduler.brackets", "at most 4"):
        load_sweep(base(scheduler={**scheduler, "brackets": 5}))
    with raises("scheduler.brackets", "type: asha", "'hyperband'"):
        load_sweep(base(scheduler={**scheduler, "type": "hyperband", "brackets": 2}))
    with raises("scheduler.brackets", "pasha"):
        load_sweep(base(scheduler={**scheduler, "pasha": True, "brackets": 2}))
    with raises("scheduler.brackets"):
        load_sweep(base(scheduler={**scheduler, "brackets": 0}))


def test_a_simulated_sweep_enters_every_rung_and_replays_the_same_entries():
    run = simulate(SWEEP, Synth(n=81), seed=0, time_budget=None, cost_budget=100.0)
    assert run.outcome.reason == "done" and len(run.trials) == 40
    rows = run.store.trial_rows()
    assert Counter(r["bracket"] for r in rows) == {0: 22, 1: 10, 2: 5, 3: 3}
    # The best quality of the recorded configurations is found at the top rung.
    assert run.best_value == max(r["value"] for r in rows if r["value"] is not None)
    # The planner's job counts the steps of the trials entering later rungs (ASHA promotes a
    # little more than 1/eta of each rung, from its second result on).
    trained = sum(s["stop_step"] - s["start_step"] for s in run.store.segments())
    shape = JobShape(40, 1, 27, 3, brackets=4)
    planned = sum(m * k for m, k in zip(shape.stage_sizes(), shape.stage_steps(), strict=True))
    assert shape.stage_sizes() == [40, 25, 13, 6] and 0.8 * trained <= planned <= trained
    journal = run.store.journal()
    assert replay(ASHA(1, 27, 3, "max", 40, brackets=4), journal) == len(journal)
    with pytest.raises(RestoreError, match="offers"):
        replay(ASHA(1, 27, 3, "max", 40), journal)


def test_a_chosen_count_plans_the_work_of_trials_entering_later_rungs():
    chosen = {k: v for k, v in SWEEP.items() if k != "num_trials"}
    chosen["profile"] = {"seconds_per_step": 10.0}
    counts = {}
    for brackets in (1, 4):
        sweep = {**chosen, "scheduler": {**SWEEP["scheduler"], "brackets": brackets}}
        plan = plan_for(simulated_sweep(sweep, Synth(n=81), seed=0, time_budget=None,
                                        cost_budget=1.0))
        counts[brackets] = plan.num_trials, [r.trials for r in plan.rungs]
        assert plan.feasible and plan.predicted_cost_usd <= 1.0
    # Each trial costs more when some enter at later rungs: fewer fit the same dollars.
    assert counts == {1: (27, [27, 9, 3, 1]), 4: (15, [15, 9, 5, 2])}
    run = simulate(chosen, Synth(n=81), seed=0, time_budget=None, cost_budget=1.0)
    assert run.budget_respected and len({r["bracket"] for r in run.store.trial_rows()}) == 4


def test_a_stopped_sweep_with_brackets_resumes_where_it_stood(tmp_path):
    stop_file = tmp_path / "STOP"
    settings = replace(SIM_SETTINGS, stop_file=stop_file)
    spec = simulated_sweep(SWEEP, Synth(n=81), seed=0, time_budget=None, cost_budget=100.0)
    store = Store(tmp_path / "sweep")
    store.create_experiment("sim", spec.name, {"simulated": "synth"}, "acc", "max", None, 100.0)

    def stop_midway(snapshot):
        if snapshot["total"] >= 20:
            stop_file.touch()

    first, provider, executor = sim_controller(spec, store, settings, observer=stop_midway)
    stopped = run_to_end(first, settings, False, provider, executor)
    assert stopped.outcome.reason == "requested"
    before = {r["trial_id"]: (r["last_step"], r["value"], r["bracket"])
              for r in store.query("SELECT * FROM trials")}
    stop_file.unlink()
    second, provider, executor = sim_controller(spec, store, settings,
                                                prior=(stopped.spend_usd, stopped.wall_s))
    assert second.restore() == len(before)
    resumed = run_to_end(second, settings, False, provider, executor)
    assert resumed.outcome.reason == "done"
    rows = {r["trial_id"]: r for r in store.query("SELECT * FROM trials")}
    assert len(rows) == 40
    # Every trial kept its entry rung and went on from where it stood.
    assert all(rows[t]["bracket"] == b and rows[t]["last_step"] >= step
               for t, (step, _, b) in before.items())
    assert Counter(r["bracket"] for r in rows.values()) == {0: 22, 1: 10, 2: 5, 3: 3}


def test_brackets_sample_with_bohb_unless_the_sweep_names_a_sampler():
    scheduler = {"type": "asha", "max_resource": 27}
    assert load_sweep(base(scheduler={**scheduler, "brackets": 4})).sampler == "bohb"
    assert load_sweep(base(scheduler=scheduler)).sampler == "tpe"
    assert load_sweep(base(scheduler={**scheduler, "brackets": 4}, sampler="tpe")
                      ).sampler == "tpe"
    # The store keeps it (a resumed sweep samples as the first run).
    spec = load_sweep(base(scheduler={**scheduler, "brackets": 4}))
    assert spec.to_json_dict()["sampler"] == "bohb"


def test_a_huge_reduction_factor_plans_and_schedules_without_overflow():
    # (found by the bad-input fuzz: a reduction factor of 10**400 overflowed a float)
    eta = 10**400
    assert entry_shares(2, eta, 1) == [1.0] and entry_shares(2, eta, 2) == [1.0, 0.0]
    assert JobShape(40, 1, 3, eta, brackets=2).stage_sizes() == [40, 1]
    assert ASHA(1, 3, eta, "max", 4, brackets=2).next_job("t0").to_step == 1
