"""The dashboard's HTML: two small page skeletons that ``static/dashboard.js`` fills with charts.

The same experiment page serves the live dashboard (scripts and data from the server) and the
one-file report (scripts inlined, data embedded). Plain templates (no template engine): the pages
hold no logic, only element ids the script and the tests rely on.
"""

from __future__ import annotations

import html
import json
from importlib import resources
from pathlib import Path
from typing import Any

# Chart divs, by id (stable: tests and users' scripts find charts by these).
CHART_IDS = ("chart-best-cost", "chart-best-time", "chart-spend", "chart-workers",
             "chart-curves", "chart-parcoords", "chart-timeline")
_CAPTIONS = {
    "chart-best-cost": "Best score vs dollars spent",
    "chart-best-time": "Best score vs time",
    "chart-spend": "Spend vs budget (with the ledger's forecast)",
    "chart-workers": "Planned vs actual workers",
    "chart-curves": "Learning curves (best trials and a sample), by state; dotted: rungs",
    "chart-parcoords": "Parameters vs score",
    "chart-timeline": "Segments per worker",
}
_WIDE = {"chart-curves", "chart-parcoords", "chart-timeline"}


def static_text(name: str) -> str:
    """A file of ``tuner/dashboard/static`` (the page's script and style sheet)."""
    return (resources.files("tuner.dashboard") / "static" / name).read_text(encoding="utf-8")


def plotly_js_path() -> Path:
    """plotly.js as shipped inside the ``plotly`` Python package (no CDN: works offline)."""
    path = Path(str(resources.files("plotly") / "package_data" / "plotly.min.js"))
    if not path.is_file():
        raise RuntimeError(f"plotly.js not found at {path}; reinstall the 'plotly' package")
    return path


def _json_script(element_id: str, data: Any) -> str:
    # "<" escaped inside JSON strings, so no "</script>" can end the element early.
    text = json.dumps(data, separators=(",", ":"), allow_nan=False).replace("<", "\\u003c")
    return f'<script id="{element_id}" type="application/json">{text}</script>'


def _inline_script(code: str) -> str:
    return "<script>" + code.replace("</script", "<\\/script") + "</script>"


def _head(title: str, config: dict[str, Any], *, inline: bool, extra: str = "") -> str:
    if inline:
        style = f"<style>{static_text('dashboard.css')}</style>"
        plotly = _inline_script(plotly_js_path().read_text(encoding="utf-8"))
    else:
        style = '<link rel="stylesheet" href="/static/dashboard.css">'
        plotly = '<script src="/static/plotly.min.js"></script>'
    return (
        '<!doctype html>\n<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        '<link rel="icon" href="data:,">'
        f"<title>{html.escape(title)} · elastune</title>{style}"
        f"{_json_script('elastune-config', config)}{extra}{plotly}</head>"
    )


def _script(inline: bool) -> str:
    if inline:
        return _inline_script(static_text("dashboard.js"))
    return '<script src="/static/dashboard.js"></script>'


def experiment_page(name: str, config: dict[str, Any], *, inline: bool = False,
                    data: dict[str, Any] | None = None) -> str:
    """The experiment page. ``config``: ``{"mode": "live" | "static", "api": ..., ...}``;
    ``data``: the embedded bundle (static mode)."""
    extra = ""
    if data is not None:
        extra = _json_script("elastune-data", data)
    elif config.get("api"):
        # Ask for the data while plotly.js is still being parsed.
        extra = _inline_script(
            "window.__elastuneFirst = fetch(" + json.dumps(config["api"] + "/bundle") +
            ", {credentials: 'same-origin', cache: 'no-store'})"
            ".then(function (r) { if (!r.ok) throw new Error(r.status); return r.json(); });")
    figures = "".join(
        f'<figure class="{"wide" if cid in _WIDE else ""}"><figcaption>{_CAPTIONS[cid]}'
        f'</figcaption><div id="{cid}" class="chart"></div></figure>' for cid in CHART_IDS)
    back = "" if config.get("mode") == "static" else '<a href="/" id="nav-index">experiments</a> / '
    body = f"""<body class="experiment">
<header><div class="crumbs">{back}<h1 id="exp-title">{html.escape(name)}</h1>
<span id="summary-state" class="badge"></span><span id="live" class="live"></span></div>
<div id="exp-meta" class="meta"></div></header>
<section class="cards">
<div class="card"><div class="label">best</div><div id="summary-best" class="big">–</div>
<div id="summary-best-detail" class="small"></div></div>
<div class="card"><div class="label">spend</div><div id="summary-spend" class="big">–</div>
<div id="summary-spend-detail" class="small"></div></div>
<div class="card"><div class="label">trials</div><div id="summary-trials" class="big">–</div>
<div id="summary-trials-detail" class="small"></div></div>
<div class="card"><div class="label">wall time</div><div id="summary-wall" class="big">–</div>
<div id="summary-wall-detail" class="small"></div></div>
</section>
<main class="grid">{figures}</main>
<section id="trials" class="trials"><h2>Trials</h2>
<div class="controls"><label>state <select id="trials-state"><option value="">all</option>
<option>completed</option><option>pruned</option><option>running</option><option>paused</option>
<option>stopped</option><option>failed</option></select></label>
<label>search <input id="trials-q" type="search" placeholder="trial id or parameter"></label>
<button id="trials-prev" type="button">&larr; prev</button>
<span id="trials-info"></span>
<button id="trials-next" type="button">next &rarr;</button></div>
<div class="table-wrap"><table id="trials-table"><thead></thead><tbody></tbody></table></div>
</section>
<footer id="footer" class="small"></footer>
{_script(inline)}
</body></html>
"""
    return _head(name, config, inline=inline, extra=extra) + body


def index_page(root: str, config: dict[str, Any]) -> str:
    """The experiments index: a table of every experiment under the root and an accuracy vs
    cost scatter across them."""
    body = f"""<body class="index">
<header><div class="crumbs"><h1>elastune experiments</h1><span id="live" class="live"></span>
</div><div class="meta" id="root">{html.escape(root)}</div></header>
<main class="grid"><figure class="wide"><figcaption>Best score vs spend, per experiment
</figcaption><div id="chart-experiments" class="chart"></div></figure></main>
<section class="trials"><div class="table-wrap"><table id="experiments-table"><thead><tr>
<th>experiment</th><th>state</th><th>metric</th><th>best</th><th>spend (USD)</th>
<th>budget (USD)</th><th>trials</th><th>completed</th><th>pruned</th><th>failed</th>
<th>running</th><th>paused</th><th>wall (s)</th></tr></thead><tbody></tbody></table></div></section>
{_script(False)}
</body></html>
"""
    return _head("experiments", config, inline=False) + body
