"""Rung arithmetic of successive halving, ASHA and Hyperband, as pure functions.

Written here rather than taken from Optuna because Optuna's pruners decide inside a running trial
(no pause and resume) and keep no notion of a maximum resource or of Hyperband brackets as plans.
"""

from __future__ import annotations

import math

from tuner.schedulers._base import Mode, sortable


def validate_arguments(
    min_resource: object,
    max_resource: object,
    reduction_factor: object,
    mode: object = "max",
    num_trials: object = None,
) -> None:
    """Raise one ``ValueError`` listing every bad argument, each with what was given and allowed."""
    problems = []
    ints = {
        "min_resource": min_resource,
        "max_resource": max_resource,
        "reduction_factor": reduction_factor,
    }
    if num_trials is not None:
        ints["num_trials"] = num_trials
    for name, value in ints.items():
        if not isinstance(value, int) or isinstance(value, bool):
            problems.append(f"The value of {name} is {value!r}, but must be an int")
    if isinstance(min_resource, int) and min_resource < 1:
        problems.append(
            f"The value of min_resource is {min_resource}, but must be min_resource >= 1"
        )
    both_ints = isinstance(min_resource, int) and isinstance(max_resource, int)
    if both_ints and max_resource < min_resource:
        problems.append(
            f"The value of max_resource is {max_resource}, "
            f"but must be max_resource >= min_resource = {min_resource}"
        )
    if isinstance(reduction_factor, int) and reduction_factor < 2:
        problems.append(
            f"The value of reduction_factor is {reduction_factor}, "
            "but must be reduction_factor >= 2"
        )
    if mode not in ("min", "max"):
        problems.append(f"The value of mode is {mode!r}, but must be 'min' or 'max'")
    if isinstance(num_trials, int) and num_trials < 1:
        problems.append(
            f"The value of num_trials is {num_trials}, but must be None or num_trials >= 1"
        )
    if problems:
        raise ValueError("; ".join(problems))


def rung_steps(min_resource: int, max_resource: int, reduction_factor: int) -> list[int]:
    """Rung steps ``r * eta**k`` below ``max_resource``, then ``max_resource`` itself.

    >>> rung_steps(1, 27, 3), rung_steps(1, 10, 3)
    ([1, 3, 9, 27], [1, 3, 9, 10])
    """
    validate_arguments(min_resource, max_resource, reduction_factor)
    steps = []
    step = min_resource
    while step < max_resource:
        steps.append(step)
        step *= reduction_factor
    return [*steps, max_resource]


def is_number(value: float | None) -> bool:
    """False for None, NaN and infinities, the values that rank worst and are never
    promoted."""
    return value is not None and math.isfinite(value)


def promotion_cutoff(
    competing_values: list[float | None], reduction_factor: int, mode: Mode
) -> float | None:
    """The ``sortable`` value of the ``ceil(n / eta)``-th best competitor, or None if n < 2."""
    if len(competing_values) < 2:
        return None
    top = -(-len(competing_values) // reduction_factor)
    ranked = sorted((sortable(v, mode) for v in competing_values), reverse=True)
    return ranked[top - 1]


def promotable(
    value: float | None,
    competing_values: list[float | None],
    reduction_factor: int,
    mode: Mode,
) -> bool:
    """Whether ``value`` is among the top ``ceil(n / eta)`` of the ``n >= 2`` values at its rung.

    ``competing_values`` includes ``value`` itself. This is ASHA's promotion test (Li et al., "A
    System for Massively Parallel Hyperparameter Tuning", MLSys 2020, Algorithm 2) as Syne Tune
    and Ray Tune decide it: a value at or above the rung's ``1 - 1/eta`` quantile (linear
    interpolation) once the rung has two values, which is the top ``ceil(n / eta)``. The
    paper's ``floor(n / eta)`` holds every rung's best back until ``eta`` values are in. Ties:
    every value as good as the ``ceil(n/eta)``-th best is promotable, so the answer depends on
    values only, never on order. NaN and None rank worst and are never promotable.

    >>> promotable(0.9, [0.1, 0.5, 0.9], 3, "max"), promotable(0.5, [0.1, 0.5, 0.9], 3, "max")
    (True, False)
    """
    if not is_number(value):
        return False
    cutoff = promotion_cutoff(competing_values, reduction_factor, mode)
    return cutoff is not None and sortable(value, mode) >= cutoff


def sha_sizes(n: int, num_rungs: int, eta: int, first: int | None = None) -> list[int]:
    """Survivors of synchronous successive halving per rung: ``n, n // f, n // (f * eta),
    ...``, at least 1 (``f``: the first rung's reduction, ``first`` or ``eta``).

    >>> sha_sizes(27, 4, 3), sha_sizes(27, 4, 3, first=2)
    ([27, 9, 3, 1], [27, 13, 4, 1])
    """
    f = first or eta
    return [max(1, n)] + [max(1, n // (f * eta ** (k - 1))) for k in range(1, num_rungs)]


def round_div(a: int, b: int) -> int:
    """``a / b`` rounded half up, exactly."""
    return (2 * a + b) // (2 * b)


def hyperband_brackets(min_resource: int, max_resource: int, eta: int) -> list[tuple[int, int]]:
    """Hyperband brackets ``(n_s, r_s)`` for ``s = s_max .. 0`` (Li et al., JMLR 2018, Alg. 1).

    ``s_max = floor(log_eta(R / r))``, ``n_s = ceil((s_max + 1) / (s + 1) * eta**s)`` and
    ``r_s = R * eta**-s`` rounded, computed with integers only.

    >>> hyperband_brackets(1, 81, 3)
    [(81, 1), (34, 3), (15, 9), (8, 27), (5, 81)]
    """
    validate_arguments(min_resource, max_resource, eta)
    s_max = 0
    while min_resource * eta ** (s_max + 1) <= max_resource:
        s_max += 1
    return [
        (-(-(s_max + 1) * eta**s // (s + 1)), max(min_resource, round_div(max_resource, eta**s)))
        for s in range(s_max, -1, -1)
    ]


def hyperband_rungs(min_resource: int, max_resource: int, eta: int, s: int) -> list[int]:
    """The ``s + 1`` rung steps of bracket ``s``: ``R * eta**(i - s)`` rounded, ``i = 0 .. s``."""
    return [max(min_resource, round_div(max_resource, eta**j)) for j in range(s, -1, -1)]
