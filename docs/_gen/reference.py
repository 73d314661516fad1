"""Build-time pages (mkdocs-gen-files): the CLI reference from the command definitions and the
sweep.yaml reference from the pydantic models, each appended to its hand-written page; and a
check that the published JSON Schema (docs/sweep.schema.json) is current."""

from __future__ import annotations

import sys
from pathlib import Path

import mkdocs_gen_files

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
for path in (str(ROOT), str(HERE)):
    if path not in sys.path:
        sys.path.insert(0, path)

import cli_page  # noqa: E402
import sweep_schema  # noqa: E402

if sweep_schema.main(["--check"]) != 0:
    raise SystemExit(f"{sweep_schema.SCHEMA_PATH} is stale: run python docs/_gen/sweep_schema.py")

with mkdocs_gen_files.open("reference/cli.md", "a") as page:
    page.write("\n" + cli_page.cli_markdown() + "\n")

with mkdocs_gen_files.open("reference/sweep.md", "a") as page:
    page.write("\n" + sweep_schema.reference_markdown() + "\n")
