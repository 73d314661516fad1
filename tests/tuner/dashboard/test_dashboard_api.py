"""The dashboard's JSON API and report against real stores: a real digits sweep, a simulated
sweep with re-plans and preemptions, and a simulated 10,000-trial sweep."""

from __future__ import annotations

import gzip
import json
import math
import re
import time
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from tests._dashboard_stores import (
    accrued_at,
    curves_of,
    expected_best,
    live_workers,
    make_root,
    params_of,
    t0_of,
)
from tuner import ConfigError
from tuner._status import status_document
from tuner._store import Store
from tuner.cli import main
from tuner.dashboard import check_bind, make_app, serve, write_report
from tuner.dashboard._data import valid_name
from tuner.dashboard._pages import plotly_js_path

KINDS = ("digits", "sim-plan", "sim-10k")
# The real digits sweep (workers on Redis) and the 10,000-trial simulation take seconds to
# build: the tests that read them are slow. The quick tier reads the simulated sweep alone.
SLOW = pytest.mark.slow
ALL = (pytest.param("digits", marks=SLOW), "sim-plan", pytest.param("sim-10k", marks=SLOW))
SMALL = (pytest.param("digits", marks=SLOW), "sim-plan")


@pytest.fixture(scope="module")
def full_root(tmp_path_factory):
    return make_root(tmp_path_factory, KINDS, "api-root")


@pytest.fixture(scope="module")
def sim_root(tmp_path_factory):
    return make_root(tmp_path_factory, ("sim-plan",), "api-sim-root")


@pytest.fixture(scope="module")
def full_client(full_root):
    return TestClient(make_app(full_root))


@pytest.fixture(scope="module")
def sim_client(sim_root):
    return TestClient(make_app(sim_root))


def _slow(request) -> bool:
    return request.node.get_closest_marker("slow") is not None


@pytest.fixture
def root(request):
    """Every kind of store for a slow test, the simulated sweep's alone for a quick one."""
    return request.getfixturevalue("full_root" if _slow(request) else "sim_root")


@pytest.fixture
def client(request, root):
    return request.getfixturevalue("full_client" if _slow(request) else "sim_client")


def _store(root: Path, kind: str) -> Store:
    return Store(root / kind, readonly=True)


def _approx(a, b, tol=1e-6):
    return a == pytest.approx(b, abs=tol, rel=1e-9)


@SLOW
def test_index_lists_every_experiment_as_status_reports_it(client, root):
    index = client.get("/api/experiments").json()
    by_name = {e["name"]: e for e in index["experiments"]}
    assert set(KINDS) <= set(by_name)
    for kind in KINDS:
        store = _store(root, kind)
        doc = status_document(store, root / kind)
        e = by_name[kind]
        assert e["state"] == doc["state"] == "finished"
        assert e["best_value"] == doc["best"]["value"]
        assert e["spend_usd"] == doc["spend_usd"]
        assert e["trials"] == doc["trials"]
        assert e["cost_budget_usd"] == doc["cost_budget_usd"]
        assert e["wall_s"] == doc["wall_s"]
    assert by_name["sim-10k"]["trials"]["total"] == 10_000


@pytest.mark.parametrize("kind", ALL)
def test_summary_agrees_with_status_document(client, root, kind):
    summary = client.get(f"/api/e/{kind}/summary").json()
    doc = status_document(_store(root, kind), root / kind)
    for key in ("experiment", "state", "best", "trials", "spend_usd", "cost_budget_usd",
                "wall_s", "time_budget_s", "deadline_met", "budget_respected", "dir"):
        assert summary[key] == doc[key], key


