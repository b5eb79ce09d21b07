"""torch_npu's `.db` export imports the hardware counters as its text export's trace_view.json has them.

The db (`ascend/torch_npu_2rank_level1_db`) and text (`ascend/torch_npu_2rank_level1_text`) fixtures
are two sessions of one script: the tracks (names, series) must be the text form's, the values
are checked against the database itself (independent SQL with sqlite3), and the scales against
the text form (a wrong unit, e.g. MB = 10^6 bytes instead of 2^20, is 4.9 % off).
"""

from __future__ import annotations

import sqlite3

import pytest

import prof_engine
from conftest import ascend_database, ascend_db_copy

MEMORY = "name LIKE '%memory/%'"  # the memory tables' counters (test_ascend_db_memory.py)


@pytest.fixture(scope="module")
def runs(torch_npu_db_run, torch_npu_text_run):
    """(db source, db run, text run), imported once for the session (conftest)."""
    return torch_npu_db_run[0], torch_npu_db_run[1], torch_npu_text_run[1]


def _tracks(run, rank: int) -> dict[tuple[str, str], tuple[int, float]]:
    rows = run.sql(
        f"SELECT name, series, count(*), sum(value) FROM counters WHERE rank = ? AND NOT {MEMORY} GROUP BY ALL", [rank]
    ).rows()
    return {(n, s): (k, v) for n, s, k, v in rows}


@pytest.mark.parametrize("rank", [0, 1])
def test_tracks_are_the_text_forms(runs, rank):
    """Same counter tracks and series as trace_view.json's, but QoS, which the database lacks."""
    _, db_run, text_run = runs
    db, text = _tracks(db_run, rank), _tracks(text_run, rank)
    assert len(db) == 1 + 6 + 8 + 4 + 2 + 8  # freq, NPU MEM, HBM 4 x r/w, LLC 2 x (hit, throughput), SoC, Acc PMU
    assert set(text) - set(db) == {("QoS OTHERS", "value")}
    assert set(db) <= set(text)


@pytest.mark.parametrize("rank", [0, 1])
def test_values_are_the_databases(runs, rank):
    """Each track's samples and sum, from the database by independent SQL, in the text form's units."""
    src, db_run, _ = runs
    con = ascend_database(src, rank)
    try:
        want = {("AI Core Freq", "MHz"): con.execute("SELECT count(*), sum(freq) FROM AICORE_FREQ").fetchone()}
        for hbm, way, n, total in con.execute(
            "SELECT hbmId, s.value, count(*), sum(bandwidth) FROM HBM h JOIN STRING_IDS s ON s.id = h.type GROUP BY 1, 2"
        ):
            way = way.capitalize()
            want[(f"HBM {hbm}/{way}", f"{way}(MB/s)")] = (n, total / 2**20)
        for llc, way, n, hit, throughput in con.execute(
            "SELECT llcId, s.value, count(*), sum(hitRate), sum(throughput) FROM LLC l JOIN STRING_IDS s ON s.id = l.mode "
            "GROUP BY 1, 2"
        ):
            way = way.capitalize()
            want[(f"LLC {llc} {way}/Hit Rate", "Hit Rate(%)")] = (n, hit / 100)
            want[(f"LLC {llc} {way}/Throughput", "Throughput(MB/s)")] = (n, throughput / 2**20)
        for kind, n, ddr, hbm in con.execute(
            "SELECT s.value, count(*), sum(ddr), sum(hbm) FROM NPU_MEM m JOIN STRING_IDS s ON s.id = m.type GROUP BY 1"
        ):
            prefix = {"app": "APP", "device": "Device"}[kind]
            for part, total in (("DDR", ddr), ("HBM", hbm), ("Memory", ddr + hbm)):
                want[(f"{prefix}/{part}", "KB")] = (n, total / 1024)
        n, l2, mata = con.execute(
            "SELECT count(*), sum(l2BufferBwLevel), sum(mataBwLevel) FROM SOC_BANDWIDTH_LEVEL"
        ).fetchone()
        want[("L2 Buffer Bw Level", "L2 Buffer Bw Level")], want[("Mata Bw Level", "Mata Bw Level")] = (
            (n, l2),
            (n, mata),
        )
        n, acc, *levels = con.execute(
            "SELECT count(*), sum(accId), sum(readBwLevel), sum(writeBwLevel), "
            "sum(readOstLevel), sum(writeOstLevel) FROM ACC_PMU"
        ).fetchone()
        for name, level in zip(("read_bandwidth", "write_band_width", "read_ost", "write_ost"), levels):
            want[(name, "value")], want[(name, "acc_id")] = (n, level), (n, acc)
    finally:
        con.close()
    got = _tracks(db_run, rank)
    assert got.keys() == want.keys()
    for track, (n, total) in want.items():
        assert got[track] == (n, pytest.approx(total, rel=1e-9)), track


@pytest.mark.parametrize("rank", [0, 1])
def test_scales_are_the_text_forms(runs, rank):
    """The other session's text form has the same magnitudes. Memory levels are steady: mean KB
    within 0.1 %. Bandwidth comes in bursts between idle zero samples, and the sessions took 13
    or 14 samples: HBM's summed MB/s within 1 % (10^6 bytes a MB would be 4.9 % off). LLC's
    throughput differs by up to 17 % between the sessions, so it does not pin its unit: it takes
    HBM's (both are B/s in the db). Hit rates are fractions."""
    _, db_run, text_run = runs
    db, text = _tracks(db_run, rank), _tracks(text_run, rank)
    for (name, series), (n, total) in db.items():
        (text_n, text_total) = text[(name, series)]
        if series == "KB" and total:
            assert total / n == pytest.approx(text_total / text_n, rel=1e-3), name
        elif series in ("Read(MB/s)", "Write(MB/s)"):
            assert total == pytest.approx(text_total, rel=0.01), name
    hit_rates = db_run.sql(
        "SELECT min(value), max(value) FROM counters WHERE series = 'Hit Rate(%)' AND rank = ?", [rank]
    ).rows()
    assert 0 <= hit_rates[0][0] and 0.5 < hit_rates[0][1] <= 1


def test_lanes_and_devices_are_the_text_forms(runs):
    """Counters sit on the device's lanes, with trace_view.json's lane numbers (pid bits 5-9)."""
    _, db_run, text_run = runs
    sql = f"SELECT DISTINCT rank, device, name, (pid::BIGINT >> 5) & 31 FROM counters WHERE NOT {MEMORY} AND name <> 'QoS OTHERS'"
    assert set(db_run.sql(sql).rows()) == set(text_run.sql(sql).rows())
    lanes = {lane.get("process") for source in db_run.manifest["sources"] for lane in source["lanes"]}
    assert {"AI Core Freq", "HBM", "LLC", "NPU MEM", "Stars Soc Info", "Acc PMU"} <= lanes


def test_missing_counter_tables_are_skipped(tmp_path):
    """Counters off (no hardware metrics collected): the tables are absent, the rest imports."""
    db = ascend_db_copy(tmp_path)
    with sqlite3.connect(db) as con:
        for table in ("AICORE_FREQ", "HBM", "LLC", "SOC_BANDWIDTH_LEVEL", "ACC_PMU", "NPU_MEM"):
            con.execute(f"DROP TABLE {table}")
    con.close()
    with prof_engine.open(prof_engine.import_trace([tmp_path], tmp_path / "run")) as run:
        assert run.sql(f"SELECT count(*) FROM counters WHERE NOT {MEMORY}").rows() == [(0,)]
        assert run.sql("SELECT count(*) FROM slices WHERE kind = 'kernel'").rows() == [(187,)]
