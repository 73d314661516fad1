"""Schedulers against the ASHA and Hyperband papers, and against Optuna's successive halving."""

from __future__ import annotations

import math
import random
from collections import Counter, defaultdict

import optuna
import pytest
from optuna.pruners._successive_halving import _is_trial_promotable_to_next_rung
from optuna.study import StudyDirection

from tuner.schedulers import (
    ASHA,
    Hyperband,
    Job,
    SuccessiveHalving,
    TrialStatus,
    make_scheduler,
    promotable,
    rung_steps,
)
from tuner.schedulers._hyperband import scale_sizes
from tuner.schedulers._rungs import hyperband_brackets, sha_sizes


def drive(scheduler, value, slots=4, seed=0, fail=0.0):
    """Run ``scheduler`` to the end with ``slots`` workers finishing in random order.

    Returns the event log: ``("job", Job)`` when offered, ``("rung", trial_id, step, value)``.
    """
    rng = random.Random(seed)
    log, running, new_ids = [], [], 0
    while True:
        while len(running) < slots:
            job = scheduler.next_job(f"t{new_ids}")
            if job is None:
                break
            new_ids += job.new
            log.append(("job", job))
            running.append(job)
        if not running:
            break
        job = running.pop(rng.randrange(len(running)))
        if rng.random() < fail:
            scheduler.on_trial_end(job.trial_id, job.to_step - 1, None, failed=True)
        else:
            v = value(job.trial_id, job.to_step)
            log.append(("rung", job.trial_id, job.to_step, v))
            scheduler.on_rung(job.trial_id, job.to_step, v)
    assert scheduler.is_finished()
    scheduler.finalize()
    return log


def jobs_of(log):
    return [event[1] for event in log if event[0] == "job"]


def noisy_curve(seed):
    """A learning curve per trial: a hidden quality plus noise that shrinks with the step."""
    rng = random.Random(seed)
    quality = defaultdict(rng.random)
    return lambda trial_id, step: quality[trial_id] + rng.gauss(0, 0.3 / math.sqrt(step))


# --- rung arithmetic -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("r", "R", "eta", "expected"),
    [
        (1, 27, 3, [1, 3, 9, 27]),
        (1, 81, 3, [1, 3, 9, 27, 81]),
        (1, 10, 3, [1, 3, 9, 10]),
        (2, 64, 2, [2, 4, 8, 16, 32, 64]),
        (5, 5, 3, [5]),
    ],
)
def test_rung_steps(r, R, eta, expected):
    assert rung_steps(r, R, eta) == expected


def test_sha_sizes_and_segments_per_rung():
    assert sha_sizes(27, 4, 3) == [27, 9, 3, 1]
    assert sha_sizes(10, 4, 3) == [10, 3, 1, 1]
    sha = SuccessiveHalving(1, 27, 3)
    assert sha.sizes == [27, 9, 3, 1]
    jobs = jobs_of(drive(sha, noisy_curve(1), slots=5, seed=2))
    per_rung = Counter(job.to_step for job in jobs)
    assert [per_rung[step] for step in sha.rungs] == [27, 9, 3, 1]
    completed = [t for t in {j.trial_id for j in jobs} if sha.status(t) is TrialStatus.COMPLETED]
    assert len(completed) == 1


def test_hyperband_brackets_match_jmlr_table_1():
    brackets = hyperband_brackets(1, 81, 3)
    assert [n for n, _ in brackets] == [81, 34, 15, 8, 5]
    assert [r for _, r in brackets] == [1, 3, 9, 27, 81]


# --- promotable: the ASHA rule, and Optuna's ------------------------------------------------


def test_promotable_rule():
    # One value: nothing to rank it against (ASHA pauses it).
    assert not promotable(1.0, [1.0], 3, "max")
    # Two values and eta 3: the top ceil(2/3) = 1, the better one, goes on.
    assert promotable(1.0, [1.0, 0.0], 3, "max") and not promotable(0.0, [1.0, 0.0], 3, "max")
    # n = 5, eta = 2: the top ceil(5/2) = 3 are promotable.
    values = [0.1, 0.5, 0.3, 0.9, 0.7]
    assert [promotable(v, values, 2, "max") for v in values] == [False, True, False, True, True]
    assert [promotable(v, values, 2, "min") for v in values] == [True, True, True, False, False]
    # Ties at the cut-off are all promotable, whatever the order.
    assert promotable(0.5, [0.5, 0.5, 0.1], 3, "max")


