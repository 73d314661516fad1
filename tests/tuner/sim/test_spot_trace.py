"""Spot capacity replayed from traces: reading a trace folder, mapping the simulated clock onto
it, and the simulated provider's launches and preemptions per zone."""

from __future__ import annotations

import gzip
import math

import pytest

from budgets import SimClock
from tuner.sim import (
    SAMPLE_TRACES,
    SimInstanceType,
    SimProvider,
    TraceReplay,
    load_spot_traces,
    replay_for,
)
from tuner.sim._spot_trace import zone_price_factors

GPU = SimInstanceType("gpu", slots=1, on_demand_per_hour=1.0, spot_per_hour=0.4)


def write_traces(folder, counts: dict[str, list[int | None]], prices: dict[str, float],
                 step: int = 600) -> None:
    """A trace folder laid out like ``../shared/data/spot_traces`` (None: a missing round)."""
    folder.mkdir(parents=True, exist_ok=True)
    rows = ["trace_id,cloud,region_or_zone,instance_type,t_s,available,n_launched"]
    for zone, cs in counts.items():
        rows += [f"gcp_{zone},gcp,{zone},x,{i * step},{int(c > 0)},{c}"
                 for i, c in enumerate(cs) if c is not None]
    with gzip.open(folder / "availability.csv.gz", "wt") as f:
        f.write("\n".join(rows) + "\n")
    summary = ["trace_id,zone,region,step_s,gpu_spot_price_usd_per_gpu_hour"]
    summary += [f"gcp_{z},{z},{z.rsplit('-', 1)[0]},{step},{prices[z]}" for z in counts]
    (folder / "traces.csv").write_text("\n".join(summary) + "\n")


def test_a_trace_folder_is_read_by_zone_with_missing_rounds_carried_forward(tmp_path):
    write_traces(tmp_path, {"us-a-1": [3, None, 0, 2], "eu-b-1": [1, 1, 1, 1]},
                 {"us-a-1": 2.0, "eu-b-1": 1.0})
    traces = load_spot_traces(tmp_path)
    assert list(traces) == ["eu-b-1", "us-a-1"]          # discovered, sorted
    assert traces["us-a-1"].counts == (3, 3, 0, 2)       # the gap holds the last value
    assert traces["us-a-1"].region == "us-a" and traces["us-a-1"].price == 2.0
    assert traces["us-a-1"].available_fraction() == 0.75
    # Prices relative to the catalog region's zones, else to the median zone.
    assert zone_price_factors(traces, "us-a") == {"eu-b-1": 0.5, "us-a-1": 1.0}
    assert zone_price_factors(traces, "nowhere") == {"eu-b-1": 1 / 1.5, "us-a-1": 2 / 1.5}
    with pytest.raises(FileNotFoundError, match="availability.csv.gz"):
        load_spot_traces(tmp_path / "none")


def test_the_shipped_sample_reads_and_carries_its_licence():
    traces = load_spot_traces(SAMPLE_TRACES)
    assert len(traces) == 3 and all(len(t.counts) == 432 for t in traces.values())
    assert "Apache License" in (SAMPLE_TRACES / "LICENSE").read_text()
    assert "SkyNomad" in (SAMPLE_TRACES / "NOTICE").read_text()


def test_the_clock_maps_onto_the_trace_with_an_offset_and_compression(tmp_path):
    write_traces(tmp_path, {"z-a-1": [4, 4, 1, 4, 0, 4]}, {"z-a-1": 1.0})
    traces = load_spot_traces(tmp_path)
    replay = TraceReplay(traces, offset_s=600.0, compression=10.0)   # 60 s per round
    assert [replay.capacity("z-a-1", t) for t in (0, 59, 60, 120, 180, 240)] == [4, 4, 1, 4,
                                                                                 0, 4]
    assert replay.capacity("z-a-1", 300) == 4                      # wraps round to round 0
    assert replay.first_below("z-a-1", 0.0, 2) == 60.0             # round 2 holds 1 < 2
    assert replay.first_below("z-a-1", 0.0, 1) == 180.0            # round 4 holds 0
    assert math.isinf(replay.first_below("z-a-1", 0.0, 0))
    a, b = replay_for(traces, None, seed=3, compression=1.0), replay_for(traces, None, seed=3,
                                                                         compression=1.0)
    assert a.offset_s == b.offset_s and 0 <= a.offset_s < 3600     # seeded, inside the trace
    with pytest.raises(ValueError, match="compression"):
        TraceReplay(traces, compression=0.0)


def provider_on(tmp_path, counts, prices, **kw):
    write_traces(tmp_path, counts, prices)
    clock = SimClock()
    traces = load_spot_traces(tmp_path)
    replay = TraceReplay(traces, compression=1.0)
    factors = zone_price_factors(traces, None)
    return clock, SimProvider(clock, types=(GPU,), spot_replay=replay,
                              zone_spot_factor=factors, **kw)


