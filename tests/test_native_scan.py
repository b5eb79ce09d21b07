"""The native scanner gives the columns the pure-Python chunks give, and so the same run.

The columnar converter (`chunkconv`) reads chunks from the C scanner (`scan.Chunk`) or, without
it, from the decoded events (`pychunks.Chunk`): their columns are compared key by key and mode by
mode, and every table of the run store row for row, on real Kineto traces and on synthetic traces
full of odd events; reads are cut at every kind
of place (inside strings, numbers, escapes, between events, inside the scanner's table of events).
"""

from __future__ import annotations

import gzip
import json
import time
from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.compute as pc
import pytest

import prof_engine
from conftest import fixture_path, write_trace, x
from prof_engine import _native, importers, schema
from prof_engine._native import pychunks
from prof_engine.errors import InputError
from prof_engine.importers import chrome, scan
from prof_engine.importers.jsonstream import ChromeTraceReader
from prof_engine.importers.keys import ARGS_KEYS, TOP_KEYS

pytestmark = pytest.mark.skipif(_native.load() is None, reason="no C compiler here: the native scanner is not built")

BASE = 1_700_000_000_000_000


def _tables(run_dir: Path) -> dict[str, list[tuple]]:
    con = duckdb.connect()
    out = {}
    for name in schema.stored_tables():
        files = list((run_dir / name).glob("**/*.parquet"))
        if files:
            rel = con.sql(f"SELECT * FROM read_parquet('{run_dir / name}/**/*.parquet', hive_partitioning = true)")
            out[name] = sorted(rel.fetchall(), key=repr)
    return out


def _both(tmp_path: Path, paths: list[Path], monkeypatch) -> tuple[dict, dict]:
    native = prof_engine.import_trace(paths, tmp_path / "native")
    with monkeypatch.context() as m:
        m.setattr(scan, "available", lambda: False)
        python = prof_engine.import_trace(paths, tmp_path / "python")
    return _tables(Path(native)), _tables(Path(python))


