"""Packaging: the wheel installs the four packages, typed, with the cloud SDKs and the
dashboard as extras; a missing extra is a clear exit-2 error naming the pip install."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from tests.tuner.test_cli import GOOD
from tuner.cli import main

ROOT = Path(__file__).resolve().parents[1]

AWS = GOOD.replace("provider: {type: local, workers: 2}",
                   "provider: {type: aws, region: us-east-1, instance_types: [g5.xlarge], "
                   "storage: 's3://bucket/x'}")
GCP = GOOD.replace("provider: {type: local, workers: 2}",
                   "provider: {type: gcp, zone: us-central1-a, machine_types: [g2-standard-4], "
                   "storage: 'gs://bucket/x'}")


@pytest.mark.parametrize(("text", "blocked", "extra"), [
    (AWS, "boto3", "aws"), (GCP, "google.cloud.compute_v1", "gcp")])
def test_a_cloud_sweep_without_its_extra_exits_2_naming_the_pip_install(
        text, blocked, extra, tmp_path, capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, blocked, None)       # as if it were not installed
    sweep = tmp_path / "sweep.yaml"
    sweep.write_text(text)
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(ROOT))
    assert main(["run", str(sweep)]) == 2
    err = capsys.readouterr().err
    assert "provider.type" in err and f"pip install 'elastune[{extra}]'" in err, err
    assert not (tmp_path / "experiments").exists()


def test_the_dashboard_and_the_report_without_their_extra_exit_2(tmp_path, capsys,
                                                                 monkeypatch):
    monkeypatch.setitem(sys.modules, "plotly", None)
    assert main(["report", str(tmp_path)]) == 2
    assert "pip install 'elastune[dashboard]'" in capsys.readouterr().err
    assert main(["dashboard", str(tmp_path)]) == 2
    assert "pip install 'elastune[dashboard]'" in capsys.readouterr().err


@pytest.mark.slow
def test_the_wheel_holds_the_four_packages_typed_and_the_sdks_only_as_extras(tmp_path):
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w",
                    str(tmp_path), str(ROOT)], check=True, capture_output=True, timeout=300)
    (wheel,) = tmp_path.glob("elastune-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    top = {n.split("/")[0] for n in names if not n.split("/")[0].endswith(".dist-info")}
    assert top == {"tuner", "cloud", "budgets", "worker"}
    assert {f"{p}/py.typed" for p in top} <= set(names)
    assert {"tuner/__init__.pyi", "worker/__init__.pyi",
            "tuner/integrations/__init__.pyi"} <= set(names)
    meta = zipfile.ZipFile(wheel).read(next(n for n in names if n.endswith("/METADATA")))
    core = [line.split(":", 1)[1].strip() for line in meta.decode().splitlines()
            if line.startswith("Requires-Dist:") and "extra ==" not in line]
    for name in ("boto3", "google-cloud", "fastapi", "uvicorn", "plotly", "pytest", "torch",
                 "lightning", "transformers", "accelerate", "xgboost", "lightgbm"):
        assert not any(req.startswith(name) for req in core), (name, core)
