"""MindSpore's CPU profiler output: host CPU ops with their op type, reproducing the vendor's summaries.

Data: tests/data/mindspore_cpu/ (recorded with MindSpore 2.7.2's CPU build; see its README).
Oracles, read here with the csv and json modules only: FRAMEWORK/cpu_op_type_info_0.csv (per op
type: occurrences, total ms), cpu_op_detail_info_0.csv (per op), cpu_op_execute_timestamp_0.txt
(each execution: start ns, duration ms) and trace_view.json's `CPU OP` lane.

The vendor's totals are printed with 6 significant digits, as are the durations in the
timestamp file; a total matches when it is within half a unit of the file's last digit.
"""

from __future__ import annotations

import csv
import json
import math
import shutil
from collections import defaultdict
from decimal import Decimal
from pathlib import Path

import pytest

import prof_engine
from prof_engine.errors import InputError

DATA = Path(__file__).resolve().parent / "data" / "mindspore_cpu"
RANK_DIRS = sorted(DATA.glob("*_ascend_ms")) if DATA.is_dir() else []


@pytest.fixture(scope="module")
def src() -> Path:
    if not RANK_DIRS:
        pytest.skip(f"{DATA} holds no MindSpore CPU profiler output (*_ascend_ms): recorded data absent")
    return RANK_DIRS[0]


@pytest.fixture(scope="module")
def run(src, tmp_path_factory):
    r = prof_engine.open(prof_engine.import_trace([DATA], tmp_path_factory.mktemp("ms_cpu") / "run"))
    yield r
    r.close()


def vendor(src: Path, name: str) -> list[dict[str, str]]:
    with open(src / "FRAMEWORK" / name, newline="", encoding="utf-8") as f:
        return list(csv.DictReader(f))


def executions(src: Path) -> list[tuple[str, int, int]]:
    """(full name, start ns, duration ns) of every line item of the timestamp file."""
    out = []
    for line in (src / "FRAMEWORK" / "cpu_op_execute_timestamp_0.txt").read_text(encoding="utf-8").splitlines():
        if line.strip():
            name, _, times = line.strip().split(";")
            for t in times.split():
                start, dur_ms, _tid = t.split(",")
                out.append((name, int(start), int(Decimal(dur_ms) * 1_000_000)))
    return out


def trace_cpu_ops(src: Path) -> list[dict]:
    events = json.loads((src / "ASCEND_PROFILER_OUTPUT" / "trace_view.json").read_text(encoding="utf-8"))
    pids = {
        e["pid"] for e in events if e["ph"] == "M" and e["name"] == "process_name" and e["args"]["name"] == "CPU OP"
    }
    return [e for e in events if e["ph"] == "X" and e["pid"] in pids]


def half_unit(printed: str) -> float:
    """Half a unit of the last of the 6 significant digits `printed` (ms) has."""
    v = float(printed)
    return 0.5 * 10 ** (math.floor(math.log10(abs(v))) - 5) if v else 0.5e-6


def test_cpu_ops_are_host_ops_with_their_type(src, run):
    rows = run.sql("SELECT kind, count(*) AS n FROM slices GROUP BY kind").arrow().to_pylist()
    assert rows == [{"kind": "host_op", "n": len(trace_cpu_ops(src))}]  # the Scope Layer lane is left out
    types = dict(run.sql("SELECT DISTINCT name, op_type FROM slices").rows())
    assert types["Default/network-WithLossCell/_backbone-SequentialCell/0-Dense/MatMul-op0"] == "MatMul"
    assert (
        types["Gradients/Default/network-WithLossCell/_backbone-SequentialCell/1-ReLU/Grad_ReLU/ReluGrad-op0"]
        == "ReluGrad"
    )


def test_times_are_the_timestamp_files_exact_ns(src, run):
    ours = sorted(run.sql("SELECT name, ts, dur FROM slices").rows())
    assert ours == sorted(executions(src))
    # trace_view.json's copy is the same executions, its ts converted through the float 0.001
    lane = sorted((e["name"], int(Decimal(e["ts"]) * 1000), int(Decimal(e["dur"]) * 1000)) for e in trace_cpu_ops(src))
    assert [(n, d) for n, _, d in lane] == [(n, d) for n, _, d in ours]
    assert all(0 <= t - o <= 100 for (_, t, _), (_, o, _) in zip(lane, ours))


