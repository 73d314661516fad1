"""The job a planner plans for: the shape of a synchronous successive-halving sweep, and how long
one of its stages takes on a given cluster.

The rung arithmetic is repeated here (it is ten lines) rather than imported from
``tuner.schedulers`` because ``budgets`` imports nothing else of the project.

Example::

    >>> shape = JobShape(num_trials=27, min_resource=1, max_resource=27, reduction_factor=3)
    >>> shape.rungs(), shape.stage_sizes(), shape.stage_steps()
    ([1, 3, 9, 27], [27, 9, 3, 1], [1, 2, 6, 18])
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any

from budgets._profile import Profile


def entry_shares(rungs: int, reduction_factor: int, brackets: int) -> list[float]:
    """The share of new trials that enter at each of the first ``brackets`` rungs: Hyperband's
    bracket sizes ``ceil((s_max + 1) * eta**s / (s + 1))``, ``s = s_max - b``, normalised
    (Li et al., JMLR 2018), so every bracket gets about the same resources.

    >>> [round(x, 3) for x in entry_shares(4, 3, 4)]
    [0.551, 0.245, 0.122, 0.082]
    >>> entry_shares(4, 3, 1)
    [1.0]
    """
    s_max = rungs - 1
    # (integer ceilings: a huge reduction factor's powers are exact where floats overflow)
    sizes = [-(-(s_max + 1) * reduction_factor ** (s_max - b) // (s_max - b + 1))
             for b in range(brackets)]
    total = sum(sizes)
    return [n / total for n in sizes]


@dataclass(frozen=True)
class JobShape:
    """``num_trials`` trials, trained to ``min_resource`` steps, then the best ``1/eta`` of them
    to ``min_resource * eta`` steps, and so on up to ``max_resource`` steps (Jamieson and
    Talwalkar, AISTATS 2016; the job RubberBand plans for, Misra et al., EuroSys '21).

    ``first_reduction`` (None: ``eta``) is the first rung's alone: the best
    ``1/first_reduction`` of the trials go on from it, ``1/eta`` of each stage after. A first
    rung ranks trials on the fewest steps, where rankings are least reliable, so a gentler
    first cut keeps more of them for a second look (see :func:`budgets.plan_accuracy_max`).

    ``brackets`` > 1: asynchronous Hyperband's job, new trials entering at each of the first
    ``brackets`` rungs in Hyperband's proportions; stage ``k`` then counts every trial that
    trains its steps (those that entered at rung ``k`` or later, and the ``1/eta**j`` of
    those that entered ``j`` rungs below), in expectation.

    >>> JobShape(81, 1, 27, 3, first_reduction=2).stage_sizes()
    [81, 40, 13, 4]
    >>> JobShape(81, 1, 27, 3, brackets=4).stage_sizes()
    [81, 51, 28, 13]
    """

    num_trials: int
    min_resource: int
    max_resource: int
    reduction_factor: int
    first_reduction: int | None = None
    brackets: int = 1

    def __post_init__(self) -> None:
        problems = []
        for name in ("num_trials", "min_resource", "max_resource", "reduction_factor"):
            v = getattr(self, name)
            if not isinstance(v, int) or isinstance(v, bool):
                problems.append(f"The value of {name} is {v!r}, but must be an int")
        if not problems:
            if self.num_trials < 1:
                problems.append(f"The value of num_trials is {self.num_trials}, "
                                "but must be num_trials >= 1")
            if self.min_resource < 1:
                problems.append(f"The value of min_resource is {self.min_resource}, "
                                "but must be min_resource >= 1")
            if self.max_resource < self.min_resource:
                problems.append(f"The value of max_resource is {self.max_resource}, but must "
                                f"be max_resource >= min_resource = {self.min_resource}")
            if self.reduction_factor < 2:
                problems.append(f"The value of reduction_factor is {self.reduction_factor}, "
                                "but must be reduction_factor >= 2")
        f = self.first_reduction
        if f is not None and (not isinstance(f, int) or isinstance(f, bool) or f < 2):
            problems.append(f"The value of first_reduction is {f!r}, but must be None or an "
                            "int >= 2")
        b = self.brackets
        if not isinstance(b, int) or isinstance(b, bool) or b < 1:
            problems.append(f"The value of brackets is {b!r}, but must be an int >= 1")
        elif b > 1 and f is not None:
            problems.append(f"brackets is {b} and first_reduction {f}, but only one bracket "
                            "has a first cut of its own")
        elif b > 1 and not problems and b > len(self.rungs()):
            problems.append(f"The value of brackets is {b}, but there are only "
                            f"{len(self.rungs())} rungs")
        if problems:
            raise ValueError("; ".join(problems))

    def rungs(self) -> list[int]:
        """Rung steps ``r * eta**k`` below ``max_resource``, then ``max_resource`` itself."""
        steps = []
        step = self.min_resource
        while step < self.max_resource:
            steps.append(step)
            step *= self.reduction_factor
        return [*steps, self.max_resource]

    def stage_sizes(self) -> list[int]:
        """Trials in each stage of synchronous SHA: ``n, n // f, n // (f * eta), ...`` (``f``
        the first rung's reduction, ``eta`` unless ``first_reduction`` says), at least 1."""
        if self.brackets > 1:
            return self._bracketed_sizes()
        f = self.first_reduction or self.reduction_factor
        return [self.num_trials] + [max(1, self.num_trials // (f * self.reduction_factor**(k - 1)))
                                    for k in range(1, len(self.rungs()))]

    def _bracketed_sizes(self) -> list[int]:
        eta, stages = self.reduction_factor, len(self.rungs())
        entered = [p * self.num_trials for p in entry_shares(stages, eta, self.brackets)]
        return [max(1, math.floor(sum(n if k <= b else n * (1 / eta ** (k - b))
                                      for b, n in enumerate(entered)) + 1e-9))
                for k in range(stages)]

    def stage_steps(self) -> list[int]:
        """Steps each trial of a stage trains: from the previous rung (restored) to this one."""
        rungs = self.rungs()
        return [b - a for a, b in zip([0, *rungs[:-1]], rungs, strict=True)]

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def stage_time(m: int, steps: int, workers: int, trials_per_worker: int, profile: Profile,
               gpus: int = 1, *, restore: bool = True, straggler: float = 0.0,
               start: int = 0) -> float:
    """Seconds for ``m`` trials to each train ``steps`` steps on ``workers`` instances that run
    ``trials_per_worker`` trials at once, each trial on ``gpus`` GPUs.

    The trials run in ``waves = ceil(m / (workers * trials_per_worker))`` waves; a wave lasts one
    segment, ``profile.segment_seconds(steps, gpus, restore=restore, start=start)`` (setup,
    restore from the checkpoint of the previous rung when ``restore``, steps ``start + 1`` to
    ``start + steps`` at ``s_per_step(1) / s(g)`` each, weighed by the profile's step costs, and
    the checkpoint), stretched by ``1 + straggler``: the slowest trial of a wave sets its end, and
    ``straggler`` is how much slower than the profile that slowest one is (0: no stragglers;
    RubberBand models the same effect). Waves are synchronous: stage k+1 starts once every trial
    of stage k has reported, as synchronous SHA requires.
    """
    if not (isinstance(m, int) and m >= 1):
        raise ValueError(f"m is {m!r}, but must be an int >= 1")
    if not (isinstance(workers, int) and workers >= 1):
        raise ValueError(f"workers is {workers!r}, but must be an int >= 1")
    if not (isinstance(trials_per_worker, int) and trials_per_worker >= 1):
        raise ValueError(f"trials_per_worker is {trials_per_worker!r}, but must be an int >= 1")
    if not (math.isfinite(straggler) and straggler >= 0):
        raise ValueError(f"straggler is {straggler!r}, but must be a finite number >= 0")
    waves = -(-m // (workers * trials_per_worker))
    return waves * profile.segment_seconds(steps, gpus, restore=restore, start=start) \
        * (1.0 + straggler)