def _odd_events() -> list[dict]:
    ev = [
        {"ph": "M", "name": "process_name", "pid": 1, "args": {"name": "python"}},
        {"ph": "M", "name": "thread_name", "pid": 1, "tid": 2, "args": {"name": 'autograd "thread"'}},
        x("ProfilerStep#1", BASE, 5000, cat="user_annotation"),
        x(
            'aten::quote"d \\ op \u00e9\u4e2d',
            BASE + 10,
            100,
            **{"External id": 1, "Input Dims": [[2, 3], [], [[4]]], "Input type": ["float", "", "Scalar"]},
        ),
        x("aten::mm", BASE + 20.5, 10.25, tid="thread x", **{"External id": "7", "Input Dims": [[1.5]]}),
        x("cudaLaunchKernel", BASE + 30, 5, cat="cuda_runtime", correlation=11, **{"External id": 1}),
        x("sm80_gemm", BASE + 50, 40, cat="kernel", pid=0, tid=7, correlation=11, stream=7, device=0),
        x(
            "ncclKernel_AllReduce",
            BASE + 100,
            400,
            cat="kernel",
            pid=0,
            tid=20,
            correlation=12,
            stream=20,
            **{"Collective name": "allreduce", "In msg nelems": 1024, "dtype": "Float", "Process Group Name": "0"},
        ),
        x("odd pid", BASE + 200, 1, pid=True, tid=2.5),
        x("string pid", BASE + 210, 1, pid="7", tid="0x10", correlation="012"),
        x(123, BASE + 220, 1),  # a non-string name
        x("Trace window", BASE, 6000, cat="Trace"),  # the profiler's own range: left out
        x(
            "Memcpy HtoD",
            BASE + 60,
            4,
            cat="Memcpy",
            pid=0,
            tid="stream 7",
            stream=7,
            correlation=13,
            **{"external id": 1},
        ),  # Kineto of 2021: capitalised categories, `external id`
        x("plugin op", BASE + 70, 1, cat="my_plugin"),  # an unknown category
        {"ph": "X", "cat": "cpu_op", "name": "no ts", "dur": 5, "pid": 1, "tid": 1},
        {"ph": "X", "cat": "cpu_op", "name": "no dur", "ts": BASE + 230, "pid": 1, "tid": 1},
        {"ph": "X", "cat": None, "name": None, "ts": BASE + 240, "dur": 1, "pid": None, "tid": None, "args": None},
        {
            "ph": "X",
            "cat": "cpu_op",
            "name": "4 decimals",
            "ts": "1700000000000250.1235",
            "dur": "1.5e1",
            "pid": 1,
            "tid": 1,
        },
        {"ph": "s", "cat": "ac2g", "id": 11, "ts": BASE + 30, "pid": 1, "tid": 1, "bp": "e"},
        {"ph": "f", "cat": "ac2g", "id": "11", "ts": BASE + 50, "pid": 0, "tid": 7, "bp": "e"},
        {"ph": "t", "id": 3, "ts": BASE + 60, "pid": 1, "tid": 1},
        {"ph": "s", "cat": "fwdbwd", "ts": BASE + 70, "pid": 1, "tid": 1},  # no id: dropped
        {
            "ph": "i",
            "cat": "cpu_instant_event",
            "name": "[memory]",
            "ts": BASE + 15,
            "pid": 1,
            "tid": 1,
            "s": "t",
            "args": {
                "Total Reserved": 2048,
                "Total Allocated": 512,
                "Bytes": 512,
                "Addr": 140000,
                "Device Type": 1,
                "Device Id": 0,
            },
        },
        {
            "ph": "i",
            "cat": "cpu_instant_event",
            "name": "[memory]",
            "ts": BASE + 16,
            "pid": 1,
            "tid": 1,
            "args": {"Bytes": -512, "Addr": 140000, "Device Type": 0, "Device Id": -1},
        },
        {"ph": "i", "name": "[memory]", "ts": BASE + 17, "pid": 1, "tid": 1, "args": {"Addr": 1}},  # no Bytes: dropped
        {"ph": "i", "name": "[memory]", "ts": BASE + 18, "pid": 1, "tid": 1, "args": {"Bytes": 8, "Device Type": 7}},
        {
            "ph": "i",
            "cat": "mark",
            "name": "iteration start",
            "ts": BASE + 19,
            "pid": 1,
            "tid": 1,
            "s": "g",
            "args": {"nested": {"a": [1, 2, {"b": None}]}, "t": True},
        },
        {"ph": "n", "name": "note", "ts": BASE + 21, "pid": 1, "tid": 1},
        {"ph": "C", "name": "gpu util", "ts": BASE + 22, "pid": 1, "args": {"util": 55.5, "label": "x"}},
        {"ph": "?", "name": "unknown phase", "ts": BASE + 23},
        {},
    ]
    return ev


def test_odd_events_same_run(tmp_path, monkeypatch):
    trace = write_trace(tmp_path / "odd.json", _odd_events(), baseTimeNanoseconds=1000, distributedInfo={"rank": 0})
    native, python = _both(tmp_path, [trace], monkeypatch)
    assert native == python
    with prof_engine.open(tmp_path / "native") as run:
        names = {n for (n,) in run.sql("SELECT name FROM slices").rows()}
    assert 'aten::quote"d \\ op \u00e9\u4e2d' in names and "123" in names and "Trace window" not in names