@pytest.mark.parametrize("kind", SMALL)
def test_best_series_replays_the_store_and_ends_at_the_best(client, root, kind):
    best = client.get(f"/api/e/{kind}/best").json()
    store = _store(root, kind)
    doc = status_document(store, root / kind)
    expected = expected_best(store)
    got = list(zip(best["t_s"], best["value"], best["trial_id"], strict=True))
    # every change of the best, then one point at the end of the sweep
    assert [(round(t, 3), v, i) for t, v, i in expected] == got[:-1]
    assert got[-1][1] == doc["best"]["value"] and got[-1][2] == doc["best"]["trial_id"]
    assert best["spend_usd"][-1] == doc["spend_usd"]
    usd = best["spend_usd"]
    assert all(a <= b + 1e-9 for a, b in zip(usd, usd[1:], strict=False))
    spend = store.query("SELECT ts, spent_usd FROM spend ORDER BY rowid")
    t0 = t0_of(store)
    for t, usd in zip(best["t_s"][:-1], best["spend_usd"][:-1], strict=True):
        before = [s for ts, s in spend if ts - t0 <= t + 1e-3]
        after = [s for ts, s in spend if ts - t0 >= t - 1e-3]
        lo = before[-1] if before else 0.0
        hi = after[0] if after else spend[-1][1]
        assert lo - 1e-6 <= usd <= hi + 1e-6   # interpolated between the ledger's records


@pytest.mark.parametrize("kind", SMALL)
def test_spend_series_is_the_ledger_record(client, root, kind):
    s = client.get(f"/api/e/{kind}/spend").json()
    store = _store(root, kind)
    t0 = t0_of(store)
    rows = store.query("SELECT ts, spent_usd, committed_usd FROM spend ORDER BY ts, rowid")
    assert len(s["t_s"]) == len(rows)
    for t, spent, committed, row in zip(s["t_s"], s["spent_usd"], s["committed_usd"], rows,
                                        strict=True):
        assert _approx(t, row[0] - t0, 1e-3) and _approx(spent, row[1])
        assert _approx(committed, row[2])
    assert s["spend_usd"] == status_document(store, root / kind)["spend_usd"]
    assert s["projection"] is None        # finished: nothing to project
    assert max(s["spent_usd"]) <= s["cost_budget_usd"]


@pytest.mark.parametrize("kind", SMALL)
def test_spend_is_drawn_as_accrued_beside_the_billed_minimum(client, root, kind):
    s = client.get(f"/api/e/{kind}/spend").json()
    store = _store(root, kind)
    t0 = t0_of(store)
    accrued = s["accrued_usd"]
    assert len(accrued) == len(s["t_s"])
    for t, usd in zip(s["t_s"], accrued, strict=True):
        assert usd == pytest.approx(accrued_at(store, t + t0), abs=1e-6)
    assert all(a <= b + 1e-12 for a, b in zip(accrued, accrued[1:], strict=False))
    # the billing minimum only adds: billed is never below what has accrued
    assert all(a <= b + 1e-6 for a, b in zip(accrued, s["spent_usd"], strict=True))
    # the ledger charges each instance's minimum at its launch; accrual starts from nothing
    assert accrued[0] < s["spent_usd"][0]


@pytest.mark.parametrize("kind", SMALL)
def test_best_vs_dollars_uses_the_dollars_accrued_when_each_best_was_found(client, root, kind):
    best = client.get(f"/api/e/{kind}/best").json()
    store = _store(root, kind)
    t0 = t0_of(store)
    for t, usd in zip(best["t_s"], best["accrued_usd"], strict=True):
        assert usd == pytest.approx(accrued_at(store, t + t0), abs=1e-6)
    # bests found at different times were found at different spends: no vertical line at
    # the billing minimum (times are sent to the millisecond: two bests of the real sweep may
    # share one, their dollars a few nano-dollars apart)
    at = {}
    for t, usd in zip(best["t_s"][:-1], best["accrued_usd"][:-1], strict=True):
        at.setdefault(t, usd)
    assert len(set(at.values())) == len(at) > 1


