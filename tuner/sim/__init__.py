"""Simulation, in one place: the real controller on a simulated clock, provider and executor
that replays recorded learning curves (``simulate``), the curve sets it replays, and the
faults it can inject. It may import what it simulates; nothing outside it imports it but
benchmarks, notebooks and tests."""

from tuner.sim._curves import (
    SAMPLE_DIR,
    CurveSet,
    TimeSource,
    default_data_dir,
    discover,
    load_curves,
)
from tuner.sim._executor import SimExecutor
from tuner.sim._provider import DEFAULT_TYPE, SimInstanceType, SimProvider, uniform_boot
from tuner.sim._recorded_space import (
    Hyperparameter,
    NearestConfig,
    hyperparameters,
    recorded_space,
)
from tuner.sim._simulate import (
    SIM_SETTINGS,
    SimFaults,
    SimResult,
    settings_grace,
    simulate,
    simulated_sweep,
)
from tuner.sim._wired import simulate_wired

__all__ = [
    "DEFAULT_TYPE",
    "Hyperparameter",
    "NearestConfig",
    "SAMPLE_DIR",
    "SIM_SETTINGS",
    "CurveSet",
    "SimExecutor",
    "SimFaults",
    "SimInstanceType",
    "SimProvider",
    "SimResult",
    "TimeSource",
    "default_data_dir",
    "discover",
    "hyperparameters",
    "load_curves",
    "recorded_space",
    "settings_grace",
    "simulate",
    "simulated_sweep",
    "simulate_wired",
    "uniform_boot",
]
