"""``write_report``: one self-contained HTML file with the dashboard's charts, for sharing and CI.

plotly.js is inlined and the data embedded as JSON, so the file opens offline, from an e-mail
or a CI artifact, with no server. It draws the same charts as the live page from the same
payloads (:func:`tuner.dashboard._data.bundle`); the trials table sorts and filters in the page.
"""

from __future__ import annotations

import time
from pathlib import Path

from tuner._errors import ConfigError
from tuner._store import STORE_NAME, Store
from tuner.dashboard import _data
from tuner.dashboard._pages import experiment_page

# Rows of the trials table embedded in a report (sorted and filtered in the page).
REPORT_TRIALS = 20000


def write_report(experiment_dir: str | Path, out_path: str | Path) -> Path:
    """Write the experiment in ``experiment_dir`` as one HTML file at ``out_path``; returns it.

    Raises :class:`~tuner.ConfigError` (field ``DIR``) when ``experiment_dir`` holds no
    experiment.
    """
    experiment_dir = Path(experiment_dir)
    if not (experiment_dir / STORE_NAME).is_file():
        raise ConfigError("DIR", f"{experiment_dir} holds no experiment ({STORE_NAME} not found)")
    out = Path(out_path)
    store = Store(experiment_dir, readonly=True)
    try:
        data = _data.bundle(store, experiment_dir)
        everything = _data.trials_page(store, limit=REPORT_TRIALS, max_limit=REPORT_TRIALS)
        data["trials_all"] = {"rows": everything["rows"], "columns": everything["columns"],
                              "param_names": everything["param_names"],
                              "total": everything["total"]}
        data["written_at"] = time.time()
        name = data["summary"]["name"]
    finally:
        store.close()
    page = experiment_page(f"{name} ({data['summary']['experiment']})",
                           {"page": "experiment", "mode": "static"}, inline=True, data=data)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(out.name + ".tmp")
    tmp.write_text(page, encoding="utf-8")
    tmp.replace(out)
    return out