def test_nan_and_none_rank_worst():
    for mode in ("min", "max"):
        assert not promotable(math.nan, [math.nan, math.nan, math.nan], 3, mode)
        assert not promotable(None, [None, 1.0, 2.0], 3, mode)
        assert promotable(5.0, [math.nan, 5.0, None], 3, mode)
    assert promotable(-1e9, [-1e9, math.nan, None, math.nan], 2, "max")


def test_promotable_is_the_quantile_rule_of_syne_tune_and_ray_tune():
    """At or above the rung's 1 - 1/eta quantile, from two values on. The values at or above
    numpy's linear quantile are those at or above the element it interpolates towards (its
    'higher' one, sorted[ceil((n - 1) q)]); that element is found here in exact arithmetic."""
    from fractions import Fraction

    rng = random.Random(0)
    for _ in range(2000):
        eta = rng.choice([2, 3, 4])
        n = rng.randint(2, 40)
        if rng.random() < 0.5:
            competing = [float(rng.randint(0, 5)) for _ in range(n)]  # many ties
        else:
            competing = [rng.uniform(-10, 10) for _ in range(n)]
        value = rng.choice(competing)
        ranked = sorted(competing)
        high = ranked[math.ceil((n - 1) * (1 - Fraction(1, eta)))]
        low = ranked[math.floor((n - 1) * Fraction(1, eta))]
        assert promotable(value, competing, eta, "max") == (value >= high), (value, competing)
        assert promotable(value, competing, eta, "min") == (value <= low), (value, competing)


def test_promotable_agrees_with_optuna_where_its_floor_is_the_same():
    rng = random.Random(0)
    for _ in range(2000):
        eta = rng.choice([2, 3, 4])
        n = eta * rng.randint(1, 10)  # ceil(n/eta) == floor(n/eta): Optuna's count
        if rng.random() < 0.5:
            competing = [float(rng.randint(0, 5)) for _ in range(n)]  # many ties
        else:
            competing = [rng.uniform(-10, 10) for _ in range(n)]
        value = rng.choice(competing)
        for mode, direction in (("max", StudyDirection.MAXIMIZE), ("min", StudyDirection.MINIMIZE)):
            expected = _is_trial_promotable_to_next_rung(value, list(competing), eta, direction)
            assert promotable(value, competing, eta, mode) == expected, (value, competing, eta)


@pytest.mark.parametrize("direction", ["maximize", "minimize"])
def test_study_promotions_agree_with_optuna(direction):
    """Trials arrive one at a time; each decision is taken when the trial reaches the rung."""
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    rungs, eta, n_trials = [1, 3, 9, 27], 3, 60
    rng = random.Random(7)
    curve = {(t, s): rng.random() for t in range(n_trials) for s in rungs}
    decisions = []  # (trial, rung index, promoted) in the order Optuna decides

    def objective(trial):
        for step in range(1, rungs[-1] + 1):
            value = curve.get((trial.number, step), 0.0)
            trial.report(value, step)
            pruned = trial.should_prune()
            if step in rungs:
                decisions.append((trial.number, rungs.index(step), not pruned))
            if pruned:
                raise optuna.TrialPruned()
        return value

    pruner = optuna.pruners.SuccessiveHalvingPruner(
        min_resource=1, reduction_factor=eta, min_early_stopping_rate=0
    )
    study = optuna.create_study(direction=direction, pruner=pruner)
    study.optimize(objective, n_trials=n_trials)

    mode = "max" if direction == "maximize" else "min"
    at_rung = [[] for _ in rungs]
    compared = Counter()
    for trial, k, promoted in decisions:
        value = curve[(trial, rungs[k])]
        at_rung[k].append(value)
        # Where Optuna's count floor(n/eta) (at least 1) is the same as ceil(n/eta).
        if len(at_rung[k]) % eta == 0:
            assert promotable(value, at_rung[k], eta, mode) == promoted, (trial, k)
            compared[k] += 1
    assert compared[0] == n_trials // eta and compared[1] > 0


# --- ASHA -------------------------------------------------------------------------------------