@pytest.mark.parametrize("kind", SMALL)
def test_every_time_axis_ends_with_the_sweep(client, root, kind):
    b = client.get(f"/api/e/{kind}/bundle").json()
    doc = status_document(_store(root, kind), root / kind)
    for series in (b["best"]["t_s"], b["spend"]["t_s"], b["workers"]["actual"]["t_s"],
                   b["workers"]["planned"]["t_s"]):
        # one run: its axis is its wall time (a plan's prediction past it is not drawn)
        assert 0 <= min(series) and max(series) <= doc["wall_s"] + 0.5
    end = b["summary"]["end_t"]
    assert end == pytest.approx(doc["wall_s"], abs=0.5)
    assert b["workers"]["end_t"] == b["timeline"]["end_t"] == end
    # the plan in force is drawn to the end, not to where its prediction ran out
    assert b["workers"]["planned"]["t_s"][-1] == pytest.approx(end, abs=1e-3)


@pytest.mark.parametrize("kind", SMALL)
def test_planned_against_actual_wall_time(client, root, kind):
    store = _store(root, kind)
    doc = status_document(store, root / kind)
    predicted = store.plans()[0]["predicted_wall_s"]
    assert doc["predicted_wall_s"] == round(predicted, 3)
    wall = client.get(f"/api/e/{kind}/workers").json()["wall"]
    assert wall == {"predicted_s": doc["predicted_wall_s"], "actual_s": doc["wall_s"],
                    "difference_s": round(doc["wall_s"] - doc["predicted_wall_s"], 3)}
    assert client.get(f"/api/e/{kind}/summary").json()["predicted_wall_s"] == round(predicted, 3)


@SLOW
def test_paused_trials_are_counted_apart_from_those_on_a_worker(client, root):
    from tests._dashboard_stores import copy_experiment

    exp = copy_experiment(root / "digits", root / "digits-paused")
    try:
        store = Store(exp)
        store.update_experiment(state="running", finished_at=None)
        ids = [r[0] for r in store.query("SELECT trial_id FROM trials ORDER BY number")]
        for tid in ids[:5]:
            store.update_trial(tid, 0.0, state="paused")
        for tid in ids[5:8]:        # between segments, or waiting for a free slot
            store.update_trial(tid, 0.0, state="running")
        seg = store.segments(ids[5])[-1]["segment_id"]
        store.update_segment(seg, state="running", finished_at=None)
        store.close()
        doc = status_document(Store(exp, readonly=True), exp)
        t = doc["trials"]
        assert t["running"] == 1 and t["paused"] == 7
        assert sum(v for k, v in t.items() if k != "total") == t["total"]
        assert client.get("/api/e/digits-paused/summary").json()["trials"] == t
        index = {e["name"]: e for e in client.get("/api/experiments").json()["experiments"]}
        assert index["digits-paused"]["trials"] == t
    finally:
        import shutil

        shutil.rmtree(exp)


@pytest.mark.parametrize("kind", SMALL)
def test_workers_planned_and_actual_follow_the_store(client, root, kind):
    w = client.get(f"/api/e/{kind}/workers").json()
    store = _store(root, kind)
    for t, n in zip(w["actual"]["t_s"], w["actual"]["workers"], strict=True):
        assert n == live_workers(store, t), t
    assert max(w["actual"]["workers"]) >= 1 and w["actual"]["workers"][-1] == 0
    plans = store.plans()
    assert len(w["plans"]) == len(plans) >= 1
    # the first plan's timeline is followed until the next plan is made
    first = sorted(plans[0]["timeline"], key=lambda p: p["t_s"])
    assert w["planned"]["workers"][0] == first[0]["workers"]
    assert set(w["planned"]["workers"]) <= {p["workers"] for plan in plans
                                            for p in plan["timeline"]}
    preempted = {i["instance_id"] for i in store.instances() if i.get("preempted")}
    preempted |= {s["instance_id"] for s in store.segments() if s["state"] == "preempted"}
    assert set(w["preempted"]["instance_id"]) == preempted
    if kind == "sim-plan":
        assert len(plans) > 1 and preempted      # re-planned, and spot VMs were taken back


