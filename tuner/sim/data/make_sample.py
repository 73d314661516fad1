"""Make the small learning-curve sample that ships with elastune (``curves_sample/``).

    python tuner/sim/data/make_sample.py --data ../shared/data

It writes the same files and columns as the sources, so ``tuner.sim.discover`` and
``load_curves`` read the sample unchanged; only rows are dropped, no value is changed. The
selection is deterministic (fixed seeds), so re-running it reproduces the sample byte for byte.

- ``opda_imagenet``: 48 configurations, all their epochs: 6 drawn among the diverged runs (2 of
  them among the runs that logged no epoch), 42 among the others, with ``numpy.random.
  default_rng(0)``.
- ``yahpo_lcbench_surrogate``: 48 configurations drawn with ``default_rng(0)``, all 52 epochs, on
  2 tasks: the ones with the lowest and the highest median final ``time_s``.
"""

from __future__ import annotations

import argparse
import shutil
from pathlib import Path

import numpy as np
import pandas as pd

SEED = 0
N_CONFIGS = 48
N_DIVERGED = 6
N_DIVERGED_EMPTY = 2
GZIP = {"method": "gzip", "mtime": 0}  # fixed header time: same bytes on every run

OPDA_README = """\
# opda_imagenet sample: AlexNet on ImageNet, {n} of {total} configurations (real, per epoch)

A small subset of `../shared/data/opda_imagenet`, shipped so that elastune's tests and examples
run on a fresh clone. Same files and columns as the original; see its README for the columns.

## Source
- Derived from `../shared/data/opda_imagenet`, which converts the OPDA project's
  `data/alexnet/alexnet_tuning.results.jsonl` (git blob `ba4679bc52e6e767c8045b3b20829cc309380509`)
  from https://github.com/nicholaslourie/opda at commit `9529a34b7715e0b32920f630c1f7f7ff6f891060`.
- Made by `tuner/sim/data/make_sample.py --data ../shared/data`.

## Licence
**CC BY-SA 4.0**: "AlexNet Hyperparameter Tuning Data © 2025 by Nicholas Lourie"
(http://creativecommons.org/licenses/by-sa/4.0/; see `LICENSE`). This sample is under the same
licence.

**Changes made (as CC BY-SA asks us to state):** those of `../shared/data/opda_imagenet`
(converted JSONL to CSV; made `epoch` 1-based; added `epoch_time_s` and the per-config summary
columns; rounded metrics to 6 decimals and times to 3 decimals), and then: **subset of {n}
configurations chosen by a seeded random draw** (`numpy.random.default_rng({seed})`): {n_div}
among the {total_div} diverged runs ({n_empty} of them among the {total_empty} that logged no
epoch), {n_rest} among the {total_rest} others, with all their epochs. No value was changed.

## Citation

    @misc{{lourie2023work,
      title={{Show Your Work with Confidence: Confidence Bands for Tuning Curves}},
      author={{Nicholas Lourie and Kyunghyun Cho and He He}}, year={{2023}},
      eprint={{2311.09480}}, archivePrefix={{arXiv}}, primaryClass={{cs.CL}}}}

## Contents
- `configs.csv`: {n} rows ({n_div} with `diverged=1`), config ids: {ids}.
- `curves.csv.gz`: {rows} rows (task, config, epoch).
"""

YAHPO_README = """\
# yahpo_lcbench_surrogate sample: {n} configurations x {n_tasks} tasks (SURROGATE, not measured)

A small subset of `../shared/data/yahpo_lcbench_surrogate`, shipped so that elastune's tests and
examples run on a fresh clone. Same files and columns as the original; see its README for the
columns. **These numbers are predictions of YAHPO Gym's LCBench surrogate, not measurements.**
`val_accuracy` is in percent (0-100); `time_s` is cumulative predicted seconds.

## Source
- Derived from `../shared/data/yahpo_lcbench_surrogate`, generated with the YAHPO Gym LCBench
  surrogate from https://github.com/slds-lmu/yahpo_data at commit
  `efdab9072f63bd680396cd4b78b927c4a0caaad3` (`VERSION` 1.0.2, `lcbench/model.onnx` blob
  `17197991132cc22ab51ced2b6b6af80f2a6c8ba8`), PyPI `yahpo-gym==1.0.2`, onnxruntime 1.32.0.
- Made by `tuner/sim/data/make_sample.py --data ../shared/data`.

## Licence
**Apache-2.0** (LCBench data and YAHPO surrogate metadata), "Copyright [2025] [Florian Pfisterer,
Lennart Schneider]"; see `LICENSE`. Changes: rows dropped as described below; no value changed.

## Citation

    Pfisterer, F., Schneider, L., Moosbauer, J., Binder, M., Bischl, B. YAHPO Gym - An Efficient
    Multi-Objective Multi-Fidelity Benchmark for Hyperparameter Optimization. AutoML Conf 2022.
    Zimmer, L., Lindauer, M., Hutter, F. Auto-PyTorch Tabular: Multi-Fidelity MetaLearning for
    Efficient and Robust AutoDL. IEEE TPAMI 43(9), 2021. (LCBench; doi:10.6084/m9.figshare.11662422)

## Selection
- Configurations: {n} of {total} drawn with `numpy.random.default_rng({seed})`: {ids}.
- Tasks (`openml_task_id`): the ones with the lowest and the highest median final `time_s` over
  all configurations in the source: {tasks}.
- Every epoch (1..{max_epoch}) of each kept (task, configuration).
- `curves.csv.gz`: {rows} rows.
"""


