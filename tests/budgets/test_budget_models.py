"""The planner's money and time models: price book, speedup, boot latency, runtime profile."""

from __future__ import annotations

import random

import numpy as np
import pytest

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
    RESNET50_CIFAR10,
    RESNET101,
    BootLatency,
    Profile,
    Speedup,
)

HEADER = ",".join(COLUMNS)
GOOD = "aws,g4dn.xlarge,T4,1,4,16,us-east-1,0.526,0.21"


def _csv(tmp_path, *rows: str, header: str = HEADER):
    path = tmp_path / "prices.csv"
    path.write_text("\n".join([header, *rows]) + "\n")
    return path


# -- prices -----------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def book() -> PriceBook:
    return PriceBook()


def test_shipped_book_has_the_types_the_planner_needs(book):
    assert shipped_prices_path().is_file()
    for name in ("g4dn.xlarge", "g4dn.12xlarge", "g5.xlarge", "g5.12xlarge", "g5.48xlarge",
                 "p3.2xlarge", "p3.8xlarge", "p3.16xlarge", "p4d.24xlarge"):
        for region in ("us-east-1", "us-west-2"):
            assert book.get("aws", name, region).gpus >= 1
    for name in ("g2-standard-4", "g2-standard-24", "g2-standard-48", "a2-highgpu-1g",
                 "a2-highgpu-2g", "a2-highgpu-4g", "a2-highgpu-8g"):
        assert book.get("gcp", name, "us-central1").gpus >= 1
    local = book.get("local", "local", "local")
    assert (local.gpus, local.on_demand_per_hour, local.spot_per_hour) == (1, 1.0, None)
    for t in book:  # spot is a discount wherever there is one
        assert t.spot_per_hour is None or t.spot_per_hour < t.on_demand_per_hour


def test_lookups_and_filters(book):
    p3 = book.get("aws", "p3.8xlarge", "us-east-1")
    assert (p3.gpu, p3.gpus, p3.vcpus, p3.memory_gib) == ("V100-16GB", 4, 32, 244)
    assert book.price("aws", "p3.8xlarge", "us-east-1") == pytest.approx(12.24)
    assert book.price("aws", "p3.8xlarge", "us-east-1", spot=True) == p3.spot_per_hour
    assert book.per_gpu_hour(p3) == pytest.approx(3.06)
    assert {t.provider for t in book.types("gcp")} == {"gcp"}
    assert {t.region for t in book.types(region="us-west-2")} == {"us-west-2"}
    assert all(t.gpus >= 8 for t in book.types(min_gpus=8))
    assert len(book.types(min_gpus=8)) >= 5
    with pytest.raises(KeyError, match="priced in us-east-1, us-west-2"):
        book.get("aws", "g5.xlarge", "eu-north-9")
    with pytest.raises(KeyError, match="did you mean g5.xlarge"):
        book.get("aws", "g5.xlarg", "us-east-1")


def test_cheapest_per_gpu(book):
    aws = book.cheapest_per_gpu("aws", "us-east-1")
    assert aws.name == "g4dn.xlarge"
    assert all(per_gpu_hour(aws) <= per_gpu_hour(t) for t in book.types("aws", "us-east-1", 1))
    spot = book.cheapest_per_gpu(spot=True)
    assert spot.spot_per_hour is not None
    assert all(per_gpu_hour(spot, True) <= per_gpu_hour(t, True)
               for t in book.types(min_gpus=1) if t.spot_per_hour is not None)
    assert book.cheapest_per_gpu("gcp", min_gpus=8).name == "a2-highgpu-8g"
    with pytest.raises(LookupError, match="spot price"):
        book.cheapest_per_gpu("local", spot=True)


def test_cheapest_per_gpu_prefers_the_smaller_unit_on_a_tie():
    one = InstanceType("aws", "one", "T4", 1, 4, 16, "r", 1.0)
    four = InstanceType("aws", "four", "T4", 4, 16, 64, "r", 4.0)
    assert PriceBook.from_types([four, one]).cheapest_per_gpu() == one


def test_spot_without_a_price_errors_or_falls_back_to_on_demand(book):
    with pytest.raises(NoSpotPriceError, match="local/local in local has no spot price"):
        book.price("local", "local", "local", spot=True)
    assert book.price("local", "local", "local", spot=True, fallback=True) == 1.0
    local = book.get("local", "local", "local")
    assert cost(local, 3600, spot=True, fallback=True) == pytest.approx(1.0)


def test_cost_bills_per_second_with_the_minimum(book):
    t = book.get("aws", "g4dn.xlarge", "us-east-1")
    assert cost(t, 0, spot=False) == pytest.approx(0.526 / 60)     # the 60 s minimum
    assert cost(t, 3600, spot=False) == pytest.approx(0.526)
    assert cost(t, 3600, spot=True) == pytest.approx(t.spot_per_hour)
    assert cost(t, 10, spot=False, minimum_s=0) == pytest.approx(0.526 * 10 / 3600)


