"""Money and time: clocks, the ledger (per-second billing with a minimum), prices, profiles,
and the planners that turn them into plans."""

from budgets._clock import Clock, RealClock, SimClock
from budgets._first_plan import initial_accuracy_plan
from budgets._job import JobShape, entry_shares, stage_time
from budgets._ledger import DEFAULT_MINIMUM_S, Ledger, billed
from budgets._pace import TrialPaces, list_makespan, slowest_first, stage_paces
from budgets._plan import Plan, RungPlan, TimelinePoint
from budgets._planner import (
    choose_instance,
    plan_accuracy_max,
    plan_cost_min,
    plan_remaining,
    plan_static,
    trial_counts,
)
from budgets._prices import (
    COLUMNS,
    InstanceType,
    NoSpotPriceError,
    PriceBook,
    PriceBookError,
    cost,
    per_gpu_hour,
    read_prices,
    shipped_prices_path,
)
from budgets._profile import (
    BABI_LSTM,
    LINEAR,
    MIN_RESUMED,
    RESNET50_CIFAR10,
    RESNET101,
    BootLatency,
    Profile,
    Speedup,
    fit_segment_times,
)
from budgets._realloc import Reallocation
from budgets._replan import DEFAULT_MARGIN, FIRST_STAGE_BOOT_QUANTILE, Replanner, Replanning
from budgets._scaling import (
    FollowPlan,
    ReleaseIdle,
    ReplanView,
    ScaleView,
    ScalingPolicy,
    StageWorkers,
    Static,
)
from budgets._spot import SPOT_MODES, SpotPolicy

__all__ = [
    "BABI_LSTM",
    "COLUMNS",
    "DEFAULT_MINIMUM_S",
    "LINEAR",
    "MIN_RESUMED",
    "RESNET50_CIFAR10",
    "RESNET101",
    "BootLatency",
    "FollowPlan",
    "Plan",
    "Reallocation",
    "ReleaseIdle",
    "DEFAULT_MARGIN",
    "FIRST_STAGE_BOOT_QUANTILE",
    "Replanner",
    "Replanning",
    "ReplanView",
    "RungPlan",
    "ScaleView",
    "StageWorkers",
    "ScalingPolicy",
    "SPOT_MODES",
    "SpotPolicy",
    "Static",
    "TimelinePoint",
    "TrialPaces",
    "Clock",
    "InstanceType",
    "JobShape",
    "entry_shares",
    "Ledger",
    "NoSpotPriceError",
    "PriceBook",
    "PriceBookError",
    "Profile",
    "RealClock",
    "fit_segment_times",
    "initial_accuracy_plan",
    "list_makespan",
    "SimClock",
    "Speedup",
    "billed",
    "choose_instance",
    "cost",
    "per_gpu_hour",
    "plan_accuracy_max",
    "plan_cost_min",
    "plan_remaining",
    "plan_static",
    "read_prices",
    "shipped_prices_path",
    "slowest_first",
    "stage_paces",
    "stage_time",
    "trial_counts",
]
