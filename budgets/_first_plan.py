"""The first plan of a sweep whose number of trials the planner chooses (SEER's problem), as
``elastune run`` makes it before anything is spent and as the planner benchmark measures it:
one sequence of :func:`budgets.plan_accuracy_max` calls, kept here so the product and the
benchmark cannot drift apart.

Example::

    >>> from budgets import BootLatency, InstanceType, Profile, plan_accuracy_max
    >>> gpu = InstanceType("aws", "x1", "T4", 1, 4, 16, "us-east-1", 3.6)
    >>> p = Profile(10.0, boot=BootLatency.fixed(60))
    >>> plan = initial_accuracy_plan(1, 9, 3, p, gpu, deadline_s=300.0, cost_budget_usd=0.5)
    >>> plan.feasible, plan.num_trials, plan.predicted_wall_s <= 300.0
    (True, 15, True)
    >>> late = initial_accuracy_plan(1, 9, 3, p, gpu, deadline_s=100.0, cost_budget_usd=0.5)
    >>> late.feasible, 0.1 < late.inputs["step_scale"] < 0.5   # 90 s of steps after a 60 s boot
    (False, True)
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from budgets._plan import Plan
from budgets._planner import plan_accuracy_max
from budgets._prices import InstanceType
from budgets._profile import Profile
from budgets._replan import DEFAULT_MARGIN

__all__ = ["initial_accuracy_plan"]


def initial_accuracy_plan(min_resource: int, max_resource: int, reduction_factor: int,
                          profile: Profile, instance: InstanceType | Sequence[InstanceType],
                          deadline_s: float | None, cost_budget_usd: float | None, *,
                          margin: float = DEFAULT_MARGIN, **kwargs: Any) -> Plan:
    """The plan a sweep with ``num_trials`` left out starts from: its number of trials is
    the most the sweep will admit.

    :func:`budgets.plan_accuracy_max` at the deadline itself, its first stage booted at the
    mean boot latency unless ``kwargs`` say otherwise; when no count is on time, the count
    chosen at the step times under which one trial is by the deadline less ``margin``
    (``rescale_late``, the plan ``feasible=False`` with ``inputs["step_scale"]``), kept only
    when such a fraction exists and the plan fits the cost budget; else the deadline's
    infeasible plan. Without a deadline, the one call. ``kwargs`` go to
    :func:`budgets.plan_accuracy_max`.

    The count is a ceiling, not a forecast: the :class:`budgets.Replanner` that then runs
    the sweep plans that count with ``margin`` of the time kept free and the first stage
    booted at the 0.9 quantile (``FIRST_STAGE_BOOT_QUANTILE``), and closes admission lower
    while the first stage shows the rest will not fit; it never admits more to that
    bracket. Choosing the count as that first plan is made (the margin kept, the 0.9
    quantile) chose fewer trials and won fewer of the planner benchmark's accuracy
    comparisons against ASHA ([docs/benchmarks/tuning-log.md][first-plan-count]).
    """
    if not 0 <= margin < 1:
        raise ValueError(f"margin is {margin!r}, but must be 0 <= margin < 1")

    def solve(by: float | None, rescale_late: bool = False) -> Plan:
        return plan_accuracy_max(min_resource, max_resource, reduction_factor, profile,
                                 instance, by, cost_budget_usd, rescale_late=rescale_late,
                                 **kwargs)

    plan = solve(deadline_s)
    if deadline_s is not None and not plan.feasible:
        rescaled = solve(deadline_s * (1.0 - margin), rescale_late=True)
        if "step_scale" in rescaled.inputs:
            plan = rescaled
    return plan