@pytest.mark.parametrize("mode", ["max", "min"])
@pytest.mark.parametrize("seed", range(5))
def test_asha_simulated_sweep(mode, seed):
    asha = ASHA(1, 81, 3, mode=mode)
    assert asha.num_trials == 81
    log = drive(asha, noisy_curve(seed), slots=4, seed=seed)
    jobs = jobs_of(log)
    assert sum(job.new for job in jobs) == asha.num_trials

    step = {}  # trial -> rung step reached, replayed from the log
    at_rung = defaultdict(list)  # rung step -> values recorded there, in order
    promotions, value_at = Counter(), {}
    for event in log:
        if event[0] == "rung":
            _, trial_id, rung, value = event
            step[trial_id] = rung
            at_rung[rung].append(value)
            value_at[trial_id, rung] = value
            continue
        job = event[1]
        if job.new:
            assert job.to_step == asha.rungs[0] and job.trial_id not in step
            continue
        # A promotion continues from the trial's rung to exactly the next one.
        here = step[job.trial_id]
        assert job.to_step == asha.rungs[asha.rungs.index(here) + 1]
        assert promotable(value_at[job.trial_id, here], at_rung[here], 3, mode)
        promotions[job.to_step] += 1

    for trial_id in step:
        to_steps = [job.to_step for job in jobs if job.trial_id == trial_id]
        assert to_steps == asha.rungs[: len(to_steps)]  # strictly along the rungs, none skipped
        status = asha.status(trial_id)
        assert status is (TrialStatus.COMPLETED if step[trial_id] == 81 else TrialStatus.PRUNED)
    for lower, upper in zip(asha.rungs, asha.rungs[1:], strict=False):
        assert promotions[upper] <= len(at_rung[lower])
    assert len(at_rung[81]) >= 1
    assert asha.next_job("t-after") is None


def test_asha_promotes_the_top_third_rounded_up_from_two_results():
    asha = ASHA(1, 9, 3)
    job = asha.next_job("t0")
    asha.on_rung(job.trial_id, job.to_step, 0.5)
    assert asha.next_job("t1") == Job("t1", 1, new=True)  # one result: nothing to rank
    asha.on_rung("t1", 1, 0.7)
    assert asha.next_job("t2") == Job("t1", 3)  # top ceil(2/3) = 1 of rung 0
    assert asha.status("t1") is TrialStatus.RUNNING
    assert asha.next_job("t2") == Job("t2", 1, new=True)  # t1 already promoted
    asha.on_rung("t2", 1, 0.6)
    assert asha.next_job("t3") == Job("t3", 1, new=True)  # top ceil(3/3) = 1: t1, promoted
    asha.on_rung("t3", 1, 0.1)
    assert asha.next_job("t4") == Job("t2", 3)  # top ceil(4/3) = 2: t1 and t2


def test_asha_lost_job_is_offered_again_first():
    asha = ASHA(1, 9, 3, num_trials=4)
    for i, value in enumerate([0.1, 0.9]):
        job = asha.next_job(f"t{i}")
        asha.on_rung(job.trial_id, job.to_step, value)
    assert asha.next_job("t2") == Job("t1", 3)
    asha.on_job_lost("t1")
    assert asha.status("t1") is TrialStatus.PAUSED and not asha.is_finished()
    assert asha.next_job("t2") == Job("t1", 3)
    new = asha.next_job("t2")
    asha.on_job_lost("t2")
    assert asha.next_job("t3") == Job("t2", 1)  # re-offered, params already sampled
    assert new == Job("t2", 1, new=True)


def test_asha_failed_and_ended_trials():
    asha = ASHA(1, 9, 3, num_trials=3)
    jobs = [asha.next_job(f"t{i}") for i in range(3)]
    asha.on_trial_end("t0", 0, None, failed=True)
    asha.on_trial_end("t1", 0, 0.3, failed=False)
    assert asha.status("t0") is TrialStatus.FAILED
    assert asha.status("t1") is TrialStatus.COMPLETED
    assert jobs[2] == Job("t2", 1, new=True)
    asha.on_rung("t2", 1, 1.0)
    assert asha.next_job("t3") is None  # one value at rung 0 < eta
    assert asha.is_finished()
    asha.finalize()
    assert asha.status("t2") is TrialStatus.PRUNED
    with pytest.raises(ValueError, match="not running"):
        asha.on_rung("t2", 3, 1.0)


def test_asha_never_promotes_nan():
    asha = ASHA(1, 3, 3)
    for i in range(3):
        job = asha.next_job(f"t{i}")
        asha.on_rung(job.trial_id, job.to_step, math.nan)
    assert asha.is_finished()


# --- synchronous SHA --------------------------------------------------------------------------


