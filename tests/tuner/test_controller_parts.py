"""The controller's parts on their own: the journaled scheduler, the store's reads that
restore uses, and the cluster on the simulated provider and clock."""

from __future__ import annotations

import pytest

from budgets import Ledger, SimClock
from tests._sims import Synth
from tuner._cluster import Cluster
from tuner._journal import replay
from tuner._journaled import JournaledScheduler
from tuner._run_spec import RunSpec
from tuner._store import Store
from tuner._sweep_state import SweepState, TrialRecord
from tuner.schedulers import make_scheduler
from tuner.sim import SIM_SETTINGS, SimExecutor, SimProvider
from worker.records import InstanceState, SegmentState


def _store(tmp_path) -> Store:
    tmp_path.mkdir(parents=True, exist_ok=True)
    store = Store(tmp_path / "exp")
    store.create_experiment("e", "e", {}, "acc", "max", None, None)
    return store


def test_every_call_is_journaled_with_it_and_replays_into_the_same_scheduler(tmp_path):
    store = _store(tmp_path)
    sha = JournaledScheduler(make_scheduler("sha", 1, 9, 3, "max", 9), store)
    jobs = [sha.next_job(f"t{i:04d}") for i in range(1, 10)]
    assert all(j is not None and j.new for j in jobs)
    assert sha.next_job("t0010") is None            # the stage waits: nothing journaled
    sha.on_job_lost("t0001")                        # lost, offered again
    again = sha.next_job("t0010")
    assert again is not None and again.trial_id == "t0001" and not again.new
    for i in range(1, 9):
        sha.on_rung(f"t{i:04d}", 1, float(i))
    sha.resize_stage(1, 3)                          # the natural size: no entry
    sha.resize_stage(1, 2)                          # fewer: journaled as promote
    sha.on_rung("t0009", 1, 9.0)                    # the stage is decided
    kinds = [e["kind"] for e in store.journal()]
    assert kinds == ["job"] * 9 + ["lost", "job"] + ["rung"] * 8 + ["promote", "rung"]
    assert [e["step"] for e in store.journal() if e["kind"] == "promote"] == [2]
    fresh = make_scheduler("sha", 1, 9, 3, "max", 9)
    assert replay(fresh, store.journal()) == len(kinds)
    assert [fresh.status(f"t{i:04d}") for i in range(1, 10)] == [
        sha.status(f"t{i:04d}") for i in range(1, 10)]
    assert fresh.sizes == sha.inner.sizes == [9, 2, 1]
    assert fresh.next_job("x") == sha.next_job("x")


def test_a_new_bracket_is_journaled_before_it_starts_and_closing_admission_too(tmp_path):
    store = _store(tmp_path)
    asha = JournaledScheduler(make_scheduler("asha", 1, 3, 3, "max", 1), store)
    job = asha.next_job("t0001")
    assert job is not None
    asha.on_trial_end("t0001", 1, 0.5, failed=False)   # it ended early
    assert asha.is_finished()
    asha.new_bracket(2)
    asha.close_admission()
    asha.limit_admission(1)
    assert [(e["kind"], e["step"]) for e in store.journal()] == [
        ("job", 1), ("end", 1), ("bracket", 2), ("close", None), ("limit", 1)]
    fresh = make_scheduler("asha", 1, 3, 3, "max", 1)
    replay(fresh, store.journal())
    assert fresh.total_trials == asha.total_trials == 3


def test_capabilities_are_checked_once():
    sha, asha, hb = (JournaledScheduler(make_scheduler(t, 1, 9, 3, "max", 9), None)
                     for t in ("sha", "asha", "hyperband"))
    assert sha.staged is not None and sha.bracketed is not None and sha.rungs == [1, 3, 9]
    assert asha.staged is None and asha.bracketed is not None and asha.rungs == [1, 3, 9]
    assert hb.staged is None and hb.bracketed is None and hb.rungs is None
    assert asha.stage == hb.stage == 0 and not asha.early_promotion
    assert sha.rung_index(3) == 1 and sha.rung_index(2) is None and hb.rung_index(3) is None
    with pytest.raises(AssertionError):
        asha.decide_stage()


