"""`manifest.json`: what a run is (sources, ranks, devices, steps, lanes, row counts, schema version)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from prof_engine.errors import RunError
from prof_engine.schema import schema_version

MANIFEST = "manifest.json"


def read_manifest(run: Path) -> dict[str, Any]:
    """The manifest of run directory `run`, checked for a schema version this build reads."""
    path = run / MANIFEST
    if not run.is_dir():
        raise RunError(f"{run}: no such run directory (create one with `prof-engine import TRACE -o {run}`)")
    if not path.is_file():
        raise RunError(f"{run}: not a prof-engine run (no {MANIFEST})")
    try:
        manifest = json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise RunError(f"{path}: corrupt manifest ({e})") from None
    version = str(manifest.get("schema_version", ""))
    if version.split(".")[0] != schema_version().split(".")[0]:
        raise RunError(
            f"{run}: schema version {version or '?'} is not readable by this prof-engine "
            f"(reads {schema_version()}); re-import the source"
        )
    return manifest
