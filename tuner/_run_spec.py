"""What the controller is told of a sweep (its validated settings and run-time knobs) and
what it returns."""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

from budgets import SpotPolicy
from worker.records import EndReason, ExperimentState


@dataclass(frozen=True)
class RunSpec:
    """What the controller needs to know of the sweep (already validated)."""

    experiment_id: str
    trainable: str
    metric: str
    mode: str
    workers: int
    gpus_per_trial: int
    time_budget_s: float | None
    cost_budget_usd: float | None
    checkpoint_root: Path | str      # a folder, or a URI in object storage (s3://, gs://)
    max_failures: int = 0
    instance_type: str = "local"
    spot: bool = False
    # Buy each new instance on the market this policy picks (spot for the exploratory rungs,
    # on-demand for the survivors and when the deadline is at risk); None: ``spot`` for all.
    spot_policy: SpotPolicy | None = None
    # A resumed sweep: wall time its earlier runs used (the time budget is for all of them).
    elapsed_before_s: float = 0.0
    # A segment running longer than this fails (the trainable's fault: counts against
    # max_failures); None: no limit.
    segment_timeout_s: float | None = None


@dataclass(frozen=True)
class Settings:
    tick_s: float = 0.05             # longest wait for an event before re-checking budgets
    boot_timeout_s: float = 180.0    # a sweep fails if no worker registers in this time
    # A VM whose worker has not registered this long after launch is terminated and replaced
    # (a bad image, a failed install, a broker it cannot reach).
    register_timeout_s: float = math.inf
    stop_grace_s: float = 10.0       # after the deadline, how long stopped segments may take
    reaction_s: float = 15.0         # budget margin: time to stop segments and terminate VMs
    prior_s_per_step: float = 1.0    # step time assumed before any segment was measured
    spend_every_s: float = 1.0       # how often spend is written to the store
    instance_check_s: float = 1.0    # how often the provider is asked which instances live
    # The lease on a running segment: renewed whenever its worker's heartbeat count moves (or
    # an event of it arrives); one that lapses is given up as STALE, re-run from the trial's
    # last checkpoint under a new segment id, and its instance replaced.
    heartbeat_timeout_s: float = math.inf
    notice_check_s: float = 1.0      # how often spot interruption notices are read
    # ``elastune stop DIR`` creates this file; the sweep then stops as on Ctrl-C (segments
    # get their grace to checkpoint, instances are terminated, results are kept).
    stop_file: Path | None = None
    # A sweep fails unless this many workers have registered within boot_timeout_s; the hint
    # says what to do about it.
    min_workers: int = 1
    boot_hint: str = "see the worker logs in the experiment directory"


@dataclass
class Outcome:
    state: ExperimentState
    reason: EndReason
    started_at: float
    finished_at: float
    spend_usd: float
    best_trial_id: str | None
    best_value: float | None
    dispatch_latencies_s: list[float]
    message: str | None = None
