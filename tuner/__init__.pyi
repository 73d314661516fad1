# For type checkers: tuner/__init__.py imports these names lazily (worker._exports).
from tuner._config import SchedulerConfig as SchedulerConfig
from tuner._config import SweepConfig as SweepConfig
from tuner._config import load_sweep as load_sweep
from tuner._errors import ConfigError as ConfigError
from tuner._export import export_optuna as export_optuna
from tuner._result import TuneResult as TuneResult
from tuner._space import choice as choice
from tuner._space import grid as grid
from tuner._space import loguniform as loguniform
from tuner._space import randint as randint
from tuner._space import uniform as uniform
from tuner._tune import resume as resume
from tuner._tune import tune as tune
from worker import TrialContext as TrialContext