@pytest.mark.parametrize("mode", ["max", "min"])
def test_sha_waits_for_stragglers_then_prunes_at_once(mode):
    sha = SuccessiveHalving(1, 9, 3, mode=mode)
    jobs = [sha.next_job(f"t{i}") for i in range(9)]
    assert all(job.new and job.to_step == 1 for job in jobs)
    assert sha.next_job("t9") is None
    values = [3.0, 8.0, math.nan, 1.0, 5.0, 7.0, 2.0, 6.0, None]
    for job, value in zip(jobs[:-1], values[:-1], strict=True):
        sha.on_rung(job.trial_id, job.to_step, value)
    assert sha.next_job("t9") is None  # t8 still running
    assert all(sha.status(f"t{i}") is TrialStatus.PAUSED for i in range(8))
    sha.on_rung("t8", 1, None)
    promoted = [sha.next_job("t9") for _ in range(3)]
    expected = ["t1", "t5", "t7"] if mode == "max" else ["t3", "t6", "t0"]
    assert promoted == [Job(t, 3) for t in expected]
    pruned = [f"t{i}" for i in range(9) if sha.status(f"t{i}") is TrialStatus.PRUNED]
    assert sorted(pruned) == sorted({f"t{i}" for i in range(9)} - set(expected))


def test_sha_with_failures_finishes():
    sha = SuccessiveHalving(1, 27, 3, mode="min")
    log = drive(sha, noisy_curve(3), slots=3, seed=3, fail=0.2)
    statuses = Counter(sha.status(job.trial_id) for job in jobs_of(log) if job.new)
    assert statuses[TrialStatus.RUNNING] == statuses[TrialStatus.PAUSED] == 0
    assert statuses[TrialStatus.FAILED] > 0


# --- Hyperband --------------------------------------------------------------------------------


def test_hyperband_brackets_run_to_completion():
    hb = Hyperband(1, 81, 3)
    assert hb.bracket_sizes == [81, 34, 15, 8, 5]
    assert [b.rungs for b in hb.brackets][::2] == [[1, 3, 9, 27, 81], [9, 27, 81], [81]]
    log = drive(hb, noisy_curve(4), slots=8, seed=4)
    jobs = jobs_of(log)
    assert sum(job.new for job in jobs) == 143
    bracket_of = {job.trial_id: job.bracket for job in jobs if job.new}
    assert all(job.bracket == bracket_of[job.trial_id] for job in jobs)
    for i, bracket in enumerate(hb.brackets):
        per_rung = Counter(job.to_step for job in jobs if job.bracket == i)
        sizes = sha_sizes(hb.bracket_sizes[i], len(bracket.rungs), 3)
        assert [per_rung[step] for step in bracket.rungs] == sizes
    assert hb.is_finished()


def test_hyperband_prefers_promotions_then_the_emptiest_bracket():
    hb = Hyperband(1, 9, 3, num_trials=7)
    assert hb.bracket_sizes == [4, 2, 1]
    first = [hb.next_job(f"t{i}") for i in range(4)]
    assert [job.bracket for job in first] == [0, 0, 0, 1]  # unfilled 4,2,1 -> 3,2,1 -> 2,2,1
    for job in first[:3]:
        hb.on_rung(job.trial_id, job.to_step, 1.0)
    assert hb.next_job("t4") == Job("t4", 1, bracket=0, new=True)
    hb.on_rung("t4", 1, 2.0)
    assert hb.next_job("t5") == Job("t4", 3, bracket=0)  # bracket 0 decided: promotion first
    assert hb.status("t0") is TrialStatus.PRUNED


@pytest.mark.parametrize("total", [1, 3, 5, 6, 20, 100, 143, 500])
def test_hyperband_scaled_sizes(total):
    sizes = scale_sizes([81, 34, 15, 8, 5], total)
    assert sum(sizes) == total and min(sizes) >= 1
    assert len(sizes) == min(total, 5)
    assert sizes == sorted(sizes, reverse=True)
    if total == 143:
        assert sizes == [81, 34, 15, 8, 5]
    assert Hyperband(1, 81, 3, num_trials=total).bracket_sizes == sizes


# --- validation and factory ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ((1, 27, 1), "The value of reduction_factor is 1, but must be reduction_factor >= 2"),
        ((0, 27, 3), "The value of min_resource is 0, but must be min_resource >= 1"),
        ((9, 3, 3), "The value of max_resource is 3, but must be max_resource >= min_resource"),
        ((1.5, 27, 3), "The value of min_resource is 1.5, but must be an int"),
        ((1, 27, 3, "maximize"), "The value of mode is 'maximize', but must be 'min' or 'max'"),
        ((1, 27, 3, "max", 0), "The value of num_trials is 0, but must be None or num_trials >= 1"),
    ],
)
@pytest.mark.parametrize("kind", ["asha", "sha", "hyperband"])
def test_validation_names_the_field(kind, args, message):
    with pytest.raises(ValueError, match=message):
        make_scheduler(kind, *args)


