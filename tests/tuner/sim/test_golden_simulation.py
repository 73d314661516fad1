"""Seeded simulated sweeps, built as ``tune()`` builds them (``tuner.sim.simulate``), whose
outcomes must not move while the controller is rebuilt: each trial's end, the bill, the wall
time and the plans, recorded in ``tests/golden/simulated_sweeps.json``.

A change of behaviour on purpose re-records them (``ELASTUNE_RECORD_GOLDEN=1 pytest
tests/tuner/sim/test_golden_simulation.py``) in the commit that makes it, saying why.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tests._sims import ASHA, SHA, Synth
from tuner.sim import SimFaults, simulate

GOLDEN = Path(__file__).resolve().parents[2] / "golden" / "simulated_sweeps.json"
AWS = {"type": "aws", "instance_types": ["g5.xlarge"]}
BOOT = {"boot_s": [60, 180]}          # the simulated cloud's boot latency, U(60, 180) s


def _sweep(scheduler, num_trials, provider, **more):
    return {"metric": "acc", "mode": "max", "scheduler": scheduler, "num_trials": num_trials,
            "provider": provider, **more}


CASES = {
    "sha-static": lambda: simulate(
        _sweep(SHA, 81, {"type": "local", "workers": 9}, profile=BOOT), Synth(), seed=0,
        time_budget=None, cost_budget=100.0),
    "asha-noisy-spot": lambda: simulate(
        _sweep(ASHA, 81, {**AWS, "spot": True, "scaling": "static", "workers": 6}), Synth(),
        seed=1, step_noise=0.2, preemptions_per_hour=1.0, time_budget="6h", cost_budget=None),
    "hyperband": lambda: simulate(
        _sweep({**ASHA, "type": "hyperband"}, None, {"type": "local", "workers": 5},
               profile=BOOT), Synth(), seed=2, time_budget=None, cost_budget=100.0),
    "sha-follows-plan": lambda: simulate(
        _sweep(SHA, 81, AWS, profile={"seconds_per_step": 10.0}), Synth(), seed=3,
        step_noise=0.1, time_budget=4000.0, cost_budget=None),
    "chosen-count": lambda: simulate(
        _sweep(SHA, None, AWS, profile={"seconds_per_step": 10.0}), Synth(), seed=4,
        time_budget=6000.0, cost_budget=0.6),
    "release-idle": lambda: simulate(
        _sweep(SHA, 81, {"type": "local", "workers": 9, "scaling": "release-idle"},
               profile=BOOT), Synth(), seed=6, time_budget=None, cost_budget=100.0),
    "asha-faults": lambda: simulate(
        _sweep(ASHA, 81, {**AWS, "spot": True, "scaling": "static", "workers": 6},
               max_failures=1), Synth(), seed=5, preemptions_per_hour=0.5,
        faults=SimFaults(app_error_prob=0.15, nan_prob=0.02, worker_losses_per_hour=1.0,
                         vm_failures_per_hour=0.2, spot_notice_s=30.0),
        time_budget=20_000.0, cost_budget=None),
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
