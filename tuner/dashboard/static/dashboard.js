/* elastune dashboard: fills the experiment page and the index page with plotly.js charts.
 *
 * One script for the live dashboard (data from the JSON API, polled for changes) and for the
 * one-file report (data embedded in the page). The server aggregates; this only draws.
 * window.elastune.ready turns true once every chart of the first answer is drawn;
 * window.elastune.renders counts redraws (live updates).
 */
(function () {
  "use strict";
  var E = (window.elastune = window.elastune || {});
  E.ready = false;
  E.renders = 0;
  E.version = null;
  var cfg = JSON.parse(document.getElementById("elastune-config").textContent);
  var PLOT = { displaylogo: false, responsive: true };
  var STATE_COLORS = {
    completed: "#2ca02c", pruned: "#9aa5b1", stopped: "#ff7f0e", failed: "#d62728",
    running: "#1f77b4", paused: "#17becf", done: "#2ca02c", ended: "#2ca02c",
    lost: "#d62728", preempted: "#9467bd", submitted: "#c7c7c7"
  };
  var RUNG_COLORS = ["#9ecae1", "#6baed6", "#4292c6", "#2171b5", "#08519c", "#08306b"];
  var STATE_ORDER = ["pruned", "stopped", "failed", "paused", "running", "completed"];
  var token = new URLSearchParams(window.location.search).get("token");

  // -- helpers -------------------------------------------------------------------------------
  function getJSON(path) {
    var headers = token ? { "X-Elastune-Token": token } : {};
    return fetch(path, { headers: headers, credentials: "same-origin", cache: "no-store" })
      .then(function (r) {
        if (!r.ok) { throw new Error(r.status + " " + path); }
        return r.json();
      });
  }
  function $(id) { return document.getElementById(id); }
  function setText(id, text) { var el = $(id); if (el) { el.textContent = text; } }
  function fmt(x, digits) {
    if (x === null || x === undefined) { return "–"; }
    if (typeof x !== "number") { return String(x); }
    if (Number.isInteger(x)) { return String(x); }
    var a = Math.abs(x);
    if (a !== 0 && (a < 1e-3 || a >= 1e6)) { return x.toExponential(digits || 3); }
    return x.toFixed(digits === undefined ? 4 : digits);
  }
  // Dollars as a plain decimal with three significant digits below a dollar (never
  // 1.7e-4: a trial's cost is often a fraction of a cent), cents from a dollar up.
  function usd(x) {
    if (x === null || x === undefined) { return "–"; }
    var a = Math.abs(x);
    var decimals = a === 0 || a >= 1 ? 2
      : Math.min(10, Math.max(2, 2 - Math.floor(Math.log10(a))));
    return x.toFixed(decimals);
  }
  function money(x) { return x === null || x === undefined ? "–" : "$" + usd(x); }
  // Plotly's defaults would write small dollars as 100µ.
  var DOLLAR_AXIS = { exponentformat: "none", tickprefix: "$" };
  function timeRange(end) { return [0, Math.max(end, 1e-3) * 1.02]; }
  function duration(s) {
    if (s === null || s === undefined) { return "–"; }
    if (s < 120) { return s.toFixed(1) + " s"; }
    if (s < 7200) { return (s / 60).toFixed(1) + " min"; }
    return (s / 3600).toFixed(2) + " h";
  }
  function layout(xTitle, yTitle, extra) {
    var base = {
      margin: { l: 60, r: 20, t: 10, b: 45 }, height: 300, uirevision: "keep",
      xaxis: { title: { text: xTitle }, zeroline: false },
      yaxis: { title: { text: yTitle }, zeroline: false },
      legend: { orientation: "h", y: 1.12, x: 0 }, hovermode: "closest",
      font: { size: 11 }, paper_bgcolor: "#fff", plot_bgcolor: "#fafbfc"
    };
    return Object.assign(base, extra || {});
  }
  function draw(id, traces, lay) {
    var el = $(id);
    if (!el) { return Promise.resolve(); }
    return Plotly.react(el, traces, lay, PLOT);
  }
  function vline(x, text, color) {
    return {
      shape: { type: "line", xref: "x", yref: "paper", x0: x, x1: x, y0: 0, y1: 1,
               line: { color: color || "#d62728", dash: "dash", width: 1 } },
      note: { x: x, y: 1, xref: "x", yref: "paper", text: text, showarrow: false,
              xanchor: "right", yanchor: "top", font: { size: 10, color: color || "#d62728" } }
    };
  }
  function maxOf(xs) {
    var m = -Infinity;
    for (var i = 0; i < xs.length; i++) { if (xs[i] !== null && xs[i] > m) { m = xs[i]; } }
    return m;
  }
  function noData(id, text) {
    return draw(id, [], layout("", "", {
      xaxis: { visible: false }, yaxis: { visible: false },
      annotations: [{ text: text, showarrow: false, xref: "paper", yref: "paper", x: 0.5, y: 0.5 }]
    }));
  }

  // -- summary -------------------------------------------------------------------------------
  function renderSummary(s) {
    setText("summary-state", s.state);
    var badge = $("summary-state");
    if (badge) { badge.className = "badge state-" + s.state; }
    var best = s.best ? s.best.value : s.best_so_far;
    setText("summary-best", fmt(best));
    setText("summary-best-detail", s.best
      ? s.metric + " (" + s.mode + "), " + s.best.trial_id + ": " + JSON.stringify(s.best.params)
      : s.metric + " (" + s.mode + ")" + (best !== null && best !== undefined ? ", so far" : ""));
    setText("summary-spend", money(s.spend_usd));
    setText("summary-spend-detail", s.cost_budget_usd === null ? "no cost budget"
      : "of " + money(s.cost_budget_usd) + " budget" + (s.budget_respected ? "" : " (exceeded)"));
    var t = s.trials;
    setText("summary-trials", String(t.total));
    setText("summary-trials-detail", t.completed + " completed, " + t.pruned + " pruned, " +
      t.failed + " failed, " + t.running + " running, " + t.paused + " paused, " +
      t.stopped + " stopped");
    setText("summary-wall", duration(s.wall_s));
    var wall = s.time_budget_s === null ? "no time budget"
      : "of " + duration(s.time_budget_s) + " budget";
    if (s.predicted_wall_s !== null && s.predicted_wall_s !== undefined) {
      wall += "; planned " + duration(s.predicted_wall_s);
    }
    if (s.wall_s !== null && s.end_t > 1.1 * s.wall_s + 1) {
      // A resumed sweep: the time axis also spans the pause between its runs.
      wall += "; " + duration(s.end_t) + " since it first started";
    }
    setText("summary-wall-detail", wall);
    setText("exp-meta", s.experiment + " · " + s.dir + " · " + s.instances.total +
      " instances, " + s.plans + " plans" + (s.message ? " · " + s.message : ""));
  }

  // -- charts --------------------------------------------------------------------------------
  function drawBest(b, id, xKey, xTitle, budget, budgetLabel, end) {
    if (!b.value.length) { return noData(id, "no trial has reported a value yet"); }
    var x = b[xKey];
    var dollars = xKey === "accrued_usd";
    var trace = {
      type: "scatter", mode: "lines+markers", name: "best so far", x: x, y: b.value,
      customdata: b.trial_id, line: { shape: "hv", color: "#1f77b4" }, marker: { size: 5 },
      hovertemplate: "%{y:.4f} (%{customdata})<br>" + xTitle + ": " +
        (dollars ? "%{x:$.6~f}" : "%{x:.1f}") + "<extra></extra>"
    };
    var extra = { shapes: [], annotations: [] };
    var hasBudget = budget !== null && budget !== undefined;
    var top = Math.max(maxOf(x), 0);
    if (dollars) {
      // The axis always reaches the cost budget; one far above the spend gets a log axis,
      // or every point would sit in the first pixels.
      var hi = Math.max(top, hasBudget ? budget : 0) || 1e-6;
      var positive = x.filter(function (v) { return v !== null && v > 0; });
      var lo = positive.length ? Math.min.apply(null, positive) : 0;
      var log = hasBudget && lo > 0 && hi > 20 * top;
      extra.xaxis = Object.assign({ title: { text: xTitle } }, DOLLAR_AXIS, log
        ? { type: "log", range: [Math.log10(lo) - 0.2, Math.log10(hi) + 0.05] }
        : { range: [0, hi * 1.05] });
    } else {
      extra.xaxis = { title: { text: xTitle }, range: timeRange(end) };
    }
    if (hasBudget && (dollars || budget <= 1.05 * end)) {
      var v = vline(budget, budgetLabel);
      extra.shapes.push(v.shape);
      extra.annotations.push(v.note);
    } else if (hasBudget) {
      // A time budget far past the end would stretch the axis: named, not drawn.
      extra.annotations.push({ text: budgetLabel + " " + duration(budget), showarrow: false,
        xref: "paper", yref: "paper", x: 1, y: 1, xanchor: "right", yanchor: "top",
        font: { size: 10, color: "#d62728" } });
    }
    return draw(id, [trace], layout(xTitle, b.metric, extra));
  }

  function drawSpend(s, end) {
    var id = "chart-spend";
    if (!s.t_s.length) { return noData(id, "no spend recorded yet"); }
    // Accrued: what the instances have cost second by second. The ledger bills each
    // instance's minimum in full at its launch, and commits the work reserved on it.
    var traces = [
      { type: "scatter", mode: "lines", name: "accrued", x: s.t_s, y: s.accrued_usd,
        line: { color: "#1f77b4" } },
      { type: "scatter", mode: "lines", name: "billed (with the billing minimum)", x: s.t_s,
        y: s.spent_usd, line: { color: "#2ca02c", dash: "dot" } },
      { type: "scatter", mode: "lines", name: "committed (ledger forecast)", x: s.t_s,
        y: s.committed_usd, line: { color: "#ff7f0e", dash: "dash" } }
    ];
    if (s.projection) {
      traces.push({ type: "scatter", mode: "lines", name: "projection at current rate",
        x: s.projection.t_s, y: s.projection.spend_usd, line: { color: "#9467bd", dash: "dot" } });
    }
    var top = Math.max(maxOf(s.committed_usd), maxOf(s.spent_usd), 1e-9);
    if (s.cost_budget_usd !== null) {
      // A budget far above the spend would flatten it: listed in the legend, drawn on click.
      var tmax = Math.max(maxOf(s.t_s), s.projection ? maxOf(s.projection.t_s) : 0);
      traces.push({ type: "scatter", mode: "lines", name: "cost budget", x: [0, tmax],
        y: [s.cost_budget_usd, s.cost_budget_usd], line: { color: "#d62728", width: 1 },
        visible: s.cost_budget_usd <= 3 * top ? true : "legendonly" });
    }
    var xEnd = Math.max(end, s.projection ? maxOf(s.projection.t_s) : 0);
    return draw(id, traces, layout("seconds since start", "USD", {
      xaxis: { title: { text: "seconds since start" }, range: timeRange(xEnd) },
      yaxis: Object.assign({ title: { text: "USD" }, rangemode: "nonnegative" }, DOLLAR_AXIS)
    }));
  }

  function drawWorkers(w) {
    var id = "chart-workers";
    var traces = [{
      type: "scatter", mode: "lines", name: "actual (instances held)", x: w.actual.t_s,
      y: w.actual.workers, line: { shape: "hv", color: "#1f77b4" }
    }];
    if (w.planned.t_s.length) {
      traces.push({ type: "scatter", mode: "lines", name: "planned", x: w.planned.t_s,
        y: w.planned.workers, text: w.planned.instance_type,
        line: { shape: "hv", color: "#2ca02c", dash: "dash" } });
    }
    if (w.preempted.t_s.length) {
      traces.push({ type: "scatter", mode: "markers", name: "instance preempted",
        x: w.preempted.t_s, y: w.preempted.workers, text: w.preempted.instance_id,
        marker: { symbol: "x", size: 9, color: "#9467bd" } });
    }
    var types = w.instance_types.map(function (t) {
      return t.count + " × " + t.instance_type + (t.spot ? " (spot)" : "");
    }).join(", ");
    var notes = types ? [{ text: types, showarrow: false, xref: "paper",
      yref: "paper", x: 1, y: 0, xanchor: "right", yanchor: "bottom", font: { size: 10 } }] : [];
    var wall = w.wall;
    if (wall && wall.difference_s !== null) {
      var d = wall.difference_s;
      notes.push({ text: "wall time: planned " + duration(wall.predicted_s) + ", actual " +
        duration(wall.actual_s) + " (" + duration(Math.abs(d)) +
        (d > 0 ? " longer" : " shorter") + ")", showarrow: false, xref: "paper",
        yref: "paper", x: 1, y: 1, xanchor: "right", yanchor: "top", font: { size: 10 } });
    }
    var extra = { annotations: notes,
      xaxis: { title: { text: "seconds since start" }, range: timeRange(w.end_t) },
      yaxis: { title: { text: "workers" }, rangemode: "nonnegative" } };
    return draw(id, traces, layout("seconds since start", "workers", extra));
  }

  function drawCurves(c) {
    var id = "chart-curves";
    if (!c.curves.length) { return noData(id, "no reports yet"); }
    var groups = {};
    var best = null;
    c.curves.forEach(function (k) {
      if (k.trial_id === c.best_trial_id) { best = k; return; }
      var g = groups[k.state] || (groups[k.state] = { x: [], y: [], ids: [] });
      for (var i = 0; i < k.step.length; i++) {
        g.x.push(k.step[i]); g.y.push(k.metric[i]); g.ids.push(k.trial_id);
      }
      g.x.push(null); g.y.push(null); g.ids.push(null);
    });
    var states = Object.keys(groups).sort(function (a, b) {
      return STATE_ORDER.indexOf(a) - STATE_ORDER.indexOf(b);
    });
    var traces = states.map(function (s) {
      var g = groups[s];
      return { type: "scatter", mode: "lines", name: s, x: g.x, y: g.y, customdata: g.ids,
        connectgaps: false, opacity: 0.75,
        line: { width: 1, color: STATE_COLORS[s] || "#888" },
        hovertemplate: "%{customdata}<br>step %{x}: %{y:.4f}<extra>" + s + "</extra>" };
    });
    if (best) {
      traces.push({ type: "scatter", mode: "lines+markers", name: "best (" + best.trial_id + ")",
        x: best.step, y: best.metric,
        customdata: best.step.map(function () { return best.trial_id; }),
        line: { width: 3, color: "#000" }, marker: { size: 4 },
        hovertemplate: "%{customdata}<br>step %{x}: %{y:.4f}<extra>best</extra>" });
    }
    var shapes = c.rungs.map(function (r) {
      return { type: "line", xref: "x", yref: "paper", x0: r, x1: r, y0: 0, y1: 1,
               line: { color: "#bbb", dash: "dot", width: 1 } };
    });
    var note = c.shown < c.total ? [{ text: "showing " + c.shown + " of " + c.total +
      " trials (best " + c.top + " and a sample)", showarrow: false, xref: "paper", yref: "paper",
      x: 1, y: 0, xanchor: "right", yanchor: "bottom", font: { size: 10 } }] : [];
    return draw(id, traces, layout("step", c.metric, { shapes: shapes, annotations: note,
      height: 340 }));
  }

  function drawParallel(p) {
    var id = "chart-parcoords";
    if (!p.shown) { return noData(id, "no trial has a value yet"); }
    var dims = p.dimensions.map(function (d) {
      if (d.kind === "categorical") {
        return { label: d.name, values: d.values, ticktext: d.categories,
                 tickvals: d.categories.map(function (_, i) { return i; }) };
      }
      if (d.kind === "log") {
        return { label: d.name + " (log10)", values: d.values.map(function (v) {
          return v === null ? null : Math.log10(v); }) };
      }
      return { label: d.name, values: d.values };
    });
    dims.push({ label: p.metric, values: p.score });
    var trace = { type: "parcoords", dimensions: dims,
      line: { color: p.score, colorscale: "Viridis", reversescale: p.mode === "min",
              showscale: true, colorbar: { title: { text: p.metric }, thickness: 12 } } };
    var note = p.shown < p.total ? [{ text: p.shown + " of " + p.total +
      " trials (the best quarter and a sample)",
      showarrow: false, xref: "paper", yref: "paper", x: 1, y: -0.12, xanchor: "right",
      font: { size: 10 } }] : [];
    return draw(id, [trace], { margin: { l: 60, r: 40, t: 40, b: 30 }, height: 340,
      annotations: note, font: { size: 11 } });
  }

  function drawTimeline(t) {
    var id = "chart-timeline";
    var w = t.workers;
    if (!w.instance_id.length) { return noData(id, "no worker yet"); }
    // Each instance's time held, by market when some ran on spot.
    var anySpot = w.spot.some(function (v) { return v; });
    var held = {};
    for (var i = 0; i < w.instance_id.length; i++) {
      var market = !anySpot ? "instance held"
        : (w.spot[i] ? "instance held (spot)" : "instance held (on-demand)");
      var up = held[market] || (held[market] = { x: [], y: [] });
      up.x.push(w.launched_t[i], w.terminated_t[i], null);
      up.y.push(w.instance_id[i], w.instance_id[i], null);
    }
    var traces = Object.keys(held).sort().map(function (market) {
      return { type: "scatter", mode: "lines", name: market, x: held[market].x,
        y: held[market].y, hoverinfo: "skip",
        line: { color: market === "instance held (spot)" ? "#f0c987" : "#d0d7de", width: 3 } };
    });
    // Finished segments coloured by the rung they trained to; the others by their state.
    var groups = {};
    var s = t.segments;
    for (var j = 0; j < s.trial_id.length; j++) {
      var ok = s.state[j] === "done" || s.state[j] === "ended";
      var key = ok ? "to step " + s.stop_step[j] : s.state[j];
      var g = groups[key] || (groups[key] = { x: [], y: [], text: [],
                                               rung: ok ? s.stop_step[j] : null, state: s.state[j] });
      var label = s.trial_id[j] + " steps " + s.start_step[j] + "→" + s.stop_step[j] +
        " (" + s.state[j] + ")";
      g.x.push(s.start_t[j], s.end_t[j], null);
      g.y.push(s.instance_id[j], s.instance_id[j], null);
      g.text.push(label, label, null);
    }
    var rungKeys = Object.keys(groups).filter(function (k) { return groups[k].rung !== null; })
      .sort(function (a, b) { return groups[a].rung - groups[b].rung; });
    var otherKeys = Object.keys(groups)
      .filter(function (k) { return groups[k].rung === null; }).sort();
    rungKeys.concat(otherKeys).forEach(function (key) {
      var g = groups[key];
      var color = g.rung !== null ? RUNG_COLORS[rungKeys.indexOf(key) % RUNG_COLORS.length]
        : (STATE_COLORS[g.state] || "#888");
      traces.push({ type: "scatter", mode: "lines", name: key, x: g.x, y: g.y, text: g.text,
        line: { color: color, width: 8 },
        hovertemplate: "%{text}<br>%{x:.1f} s<extra></extra>" });
    });
    var pre = { x: [], y: [] };
    for (var k = 0; k < w.instance_id.length; k++) {
      if (w.preempted[k]) { pre.x.push(w.terminated_t[k]); pre.y.push(w.instance_id[k]); }
    }
    if (pre.x.length) {
      traces.push({ type: "scatter", mode: "markers", name: "instance preempted", x: pre.x,
        y: pre.y, marker: { symbol: "x", size: 10, color: "#9467bd" } });
    }
    var n = w.instance_id.length;
    var note = t.shown_workers < t.total_workers || t.shown_segments < t.total_segments
      ? [{ text: "showing " + t.shown_workers + " of " + t.total_workers + " workers, " +
           t.shown_segments + " of " + t.total_segments + " segments", showarrow: false,
           xref: "paper", yref: "paper", x: 1, y: 1.02, xanchor: "right", yanchor: "bottom",
           font: { size: 10 } }] : [];
    return draw(id, traces, layout("seconds since start", "", {
      height: Math.min(1200, Math.max(260, 13 * n + 90)), annotations: note,
      xaxis: { title: { text: "seconds since start" }, range: timeRange(t.end_t) },
      yaxis: { type: "category", categoryorder: "array", categoryarray: w.instance_id,
               autorange: "reversed", automargin: true, tickfont: { size: 9 } },
      margin: { l: 120, r: 20, t: 20, b: 45 }
    }));
  }

  // -- trials table --------------------------------------------------------------------------
  var table = { sort: "value", order: null, state: "", q: "", offset: 0, limit: 50, last: null };
  var staticRows = null;   // the report's embedded rows (sorted and filtered here)

  function tableQuery() {
    var p = new URLSearchParams({ sort: table.sort, offset: String(table.offset),
      limit: String(table.limit) });
    if (table.order) { p.set("order", table.order); }
    if (table.state) { p.set("state", table.state); }
    if (table.q) { p.set("q", table.q); }
    return p.toString();
  }

  function localPage(all) {
    var mode = all.mode;
    var rows = all.rows.filter(function (r) {
      if (table.state && r.state !== table.state) { return false; }
      if (table.q) {
        var hay = r.trial_id + " " + JSON.stringify(r.params);
        if (hay.indexOf(table.q) < 0) { return false; }
      }
      return true;
    });
    var key = table.sort;
    var order = table.order || (key === "value" ? (mode === "max" ? "desc" : "asc") : "asc");
    function get(r) { return key.indexOf("params.") === 0 ? r.params[key.slice(7)] : r[key]; }
    rows.sort(function (a, b) {
      var x = get(a), y = get(b);
      var xn = x === null || x === undefined, yn = y === null || y === undefined;
      if (xn !== yn) { return xn ? 1 : -1; }
      if (!xn && x !== y) {
        var c = x < y ? -1 : 1;
        return order === "desc" ? -c : c;
      }
      return a.number - b.number;
    });
    return Promise.resolve({ total: all.rows.length, matching: rows.length, offset: table.offset,
      limit: table.limit, sort: key, order: order, columns: all.columns,
      param_names: all.param_names, rows: rows.slice(table.offset, table.offset + table.limit) });
  }

  function loadTable() {
    var p = staticRows ? localPage(staticRows) : getJSON(cfg.api + "/trials?" + tableQuery());
    return p.then(renderTable);
  }

  function renderTable(page) {
    table.last = page;
    table.order = page.order;
    var el = $("trials-table");
    if (!el) { return; }
    var cols = [["trial_id", "trial"], ["state", "state"], ["last_step", "last step"],
                ["value", "value"], ["gpu_seconds", "GPU-s"], ["cost_usd", "cost (USD)"],
                ["bracket", "bracket"], ["failures", "failures"]];
    page.param_names.forEach(function (n) { cols.push(["params." + n, n]); });
    var head = "<tr>" + cols.map(function (c) {
      var arrow = c[0] === page.sort ? (page.order === "desc" ? " ▼" : " ▲") : "";
      return '<th data-sort="' + c[0] + '" title="sort by ' + c[1] + '">' + c[1] + arrow + "</th>";
    }).join("") + "</tr>";
    el.tHead.innerHTML = head;
    var body = el.tBodies[0];
    var html = [];
    page.rows.forEach(function (r) {
      var cells = cols.map(function (c) {
        var v = c[0].indexOf("params.") === 0 ? r.params[c[0].slice(7)] : r[c[0]];
        var text = c[0] === "cost_usd" ? usd(v) : (c[0] === "gpu_seconds" ? fmt(v, 2) : fmt(v));
        var cls = c[0] === "state" ? ' class="state-' + v + '"' : "";
        return "<td" + cls + ">" + escapeHtml(text) + "</td>";
      });
      html.push('<tr data-trial="' + escapeHtml(r.trial_id) + '">' + cells.join("") + "</tr>");
    });
    body.innerHTML = html.join("");
    var end = Math.min(page.offset + page.rows.length, page.matching);
    setText("trials-info", (page.matching ? page.offset + 1 : 0) + "–" + end + " of " +
      page.matching + (page.matching !== page.total ? " (" + page.total + " trials)" : ""));
    Array.prototype.forEach.call(el.tHead.querySelectorAll("th"), function (th) {
      th.addEventListener("click", function () {
        var key = th.getAttribute("data-sort");
        if (key === table.sort) {
          table.order = table.order === "desc" ? "asc" : "desc";
        } else {
          table.sort = key;
          table.order = null;
        }
        table.offset = 0;
        loadTable();
      });
    });
  }

  function escapeHtml(s) {
    return String(s).replace(/[&<>"']/g, function (c) {
      return { "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" }[c];
    });
  }

  function wireTable() {
    var st = $("trials-state"), q = $("trials-q"), prev = $("trials-prev"), next = $("trials-next");
    if (st) {
      st.addEventListener("change", function () {
        table.state = st.value;
        table.offset = 0;
        loadTable();
      });
    }
    var timer = null;
    if (q) {
      q.addEventListener("input", function () {
        clearTimeout(timer);
        timer = setTimeout(function () { table.q = q.value; table.offset = 0; loadTable(); }, 250);
      });
    }
    if (prev) { prev.addEventListener("click", function () {
      table.offset = Math.max(0, table.offset - table.limit); loadTable(); }); }
    if (next) { next.addEventListener("click", function () {
      if (table.last && table.offset + table.limit < table.last.matching) {
        table.offset += table.limit; loadTable();
      } }); }
  }

  // -- the experiment page -------------------------------------------------------------------
  function drawExperiment(b) {
    renderSummary(b.summary);
    var steps = [
      function () { return drawBest(b.best, "chart-best-cost", "accrued_usd",
        "USD accrued", b.best.cost_budget_usd, "cost budget", b.summary.end_t); },
      function () { return drawBest(b.best, "chart-best-time", "t_s", "seconds since start",
        b.best.time_budget_s, "time budget", b.summary.end_t); },
      function () { return drawSpend(b.spend, b.summary.end_t); },
      function () { return drawWorkers(b.workers); },
      function () { return drawCurves(b.curves); },
      function () { return drawTimeline(b.timeline); },
      function () { return drawParallel(b.parallel); }   // WebGL: last, the slowest to start
    ];
    var p = Promise.resolve();
    steps.forEach(function (f) { p = p.then(f); });
    return p.then(function () {
      E.version = b.summary.version;
      E.renders += 1;
      E.data = b;
      document.body.setAttribute("data-version", E.version);
      if (!E.ready) {
        E.ready = true;
        E.drawnAt = performance.now();
      }
    });
  }

  function experimentLive() {
    // The page's head asked for the data already; if that failed (say, a cookie refused),
    // ask again with the token from the URL.
    var first = (window.__elastuneFirst || Promise.reject(new Error("no prefetch")))
      .catch(function () { return getJSON(cfg.api + "/bundle"); });
    wireTable();
    first.then(function (b) {
      if (table.sort === "value" && !table.q && !table.state && table.offset === 0) {
        renderTable(b.trials);
      } else {
        loadTable();
      }
      return drawExperiment(b);
    }).then(poll, showError);

    var busy = false;
    function poll() {
      var live = E.data && E.data.summary.state === "running";
      setText("live", live ? "live" : "");
      var wait = (live ? cfg.poll_s : Math.max(cfg.poll_s, 10)) * 1000;
      setTimeout(function () {
        if (busy || document.hidden) { poll(); return; }
        busy = true;
        getJSON(cfg.api + "/version").then(function (v) {
          if (v.version === E.version) { return null; }
          return getJSON(cfg.api + "/bundle").then(function (b) {
            return drawExperiment(b).then(loadTable);
          });
        }).catch(showError).then(function () { busy = false; poll(); });
      }, wait);
    }
  }

  function experimentStatic() {
    var b = JSON.parse($("elastune-data").textContent);
    staticRows = b.trials_all;
    staticRows.mode = b.summary.mode;
    wireTable();
    loadTable();
    drawExperiment(b).catch(showError);
    setText("footer", "report written " + new Date(b.written_at * 1000).toISOString() +
      " from " + b.summary.dir);
  }

  function showError(err) {
    setText("live", "error: " + (err && err.message ? err.message : err));
    var el = $("live");
    if (el) { el.className = "live error"; }
    E.error = String(err);
  }

  // -- the index page ------------------------------------------------------------------------
  function indexLive() {
    var lastText = null;
    function load() {
      return getJSON("/api/experiments").then(function (d) {
        var text = JSON.stringify(d);
        if (text === lastText) { return null; }
        lastText = text;
        return drawIndex(d);
      });
    }
    function loop() {
      setTimeout(function () { load().catch(showError).then(loop); },
        Math.max(cfg.poll_s, 5) * 1000);
    }
    load().then(function () { E.ready = true; E.drawnAt = performance.now(); loop(); }, showError);
  }

  function drawIndex(d) {
    var tbody = $("experiments-table").tBodies[0];
    tbody.innerHTML = d.experiments.map(function (e) {
      var href = "/e/" + e.name.split("/").map(encodeURIComponent).join("/") +
        (token ? "?token=" + encodeURIComponent(token) : "");
      if (e.error) {
        return '<tr><td><a href="' + href + '">' + escapeHtml(e.name) + "</a></td>" +
          '<td colspan="12">' + escapeHtml(e.error) + "</td></tr>";
      }
      var t = e.trials;
      return '<tr data-name="' + escapeHtml(e.name) + '"><td><a href="' + href + '">' +
        escapeHtml(e.name) + "</a></td>" +
        ['<span class="badge state-' + e.state + '">' + e.state + "</span>", escapeHtml(e.metric),
         fmt(e.best_value), usd(e.spend_usd), usd(e.cost_budget_usd), t.total, t.completed,
         t.pruned, t.failed, t.running, t.paused, fmt(e.wall_s, 1)].map(function (c) {
          return "<td>" + c + "</td>"; }).join("") + "</tr>";
    }).join("");
    var byMetric = {};
    d.experiments.forEach(function (e) {
      if (e.error || e.best_value === null || e.best_value === undefined) { return; }
      var g = byMetric[e.metric] || (byMetric[e.metric] = { x: [], y: [], text: [] });
      g.x.push(e.spend_usd); g.y.push(e.best_value); g.text.push(e.name);
    });
    var traces = Object.keys(byMetric).map(function (m) {
      var g = byMetric[m];
      return { type: "scatter", mode: "markers+text", name: m, x: g.x, y: g.y, text: g.text,
        textposition: "top center", marker: { size: 10 },
        hovertemplate: "%{text}<br>%{x:$.6~f}: %{y:.4f}<extra>" + m + "</extra>" };
    });
    if (!traces.length) { return noData("chart-experiments", "no experiment with a score yet"); }
    var spends = d.experiments.filter(function (e) { return !e.error && e.spend_usd > 0; })
      .map(function (e) { return e.spend_usd; });
    var wide = spends.length > 1 && Math.max.apply(null, spends) / Math.min.apply(null, spends) > 100;
    // Linear: from $0 (autorange pads a lone point to either side, down to -$0.5).
    var most = spends.length ? Math.max.apply(null, spends) : 0;
    var axis = wide ? { type: "log" } : { type: "linear", range: [0, (most || 1) * 1.15] };
    return draw("chart-experiments", traces, layout("USD spent", "best score", {
      margin: { l: 60, r: 20, t: 30, b: 45 },
      xaxis: Object.assign({ title: { text: "USD spent" + (wide ? " (log)" : "") } },
        DOLLAR_AXIS, axis)
    }));
  }

  if (cfg.page === "index") {
    indexLive();
  } else if (cfg.mode === "static") {
    experimentStatic();
  } else {
    experimentLive();
  }
})();