@pytest.mark.parametrize("kind", SMALL)
def test_learning_curves_are_the_reports(client, root, kind):
    c = client.get(f"/api/e/{kind}/curves").json()
    store = _store(root, kind)
    truth = curves_of(store)
    trials = {t["trial_id"]: t for t in store.trials_frame().to_dict("records")}
    assert c["shown"] == c["total"] == len(trials)      # small sweeps: every trial
    for curve in c["curves"]:
        steps, values = truth.get(curve["trial_id"], ([], []))
        assert curve["step"] == steps and curve["metric"] == values
        assert curve["state"] == trials[curve["trial_id"]]["state"]
    assert c["rungs"] == sorted({s["stop_step"] for s in store.segments()})
    assert c["best_trial_id"] == store.experiment()["best_trial_id"]


@pytest.mark.parametrize("kind", SMALL)
def test_parallel_coordinates_hold_every_scored_trial(client, root, kind):
    p = client.get(f"/api/e/{kind}/parallel").json()
    store = _store(root, kind)
    params = params_of(store)
    values = {t: v for t, v in store.query("SELECT trial_id, value FROM trials")}
    assert sorted(p["trial_id"]) == sorted(t for t, v in values.items() if v is not None)
    assert p["score"] == [values[t] for t in p["trial_id"]]
    for dim in p["dimensions"]:
        raw = [params[t][dim["name"]] for t in p["trial_id"]]
        if dim["kind"] == "categorical":
            assert [dim["categories"][i] for i in dim["values"]] == [str(v) for v in raw]
        else:
            assert dim["values"] == raw
    if kind == "digits":
        kinds = {d["name"]: d["kind"] for d in p["dimensions"]}
        assert kinds == {"lr": "log", "hidden": "numeric", "alpha": "log"}


@SLOW
def test_trials_table_sorts_filters_and_pages_in_sql(client, root):
    store = _store(root, "digits")
    frame = store.trials_frame()
    page = client.get("/api/e/digits/trials?sort=value&order=desc&limit=10").json()
    by_value = frame.sort_values(["value", "number"], ascending=[False, True])
    assert [r["trial_id"] for r in page["rows"]] == list(by_value["trial_id"][:10])
    assert page["total"] == page["matching"] == len(frame)
    page2 = client.get("/api/e/digits/trials?sort=value&order=desc&limit=10&offset=10").json()
    assert [r["trial_id"] for r in page2["rows"]] == list(by_value["trial_id"][10:20])
    lr = client.get("/api/e/digits/trials?sort=params.lr&order=asc&limit=500").json()
    assert [r["params"]["lr"] for r in lr["rows"]] == sorted(frame["params.lr"])
    pruned = client.get("/api/e/digits/trials?state=pruned&limit=500").json()
    assert pruned["matching"] == int((frame["state"] == "pruned").sum())
    assert {r["state"] for r in pruned["rows"]} == {"pruned"}
    one = client.get("/api/e/digits/trials?q=t0008").json()
    assert [r["trial_id"] for r in one["rows"]] == ["t0008"]
    row = one["rows"][0]
    truth = frame.set_index("trial_id").loc["t0008"]
    assert row["value"] == truth["value"] and row["last_step"] == truth["last_step"]
    assert row["gpu_seconds"] == truth["gpu_seconds"] and row["cost_usd"] == truth["cost_usd"]
    for bad, field in (("sort=nope", "sort"), ("state=sleeping", "state"),
                       ("order=up", "order"), ("limit=100000", "limit")):
        r = client.get(f"/api/e/digits/trials?{bad}")
        assert r.status_code == 400 and r.json()["detail"].startswith(field), bad


@pytest.mark.parametrize("kind", SMALL)
def test_timeline_holds_the_segments_per_worker(client, root, kind):
    t = client.get(f"/api/e/{kind}/timeline").json()
    store = _store(root, kind)
    t0 = t0_of(store)
    segs = [s for s in store.segments() if s["started_at"] is not None]
    assert t["shown_segments"] == t["total_segments"] == len(segs)
    assert t["shown_workers"] == t["total_workers"] == len(store.instances())
    got = sorted(zip(t["segments"]["trial_id"], t["segments"]["instance_id"],
                     t["segments"]["start_t"], t["segments"]["state"], strict=True))
    want = sorted((s["trial_id"], s["instance_id"], round(s["started_at"] - t0, 3), s["state"])
                  for s in segs)
    assert got == want


