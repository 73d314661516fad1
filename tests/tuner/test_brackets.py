"""A sweep whose number of trials the planner chose runs another bracket with the time and
budget its first one left (an ASHA sweep admits more trials): the scheduler, the re-planner,
the controller and resume."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
from optuna.distributions import IntDistribution

from budgets import (
    BootLatency,
    FollowPlan,
    JobShape,
    Ledger,
    Profile,
    Replanner,
    ReplanView,
    SimClock,
)
from tests._sims import ASHA, GPU, SHA, SIM_GPU, Synth
from tests._sims import drive_journaled as _drive
from tuner._controller import Controller, RunSpec
from tuner._journal import replay
from tuner._sampling import PermutationSampler, Sampler
from tuner._store import Store
from tuner.schedulers import ASHA as AsyncHalving
from tuner.schedulers import Job, SuccessiveHalving, TrialStatus
from tuner.sim import SIM_SETTINGS, SimExecutor, SimInstanceType, SimProvider, simulate_wired

# Re-planners whose figures are worked out by hand below keep ``margin=0.1`` (10 % free) as
# their comments do; sweeps use DEFAULT_MARGIN.


def _finished_bracket(n: int = 9) -> SuccessiveHalving:
    sha = SuccessiveHalving(1, 9, 3, "max", n)
    while not sha.is_finished():
        job = sha.next_job(f"t{len(sha._trials)}")
        sha.on_rung(job.trial_id, job.to_step, int(job.trial_id[1:]) / 100 + job.to_step)
    return sha


def test_a_new_bracket_starts_only_after_the_last_and_ranks_its_own_trials():
    sha = SuccessiveHalving(1, 9, 3, "max", 9)
    sha.next_job("t0")
    with pytest.raises(ValueError, match="once the current one is finished"):
        sha.new_bracket(9)
    sha = _finished_bracket()
    with pytest.raises(ValueError, match="num_trials"):
        sha.new_bracket(0)
    done = {t: sha.status(t) for t in sha._trials}
    assert sha.bracket == 0 and list(done.values()).count(TrialStatus.COMPLETED) == 1
    sha.new_bracket(3)
    assert (sha.bracket, sha.stage, sha.sizes, sha.total_trials) == (1, 0, [3, 1, 1], 12)
    jobs = [sha.next_job(f"n{i}") for i in range(4)]
    assert [j.trial_id for j in jobs[:3]] == ["n0", "n1", "n2"] and jobs[3] is None
    assert {j.bracket for j in jobs[:3]} == {1} and all(j.new for j in jobs[:3])
    # Worse than every earlier trial, the best of the new ones still goes on: each bracket
    # ranks its own.
    for j, v in zip(jobs[:3], (0.1, 0.3, 0.2), strict=True):
        sha.on_rung(j.trial_id, 1, v)
    assert sha.next_job("x") == Job("n1", 3, bracket=1)
    assert {t: sha.status(t) for t in done} == done


def test_a_new_brackets_admission_closes_on_its_own_trials():
    sha = _finished_bracket()
    sha.new_bracket(9)
    for i in range(4):
        job = sha.next_job(f"n{i}")
        sha.on_rung(job.trial_id, 1, float(i))
    sha.close_admission()
    # Four trials of this bracket (not the 13 of the sweep): 1/eta of them go on.
    assert sha.sizes == [4, 1, 1] and sha.next_job("n9") == Job("n3", 3, bracket=1)


@pytest.mark.parametrize(("make", "state", "expected", "compared"), [
    # A SHA bracket: its own trials, stages sized from them.
    (lambda: SuccessiveHalving(1, 9, 3, "max", 9),
     lambda s: (s.bracket, s.sizes, s.total_trials), (1, [6, 2, 1], 15), 4),
    # ASHA: more trials on the same rungs.
    (lambda: AsyncHalving(1, 9, 3, "max", 9), lambda s: s.total_trials, 15, 6),
], ids=["sha", "asha"])
def test_a_new_bracket_is_journaled_and_replayed(tmp_path, make, state, expected, compared):
    store = Store(tmp_path)
    store.create_experiment("e", "e", {}, "m", "max", None, None)

    def values(tid, step):
        return (int(tid[1:]) * 7919 % 101) / 100 + step / 1000

    original = make()
    _drive(original, store, values, 100)
    assert original.is_finished()
    store.journal_add("bracket", "*", 6)
    original.new_bracket(6)
    running = _drive(original, store, values, 5)
    rebuilt = make()
    assert replay(rebuilt, store.journal()) == len(store.journal())
    ids = {e["trial_id"] for e in store.journal()} - {"*"}
    assert {t: rebuilt.status(t) for t in ids} == {t: original.status(t) for t in ids}
    assert state(rebuilt) == expected
    for job in running:
        original.on_job_lost(job.trial_id)
        rebuilt.on_job_lost(job.trial_id)
    for k in range(compared):
        assert original.next_job(f"z{k}") == rebuilt.next_job(f"z{k}")


def test_more_asha_trials_join_its_rungs_once_it_is_finished():
    asha = AsyncHalving(1, 9, 3, "max", 3)
    asha.next_job("t0")
    with pytest.raises(ValueError, match="once the sweep is finished"):
        asha.new_bracket(3)
    asha.on_rung("t0", 1, 0.2)
    asha.on_rung(asha.next_job("t1").trial_id, 1, 0.9)
    job = asha.next_job("x")                      # the top third of rung 1, rounded up: t1
    assert job == Job("t1", 3)
    asha.on_rung(asha.next_job("t2").trial_id, 1, 0.5)
    asha.on_rung("t1", 3, 0.95)
    assert asha.is_finished() and asha.status("t2") is TrialStatus.PAUSED
    with pytest.raises(ValueError, match="num_trials"):
        asha.new_bracket(0)
    asha.new_bracket(3)
    assert asha.total_trials == 6 and not asha.is_finished()
    jobs = [asha.next_job(f"n{i}") for i in range(3)]
    assert [(j.trial_id, j.to_step, j.new) for j in jobs] == [(f"n{i}", 1, True) for i in range(3)]
    for j, v in zip(jobs, (0.1, 0.0, 0.05), strict=True):
        asha.on_rung(j.trial_id, 1, v)
    # Rung 1 holds six now: its top third is two, and t2, paused there, is the second.
    assert asha.next_job("n9") == Job("t2", 3)
    assert asha.status("t0") is TrialStatus.PAUSED


def _replanner(first: int = 27, **kw) -> Replanner:
    return Replanner(JobShape(first, 1, 9, 3), Profile(10.0, boot=BootLatency.fixed(60)), GPU,
                     10_000.0, billing_minimum_s=0, **kw, margin=0.1)


AFTER = ReplanView(now=1000.0, elapsed_s=1000.0, stage=2, live=0, observed_s_per_step=10.0,
                   observations=20, spent_usd=0.5)


def test_the_next_bracket_is_the_most_trials_the_budget_left_pays():
    rp = _replanner(cost_budget_usd=1.0)
    plan = rp.next_bracket(AFTER, 9)
    # 0.5 USD left less the 10 % margin: 450 instance-seconds. On one instance (60 s boot),
    # n trials on rungs 1/3/9 cost 10 n + 20 (n // 3) + 60 (n // 9) seconds of steps: 15
    # trials take 150 + 100 + 60 + 60 = 370 s, the next count, 18, 180 + 120 + 120 + 60 = 480.
    assert plan.num_trials == 15 and [(r.trials, r.workers) for r in plan.rungs] == [
        (15, 1), (5, 1), (1, 1)]
    assert plan.predicted_cost_usd == pytest.approx(0.370)
    assert plan.predicted_wall_s == pytest.approx(1370.0)   # from now: boot, then the steps
    # No larger than the first bracket was planned (with all of both budgets).
    assert _replanner(9, cost_budget_usd=1.0).next_bracket(AFTER, 9).num_trials == 9
    # The re-planner plans that bracket from now on.
    assert rp.shape == JobShape(15, 1, 9, 3) and rp.bracket == 1
    later = rp(ReplanView(now=1100.0, elapsed_s=1100.0, stage=0, live=1,
                          observed_s_per_step=10.0, observations=25, spent_usd=0.6, started=3))
    assert later.num_trials == 15


def test_no_next_bracket_without_a_cost_budget_room_or_trials_left():
    assert _replanner().next_bracket(AFTER, 9) is None          # a shape given: run as given
    poor = ReplanView(now=1000.0, elapsed_s=1000.0, stage=2, live=0, observed_s_per_step=10.0,
                      observations=20, spent_usd=0.92)
    assert _replanner(cost_budget_usd=1.0).next_bracket(poor, 9) is None
    # A finite space: 20 configurations, 9 tried; 9 of the 11 left make a halving, 2 would not.
    assert _replanner(cost_budget_usd=1.0, max_trials=20).next_bracket(AFTER, 9).num_trials == 9
    assert _replanner(cost_budget_usd=1.0, max_trials=11).next_bracket(AFTER, 9) is None
    late = ReplanView(now=9900.0, elapsed_s=9900.0, stage=2, live=0, observed_s_per_step=10.0,
                      observations=20, spent_usd=0.5)
    assert _replanner(cost_budget_usd=1.0).next_bracket(late, 9) is None
    with pytest.raises(ValueError, match="max_trials"):
        _replanner(max_trials=0)


def _sweep(more: bool, budget: float = 2.0, deadline: float = 3000.0, max_trials: int = 27,
           store_path=":memory:", scheduler=SHA):
    rp = Replanner(JobShape(9, 1, 9, 3), Profile(10.0, boot=BootLatency.fixed(30)), SIM_GPU,
                   deadline, cost_budget_usd=budget, billing_minimum_s=0, max_trials=max_trials)
    plan = rp.initial()
    return simulate_wired(Synth(n=27), metric="acc", mode="max",
                    scheduler={**scheduler, "max_resource": 9},
                    num_trials=9, workers=max(1, plan.workers_for_rung(0)), seed=0,
                    boot_s=lambda rng: 30.0, scaling=FollowPlan(plan), replanner=rp,
                    time_budget_s=deadline, cost_budget_usd=budget, billing_minimum_s=0.0,
                    more_brackets=more, store_path=store_path)


def test_a_sweep_runs_more_brackets_while_time_budget_and_trials_are_left():
    one, more = _sweep(False), _sweep(True)
    assert len(one.trials) == 9 and "bracket" not in [e["kind"] for e in one.store.journal()]
    brackets = [e["step"] for e in more.store.journal() if e["kind"] == "bracket"]
    # Brackets no larger than the first, until every configuration has been tried.
    assert brackets == [9, 9] and len(more.trials) == 27
    assert more.outcome.reason == "done" and more.budget_respected and more.deadline_met
    assert more.spend_usd > one.spend_usd
    # Each trial belongs to its bracket; every bracket trained a trial to the top rung.
    rows = more.store.query("SELECT trial_id, bracket, last_step FROM trials ORDER BY number")
    assert [r["bracket"] for r in rows][:9] == [0] * 9 and rows[9]["bracket"] == 1
    tops = {r["bracket"] for r in rows if r["last_step"] == 9}
    assert tops == set(range(len(brackets) + 1))
    assert more.best_value >= one.best_value
    # Each bracket's plan is stored, as re-plans are, for planned against actual.
    assert len(more.store.plans()) > len(one.store.plans())


def test_an_asha_sweep_admits_more_trials_while_time_budget_and_trials_are_left():
    one, more = _sweep(False, scheduler=ASHA), _sweep(True, scheduler=ASHA)
    assert len(one.trials) == 9 and "bracket" not in [e["kind"] for e in one.store.journal()]
    added = [e["step"] for e in more.store.journal() if e["kind"] == "bracket"]
    assert added and max(added) <= 9 and len(more.trials) == 9 + sum(added) <= 27
    assert more.outcome.reason == "done" and more.budget_respected and more.deadline_met
    assert more.spend_usd > one.spend_usd and more.best_value >= one.best_value
    # One ladder (ASHA has no brackets): every trial is in bracket 0, and the new ones were
    # ranked with the earlier ones (one of them, or an earlier trial paused below the top
    # when they arrived, was promoted after they reported).
    rows = more.store.query("SELECT trial_id, bracket, last_step FROM trials ORDER BY number")
    assert {r["bracket"] for r in rows} == {0}
    jobs = [e for e in more.store.journal() if e["kind"] in ("job", "bracket")]
    first_added = next(i for i, e in enumerate(jobs) if e["kind"] == "bracket")
    assert any(not e["flag"] for e in jobs[first_added:]), "no promotion after more trials"


def test_a_bracket_the_budget_left_cannot_pay_is_not_started():
    one = _sweep(False)
    tight = _sweep(True, budget=one.spend_usd * 1.05)
    assert "bracket" not in [e["kind"] for e in tight.store.journal()]
    assert len(tight.trials) == 9 and tight.budget_respected


class _StopInSecondBracket(Synth):
    """Synth curves that ask the sweep to stop (its stop file) once a configuration outside
    ``first`` has reported its third step: the second bracket is under way."""

    def __init__(self, first: set[str], stop_file) -> None:
        super().__init__(n=27)
        self.first, self.stop_file = first, stop_file

    def value(self, c, s):
        if c not in self.first and s >= 3:
            self.stop_file.touch()
        return super().value(c, s)


def test_a_sweep_stopped_in_its_second_bracket_resumes_it(tmp_path):
    first = {f"c{int(p)}" for p in _sweep(False).trials["params.config"]}
    stop_file = tmp_path / "STOP"
    curves = _StopInSecondBracket(first, stop_file)
    rp = Replanner(JobShape(9, 1, 9, 3), Profile(10.0, boot=BootLatency.fixed(30)), SIM_GPU,
                   3000.0, cost_budget_usd=2.0, billing_minimum_s=0, max_trials=27)
    plan = rp.initial()
    db = tmp_path / "sweep"
    stopped = simulate_wired(curves, metric="acc", mode="max", scheduler={**SHA, "max_resource": 9},
                       num_trials=9, workers=max(1, plan.workers_for_rung(0)), seed=0,
                       boot_s=lambda rng: 30.0, scaling=FollowPlan(plan), replanner=rp,
                       time_budget_s=3000.0, cost_budget_usd=2.0, billing_minimum_s=0.0,
                       more_brackets=True, store_path=db,
                       settings=replace(SIM_SETTINGS, stop_file=stop_file))
    assert stopped.outcome.reason == "requested"
    assert "bracket" in [e["kind"] for e in stopped.store.journal()]
    rows = stopped.store.query("SELECT * FROM trials")
    before = {r["trial_id"]: (r["last_step"], r["value"], r["state"]) for r in rows}
    finished = {t: v[:2] for t, v in before.items() if v[2] == "completed"}
    second = [r["last_step"] for r in rows if r["bracket"] == 1]
    assert second and max(second) < 9            # the second bracket under way
    stop_file.unlink()

    # Resume it as ``elastune resume`` does: a new controller over the same store, the
    # earlier spend and time counted.
    clock = SimClock()
    provider = SimProvider(clock, types=(SimInstanceType("sim-gpu", slots=1,
                                                         on_demand_per_hour=1.0),),
                           boot_s=lambda rng: 30.0)
    store = Store(db)
    rp2 = Replanner(JobShape(9, 1, 9, 3), Profile(10.0, boot=BootLatency.fixed(30)), SIM_GPU,
                    3000.0, cost_budget_usd=2.0, billing_minimum_s=0, max_trials=27)
    controller = Controller(
        RunSpec(experiment_id="sim", trainable="simulated", metric="acc", mode="max",
                workers=0, gpus_per_trial=1, time_budget_s=3000.0, cost_budget_usd=2.0,
                checkpoint_root=Path("/nonexistent"), instance_type="sim-gpu",
                elapsed_before_s=stopped.wall_s),
        scheduler=SuccessiveHalving(1, 9, 3, "max", 9),
        sampler=Sampler({"config": IntDistribution(0, 26)}, PermutationSampler(0), "max", 0),
        executor=SimExecutor(clock, provider, Synth(n=27), metric="acc",
                             config_ids=list(Synth(n=27).config_ids())),
        provider=provider, ledger=Ledger(2.0, 0.0, prior_usd=stopped.spend_usd),
        store=store, clock=clock, settings=SIM_SETTINGS, scaling=FollowPlan(rp2.initial()),
        replanner=rp2, more_brackets=True)
    controller.restore()
    bracket = next(e["step"] for e in store.journal() if e["kind"] == "bracket")
    assert controller.scheduler.bracket == 1 and controller.state.bracket_first == 9
    assert rp2.bracket == 1 and rp2.shape.num_trials == bracket
    outcome = controller.run()
    assert outcome.reason == "done" and stopped.spend_usd + outcome.spend_usd <= 2.0 + 1e-9
    rows = {r["trial_id"]: r for r in store.query("SELECT * FROM trials")}
    assert len(rows) == 27
    # Nothing finished before the stop was lost or re-run; every trial went on from where it
    # stood (the paused ones at the stop, promoted now as the scheduler decides).
    assert {t: (rows[t]["last_step"], rows[t]["value"]) for t in finished} == finished
    assert all(rows[t]["last_step"] >= step for t, (step, _, _) in before.items())
    assert {r["bracket"] for r in rows.values() if r["last_step"] == 9} == {0, 1, 2}
