"""The dashboard in a real browser: the real server (uvicorn) and Debian's chromium driven by
Playwright. Charts hold the stored numbers, the table sorts, a live sweep updates the page, and
a 10,000-trial experiment renders in under 3 s."""

from __future__ import annotations

import json
import math
import re
import socket
import threading
import time
from pathlib import Path

import pytest

from tests._dashboard_stores import (
    accrued_at,
    copy_experiment,
    curves_of,
    expected_best,
    live_workers,
    make_root,
    params_of,
    t0_of,
)
from tuner._status import status_document
from tuner._store import Store

CHROMIUM = Path("/usr/bin/chromium")
if not CHROMIUM.exists():
    pytest.skip("Debian chromium is not installed at /usr/bin/chromium (apt-get install "
                "chromium)", allow_module_level=True)
sync_api = pytest.importorskip("playwright.sync_api")

pytestmark = pytest.mark.slow
ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking",
        "--disable-component-update", "--no-first-run", "--disable-quic", "--disable-sync"]
CHARTS = ("chart-best-cost", "chart-best-time", "chart-spend", "chart-workers", "chart-curves",
          "chart-parcoords", "chart-timeline")
SMALL = ("digits", "sim-plan")
READY = "window.elastune && window.elastune.ready"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def root(tmp_path_factory):
    return make_root(tmp_path_factory, ("digits", "sim-plan", "sim-10k"), "browser-root")