def test_a_user_file_overrides_and_extends_the_shipped_one(tmp_path):
    path = _csv(tmp_path, "aws,g4dn.xlarge,T4,1,4,16,us-east-1,0.40,",
                "# comments and blank lines are skipped", "",
                "gcp,my-type,L4,2,8,32,europe-west4,1.5,0.5")
    book = PriceBook(path)
    assert book.price("aws", "g4dn.xlarge", "us-east-1") == 0.40
    assert book.get("aws", "g4dn.xlarge", "us-east-1").spot_per_hour is None
    assert book.get("gcp", "my-type", "europe-west4").gpus == 2
    assert len(book) == len(PriceBook()) + 1
    assert len(PriceBook(path, shipped=False)) == 2


@pytest.mark.parametrize(("row", "line", "column", "words"), [
    ("aws,x,T4,1,4,16,us-east-1,-0.5,", 2, "on_demand_per_hour", "must be a finite number >= 0"),
    ("aws,x,T4,1,4,16,us-east-1,1.0,-0.1", 2, "spot_per_hour", ">= 0"),
    ("aws,x,T4,-1,4,16,us-east-1,1.0,", 2, "gpus", "negative"),
    ("aws,x,T4,two,4,16,us-east-1,1.0,", 2, "gpus", "not an integer"),
    ("azure,x,T4,1,4,16,eastus,1.0,", 2, "provider", "not one of"),
    ("aws,x,T4,1,4,16,us-east-1,cheap,", 2, "on_demand_per_hour", "not a number"),
])
def test_bad_rows_name_file_line_and_column(tmp_path, row, line, column, words):
    path = _csv(tmp_path, row)
    with pytest.raises(PriceBookError) as err:
        read_prices(path)
    msg = str(err.value)
    assert str(path) in msg
    assert f"line {line}, column {column!r}" in msg
    assert words in msg


def test_every_bad_row_is_reported_at_once(tmp_path):
    path = _csv(tmp_path, GOOD, "aws,a,T4,-2,4,16,us-east-1,1.0,",
                "aws,b,T4,1,4,16,us-east-1,-1,", GOOD)
    with pytest.raises(PriceBookError) as err:
        PriceBook(path)
    msg = str(err.value)
    assert "line 3, column 'gpus'" in msg
    assert "line 4, column 'on_demand_per_hour'" in msg
    assert "line 5, column 'name'" in msg and "already given on line 2" in msg


def test_a_missing_column_is_named(tmp_path):
    header = HEADER.replace(",spot_per_hour", "")
    path = _csv(tmp_path, "aws,x,T4,1,4,16,us-east-1,1.0", header=header)
    with pytest.raises(PriceBookError, match=r"line 1 \(header\): missing column\(s\) "
                                             r"'spot_per_hour'") as err:
        read_prices(path)
    assert str(path) in str(err.value)


def test_instance_types_validate_when_built_in_code():
    with pytest.raises(ValueError, match="gpus is -1") as err:
        InstanceType("aws", "x", "T4", -1, 4, 16, "r", -2.0)
    assert "on_demand_per_hour is -2.0" in str(err.value)
    with pytest.raises(ValueError, match="no GPUs"):
        per_gpu_hour(InstanceType("aws", "cpu", "none", 0, 4, 16, "r", 0.2))


# -- speedup ----------------------------------------------------------------------------------

@pytest.mark.parametrize("speedup", [RESNET50_CIFAR10, BABI_LSTM, RESNET101, LINEAR])
def test_speedup_is_monotone_at_most_linear_and_one_on_one_gpu(speedup):
    assert speedup(1) == 1.0
    values = [speedup(g) for g in range(1, 33)]
    assert all(a <= b for a, b in zip(values, values[1:], strict=False))
    assert all(s <= g for g, s in enumerate(values, start=1))


def test_speedup_interpolates_in_log2_between_measured_points():
    s = RESNET50_CIFAR10
    assert s(2) == 1.87 and s(4) == 3.42 and s(8) == 5.60
    assert s(2) < s(3) < s(4)
    assert s(3) == pytest.approx(1.87 + (np.log2(3) - 1) * (3.42 - 1.87))
    assert s(16) == 5.60                         # held past the last measured point
    assert LINEAR(16) == 16.0
    loose = Speedup({1: 1.0, 4: 4.0})            # the log2 chord lies above g: capped at g
    assert loose(2) == 2.0
    assert Speedup({1: 1.0, 2: 1.5}, beyond="linear")(8) == pytest.approx(6.0)
    assert RESNET101.efficiency(8) == pytest.approx(6.67 / 8)
    with pytest.raises(ValueError, match="gpus is 0"):
        s(0)


@pytest.mark.parametrize(("table", "words"), [
    ({}, "empty"),
    ({1: 1.0, 2: 2.5}, "s(2) is 2.5, but must be <= 2"),
    ({1: 0.9, 2: 1.5}, "s(1) is 0.9, but must be 1.0"),
    ({1: 1.0, 2: 1.8, 4: 1.6}, "non-decreasing"),
    ({0: 1.0}, "key 0"),
    ({1: 1.0, 2: float("nan")}, "finite"),
])
def test_speedup_tables_are_validated(table, words):
    with pytest.raises(ValueError, match="invalid speedup table") as err:
        Speedup(table)
    assert words in str(err.value)


