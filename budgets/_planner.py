"""Planners: how many instances of which type a successive-halving sweep should hold, stage by
stage, to cost the least while meeting a deadline, or to try the most trials within a time
and a cost budget.

*Cost-minimising* (:func:`plan_cost_min`) is the problem of RubberBand (Misra et al.,
"RubberBand: Cloud-based Hyperparameter Tuning", EuroSys '21): for a fixed job shape and a
deadline, choose the cluster size of every stage so that the predicted bill is smallest and the
predicted end is before the deadline. *Accuracy-maximising* (:func:`plan_accuracy_max`) is the
problem of SEER (Dunlap et al., "Elastic Hyperparameter Tuning on the Cloud", SoCC '21): choose
the job shape too, as many trials as both budgets allow.

The model bills each instance per second over its whole life (boot included, at least the
billing minimum) and times each stage in whole waves of its trials, ending with its slowest
trial, whose excess over the mean pace holds only its own instance and those the next stage
needs (the sweep lets the others go as their trials end); it is solved exactly by a
dynamic program over the stages whose candidates include every static cluster, so a plan is
never dearer than a static one that meets the same deadline. Hand-written because no
maintained library solves this: Ray Tune and Syne Tune schedule trials on a given cluster, and
SkyPilot chooses instances for one job, not a cluster size per stage. The model and the solver
in full: docs/concepts/planner.md#the-cost-model.

Example::

    >>> from budgets import InstanceType, Profile, BootLatency
    >>> gpu = InstanceType("aws", "x1", "T4", 1, 4, 16, "us-east-1", 3.6)
    >>> profile = Profile(10.0, boot=BootLatency.fixed(0))
    >>> shape = JobShape(9, 1, 9, 3)
    >>> plan = plan_cost_min(shape, profile, gpu, deadline_s=None)
    >>> plan.predicted_cost_usd, plan.predicted_wall_s     # 90 + 60 + 60 GPU-seconds, one GPU
    (0.21, 210.0)
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from budgets._job import JobShape, stage_time
from budgets._ledger import DEFAULT_MINIMUM_S
from budgets._plan import Plan, RungPlan, TimelinePoint
from budgets._prices import InstanceType
from budgets._profile import Profile
from budgets._scaling import RELAUNCH_LEAD, RELEASE_MARGIN

__all__ = [
    "JobShape",
    "choose_instance",
    "plan_accuracy_max",
    "plan_cost_min",
    "plan_remaining",
    "plan_static",
    "stage_time",
    "trial_counts",
]

_EPS = 1e-9
# Young instances: (age in seconds, how many), oldest first; only those still inside their
# billing minimum, whose remaining minimum ("credit") is already paid for.
_Young = tuple[tuple[int, int], ...]


def _whole(seconds: float) -> int:
    return max(0, math.ceil(seconds - _EPS))


def _fewest_workers(m: int) -> list[int]:
    """Distinct ``ceil(m / v)``, v = 1..m: the fewest slots that finish m trials in v waves."""
    out = []
    v = 1
    while v <= m:
        q = -(-m // v)
        out.append(q)
        if q == 1:
            break
        v = -(-m // (q - 1))
    return out


@dataclass
class _Job:
    """A job on one instance type, in the terms the dynamic program uses."""

    sizes: list[int]
    steps: list[int]
    options: tuple[int, ...]            # GPUs per trial the plan may use
    base_gpus: int                      # the static plans' GPUs per trial
    tpw: dict[int, int]                 # GPUs per trial -> trials per instance
    segment: list[dict[int, float]]     # stage -> GPUs per trial -> one segment's seconds
    pace: list[tuple[float, float]]     # stage -> (mean, slowest) of its trials' paces
    factor: float                       # 1 + straggler
    boot: int
    minimum: float
    max_workers: int | None
    _durations: dict[tuple[int, int, int], tuple[int, int]]
    live: int = 0                       # instances up as stage 0 starts (a re-plan's)

    def duration(self, k: int, g: int, w: int) -> int:
        return self.timing(k, g, w)[0]

    def tail(self, k: int, g: int, w: int) -> int:
        """Seconds of stage k's end that only its slowest trial trains: past the waves at
        the mean pace (see :meth:`timing`)."""
        return self.timing(k, g, w)[1]

    def timing(self, k: int, g: int, w: int) -> tuple[int, int]:
        """(seconds, tail seconds) of stage k on ``w`` instances with ``g`` GPUs per trial."""
        key = (k, g, w)
        t = self._durations.get(key)
        if t is None:
            # The same arithmetic as stage_time, rounded up to a whole second; with trials of
            # known paces, the stage's slowest trial may be handed out in its last wave (jobs
            # go out in rank order, not slowest first), so the stage lasts the waves before
            # it at the mean pace and then the slowest, as in a list schedule's worst case.
            # Counting the slowest as going out first met fewer of the planner benchmark's
            # deadlines: docs/benchmarks/tuning-log.md#slowest-in-last-wave
            mean, slowest = self.pace[k]
            m = self.sizes[k]
            if k == 0 and 0 < self.live < w:
                # The live instances go on training while the added ones boot: the stage's
                # waves on all w are over the trials left once those are up (at the mean
                # pace; the stage's slowest may still be among them).
                one = self.segment[k][g] * mean * self.factor
                if one > 0:
                    m = max(1, m - int(self.live * self.tpw[g] * self.boot / one))
            waves = -(-m // (w * self.tpw[g]))
            whole = _whole(max(waves * mean, (waves - 1) * mean + slowest)
                           * self.segment[k][g] * self.factor)
            # The other trials end with the mean waves: past them, only the slowest's instance
            # is at work (the sweep lets the others go, or holds them for the next stage).
            body = whole if slowest <= mean else \
                min(whole, _whole(waves * mean * self.segment[k][g] * self.factor))
            t = self._durations[key] = (whole, whole - body)
        return t

    def held_in_tail(self, tail: int, w: int, w_next: int) -> int:
        """Instances billed through a stage's tail of ``tail`` seconds on ``w``, before
        ``w_next`` take the next stage (0: none follows), as :class:`FollowPlan` holds them:
        the slowest's own, and those the next stage needs unless its work is more than
        ``RELAUNCH_LEAD + RELEASE_MARGIN`` boots off (they go, and boot again for it)."""
        if w_next < 1 or tail > (RELAUNCH_LEAD + RELEASE_MARGIN) * self.boot:
            return min(w, 1)
        return min(w, max(w_next, 1))

    def candidates(self, k: int, g: int) -> list[int]:
        """Worker counts worth trying for stage k with g GPUs per trial (see the module doc)."""
        found: set[int] = set()
        for j in range(k, len(self.sizes)):
            found.update(_fewest_workers(-(-self.sizes[j] // self.tpw[g])))
        if self.max_workers is not None:
            found = {w for w in found if w <= self.max_workers}
        return sorted(found)

    def fastest(self, k: int) -> int:
        return min(self.duration(k, g, max(self.candidates(k, g))) for g in self.options)

    def work_lower_bound(self, k: int) -> float:
        """Instance-seconds stage k needs at least: its trials' seconds over the slots."""
        return min(self.sizes[k] / self.tpw[g] * self.segment[k][g] * self.factor
                   * self.pace[k][0] for g in self.options)


