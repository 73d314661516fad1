"""Which market a new instance is bought on, and in which zone: spot for the exploratory rungs,
on-demand for the survivors or whenever the deadline could not absorb one more preemption, and
Uniform Progress, the rule of "Can't Be Late", as a baseline.

Spot capacity costs a third of on-demand but can be taken back at any moment; a preempted
segment loses the work since its checkpoint and waits for a replacement VM to boot. The first
rungs' short segments risk little, the last rung's long ones are on the critical path.
:class:`SpotPolicy` has four modes:

- ``deadline-safe``: spot until the slack before the deadline falls below the cost of one more
  preemption (a boot plus a lost segment), then on-demand for good: the safety net of Wu et
  al., "Can't Be Late: Optimizing Spot Instance Savings under Deadlines" (NSDI '24);
- ``exploratory``: the same, and the last rung's survivors on on-demand;
- ``uniform-progress``: that paper's Uniform Progress, the sweep taken as its one job (progress
  measured by the plan's predicted remaining time; see :meth:`SpotPolicy.spot`);
- ``tuning-aware``: elastune's own: the safety net is asked again at each rung boundary
  (segments start from a checkpoint there anyway, so moving them costs no lost work) with that
  rung's own restart cost, so the short early rungs go back to spot after a late one; and
  zones are walked by price, those that took a VM back recently last
  (:meth:`SpotPolicy.zone_order`).

How the controller applies it: docs/guides/spot.md#spot-where-it-is-safe.

Hand-written: the rules compare a few durations; no library decides this.

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
from collections.abc import Mapping, Sequence
from typing import Literal

__all__ = ["SPOT_MODES", "SpotPolicy"]

SPOT_MODES = ("deadline-safe", "exploratory", "uniform-progress", "tuning-aware")
SpotMode = Literal["deadline-safe", "exploratory", "uniform-progress", "tuning-aware"]
# A zone that took a spot VM back within this long is walked after the others (seconds).
RECENT_PREEMPTION_S = 1800.0


class SpotPolicy:
    """The market of each new instance (True: spot), asked by the controller at each launch,
    and the order in which a spot launch walks the zones.

    Args:
        mode: see the module's docstring (:data:`SPOT_MODES`).
        safety: how many restarts' worth of slack must stay before the deadline (1: one
            preemption can be absorbed; Uniform Progress's net keeps two, its ``2d``).
        margin: the share of the time left that the re-planner should keep free
            (:class:`budgets.Replanner`'s ``margin``): a cost-minimal plan leaves no slack,
            and without slack the safety net trips at once and nothing runs on spot. A
            plan with 15 % of slack rents a larger cluster at a third of the price.
    """

    def __init__(self, mode: SpotMode = "exploratory", *,
                 safety: float | None = None, margin: float = 0.15) -> None:
        if mode not in SPOT_MODES:
            raise ValueError(f"mode is {mode!r}, but must be one of {', '.join(SPOT_MODES)}")
        if safety is None:
            safety = 2.0 if mode == "uniform-progress" else 1.0
        if not (isinstance(safety, int | float) and math.isfinite(safety) and safety >= 0):
            raise ValueError(f"safety is {safety!r}, but must be a finite number >= 0")
        if not (isinstance(margin, int | float) and 0 <= margin < 1):
            raise ValueError(f"margin is {margin!r}, but must be 0 <= margin < 1")
        self.mode = mode
        self.safety = float(safety)
        self.margin = float(margin)
        self.fallen_back = False   # the safety net has tripped: on-demand from now on
        self._fallen_at_stage: int | None = None   # tuning-aware: the stage it tripped in
        self._work_s: float | None = None          # uniform-progress: the job's C0
        self.catching_up = False                   # uniform-progress: on on-demand, behind

    def __repr__(self) -> str:
        return f"SpotPolicy({self.mode!r}, safety={self.safety}, margin={self.margin})"

    def spot(self, *, stage: int, last_stage: int, elapsed_s: float,
             deadline_s: float | None, remaining_s: float | None, restart_s: float,
             last_start_s: float | None = None, boot_s: float = 0.0,
             spot_short: bool = False) -> bool:
        """Whether an instance launched now should be spot.

        Args:
            stage: the rung being run; ``last_stage`` the job's last one.
            elapsed_s: seconds since the sweep started; ``deadline_s`` its time budget (None:
                no deadline, no safety net).
            remaining_s: seconds the rest of the job needs on on-demand capacity, as the
                current plan predicts, plus the work preempted since it was made (None: no
                plan; the safety net then compares with nothing and holds).
            restart_s: what one preemption costs the job: a replacement's boot plus the
                work lost since the last checkpoint (Uniform Progress's ``d``).
            last_start_s: when the plan starts the last rung (seconds into the sweep), and
                ``boot_s`` how long a VM takes to boot: in ``exploratory`` mode the survivors'
                on-demand instances are bought that long ahead, so they are up in time.
            spot_short: a spot launch found no capacity in any zone lately (Uniform
                Progress's "spot unavailable").

        Uniform Progress (Wu et al., NSDI '24, section 4), the sweep as its one job of
        ``C0`` seconds (the first plan's prediction), progress ``cp(t) = C0 - remaining_s``
        against the line ``ep(t) = C0 * t / deadline``: spot whenever there is spot
        capacity; with none (``spot_short``) and behind the line, on-demand, kept until
        ``cp(t) >= ep(t + 2d)`` (hysteresis); and on-demand for good once the time left is
        under the remaining work plus ``2d`` (its safety net).
        """
        if self.mode == "uniform-progress":
            return self._uniform_progress(elapsed_s, deadline_s, remaining_s, restart_s,
                                          spot_short)
        if self.mode == "exploratory" and (
                stage >= last_stage
                or (last_start_s is not None and elapsed_s >= last_start_s - boot_s)):
            return False
        if self.mode == "tuning-aware" and self.fallen_back \
                and self._fallen_at_stage is not None and stage > self._fallen_at_stage:
            # A new rung: its segments start from checkpoints anyway; ask the net again.
            self.fallen_back = False
        if self.fallen_back:
            return False
        if deadline_s is not None and remaining_s is not None:
            slack = deadline_s - elapsed_s - remaining_s
            if slack < self.safety * max(0.0, restart_s):
                self.fallen_back = True
                self._fallen_at_stage = stage
                return False
        return True

    def _uniform_progress(self, elapsed_s: float, deadline_s: float | None,
                          remaining_s: float | None, d: float, spot_short: bool) -> bool:
        if deadline_s is None or remaining_s is None or not math.isfinite(remaining_s):
            return not (remaining_s is not None and math.isinf(remaining_s))
        if self._work_s is None:
            self._work_s = max(remaining_s, 1e-9)
        if self.fallen_back or deadline_s - elapsed_s < remaining_s + self.safety * d:
            self.fallen_back = True                      # the safety net
            return False
        work = self._work_s
        done = work - remaining_s

        def line(t: float) -> float:
            return work * t / deadline_s if deadline_s > 0 else math.inf

        if self.catching_up:
            if done >= line(elapsed_s + 2.0 * d):        # hysteresis
                self.catching_up = False
            return not self.catching_up
        if spot_short and done < line(elapsed_s):       # no spot, behind: on-demand
            self.catching_up = True
            return False
        return True                                      # spot whenever there is some

    def zone_order(self, prices: Mapping[str, float], preempted_at: Mapping[str, Sequence[float]],
                   now: float, *, final: bool = False,
                   on_demand: float | None = None) -> list[str]:
        """The zones a spot launch walks, in order, of ``prices``' (spot price by zone),
        given when each zone took a VM of this sweep back (``preempted_at``, seconds).
        A zone whose spot price is not below ``on_demand`` is left out (none left: all).

        ``uniform-progress`` and the others: cheapest first (the multi-zone reading of
        the rule: any zone with capacity counts as spot available). ``tuning-aware``:
        cheapest first, without the zones that took a VM back in the last
        :data:`RECENT_PREEMPTION_S` while another zone is left (a zone whose capacity
        flaps would take each new VM back before it has booted); for the last rung
        (``final``) the zones by how many VMs they took back in all, fewest first: its
        long segments want the most stable zone.

        >>> SpotPolicy("tuning-aware").zone_order({"a": 1.0, "b": 2.0, "c": 1.5},
        ...                                       {"a": [900.0]}, 1000.0)
        ['c', 'b']
        """
        def key(z: str) -> tuple[float, float]:
            times = preempted_at.get(z, ())
            if self.mode != "tuning-aware":
                return (0.0, prices[z])
            if final:
                return (float(len(times)), prices[z])
            recent = any(now - t < RECENT_PREEMPTION_S for t in times)
            return (float(recent), prices[z])

        cheaper = [z for z in prices if on_demand is None or prices[z] < on_demand]
        order = sorted(cheaper or prices, key=key)
        if self.mode == "tuning-aware" and not final:
            calm = [z for z in order if key(z)[0] == 0.0]
            return calm or order
        return order
