"""Generic Chrome traces (chrome://tracing, Catapult), not Kineto: every slice counts.

Catapult's own test traces (../shared/fixtures/chrome/catapult_*: B/E slices, some never ended,
X slices, flows, nestable async b/e/n, legacy async S/T/F) give `slice_statistic` per process,
thread and name the counts, wall and self times that the few lines of Python in `_slices_of` and
`_statistics` compute from the raw JSON (written from the trace event format, sharing nothing
with the importer or the view). A begin never ended is kept, closed at its thread's last event,
and reported; so is an end that closes nothing.
"""

from __future__ import annotations

import gzip
import json
from collections import defaultdict
from decimal import Decimal
from pathlib import Path

import pytest

import prof_engine
from conftest import fixture_path, load_events, write_trace, x
from prof_engine import _native
from prof_engine._native import pychunks
from prof_engine.importers import chrome, scan
from prof_engine.importers.jsonstream import ChromeTraceReader

CATAPULT = {
    "catapult_flow": "flow.json",
    "catapult_main_thread_has_unclosed_slices": "main_thread_has_unclosed_slices.json",
    "catapult_nestable_async": "nestable_async.json",
    "catapult_x_event_trace": "x_event_trace.json",
}
COLUMNS = '"Process", "Thread", "Name", "Occurrences", "Wall Duration(us)", "Self Time(us)"'


def _ns(v) -> int:
    return int(Decimal(str(v)) * 1000)


def _slices_of(events: list[dict]) -> tuple[list[tuple], int, int]:
    """([(pid, tid, name, ts, dur)] of X, B/E, b/e and S/F slices, ns; begins never ended (closed at
    the latest end of any event of their thread or async track); ends that closed nothing)."""
    out, ends = [], defaultdict(int)
    thread_open, async_open = defaultdict(list), defaultdict(list)
    unclosed = unmatched = 0
    for e in events:
        ph, pid, tid, name = e.get("ph"), str(e.get("pid")), str(e.get("tid")), str(e.get("name", ""))
        if "ts" not in e or ph == "M":
            continue
        ts = _ns(e["ts"])
        if ph in "beSFnTp":  # async: a track per (category, id), legacy ones per (category, name, id)
            tid = (
                f"async:{e.get('cat', '')}:{e.get('id')}"
                if ph in "ben"
                else f"async:{e.get('cat', '')}:{name}:{e.get('id')}"
            )
        end = ts + (_ns(e.get("dur", 0)) if ph == "X" else 0)
        ends[pid, tid] = max(ends[pid, tid], end)
        if ph == "X":
            out.append((pid, tid, name, ts, end - ts))
        elif ph == "B":
            thread_open[pid, tid].append((name, ts))
        elif ph == "E":
            if thread_open[pid, tid]:
                n, t0 = thread_open[pid, tid].pop()
                out.append((pid, tid, n, t0, ts - t0))
            else:
                unmatched += 1
        elif ph in "bS":
            async_open[pid, tid].append((name, ts))
        elif ph in "eF":
            names = [n for n, _ in async_open[pid, tid]]
            if name not in names:
                unmatched += 1
                continue
            at = len(names) - 1 - names[::-1].index(name)
            unclosed += len(names) - at - 1  # begins still open inside the one this ends end with it
            out += [(pid, tid, n, t0, ts - t0) for n, t0 in async_open[pid, tid][at:]]
            del async_open[pid, tid][at:]
    for opened in (thread_open, async_open):
        for (pid, tid), stack in opened.items():
            out += [(pid, tid, n, t0, ends[pid, tid] - t0) for n, t0 in stack]
            unclosed += len(stack)
    return out, unclosed, unmatched


def _statistics(slices: list[tuple]) -> dict[tuple, tuple]:
    """(pid, tid, name) -> (count, wall µs, self µs); self: less what its direct children on the
    track cover (a stack over the track's slices by start, longer first)."""
    stats: dict[tuple, list[int]] = defaultdict(lambda: [0, 0, 0])
    tracks = defaultdict(list)
    for pid, tid, name, ts, dur in slices:
        tracks[pid, tid].append([ts, dur, name, 0])
    for (pid, tid), rows in tracks.items():
        stack: list[list] = []
        for row in sorted(rows, key=lambda r: (r[0], -r[1])):
            while stack and stack[-1][0] + stack[-1][1] <= row[0]:
                stack.pop()
            if stack:
                parent = stack[-1]
                parent[3] += max(min(row[0] + row[1], parent[0] + parent[1]) - row[0], 0)
            stack.append(row)
        for _ts, dur, name, child in rows:
            s = stats[pid, tid, name]
            s[0], s[1], s[2] = s[0] + 1, s[1] + dur, s[2] + dur - child
    return {k: (n, round(wall / 1000, 3), round(own / 1000, 3)) for k, (n, wall, own) in stats.items()}


