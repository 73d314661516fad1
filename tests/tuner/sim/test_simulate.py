"""The real controller on simulated parts: clock, provider (boot, capacity, preemption), curves."""

from __future__ import annotations

from collections import Counter

import pytest

from tests._sims import ASHA, SHA, Synth
from tuner.sim import simulate_wired


def test_sha_in_simulation_runs_the_stage_sizes_and_is_deterministic():
    runs = [simulate_wired(Synth(), metric="acc", mode="max", scheduler=SHA, num_trials=81,
                     workers=8, cost_budget_usd=100.0, seed=3) for _ in range(2)]
    a, b = runs
    assert a.wall_s == b.wall_s and a.spend_usd == b.spend_usd
    assert list(a.trials["params.config"]) == list(b.trials["params.config"])
    counts = Counter(s["stop_step"] for s in a.store.segments())
    assert counts == {1: 81, 3: 27, 9: 9, 27: 3}
    assert a.best_value == pytest.approx(max(Synth().value(c, 27) for c in Synth().q))
    # Boot U(60, 180) s, then 243 steps of 10 s on 8 workers, plus stragglers.
    assert 60 + 2430 / 8 <= a.wall_s <= 180 + 2430 / 8 * 2


def test_each_trial_gets_a_distinct_configuration():
    r = simulate_wired(Synth(), metric="acc", mode="max", scheduler=ASHA, num_trials=81, workers=4,
                 cost_budget_usd=100.0, seed=0)
    assert r.trials["params.config"].nunique() == 81


def test_spend_never_passes_the_cost_budget_in_simulation():
    for budget in (0.2, 0.35, 0.5):
        r = simulate_wired(Synth(), metric="acc", mode="max", scheduler=ASHA, num_trials=81,
                     workers=8, cost_budget_usd=budget, seed=1)
        assert r.budget_respected and r.spend_usd <= budget, (budget, r.spend_usd)
        assert r.outcome.reason == "budget"


def test_the_deadline_ends_a_simulated_sweep_with_the_best_so_far():
    r = simulate_wired(Synth(), metric="acc", mode="max", scheduler=ASHA, num_trials=81, workers=4,
                 time_budget_s=400.0, seed=2)
    assert r.outcome.reason == "deadline" and r.deadline_met
    assert r.best_value is not None
    assert "stopped" in set(r.trials["state"])


def test_diverged_runs_are_failed_trials():
    diverge = {f"c{i}": 2 for i in range(0, 81, 9)}
    r = simulate_wired(Synth(diverge=diverge), metric="acc", mode="max", scheduler=SHA,
                       num_trials=81, workers=8, cost_budget_usd=100.0, seed=0)
    failed = r.trials[r.trials["state"] == "failed"]
    # Every trial runs rung 0 (1 step); a diverged one fails when promoted to step 3.
    ids = Synth().config_ids()
    assert failed.shape[0] >= 1
    assert {ids[i] for i in failed["params.config"]} <= set(diverge)
    assert r.outcome.state == "finished"


def test_runs_that_planned_fewer_steps_end_their_trials_instead_of_failing():
    # As a real trainable that returns early: the segment ENDS at the curve's last step, the
    # trial completes there with its value, and nothing counts against max_failures.
    shorter = {f"c{i}": 2 for i in range(0, 81, 9)}
    r = simulate_wired(Synth(shorter=shorter), metric="acc", mode="max", scheduler=SHA,
                       num_trials=81, workers=8, cost_budget_usd=100.0, seed=0)
    assert "failed" not in set(r.trials["state"])
    ended = [s for s in r.store.segments() if s["state"] == "ended"]
    ids = Synth().config_ids()
    assert ended, "no shorter run was promoted past its end"
    by_trial = dict(zip(r.trials["trial_id"], (ids[i] for i in r.trials["params.config"]),
                        strict=True))
    for seg in ended:
        assert by_trial[seg["trial_id"]] in shorter and seg["last_step"] == 2
    done = r.trials.set_index("trial_id").loc[[s["trial_id"] for s in ended]]
    assert set(done["state"]) == {"completed"} and (done["last_step"] == 2).all()