def test_validation_reports_every_bad_argument():
    with pytest.raises(ValueError) as error:
        ASHA(0, 27, 1)
    assert "min_resource" in str(error.value) and "reduction_factor" in str(error.value)
    with pytest.raises(ValueError, match="reduction_factor"):
        rung_steps(1, 27, 1)


def test_factory():
    assert isinstance(make_scheduler("asha", 1, 27, 3, "max", None), ASHA)
    assert isinstance(make_scheduler("sha", 1, 27, 3, "min", 10), SuccessiveHalving)
    assert isinstance(make_scheduler("hyperband", 1, 27, 3, "max", None), Hyperband)
    with pytest.raises(ValueError, match="'asha', 'hyperband', 'sha'"):
        make_scheduler("bohb", 1, 27, 3, "max", None)


def _naive_promotion(asha, trials, values_by_rung):
    """ASHA's get_job by the book: sort each rung, scan every record (the reference)."""
    from tuner.schedulers._base import sortable
    from tuner.schedulers._rungs import is_number, promotion_cutoff

    for k in range(len(asha.rungs) - 2, -1, -1):
        records = values_by_rung[k]
        cutoff = promotion_cutoff([v for _, v in records], asha.reduction_factor, asha.mode)
        if cutoff is None:
            continue
        best = None
        for tid, value in records:
            state = trials[tid]
            if state == ("paused", asha.rungs[k]) and is_number(value):
                key = sortable(value, asha.mode)
                if key >= cutoff and (best is None or key > best[0]):
                    best = (key, tid)
        if best is not None:
            return best[1], asha.rungs[k + 1]
    return None


@pytest.mark.parametrize("seed", range(20))
@pytest.mark.parametrize("mode", ["max", "min"])
def test_incremental_asha_matches_the_textbook_rule(seed, mode):
    import random as _random

    from tuner.schedulers import ASHA

    rng = _random.Random(seed)
    asha = ASHA(1, 27, 3, mode=mode, num_trials=60)
    trials: dict[str, tuple[str, int]] = {}
    values_by_rung: list[list] = [[] for _ in asha.rungs]
    running: list = []
    n = 0
    for _ in range(2000):
        if running and (rng.random() < 0.5 or len(running) >= 6):
            job = running.pop(rng.randrange(len(running)))
            value = rng.choice([rng.random(), rng.random(), float("nan"), 0.5])
            asha.on_rung(job.trial_id, job.to_step, value)
            values_by_rung[asha.rungs.index(job.to_step)].append((job.trial_id, value))
            trials[job.trial_id] = ("paused", job.to_step)
            continue
        expected = _naive_promotion(asha, trials, values_by_rung)
        job = asha.next_job(f"t{n}")
        if expected is not None:
            assert job is not None and (job.trial_id, job.to_step) == expected
        elif job is not None:
            assert job.new
            n += 1
        if job is None:
            if not running:
                break
            continue
        trials[job.trial_id] = ("running", job.to_step)
        running.append(job)


# -- admission control (HyperSched's deadline policy) ------------------------------------------
@pytest.mark.parametrize("make", [
    lambda: ASHA(1, 9, 3, "max", 20),
    lambda: SuccessiveHalving(1, 9, 3, "max", 20),
    lambda: Hyperband(1, 9, 3, "max", 20),
])
def test_close_admission_stops_new_trials_and_the_started_ones_finish(make):
    sched = make()
    jobs = [sched.next_job(f"t{i}") for i in range(5)]
    assert all(j is not None and j.new for j in jobs)
    sched.close_admission()
    assert sched.next_job("t5") is None                  # no new trial, nothing to promote yet
    started = {j.trial_id for j in jobs}
    running = list(jobs)
    while running:
        job = running.pop(0)
        sched.on_rung(job.trial_id, job.to_step, int(job.trial_id[1:]) / 10 + job.to_step)
        while (nxt := sched.next_job("never")) is not None:
            assert not nxt.new and nxt.trial_id in started
            running.append(nxt)
    assert sched.is_finished()
    sched.finalize()
    assert {str(sched.status(t)) for t in started} <= {"completed", "pruned"}


