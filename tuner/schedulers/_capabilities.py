"""What a scheduler may do beyond :class:`Scheduler`, as Protocols the controller checks once.

A laddered scheduler has one ladder of rungs (ASHA, successive halving); a bracketed one can
start another bracket of ``n`` trials; an admitting one can admit more trials while trials
still run (asynchronous halving, whose rungs take them at any time); a staged one is
synchronous successive halving, whose stages the re-planner sizes and whose stragglers a
deadline may cut.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable


@runtime_checkable
class Laddered(Protocol):
    rungs: list[int]


@runtime_checkable
class Bracketed(Protocol):
    def new_bracket(self, num_trials: int) -> None: ...


@runtime_checkable
class Admitting(Protocol):
    def admit_more(self, num_trials: int) -> None: ...


@runtime_checkable
class Staged(Protocol):
    rungs: list[int]
    sizes: list[int]
    early_promotion: bool

    @property
    def stage(self) -> int: ...

    @property
    def natural_sizes(self) -> list[int]: ...

    def members(self) -> list[str]: ...

    def handed_out(self) -> bool: ...

    def queued(self) -> list[str]: ...

    def hand_out_first(self, trial_id: str) -> None: ...

    def stragglers(self) -> list[str]: ...

    def decide_stage(self) -> list[str]: ...

    def limit_stage(self, stage: int, trials: int) -> None: ...

    def widen_stage(self, stage: int, trials: int) -> None: ...
