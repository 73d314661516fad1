"""Hypothesis strategies for sweep documents: spaces, budgets and numbers near the valid ones,
so that acceptance is exercised as well as refusal."""

from __future__ import annotations

from hypothesis import strategies as st

from tuner._space import KINDS, choice, grid, loguniform, uniform

numbers = (
    st.integers(-(10**6), 10**6)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.sampled_from([10**400, -(10**400), "1e-4", "abc", "0", "", "1e999"])
    | st.booleans()
    | st.none()
)
leaves = st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=6)
arguments = (
    st.lists(numbers, max_size=3)
    | st.dictionaries(st.sampled_from(["low", "high", "log", "step", "x"]), numbers, max_size=5)
    | st.lists(leaves, max_size=4)
    | st.lists(st.lists(leaves, max_size=2), max_size=2)
    | leaves
)
# Entries near the valid ones, so that acceptance is exercised as well as refusal.
plausible_entries = (
    st.builds(
        lambda kind, low, high: {kind: [low, high]},
        st.sampled_from(["uniform", "loguniform", "float"]),
        st.floats(-10, 10),
        st.floats(-10, 10),
    )
    | st.builds(
        lambda kind, low, high: {kind: [low, high]},
        st.sampled_from(["randint", "int"]),
        st.integers(-5, 50),
        st.integers(-5, 50),
    )
    | st.builds(
        lambda kind, spec: {kind: spec},
        st.sampled_from(["int", "float"]),
        st.fixed_dictionaries(
            {"low": st.integers(-2, 8), "high": st.integers(-2, 64)},
            optional={"log": st.booleans(), "step": st.integers(-1, 4) | st.floats(-1, 4)},
        ),
    )
    | st.builds(
        lambda kind, values: {kind: values},
        st.sampled_from(["choice", "grid"]),
        st.lists(leaves, min_size=1, max_size=4),
    )
)
entries = (
    leaves
    | plausible_entries
    | st.dictionaries(st.sampled_from([*KINDS, "logunif", "low"]), arguments, max_size=2)
    | st.lists(leaves, max_size=3)
    | st.sampled_from([uniform(0, 1), loguniform(1e-3, 1), choice([1, "a"]), grid([1, 2])])
)
spaces = (
    st.dictionaries(st.text(max_size=4) | st.integers(), entries, max_size=4)
    | st.dictionaries(st.sampled_from(["a", "b", "c"]), plausible_entries, min_size=1, max_size=3)
    | leaves
    | st.lists(entries, max_size=2)
)
budget_values = (
    numbers
    | st.text(max_size=6)
    | st.sampled_from(["90s", "1h30m", "$2", "2h", "-1m", "0", "10m", "1h1h", "3 USD"])
    | st.timedeltas()
    | st.lists(numbers, max_size=2)
)
budget_sections = (
    st.dictionaries(
        st.sampled_from(["time", "cost", "tim"]) | st.integers(), budget_values, max_size=3
    )
    | st.fixed_dictionaries(
        {},
        optional={
            "time": st.floats(0.01, 1e6) | st.sampled_from(["90s", "30m", "1h30m", "2 hours"]),
            "cost": st.floats(0.01, 1e4) | st.sampled_from(["$2.50", "3", "0"]),
        },
    )
    | budget_values
)