def test_closed_asha_promotes_the_best_of_a_rung_too_small_for_a_quota():
    asha = ASHA(1, 9, 3, "max", 20)
    job = asha.next_job("t0")
    asha.on_rung(job.trial_id, job.to_step, 0.2)
    # One trial at rung 1: nothing to rank it against, so open ASHA starts a new trial ...
    assert asha.next_job("t1").new
    asha.close_admission()
    # ... and once closed (no trial will come to rank it against), the lone one goes on.
    assert asha.next_job("x") == Job("t0", 3)
    asha.on_rung("t1", 1, 0.1)
    assert asha.next_job("x") is None            # the top ceil(2/3) = 1 has gone on


def test_closed_sha_decides_the_stage_with_the_trials_it_has():
    sha = SuccessiveHalving(1, 9, 3, "max", 27)
    for i in range(6):
        job = sha.next_job(f"t{i}")
        sha.on_rung(job.trial_id, 1, float(i))
    assert sha.next_job("t6").new                       # the stage still fills
    sha.on_rung("t6", 1, 0.5)
    sha.close_admission()
    assert sha.sizes == [7, 2, 1]
    assert [sha.next_job("x").trial_id for _ in range(2)] == ["t5", "t4"]
    assert sha.next_job("x") is None


def test_sha_promotes_no_more_than_a_stage_is_limited_to():
    sha = SuccessiveHalving(1, 27, 3)                 # rungs 1/3/9/27, sizes 27/9/3/1
    jobs = [sha.next_job(f"t{i}") for i in range(27)]
    sha.limit_stage(1, 4)
    assert sha.sizes == [27, 4, 1, 1]
    sha.limit_stage(1, 12)                            # a later limit replaces it
    assert sha.sizes == [27, 9, 3, 1]
    sha.limit_stage(1, 4)
    for i, job in enumerate(jobs):
        sha.on_rung(job.trial_id, 1, float(i))
    # The best four, best first; the other 23 are pruned.
    assert [sha.next_job("x").trial_id for _ in range(4)] == ["t26", "t25", "t24", "t23"]
    assert sha.next_job("x") is None
    assert sum(sha.status(f"t{i}") is TrialStatus.PRUNED for i in range(27)) == 23
    # Later stages are sized from the current one's 4 trials: 1/eta of them, at least one.
    assert sha.natural_sizes == [27, 9, 1, 1]
    sha.limit_stage(2, 5)                             # however many are asked for
    assert sha.sizes == [27, 4, 1, 1]
    for bad in (1, 4, True, "2"):                     # decided, past the end, not an int
        with pytest.raises(ValueError, match="stage"):
            sha.limit_stage(bad, 1)
    with pytest.raises(ValueError, match="trials"):
        sha.limit_stage(2, 0)
    # Closing admission later keeps a limit: it sizes stages from the trials, never up.
    other = SuccessiveHalving(1, 9, 3, "max", 27)
    for i in range(12):
        other.next_job(f"t{i}")
    other.limit_stage(1, 2)
    other.close_admission()
    assert other.sizes == [12, 2, 1] and other.natural_sizes == [12, 4, 1]


def test_sha_promotes_more_than_a_third_into_a_widened_stage():
    sha = SuccessiveHalving(1, 27, 3)                 # rungs 1/3/9/27, sizes 27/9/3/1
    jobs = [sha.next_job(f"t{i}") for i in range(26)]
    assert not sha.handed_out()                       # a 27th trial is still to start
    jobs.append(sha.next_job("t26"))
    sha.widen_stage(1, 12)
    assert sha.sizes == [27, 12, 4, 1]
    sha.widen_stage(1, 5)                             # never fewer than halving's 9
    assert sha.sizes == [27, 9, 3, 1]
    sha.widen_stage(2, 7)                             # a later stage: at most the one before
    assert sha.sizes == [27, 9, 7, 2]
    sha.widen_stage(1, 12)
    assert sha.handed_out()                           # every job of stage 0 is out
    for i, job in enumerate(jobs):
        sha.on_rung(job.trial_id, 1, float(i))
    assert not sha.handed_out()                       # stage 1's promotions are to start
    # The best twelve, best first; the other 15 are pruned.
    assert [sha.next_job("x").trial_id for _ in range(12)] == [f"t{i}" for i in range(26, 14, -1)]
    assert sha.next_job("x") is None
    assert sum(sha.status(f"t{i}") is TrialStatus.PRUNED for i in range(27)) == 15
    assert sha.handed_out()
    assert sha.natural_sizes == [27, 9, 3, 1] and sha.sizes == [27, 12, 4, 1]
    for bad in (1, 4, True, "2"):                     # decided, past the end, not an int
        with pytest.raises(ValueError, match="stage"):
            sha.widen_stage(bad, 5)
    with pytest.raises(ValueError, match="trials"):
        sha.widen_stage(2, 0)


