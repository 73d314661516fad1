"""Money and time: clocks, the ledger (per-second billing with a minimum), budgets."""

from budgets._clock import Clock, RealClock, SimClock
from budgets._ledger import DEFAULT_MINIMUM_S, Ledger, billed

__all__ = ["DEFAULT_MINIMUM_S", "Clock", "Ledger", "RealClock", "SimClock", "billed"]
