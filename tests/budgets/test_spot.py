"""Spot policy: exploratory rungs on spot, survivors on on-demand, and the deadline-safe
fallback (Can't Be Late's safety net), decided by SpotPolicy and carried out by the controller."""

from __future__ import annotations

import pytest

from budgets import (
    DEFAULT_MARGIN,
    BootLatency,
    FollowPlan,
    InstanceType,
    JobShape,
    PriceBook,
    Profile,
    Replanner,
    SpotPolicy,
    Static,
)
from tests._sims import SHA, Synth
from tuner._config import ProviderConfig
from tuner._errors import ConfigError
from tuner.sim import SimInstanceType, simulate_wired, uniform_boot

GPU = InstanceType("aws", "sim-gpu", "T4", 1, 4, 16, "us-east-1", 1.0, 0.35)
SIM = SimInstanceType("sim-gpu", slots=1, on_demand_per_hour=1.0, spot_per_hour=0.35)


def decide(policy: SpotPolicy, **kw) -> bool:
    args = dict(stage=0, last_stage=3, elapsed_s=0.0, deadline_s=5000.0, remaining_s=3000.0,
                restart_s=400.0)
    return policy.spot(**{**args, **kw})


def test_exploratory_rungs_on_spot_survivors_on_demand():
    p = SpotPolicy("exploratory")
    assert decide(p, stage=0) and decide(p, stage=2)
    assert not decide(p, stage=3)                        # the last rung: on-demand
    # One boot before the plan starts the last rung its instances are bought on-demand.
    assert decide(p, stage=2, elapsed_s=1000.0, last_start_s=1200.0, boot_s=100.0)
    assert not decide(p, stage=2, elapsed_s=1100.0, last_start_s=1200.0, boot_s=100.0)
    # deadline-safe: the last rung stays on spot while the slack allows
    q = SpotPolicy("deadline-safe")
    assert decide(q, stage=3, elapsed_s=3000.0, remaining_s=1000.0)


def test_the_safety_net_trips_when_one_more_preemption_would_be_late_and_stays():
    p = SpotPolicy("deadline-safe")
    assert decide(p, elapsed_s=1000.0, remaining_s=3500.0)   # 500 s of slack >= 400 s
    assert not decide(p, elapsed_s=1000.0, remaining_s=3700.0)   # 300 s < one restart
    assert p.fallen_back
    assert not decide(p, elapsed_s=1000.0, remaining_s=100.0)    # sticky: no switching back
    # safety 2: two restarts' worth of slack; no deadline or no plan: no safety net
    assert decide(SpotPolicy("deadline-safe"), remaining_s=4300.0)              # 700 >= 400
    assert not decide(SpotPolicy("deadline-safe", safety=2.0), remaining_s=4300.0)  # < 800
    assert decide(SpotPolicy("deadline-safe"), deadline_s=None)
    assert decide(SpotPolicy("deadline-safe"), remaining_s=None)


def test_bad_policies_are_refused_with_the_field_named():
    with pytest.raises(ValueError, match="mode"):
        SpotPolicy("sometimes")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="safety"):
        SpotPolicy(safety=-1.0)
    with pytest.raises(ValueError, match="margin"):
        SpotPolicy(margin=1.0)


def test_sweep_config_names_the_policy_and_refuses_it_where_it_cannot_apply():
    for value in (True, False, "exploratory", "deadline-safe"):
        assert ProviderConfig(type="aws", spot=value).spot == value
    with pytest.raises(Exception, match="provider.spot"):
        ProviderConfig(type="aws", spot="sometimes")
    with pytest.raises(ConfigError, match="provider.spot"):
        ProviderConfig(type="local", spot="exploratory")
    # A static cluster is never re-bought on the other market: refused, the field named.
    with pytest.raises(ConfigError, match="provider.spot.*scaling: plan"):
        ProviderConfig(type="aws", spot="exploratory", scaling="static")


def test_a_policy_on_a_fixed_cluster_does_not_starve_the_last_rung():
    # Nothing re-buys a fixed cluster: the policy must not take work from its VMs (the last
    # rung would wait for on-demand VMs that never come). It runs on one market and ends.
    r = simulate_wired(Synth(), metric="acc", mode="max", scheduler=SHA, num_trials=81, workers=9,
                 instance_type=SIM, seed=0, boot_s=lambda rng: 60.0, time_budget_s=20000.0,
                 spot_policy=SpotPolicy("exploratory"))
    assert r.outcome.reason == "done"
    assert sum(s["stop_step"] == 27 and s["state"] == "done" for s in r.store.segments()) == 3