def test_sha_decides_a_stage_without_its_stragglers_only_when_enough_have_reached_it():
    sha = SuccessiveHalving(1, 9, 3)                  # rungs 1/3/9, sizes 9/3/1
    jobs = [sha.next_job(f"t{i}") for i in range(9)]
    assert sha.stragglers() == []                     # stage 0 decides with all its trials
    for i, job in enumerate(jobs):
        sha.on_rung(job.trial_id, 1, float(i))
    promoted = [sha.next_job("x").trial_id for _ in range(3)]
    assert promoted == ["t8", "t7", "t6"] and sha.stage == 1
    assert sha.stragglers() == []                     # none has reached rung 3 yet
    sha.on_rung("t7", 3, 0.5)
    assert sha.stragglers() == ["t8", "t6"]           # one reached: enough for stage 2's one
    assert sha.decide_stage() == ["t8", "t6"]
    assert sha.status("t8") is TrialStatus.PRUNED and sha.status("t6") is TrialStatus.PRUNED
    job = sha.next_job("x")
    assert (job.trial_id, job.to_step) == ("t7", 9) and sha.stage == 2
    assert sha.stragglers() == [] and sha.decide_stage() == []   # the last stage runs out
    sha.on_rung("t7", 9, 0.9)
    assert sha.is_finished()


def test_sha_decides_no_stage_while_one_of_its_jobs_is_still_to_start():
    sha = SuccessiveHalving(1, 9, 3)
    for i, job in enumerate([sha.next_job(f"t{i}") for i in range(9)]):
        sha.on_rung(job.trial_id, 1, float(i))
    first, second = sha.next_job("x"), sha.next_job("x")    # t6 is promoted, not started
    sha.on_rung(second.trial_id, 3, 0.5)
    assert sha.stragglers() == [] and sha.decide_stage() == []
    assert sha.status(first.trial_id) is TrialStatus.RUNNING
    third = sha.next_job("x")
    assert third.trial_id == "t6"
    assert sha.stragglers() == [first.trial_id, "t6"]       # now it can be decided


def test_sha_first_reduction_cuts_only_the_first_rung_gently():
    from tuner.schedulers import make_scheduler
    sha = SuccessiveHalving(1, 27, 3, num_trials=27, first_reduction=2)
    assert sha.sizes == [27, 13, 4, 1] == sha.natural_sizes
    jobs = [sha.next_job(f"t{i}") for i in range(27)]
    for i, job in enumerate(jobs):
        sha.on_rung(job.trial_id, job.to_step, float(i))
    # The best half (13 of 27) go on; the next stage is decided at 1/eta again.
    assert sha.stage == 1 and len(sha.members()) == 13 and sha.members()[0] == "t26"
    assert sha.natural_sizes == [27, 13, 4, 1]
    # Admission closed early: the later stages follow the trials admitted, first cut 1/2.
    early = SuccessiveHalving(1, 27, 3, num_trials=27, first_reduction=2)
    for i in range(10):
        early.next_job(f"e{i}")
    early.close_admission()
    assert early.sizes == [10, 5, 1, 1] == early.natural_sizes
    with pytest.raises(ValueError, match="first_reduction"):
        SuccessiveHalving(1, 27, 3, first_reduction=1)
    with pytest.raises(ValueError, match="only a synchronous halving"):
        make_scheduler("asha", 1, 27, 3, "max", None, first_reduction=2)


# --- synchronous halving that promotes early -------------------------------------------------