@SLOW
def test_a_10k_trial_store_answers_fast_and_bounded(client, root):
    budgets = {"best": 2000, "spend": 2000}
    timings = {}
    for name in ("summary", "best", "spend", "workers", "curves", "parallel", "timeline",
                 "trials", "bundle"):
        start = time.perf_counter()
        r = client.get(f"/api/e/sim-10k/{name}")
        timings[name] = time.perf_counter() - start
        assert r.status_code == 200, (name, r.text[:200])
        data = r.json()
        if name in budgets:
            assert len(data["t_s"]) <= budgets[name]
    bundle = data
    assert len(json.dumps(bundle)) < 2_000_000
    assert bundle["curves"]["shown"] <= 200 and bundle["curves"]["total"] == 10_000
    assert all(len(c["step"]) <= 200 for c in bundle["curves"]["curves"])
    assert bundle["parallel"]["shown"] <= 2000
    assert bundle["timeline"]["shown_workers"] <= 60
    assert bundle["timeline"]["shown_segments"] <= 6000
    assert len(bundle["workers"]["actual"]["t_s"]) <= 2000
    # the best 20 trials are always among the curves
    store = _store(root, "sim-10k")
    top = [r[0] for r in store.query(
        "SELECT trial_id FROM trials ORDER BY value DESC, number LIMIT 20")]
    assert set(top) <= {c["trial_id"] for c in bundle["curves"]["curves"]}
    doc = status_document(store, root / "sim-10k")
    assert bundle["best"]["value"][-1] == doc["best"]["value"]
    assert bundle["summary"]["trials"] == doc["trials"]
    assert max(timings.values()) < 2.0, timings


def test_version_changes_only_when_the_store_does(client, root, tmp_path):
    from tests._dashboard_stores import copy_experiment

    exp = copy_experiment(root / "sim-plan", root / "sim-plan-version")
    try:
        v1 = client.get("/api/e/sim-plan-version/version").json()["version"]
        assert client.get("/api/e/sim-plan-version/version").json()["version"] == v1
        store = Store(exp)
        store.record_spend(10_000.0, 1.0, 1.0, 0)
        store.close()
        assert client.get("/api/e/sim-plan-version/version").json()["version"] != v1
    finally:
        import shutil

        shutil.rmtree(exp)


def test_pages_and_plotly_are_served_without_a_cdn(client):
    page = client.get("/e/sim-plan")
    assert page.status_code == 200
    ids = set(re.findall(r'id="(chart-[a-z-]+)"', page.text))
    assert ids == {"chart-best-cost", "chart-best-time", "chart-spend", "chart-workers",
                   "chart-curves", "chart-parcoords", "chart-timeline"}
    assert 'src="/static/plotly.min.js"' in page.text
    assert "cdn" not in page.text.lower()
    assert 'id="chart-experiments"' in client.get("/").text
    js = client.get("/static/plotly.min.js", headers={"Accept-Encoding": "identity"})
    assert js.status_code == 200 and js.content == plotly_js_path().read_bytes()
    packed = client.get("/static/plotly.min.js", headers={"Accept-Encoding": "gzip"})
    assert packed.content == js.content        # httpx decodes; the body came gzipped
    assert packed.headers["content-encoding"] == "gzip"
    assert len(gzip.compress(js.content[:10])) > 0
    assert client.get("/static/../_app.py").status_code == 404


@pytest.mark.parametrize("name", [
    "..", "../..", "..%2F..%2Fetc", "%2e%2e", "%2e%2e%2f%2e%2e%2fetc", "a/../../etc",
    ".hidden", "digits/..", "%2Fetc", "digits%00", "~root",
])
def test_an_experiment_name_never_leaves_the_root(client, name):
    for url in (f"/api/e/{name}/summary", f"/e/{name}", f"/api/e/{name}/bundle"):
        r = client.get(url)
        if r.status_code == 200:
            # The client resolved the dot segments itself ("/e/.." is "/"): no name reached
            # the server, which answered with the index page.
            assert r.request.url.path == "/" and 'id="experiments-table"' in r.text, url
        else:
            assert r.status_code in (400, 404), (url, r.status_code)
    decoded = name.replace("%2F", "/").replace("%2f", "/").replace("%2e", ".").replace("%00", "\0")
    assert not valid_name(decoded)