def _runs(deadline_factor: float, seed: int = 0, rate: float = 0.25):
    """The same job (81 trials, rungs 1/3/9/27, 100 s a step) on on-demand and with the
    exploratory policy, under spot preemptions at ``rate`` per VM-hour."""
    common = dict(metric="acc", mode="max", scheduler=SHA, num_trials=81, instance_type=SIM,
                  boot_s=uniform_boot(60, 180), time_scale=10.0, billing_minimum_s=60.0,
                  seed=seed)
    base = simulate_wired(Synth(), workers=81, scaling=Static(81), **common)
    deadline = deadline_factor * base.wall_s
    out = {}
    for name, policy in (("on-demand", None), ("exploratory", SpotPolicy("exploratory"))):
        margin = {"margin": policy.margin} if policy else {}
        rp = Replanner(JobShape(81, 1, 27, 3), Profile(100.0, boot=BootLatency(60, 180)), GPU,
                       deadline, billing_minimum_s=60.0, **margin)
        plan = rp.initial()
        out[name] = simulate_wired(Synth(), workers=max(1, plan.workers_for_rung(0)),
                             scaling=FollowPlan(plan), replanner=rp, time_budget_s=deadline,
                             preemptions_per_hour=rate, spot_policy=policy, **common)
    return deadline, out


@pytest.mark.slow
def test_exploratory_spot_is_cheaper_on_time_and_runs_the_survivors_on_demand():
    deadline, runs = _runs(1.5)
    od, ex = runs["on-demand"], runs["exploratory"]
    assert od.outcome.reason == "done" and ex.outcome.reason == "done"
    assert ex.wall_s <= deadline
    assert ex.spend_usd < 0.85 * od.spend_usd            # spot at 0.35 of the price
    assert ex.best_value == pytest.approx(od.best_value)
    instances = {i["instance_id"]: i for i in ex.store.instances()}
    assert any(i["spot"] for i in instances.values())
    assert not any(i["spot"] for i in od.store.instances())
    # Every segment of the last rung that finished ran on an on-demand instance.
    last = [s for s in ex.store.segments() if s["stop_step"] == 27 and s["state"] == "done"]
    assert len(last) == 3
    assert not any(instances[s["instance_id"]]["spot"] for s in last)


@pytest.mark.slow
def test_preempted_segments_cost_a_segment_never_a_result():
    _, runs = _runs(3.0, seed=1, rate=1.0)
    ex = runs["exploratory"]
    assert ex.provider.fault_counts["preemptions"] > 0
    states = [s["state"] for s in ex.store.segments()]
    assert "preempted" in states
    assert ex.outcome.reason == "done"
    done = [s for s in ex.store.segments() if s["state"] == "done"]
    assert sorted({s["stop_step"] for s in done}) == [1, 3, 9, 27]
    assert sum(s["stop_step"] == 27 for s in done) == 3


def test_a_cloud_sweep_with_a_policy_plans_on_demand_with_slack_and_needs_spot_prices(
        tmp_path, capsys):
    from pathlib import Path

    from tuner._config import load_sweep
    from tuner._planning import instance_types_for, plan_for, replanner_for, spot_policy_for
    from tuner.cli import main

    root = Path(__file__).resolve().parents[2]
    text = (root / "examples" / "digits.yaml").read_text().replace(
        "provider: {type: local, workers: 2, slots: 1, price_per_hour: 1.0}",
        "provider: {type: aws, region: us-east-1, instance_types: [g4dn.xlarge], "
        "spot: exploratory}").replace("budget: {time: 3m, cost: 1.0}", "budget: {time: 1h}")
    path = tmp_path / "sweep.yaml"
    path.write_text(text)
    sweep = load_sweep(str(path))
    policy = spot_policy_for(sweep)
    assert isinstance(policy, SpotPolicy) and policy.mode == "exploratory"
    plan = plan_for(sweep)
    assert plan.feasible and not plan.timeline[0].spot   # priced on-demand: an upper bound
    assert plan.inputs["spot_policy"] == "exploratory"
    # With a tight budget it keeps the policy's margin of the time free; the on-demand
    # sweep's plan keeps only the default margin. Each is the plan the sweep will follow
    # (its re-planner's first).
    tight = tmp_path / "tight.yaml"
    tight.write_text(text.replace("budget: {time: 1h}", "budget: {time: 4m}"))
    spot_sweep = load_sweep(str(tight))
    spot_plan = plan_for(spot_sweep)
    assert spot_plan.feasible and spot_plan.predicted_wall_s <= 240.0 * (1.0 - policy.margin)
    tight.write_text(text.replace("budget: {time: 1h}", "budget: {time: 4m}")
                     .replace("spot: exploratory", "spot: false"))
    od_sweep = load_sweep(str(tight))
    od_plan = plan_for(od_sweep)
    assert od_plan.feasible and od_plan.predicted_wall_s > 240.0 * (1.0 - policy.margin)
    assert od_plan.predicted_wall_s <= 240.0 * (1.0 - DEFAULT_MARGIN)
    assert od_plan.inputs["spot_policy"] is None
    for sw, p in ((spot_sweep, spot_plan), (od_sweep, od_plan)):
        first = replanner_for(sw, p).initial()
        assert [r.workers for r in first.rungs] == [r.workers for r in p.rungs]
        assert first.predicted_wall_s == p.predicted_wall_s
    assert replanner_for(sweep, plan).margin == policy.margin
    assert all(t.spot_per_hour is not None for t in instance_types_for(sweep))
    assert main(["plan", str(path), "--json"]) == 0
    capsys.readouterr()
    # No type it may rent has a spot price: refused, the field named.
    prices = tmp_path / "prices.csv"
    prices.write_text("provider,name,gpu,gpus,vcpus,memory_gib,region,on_demand_per_hour,"
                      "spot_per_hour\naws,g4dn.xlarge,T4,1,4,16,us-east-1,0.526,\n")
    with pytest.raises(ConfigError, match="provider.spot"):
        instance_types_for(sweep, PriceBook(prices, shipped=False))