def test_times_and_integers_parsed_in_c_are_pythons(tmp_path, monkeypatch):
    # every value here is one the C parser takes itself (1 to 3 decimals or none, 16 digits of epoch
    # µs, integers of up to 18 digits, negative ones): no column falls back to the string path
    base = 4_458_676_522_690  # µs relative to the trace's base, as Kineto writes them now
    events = [
        x("a", base, 0, correlation=-5, stream=7),
        x("b", base + 0.5, 1, correlation=0),
        x("c", base + 0.25, 0.5, correlation=123_456_789_012_345_678),
        x("d", base + 0.125, 12.34),
        x("e", 999_999_999_999.999, 1, **{"External id": 3}),
        x("g", BASE, 1),  # epoch µs, as older Kineto wrote them
        {"ph": "X", "cat": "cpu_op", "name": "f", "ts": BASE + 1, "dur": None, "pid": 1, "tid": 1},
    ]
    trace = write_trace(tmp_path / "plain.json", events, distributedInfo={"rank": 0})
    # the clocks here are years apart on purpose: not slices to drop (store.outliers) in this test
    monkeypatch.setattr(importers, "drop_time_outliers", lambda staging, info: 0)

    def no_fallback(arr):
        raise AssertionError(f"a column fell back to the string path: {arr.to_pylist()[:5]}")

    with monkeypatch.context() as m:
        m.setattr(scan, "us_array_to_ns", no_fallback)
        native = prof_engine.import_trace([trace], tmp_path / "native")
    with monkeypatch.context() as m:
        m.setattr(scan, "available", lambda: False)
        python = prof_engine.import_trace([trace], tmp_path / "python")
    assert _tables(Path(native)) == _tables(Path(python))
    with prof_engine.open(native) as run:
        got = dict(run.sql("SELECT name, ts FROM slices").rows())
    assert got["b"] - got["a"] == 500 and got["d"] - got["a"] == 125 and got["e"] == 999_999_999_999_999
    assert got["g"] == BASE * 1000


def test_begin_end_pairs_same_run(tmp_path, monkeypatch):
    events = [
        {"ph": "B", "name": "outer", "ts": BASE, "pid": 1, "tid": 1},
        x("inner", BASE + 1, 2),
        {"ph": "E", "ts": BASE + 10, "pid": 1, "tid": 1},
        x("after", BASE + 20, 2),
    ]
    native, python = _both(tmp_path, [write_trace(tmp_path / "be.json", events)], monkeypatch)
    assert native == python and len(native["slices"]) == 3


def test_values_out_of_range_same_run_and_findings(tmp_path, monkeypatch):
    """Slices outside any run (2^62 ns from the clock's zero, longer than a week) are dropped and a
    step number beyond int32 is no step, alike on both paths, and both record the same finding."""
    far = 2**62 // 1000 + 1  # µs
    events = [
        x("ProfilerStep#1", BASE, 1000, cat="user_annotation"),
        x("aten::mm", BASE + 10, 20),
        x("ProfilerStep#2147483648", BASE + 100, 10, cat="user_annotation"),
        x("ProfilerStep#99999999999999999999", BASE + 200, 10, cat="user_annotation"),
        x("aten::week", BASE + 300, 7 * 86_400e6 + 0.001),
        x("aten::just_a_week", BASE + 400, 7 * 86_400e6),
        x("k_far", far, 1, cat="kernel", pid=0, tid=7, device=0, stream=7),
        x("aten::before", -far, 1),
        x("k", BASE + 500, 5, cat="kernel", pid=0, tid=7, device=0, stream=7),
    ]
    native, python = _both(tmp_path, [write_trace(tmp_path / "out.json", events)], monkeypatch)
    assert native == python
    with prof_engine.open(tmp_path / "native") as run:
        kinds = dict(run.sql("SELECT name, kind FROM slices").rows())
    assert kinds == {
        "ProfilerStep#1": "step",
        "aten::mm": "host_op",
        "ProfilerStep#2147483648": "user_range",
        "ProfilerStep#99999999999999999999": "user_range",
        "aten::just_a_week": "host_op",
        "k": "kernel",
    }
    findings = []
    for name in ("native", "python"):
        manifest = json.loads((tmp_path / name / "manifest.json").read_text(encoding="utf-8"))
        findings.append([f for f in manifest["sources"][0]["info"]["findings"] if f["rule"] == "values_out_of_range"])
    assert findings[0] == findings[1] and findings[0][0]["count"] == 5


@pytest.mark.parametrize(
    "folder", ["hta_nccl_parser_rank0_ws2", "hta_amd_mi250_rocm", "hta_sampled_2rank_nccl", "kineto_v100_resnet50_2021"]
)
def test_real_kineto_traces_same_run(tmp_path, monkeypatch, folder):
    paths = sorted(p for p in fixture_path("kineto", folder).iterdir() if ".json" in p.name)
    native, python = _both(tmp_path, paths, monkeypatch)
    assert native == python and native["slices"]