def test_op_statistic_reproduces_cpu_op_type_info(src, run):
    expected = vendor(src, "cpu_op_type_info_0.csv")
    ours = {
        r["OP Type"]: r for r in run.sql("SELECT * FROM op_statistic WHERE \"Device\" = 'host'").arrow().to_pylist()
    }
    assert set(ours) == {r["op_type"] for r in expected}
    for r in expected:
        got = ours[r["op_type"]]
        assert got["Count"] == int(r["type_occurrences"]), r["op_type"]
        assert got["Core Type"] == "CPU"
        assert abs(got["Total Time(us)"] / 1000 - float(r["total_compute_time"])) <= half_unit(
            r["total_compute_time"]
        ), r["op_type"]


def test_key_averages_reproduces_cpu_op_detail_info(src, run):
    expected = vendor(src, "cpu_op_detail_info_0.csv")
    ours = {r["Name"]: r for r in run.sql("SELECT * FROM key_averages").arrow().to_pylist()}
    assert set(ours) == {r["full_op_name"] for r in expected}
    for r in expected:
        got = ours[r["full_op_name"]]
        assert got["Calls"] == int(r["op_occurrences"]), r["full_op_name"]
        for col in ("Host Total(us)", "Self Host(us)"):  # no op nests in another
            assert abs(got[col] / 1000 - float(r["op_total_time(ms)"])) <= half_unit(r["op_total_time(ms)"]), col


def test_op_summary_shows_the_op_type(run):
    types = {t for (t,) in run.sql('SELECT DISTINCT "OP Type" FROM op_summary').rows()}
    assert "MatMul" in types and not any("/" in t for t in types)


def test_lone_trace_view_reads_the_cpu_op_lane(src, tmp_path):
    """Without the FRAMEWORK files, the trace's CPU OP lane gives the same ops and durations."""
    with prof_engine.open(
        prof_engine.import_trace([src / "ASCEND_PROFILER_OUTPUT" / "trace_view.json"], tmp_path / "run")
    ) as r:
        kinds = dict(r.sql("SELECT kind, count(*) FROM slices GROUP BY kind").rows())
        stats = {
            t: (n, total)
            for t, n, total in r.sql('SELECT "OP Type", "Count", "Total Time(us)" FROM op_statistic').rows()
        }
    assert kinds == {"host_op": len(trace_cpu_ops(src))}
    by_type: dict[str, list] = defaultdict(lambda: [0, 0])
    for name, _, dur in executions(src):
        t = name.rsplit("/", 1)[-1].rsplit("-", 1)[0]
        by_type[t][0] += 1
        by_type[t][1] += dur
    assert stats == {t: (n, pytest.approx(ns / 1000, abs=1e-6)) for t, (n, ns) in by_type.items()}


def _flat_copy(src: Path, dest: Path, rewrite=None) -> Path:
    """The FRAMEWORK files flat in one folder, as MindSpore <= 2.4 wrote its CPU profile."""
    dest.mkdir()
    for p in (src / "FRAMEWORK").iterdir():
        shutil.copyfile(p, dest / p.name)
    if rewrite:
        ts = dest / "cpu_op_execute_timestamp_0.txt"
        ts.write_text(rewrite(ts.read_text(encoding="utf-8")), encoding="utf-8")
    return dest


def test_flat_layout_of_older_versions(src, tmp_path):
    flat = _flat_copy(src, tmp_path / "profiler")
    with prof_engine.open(prof_engine.import_trace([flat], tmp_path / "run")) as r:
        stats = {t: n for t, n in r.sql('SELECT "OP Type", "Count" FROM op_statistic').rows()}
        assert r.manifest["sources"][0]["format"] == "mindspore_cpu"
    assert stats == {row["op_type"]: int(row["type_occurrences"]) for row in vendor(src, "cpu_op_type_info_0.csv")}


def test_two_field_monotonic_variant_is_flagged(src, tmp_path):
    """Early 2.x: `start,dur` without a tid, start on the monotonic clock: imported, and said so."""
    base = min(s for _, s, _ in executions(src))

    def older(text: str) -> str:
        return (
            "\n".join(
                f"{name};host_cpu_ops;"
                + " ".join(f"{int(s) - base + 5_000_000_000},{d}" for s, d, _ in (t.split(",") for t in times.split()))
                for name, _, times in (line.split(";") for line in text.splitlines() if line.strip())
            )
            + "\n"
        )

    flat = _flat_copy(src, tmp_path / "profiler", older)
    with prof_engine.open(prof_engine.import_trace([flat], tmp_path / "run")) as r:
        (n,) = r.sql("SELECT count(*) FROM slices WHERE kind = 'host_op'").rows()[0]
        findings = r.manifest["sources"][0]["info"]["findings"]
    assert n == len(executions(src))
    assert [(f["rule"], f["count"]) for f in findings] == [("unanchored_clock", n)]