def test_spot_preemptions_cost_segments_not_trials():
    r = simulate_wired(Synth(), metric="acc", mode="max", scheduler=ASHA, num_trials=81, workers=8,
                 spot=True, preemptions_per_hour=6.0, cost_budget_usd=100.0, seed=4)
    lost = [s for s in r.store.segments() if s["state"] == "preempted"]
    assert lost, "no preemption happened"
    assert any(i["preempted"] for i in r.store.instances())
    assert set(r.trials["state"]) <= {"completed", "pruned"}
    assert len(r.store.instances()) > 8        # preempted instances were replaced
    for trial in r.trials.itertuples():        # curves continue from the last rung
        steps = [x["step"] for x in r.store.reports(trial.trial_id)]
        assert steps == list(range(1, trial.last_step + 1))


def test_capacity_failures_are_retried():
    r = simulate_wired(Synth(n=27), metric="acc", mode="max", scheduler=ASHA, num_trials=27,
                 workers=4, capacity_failure_prob=0.5, cost_budget_usd=100.0, seed=5)
    assert r.outcome.state == "finished" and r.outcome.reason == "done"
    assert len(r.trials) == 27


def _sha_plan(sizes, workers_cap):
    from budgets import Plan, RungPlan

    rungs = [RungPlan(k, m, r, 1, min(m, workers_cap), 0.0, 0.0)
             for k, (m, r) in enumerate(zip(sizes, [1, 3, 9, 27], strict=True))]
    return Plan(True, 0.0, 0.0, sizes[0], rungs, [])


def test_elastic_policies_cost_less_than_a_static_cluster_for_the_same_sweep():
    from budgets import FollowPlan, ReleaseIdle

    common = dict(metric="acc", mode="max", scheduler=SHA, num_trials=81, workers=27,
                  cost_budget_usd=100.0, seed=0, boot_s=lambda rng: 60.0)
    static = simulate_wired(Synth(), **common)
    naive = simulate_wired(Synth(), scaling=ReleaseIdle(27), **common)
    planned = simulate_wired(Synth(), scaling=FollowPlan(_sha_plan([81, 27, 9, 3], 27)), **common)
    for run in (naive, planned):
        assert run.best_value == static.best_value            # the same sweep...
        assert Counter(run.trials["state"]) == Counter(static.trials["state"])
        assert run.spend_usd < static.spend_usd                # ...for less money
        assert run.wall_s <= static.wall_s * 1.05
    # Instances were really released mid-sweep: some ended well before the sweep did.
    ends = [i["terminated_at"] for i in planned.store.instances()]
    assert min(ends) < planned.outcome.finished_at - 100


def test_a_drained_worker_finishes_its_segment_first():
    from cloud import Node, reconcile

    nodes = [Node("a", 0.0, True, True), Node("b", 0.0, True, False), Node("c", 50.0, False,
                                                                           False)]
    # Surplus 2: the booting node goes first, then the idle one (past its 60 s minimum).
    s = reconcile(1, nodes, now=100.0, billing_minimum_s=60.0)
    assert s.terminate == ["c", "b"] and s.drain == [] and s.launch == 0
    # Surplus 3 (target 0): the busy one drains rather than being cut.
    s = reconcile(0, nodes, now=100.0, billing_minimum_s=60.0)
    assert s.drain == ["a"]
    # An idle node inside its paid minimum is kept for now.
    s = reconcile(0, [Node("d", 90.0, True, False)], now=100.0, billing_minimum_s=60.0)
    assert s.terminate == [] and s.drain == []
    assert reconcile(5, nodes, now=0.0, billing_minimum_s=60.0).launch == 2


def test_a_simulated_sweep_starts_from_the_plan_elastune_plan_previews():
    # Benchmarks size budgets from the preview of the sweep they simulate (simulated_sweep):
    # it is the sweep simulate() runs, so the first plan followed is the one previewed.
    from tuner._planning import plan_for
    from tuner.sim import simulate, simulated_sweep

    sweep = {"metric": "acc", "scheduler": SHA, "num_trials": 81,
             "provider": {"type": "aws", "instance_types": ["g4dn.xlarge"]},
             "profile": {"seconds_per_step": 10.0}}
    spec = simulated_sweep(sweep, Synth(), seed=3, time_budget=2000.0, cost_budget=None)
    assert (spec.seed, spec.num_trials, spec.time_budget_s) == (3, 81, 2000.0)
    preview = plan_for(spec).to_json()
    first = simulate(sweep, Synth(), seed=3, time_budget=2000.0, cost_budget=None
                     ).store.plans()[0]
    for key in ("predicted_cost_usd", "predicted_wall_s", "num_trials", "rungs"):
        assert first[key] == preview[key], key
    assert max(r["workers"] for r in first["rungs"]) > 1
