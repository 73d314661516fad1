"""Money: per-instance per-second billing with a minimum, and a hard cost budget.

Spend is what the provider would bill if every instance stopped now: per-second from launch to
termination, never less than the billing minimum; a launch still under way counts from the
moment it was asked for. Committed spend adds what running instances will cost until the work
already given to them ends. The controller asks :meth:`can_commit`
before starting work and :meth:`must_stop` on every tick, so spend never passes the budget.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

DEFAULT_MINIMUM_S = 60.0


@dataclass
class _Account:
    price_per_hour: float
    start: float
    end: float | None = None
    holds: dict[str, float] = field(default_factory=dict)
    minimum_s: float | None = None     # None: the ledger's (an adopted instance has paid some)

    @property
    def busy_until(self) -> float:
        return max(self.holds.values(), default=self.start)


def billed(price_per_hour: float, seconds: float, minimum_s: float = DEFAULT_MINIMUM_S) -> float:
    """What ``seconds`` of one instance costs: per whole second, at least ``minimum_s``."""
    return price_per_hour / 3600.0 * max(minimum_s, math.ceil(max(seconds, 0.0) - 1e-9))


class Ledger:
    def __init__(self, budget_usd: float | None, minimum_s: float = DEFAULT_MINIMUM_S, *,
                 prior_usd: float = 0.0) -> None:
        """``prior_usd``: already spent by earlier runs of the same experiment (a resumed
        sweep); it counts against ``budget_usd`` like any other spend."""
        if budget_usd is not None and not (budget_usd >= 0 and math.isfinite(budget_usd)):
            raise ValueError(f"budget_usd must be a non-negative number, got {budget_usd!r}")
        if not (prior_usd >= 0 and math.isfinite(prior_usd)):
            raise ValueError(f"prior_usd must be a non-negative number, got {prior_usd!r}")
        self.budget_usd = budget_usd
        self.minimum_s = minimum_s
        self.prior_usd = prior_usd
        self._accounts: dict[str, _Account] = {}
        # Launches under way: each instance asked for is billed from the ask until the launch
        # returns (the cloud may bill it before the call does), then by its own account.
        self._launching: dict[str, list[_Account]] = {}

    # -- instances -------------------------------------------------------------------------
    def open(self, instance_id: str, price_per_hour: float, t: float) -> None:
        self._accounts[instance_id] = _Account(price_per_hour, t)

    def expect(self, key: str, price_per_hour: float, count: int, t: float) -> None:
        """A launch of ``count`` instances, asked for at ``t``, is under way: until
        :meth:`settle`, each counts as an instance running since ``t``."""
        self._launching[key] = [_Account(price_per_hour, t) for _ in range(count)]

    def settle(self, key: str) -> None:
        """The launch ``key`` returned: what it started is :meth:`open`-ed by the caller, what
        it did not start costs nothing."""
        self._launching.pop(key, None)

    def adopt(self, instance_id: str, price_per_hour: float, launched_at: float,
              counted_until: float) -> None:
        """Take over an instance an earlier run launched (a resumed sweep): ``prior_usd``
        already holds its cost as billed at ``counted_until`` (its whole billing minimum, or
        every second until then); it is billed from the end of that, with no minimum again."""
        start = launched_at + max(self.minimum_s, counted_until - launched_at)
        self._accounts[instance_id] = _Account(price_per_hour, start, minimum_s=0.0)

    def close(self, instance_id: str, t: float) -> None:
        acct = self._accounts.get(instance_id)
        if acct is not None and acct.end is None:
            acct.end = t

    def reserve(self, instance_id: str, until: float, key: str = "") -> None:
        """Work ``key`` keeps the instance busy (and so kept, and paid) until ``until``."""
        self._accounts[instance_id].holds[key] = until

    def release(self, instance_id: str, key: str = "") -> None:
        """Work ``key`` has ended; its reservation no longer commits money."""
        acct = self._accounts.get(instance_id)
        if acct is not None:
            acct.holds.pop(key, None)

    def running(self) -> list[str]:
        return [i for i, a in self._accounts.items() if a.end is None]

    def price_of(self, instance_id: str) -> float:
        return self._accounts[instance_id].price_per_hour

    # -- money -----------------------------------------------------------------------------
    def spent(self, t: float) -> float:
        """Billed so far: closed instances in full, running ones as if stopped at ``t``."""
        return self.prior_usd + sum(
            billed(a.price_per_hour, (a.end if a.end is not None else t) - a.start,
                   self._minimum(a))
            for a in self._accounts_and_launches()
        )

    def _accounts_and_launches(self) -> list[_Account]:
        if not self._launching:
            return list(self._accounts.values())
        return [*self._accounts.values(), *(a for accts in self._launching.values()
                                           for a in accts)]

    def _minimum(self, a: _Account) -> float:
        return self.minimum_s if a.minimum_s is None else a.minimum_s

    def instance_cost(self, instance_id: str, t: float) -> float:
        a = self._accounts[instance_id]
        return billed(a.price_per_hour, (a.end if a.end is not None else t) - a.start,
                      self._minimum(a))

    def committed(self, t: float, extra: dict[str, float] | None = None) -> float:
        """Spend if each running instance stops once its reserved work is done (or now).

        ``extra`` maps instance ids to a further busy-until time being considered.
        """
        extra = extra or {}
        total = self.prior_usd
        for iid, a in self._accounts.items():
            end = a.end
            if end is None:
                end = max(t, a.busy_until, extra.get(iid, t))
            total += billed(a.price_per_hour, end - a.start, self._minimum(a))
        for accts in self._launching.values():
            for a in accts:
                total += billed(a.price_per_hour, max(t, a.start) - a.start, self.minimum_s)
        return total

    def rate_per_s(self) -> float:
        return sum(a.price_per_hour for a in self._accounts_and_launches()
                   if a.end is None) / 3600.0

    def can_launch(self, price_per_hour: float, t: float) -> bool:
        """Whether one more instance's billing minimum fits on top of what is committed."""
        if self.budget_usd is None:
            return True
        return self.committed(t) + billed(price_per_hour, 0.0, self.minimum_s) <= self.budget_usd

    def can_commit(self, instance_id: str, until: float, t: float) -> bool:
        """Whether keeping ``instance_id`` busy until ``until`` fits in the budget."""
        if self.budget_usd is None:
            return True
        return self.committed(t, {instance_id: until}) <= self.budget_usd

    def must_stop(self, t: float, reaction_s: float) -> bool:
        """True when stopping everything ``reaction_s`` from now is the last safe moment.

        This is the hard guarantee and so looks at money that will really accrue (every running
        instance billed until ``t + reaction_s``), not at reservations, which are estimates.
        """
        if self.budget_usd is None:
            return False
        return self.spent(t + reaction_s) > self.budget_usd