def _findings(run_dir: Path) -> dict[str, int]:
    manifest = json.loads((Path(run_dir) / "manifest.json").read_text())
    return {f["rule"]: f["count"] for s in manifest["sources"] for f in s.get("info", {}).get("findings", [])}


@pytest.fixture(scope="module", params=sorted(CATAPULT))
def catapult(request, tmp_path_factory):
    """(raw events, imported run directory) of one Catapult fixture."""
    path = fixture_path("chrome", request.param, CATAPULT[request.param])
    run_dir = prof_engine.import_trace([path], tmp_path_factory.mktemp(request.param) / "run")
    return request.param, load_events(path)[1], Path(run_dir)


def test_slice_statistic_is_the_raw_jsons(catapult):
    name, events, run_dir = catapult
    slices, _, _ = _slices_of(events)
    with prof_engine.open(run_dir) as run:
        rows = run.sql(f"SELECT {COLUMNS} FROM slice_statistic").rows()
    got = {(p, t, n): (c, wall, own) for p, t, n, c, wall, own in rows}
    assert got == _statistics(slices) and got, name


def test_begins_never_ended_and_ends_of_nothing_are_findings(catapult):
    name, events, run_dir = catapult
    _, unclosed, unmatched = _slices_of(events)
    expected = {
        "catapult_flow": (3, 0),
        "catapult_main_thread_has_unclosed_slices": (4, 0),
        "catapult_nestable_async": (1, 1),
        "catapult_x_event_trace": (0, 0),
    }[name]
    assert (unclosed, unmatched) == expected
    found = _findings(run_dir)
    assert (found.get("unclosed_slices", 0), found.get("unmatched_ends", 0)) == expected


def test_nestable_async_events_are_tracks_of_their_own(tmp_path):
    """Catapult's nestable_async.json, as Trace Compass' test of it shows it: a b with no e of its
    name ends with its parent (UNMATCHED_BEGIN, 80-100 µs); an e with no b is dropped."""
    path = fixture_path("chrome", "catapult_nestable_async", "nestable_async.json")
    with prof_engine.open(prof_engine.import_trace([path], tmp_path / "run")) as run:
        rows = run.sql(f'SELECT {COLUMNS} FROM slice_statistic ORDER BY "Thread", "Name"').rows()
        marks = run.sql("SELECT name, tid FROM marks ORDER BY ts").rows()
    bar, foo = "async:bar:0x313", "async:foo:0x314"
    assert rows == [
        ("26037", bar, "REQUEST_BAR", 1, 90.0, 30.0),  # 10-100, less 20-30, 40-70, 80-100
        ("26037", bar, "URL_REQUEST_DELEGATE", 1, 10.0, 10.0),
        ("26037", bar, "URL_REQUEST_DELEGATE_UNMATCHED_BEGIN", 1, 20.0, 20.0),
        ("26037", bar, "URL_REQUEST_INNER", 1, 10.0, 10.0),
        ("26037", bar, "URL_REQUEST_START_JOB", 1, 30.0, 20.0),
        ("26037", foo, "REQUEST_FOO", 1, 90.0, 50.0),
        ("26037", foo, "URL_REQUEST_DELEGATE", 1, 10.0, 10.0),
        ("26037", foo, "URL_REQUEST_INNER", 1, 10.0, 10.0),
        ("26037", foo, "URL_REQUEST_START_JOB", 1, 30.0, 20.0),
    ]
    assert marks == [("URL_REQUEST_INSTANT", bar), ("URL_REQUEST_INSTANT", foo)]


BASE = 1_700_000_000_000_000  # µs