def test_a_symlink_out_of_the_root_is_refused(root, tmp_path_factory):
    outside = make_root(tmp_path_factory, ("sim-plan",), "outside")
    inside = tmp_path_factory.mktemp("linked-root")
    (inside / "escape").symlink_to(outside / "sim-plan", target_is_directory=True)
    client = TestClient(make_app(inside))
    assert client.get("/api/e/escape/summary").status_code == 400


def test_unknown_experiment_is_404(client):
    assert client.get("/api/e/no-such/summary").status_code == 404
    assert client.get("/e/no-such").status_code == 404


def test_a_token_is_required_of_every_request(root):
    client = TestClient(make_app(root, token="s3cret"))
    for url in ("/", "/e/sim-plan", "/api/experiments", "/api/e/sim-plan/summary",
                "/static/plotly.min.js"):
        assert client.get(url).status_code == 401, url
        assert client.get(url, headers={"X-Elastune-Token": "wrong"}).status_code == 403
        assert client.get(url, params={"token": "wrong"}).status_code == 403
        assert client.get(url, headers={"Authorization": "Bearer s3cret"}).status_code == 200
        assert client.get(url, headers={"X-Elastune-Token": "s3cret"}).status_code == 200
    fresh = TestClient(make_app(root, token="s3cret"))
    page = fresh.get("/e/sim-plan", params={"token": "s3cret"})
    assert page.status_code == 200 and "elastune_token" in page.headers["set-cookie"]
    # the cookie the page set carries the next requests (what the page's script relies on)
    assert fresh.get("/api/e/sim-plan/summary").status_code == 200


def test_every_way_of_giving_the_token_is_checked(root):
    urls = ("/", "/e/sim-plan", "/api/experiments", "/api/e/sim-plan/summary",
            "/static/plotly.min.js", "/static/dashboard.js", "/no/such/page")
    right = {"query": ({"params": {"token": "s3cret"}}, None),
             "bearer": ({"headers": {"Authorization": "Bearer s3cret"}}, None),
             "header": ({"headers": {"X-Elastune-Token": "s3cret"}}, None),
             "cookie": ({}, "s3cret")}
    for how, (kwargs, cookie) in right.items():
        client = TestClient(make_app(root, token="s3cret"))
        if cookie is not None:
            client.cookies.set("elastune_token", cookie)
        for url in urls[:-1]:
            assert client.get(url, **kwargs).status_code == 200, (how, url)
        assert client.get(urls[-1], **kwargs).status_code == 404, how
    for url in urls:
        bare = TestClient(make_app(root, token="s3cret"))
        assert bare.get(url).status_code == 401, url
        # Another auth scheme, or an empty token, is no token.
        assert bare.get(url, headers={"Authorization": "Basic czNjcmV0"}).status_code == 401
        assert bare.get(url, params={"token": ""}).status_code == 401
        for wrong in ("s3cre", "s3cret ", "S3CRET", "s3cret\u00e9"):
            assert bare.get(url, params={"token": wrong}).status_code == 403, (url, wrong)
            if wrong.isascii():   # (an HTTP client sends only ASCII headers)
                assert bare.get(url, headers={"Authorization": f"Bearer {wrong}"}
                                ).status_code == 403
        for wrong in ("s3cre", "S3CRET", "s3cretX"):
            cookie = TestClient(make_app(root, token="s3cret"))
            cookie.cookies.set("elastune_token", wrong)
            assert cookie.get(url).status_code == 403, (url, wrong)
        # A wrong token in the query is not rescued by a right one elsewhere, and sets no
        # cookie.
        reply = bare.get(url, params={"token": "nope"}, headers={"X-Elastune-Token": "s3cret"})
        assert reply.status_code == 403 and "set-cookie" not in reply.headers
    # Nothing of the data leaks in a refusal.
    refused = TestClient(make_app(root, token="s3cret")).get("/api/experiments")
    assert set(refused.json()) == {"detail"} and "sim-plan" not in refused.text