# -- Uniform Progress (Can't Be Late, Wu et al., NSDI '24) on a hand-made trace --------------
def up(policy: SpotPolicy, t: float, remaining: float, spot_there: bool, *, work=100.0,
       deadline=200.0, d=5.0) -> bool:
    return policy.spot(stage=0, last_stage=0, elapsed_s=t, deadline_s=deadline,
                       remaining_s=remaining, restart_s=d, spot_short=not spot_there)


def test_uniform_progress_follows_the_papers_rules():
    p = SpotPolicy("uniform-progress")
    assert p.safety == 2.0                              # its safety net keeps 2d
    assert up(p, 0.0, 100.0, True)                      # C0 = 100 s, line ep(t) = t / 2
    # Behind the line (done 10 < ep(40) = 20) but spot is there: take it (taking risks).
    assert up(p, 40.0, 90.0, True)
    # Ahead of the line with no spot: wait for it (spot wanted, none bought on-demand).
    assert up(p, 30.0, 80.0, False) and not p.catching_up
    # Behind with no spot: on-demand ...
    assert not up(p, 60.0, 85.0, False) and p.catching_up
    # ... kept while spot is back, until cp(t) >= ep(t + 2d) (hysteresis): at t = 80,
    # ep(90) = 45: 40 done is not enough, 46 is.
    assert not up(p, 80.0, 60.0, True)
    assert up(p, 80.0, 54.0, True) and not p.catching_up
    # The safety net: time left (200 - 150) under the remaining work plus 2d (45 + 10).
    assert not up(p, 150.0, 45.0, True) and p.fallen_back
    assert not up(p, 160.0, 1.0, True)                  # for good


def test_uniform_progress_meets_its_deadline_on_a_trace_with_a_long_outage():
    # One job of 100 s, deadline 160 s, changeover d = 2 s; spot is there for 30 s, gone for
    # 60 s (a zone's outage), back for good. Spot costs 0.3, on-demand 1 per second.
    trace = [True] * 30 + [False] * 60 + [True] * 200
    p = SpotPolicy("uniform-progress")
    done, cost, market, pause, t = 0.0, 0.0, None, 0.0, 0
    used = set()
    while done < 100.0 and t < 160:
        want = up(p, float(t), 100.0 - done, trace[t], deadline=160.0, d=2.0)
        now = "spot" if want and trace[t] else None if want else "od"
        if now != market and now is not None:
            pause = 2.0                                  # a changeover costs d
        market = now
        if market is not None:
            used.add(market)
            cost += 0.3 if market == "spot" else 1.0
            if pause > 0:
                pause -= 1.0
            else:
                done += 1.0
        t += 1
    assert done >= 100.0 and t <= 160                   # the deadline is met
    assert used == {"spot", "od"}                       # on-demand only to catch up
    assert cost < 100.0                                 # cheaper than on-demand throughout


def test_tuning_aware_asks_the_safety_net_again_at_each_rung_boundary():
    p = SpotPolicy("tuning-aware")
    # Stage 1: a long segment's restart (900 s) no longer fits in 500 s of slack.
    assert not decide(p, stage=1, elapsed_s=1000.0, remaining_s=3500.0, restart_s=900.0)
    assert not decide(p, stage=1, elapsed_s=1100.0, remaining_s=100.0)   # that rung: stays
    # The next rung starts from checkpoints anyway: its short segments fit the slack.
    assert decide(p, stage=2, elapsed_s=2000.0, remaining_s=2000.0, restart_s=300.0)
    # deadline-safe stays on-demand for good
    q = SpotPolicy("deadline-safe")
    assert not decide(q, stage=1, elapsed_s=1000.0, remaining_s=3500.0, restart_s=900.0)
    assert not decide(q, stage=2, elapsed_s=2000.0, remaining_s=2000.0, restart_s=300.0)