def test_slice_statistic_nests_every_slice_of_a_track(tmp_path):
    """A thread of B/E and X slices of no known category, and a B never ended:

    a  |------------------------|          0-100 (X)
    b     |------|                         10-40 (B/E)
    c     |--|                             10-20, nested in b (longer first at equal starts)
    d             |----|                   40-60: touches b's end, so a's child, not b's
    z                  |                   60, zero length
    u                         |---...      90, never ended: closed at the latest end of its thread's
                                           events read after it (a's end, 100)
    """
    events = [
        {"ph": "B", "name": "b", "cat": "x", "ts": BASE + 10, "pid": 1, "tid": 1},
        x("c", BASE + 10, 10, cat="x"),
        {"ph": "E", "ts": BASE + 40, "pid": 1, "tid": 1},
        x("d", BASE + 40, 20, cat="x"),
        x("z", BASE + 60, 0, cat="x"),
        {"ph": "B", "name": "u", "cat": "x", "ts": BASE + 90, "pid": 1, "tid": 1},
        {"ph": "E", "ts": BASE + 95, "pid": 1, "tid": 2},  # another thread's E: closes nothing
        x("a", BASE, 100, cat="toplevel"),
    ]  # written when it ended, as Chrome writes X events
    run_dir = prof_engine.import_trace([write_trace(tmp_path / "t.json", events)], tmp_path / "run")
    with prof_engine.open(run_dir) as run:
        rows = run.sql(f'SELECT {COLUMNS} FROM slice_statistic ORDER BY "Name"').rows()
    assert rows == [
        ("1", "1", "a", 1, 100.0, 40.0),
        ("1", "1", "b", 1, 30.0, 20.0),
        ("1", "1", "c", 1, 10.0, 10.0),
        ("1", "1", "d", 1, 20.0, 20.0),
        ("1", "1", "u", 1, 10.0, 10.0),
        ("1", "1", "z", 1, 0.0, 0.0),
    ]
    found = _findings(run_dir)
    assert (found["unclosed_slices"], found["unmatched_ends"]) == (1, 1)


def _paired_events() -> list[dict]:
    """B/E and async pairs among X slices: a B left open across many chunks of X events, async
    b/e/n with `id` and `id2`, legacy S/T/F, ends of nothing."""
    ev = [
        {"ph": "B", "name": "open forever", "ts": BASE, "pid": 1, "tid": 1},
        {"ph": "b", "cat": "net", "name": "req", "id": "0x1", "ts": BASE + 1, "pid": 1, "tid": 1},
        {"ph": "b", "cat": "net", "name": "inner", "id": "0x1", "ts": BASE + 2, "pid": 1, "tid": 2},
        {"ph": "n", "cat": "net", "name": "mark", "id": "0x1", "ts": BASE + 3, "pid": 1, "tid": 2},
        {"ph": "e", "cat": "net", "name": "inner", "id": "0x1", "ts": BASE + 4, "pid": 1, "tid": 2},
        {"ph": "b", "cat": "net", "name": "g", "id2": {"global": "7"}, "ts": BASE + 5, "pid": 1, "tid": 1},
        {"ph": "e", "cat": "net", "name": "g", "id2": {"global": "7"}, "ts": BASE + 9, "pid": 2, "tid": 5},
        {"ph": "b", "cat": "net", "name": "l", "id2": {"local": "7"}, "ts": BASE + 5, "pid": 1, "tid": 1},
        {"ph": "S", "cat": "cc", "name": "Task", "id": 3, "ts": BASE + 6, "pid": 1, "tid": 1},
        {"ph": "T", "cat": "cc", "name": "Task", "id": 3, "ts": BASE + 7, "pid": 1, "tid": 1, "args": {"step": "s1"}},
        {"ph": "F", "cat": "cc", "name": "Task", "id": 3, "ts": BASE + 8, "pid": 1, "tid": 1},
        {"ph": "e", "cat": "net", "name": "nothing", "id": "0x9", "ts": BASE + 8, "pid": 1, "tid": 1},
        {"ph": "E", "ts": BASE + 8, "pid": 9, "tid": 9},
    ]
    ev += [x(f"op{i}", BASE + 10 + i, 0.5, cat="x") for i in range(40)]
    ev += [x("last", BASE + 60, 5, cat="x", tid=1), {"ph": "i", "name": "late", "ts": BASE + 70, "pid": 1, "tid": 2}]
    return ev


