"""What the simulation tests share: hand-checkable curves, scheduler settings, instance
types priced for easy sums, and a scheduler driven with the controller's journaling."""

from __future__ import annotations

import math

from budgets import InstanceType


class Synth:
    """Hand-checkable curves: config i has quality q_i; every step takes 10 s."""

    name = "synth"

    def __init__(self, n: int = 81, diverge: dict[str, int] | None = None,
                 shorter: dict[str, int] | None = None) -> None:
        self.q = {f"c{i}": 0.5 + 0.5 * ((i * 37) % n) / n for i in range(n)}
        self.div = diverge or {}
        self.short = shorter or {}

    def config_ids(self):
        return list(self.q)

    def value(self, c, s):
        return self.q[c] * (1 - math.exp(-s / 5))

    def cost_s(self, c, a, b):
        return 10.0 * (b - a)

    def last_step(self, c):
        return self.div.get(c, self.short.get(c, 27))

    def diverged(self, c):
        return c in self.div


ASHA = {"type": "asha", "min_resource": 1, "max_resource": 27, "reduction_factor": 3}
SHA = {**ASHA, "type": "sha"}

# GPU: $3.6/h, so one instance-second costs $0.001; SIM_GPU: $1/h.
GPU = InstanceType("aws", "x1", "T4", 1, 4, 16, "us-east-1", 3.6)
SIM_GPU = InstanceType("local", "sim-gpu", "T4", 1, 4, 16, "local", 1.0)


def drive_journaled(scheduler, store, values, stop_after):
    """Run a scheduler with the controller's journaling for ``stop_after`` calls."""
    n, calls, running = 0, 0, []
    while calls < stop_after:
        job = scheduler.next_job(f"t{n + 1:04d}")
        if job is not None:
            if job.new:
                n += 1
            store.journal_add("job", job.trial_id, job.to_step, bracket=job.bracket,
                              flag=job.new)
            running.append(job)
        elif not running:
            break
        if running and (job is None or len(running) >= 3):
            done = running.pop(0)
            v = values(done.trial_id, done.to_step)
            store.journal_add("rung", done.trial_id, done.to_step, v)
            scheduler.on_rung(done.trial_id, done.to_step, v)
        calls += 1
    return running


def sim_controller(spec, store, settings, *, chosen: bool = False, prior=(0.0, 0.0),
                   observer=None):
    """A controller for ``spec`` over ``store`` on a fresh simulated world of ``Synth``
    curves and local $3.6/h workers, built as ``resume`` builds one (``chosen``: the count
    is the planner's, as the first run's store says); with its provider and executor."""
    from pathlib import Path

    from tuner._build import Parts, build_controller
    from tuner._planning import plan_for
    from tuner.sim import SimInstanceType
    from tuner.sim._simulate import world

    itype = SimInstanceType("local", slots=1, on_demand_per_hour=3.6)
    clock, provider, executor = world(Synth(n=81), itype, metric="acc", markets=False,
                                      boot_s=lambda rng: 0.0)
    parts = Parts(clock=clock, executor=executor, provider=provider, store=store,
                  settings=settings, trainable="simulated", checkpoint_root=Path("/none"),
                  instance_type="local", observer=observer)
    return build_controller(spec, plan_for(spec), parts, experiment_id="sim", chosen=chosen,
                            prior=prior), provider, executor
