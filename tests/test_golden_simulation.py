"""Seeded simulated sweeps whose outcomes must not move while the controller is rebuilt: each
trial's end, the bill, the wall time and the plans, recorded in ``golden/simulated_sweeps.json``.

A change of behaviour on purpose re-records them (``ELASTUNE_RECORD_GOLDEN=1 pytest
tests/test_golden_simulation.py``) in the commit that makes it, saying why.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from budgets import BootLatency, FollowPlan, InstanceType, JobShape, Profile, Replanner, Static
from tests.test_simulate import ASHA, SHA, Synth
from tuner.sim import SimFaults, simulate_wired

GOLDEN = Path(__file__).parent / "golden" / "simulated_sweeps.json"
GPU = InstanceType("aws", "sim-gpu", "T4", 1, 4, 16, "us-east-1", 1.0, 0.35)   # as simulated


def _planned(deadline: float, budget: float | None = None, **kw):
    """A sweep following the re-planner's plan, as a cloud sweep does."""
    num_trials = kw.pop("num_trials", 81)
    rp = Replanner(JobShape(num_trials, 1, 27, 3), Profile(10.0, boot=BootLatency(60, 180)),
                   GPU, deadline, cost_budget_usd=budget, **kw)
    plan = rp.initial()
    return dict(num_trials=num_trials, workers=max(1, plan.workers_for_rung(0)),
                scaling=FollowPlan(plan), replanner=rp, time_budget_s=deadline,
                cost_budget_usd=budget)


CASES = {
    "sha-static": lambda: simulate_wired(Synth(), metric="acc", mode="max", scheduler=SHA,
                                   num_trials=81, workers=9, seed=0),
    "asha-noisy-spot": lambda: simulate_wired(Synth(), metric="acc", mode="max", scheduler=ASHA,
                                        num_trials=81, workers=6, seed=1, step_noise=0.2,
                                        spot=True, preemptions_per_hour=1.0),
    "hyperband": lambda: simulate_wired(Synth(), metric="acc", mode="max",
                                  scheduler={**ASHA, "type": "hyperband"}, num_trials=None,
                                  workers=5, seed=2, scaling=Static(5)),
    "sha-follows-plan": lambda: simulate_wired(Synth(), metric="acc", mode="max", scheduler=SHA,
                                         seed=3, step_noise=0.1, **_planned(4000.0)),
    "chosen-count-brackets": lambda: simulate_wired(
        Synth(n=81), metric="acc", mode="max", scheduler={**SHA, "max_resource": 27}, seed=4,
        more_brackets=True, **_planned(6000.0, budget=3.0, num_trials=27, max_trials=81)),
    "asha-faults": lambda: simulate_wired(
        Synth(), metric="acc", mode="max", scheduler=ASHA, num_trials=81, workers=6, seed=5,
        max_failures=1, spot=True, preemptions_per_hour=0.5, time_budget_s=20_000.0,
        faults=SimFaults(app_error_prob=0.15, nan_prob=0.02, worker_losses_per_hour=1.0,
                         vm_failures_per_hour=0.2, spot_notice_s=30.0)),
}


def _outcome(r) -> dict:
    trials = [[t.trial_id, t.state, int(t.last_step),
               None if t.value != t.value or t.value is None else round(float(t.value), 9)]
              for t in r.trials.itertuples()]
    plans = r.store.plans()
    return {"state": r.outcome.state, "reason": r.outcome.reason,
            "spend_usd": round(r.spend_usd, 9), "wall_s": round(r.wall_s, 6),
            "best_value": None if r.best_value is None else round(r.best_value, 9),
            "trials": trials, "plans": len(plans),
            "instances": len(r.store.instances()), "segments": len(r.store.segments())}


@pytest.mark.parametrize("name", sorted(CASES))
def test_a_seeded_simulated_sweep_ends_as_recorded(name):
    got = _outcome(CASES[name]())
    if os.environ.get("ELASTUNE_RECORD_GOLDEN"):
        recorded = json.loads(GOLDEN.read_text()) if GOLDEN.exists() else {}
        recorded[name] = got
        GOLDEN.write_text(json.dumps(recorded, indent=1, sort_keys=True) + "\n")
    expected = json.loads(GOLDEN.read_text())[name]
    assert got == expected