def test_corrupt_timestamp_file_is_one_line(src, tmp_path):
    flat = _flat_copy(src, tmp_path / "profiler", lambda t: t.replace(",0 ", ",x ", 1))
    with pytest.raises(InputError, match=r"cpu_op_execute_timestamp_0\.txt:\d+: .* is not <start ns>"):
        prof_engine.import_trace([flat], tmp_path / "run")


def test_cli_import_and_show(src, tmp_path):
    from typer.testing import CliRunner

    from prof_engine.cli import app

    imp = CliRunner().invoke(app, ["import", str(DATA), "-o", str(tmp_path / "run")])
    assert imp.exit_code == 0, imp.output
    show = CliRunner().invoke(app, ["show", str(tmp_path / "run")])
    assert show.exit_code == 0, show.output
    op_types = show.output.split("op_statistic", 1)[1]
    assert "MatMul" in op_types and "ReluGrad" in op_types


def test_without_trace_view(src, tmp_path):
    rank = tmp_path / src.name
    shutil.copytree(src, rank)
    (rank / "ASCEND_PROFILER_OUTPUT" / "trace_view.json").unlink()
    with prof_engine.open(prof_engine.import_trace([tmp_path], tmp_path / "run")) as r:
        stats = dict(r.sql('SELECT "OP Type", "Count" FROM op_statistic').rows())
    assert stats == {row["op_type"]: int(row["type_occurrences"]) for row in vendor(src, "cpu_op_type_info_0.csv")}


def test_database_export_keeps_its_device_data(src, tmp_path, monkeypatch):
    """A rank directory exported as .db with CPU ops beside it: the database's records and the CPU ops."""
    from conftest import ascend_db_copy
    from prof_engine import importers

    db = ascend_db_copy(tmp_path)
    shutil.copytree(src / "FRAMEWORK", db.parent.parent / "FRAMEWORK")
    # the two recordings are 687 days apart: the CPU ops are rightly dropped as out of range
    with prof_engine.open(prof_engine.import_trace([tmp_path], tmp_path / "far")) as r:
        (finding,) = [f for f in r.manifest["sources"][0]["info"]["findings"] if f["rule"] == "values_out_of_range"]
        assert finding["count"] == sum(int(row["type_occurrences"]) for row in vendor(src, "cpu_op_type_info_0.csv"))
    # ... and kept beside the database's records where that rule is off
    monkeypatch.setattr(importers, "drop_time_outliers", lambda staging, info: 0)
    with prof_engine.open(prof_engine.import_trace([tmp_path], tmp_path / "run")) as r:
        kernels = r.sql("SELECT count(*) FROM slices WHERE kind = 'kernel'").rows()[0][0]
        cpu = dict(r.sql("SELECT op_type, count(*) FROM slices WHERE category = 'HostCpuOps' GROUP BY 1").rows())
    assert kernels > 0
    assert cpu == {row["op_type"]: int(row["type_occurrences"]) for row in vendor(src, "cpu_op_type_info_0.csv")}


def test_a_kineto_trace_beside_flat_cpu_files_is_not_dropped_silently(src, tmp_path):
    """A flat MindSpore CPU folder claimed the whole folder: a Kineto trace put there was neither
    imported nor listed as left out. It is found, and the folder is refused as two jobs in one
    line; side JSON that is no trace stays the CPU unit's, as before."""
    from conftest import write_trace

    flat = _flat_copy(src, tmp_path / "profiler")
    (flat / "profiler_info_0.json").write_text('{"rank_id": 0}')
    write_trace(
        flat / "k.json", [{"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 1, "dur": 2}]
    )
    with pytest.raises(InputError, match=r"two jobs: Ascend/MindSpore profiler output \(1 unit\(s\)\) and 1 Kineto"):
        prof_engine.import_trace([flat], tmp_path / "run")
    (flat / "k.json").unlink()
    run = prof_engine.import_trace([flat], tmp_path / "run")
    assert [s["format"] for s in json.loads((run / "manifest.json").read_text())["sources"]] == ["mindspore_cpu"]