def _job(shape: JobShape, profile: Profile, instance: InstanceType, gpus_per_trial: int,
         gpu_options: Iterable[int] | None, straggler: float, boot_s: float | None,
         billing_minimum_s: float, max_workers: int | None) -> _Job:
    problems = []
    options = tuple(sorted({gpus_per_trial, *(gpu_options or ())}))
    for g in options:
        if not isinstance(g, int) or isinstance(g, bool) or g < 1:
            problems.append(f"gpus per trial {g!r} must be an int >= 1")
        elif g > instance.gpus:
            problems.append(f"a trial on {g} GPU(s) does not fit on {instance.name}, which has "
                            f"{instance.gpus}")
    if not (isinstance(straggler, int | float) and math.isfinite(straggler) and straggler >= 0):
        problems.append(f"straggler is {straggler!r}, but must be a finite number >= 0")
    boot = profile.boot.mean if boot_s is None else boot_s
    if not (isinstance(boot, int | float) and math.isfinite(boot) and boot >= 0):
        problems.append(f"boot_s is {boot_s!r}, but must be a finite number >= 0")
    if not (isinstance(billing_minimum_s, int | float) and math.isfinite(billing_minimum_s)
            and billing_minimum_s >= 0):
        problems.append(f"billing_minimum_s is {billing_minimum_s!r}, but must be >= 0")
    if max_workers is not None and (not isinstance(max_workers, int) or max_workers < 1):
        problems.append(f"max_workers is {max_workers!r}, but must be None or an int >= 1")
    if problems:
        raise ValueError("; ".join(problems))
    sizes, steps, rungs = shape.stage_sizes(), shape.stage_steps(), shape.rungs()
    segment = [{g: profile.segment_seconds(s, g, restore=k > 0, start=rungs[k] - s)
                for g in options} for k, s in enumerate(steps)]
    return _Job(sizes, steps, options, gpus_per_trial,
                {g: instance.gpus // g for g in options}, segment,
                [(1.0, profile.slowest_pace(m, promoted=k > 0)) for k, m in enumerate(sizes)],
                1.0 + float(straggler),
                _whole(boot), float(billing_minimum_s), max_workers, {})


def _advance(w_prev: int, young: _Young, cost: float, w: int, seconds: int, boot: int,
             minimum: float) -> tuple[float, _Young]:
    """Scale from ``w_prev`` to ``w`` instances at a boundary, then hold them ``seconds``.

    ``cost`` is in instance-seconds: every instance is charged ``max(minimum, age)`` so far.
    """
    if w > w_prev:
        added = w - w_prev
        cost += added * max(boot, minimum)
        if boot < minimum:
            young = (*young, (boot, added))
    elif w < w_prev and young:
        drop = (w_prev - w) - (w_prev - sum(c for _, c in young))  # young ones to let go
        if drop > 0:
            kept = []
            for age, c in young:
                gone = min(c, drop)
                drop -= gone
                if c > gone:
                    kept.append((age, c - gone))
            young = tuple(kept)
    if not young:
        return cost + w * seconds, young
    cost += (w - sum(c for _, c in young)) * seconds
    still = []
    for age, c in young:
        age += seconds
        if age < minimum:
            still.append((age, c))
        else:
            cost += c * (age - minimum)
    return cost, tuple(still)


def _credit(young: _Young, minimum: float) -> float:
    return sum(c * (minimum - age) for age, c in young)


def _start_delay(job: _Job, live: int, w: int) -> int:
    """Seconds before the first planned stage can start on ``w`` instances when ``live`` are
    up: none if they suffice, else one boot latency (the new ones cannot have been launched
    ahead). With nothing live (a fresh plan) every stage-0 plan waits one boot."""
    return job.boot if w > live else 0


def _tail(job: _Job, k: int, w: int, g: int, w_next: int, cost: float,
          young: _Young) -> tuple[float, _Young, int]:
    """Bill stage k's tail (on ``w`` instances, ``w_next`` to follow; 0: none): (cost, young,
    instances held at its end). Without a tail, nothing changes and all ``w`` are held."""
    tail = job.tail(k, g, w)
    if not tail:
        return cost, young, w
    held = job.held_in_tail(tail, w, w_next)
    cost, young = _advance(w, young, cost, held, tail, job.boot, job.minimum)
    return cost, young, held


def _evaluate(job: _Job, choice: Sequence[tuple[int, int]], live: int = 0, *,
              hold: bool = False) -> tuple[int, float, list[int]]:
    """(wall seconds, instance-seconds billed, stage seconds) of a (workers, gpus) per stage,
    starting with ``live`` instances up (past their billing minimum). Each stage's tail (its
    slowest trial's time past the mean waves) bills only the instances :meth:`_Job.held_in_tail`
    keeps; ``hold``: a fixed cluster, which bills every instance through it."""
    elapsed, cost, young, w_prev = 0, 0.0, (), live
    times = []
    for k, (w, g) in enumerate(choice):
        if k == 0:
            delay = _start_delay(job, live, w)
            elapsed += delay
            cost += live * delay  # the live ones wait (billed) for the new ones to boot
        elif not hold:
            cost, young, w_prev = _tail(job, k - 1, *choice[k - 1], w, cost, young)
        t = job.duration(k, g, w)
        body = t if hold else t - job.tail(k, g, w)
        cost, young = _advance(w_prev, young, cost, w, body, job.boot, job.minimum)
        elapsed += t
        times.append(t)
        w_prev = w
    if choice and not hold:
        cost, young, _ = _tail(job, len(choice) - 1, *choice[-1], 0, cost, young)
    return elapsed, cost, times


# A state: (elapsed, cost, young, credit, path); path is (workers, gpus, parent path) or None.
_State = tuple[int, float, _Young, float, Any]


def _gap(a: _Young, b: _Young, minimum: float) -> float:
    """How much more a future can cost a cluster with young instances ``a`` than one with
    ``b`` (same size): the credit ``b`` has beyond ``a``, instance by instance from the youngest
    (instances leave oldest first, so equal ranks live equally long; each future second of an
    instance costs ``max(0, life - credit)``, 1-Lipschitz in its credit)."""
    total = 0.0
    i, j = len(a) - 1, len(b) - 1
    left_a = a[i][1] if i >= 0 else 0
    left_b = b[j][1] if j >= 0 else 0
    while j >= 0:
        credit_b = minimum - b[j][0]
        if i >= 0:
            credit_a, n = minimum - a[i][0], min(left_a, left_b)
            left_a -= n
            if left_a == 0:
                i -= 1
                left_a = a[i][1] if i >= 0 else 0
        else:
            credit_a, n = 0.0, left_b
        if credit_b > credit_a:
            total += n * (credit_b - credit_a)
        left_b -= n
        if left_b == 0:
            j -= 1
            left_b = b[j][1] if j >= 0 else 0
    return total


def _prune(states: list[_State], minimum: float) -> list[_State]:
    """Drop every state another one dominates: no later, and no dearer whatever comes next.

    A kept state A (no later than s) dominates s when A's cost plus the credit s holds beyond A
    (:func:`_gap`) is at most s's cost. With no young instances (boot >= billing minimum, or
    stages longer than it) this is plain Pareto pruning of (elapsed, cost).
    """
    states.sort(key=lambda s: (s[0], s[1]))
    kept: list[_State] = []
    cheapest = math.inf
    for s in states:
        _, cost, young, credit, _ = s
        if cheapest <= cost - credit + _EPS:  # beaten even if s used all of its credit
            continue
        if young and any(a[1] + _gap(a[2], young, minimum) <= cost + _EPS
                         for a in kept if a[1] <= cost + _EPS):
            continue
        kept.append(s)
        cheapest = min(cheapest, cost)
    return kept


def _solve(job: _Job, deadline: float, bound: float,
           live: int = 0) -> tuple[list[tuple[int, int]], int, float]:
    """The cheapest (workers, gpus) per stage that ends by ``deadline`` and costs <= ``bound``
    instance-seconds, with its wall and cost, starting with ``live`` instances up; ([], 0, inf)
    when there is none."""
    # Stage times are whole seconds: a whole-second deadline (the fastest plan's wall) is
    # compared exactly, as a float it would round below the wall past 2**53 s.
    limit = deadline if isinstance(deadline, int) else deadline + _EPS
    n = len(job.sizes)
    rest_time = [0] * (n + 1)
    rest_work = [0.0] * (n + 1)
    for k in range(n - 1, -1, -1):
        rest_time[k] = rest_time[k + 1] + job.fastest(k)
        rest_work[k] = rest_work[k + 1] + job.work_lower_bound(k)
    # Frontiers by (instances, tail seconds) of the stage just planned: its tail is billed
    # once the next stage's count is chosen (:func:`_tail`), so only states alike in both
    # face the same future.
    states: dict[tuple[int, int], list[_State]] = {(live, 0): [(0, 0.0, (), 0.0, None)]}
    for k in range(n):
        later_t, later_w = rest_time[k + 1], rest_work[k + 1]
        nxt: dict[tuple[int, int], list[_State]] = {}
        offered = {g: job.candidates(k, g) for g in job.options}
        moves = [(g, w, job.duration(k, g, w)) for g, ws in offered.items() for w in ws]
        last = k == n - 1
        for (w_prev, tail), frontier in states.items():
            hold = [(g, w_prev, job.duration(k, g, w_prev)) for g, ws in offered.items()
                    if w_prev and w_prev not in ws]
            for g, w, t in moves + hold:
                own = job.tail(k, g, w)
                bucket = nxt.setdefault((w, own), [])
                d = _start_delay(job, w_prev, w) if k == 0 else 0
                for elapsed, cost, young, _, path in frontier:  # sorted by elapsed
                    if elapsed + d + t + later_t > limit:
                        break
                    c, y, held = cost + w_prev * d, young, w_prev
                    if tail:
                        c, y, held = _tail(job, k - 1, w_prev, path[1], w, c, y)
                    c, y = _advance(held, y, c, w, t - own, job.boot, job.minimum)
                    if last and own:
                        c, y, _ = _tail(job, k, w, g, 0, c, y)
                    credit = _credit(y, job.minimum) if y else 0.0
                    if c - credit + later_w > bound + _EPS:
                        continue
                    bucket.append((elapsed + d + t, c, y, credit, (w, g, path)))
        states = {key: _prune(b, job.minimum) for key, b in nxt.items() if b}
    finals = [s for frontier in states.values() for s in frontier]
    if not finals:
        return [], 0, math.inf
    elapsed, cost, _, _, path = min(finals, key=lambda s: (s[1], s[0]))
    choice = []
    while path is not None:
        w, g, path = path
        choice.append((w, g))
    return choice[::-1], elapsed, cost


def _timeline(job: _Job, choice: Sequence[tuple[int, int]], starts: list[int], end: int,
              name: str, spot: bool, hold: bool = False) -> list[TimelinePoint]:
    """Instances held (booting ones included) from each ``t_s`` on; scale-ups are launched
    ``boot`` seconds before their stage, so the autoscaler can follow the points as they are.
    In a stage's tail (not ``hold``) only :meth:`_Job.held_in_tail` of them are held."""
    workers = [w for w, _ in choice]
    delta: dict[int, int] = {0: workers[0]}
    before = workers[0]   # held as each stage ends
    for k, (w, g) in enumerate(choice):
        if k:
            change = w - before
            if change:
                at = starts[k] - job.boot if change > 0 else starts[k]
                delta[at] = delta.get(at, 0) + change
        tail = 0 if hold else job.tail(k, g, w)
        before = w
        if tail:
            before = job.held_in_tail(tail, w, workers[k + 1] if k + 1 < len(workers) else 0)
            stop = end if k + 1 == len(workers) else starts[k + 1]
            if before < w:
                delta[stop - tail] = delta.get(stop - tail, 0) + before - w
    delta[end] = delta.get(end, 0) - before
    points, held = [], 0
    for t in sorted(delta):
        if delta[t] or t == 0:
            held += delta[t]
            points.append(TimelinePoint(float(t), held, name, spot))
    return points


def _plan(shape: JobShape, job: _Job, instance: InstanceType, spot: bool,
          choice: Sequence[tuple[int, int]], *, deadline: float, planner: str, reason: str,
          started: float, extra: dict[str, Any] | None = None, live: int = 0,
          first: int = 0, offset: float = 0.0, hold: bool = False) -> Plan:
    """The plan of ``choice`` for stages ``first..`` of ``shape`` (all of ``job``), starting
    ``offset`` seconds into the sweep with ``live`` instances up; times are from the sweep's
    start, costs from ``offset`` on."""
    wall, cost, times = _evaluate(job, choice, live, hold=hold)
    delay = _start_delay(job, live, choice[0][0]) if choice else 0
    starts = [delay + sum(times[:k]) for k in range(len(times))]
    rungs = shape.rungs()
    rung_plans = [RungPlan(first + k, job.sizes[k], rungs[first + k], g, w,
                           float(offset + starts[k]), float(offset + starts[k] + times[k]))
                  for k, (w, g) in enumerate(choice)]
    timeline = [replace(p, t_s=p.t_s + offset) for p in
                _timeline(job, choice, starts, wall, instance.name, spot, hold)]
    price = instance.hourly(spot)
    inputs = {
        "shape": shape.to_json(),
        "instance_type": instance.name,
        "provider": instance.provider,
        "region": instance.region,
        "price_per_hour": price,
        "spot": spot,
        "deadline_s": None if math.isinf(deadline) else deadline,
        "boot_s": job.boot,
        "billing_minimum_s": job.minimum,
        "straggler": job.factor - 1.0,
        "max_workers": job.max_workers,
        "gpus_per_trial": job.base_gpus,
        "solve_s": round(time.perf_counter() - started, 6),
        **(extra or {}),
    }
    return Plan(
        feasible=not reason,
        predicted_cost_usd=round(cost * price / 3600.0, 9),
        predicted_wall_s=float(offset + wall),
        num_trials=shape.num_trials,
        rungs=rung_plans,
        timeline=timeline,
        planner=planner,
        reason=reason,
        inputs=inputs,
    )


def _deadline(deadline_s: float | None) -> float:
    if deadline_s is None:
        return math.inf
    if not (isinstance(deadline_s, int | float) and not math.isnan(deadline_s)
            and deadline_s > 0):
        raise ValueError(f"deadline_s is {deadline_s!r}, but must be None or a number > 0")
    return float(deadline_s)


def plan_cost_min(shape: JobShape, profile: Profile, instance: InstanceType,
                  deadline_s: float | None, *, gpus_per_trial: int = 1, spot: bool = False,
                  billing_minimum_s: float = DEFAULT_MINIMUM_S, boot_s: float | None = None,
                  max_workers: int | None = None, straggler: float = 0.0,
                  gpu_options: Iterable[int] | None = None) -> Plan:
    """The cheapest plan for ``shape`` on ``instance`` that ends by ``deadline_s`` (RubberBand).

    Args:
        shape: trials and rungs of the synchronous successive-halving job.
        profile: seconds per step, setup/restore/checkpoint, speedup on g GPUs, boot latency.
        instance: the one instance type the plan rents; ``instance.gpus // gpus_per_trial``
            trials share an instance.
        deadline_s: seconds from now; ``None`` for no deadline (the cheapest plan at all).
        gpus_per_trial: GPUs each trial uses.
        spot: price the instances at their spot price (preemption is not modelled).
        billing_minimum_s: each instance is billed at least this long.
        boot_s: seconds from launch to taking work (default: the profile's mean boot latency).
        max_workers: at most this many instances at once (``None``: no limit).
        straggler: the slowest trial of each wave takes ``1 + straggler`` times the profile's.
        gpu_options: GPUs per trial the plan may also choose, stage by stage (SEER widens the
            survivors of late rungs; with s(g) < g it pays only under a tight deadline).

    Returns:
        A feasible :class:`Plan`, or, when even the fastest plan misses the deadline, the
        cheapest of the fastest plans with ``feasible=False`` and a ``reason``.
    """
    started = time.perf_counter()
    deadline = _deadline(deadline_s)
    job = _job(shape, profile, instance, gpus_per_trial, gpu_options, straggler, boot_s,
               billing_minimum_s, max_workers)
    price = instance.hourly(spot)
    # The best static plan bounds the search and is the answer should the search not beat it.
    statics = [(cost, wall, [(w, gpus_per_trial)] * len(job.sizes))
               for w in job.candidates(0, gpus_per_trial)
               for wall, cost, _ in [_evaluate(job, [(w, gpus_per_trial)] * len(job.sizes))]
               if wall <= deadline + _EPS]
    best_static = min(statics, key=lambda s: (s[0], s[1]), default=None)
    fastest = job.boot + sum(job.fastest(k) for k in range(len(job.sizes)))
    extra: dict[str, Any] = {"fastest_wall_s": fastest,
                             "s_per_step": profile.seconds_per_step(gpus_per_trial)}
    if best_static is not None:
        extra["best_static_cost_usd"] = round(best_static[0] * price / 3600.0, 9)
        extra["best_static_workers"] = best_static[2][0][0]
    if fastest > deadline + _EPS:
        choice, _, _ = _solve(job, fastest, math.inf)
        cap = "" if max_workers is None else f" with at most {max_workers} instances"
        reason = (f"no plan meets the deadline of {deadline:g} s: the fastest{cap} on "
                  f"{instance.name} takes {fastest} s")
        return _plan(shape, job, instance, spot, choice, deadline=deadline, planner="cost-min",
                     reason=reason, started=started, extra=extra)
    bound = best_static[0] if best_static is not None else math.inf
    choice, _, cost = _solve(job, deadline, bound)
    if best_static is not None and (not choice or best_static[0] <= cost):
        choice = best_static[2]
    return _plan(shape, job, instance, spot, choice, deadline=deadline, planner="cost-min",
                 reason="", started=started, extra=extra)


def plan_remaining(shape: JobShape, profile: Profile, instance: InstanceType,
                   deadline_s: float | None, *, from_stage: int, elapsed_s: float,
                   live_workers: int, done_in_stage: int = 0, gpus_per_trial: int = 1,
                   spot: bool = False,
                   billing_minimum_s: float = DEFAULT_MINIMUM_S, boot_s: float | None = None,
                   max_workers: int | None = None, straggler: float = 0.0,
                   gpu_options: Iterable[int] | None = None,
                   paces: Sequence[tuple[float, float]] | None = None,
                   stage_sizes: Sequence[int] | None = None) -> Plan:
    """Re-plan a sweep under way: :func:`plan_cost_min` for stages ``from_stage..`` of
    ``shape`` only, ``elapsed_s`` seconds after the sweep started, with ``live_workers``
    instances already up and ``done_in_stage`` of stage ``from_stage``'s trials already
    trained to its rung (they are not planned again; at least one trial is left to the stage,
    for the segments still running).

    The live instances pay no boot and are past their billing minimum; a plan that starts
    stage ``from_stage`` on more of them waits one boot latency for the new ones, billing the
    live ones meanwhile, which go on training: the stage's waves on all of them are over the
    trials left once the new ones are up (counted at the mean pace): counted idle, a scale-up
    looked dearer and slower than it is
    ([docs/benchmarks/tuning-log.md][live-instances-work]). Holding the live count, and every
    static count, are candidates, so the result is never dearer than keeping a fixed cluster
    that meets the deadline.

    ``paces`` gives, per planned stage (``from_stage`` first), the (mean, slowest) seconds per
    step of the trials it will train relative to the profile's (1.0: as profiled; missing
    stages: (1, 1)). Trials differ (a wider network trains slower, and successive halving may
    favour it), and a synchronous stage ends with its slowest trial: a stage of ``m`` trials
    on ``w`` slots takes ``max(ceil(m / w) * mean, (ceil(m / w) - 1) * mean + slowest)``
    profiled segments (its slowest trial may go out in the last wave); past the mean waves
    only the slowest's instance, and those the next stage needs, are billed. A stage
    ``paces`` does not give is (1, ``profile.slowest_pace(m)``): as alike as the mean without
    the profile's ``pace_quantiles`` (after the sweep's first stage, its
    ``promoted_pace_quantiles`` where it has them).

    Returns:
        A plan whose rungs keep their indices in ``shape`` and whose times (rung starts and
        ends, timeline, ``predicted_wall_s``) count from the sweep's start; its
        ``predicted_cost_usd`` is what the remaining stages cost. When no plan ends by
        ``deadline_s`` (seconds from the sweep's start), the cheapest of the fastest plans,
        ``feasible=False``.
    """
    started = time.perf_counter()
    deadline = _deadline(deadline_s)
    stages = len(shape.rungs())
    if not (isinstance(from_stage, int) and 0 <= from_stage < stages):
        raise ValueError(f"from_stage is {from_stage!r}, but must be an int in [0, {stages})")
    if not (isinstance(live_workers, int) and live_workers >= 0):
        raise ValueError(f"live_workers is {live_workers!r}, but must be an int >= 0")
    if not (isinstance(elapsed_s, int | float) and math.isfinite(elapsed_s) and elapsed_s >= 0):
        raise ValueError(f"elapsed_s is {elapsed_s!r}, but must be a finite number >= 0")
    if not (isinstance(done_in_stage, int) and done_in_stage >= 0):
        raise ValueError(f"done_in_stage is {done_in_stage!r}, but must be an int >= 0")
    full = _job(shape, profile, instance, gpus_per_trial, gpu_options, straggler, boot_s,
                billing_minimum_s, max_workers)
    if stage_sizes is not None:
        given = list(stage_sizes)
        if len(given) != stages or any(not isinstance(m, int) or isinstance(m, bool) or m < 1
                                       for m in given):
            raise ValueError(f"stage_sizes is {given!r}, but must be {stages} ints >= 1, one "
                             "per stage")
        full = replace(full, sizes=given, pace=[(1.0, profile.slowest_pace(m, promoted=k > 0))
                                                for k, m in enumerate(given)], _durations={})
    sizes = full.sizes[from_stage:]
    sizes = [max(1, sizes[0] - done_in_stage), *sizes[1:]]
    planned = list(paces or ())[:len(sizes)]
    for k, pair in enumerate(planned):
        if not (isinstance(pair, tuple | list) and len(pair) == 2
                and all(isinstance(v, int | float) and math.isfinite(v) and v > 0
                        for v in pair) and pair[0] <= pair[1] + _EPS):
            raise ValueError(f"paces[{k}] is {pair!r}, but must be (mean, slowest) with "
                             "0 < mean <= slowest")
    pace = [(float(a), float(b)) for a, b in planned]
    pace += [(1.0, profile.slowest_pace(m, promoted=from_stage + k > 0))
             for k, m in enumerate(sizes) if k >= len(pace)]
    job = replace(full, sizes=sizes, steps=full.steps[from_stage:],
                  segment=full.segment[from_stage:], pace=pace, _durations={},
                  live=live_workers)
    left = deadline - elapsed_s
    n, live = len(job.sizes), live_workers
    counts = sorted(set(job.candidates(0, gpus_per_trial)) | ({live} if live else set()))
    statics = [(cost, [(w, gpus_per_trial)] * n) for w in counts
               for wall, cost, _ in [_evaluate(job, [(w, gpus_per_trial)] * n, live)]
               if wall <= left + _EPS]
    best_static = min(statics, key=lambda s: s[0], default=None)
    first = min(_start_delay(job, live, w) + job.duration(0, g, w) for g in job.options
                for w in {*job.candidates(0, g), *([live] if live else [])})
    fastest = first + sum(job.fastest(k) for k in range(1, n))
    extra: dict[str, Any] = {"fastest_wall_s": elapsed_s + fastest,
                             "s_per_step": profile.seconds_per_step(gpus_per_trial),
                             "from_stage": from_stage, "elapsed_s": elapsed_s,
                             "live_workers": live, "done_in_stage": done_in_stage,
                             "paces": [list(p) for p in pace]}
    common: dict[str, Any] = dict(deadline=deadline, planner="cost-min", started=started,
                                  extra=extra, live=live, first=from_stage, offset=elapsed_s)
    if fastest > left + _EPS:
        # Late whatever it does: the cheapest of the fastest plans. From stage 1 on, each
        # stage is timed as if every trial were as slow as its slowest: the model packs a
        # stage's waves by its mean pace, so it may see no loss in queueing two quick trials
        # behind each other rather than booting one more instance, but paces are estimates
        # (trials of near equal pace, noise), and past the deadline that risk saves too
        # little. (In stage 0 the rates seen are first segments only, often dearer than the
        # steps to come, and a plan late by them is the rule rather than the exception.)
        robust = job if from_stage == 0 else \
            replace(job, pace=[(b, b) for _, b in job.pace], _durations={})
        quickest = min(_start_delay(robust, live, w) + robust.duration(0, g, w)
                       for g in robust.options
                       for w in {*robust.candidates(0, g), *([live] if live else [])}) \
            + sum(robust.fastest(k) for k in range(1, n))
        choice, _, _ = _solve(robust, quickest, math.inf, live)
        reason = (f"no plan meets the deadline of {deadline:g} s: {elapsed_s:g} s in, the "
                  f"fastest rest on {instance.name} takes {fastest} s")
        return _plan(shape, job, instance, spot, choice, reason=reason, **common)
    bound = best_static[0] if best_static is not None else math.inf
    choice, _, cost = _solve(job, left, bound, live)
    if best_static is not None and (not choice or best_static[0] <= cost):
        choice = best_static[1]
    return _plan(shape, job, instance, spot, choice, reason="", **common)


def plan_static(shape: JobShape, profile: Profile, instance: InstanceType, workers: int, *,
                gpus_per_trial: int = 1, spot: bool = False,
                billing_minimum_s: float = DEFAULT_MINIMUM_S, boot_s: float | None = None,
                straggler: float = 0.0, deadline_s: float | None = None) -> Plan:
    """The same model with ``workers`` instances for the whole job (the baseline RubberBand
    compares with), every one held until each stage's slowest trial ends; ``feasible`` says
    whether it ends by ``deadline_s``."""
    started = time.perf_counter()
    deadline = _deadline(deadline_s)
    if not isinstance(workers, int) or isinstance(workers, bool) or workers < 1:
        raise ValueError(f"workers is {workers!r}, but must be an int >= 1")
    job = _job(shape, profile, instance, gpus_per_trial, None, straggler, boot_s,
               billing_minimum_s, None)
    choice = [(workers, gpus_per_trial)] * len(job.sizes)
    wall, _, _ = _evaluate(job, choice, hold=True)
    reason = "" if wall <= deadline + _EPS else (
        f"{workers} instance(s) of {instance.name} take {wall} s, more than the deadline of "
        f"{deadline:g} s")
    return _plan(shape, job, instance, spot, choice, deadline=deadline, planner="static",
                 reason=reason, started=started, hold=True)


def choose_instance(shape: JobShape, profile: Profile, pricebook_types: Sequence[InstanceType],
                    deadline_s: float | None, *, gpus_per_trial: int = 1, spot: bool = False,
                    billing_minimum_s: float = DEFAULT_MINIMUM_S, boot_s: float | None = None,
                    max_workers: int | None = None, straggler: float = 0.0,
                    gpu_options: Iterable[int] | None = None) -> Plan:
    """:func:`plan_cost_min` on each instance type; the cheapest feasible plan (ties: the
    faster, then the name). Types a trial does not fit on, or without a spot price when
    ``spot``, are skipped. With no feasible plan: the fastest infeasible one.

    Multi-GPU types pack ``gpus // gpus_per_trial`` trials per instance, so a 4-GPU type
    competes with four 1-GPU ones on price and on boot and billing-minimum overheads.
    """
    options = list(gpu_options or ())
    usable = [t for t in pricebook_types
              if t.gpus >= gpus_per_trial and (not spot or t.spot_per_hour is not None)]
    if not usable:
        names = ", ".join(t.name for t in pricebook_types) or "none"
        raise ValueError(f"no instance type can run a trial on {gpus_per_trial} GPU(s)"
                         f"{' at a spot price' if spot else ''}; given: {names}")
    plans = [plan_cost_min(shape, profile, t, deadline_s, gpus_per_trial=gpus_per_trial,
                           spot=spot, billing_minimum_s=billing_minimum_s, boot_s=boot_s,
                           max_workers=max_workers, straggler=straggler,
                           gpu_options=[g for g in options if g <= t.gpus])
             for t in usable]
    feasible = [p for p in plans if p.feasible]
    if feasible:
        best = min(feasible, key=lambda p: (p.predicted_cost_usd, p.predicted_wall_s,
                                            p.inputs["instance_type"]))
    else:
        best = min(plans, key=lambda p: (p.predicted_wall_s, p.predicted_cost_usd,
                                         p.inputs["instance_type"]))
    compared = {p.inputs["instance_type"]: {"feasible": p.feasible,
                                            "predicted_cost_usd": p.predicted_cost_usd,
                                            "predicted_wall_s": p.predicted_wall_s}
                for p in plans}
    return replace(best, inputs={**best.inputs, "compared": compared})


def trial_counts(reduction_factor: int, cap: int = 10_000) -> list[int]:
    """The trial counts :func:`plan_accuracy_max` tries: ``c * eta**k`` for c < 2 * eta, <= cap.

    >>> trial_counts(3, 60)
    [1, 2, 3, 4, 5, 6, 9, 12, 15, 18, 27, 36, 45, 54]
    """
    out: set[int] = set()
    power = 1
    while power <= cap:
        # (bounded by the cap, not by eta: a huge eta must not cost 2 * eta steps)
        out.update(c * power for c in range(1, min(2 * reduction_factor, cap // power + 1)))
        power *= reduction_factor
    return sorted(out)


def plan_accuracy_max(min_resource: int, max_resource: int, reduction_factor: int,
                      profile: Profile, instance: InstanceType | Sequence[InstanceType],
                      deadline_s: float | None, cost_budget_usd: float | None, *,
                      gpus_per_trial: int = 1, candidates: Iterable[int] | None = None,
                      max_trials: int = 10_000, spot: bool = False,
                      billing_minimum_s: float = DEFAULT_MINIMUM_S, boot_s: float | None = None,
                      max_workers: int | None = None, straggler: float = 0.0,
                      gpu_options: Iterable[int] | None = None,
                      raise_min_resource: bool = False,
                      first_reduction: int | None = None,
                      rescale_late: bool = False, brackets: int = 1) -> Plan:
    """The most trials whose cheapest plan meets ``deadline_s`` and costs <= ``cost_budget_usd``
    (SEER, Dunlap et al., SoCC '21), with that plan.

    ``raise_min_resource``: also try starting one rung up, at ``min_resource * eta`` (while at
    least two rungs remain), and take that shape when it still runs a whole halving ladder,
    i.e. at least ``eta ** (rungs - 1)`` of its trials fit, so one trial reaches
    ``max_resource``. The first rung ranks trials on the fewest steps, where rankings are least
    reliable. Hyperband (Li et al., JMLR 2018) hedges over the same choice by running every
    bracket; this picks one.

    ``first_reduction``: the shapes that start at ``min_resource`` cut their first rung to
    ``1/first_reduction`` (:class:`JobShape`), not ``1/eta``; a raised shape keeps ``eta``.
    The other way to give an unreliable first ranking less say, with more breadth. Both
    measured: [docs/benchmarks/tuning-log.md][first-rung]. ``brackets`` > 1: asynchronous
    Hyperband's shapes (:class:`JobShape`), which hedge over the first rung themselves.

    The accuracy proxy is the number of trials at a fixed rung schedule (r, R, eta): every
    trial still gets up to R steps if it survives, and successive halving keeps the best
    ``1/eta`` at each rung, so more trials means the final survivors are the best of a larger
    sample; the expected best of n random configurations grows with n. It does not trade
    trials for a longer R, which is the user's choice. Cheap trials come first by
    construction (rung 0 is where the trials are); wider trials for survivors come from
    ``gpu_options``.

    ``instance`` may be a list of types: each count then takes the cheapest of them
    (:func:`choose_instance`). ``candidates`` replaces :func:`trial_counts` up to
    ``max_trials``. Feasibility grows no easier with more trials, so the counts are searched
    by bisection. With no count feasible: the smallest count's plan, ``feasible=False``.

    ``rescale_late``: when no count is on time only because the profile's steps are too slow
    for the deadline (the smallest count's fastest plan is late but fits the cost budget),
    the profile's seconds per step are a prior the deadline itself refutes if the sweep is
    to do anything: then the counts are searched again with the profile's steps (and
    first-segment extra) at the largest fraction of their time under which the smallest count
    is on time (:meth:`Profile.scaled`, found by bisection), and that plan is returned, still
    ``feasible=False``, its reason saying so and ``inputs["step_scale"]`` the fraction. A
    sweep can run it and learn the real step times as it goes (its re-planner shrinks the
    job when they do not fit the cost budget), as one of a given size that is late on the
    profile's estimate runs its fastest plan
    ([docs/benchmarks/tuning-log.md][late-on-estimate]).
    """
    started = time.perf_counter()
    deadline = _deadline(deadline_s)
    if cost_budget_usd is not None and not (cost_budget_usd > 0
                                            and math.isfinite(cost_budget_usd)):
        raise ValueError(f"cost_budget_usd is {cost_budget_usd!r}, but must be None or > 0")
    counts = sorted(set(candidates) if candidates is not None
                    else trial_counts(reduction_factor, max_trials))
    if not counts or any(not isinstance(n, int) or n < 1 for n in counts):
        raise ValueError(f"candidates are {counts!r}, but must be ints >= 1")
    JobShape(1, min_resource, max_resource, reduction_factor, first_reduction,
             brackets)  # checks the ladder
    budget = math.inf if cost_budget_usd is None else cost_budget_usd
    kwargs: dict[str, Any] = dict(gpus_per_trial=gpus_per_trial, spot=spot,
                                  billing_minimum_s=billing_minimum_s, boot_s=boot_s,
                                  max_workers=max_workers, straggler=straggler,
                                  gpu_options=gpu_options)
    memo: dict[tuple[int, int], Plan] = {}

    def solve(p: Profile, n: int, r: int) -> Plan:
        shape = JobShape(n, r, max_resource, reduction_factor,
                         first_reduction if r == min_resource else None, brackets)
        if isinstance(instance, InstanceType):
            return plan_cost_min(shape, p, instance, deadline, **kwargs)
        return choose_instance(shape, p, list(instance), deadline, **kwargs)

    def plan_for(n: int, r: int) -> Plan:
        if (n, r) not in memo:
            memo[n, r] = solve(profile, n, r)
        return memo[n, r]

    def fits(p: Plan) -> bool:
        return p.feasible and p.predicted_cost_usd <= budget + _EPS

    def most(r: int) -> int:
        """The index in ``counts`` of the most trials that fit starting at ``r``; -1: none."""
        lo, hi = -1, len(counts)  # counts[lo] fits (or lo = -1); counts[hi] does not
        while hi - lo > 1:
            mid = (lo + hi) // 2
            if fits(plan_for(counts[mid], r)):
                lo = mid
            else:
                hi = mid
        return lo

    r = min_resource
    lo = most(r)
    raised = min_resource * reduction_factor
    if raise_min_resource and raised < max_resource:
        up = most(raised)
        ladder = reduction_factor ** (len(JobShape(1, raised, max_resource,
                                                   reduction_factor).rungs()) - 1)
        if up >= 0 and counts[up] >= ladder:
            r, lo = raised, up
    extra = {"planner_candidates": sorted({n for n, _ in memo}),
             "first_reduction": first_reduction if r == min_resource else None,
             "cost_budget_usd": cost_budget_usd,
             "solve_s": round(time.perf_counter() - started, 6)}
    if lo >= 0:
        best = plan_for(counts[lo], r)
        return replace(best, planner="accuracy-max", inputs={**best.inputs, **extra})
    smallest = plan_for(counts[0], min_resource)
    if rescale_late and not smallest.feasible and smallest.predicted_cost_usd <= budget + _EPS:
        scale = _on_time_scale(lambda p: solve(p, counts[0], min_resource).feasible, profile)
        if scale is not None:
            scaled = plan_accuracy_max(
                min_resource, max_resource, reduction_factor, profile.scaled(scale), instance,
                deadline_s, cost_budget_usd, candidates=counts, max_trials=max_trials,
                raise_min_resource=raise_min_resource, first_reduction=first_reduction,
                brackets=brackets, **kwargs)
            if scaled.feasible:
                return replace(scaled, feasible=False, reason=(
                    f"no trial is on time at the profile's {profile.seconds_per_step(1):g} s "
                    f"per step ({smallest.reason}); planned at {scale:.3g} times its step "
                    "times, the most that lets one trial end by the deadline"),
                    inputs={**scaled.inputs, "step_scale": scale,
                            "solve_s": round(time.perf_counter() - started, 6)})
    why = smallest.reason or (f"its cheapest plan costs {smallest.predicted_cost_usd:g} USD, "
                              f"more than the budget of {budget:g} USD")
    return replace(smallest, feasible=False, planner="accuracy-max",
                   reason=f"even {counts[0]} trial(s) do not fit: {why}",
                   inputs={**smallest.inputs, **extra})


def _on_time_scale(on_time: Callable[[Profile], bool], profile: Profile,
                   iterations: int = 30) -> float | None:
    """The largest fraction ``f`` in (0, 1) of ``profile``'s step times (to a relative 1e-3 or
    so) with ``on_time(profile.scaled(f))``; None when even a thousandth is late (boot and
    overheads alone miss the deadline). Bisection on the logarithm: lateness only grows with
    the step time."""
    lo, hi = 1e-3, 1.0
    if not on_time(profile.scaled(lo)):
        return None
    for _ in range(iterations):
        mid = math.sqrt(lo * hi)
        if on_time(profile.scaled(mid)):
            lo = mid
        else:
            hi = mid
        if hi / lo < 1.0005:
            break
    return lo
