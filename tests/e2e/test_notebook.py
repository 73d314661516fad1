"""A trainable defined in a notebook cell reaches the workers (as a code bundle, not a message),
and the sweep's live status shows in the cell's output, refreshed in place."""

from __future__ import annotations

from pathlib import Path

import nbformat
from nbclient import NotebookClient

ROOT = Path(__file__).resolve().parents[2]


def test_tune_from_a_notebook(tmp_path):
    exp = tmp_path / "exp"
    nb = nbformat.v4.new_notebook()
    nb.cells = [
        nbformat.v4.new_code_cell(
            "from tuner import tune, uniform\n"
            "def train(params, ctx):\n"
            "    state = ctx.restore() or 0\n"
            "    for step in ctx.steps():\n"
            "        state += 1\n"
            "        ctx.report(step, score=params['x'] * state)\n"
            "    ctx.checkpoint(state)\n"),
        nbformat.v4.new_code_cell(
            "result = tune({'trainable': train, 'metric': 'score', 'space': {'x': uniform(0, 1)},\n"
            "               'scheduler': {'type': 'asha', 'max_resource': 9},\n"
            "               'num_trials': 6, 'provider': {'type': 'local', 'workers': 2}},\n"
            f"              time_budget='2m', cost_budget=1.0, experiment_dir={str(exp)!r})\n"
            "print(result.state, len(result.trials), result.best_value is not None)\n"),
    ]
    NotebookClient(nb, timeout=180, kernel_name="python3",
                   resources={"metadata": {"path": str(ROOT)}}).execute()
    outputs = nb.cells[1].outputs
    printed = "".join(o["text"] for o in outputs if o["output_type"] == "stream")
    assert printed.split() == ["finished", "6", "True"]
    assert (exp / "code" / "trainable.pkl").exists()
    # verbose unset in a notebook: the status, one output updated in place to the end
    (status,) = [o for o in outputs if o["output_type"] == "display_data"]
    html = status["data"]["text/html"]
    assert "6 started" in html and "best score" in html and "USD" in html