def test_the_store_reads_restore_needs(tmp_path):
    store = _store(tmp_path)
    assert store.last_spend_ts() is None
    store.record_spend(5.0, 0.1, 0.1, 1)
    store.record_spend(7.0, 0.2, 0.2, 1)
    assert store.last_spend_ts() == 7.0
    store.add_trial("t0002", 2, {"x": 2}, 0, 0.0)
    store.add_trial("t0001", 1, {"x": 1}, 0, 0.0)
    assert [r["trial_id"] for r in store.trial_rows()] == ["t0001", "t0002"]
    for seg, start, ended in (("e/t0001/s1", 0, 10.0), ("e/t0002/s1", 0, 8.0),
                              ("e/t0001/s2", 1, None)):
        store.add_segment(seg, seg.split("/")[1], "i-1", start, start + 1, 1, 0.0)
        if ended is not None:
            store.update_segment(seg, state=SegmentState.DONE, started_at=1.0,
                                 finished_at=ended, last_step=start + 1)
    store.add_reports([("t0001", "e/t0001/s1", 1, 0.5, "{}", 3.0),
                       ("t0001", "e/t0001/s2", 2, 0.6, "{}", 12.0)])
    assert store.first_step_times() == {"e/t0001/s1": 3.0}
    # Done segments that trained a step, in the order they ended.
    assert [r["segment_id"] for r in store.finished_segments()] == ["e/t0002/s1", "e/t0001/s1"]


def test_sweep_state_and_trial_records():
    trial = TrialRecord("t0001", 1, {}, 0, step=3, value=0.3,
                        last_report={1: 0.1, 3: 0.3, 5: 0.5})
    assert trial.value_at(4) == 0.3 and trial.value_at(5) == 0.5
    trial.forget_after_checkpoint()
    assert trial.last_report == {1: 0.1, 3: 0.3}
    state = SweepState()
    assert state.nothing_running() and state.on("i-1") == []


def _cluster(tmp_path, budget: float | None, *, boot_s: float = 60.0):
    clock = SimClock()
    provider = SimProvider(clock, boot_s=lambda rng: boot_s)
    executor = SimExecutor(clock, provider, Synth(n=9), metric="acc")
    spec = RunSpec(experiment_id="e", trainable="simulated", metric="acc", mode="max",
                   workers=0, gpus_per_trial=1, time_budget_s=None, cost_budget_usd=budget,
                   checkpoint_root="/nonexistent", instance_type="sim-gpu")
    store = _store(tmp_path)
    given_up: list[tuple[str, SegmentState]] = []
    cluster = Cluster(spec, SIM_SETTINGS, provider=provider, ledger=Ledger(budget, 60.0),
                      store=store, clock=clock, executor=executor, state=SweepState(),
                      market=lambda now: False,
                      lost=lambda seg, state, now: given_up.append((seg, state)),
                      drain_events=lambda: None)
    return cluster, clock, store


def test_the_cluster_launches_what_the_budget_covers_and_marks_instances_ready(tmp_path):
    # $1.00/h with a 60 s minimum: 1/60 USD each; 0.05 USD buys three once the reaction time
    # (15 s) is counted, not five.
    cluster, clock, store = _cluster(tmp_path, budget=0.05)
    cluster.launch(5)
    assert len(cluster.live()) == 3 and not cluster.ready
    clock.advance_to(30.0)
    cluster.check_boot(clock.now())
    assert not cluster.ready and len(cluster.booting) == 3
    clock.advance_to(61.0)
    cluster.check_boot(clock.now())
    assert cluster.ready == set(cluster.live()) == cluster.has_free
    inst = cluster.free_instance(1)
    assert inst is not None
    cluster.take(inst.instance_id, 1)
    assert inst.instance_id not in cluster.has_free
    cluster.give_back(inst.instance_id, 1)
    assert inst.instance_id in cluster.has_free
    cluster.terminate_all()
    assert not cluster.live()
    assert {r["state"] for r in store.instances()} == {InstanceState.TERMINATED}


