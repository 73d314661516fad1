"""What every framework callback shares: which logged metrics to report under which names,
whether a segment ends at a step, and the trial's checkpoint as the callback wrote it."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

Monitor = str | Sequence[str] | Mapping[str, str]


def metric_names(monitor: Monitor) -> dict[str, str]:
    """``{name reported to the sweep: name the framework logs}`` from ``monitor``: a name,
    a list of names (each reported as logged), or such a mapping (Ray Tune's shape)."""
    if isinstance(monitor, str):
        names = {monitor: monitor}
    elif isinstance(monitor, Mapping):
        names = {str(k): str(v) for k, v in monitor.items()}
    elif isinstance(monitor, Sequence):
        names = {str(m): str(m) for m in monitor}
    else:
        raise TypeError(f"monitor must be a metric name, a list of names or a mapping "
                        f"{{reported name: logged name}}; got {monitor!r}")
    if not names or not all(names) or not all(names.values()):
        raise ValueError(f"monitor names no metric: {monitor!r}")
    return names


def pick(logged: Mapping[str, Any], names: Mapping[str, str], where: str) -> dict[str, float]:
    """The monitored metrics out of what the framework logged at this step, as floats; a
    metric that was not logged is an error naming those that were (a sweep cannot rank
    trials on a metric it never sees)."""
    missing = [name for name in names.values() if name not in logged]
    if missing:
        raise KeyError(f"{where}: the monitored metric(s) {missing} were not logged at this "
                       f"step; logged: {sorted(logged)}")
    return {key: float(logged[name]) for key, name in names.items()}


def segment_ends(ctx: Any, step: int) -> bool:
    """Whether ``step`` is the segment's last: its stop step, or the controller asked it to
    stop (a pause, the deadline, a spot notice), when it must checkpoint now."""
    return step >= ctx.stop_step or bool(ctx.should_stop())


def check_every(every: int, what: str) -> int:
    if isinstance(every, bool) or not isinstance(every, int) or every < 1:
        raise ValueError(f"{what} must be a whole number >= 1; got {every!r}")
    return every


def own_checkpoint(ctx: Any, key: str, owner: str) -> Any | None:
    """What ``owner`` saved under ``key`` at the trial's last checkpoint, or None on its first
    segment; a checkpoint some other code wrote is an error (a trainable writes its
    checkpoints one way)."""
    state = ctx.restore()
    if state is None:
        return None
    if not isinstance(state, dict) or key not in state:
        raise ValueError(f"trial {ctx.trial_id}'s checkpoint at step {ctx.start_step} was not "
                         f"written by {owner} (it is a {type(state).__name__}): a trainable "
                         "writes its checkpoints one way")
    return state[key]