@pytest.fixture(scope="module")
def server(root):
    import uvicorn

    from tuner.dashboard import make_app

    port = _free_port()
    srv = uvicorn.Server(uvicorn.Config(make_app(root, poll_s=0.5), host="127.0.0.1",
                                        port=port, log_level="warning"))
    thread = threading.Thread(target=srv.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not srv.started:
        assert thread.is_alive() and time.monotonic() < deadline, "server did not start"
        time.sleep(0.02)
    yield f"http://127.0.0.1:{port}"
    srv.should_exit = True
    thread.join(timeout=10)


@pytest.fixture(scope="module")
def browser():
    with sync_api.sync_playwright() as p:
        b = p.chromium.launch(executable_path=str(CHROMIUM), headless=True, args=ARGS)
        yield b
        b.close()


@pytest.fixture(scope="module")
def context(browser):
    ctx = browser.new_context(viewport={"width": 1400, "height": 1000})
    yield ctx
    ctx.close()


@pytest.fixture
def page(context):
    pg = context.new_page()
    errors: list[str] = []
    pg.on("pageerror", lambda e: errors.append(str(e)))
    yield pg
    pg.close()
    assert not errors, errors


def _open(page, url: str, timeout_ms: int = 30_000) -> float:
    start = time.perf_counter()
    page.goto(url)
    page.wait_for_function(READY, timeout=timeout_ms)
    assert page.evaluate("window.elastune.error || null") is None
    return time.perf_counter() - start


def _traces(page, chart_id: str) -> list[dict]:
    return page.evaluate(
        """id => document.getElementById(id).data.map(t => ({
            name: t.name, type: t.type,
            x: t.x ? Array.from(t.x) : null, y: t.y ? Array.from(t.y) : null,
            customdata: t.customdata ? Array.from(t.customdata) : null,
            dimensions: t.dimensions ? t.dimensions.map(d => ({label: d.label,
                values: Array.from(d.values), ticktext: d.ticktext || null})) : null}))""",
        chart_id)


def _axis(page, chart_id: str, axis: str = "xaxis") -> dict:
    """The axis as plotly laid it out (range after autorange), and the chart's shapes."""
    return page.evaluate(
        """([id, axis]) => { const l = document.getElementById(id)._fullLayout;
            return {type: l[axis].type, range: Array.from(l[axis].range),
                    shapes: (l.shapes || []).map(s => ({x0: s.x0, xref: s.xref}))}; }""",
        [chart_id, axis])


def _cost_cells(page) -> list[str]:
    return page.eval_on_selector_all(
        "#trials-table tbody tr", """rows => rows.map(r => r.children[Array.from(
            document.querySelectorAll('#trials-table th')).findIndex(
            th => th.getAttribute('data-sort') === 'cost_usd')].textContent)""")


def _assert_money(texts: list[str]) -> None:
    for text in texts:
        assert re.fullmatch(r"\$?\d+\.\d+", text), text     # never 1.746768e-4


def _by_name(traces: list[dict]) -> dict[str, dict]:
    return {t["name"]: t for t in traces}


def _split(xs: list, ys: list, ids: list) -> dict[str, tuple[list, list]]:
    """Null-separated polylines back into one (x, y) per id."""
    out: dict[str, tuple[list, list]] = {}
    for x, y, i in zip(xs, ys, ids, strict=True):
        if i is None:
            continue
        steps, values = out.setdefault(i, ([], []))
        steps.append(x)
        values.append(y)
    return out


@pytest.mark.parametrize("kind", SMALL)
def test_every_chart_draws_the_stored_numbers(page, server, root, kind, tmp_path):
    _open(page, f"{server}/e/{kind}")
    store = Store(root / kind, readonly=True)
    doc = status_document(store, root / kind)
    t0 = t0_of(store)
    for chart in CHARTS:
        assert _traces(page, chart), f"{chart} has no trace"

    # best score vs dollars and vs time: each change of the best, then the end of the sweep
    expected = expected_best(store)
    cost = _traces(page, "chart-best-cost")[0]
    tim = _traces(page, "chart-best-time")[0]
    assert cost["y"] == [v for _, v, _ in expected] + [doc["best"]["value"]]
    assert cost["customdata"] == [i for _, _, i in expected] + [doc["best"]["trial_id"]]
    assert tim["x"][:-1] == [round(t, 3) for t, _, _ in expected]
    assert tim["y"] == cost["y"]
    # dollars accrued when each best was found (not the billing minimum charged at launch)
    assert cost["x"] == pytest.approx([accrued_at(store, t + t0) for t in tim["x"]], abs=1e-6)
    # the dollar axis starts at $0 or above (log) and reaches the cost budget, drawn in it
    budget = doc["cost_budget_usd"]
    usd = _axis(page, "chart-best-cost")
    lo, hi = usd["range"]
    if usd["type"] == "log":
        lo, hi = 10 ** lo, 10 ** hi
    assert 0 <= lo <= min(cost["x"]) and max(cost["x"]) <= hi and lo <= budget <= hi, usd
    assert [s["x0"] for s in usd["shapes"]] == [budget]
    # every time axis fits the sweep: from 0 to its end, not to a prediction past it
    end = page.evaluate("window.elastune.data.summary.end_t")
    assert end == pytest.approx(doc["wall_s"], abs=0.5)
    for chart in ("chart-best-time", "chart-spend", "chart-workers", "chart-timeline"):
        lo, hi = _axis(page, chart)["range"]
        assert lo == 0 and end <= hi <= 1.05 * end + 0.1, (chart, lo, hi, end)
    assert _axis(page, "chart-spend", "yaxis")["range"][0] >= 0

    # spend vs budget: accrued second by second, beside the ledger's records
    spend = _by_name(_traces(page, "chart-spend"))
    rows = store.query("SELECT ts, spent_usd, committed_usd FROM spend ORDER BY ts, rowid")
    assert spend["accrued"]["x"] == [round(r[0] - t0, 3) for r in rows]
    assert spend["accrued"]["y"] == pytest.approx([accrued_at(store, r[0]) for r in rows],
                                                  abs=1e-6)
    billed = spend["billed (with the billing minimum)"]
    assert billed["x"] == [round(r[0] - t0, 3) for r in rows]
    assert billed["y"] == pytest.approx([r[1] for r in rows], abs=1e-6)
    assert spend["committed (ledger forecast)"]["y"] == pytest.approx([r[2] for r in rows],
                                                                        abs=1e-6)
    assert spend["cost budget"]["y"][0] == doc["cost_budget_usd"]

    # planned vs actual workers
    workers = _by_name(_traces(page, "chart-workers"))
    actual = workers["actual (instances held)"]
    assert actual["y"] == [live_workers(store, t) for t in actual["x"]]
    plans = store.plans()
    assert workers["planned"]["y"][0] == sorted(plans[0]["timeline"],
                                                key=lambda p: p["t_s"])[0]["workers"]
    preempted = {i["instance_id"] for i in store.instances() if i.get("preempted")}
    if kind == "sim-plan":
        assert preempted and len(workers["instance preempted"]["x"]) == len(preempted)

    # learning curves: every trial's reports, step by step
    curves = _traces(page, "chart-curves")
    drawn: dict[str, tuple[list, list]] = {}
    for trace in curves:
        drawn.update(_split(trace["x"], trace["y"], trace["customdata"]))
    assert drawn == {t: (s, v) for t, (s, v) in curves_of(store).items()}
    best_trace = [t for t in curves if t["name"].startswith("best")]
    assert best_trace and best_trace[0]["customdata"][0] == doc["best"]["trial_id"]

    # parallel coordinates: one line per scored trial, parameters then score
    dims = _traces(page, "chart-parcoords")[0]["dimensions"]
    params = params_of(store)
    values = dict(store.query("SELECT trial_id, value FROM trials WHERE value IS NOT NULL"))

    def cell(dim, v):
        return dim["ticktext"][v] if dim["ticktext"] else round(v, 10)

    lines = sorted(tuple(cell(d, d["values"][k]) for d in dims)
                   for k in range(len(dims[-1]["values"])))

    def expect(trial_id, value):
        row = []
        for d in dims[:-1]:
            raw = params[trial_id][d["label"].removesuffix(" (log10)")]
            if d["label"].endswith("(log10)"):
                raw = math.log10(raw)
            row.append(str(raw) if d["ticktext"] else round(raw, 10))
        return (*row, round(value, 10))

    assert lines == sorted(expect(t, v) for t, v in values.items())
    assert dims[-1]["label"] == store.experiment()["metric"]

    # per-worker timeline: every segment that ran, on its worker, from start to end
    bars = set()
    held: dict[str, set[str]] = {}
    for trace in _traces(page, "chart-timeline"):
        if trace["name"].startswith("instance held"):
            held[trace["name"]] = {y for y in trace["y"] if y is not None}
            continue
        if trace["name"] == "instance preempted":
            continue
        xs, ys = trace["x"], trace["y"]
        for k in range(0, len(xs), 3):
            bars.add((ys[k], xs[k], xs[k + 1]))
    segs = [s for s in store.segments() if s["started_at"] is not None]
    assert bars == {(s["instance_id"], round(s["started_at"] - t0, 3),
                     round(s["finished_at"] - t0, 3)) for s in segs}
    # ... and each instance held, by market once some ran on spot
    # (an even sample of at most TIMELINE_WORKERS of them)
    spot = {i["instance_id"] for i in store.instances() if i["spot"]}
    everyone = {i["instance_id"] for i in store.instances()}
    shown = set().union(*held.values())
    assert shown <= everyone and (len(shown) == len(everyone) or len(shown) == 60)
    if spot & shown:
        assert held["instance held (spot)"] == spot & shown
        assert held.get("instance held (on-demand)", set()) == shown - spot
    else:
        assert set(held) == {"instance held"}

    # the summary cards
    assert page.inner_text("#summary-best") == f"{doc['best']['value']:.4f}"
    assert page.inner_text("#summary-trials") == str(doc["trials"]["total"])
    assert page.inner_text("#summary-state") == "finished"
    t = doc["trials"]
    assert f"{t['running']} running, {t['paused']} paused" in page.inner_text(
        "#summary-trials-detail")
    assert "planned" in page.inner_text("#summary-wall-detail")
    _assert_money([page.inner_text("#summary-spend")])
    _assert_money(_cost_cells(page))
    shot = tmp_path / f"dashboard-{kind}.png"
    page.screenshot(path=str(shot), full_page=True)
    assert shot.stat().st_size > 10_000


def test_the_index_dollar_axis_never_goes_below_zero(page, tmp_path_factory):
    import uvicorn

    from tuner.dashboard import make_app

    # One experiment: plotly's autorange would pad its lone point to both sides of it.
    root = make_root(tmp_path_factory, ("digits",), "one-experiment-root")
    port = _free_port()
    srv = uvicorn.Server(uvicorn.Config(make_app(root), host="127.0.0.1", port=port,
                                        log_level="warning"))
    thread = threading.Thread(target=srv.run, daemon=True)
    thread.start()
    try:
        while not srv.started:
            assert thread.is_alive()
            time.sleep(0.02)
        _open(page, f"http://127.0.0.1:{port}/")
        axis = _axis(page, "chart-experiments")
        assert axis["type"] == "linear" and 0 <= axis["range"][0], axis
        spends = page.evaluate("""Array.from(document.querySelectorAll(
            '#experiments-table tbody tr')).map(r => r.children[4].textContent)""")
        assert len(spends) == 1
        _assert_money(spends)
    finally:
        srv.should_exit = True
        thread.join(timeout=10)


def _first_column(page) -> list[str]:
    return page.eval_on_selector_all("#trials-table tbody tr",
                                     "rows => rows.map(r => r.getAttribute('data-trial'))")


def test_the_trials_table_sorts_when_a_header_is_clicked(page, server, root):
    _open(page, f"{server}/e/digits")
    frame = Store(root / "digits", readonly=True).trials_frame()
    by_value = frame.sort_values(["value", "number"], ascending=[False, True])
    assert _first_column(page) == list(by_value["trial_id"])

    page.click("#trials-table th[data-sort='last_step']")
    page.wait_for_function(
        "document.querySelector(\"#trials-table th[data-sort='last_step']\")"
        ".textContent.includes('▲')")
    asc = frame.sort_values(["last_step", "number"], ascending=[True, True])
    assert _first_column(page) == list(asc["trial_id"])

    page.click("#trials-table th[data-sort='last_step']")
    page.wait_for_function(
        "document.querySelector(\"#trials-table th[data-sort='last_step']\")"
        ".textContent.includes('▼')")
    desc = frame.sort_values(["last_step", "number"], ascending=[False, True])
    assert _first_column(page) == list(desc["trial_id"])

    page.click("#trials-table th[data-sort='params.lr']")
    page.wait_for_function(
        "document.querySelector(\"#trials-table th[data-sort='params.lr']\")"
        ".textContent.includes('▲')")
    assert _first_column(page) == list(frame.sort_values("params.lr")["trial_id"])

    page.select_option("#trials-state", "completed")
    page.wait_for_function("document.querySelectorAll('#trials-table tbody tr').length === "
                           f"{int((frame['state'] == 'completed').sum())}")


def test_a_running_sweep_updates_the_open_page(page, server, root):
    exp = copy_experiment(root / "sim-plan", root / "live")
    store = Store(exp)
    store.update_experiment(state="running", finished_at=None, wall_s=None, best_trial_id=None,
                            best_value=None)
    before = store.trial_counts()["total"]
    _open(page, f"{server}/e/live")
    renders = page.evaluate("window.elastune.renders")
    assert page.inner_text("#summary-trials") == str(before)
    assert page.inner_text("#live") == "live"

    # what the controller writes when a trial's first segment ends with a new best
    t = max(s["finished_at"] for s in store.segments() if s["finished_at"]) + 10.0
    instance = store.instances()[0]["instance_id"]
    store.add_trial("t9999", 9999, {"config": 7}, 0, t)
    store.add_segment("live/t9999/s1", "t9999", instance, 0, 1, 1, t)
    store.update_segment("live/t9999/s1", state="running", started_at=t)
    store.add_reports([("t9999", "live/t9999/s1", 1, 0.9999, json.dumps({"acc": 0.9999}),
                        t + 5)])
    store.update_segment("live/t9999/s1", state="done", finished_at=t + 5, last_step=1,
                         checkpoint_step=1)
    store.update_trial("t9999", t + 5, state="completed", last_step=1, value=0.9999)
    spent = store.query("SELECT spent_usd, committed_usd FROM spend ORDER BY rowid DESC")[0]
    store.record_spend(t + 5, spent[0] + 0.01, spent[1] + 0.01, 1)
    written = time.perf_counter()
    page.wait_for_function(
        f"window.elastune.renders > {renders} && "
        f"document.getElementById('summary-trials').textContent === '{before + 1}'",
        timeout=10_000)
    took = time.perf_counter() - written
    assert took < 5.0, took
    best = _traces(page, "chart-best-cost")[0]
    assert best["y"][-1] == 0.9999 and best["customdata"][-1] == "t9999"
    drawn = {}
    for trace in _traces(page, "chart-curves"):
        drawn.update(_split(trace["x"], trace["y"], trace["customdata"]))
    assert drawn["t9999"] == ([1], [0.9999])
    page.wait_for_function("document.querySelector('#trials-table tbody tr')"
                           ".getAttribute('data-trial') === 't9999'", timeout=5_000)
    store.close()


def test_a_10k_trial_experiment_renders_in_under_3s(page, server, context, browser, tmp_path):
    _open(page, f"{server}/")                      # the index first, as a user would
    warm = _open(page, f"{server}/e/sim-10k")
    drawn_ms = page.evaluate("window.elastune.drawnAt")
    for chart in CHARTS:
        assert _traces(page, chart), chart
    page.screenshot(path=str(tmp_path / "dashboard-10k.png"), full_page=True)
    # and from a fresh browser context (nothing cached, plotly.js parsed afresh)
    cold_ctx = browser.new_context(viewport={"width": 1400, "height": 1000})
    try:
        cold_page = cold_ctx.new_page()
        cold = _open(cold_page, f"{server}/e/sim-10k")
        cold_ms = cold_page.evaluate("window.elastune.drawnAt")
    finally:
        cold_ctx.close()
    print(f"\n10k-trial page: {warm:.2f} s from the index ({drawn_ms:.0f} ms after navigation "
          f"start), {cold:.2f} s cold ({cold_ms:.0f} ms)")
    # The target is the page's own measure (navigation start to every chart drawn); the
    # wall-clock figures, which add the browser's start-up and polling and vary with the
    # machine's load (cold: 3.4-4.8 s on a 2-core runner), only guard against a hang.
    assert drawn_ms < 3000, (warm, drawn_ms)
    assert warm < 6.0 and cold < 8.0, (warm, cold, cold_ms)


def test_the_report_file_draws_the_same_charts(page, server, root, tmp_path):
    from tuner.dashboard import write_report

    out = write_report(root / "sim-plan", tmp_path / "report.html")
    page.goto(out.as_uri())
    page.wait_for_function(READY, timeout=30_000)
    live = page.context.new_page()
    try:
        _open(live, f"{server}/e/sim-plan")
        for chart in CHARTS:
            assert _traces(page, chart) == _traces(live, chart), chart
    finally:
        live.close()
    _assert_money([page.inner_text("#summary-spend"), *_cost_cells(page)])
    page.click("#trials-table th[data-sort='trial_id']")
    page.wait_for_function("document.querySelector('#trials-table tbody tr')"
                           ".getAttribute('data-trial') === 't0001'")


def test_with_a_token_the_pages_work_once_opened_with_it(browser, root):
    import uvicorn

    from tuner.dashboard import make_app

    port = _free_port()
    srv = uvicorn.Server(uvicorn.Config(make_app(root, token="s3cret"), host="127.0.0.1",
                                        port=port, log_level="warning"))
    thread = threading.Thread(target=srv.run, daemon=True)
    thread.start()
    while not srv.started:
        assert thread.is_alive()
        time.sleep(0.02)
    ctx = browser.new_context()
    try:
        pg = ctx.new_page()
        assert pg.goto(f"http://127.0.0.1:{port}/e/digits").status == 401
        _open(pg, f"http://127.0.0.1:{port}/?token=s3cret")
        pg.click("#experiments-table a[href^='/e/digits']")
        pg.wait_for_url("**/e/digits**")
        pg.wait_for_function(READY, timeout=30_000)
        assert _traces(pg, "chart-curves")
    finally:
        ctx.close()
        srv.should_exit = True
        thread.join(timeout=10)