def _fixed_value(trial_id: str, step: int) -> float | None:
    """The same value whenever asked (report orders differ between the runs compared); ties
    between trials, and a trial whose metric is NaN, which is never promoted."""
    n = int(trial_id[1:])
    if n % 17 == 5:
        return math.nan
    return (n * 7919 % 23) / 23 + step / 1000


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize(("num_trials", "first_reduction"), [(27, None), (40, None), (81, 2)])
def test_early_promotion_promotes_the_same_trials_sooner(seed, num_trials, first_reduction):
    def run(early: bool):
        sha = SuccessiveHalving(1, 27, 3, "max", num_trials, first_reduction,
                                early_promotion=early)
        log = drive(sha, _fixed_value, slots=5, seed=seed)
        reached = defaultdict(set)
        for event in log:
            if event[0] == "rung":
                reached[event[2]].add(event[1])
        return sha, log, reached

    plain, plain_log, plain_reached = run(False)
    early, early_log, early_reached = run(True)
    # The same trials reach every rung and end the same way ...
    assert early_reached == plain_reached
    assert {t: early.status(t) for t in early._trials} == \
        {t: plain.status(t) for t in plain._trials}
    # ... but a next rung's job is handed out while trials of the rung before still train.
    def overlaps(log):
        running: dict[str, int] = {}
        for event in log:
            if event[0] == "job":
                job = event[1]
                if any(step < job.to_step for step in running.values()) and not job.new:
                    return True
                running[job.trial_id] = job.to_step
            else:
                running.pop(event[1], None)
        return False

    assert overlaps(early_log) and not overlaps(plain_log)


def test_early_promotion_goes_only_as_far_as_is_certain():
    sha = SuccessiveHalving(1, 9, 3, "max", 9, early_promotion=True)   # sizes 9/3/1
    jobs = [sha.next_job(f"t{i}") for i in range(9)]
    for job, v in zip(jobs[:6], (0.9, 0.8, 0.1, 0.2, 0.3, 0.4), strict=True):
        sha.on_rung(job.trial_id, 1, v)
    # 6 have reported, 3 still train: each of those could rank above any of the 6.
    assert sha.next_job("x") is None and sha.stage == 0
    sha.on_rung("t6", 1, 0.0)
    # 2 still train: the best of 7 is certain to be in the top 3, and goes on now.
    assert sha.next_job("x") == Job("t0", 3) and sha.next_job("x") is None
    assert sha.stragglers() == ["t7", "t8"]           # (t0 trains on: not a straggler)
    with pytest.raises(ValueError, match="promoted early"):
        sha.limit_stage(1, 1)
    sha.on_rung("t7", 1, 0.85)
    assert sha.next_job("x") == Job("t7", 3)          # the second best, certain now
    sha.on_rung("t0", 3, 0.95)                        # the early one reports its next rung
    sha.on_rung("t8", 1, 0.05)                        # the stage is decided: t1 completes it
    assert sha.stage == 1 and sha.members() == ["t0", "t7", "t1"]
    assert sha.next_job("x") == Job("t1", 3) and sha.next_job("x") is None
    assert sha.status("t2") is TrialStatus.PRUNED
    sha.on_rung("t7", 3, 0.5)
    # Stage 1 (3 trials into 1): t0 has reported, t1 trains: nothing certain (t1 may win).
    assert sha.next_job("x") is None
    sha.on_rung("t1", 3, 0.7)
    assert sha.next_job("x") == Job("t0", 9)


def test_early_promotion_is_for_synchronous_halving_with_a_given_number_of_trials():
    with pytest.raises(ValueError, match="early_promotion"):
        make_scheduler("asha", 1, 9, 3, "max", 9, early_promotion=True)
    assert make_scheduler("sha", 1, 9, 3, "max", 9, early_promotion=True).early_promotion
    with pytest.raises(ValueError, match="early_promotion"):
        SuccessiveHalving(1, 9, 3, "max", 9, early_promotion=1)


def test_sha_hands_a_queued_promotion_out_first_when_asked():
    sha = SuccessiveHalving(min_resource=1, max_resource=9, reduction_factor=3)
    jobs = [sha.next_job(f"t{i}") for i in range(9)]
    for i, job in enumerate(jobs):
        sha.on_rung(job.trial_id, job.to_step, float(i))
    assert sha.queued() == ["t8", "t7", "t6"]          # rank order
    sha.hand_out_first("t6")
    assert sha.queued() == ["t6", "t8", "t7"]
    assert [sha.next_job("x").trial_id for _ in range(3)] == ["t6", "t8", "t7"]
    with pytest.raises(ValueError, match="no promotion of it is queued"):
        sha.hand_out_first("t0")
    # A lost segment's job is offered again first; it is not a promotion to reorder.
    sha.on_rung("t6", 3, 1.0)
    sha.on_job_lost("t8")
    assert sha.queued() == [] and sha.next_job("x").trial_id == "t8"
