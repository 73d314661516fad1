"""The notebooks in ``notebooks/`` run top to bottom and show real numbers.

Each notebook is read into memory and executed there with nbclient (kernel ``python3``, the
repository root as working directory), so the committed files are never written. They are
committed without outputs; a test checks that too.
"""

from __future__ import annotations

import ast
import hashlib
import json
import math
import re
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = ROOT / "notebooks"
QUICKSTART = NOTEBOOKS / "quickstart.ipynb"
PLANNING = NOTEBOOKS / "planning.ipynb"
CELL_TIMEOUT_S = 120
_ANSI = re.compile(r"\x1b\[[0-9;]*m")


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _run(path: Path, *, parameters: str | None = None, append: str | None = None
         ) -> nbformat.NotebookNode:
    """Execute an in-memory copy of ``path``; fail with the first error's traceback.

    ``parameters`` replaces the source of the cell tagged ``parameters``; ``append`` is run
    as a last cell even when an earlier cell failed (errors are collected, not raised, so
    that it can clean up).
    """
    before = _digest(path)
    nb = nbformat.read(path, as_version=4)
    if parameters is not None:
        cells = [c for c in nb.cells if "parameters" in c.metadata.get("tags", [])]
        assert len(cells) == 1, f"{path.name}: expected one cell tagged 'parameters'"
        cells[0].source = parameters
    if append is not None:
        nb.cells.append(nbformat.v4.new_code_cell(append))
    NotebookClient(nb, timeout=CELL_TIMEOUT_S, kernel_name="python3", allow_errors=True,
                   resources={"metadata": {"path": str(ROOT)}}).execute()
    assert _digest(path) == before, f"running {path.name} changed the file"
    for i, cell in enumerate(nb.cells):
        for out in cell.get("outputs", []):
            if out["output_type"] == "error":
                trace = _ANSI.sub("", "\n".join(out.get("traceback", [])))
                pytest.fail(f"{path.name}: cell {i} raised {out['ename']}: {out['evalue']}\n"
                            f"{cell.source}\n{trace}")
    return nb


def _tagged(nb: nbformat.NotebookNode, tag: str) -> nbformat.NotebookNode:
    cells = [c for c in nb.cells if tag in c.metadata.get("tags", [])]
    assert len(cells) == 1, f"expected one cell tagged {tag!r}, found {len(cells)}"
    return cells[0]


def _text(cell: nbformat.NotebookNode) -> str:
    """What a cell printed and returned, as text."""
    parts = []
    for out in cell.outputs:
        if out["output_type"] == "stream":
            parts.append(out["text"])
        elif "data" in out and "text/plain" in out["data"]:
            parts.append(out["data"]["text/plain"])
    return "".join(parts)


def _figures(nb: nbformat.NotebookNode) -> list[dict]:
    return [out["data"]["application/vnd.plotly.v1+json"]
            for cell in nb.cells for out in cell.get("outputs", [])
            if "application/vnd.plotly.v1+json" in out.get("data", {})]


def _finite(x: object) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


@pytest.mark.parametrize("path", [QUICKSTART, PLANNING], ids=lambda p: p.stem)
def test_committed_without_outputs(path):
    nb = nbformat.read(path, as_version=4)
    nbformat.validate(nb)
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert code, f"{path.name} has no code cells"
    for cell in code:
        assert cell.outputs == [] and cell.execution_count is None, (
            f"{path.name} is committed with outputs; clear them before saving:\n{cell.source}")


def test_quickstart_notebook():
    # The sweep writes under a temporary directory the notebook made; remove it afterwards.
    nb = _run(QUICKSTART, append="import shutil\nshutil.rmtree(work_dir, ignore_errors=True)")
    summary = ast.literal_eval(_text(_tagged(nb, "summary")))
    assert summary["state"] == "finished"
    assert summary["trials"] == 27
    assert _finite(summary["best_value"]) and 0 < summary["best_value"] <= 1
    assert _finite(summary["spend_usd"]) and 0 < summary["spend_usd"] <= 1.0
    states = _text(_tagged(nb, "states"))
    assert "pruned" in states and "completed" in states
    assert len(_figures(nb)) == 2   # best so far (vs USD and vs time), learning curves


def _check_planning(nb: nbformat.NotebookNode) -> dict:
    preview = _text(_tagged(nb, "preview"))
    assert "feasible:        True" in preview
    cost = float(re.search(r"predicted cost:\s+([0-9.]+) USD", preview).group(1))
    assert 0 < cost <= 10.0
    summary = json.loads(_text(_tagged(nb, "summary")))
    for run in ("elastic", "static"):
        for key in ("cost_usd", "wall_s", "best_value"):
            assert _finite(summary[run][key]), (run, key, summary[run][key])
        assert summary[run]["cost_usd"] > 0
    assert _finite(summary["elastic"]["predicted_cost_usd"])
    assert summary["static"]["on_time"] is True   # the smallest cluster that is on time
    assert summary["static"]["wall_s"] <= summary["deadline_s"]
    table = _text(_tagged(nb, "comparison"))
    assert f"static {summary['static_workers']} workers" in table
    row = next(line for line in table.splitlines() if line.startswith("elastic plan"))
    shown_cost = float(row.split()[2])   # the first column: cost_usd
    assert shown_cost == pytest.approx(summary["elastic"]["cost_usd"], abs=1e-3)
    assert len(_figures(nb)) == 3   # planned workers; planned vs actual; best vs spend
    return summary


def test_planning_notebook():
    summary = _check_planning(_run(PLANNING))
    shared = ROOT.parent / "shared" / "data"
    expected = shared if shared.is_dir() else ROOT / "tuner" / "sim" / "data" / "curves_sample"
    assert Path(summary["data_dir"]).resolve() == expected.resolve()


def test_planning_notebook_on_the_shipped_sample():
    """What a fresh clone without ``../shared/data`` runs."""
    if not (ROOT.parent / "shared" / "data").is_dir():
        pytest.skip("no ../shared/data: test_planning_notebook already ran on the sample")
    summary = _check_planning(_run(PLANNING, parameters=(
        "from tuner.sim import SAMPLE_DIR\nDATA_DIR = SAMPLE_DIR")))
    assert "curves_sample" in summary["data_dir"]