def test_a_non_loopback_host_needs_a_token(root, capsys):
    with pytest.raises(ConfigError) as err:
        serve(root, host="0.0.0.0", port=8265)
    assert err.value.field == "--host" and "--token" in str(err.value)
    for host in ("127.0.0.1", "localhost", "::1", "127.0.0.2"):
        check_bind(host, 8265, None)
    for host in ("0.0.0.0", "::", "192.168.1.5", "example.org"):
        with pytest.raises(ConfigError):
            check_bind(host, 8265, None)
        check_bind(host, 8265, "t")
    assert main(["dashboard", str(root), "--host", "0.0.0.0"]) == 2
    assert "--host" in capsys.readouterr().err
    assert main(["dashboard", str(root / "missing")]) == 2
    assert "DIR" in capsys.readouterr().err
    assert main(["dashboard", str(root), "--port", "70000"]) == 2
    assert "--port" in capsys.readouterr().err


@pytest.mark.parametrize("kind", SMALL)
def test_the_report_embeds_the_same_numbers(client, root, kind, tmp_path):
    out = tmp_path / "r" / "report.html"
    assert main(["report", str(root / kind), "-o", str(out)]) == 0
    text = out.read_text()
    assert "<script src=" not in text and 'rel="stylesheet"' not in text   # self-contained
    assert plotly_js_path().read_text()[:2000] in text
    data = json.loads(re.search(
        r'<script id="elastune-data" type="application/json">(.*?)</script>', text,
        re.S).group(1))
    doc = status_document(_store(root, kind), root / kind)
    for key in ("best", "trials", "spend_usd", "state", "wall_s"):
        assert data["summary"][key] == doc[key]
    api = client.get(f"/api/e/{kind}/bundle").json()
    for part in ("best", "spend", "workers", "curves", "parallel", "timeline"):
        assert data[part] == api[part], part
    assert len(data["trials_all"]["rows"]) == doc["trials"]["total"]


def test_report_of_a_missing_directory_exits_2(tmp_path, capsys):
    assert main(["report", str(tmp_path / "nope"), "-o", str(tmp_path / "r.html")]) == 2
    assert "DIR" in capsys.readouterr().err
    with pytest.raises(ConfigError):
        write_report(tmp_path / "nope", tmp_path / "r.html")


@pytest.mark.parametrize("kind", SMALL)
def test_no_value_is_nan(client, kind):
    text = client.get(f"/api/e/{kind}/bundle").text
    assert "NaN" not in text and "Infinity" not in text
    assert not any(isinstance(v, float) and math.isnan(v) for v in json.loads(text)["best"]
                   ["value"])


def test_a_running_sweep_gets_a_spend_projection_billed_like_the_ledger(client, root):
    import shutil
    import sqlite3

    from budgets import billed
    from tests._dashboard_stores import copy_experiment

    exp = copy_experiment(root / "sim-plan", root / "sim-plan-running")
    try:
        store = Store(exp)
        store.update_experiment(state="running", finished_at=None, wall_s=None,
                                time_budget_s=2000.0)
        store.close()
        db = sqlite3.connect(exp / "experiment.db")
        iid, price, launched = db.execute(
            "SELECT instance_id, price_per_hour, launched_at FROM instances"
            " ORDER BY launched_at DESC LIMIT 1").fetchone()
        db.execute("UPDATE instances SET terminated_at = NULL WHERE instance_id = ?", (iid,))
        db.commit()
        db.close()
        s = client.get("/api/e/sim-plan-running/spend").json()
        store = Store(exp, readonly=True)
        t0 = t0_of(store)
        last_ts, spent = store.query("SELECT ts, spent_usd FROM spend ORDER BY ts DESC")[0]
        p = s["projection"]
        assert p["t_s"] == [round(last_ts - t0, 3), s["time_budget_s"]]
        extra = (billed(price, s["time_budget_s"] + t0 - launched)
                 - billed(price, last_ts - launched))
        assert p["spend_usd"][1] == pytest.approx(min(spent + extra, s["cost_budget_usd"]),
                                                  abs=1e-6)
        assert p["rate_usd_per_s"] == pytest.approx(price / 3600)
    finally:
        shutil.rmtree(exp)


