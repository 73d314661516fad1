"""elastune's public face: ``tune()``, the search space helpers, and what ``tune()`` returns.

Each name is imported from its module on first use (``worker._exports``; type checkers read
``__init__.pyi``), so the commands that read a stored sweep (``elastune status``, ``--help``)
start without loading Optuna, pandas and the controller: ``elastune status --help`` took
1.0 s with every name imported here, 0.25 s so.
"""

from worker._exports import lazy

_HOMES = {
    "ConfigError": "tuner._errors",
    "SchedulerConfig": "tuner._config",
    "SweepConfig": "tuner._config",
    "TrialContext": "worker",
    "TuneResult": "tuner._result",
    "choice": "tuner._space",
    "export_optuna": "tuner._export",
    "grid": "tuner._space",
    "load_sweep": "tuner._config",
    "loguniform": "tuner._space",
    "randint": "tuner._space",
    "resume": "tuner._tune",
    "tune": "tuner._tune",
    "uniform": "tuner._space",
}

__all__ = sorted(_HOMES)
__getattr__, __dir__ = lazy(__name__, _HOMES)