def test_spot_launches_take_what_each_zone_has_in_the_order_preferred(tmp_path):
    clock, p = provider_on(tmp_path, {"a-x-1": [2, 2, 2], "b-x-1": [3, 3, 3], "c-x-1": [0, 5, 5]},
                           {"a-x-1": 1.0, "b-x-1": 2.0, "c-x-1": 3.0})
    p.prefer_zones(["b-x-1", "a-x-1"])
    got = p.launch(4, "gpu", spot=True)
    assert [i.zone for i in got] == ["b-x-1"] * 3 + ["a-x-1"]
    assert {i.zone: i.price_per_hour for i in got} == {"b-x-1": 0.4, "a-x-1": 0.2}
    assert p.price_per_hour("gpu", True) == pytest.approx(0.6)     # the dearest zone: c
    # What is held counts: one more in a, then none anywhere that is preferred.
    assert [i.zone for i in p.launch(5, "gpu", spot=True)] == ["a-x-1"]
    from cloud import CapacityError
    with pytest.raises(CapacityError, match="no spot capacity"):
        p.launch(1, "gpu", spot=True)
    # On-demand is not limited by the trace, and has no zone.
    assert [i.zone for i in p.launch(2, "gpu", spot=False)] == ["", ""]
    p.prefer_zones([])                                             # all zones again
    assert p.zones == ["a-x-1", "b-x-1", "c-x-1"]


def test_a_zone_whose_capacity_falls_takes_its_youngest_vms_back_with_notice(tmp_path):
    clock, p = provider_on(tmp_path, {"a-x-1": [3, 3, 1, 1, 3]}, {"a-x-1": 1.0})
    first = p.launch(3, "gpu", spot=True)
    ids = [i.instance_id for i in first]
    # Round 2 (t = 1200) holds 1: the two youngest go then, the oldest stays.
    assert [p.ended_at(i) for i in ids] == [None, 1200.0, 1200.0]
    assert p.interruption_notices(1170.0, 30.0) == set(ids[1:])
    assert p.interruption_notices(1100.0, 30.0) == set()
    # The oldest terminated by the sweep first: the younger ones move up a rank.
    clock.advance_to(100.0)
    p.terminate([ids[0]])
    assert [p.ended_at(i) for i in ids[1:]] == [None, 1200.0]
    clock.advance_to(1200.0)
    states = {i.instance_id: i for i in p.list()}
    assert states[ids[2]].preempted and not states[ids[1]].preempted
    assert p.fault_counts["preemptions"] == 1


@pytest.mark.slow
def test_a_sweep_replays_the_sample_traces_across_zones_through_simulate():
    """One construction path: provider.zones and provider.spot as a user sets them, the
    capacity replayed; the tuning-aware policy spreads over zones, meets its deadline and
    pays less than on-demand in the same world."""
    from tuner.sim import SAMPLE_DIR, SimFaults, discover, load_curves, simulate

    curves = load_curves(SAMPLE_DIR, discover(SAMPLE_DIR)[0], max_configs=27)
    traces = load_spot_traces(SAMPLE_TRACES)
    replay = replay_for(traces, None, seed=1, compression=20.0)

    def run(spot):
        sweep = {"scheduler": {"type": "sha", "min_resource": 1, "max_resource": 9},
                 "num_trials": 27,
                 "provider": {"type": "gcp", "region": "us-central1", "spot": spot,
                              "machine_types": ["g2-standard-4"], "zones": list(traces)},
                 "profile": {"seconds_per_step": 60.0, "boot_s": [60, 180]}}
        return simulate(sweep, curves, seed=1, spot_traces=replay,
                        faults=SimFaults(spot_notice_s=30.0), time_budget=12000.0,
                        cost_budget=None)

    on_demand, aware = run(False), run("tuning-aware")
    assert on_demand.outcome.reason == aware.outcome.reason == "done"
    assert aware.deadline_met and aware.spend_usd < on_demand.spend_usd
    spot = [i for i in aware.store.instances() if i["spot"]]
    assert spot and all(i["zone"] in traces for i in spot)
    assert aware.provider is not None and aware.provider.fault_counts["preemptions"] > 0
    # A preempted segment resumes: no trial fails for it (the sample's diverged curves fail
    # in both runs alike).
    failed = {k: set(r.trials[r.trials["state"] == "failed"]["params.config"])
              for k, r in (("od", on_demand), ("aware", aware))}
    assert failed["aware"] == failed["od"]
    with pytest.raises(Exception, match="provider.zones"):
        simulate({"scheduler": {"type": "sha", "min_resource": 1, "max_resource": 9},
                  "num_trials": 9, "provider": {"type": "gcp", "spot": True,
                                                "zones": ["mars-1-a"]}},
                 curves, spot_traces=replay, time_budget=None, cost_budget=10.0)
