"""elastune's public face: ``tune()``, the search space helpers, and what ``tune()`` returns."""

from tuner._config import SchedulerConfig, SweepConfig, load_sweep
from tuner._errors import ConfigError
from tuner._result import TuneResult
from tuner._space import choice, grid, loguniform, randint, uniform
from tuner._tune import resume, tune
from worker import TrialContext

__all__ = [
    "ConfigError",
    "SchedulerConfig",
    "SweepConfig",
    "TrialContext",
    "TuneResult",
    "choice",
    "grid",
    "load_sweep",
    "loguniform",
    "randint",
    "resume",
    "tune",
    "uniform",
]
