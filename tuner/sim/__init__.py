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
from tuner.sim._spot_trace import (
    SAMPLE_TRACES,
    TraceReplay,
    ZoneTrace,
    default_traces_dir,
    load_spot_traces,
    replay_for,
    zone_price_factors,
)
from tuner.sim._wired import simulate_wired

__all__ = [
    "DEFAULT_TYPE",
    "Hyperparameter",
    "NearestConfig",
    "SAMPLE_DIR",
    "SAMPLE_TRACES",
    "SIM_SETTINGS",
    "CurveSet",
    "SimExecutor",
    "SimFaults",
    "SimInstanceType",
    "SimProvider",
    "SimResult",
    "TimeSource",
    "TraceReplay",
    "ZoneTrace",
    "default_data_dir",
    "default_traces_dir",
    "discover",
    "hyperparameters",
    "load_curves",
    "recorded_space",
    "load_spot_traces",
    "replay_for",
    "settings_grace",
    "simulate",
    "simulated_sweep",
    "simulate_wired",
    "uniform_boot",
    "zone_price_factors",
]
