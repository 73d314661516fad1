"""``elastune plan`` describes what ``elastune run`` does: the same workers and bill for a
local sweep, and the same step times, which it says where it found (the default profile, the
sweep's own, or what an earlier run of the same trainable measured)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tuner._config import load_sweep
from tuner._profiles import DEFAULT, SWEEP, measured_profile, trainable_key, with_profile
from tuner._store import Store

ROOT = Path(__file__).resolve().parents[2]

SWEEP_YAML = """\
name: agree
trainable: tests.trainables:quadratic
metric: score
mode: max
space: {x: {uniform: [0.0, 1.0]}, sleep: 0.05}
scheduler: {type: asha, min_resource: 1, max_resource: 9, reduction_factor: 3}
num_trials: 9
seed: 1
budget: {time: 2m, cost: 1.0}
provider: {type: local, workers: 3, price_per_hour: 1.0}
"""


def _cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    return subprocess.run([sys.executable, "-m", "tuner.cli", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=180)


def test_plan_and_run_agree_on_workers_and_bill_and_the_next_plan_uses_measured_steps(
        tmp_path):
    sweep = tmp_path / "sweep.yaml"
    sweep.write_text(SWEEP_YAML)
    out = _cli("plan", str(sweep), "--json", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    plan = json.loads(out.stdout)
    assert plan["profile_source"] == "default"
    assert {r["workers"] for r in plan["rungs"]} == {3}        # the sweep's fixed cluster
    assert plan["timeline"][0]["workers"] == 3
    assert abs(plan["predicted_cost_usd"] - 3 * 60 / 3600) < 1e-6   # 3 billing minimums

    run = _cli("run", str(sweep), "--json", "--dir", "experiments/first", cwd=tmp_path)
    assert run.returncode == 0, run.stderr[-2000:]
    doc = json.loads(run.stdout)
    assert abs(doc["spend_usd"] - plan["predicted_cost_usd"]) < 1e-6
    store = Store(tmp_path / "experiments" / "first", readonly=True)
    assert len(store.instances()) == 3
    assert store.plans()[0]["planner"] == "static"
    assert store.plans()[0]["predicted_wall_s"] == plan["predicted_wall_s"]
    measured = measured_profile(store)
    store.close()
    # 0.05 s a step plus each segment's start: far from the default profile's 1 s.
    assert measured is not None and 0.02 < measured["seconds_per_step"] < 0.8

    text = _cli("plan", str(sweep), cwd=tmp_path)
    assert "measured by an earlier run" in text.stdout and "experiments/first" in text.stdout
    again = json.loads(_cli("plan", str(sweep), "--json", cwd=tmp_path).stdout)
    assert again["profile_source"] == "measured: experiments/first"
    assert again["predicted_wall_s"] < plan["predicted_wall_s"]
    second = _cli("run", str(sweep), "--json", "--dir", "experiments/second", cwd=tmp_path)
    assert second.returncode == 0, second.stderr[-2000:]
    store = Store(tmp_path / "experiments" / "second", readonly=True)
    assert store.meta("profile_source") == "measured: experiments/first"
    assert store.plans()[0]["predicted_wall_s"] == again["predicted_wall_s"]
    store.close()


def test_a_changed_trainable_or_a_profile_section_is_not_planned_from_an_old_run(tmp_path):
    module = tmp_path / "mytrain.py"
    module.write_text("def train(params, ctx):\n    pass\n")
    config = {"trainable": "mytrain:train", "metric": "m", "mode": "max",
              "space": {"x": 1.0}, "num_trials": 3, "base_dir": tmp_path,
              "scheduler": {"type": "asha", "min_resource": 1, "max_resource": 9},
              "budget": {"time": "1m", "cost": 1.0}}
    key = trainable_key(load_sweep(config))
    assert key is not None and key.startswith("mytrain:train ")
    old = tmp_path / "root" / "old"
    old.mkdir(parents=True)
    store = Store(old)
    store.create_experiment("old", "old", {}, "m", "max", None, None)
    store.set_meta("trainable_key", key)
    store.add_trial("t1", 1, {}, 0, 0.0)
    for k, (a, b, t0, t1) in enumerate([(0, 1, 0.0, 2.0), (1, 3, 2.0, 6.0), (3, 9, 6.0, 18.0)]):
        store.add_segment(f"old/t1/s{k}", "t1", "i", a, b, 1, t0)
        store.update_segment(f"old/t1/s{k}", state="done", started_at=t0, finished_at=t1,
                             last_step=b)
    store.close()
    sweep, source = with_profile(load_sweep(config), tmp_path / "root")
    assert source == "measured: " + str(old)
    assert sweep.profile.seconds_per_step == 2.0   # (2 + 4 + 12) s over 9 steps
    module.write_text("def train(params, ctx):\n    return None\n")   # other code
    assert with_profile(load_sweep(config), tmp_path / "root")[1] == DEFAULT
    module.write_text("def train(params, ctx):\n    pass\n")
    own = {**config, "profile": {"seconds_per_step": 5.0}}
    sweep, source = with_profile(load_sweep(own), tmp_path / "root")
    assert source == SWEEP and sweep.profile.seconds_per_step == 5.0


WARMING_YAML = """\
name: warm
trainable: tests.trainables:warming
metric: score
mode: max
space: {x: {uniform: [0.0, 1.0]}, sleep: 0.1, first: 5.0, second: 2.5}
scheduler: {type: asha, min_resource: 1, max_resource: 9, reduction_factor: 3}
num_trials: 9
seed: 1
budget: {time: 2m, cost: 1.0}
provider: {type: local, workers: 3, price_per_hour: 1.0}
"""


def test_profile_prints_what_a_sweep_measured_and_a_later_sweep_starts_from_it(tmp_path):
    import yaml

    (tmp_path / "sweep.yaml").write_text(WARMING_YAML)
    run = _cli("run", "sweep.yaml", "--json", "--dir", "experiments/first", cwd=tmp_path)
    assert run.returncode == 0, run.stderr[-2000:]
    out = _cli("profile", "experiments/first", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("# measured by experiment ")
    measured = yaml.safe_load(out.stdout)["profile"]
    # 0.1 s a later step; the first two cost 5x and 2.5x that (setup adds to the first)
    assert 0.08 < measured["seconds_per_step"] < 0.2
    assert 3.5 < measured["step_costs"][0] < 9 and 1.8 < measured["step_costs"][1] < 4
    doc = json.loads(_cli("profile", "experiments/first", "--json", cwd=tmp_path).stdout)
    # (JSON keys are strings: the pace quantiles read back as "0.5", not 0.5)
    assert doc["profile"] == json.loads(json.dumps(measured))
    assert "local" in doc["notes"]["boot_s_by_type"]

    # Another trainable (no earlier run of it): planned at the default profile unless told.
    other = WARMING_YAML.replace("tests.trainables:warming", "tests.trainables:quadratic")
    (tmp_path / "other.yaml").write_text(other)
    cold = json.loads(_cli("plan", "other.yaml", "--json", cwd=tmp_path).stdout)
    assert cold["profile_source"] == "default"
    (tmp_path / "carried.yaml").write_text(
        other + "profile: {from: experiments/first, restore_s: 0.5}\n")
    plan = _cli("plan", "carried.yaml", "--json", cwd=tmp_path)
    assert plan.returncode == 0, plan.stderr
    carried = json.loads(plan.stdout)
    assert carried["profile_source"] == "from: experiments/first"
    assert carried["predicted_wall_s"] < cold["predicted_wall_s"]   # 0.1 s steps, not 1 s
    assert "(from)" in _cli("plan", "carried.yaml", cwd=tmp_path).stdout
    second = _cli("run", "carried.yaml", "--json", "--dir", "experiments/second", cwd=tmp_path)
    assert second.returncode == 0, second.stderr[-2000:]
    store = Store(tmp_path / "experiments" / "second", readonly=True)
    profile = store.experiment()["config"]["profile"]
    store.close()
    assert profile["from"] == "experiments/first" and profile["restore_s"] == 0.5
    assert profile["step_costs"] == measured["step_costs"]

    (tmp_path / "nowhere.yaml").write_text(other + "profile: {from: experiments/none}\n")
    bad = _cli("plan", "nowhere.yaml", cwd=tmp_path)
    assert bad.returncode == 2 and "profile.from" in bad.stderr
    assert _cli("profile", "experiments/none", cwd=tmp_path).returncode == 2