def _pick(ids: np.ndarray, k: int, rng: np.random.Generator) -> list[int]:
    return sorted(rng.choice(np.sort(ids), size=min(k, len(ids)), replace=False).tolist())


def _ids(configs: pd.DataFrame, mask: pd.Series) -> np.ndarray:
    return configs.loc[mask, "config_id"].to_numpy()


def _write(src: Path, out: Path, configs: pd.DataFrame, curves: pd.DataFrame, readme: str) -> None:
    out.mkdir(parents=True, exist_ok=True)
    configs.to_csv(out / "configs.csv", index=False)
    curves.to_csv(out / "curves.csv.gz", index=False, compression=GZIP)
    shutil.copyfile(src / "LICENSE", out / "LICENSE")
    (out / "README.md").write_text(readme)


def opda(src: Path, out: Path) -> None:
    configs = pd.read_csv(src / "configs.csv")
    curves = pd.read_csv(src / "curves.csv.gz")
    rng = np.random.default_rng(SEED)
    div = configs["diverged"] == 1
    empty = div & (configs["epochs_recorded"] == 0)
    rest = N_CONFIGS - N_DIVERGED
    # one draw per task, so a source with several tasks keeps each of them
    keep = []
    for task in sorted(configs["task"].unique()):
        here = configs["task"] == task
        keep += [(task, c) for c in
                 _pick(_ids(configs, here & empty), N_DIVERGED_EMPTY, rng)
                 + _pick(_ids(configs, here & div & ~empty), N_DIVERGED - N_DIVERGED_EMPTY, rng)
                 + _pick(_ids(configs, here & ~div), rest, rng)]
    key = pd.MultiIndex.from_tuples(keep, names=["task", "config_id"])
    c = configs[pd.MultiIndex.from_frame(configs[["task", "config_id"]]).isin(key)]
    k = curves[pd.MultiIndex.from_frame(curves[["task", "config_id"]]).isin(key)]
    readme = OPDA_README.format(
        n=len(c), total=len(configs), seed=SEED, n_div=int(c["diverged"].sum()),
        total_div=int(div.sum()), n_empty=int((c["epochs_recorded"] == 0).sum()),
        total_empty=int(empty.sum()), n_rest=int((c["diverged"] == 0).sum()),
        total_rest=int((~div).sum()), ids=", ".join(map(str, c["config_id"])), rows=len(k))
    _write(src, out, c, k, readme)


def yahpo(src: Path, out: Path) -> None:
    configs = pd.read_csv(src / "configs.csv")
    curves = pd.read_csv(src / "curves.csv.gz")
    rng = np.random.default_rng(SEED)
    ids = _pick(configs["config_id"].to_numpy(), N_CONFIGS, rng)
    final = curves.loc[curves.groupby(["openml_task_id", "config_id"])["epoch"].idxmax()]
    median = final.groupby("openml_task_id")["time_s"].median().sort_values(kind="stable")
    tasks = [median.index[0], median.index[-1]]
    c = configs[configs["config_id"].isin(ids)]
    k = curves[curves["config_id"].isin(ids) & curves["openml_task_id"].isin(tasks)]
    readme = YAHPO_README.format(
        n=len(c), total=len(configs), n_tasks=len(tasks), seed=SEED,
        ids=", ".join(map(str, c["config_id"])),
        tasks=", ".join(f"{t} (median final time_s {median[t]:.0f} s)" for t in tasks),
        max_epoch=int(k["epoch"].max()), rows=len(k))
    _write(src, out, c, k, readme)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, required=True, help="the shared data directory")
    parser.add_argument("--out", type=Path,
                        default=Path(__file__).resolve().parent / "curves_sample")
    parser.add_argument("--opda", default="opda_imagenet", help="folder of the OPDA ImageNet set")
    parser.add_argument("--yahpo", default="yahpo_lcbench_surrogate",
                        help="folder of the YAHPO LCBench set")
    args = parser.parse_args()
    opda(args.data / args.opda, args.out / "opda_imagenet")
    yahpo(args.data / args.yahpo, args.out / "yahpo_lcbench_surrogate")
    total = sum(p.stat().st_size for p in args.out.rglob("*") if p.is_file())
    print(f"wrote {args.out} ({total / 1024:.0f} KiB)")


if __name__ == "__main__":
    main()