RESUMABLE = """\
name: dash-resume
trainable: tests.trainables:quadratic
metric: score
mode: max
space: {x: {uniform: [0.0, 1.0]}, sleep: 0.1}
scheduler: {type: asha, min_resource: 1, max_resource: 9, reduction_factor: 3}
num_trials: 6
seed: 3
budget: {time: 2m, cost: 1.0}
provider: {type: local, workers: 2}
"""


@pytest.mark.slow
def test_a_resumed_sweep_keeps_every_runs_workers_and_counts_paused_trials(tmp_path):
    import os
    import subprocess
    import sys

    root_dir = Path(__file__).resolve().parents[3]
    sweep = tmp_path / "sweep.yaml"
    sweep.write_text(RESUMABLE)
    exp = tmp_path / "exp"
    env = dict(os.environ, PYTHONPATH=str(root_dir))
    cli = [sys.executable, "-m", "tuner.cli"]
    run = subprocess.run([*cli, "run", str(sweep), "--json", "--dir", str(exp)], cwd=root_dir,
                         env=env, capture_output=True, text=True, timeout=180)
    assert run.returncode == 0, run.stderr
    store = Store(exp, readonly=True)
    first_run = {i["instance_id"]: i for i in store.instances()}
    store.close()
    assert len(first_run) == 2

    resumed = subprocess.Popen([*cli, "resume", str(exp), "--json", "--num-trials", "15",
                                "--cost-budget", "2", "--time-budget", "4m"], cwd=root_dir,
                               env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    seen = []
    try:
        while resumed.poll() is None:
            store = Store(exp, readonly=True)
            try:
                if store.experiment()["state"] == "running":
                    seen.append(status_document(store, exp)["trials"])
            finally:
                store.close()
            time.sleep(0.1)
        out, err = resumed.communicate(timeout=180)
    finally:
        if resumed.poll() is None:
            resumed.kill()
    assert resumed.returncode == 0, err
    assert json.loads(out)["state"] == "finished"
    # two workers of one slot: never more than two trials running; ASHA's others wait
    assert seen and max(t["running"] for t in seen) <= 2
    assert max(t["paused"] for t in seen) > 2
    assert all(sum(v for k, v in t.items() if k != "total") == t["total"] for t in seen)

    status = subprocess.run([*cli, "status", str(exp), "--json"], cwd=root_dir, env=env,
                            capture_output=True, text=True, timeout=60)
    doc = json.loads(status.stdout)
    assert doc["trials"]["total"] == 15 and doc["trials"]["running"] == 0
    assert doc["predicted_wall_s"] is not None
    human = subprocess.run([*cli, "status", str(exp)], cwd=root_dir, env=env,
                           capture_output=True, text=True, timeout=60)
    assert "0 running, 0 paused" in human.stdout and "planned" in human.stdout

    # the first run's workers are still there, as they were, beside the second run's
    store = Store(exp, readonly=True)
    rows = {i["instance_id"]: i for i in store.instances()}
    for iid, row in first_run.items():
        assert rows[iid] == row
    assert len(rows) > len(first_run)
    segments_on = {s["instance_id"] for s in store.segments()}
    assert segments_on <= set(rows)
    t = TestClient(make_app(exp)).get(f"/api/e/{exp.name}/timeline").json()
    assert t["total_workers"] == len(rows)
    assert sorted(t["workers"]["instance_id"]) == sorted(rows)
    for iid, launched in zip(t["workers"]["instance_id"], t["workers"]["launched_t"],
                             strict=True):
        assert launched == round(rows[iid]["launched_at"] - t0_of(store), 3)
    store.close()
