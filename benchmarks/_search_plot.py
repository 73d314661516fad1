"""The search benchmark's plot: normalized regret (IQM over tasks, 95 % bootstrap interval)
against dollars, as fractions of a full ASHA sweep's cost, one line per method.

matplotlib is imported here only (the ``search-bench`` extra installs it), so the benchmark
runs without it unless ``--plot`` is asked for.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from benchmarks._search_summary import KEYS


def plot(table: dict[str, dict[str, dict[str, Any]]], path: Path, title: str) -> None:
    """Write the plot of ``table`` (``method_table``'s) to ``path`` (PNG)."""
    try:
        import matplotlib
    except ImportError as exc:
        raise RuntimeError("--plot needs matplotlib: pip install -e '.[search-bench]'") from exc
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 5))
    xs = [float(k) for k in KEYS]
    spread = len(table) - 1
    for i, (method, by) in enumerate(table.items()):
        # each method's points a little apart (log axis), so the intervals stay readable
        dodge = 2.0 ** (0.04 * (i - spread / 2))
        pts = [(x * dodge, by[k]) for x, k in zip(xs, KEYS, strict=True)
               if by[k]["iqm"] is not None]
        if not pts:
            continue
        x = [p[0] for p in pts]
        y = [p[1]["iqm"] for p in pts]
        lo = [p[1]["iqm"] - p[1]["ci_low"] for p in pts]
        hi = [p[1]["ci_high"] - p[1]["iqm"] for p in pts]
        style = "-" if method.startswith("elastune") else "--"
        ax.errorbar(x, y, yerr=[lo, hi], fmt=style + "o", capsize=3, label=method,
                    linewidth=2.5 if method == "elastune" else 1.2)
    ax.set_xscale("log", base=2)
    ax.set_xticks(xs, [f"{x:g}" for x in xs])
    ax.set_xlabel("dollars (fraction of a full ASHA sweep's cost on the task)")
    ax.set_ylabel("normalized regret (IQM over tasks, 95 % CI)")
    ax.set_title(title)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
