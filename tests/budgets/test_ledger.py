import pytest

from budgets import Ledger, billed


def test_billing_is_per_second_with_a_sixty_second_minimum():
    assert billed(3.6, 0) == pytest.approx(0.06)        # the minimum: 60 s at 3.6 $/h
    assert billed(3.6, 59.2) == pytest.approx(0.06)
    assert billed(3.6, 60.0) == pytest.approx(0.06)
    assert billed(3.6, 60.2) == pytest.approx(0.061)    # 61 whole seconds
    assert billed(3.6, 3600) == pytest.approx(3.6)


def test_spent_counts_running_instances_until_now_and_closed_ones_until_close():
    ledger = Ledger(budget_usd=None)
    ledger.open("a", 3.6, t=0)
    ledger.open("b", 3.6, t=10)
    assert ledger.spent(30) == pytest.approx(0.12)      # both inside their minimum
    ledger.close("a", 100)
    assert ledger.spent(200) == pytest.approx(0.1 + 0.19)
    assert ledger.running() == ["b"]


def test_launch_is_refused_when_its_minimum_would_pass_the_budget():
    ledger = Ledger(budget_usd=0.1)
    assert ledger.can_launch(3.6, 0)
    ledger.open("a", 3.6, 0)
    assert not ledger.can_launch(3.6, 0)                # 0.06 + 0.06 > 0.1


def test_commitments_count_reserved_busy_time():
    ledger = Ledger(budget_usd=1.0)
    ledger.open("a", 36.0, 0)                            # 0.01 $/s
    assert ledger.can_commit("a", until=90, t=0)         # 0.90
    assert not ledger.can_commit("a", until=101, t=0)    # 1.01
    ledger.reserve("a", 90, key="seg-1")
    ledger.reserve("a", 80, key="seg-2")
    assert ledger.committed(10) == pytest.approx(0.9)
    ledger.release("a", "seg-1")                        # seg-1 ended early
    assert ledger.committed(10) == pytest.approx(0.8)
    ledger.release("a", "seg-2")
    assert ledger.committed(10) == pytest.approx(0.6)   # the 60 s minimum still holds


def test_must_stop_fires_before_spend_can_pass_the_budget():
    ledger = Ledger(budget_usd=1.0)
    ledger.open("a", 36.0, 0)
    assert not ledger.must_stop(80, reaction_s=15)      # 0.95 at t + reaction
    assert ledger.must_stop(90, reaction_s=15)          # 1.05 at t + reaction
    ledger.close("a", 90)
    assert ledger.spent(1000) <= 1.0


def test_bad_budget_is_rejected():
    with pytest.raises(ValueError, match="budget_usd"):
        Ledger(budget_usd=-1)


def test_an_adopted_instance_is_billed_once_across_runs():
    price = 3.6                                  # 0.001 $/s
    # The earlier run launched it at t=0 and last recorded spend at t=20 (the minimum: 0.06).
    before = Ledger(None)
    before.open("i-1", price, 0.0)
    prior = before.spent(20.0)
    assert prior == pytest.approx(0.06)
    # The resumed run adopts it: the rest of the minimum, then per second.
    led = Ledger(None, prior_usd=prior)
    led.adopt("i-1", price, launched_at=0.0, counted_until=20.0)
    assert led.spent(50.0) == pytest.approx(0.06)            # still inside the minimum
    assert led.spent(100.0) == pytest.approx(0.1)            # 100 s in all, as one run bills
    led.close("i-1", 250.0)
    assert led.spent(999.0) == pytest.approx(billed(price, 250.0))
    assert led.instance_cost("i-1", 999.0) == pytest.approx(0.25 - 0.06)   # this run's part


def test_a_launch_under_way_counts_from_when_it_was_asked_for():
    price = 3.6                                  # 0.001 $/s, 60 s minimum: 0.06
    led = Ledger(budget_usd=0.2)
    led.open("i-1", price, 0.0)
    led.expect("launch-1", price, 2, 10.0)       # two more asked for at t=10
    assert led.running() == ["i-1"]              # not instances yet
    assert led.spent(20.0) == pytest.approx(0.18)
    assert led.committed(20.0) == pytest.approx(0.18)
    assert not led.can_launch(price, 20.0)       # a fourth minimum would pass 0.2
    assert not led.must_stop(20.0, reaction_s=40.0)   # 60 + 2 x 60 s by then: 0.18
    assert led.must_stop(20.0, reaction_s=60.0)       # 80 + 2 x 70 s by then: 0.22
    # It returned with one instance: that one bills from its launch, the other never existed.
    led.settle("launch-1")
    led.open("i-2", price, 12.0)
    assert led.spent(20.0) == pytest.approx(0.12)
    assert led.can_launch(price, 20.0)