def _convert(path: Path, native: bool, chunk_bytes: int) -> dict[str, list]:
    """The converter's rows of `path`: `chunkconv` over the native scanner's chunks (True) or the
    pure-Python ones (False)."""
    rows: dict[str, list] = {}

    def sink(table, batch):
        rows.setdefault(table, []).extend(batch.to_pylist())

    reader = ChromeTraceReader(path, chunk_bytes=chunk_bytes)
    conv = chrome.ChromeConverter(0, sink)
    for chunk in scan.Scanner(reader).chunks() if native else pychunks.chunks(reader):
        conv.feed(chunk)
    conv.finish()
    return {"header": reader.header, "counts": conv.counts, "lanes": conv.lanes, **rows}


# Every key in every mode the scanner gives it (US only for times: other values are not µs), but
# RAW of `ph` and `name`: absent, they are "" in `Event`, which the Python chunks encode again.
_MODES = [
    (k, m)
    for k in TOP_KEYS + ARGS_KEYS
    for m in (scan.RAW, scan.TEXT, scan.INT)
    if not (m == scan.RAW and k in ("ph", "name"))
] + [("ts", scan.US), ("dur", scan.US)]
_DECODED = ("cat", "pid", "tid", "id", "s")  # RAW: the Python chunks' is the value encoded again


def _agreed(key: str, mode: int, col: pa.Array) -> list:
    """What both chunk sources give of a column: all of it, but whether a decoded key's RAW text
    is there, and "" for an absent `ph` or `name` (`Event`'s default)."""
    if mode == scan.RAW and key in _DECODED:
        return pc.is_valid(col).to_pylist()
    return (pc.fill_null(col, "") if key in ("ph", "name") and mode == scan.TEXT else col).to_pylist()


def _columns(path: Path, native: bool, chunk_bytes: int) -> dict[tuple[str, int], list]:
    """Each key's column in each mode over the whole file, from the native or the Python chunks."""
    reader = ChromeTraceReader(path, chunk_bytes=chunk_bytes)
    got: dict[tuple[str, int], list] = {m: [] for m in _MODES}
    for chunk in scan.Scanner(reader).chunks() if native else pychunks.chunks(reader):
        rows = pa.array(range(0, chunk.n, 2), pa.int64())  # the `rows` argument, on every other event
        for key, mode in _MODES:
            col = chunk.column(key, mode)
            assert _agreed(key, mode, chunk.column(key, mode, rows)) == _agreed(key, mode, col.take(rows))
            got[key, mode] += _agreed(key, mode, col)
    return got


@pytest.mark.parametrize("chunk_bytes, cap", [(100, 2), (4096, 5), (1 << 20, 1 << 15)])
def test_python_chunks_have_the_native_columns(tmp_path, monkeypatch, chunk_bytes, cap):
    """Column by column, in every mode: the pure-Python chunks of odd events (escapes, literals,
    numbers as text, nested args, args that are no object, absent and null values) equal the
    native scanner's, also when chunks are cut elsewhere than the scanner's."""
    path = tmp_path / "t.json"
    events = _odd_events() + [
        {**x("e", BASE, 1), "args": [1, {"Bytes": 2}]},
        {**x("f", BASE, 1), "args": 5},
        x("g", BASE, 1, **{"Bytes": "0x10", "Device Id": None, "Addr": 2**63, "stream": " 7"}),
    ]
    path.write_text(json.dumps({"traceEvents": events * 3}, indent=1, ensure_ascii=False), encoding="utf-8")
    monkeypatch.setattr(scan, "CAP", cap)
    native, python = _columns(path, True, chunk_bytes), _columns(path, False, chunk_bytes)
    for key, mode in _MODES:
        assert native[key, mode] == python[key, mode], (key, mode)
    assert python["Bytes", scan.INT][-1] == 16 and python["Addr", scan.INT][-1] is None


def test_real_kineto_trace_same_columns():
    path = next(p for p in fixture_path("kineto", "hta_nccl_parser_rank0_ws2").iterdir() if ".json" in p.name)
    native, python = _columns(path, True, 8 << 20), _columns(path, False, 8 << 20)
    assert native == python and len(native["ph", scan.TEXT]) > 10_000


