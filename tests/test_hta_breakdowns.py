"""step_trace against Holistic Trace Analysis' own breakdowns of its 2-rank sample: the compute
time of get_temporal_breakdown and the overlap of get_comm_comp_overlap (HTA 0.5.0, run on the
fixture; HTA keeps the first of its two steps, 551)."""

from __future__ import annotations

import pytest

import prof_engine
from conftest import fixture_path

# rank: (compute_time µs, comp_comm_overlap_pctg)
HTA = {0: (106252, 11.81), 1: (135548, 20.05)}


def test_step_trace_computing_and_overlap_are_htas(tmp_path):
    src = fixture_path("kineto", "hta_sampled_2rank_nccl")
    with prof_engine.open(prof_engine.import_trace([src], tmp_path / "run")) as run:
        rows = run.sql('''SELECT "Rank", "Computing", "Overlapped", "Communication(Not Overlapped)" FROM step_trace
                          WHERE "Step" = 551 ORDER BY "Rank"''').rows()
    assert [r[0] for r in rows] == sorted(HTA)
    for rank, computing, overlapped, exposed in rows:
        compute, overlap_pct = HTA[rank]
        assert computing == compute  # HTA's µs are whole, as this trace's
        # the share of the communication that computation hid
        assert round(100 * overlapped / (overlapped + exposed), 2) == pytest.approx(overlap_pct, abs=1e-9)