def test_a_launch_the_budget_cannot_cover_fails_only_when_required(tmp_path):
    cluster, _, _ = _cluster(tmp_path, budget=0.001)
    cluster.launch(1, required=False)
    assert not cluster.live()
    with pytest.raises(RuntimeError, match="billing minimum"):
        cluster.launch(1)


def test_a_sweep_with_no_worker_registered_fails_at_the_boot_timeout(tmp_path):
    cluster, clock, _ = _cluster(tmp_path, budget=None, boot_s=1e9)
    cluster.launch(1)
    clock.advance_to(SIM_SETTINGS.boot_timeout_s + 1.0)
    with pytest.raises(RuntimeError, match="no worker registered"):
        cluster.check_boot(clock.now())


def test_adoption_closes_the_rows_an_earlier_run_left_for_instances_that_are_gone(tmp_path):
    first, clock, store = _cluster(tmp_path, budget=None)
    first.launch(2)
    store.record_spend(40.0, 0.01, 0.01, 2)
    # A new run over the same store: its provider knows none of them (their worker processes
    # followed the dead controller), so they are closed at the last spend record.
    second = Cluster(first.spec, SIM_SETTINGS, provider=SimProvider(clock), ledger=Ledger(None),
                     store=store, clock=clock, executor=first.executor, state=SweepState(),
                     market=lambda now: False, lost=lambda *a: None, drain_events=lambda: None)
    clock.advance_to(100.0)
    second.adopt(clock.now())
    rows = store.instances()
    assert len(rows) == 2 and not second.instances
    assert all(r["state"] == InstanceState.TERMINATED and r["terminated_at"] == 40.0
               for r in rows)
    # The same provider lists them still running: they are adopted, not closed.
    third_store = _store(tmp_path / "other")
    third, clock3, _ = _cluster(tmp_path / "third", budget=None)
    third.launch(1)
    for inst in third.instances.values():
        third_store.upsert_instance(inst)
    adopter = Cluster(third.spec, SIM_SETTINGS, provider=third.provider, ledger=Ledger(None),
                      store=third_store, clock=clock3, executor=third.executor,
                      state=SweepState(), market=lambda now: False, lost=lambda *a: None,
                      drain_events=lambda: None)
    adopter.adopt(clock3.now())
    assert set(adopter.instances) == set(third.instances) == set(adopter.booting)
    assert {r["state"] for r in third_store.instances()} == {InstanceState.RUNNING}


def test_the_launcher_backs_off_while_the_cloud_has_no_capacity_then_launches(tmp_path):
    from tuner._launcher import Launcher

    clock = SimClock()
    provider = SimProvider(clock, capacity_outages=[(0.0, 25.0)])
    spec = RunSpec(experiment_id="e", trainable="simulated", metric="acc", mode="max",
                   workers=0, gpus_per_trial=1, time_budget_s=None, cost_budget_usd=None,
                   checkpoint_root="/nonexistent", instance_type="sim-gpu")
    got: list[str] = []
    launcher = Launcher(spec, SIM_SETTINGS, provider=provider, ledger=Ledger(None), clock=clock,
                        market=lambda now: False,
                        launched=lambda insts: got.extend(i.instance_id for i in insts))
    launcher.launch(2, required=False)           # no capacity: retried in 10 s
    assert not got and launcher.in_flight() == 0
    for t, launched in ((9.0, 0), (10.0, 0), (29.0, 0), (30.0, 2)):   # then 20 s later
        clock.advance_to(t)
        launcher.retry(t)
        assert len(got) == launched, t
    assert not launcher.busy()                   # (an inline provider: no launcher thread)


