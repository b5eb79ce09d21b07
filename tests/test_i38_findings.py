"""A Kineto trace's own findings and the converter's are both kept in its manifest entry."""

from __future__ import annotations

import json

import prof_engine
from conftest import write_trace, x


def test_clock_anchor_is_kept_beside_the_converters_findings(tmp_path):
    """baseTimeNanoseconds (clock_anchor) and an unknown category (unknown_categories) in one file:
    the manifest keeps both (a plain dict merge once dropped the first)."""
    events = [x("aten::mm", 0, 10, cat="cpu_op"), x("mystery", 20, 5, cat="not_a_kineto_category")]
    trace = write_trace(tmp_path / "t.json", events, baseTimeNanoseconds=1_700_000_000_000_000_000)
    run = prof_engine.import_trace([trace], tmp_path / "run")
    info = json.loads((run / "manifest.json").read_text())["sources"][0]["info"]
    assert {f["rule"] for f in info["findings"]} >= {"clock_anchor", "unknown_categories"}
