"""Make the small spot-capacity sample that ships with elastune (``spot_traces_sample/``).

    python tuner/sim/data/make_spot_sample.py --traces ../shared/data/spot_traces

Same files and columns as the source folder, so ``tuner.sim.load_spot_traces`` reads the sample
unchanged; only rows are dropped, no value is changed. The rule is fixed: the zones with the
lowest, the median and the highest ``availability_fraction`` in ``traces.csv``, and their first
``DAYS`` days of rounds. The source's LICENSE and NOTICE (Apache-2.0) are copied verbatim.
"""

from __future__ import annotations

import argparse
import shutil
from pathlib import Path

import pandas as pd

DAYS = 3
GZIP = {"method": "gzip", "mtime": 0}  # fixed header time: same bytes on every run
OUT = Path(__file__).resolve().parent / "spot_traces_sample"

README = """# spot_traces_sample: 3 zones x {days} days of measured GPU spot capacity (GCP, 1xH100)

A small derived sample of `../shared/data/spot_traces` (itself derived from the artifact of
*SkyNomad: On Using Multi-Region Spot Instances to Minimize AI Batch Job Cost*, NSDI '27,
github `andylizf/skynomad-artifact`, commit `62b9aaa1942e30c40cb9f6f5d7d03d6823d1d1f7`,
`data/h100_16_runs/`), so the simulator's trace replay, its tests and the spot benchmark run
without the shared data. Every 10 minutes a prober asked each zone for 16 spot `a3-highgpu-1g`
VMs and logged how many launched (`n_launched`).

**Licence: Apache License 2.0.** `LICENSE` and `NOTICE` are the source's, copied verbatim.
**Change notice (section 4(b)):** `availability.csv.gz` and `traces.csv` are modified, derived
files: the rows of zones {zones} only, and their first {days} days of rounds (`t_s` <
{limit}); the per-zone summary columns of `traces.csv` are the full trace's. Made by
`tuner/sim/data/make_spot_sample.py`.
"""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--traces", type=Path, required=True)
    args = ap.parse_args()
    summary = pd.read_csv(args.traces / "traces.csv").sort_values(
        ["availability_fraction", "zone"]).reset_index(drop=True)
    picks = summary.iloc[[0, len(summary) // 2, len(summary) - 1]]
    zones = list(picks["zone"])
    limit = DAYS * 86400
    rows = pd.read_csv(args.traces / "availability.csv.gz")
    rows = rows[rows["region_or_zone"].isin(zones) & (rows["t_s"] < limit)]
    OUT.mkdir(parents=True, exist_ok=True)
    rows.to_csv(OUT / "availability.csv.gz", index=False, compression=GZIP)
    picks.sort_values("zone").to_csv(OUT / "traces.csv", index=False)
    for name in ("LICENSE", "NOTICE"):
        shutil.copyfile(args.traces / name, OUT / name)
    (OUT / "README.md").write_text(README.format(days=DAYS, zones=", ".join(zones),
                                                 limit=limit))


if __name__ == "__main__":
    main()