def test_zones_are_walked_by_price_without_recent_preemptions_nor_dearer_than_on_demand():
    prices = {"a": 1.0, "b": 2.0, "c": 1.5, "d": 5.0}
    taken = {"a": [900.0], "b": [10.0, 20.0]}
    aware = SpotPolicy("tuning-aware")
    # a zone that took a VM back lately is left out while another is left
    assert aware.zone_order(prices, taken, 2000.0, on_demand=3.0) == ["c", "b"]
    assert aware.zone_order(prices, taken, 1000.0, on_demand=3.0) == ["c"]
    assert aware.zone_order({"a": 1.0}, taken, 1000.0) == ["a"]
    # the last rung: the zones that took fewest VMs back in all, then by price
    assert aware.zone_order(prices, taken, 1000.0, final=True, on_demand=3.0) == ["c", "a", "b"]
    # Uniform Progress over several zones: cheapest first
    assert SpotPolicy("uniform-progress").zone_order(prices, taken, 1000.0) == ["a", "c", "b",
                                                                               "d"]
    assert aware.zone_order({"d": 5.0}, {}, 0.0, on_demand=3.0) == ["d"]   # none cheaper: all


@pytest.mark.slow
def test_turning_to_on_demand_replaces_the_spot_cluster_once_not_at_every_tick():
    """The safety net trips mid-sweep: the on-demand cluster that replaces the spot one is
    sized by the plan (before, each tick while jobs queued launched one on-demand instance
    per leaving spot one, and a segment ending on a leaving spot instance counted as a queued
    job: 59 on-demand instances where the on-demand run rents 8)."""
    from tuner.sim import SAMPLE_DIR, discover, load_curves, simulate

    curves = load_curves(SAMPLE_DIR, discover(SAMPLE_DIR)[0], max_configs=27)

    def run(spot):
        sweep = {"scheduler": {"type": "sha", "min_resource": 1, "max_resource": 9},
                 "num_trials": 27,
                 "provider": {"type": "aws", "instance_types": ["g4dn.xlarge"], "spot": spot},
                 "profile": {"seconds_per_step": 60.0, "boot_s": [60, 180]}}
        return simulate(sweep, curves, seed=2, preemptions_per_hour=1.0, time_budget=9000.0,
                        cost_budget=None)

    on_demand, safe = run(False), run("deadline-safe")
    bought = [i for i in safe.store.instances() if not i["spot"]]
    assert bought, "the safety net did not trip"
    assert len(bought) <= 2 * len(on_demand.store.instances())
    assert safe.spend_usd < on_demand.spend_usd


class _DearFirstStep(Synth):
    """Synth whose first step costs 7x a later one (LCBench's first epochs cost 2-8x)."""

    def cost_s(self, c, a, b):
        return 10.0 * (b - a) + (60.0 if a == 0 and b > 0 else 0.0)

    def diverged(self, c):
        return False


@pytest.mark.slow
def test_the_net_keeps_the_profiles_prediction_while_only_first_segments_are_measured():
    # The cold profile says 100 s a step; the first segments take 700 s. Until a later segment
    # tells a first step's extra from the steps, the re-planner counts it all as steps and
    # predicts the sweep far longer than it runs (here: no plan meets the deadline); the
    # safety net keeps the profile's prediction meanwhile, so the first rung runs on spot
    # (counting its first segments' time as steps, the net tripped 792 s in, after 10 of
    # its 81 segments), and the deadline holds.
    from tuner.sim import simulate

    curves = _DearFirstStep()
    sweep = {"metric": "acc", "mode": "max", "scheduler": SHA, "num_trials": 81,
             "provider": {"type": "gcp", "region": "us-central1", "zone": "us-central1-a",
                          "machine_types": ["g2-standard-4"], "billing_minimum_s": 60.0},
             "profile": {"seconds_per_step": 100.0, "boot_s": [60, 180]}}
    base = simulate({**sweep, "provider": {**sweep["provider"], "scaling": "static",
                                           "workers": 81}},
                    curves, seed=0, time_scale=10.0, time_budget=None, cost_budget=1e6)
    deadline = 1.5 * base.wall_s
    r = simulate({**sweep, "provider": {**sweep["provider"], "spot": "deadline-safe"}},
                 curves, seed=0, time_scale=10.0, time_budget=deadline, cost_budget=None)
    assert r.outcome.reason == "done" and r.wall_s <= deadline
    spot = {i["instance_id"] for i in r.store.instances() if i["spot"]}
    first = [s for s in r.store.segments() if s["stop_step"] == 1 and s["state"] == "done"]
    assert len(first) == 81 and sum(s["instance_id"] in spot for s in first) >= 60