@pytest.mark.skipif(_native.load() is None, reason="no C compiler here: the native scanner is not built")
@pytest.mark.parametrize("chunk_bytes, cap", [(64, 2), (700, 5), (1 << 20, 1 << 15)])
def test_native_and_python_paths_pair_alike(tmp_path, monkeypatch, chunk_bytes, cap):
    """Chunks cut anywhere: the open B's end (its thread's last event, 65 µs on) is found from both
    chunk sources alike; an async begin never ended closes at its track's last event (req: 4 µs)."""
    path = write_trace(tmp_path / "t.json", _paired_events())
    monkeypatch.setattr(scan, "CAP", cap)

    def convert(native: bool) -> dict:
        """The converter over the native (True) or Python (False) chunks."""
        rows: dict[str, list] = {}
        reader = ChromeTraceReader(path, chunk_bytes=chunk_bytes)
        conv = chrome.ChromeConverter(0, lambda t, b: rows.setdefault(t, []).extend(b.to_pylist()))
        for chunk in scan.Scanner(reader).chunks() if native else pychunks.chunks(reader):
            conv.feed(chunk)
        conv.finish()
        return {"findings": chrome.anomalies(conv), **rows}

    native = convert(True)
    assert native == convert(False)
    slices = {(r["name"], r["tid"]): r["dur"] for r in native["slices"]}
    assert slices[("open forever", "1")] == 65_000 and slices[("req", "async:net:0x1")] == 3_000
    assert slices[("inner", "async:net:0x1")] == 2_000 and slices[("g", "async:net:7")] == 4_000
    assert slices[("Task", "async:cc:Task:3")] == 2_000 and ("l", "async:net:7") in slices
    assert {(r["name"], r["tid"]) for r in native["marks"]} >= {("mark", "async:net:0x1"), ("Task", "async:cc:Task:3")}
    found = {f["rule"]: f["count"] for f in native["findings"]["findings"]}
    assert found == {"unclosed_slices": 3, "unmatched_ends": 2, "unknown_categories": found["unknown_categories"]}


def test_a_directory_of_gzipped_traces_imports_them(tmp_path):
    """`.json.gz` in a directory, whatever the case of its suffix, and a trace object whose keys
    before `traceEvents` (a large `metadata`) outrun the 64 KiB that detection sniffs."""
    src = fixture_path("chrome", "catapult_x_event_trace", "x_event_trace.json")
    events = load_events(src)[1]
    folder = tmp_path / "traces" / "host"
    folder.mkdir(parents=True)
    (folder / "PROVENANCE.md").write_text("notes")
    with gzip.open(folder / "A.TRACE.JSON.GZ", "wb") as f:
        f.write(src.read_bytes())
    big_meta = {"metadata": {"command_line": "x" * 100_000}, "traceEvents": json.loads(src.read_text())}
    with gzip.open(folder / "b.json.gz", "wt", encoding="utf-8") as f:
        json.dump(big_meta, f)
    run_dir = prof_engine.import_trace([tmp_path / "traces"], tmp_path / "run")
    expected = len(_slices_of(events)[0])
    with prof_engine.open(run_dir) as run:
        got = run.sql('SELECT "Rank", sum("Occurrences") FROM slice_statistic GROUP BY ALL ORDER BY 1').rows()
    assert got == [(0, expected), (1, expected)]


def test_timeline_keeps_async_tracks_apart_from_the_threads_their_ids_look_like(tmp_path):
    """An async track `async:cat:0x313` and thread 313 of the same process are two lanes in the
    exported timeline (the track's trailing digits are not a tid)."""
    events = [
        {"ph": "X", "name": "on_thread", "pid": 1, "tid": 313, "ts": BASE, "dur": 10, "cat": "c"},
        {"ph": "b", "name": "on_track", "pid": 1, "tid": 313, "ts": BASE + 1, "cat": "cat", "id": "0x313"},
        {"ph": "e", "name": "on_track", "pid": 1, "tid": 313, "ts": BASE + 5, "cat": "cat", "id": "0x313"},
    ]
    trace = tmp_path / "t.json"
    trace.write_text(json.dumps({"traceEvents": events}), encoding="utf-8")
    with prof_engine.open(prof_engine.import_trace([trace], tmp_path / "run")) as run:
        out = run.export_timeline(tmp_path / "timeline.json")
    exported = json.loads(out.read_text(encoding="utf-8"))
    exported = exported["traceEvents"] if isinstance(exported, dict) else exported
    names = {e["args"]["name"]: e["tid"] for e in exported if e.get("name") == "thread_name" and e["pid"] == 0}
    tids = {e["name"]: e["tid"] for e in exported if e.get("ph") == "X" and e["name"] in ("on_thread", "on_track")}
    assert names["313"] == tids["on_thread"] == 313
    assert tids["on_track"] == names["async:cat:0x313"] != 313