def test_the_launcher_keeps_what_is_still_wanted_and_backs_off_only_that_market(tmp_path):
    from tuner._launcher import Launcher

    clock = SimClock()
    provider = SimProvider(clock, capacity_outages=[(0.0, 25.0)])
    spec = RunSpec(experiment_id="e", trainable="simulated", metric="acc", mode="max",
                   workers=0, gpus_per_trial=1, time_budget_s=None, cost_budget_usd=None,
                   checkpoint_root="/nonexistent", instance_type="sim-gpu")
    got: list[str] = []
    market = {"spot": False}
    launcher = Launcher(spec, SIM_SETTINGS, provider=provider, ledger=Ledger(None), clock=clock,
                        market=lambda now: market["spot"],
                        launched=lambda insts: got.extend(i.instance_id for i in insts))
    launcher.launch(3, required=False)           # no capacity
    assert provider.fault_counts["capacity_errors"] == 1
    for t in (1.0, 2.0, 3.0):                    # the scaling policy asks again each tick:
        clock.advance_to(t)                      # backing off, the cloud is not asked
        launcher.launch(3, required=False)
    assert provider.fault_counts["capacity_errors"] == 1 and not got
    clock.advance_to(30.0)
    launcher.retry(30.0)
    assert len(got) == 3                         # what was wanted, not 4 tries of 3
    # A spot launch that found no capacity is what a spot policy reads as "no spot" ...
    provider2 = SimProvider(clock, capacity_outages=[(30.0, 100.0)])
    market["spot"] = True
    launcher2 = Launcher(spec, SIM_SETTINGS, provider=provider2, ledger=Ledger(None),
                         clock=clock, market=lambda now: market["spot"],
                         launched=lambda insts: got.extend(i.instance_id for i in insts))
    launcher2.launch(1, required=False)
    assert launcher2.spot_refused_at == 30.0
    # ... and the back-off holds that market only: on-demand is asked at once.
    market["spot"] = False
    launcher2.launch(1, required=False)
    assert provider2.fault_counts["capacity_errors"] == 2


def test_a_resumed_pool_sweep_takes_up_the_pools_members_without_billing_them(tmp_path):
    from cloud import PoolProvider
    from worker import EmbeddedRedis
    from worker.records import PoolMember, alive_key, members_key

    redis_server = EmbeddedRedis()
    address = redis_server.start()
    try:
        client = address.client()
        for name in ("m1", "m2"):      # two workers in the pool, as `elastune worker` joins
            client.hset(members_key("p"), name, PoolMember(
                name=name, queue=name, slots=1, host="h", pid=1, joined_at=0.0
            ).model_dump_json())
            client.set(alive_key("p", name), "1", ex=60)
        first, clock, store = _cluster(tmp_path, budget=1.0)
        earlier = PoolProvider(client, "p", "e", price_per_hour=3.6, clock=clock).list()
        store.upsert_instance(next(i for i in earlier if i.instance_id == "m1"),
                              0.25)               # what an earlier run billed m1
        store.record_spend(5.0, 0.25, 0.25, 1)
        ledger = Ledger(1.0, 0.0, prior_usd=0.25)
        cluster = Cluster(first.spec, SIM_SETTINGS, provider=PoolProvider(
            client, "p", "e", price_per_hour=3.6, clock=clock), ledger=ledger, store=store,
            clock=clock, executor=first.executor, state=SweepState(),
            market=lambda now: False, lost=lambda *a: None, drain_events=lambda: None)
        clock.advance_to(100.0)
        cluster.adopt(clock.now())
        assert set(cluster.instances) == set(cluster.booting) == {"m1", "m2"}
        assert ledger.spent(clock.now()) == 0.25          # nothing billed for them yet
        costs = {r["instance_id"]: r["cost_usd"] for r in store.instances()}
        assert costs == {"m1": 0.25, "m2": 0.0}           # the earlier run's share is kept
        cluster.bill("m2", 100.0)                          # its first work: billed from now
        assert ledger.spent(110.0) == pytest.approx(0.25 + 3.6 / 3600 * 10)
    finally:
        redis_server.stop()
