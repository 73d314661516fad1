# For type checkers: tuner/__init__.py imports these names lazily (tuner._exports).
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
