"""Finalisation puts each staged file's records on the run's rank and clock (`files`), and leaves
out the records of a file it does not list. Records are staged by hand, so each value is known."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq

from prof_engine import schema
from prof_engine.store.builder import StagingSink, finalize_unit


def stage(staging, file: int, first_id: int) -> None:
    """A step record (step 7), two host ops in it and three marks, on file `file`'s own clock."""
    table = schema.tables()["slices"]
    rows = {c: [] for c in table.column_names}
    for n, (kind, name, ts, dur) in enumerate(
        [("step", "ProfilerStep#7", 100, 1000), ("host_op", "aten::mm", 200, 300), ("host_op", "aten::add", 250, 50)]
    ):
        values = {
            "id": first_id + n,
            "rank": file,
            "device": "host",
            "step": 7 if kind == "step" else None,
            "kind": kind,
            "name": name,
            "ts": ts,
            "dur": dur,
            "pid": "1",
            "tid": "1",
        }
        for c in table.column_names:
            rows[c].append(values.get(c))
    sink = StagingSink(staging)
    sink("slices", pa.RecordBatch.from_pydict(rows, schema=table.arrow_schema))
    # point records: a mark in the step, one after it, and one whose source stated its step
    marks = schema.tables()["marks"]
    sink(
        "marks",
        pa.RecordBatch.from_pydict(
            {
                c: [
                    {"rank": file, "device": "host", "ts": ts, "step": step, "name": f"m{first_id}"}.get(c)
                    for ts, step in ((150, None), (2000, None), (2000, 3))
                ]
                for c in marks.column_names
            },
            schema=marks.arrow_schema,
        ),
    )
    sink.close()


def finalised(tmp_path, files: list[tuple[int, int, int]]) -> tuple[list[tuple], list[tuple]]:
    """Two files staged and finalised as `files` lists them: their slices and marks as written."""
    unit = tmp_path / "unit"
    for file, first_id in ((0, 10), (1, 20)):
        stage(unit / "staging", file, first_id)
    done = finalize_unit(unit, files)
    got = pq.read_table(unit / "out" / "slices").select(["id", "rank", "ts", "step", "depth", "parent_id", "self_dur"])
    assert done.rows["slices"] == got.num_rows
    marks = pq.read_table(unit / "out" / "marks").select(["name", "rank", "ts", "step"])
    return sorted(zip(*(c.to_pylist() for c in got.columns))), sorted(
        zip(*(c.to_pylist() for c in marks.columns)), key=str
    )


def test_each_file_takes_its_rank_and_clock_offset(tmp_path):
    slices, marks = finalised(tmp_path, [(0, 3, 1_000), (1, 4, 5_000)])
    assert slices == [
        (10, 3, 1_100, 7, None, None, None),
        (11, 3, 1_200, 7, 0, None, 250),
        (12, 3, 1_250, 7, 1, 11, 50),
        (20, 4, 5_100, 7, None, None, None),
        (21, 4, 5_200, 7, 0, None, 250),
        (22, 4, 5_250, 7, 1, 21, 50),
    ]
    assert marks == sorted(
        [
            ("m10", 3, 1_150, 7),
            ("m10", 3, 3_000, None),
            ("m10", 3, 3_000, 3),
            ("m20", 4, 5_150, 7),
            ("m20", 4, 7_000, None),
            ("m20", 4, 7_000, 3),
        ],
        key=str,
    )


def test_the_records_of_a_file_not_listed_are_left_out(tmp_path):
    assert finalised(tmp_path, [(1, 2, 0)]) == (
        [(20, 2, 100, 7, None, None, None), (21, 2, 200, 7, 0, None, 250), (22, 2, 250, 7, 1, 21, 50)],
        sorted([("m20", 2, 150, 7), ("m20", 2, 2_000, None), ("m20", 2, 2_000, 3)], key=str),
    )


def test_staged_integers_are_deltas_and_few_valued_text_has_dictionaries(tmp_path):
    stage(tmp_path / "staging", 0, 10)
    [path] = (tmp_path / "staging" / "slices").glob("*.parquet")
    meta = pq.ParquetFile(path).metadata.row_group(0)
    encodings = {meta.column(i).path_in_schema: meta.column(i).encodings for i in range(meta.num_columns)}
    assert all("DELTA_BINARY_PACKED" in encodings[c] for c in ("id", "ts", "dur", "step")), encodings
    assert "RLE_DICTIONARY" in encodings["name"] and "DELTA_BINARY_PACKED" not in encodings["name"]
    assert pq.read_table(path).column("ts").to_pylist() == [100, 200, 250]
