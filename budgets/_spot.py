"""Which market a new instance is bought on: spot for the exploratory rungs, on-demand for the
survivors, and on-demand whenever the deadline could not absorb one more preemption.

Spot capacity costs a third of on-demand but can be taken back at any moment; a preempted
segment loses the work since its checkpoint and waits for a replacement VM to boot. The first
rungs' short segments risk little, the last rung's long ones are on the critical path.
:class:`SpotPolicy` puts the exploratory rungs on spot and, in ``exploratory`` mode, the last
rung on on-demand; in both modes, once the slack before the deadline falls below the cost of
one more preemption (a boot plus a lost segment), every new instance is on-demand for good: the
safety net of Wu et al., "Can't Be Late: Optimizing Spot Instance Savings under Deadlines"
(NSDI '24). How the controller applies it: docs/guides/spot.md#spot-where-it-is-safe.

Hand-written: the rule is a comparison of three durations; no library decides this.

Example::

    >>> policy = SpotPolicy("exploratory")
    >>> policy.spot(stage=0, last_stage=3, elapsed_s=0, deadline_s=5000,
    ...             remaining_s=3000, restart_s=400)
    True
    >>> policy.spot(stage=3, last_stage=3, elapsed_s=3000, deadline_s=5000,
    ...             remaining_s=1000, restart_s=400)     # the survivors: on-demand
    False
    >>> always = SpotPolicy("deadline-safe")
    >>> always.spot(stage=1, last_stage=3, elapsed_s=1000, deadline_s=5000,
    ...             remaining_s=3800, restart_s=400)     # 200 s of slack < one restart
    False
    >>> always.spot(stage=2, last_stage=3, elapsed_s=2000, deadline_s=9000,
    ...             remaining_s=1000, restart_s=400)     # once on-demand, stays
    False
"""

from __future__ import annotations

import math
from typing import Literal

__all__ = ["SPOT_MODES", "SpotPolicy"]

SPOT_MODES = ("deadline-safe", "exploratory")


class SpotPolicy:
    """The market of each new instance (True: spot), asked by the controller at each launch.

    Args:
        mode: ``"deadline-safe"``: spot until the safety net trips; ``"exploratory"``: spot
            for every rung but the last, whose survivors run on on-demand instances (and the
            safety net).
        safety: how many restarts' worth of slack must stay before the deadline (1: one
            preemption can be absorbed).
        margin: the share of the time left that the re-planner should keep free
            (:class:`budgets.Replanner`'s ``margin``): a cost-minimal plan leaves no slack,
            and without slack the safety net trips at once and nothing runs on spot. A
            plan with 15 % of slack rents a larger cluster at a third of the price.
    """

    def __init__(self, mode: Literal["deadline-safe", "exploratory"] = "exploratory", *,
                 safety: float = 1.0, margin: float = 0.15) -> None:
        if mode not in SPOT_MODES:
            raise ValueError(f"mode is {mode!r}, but must be one of {', '.join(SPOT_MODES)}")
        if not (isinstance(safety, int | float) and math.isfinite(safety) and safety >= 0):
            raise ValueError(f"safety is {safety!r}, but must be a finite number >= 0")
        if not (isinstance(margin, int | float) and 0 <= margin < 1):
            raise ValueError(f"margin is {margin!r}, but must be 0 <= margin < 1")
        self.mode = mode
        self.safety = float(safety)
        self.margin = float(margin)
        self.fallen_back = False   # the safety net has tripped: on-demand from now on

    def __repr__(self) -> str:
        return f"SpotPolicy({self.mode!r}, safety={self.safety}, margin={self.margin})"

    def spot(self, *, stage: int, last_stage: int, elapsed_s: float,
             deadline_s: float | None, remaining_s: float | None, restart_s: float,
             last_start_s: float | None = None, boot_s: float = 0.0) -> bool:
        """Whether an instance launched now should be spot.

        Args:
            stage: the rung being run; ``last_stage`` the job's last one.
            elapsed_s: seconds since the sweep started; ``deadline_s`` its time budget (None:
                no deadline, no safety net).
            remaining_s: seconds the rest of the job needs on on-demand capacity, as the
                current plan predicts (None: no plan; the safety net then compares with
                nothing and holds).
            restart_s: what one preemption costs the job: a replacement's boot plus the
                work lost since the last checkpoint.
            last_start_s: when the plan starts the last rung (seconds into the sweep), and
                ``boot_s`` how long a VM takes to boot: in ``exploratory`` mode the survivors'
                on-demand instances are bought that long ahead, so they are up in time.
        """
        if self.mode == "exploratory" and (
                stage >= last_stage
                or (last_start_s is not None and elapsed_s >= last_start_s - boot_s)):
            return False
        if self.fallen_back:
            return False
        if deadline_s is not None and remaining_s is not None:
            slack = deadline_s - elapsed_s - remaining_s
            if slack < self.safety * max(0.0, restart_s):
                self.fallen_back = True
                return False
        return True