@pytest.mark.parametrize("raw_utf8", [False, True], ids=["escaped", "raw-utf8"])
@pytest.mark.parametrize("chunk_bytes, cap", [(7, 3), (100, 2), (4096, 5), (1 << 20, 1 << 15)])
def test_any_read_size_and_table_size(tmp_path, monkeypatch, chunk_bytes, cap, raw_utf8):
    """Reads cut events, strings, escapes, numbers and UTF-8 sequences anywhere; a small CAP makes
    many scan calls per read."""
    path = tmp_path / "t.json"
    events = _odd_events() + [x("\u7b97\u5b50 \U0001f525 caf\u00e9 " + "long name " * 4 + "\u00e9", BASE + 300, 1)]
    path.write_text(
        json.dumps(
            {"schemaVersion": 1, "traceEvents": events * 3, "traceName": "x]}"}, indent=1, ensure_ascii=not raw_utf8
        ),
        encoding="utf-8",
    )
    monkeypatch.setattr(scan, "CAP", cap)
    native = _convert(path, True, chunk_bytes)
    assert native == _convert(path, False, chunk_bytes)


@pytest.mark.parametrize("closing", ["]", "", ",\n"])
def test_array_form_with_or_without_closing_bracket(tmp_path, closing):
    path = tmp_path / "t.json"
    path.write_text("[" + ",\n".join(json.dumps(e) for e in _odd_events()) + closing)
    got = _convert(path, True, 64)
    assert got == _convert(path, False, 64) and got["header"] == {}


def test_gzip(tmp_path):
    path = tmp_path / "t.json.gz"
    path.write_bytes(gzip.compress(json.dumps({"traceEvents": _odd_events(), "baseTimeNanoseconds": 5}).encode()))
    got = _convert(path, True, 1000)
    assert got == _convert(path, False, 1000) and got["header"] == {"baseTimeNanoseconds": 5}


@pytest.mark.parametrize(
    "text, message",
    [
        ('{"traceEvents": [{"ph": "X", "ts": 1}, {"ph": "X", "ts"', "truncated"),
        ('{"traceEvents": [{"ph": "X", "ts": 1}, {"ph": "X", "ts": 1x}]}', "corrupt JSON at byte 58"),
        ('{"traceEvents": [{"ph": "X", "name": "a\x01b"}]}', "corrupt JSON at byte 39"),
        ('{"traceEvents": [{"ph": "X", "args": {"a": [1, 2}}]}', "corrupt JSON"),
        ('{"traceEvents": [{"ph": "X"} {"ph": "X"}]}', "corrupt JSON at byte 29"),
        ('{"traceEvents": [5]}', "corrupt JSON at byte 17"),
        ('{"traceEvents": [{"ph": 5}]}', "event #0"),
        ('{"traceEvents": [{"ph": "X"}], "x": 1', "does not end properly"),
        ('{"traceEvents": [{"ph": "X"}] junk', "does not end properly"),
    ],
    ids=[
        "truncated",
        "bad-number",
        "control-char",
        "unbalanced",
        "no-comma",
        "not-an-object",
        "wrong-type",
        "unclosed-object",
        "junk-after",
    ],
)
def test_bad_input_is_one_clear_error(tmp_path, text, message):
    path = tmp_path / "bad.json"
    path.write_text(text)
    with pytest.raises(InputError, match=message) as info:
        _convert(path, True, 16)
    assert str(path) in str(info.value) and "\n" not in str(info.value)
    for native in (False, None):  # the pure-Python paths refuse it too
        with pytest.raises(InputError):
            _convert(path, native, 16)