def test_speedup_constants_cannot_be_changed_in_place():
    with pytest.raises(TypeError):
        RESNET50_CIFAR10.table[16] = 9.0  # type: ignore[index]
    assert hash(RESNET50_CIFAR10) == hash(Speedup(dict(RESNET50_CIFAR10.table),
                                                  name="resnet50-cifar10"))


# -- boot latency -----------------------------------------------------------------------------

def test_boot_latency_mean_quantiles_and_seeded_samples():
    boot = BootLatency()
    assert (boot.low, boot.high, boot.mean) == (60.0, 180.0, 120.0)
    assert boot.quantile(0) == 60.0 and boot.quantile(0.5) == 120.0
    assert boot.quantile(0.9) == pytest.approx(168.0)
    assert boot.sample(np.random.default_rng(7)) == boot.sample(np.random.default_rng(7))
    rng = np.random.default_rng(2)
    draws = np.array([boot(rng) for _ in range(2000)])
    assert draws.min() >= 60 and draws.max() <= 180
    assert draws.mean() == pytest.approx(120, abs=3)
    assert boot(random.Random(3)) == boot(random.Random(3))   # also takes a random.Random
    fixed = BootLatency.fixed(90)
    assert fixed.sample(np.random.default_rng(0)) == fixed.mean == fixed.quantile(0.99) == 90
    with pytest.raises(ValueError, match="0 <= low <= high"):
        BootLatency.uniform(200, 100)
    with pytest.raises(ValueError, match="q is 1.5"):
        boot.quantile(1.5)


# -- profile ----------------------------------------------------------------------------------

def test_profile_learns_from_a_wrong_prior():
    p = Profile(prior_s_per_step=5.0, prior_weight=3)
    assert p.seconds_per_step() == 5.0
    errors = []
    for _ in range(300):
        p.observe(steps=100, seconds=50.0)       # really 0.5 s/step
        errors.append(p.seconds_per_step() - 0.5)
    assert all(a > b > 0 for a, b in zip(errors, errors[1:], strict=False))
    assert p.observations == 300
    assert p.seconds_per_step() == pytest.approx((3 * 5.0 + 300 * 0.5) / 303)
    assert p.seconds_per_step() == pytest.approx(0.5, rel=0.1)


def test_a_zero_weight_prior_is_forgotten_at_the_first_observation():
    p = Profile(prior_s_per_step=5.0, prior_weight=0)
    assert p.seconds_per_step() == 5.0
    p.observe(10, 7.0)
    assert p.seconds_per_step() == pytest.approx(0.7)


def test_profile_divides_out_the_speedup():
    p = Profile(prior_s_per_step=1.0, prior_weight=0, speedup=RESNET50_CIFAR10)
    p.observe(steps=100, seconds=100 / 3.42, gpus=4)   # 1 s/step on one GPU, seen on four
    assert p.seconds_per_step(1) == pytest.approx(1.0)
    assert p.seconds_per_step(4) == pytest.approx(1 / 3.42)
    assert p.seconds_per_step(8) == pytest.approx(1 / 5.60)


def test_segment_seconds_adds_the_fixed_costs():
    p = Profile(prior_s_per_step=2.0, setup_s=10, restore_s=5, checkpoint_s=3,
                speedup=RESNET101)
    assert p.segment_seconds(100, 2) == pytest.approx(10 + 5 + 100 * 2.0 / 1.89 + 3)
    assert p.segment_seconds(100, 2, restore=False) == pytest.approx(10 + 200 / 1.89 + 3)
    assert p.segment_seconds(0) == 18


def test_drift_detects_a_twofold_slowdown():
    p = Profile(prior_s_per_step=1.0, window=5)
    assert p.drift() == 1.0
    for _ in range(20):
        p.observe(10, 10.0)
    assert p.drift() == pytest.approx(1.0)
    for _ in range(5):
        p.observe(10, 20.0)
    assert p.drift() > 1.5
    q = Profile(prior_s_per_step=1.0)            # LINEAR speedup
    for _ in range(5):
        q.observe(10, 5.0, gpus=2)               # twice as fast on two GPUs: no drift
    assert q.drift() == pytest.approx(1.0)


def test_profile_arguments_are_validated_at_once():
    with pytest.raises(ValueError) as err:
        Profile(prior_s_per_step=0, setup_s=-1, window=0)
    msg = str(err.value)
    assert "prior_s_per_step is 0" in msg and "setup_s is -1" in msg and "window is 0" in msg
    p = Profile(1.0)
    with pytest.raises(ValueError, match="steps is 0"):
        p.observe(0, 1.0)
    with pytest.raises(ValueError, match="seconds is -1"):
        p.observe(1, -1)