def test_utf8_text_same_run(tmp_path, monkeypatch):
    """Names and args written as raw UTF-8 (2-, 3- and 4-byte sequences, not \\u escapes) pass the
    scanner's UTF-8 check and come out as the pure-Python path reads them."""
    names = [
        "caf\u00e9",
        "\u7b97\u5b50_\u043c\u0430\u0442",
        "\U0001f525op",
        "a\u07ffb\u0800c\uffff",
        "x\U00010000y\U0010ffffz",
    ]
    events = [x("ProfilerStep#1", BASE, 100, cat="user_annotation")]
    events += [x(n, BASE + 1 + i, 1, note=n) for i, n in enumerate(names)]
    trace = tmp_path / "utf8.json"
    trace.write_text(json.dumps({"schemaVersion": 1, "traceEvents": events}, ensure_ascii=False), encoding="utf-8")
    native, python = _both(tmp_path, [trace], monkeypatch)
    assert native == python
    with prof_engine.open(tmp_path / "native") as run:
        assert set(names) <= {n for (n,) in run.sql("SELECT name FROM slices").rows()}


@pytest.mark.parametrize(
    "body",
    [
        b'"name": "caf\xe9"',  # Latin-1, in a name
        b'"args": {"note": "caf\xe9 x"}',  # in an args value
        b'"tid": "t\xe9"',  # in a field the converter reads as text
        b'"name": "a\xc0\xafb"',  # an overlong '/'
        b'"name": "a\xed\xa0\x80b"',  # a UTF-16 surrogate, encoded
        b'"name": "a\xf4\x90\x80\x80"',  # beyond U+10FFFF
        b'"name": "ab\xe4\xb8"',  # a sequence cut short by the closing quote
    ],
    ids=["latin1-name", "latin1-args", "latin1-tid", "overlong", "surrogate", "beyond-unicode", "cut-sequence"],
)
def test_text_that_is_not_utf8_is_one_clear_error(tmp_path, monkeypatch, body):
    """JSON is UTF-8, and the scanner hands its columns to Arrow as UTF-8: it checks every string
    and names the first byte that is not (both paths refuse the file with one line naming it)."""
    path = tmp_path / "bad.json"
    text = b'{"traceEvents": [{"ph": "X", "ts": 1, "dur": 1, ' + body + b"}]}"
    path.write_bytes(text)
    offset = next(i for i, c in enumerate(text) if c >= 0x80)
    with pytest.raises(InputError, match=f"text that is not UTF-8 at byte {offset} ") as info:
        _convert(path, True, 16)
    assert str(path) in str(info.value) and "\n" not in str(info.value)
    for native in (True, False):
        with monkeypatch.context() as m:
            m.setattr(scan, "available", lambda native=native: native)
            with pytest.raises(InputError, match="not UTF-8"):
                prof_engine.import_trace([path], tmp_path / f"run{native}")
        assert not (tmp_path / f"run{native}").exists()


@pytest.mark.parametrize("escape", [r"\ud800", r"\udd25", r"\ud83d\u0041", r"\ud83dx"])
def test_a_lone_surrogate_escape_is_refused(tmp_path, escape):
    """A \\u escape of half a UTF-16 pair is no character: the scanner refuses it where it stands
    (msgspec, which would decode it, does not know it either)."""
    path = tmp_path / "bad.json"
    text = '{"traceEvents": [{"ph": "X", "ts": 1, "name": "a' + escape + 'b"}]}'
    path.write_text(text)
    with pytest.raises(InputError, match=f"corrupt JSON at byte {text.index(chr(92))} "):
        _convert(path, True, 16)


def test_a_consumer_that_stops_early_does_not_hang(tmp_path, monkeypatch):
    """The reading thread stops when the converter fails or stops reading mid-file, also when it
    has already read to the end (3 chunks: one converting, one queued, the last waiting)."""
    path = tmp_path / "t.json"
    path.write_text(json.dumps({"traceEvents": _odd_events()[:12]}))
    monkeypatch.setattr(scan, "CAP", 4)
    chunks = scan.Scanner(ChromeTraceReader(path)).chunks()
    next(chunks)
    chunks.close()  # the generator's finally stops and joins the reader thread
    for _ in range(5):
        with pytest.raises(RuntimeError):
            for i, _chunk in enumerate(scan.Scanner(ChromeTraceReader(path)).chunks()):
                if i == 1:
                    time.sleep(0.05)  # the reader has put the last chunk and waits to say it is done
                    raise RuntimeError("converter failed")
