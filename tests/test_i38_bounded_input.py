"""Issue 38 item 18: bounded work on hostile or large inputs.

A gzip that expands far beyond any trace is refused by its ratio, early (not after reading
gigabytes); an event or padding too large to be real is refused in one line by both readers
(the native scanner and the pure-Python one); a name too long to be real is cut and counted.
The oracles are the bytes the test wrote (their sizes, the name it made).
"""

from __future__ import annotations

import json
import zlib
from pathlib import Path

import pytest

import prof_engine
from prof_engine import _native
from prof_engine.errors import InputError
from prof_engine.importers import chrome, jsonstream, scan


def _bomb(path: Path, head: bytes, mib: int) -> Path:
    """A gzip of `head` then `mib` MiB of spaces, at deflate's best ratio (~1000x), made from one
    compressed MiB repeated (full flushes make the segments independent): no trailer is needed,
    the reader must stop long before the end."""
    co = zlib.compressobj(9, zlib.DEFLATED, 31)
    segment_start = co.compress(head) + co.flush(zlib.Z_FULL_FLUSH)
    segment = co.compress(b" " * (1 << 20)) + co.flush(zlib.Z_FULL_FLUSH)
    path.write_bytes(segment_start + segment * mib)
    return path


def _modes():
    return [True, False] if _native.load() is not None else [False]


@pytest.mark.parametrize("native", _modes())
def test_a_gzip_bomb_is_refused_by_its_ratio_early(tmp_path, monkeypatch, native):
    monkeypatch.setattr(scan, "available", lambda: native)
    monkeypatch.setattr(jsonstream, "RATIO_AFTER", 4 << 20)
    path = _bomb(tmp_path / "bomb.json.gz", b'{"traceEvents": [', 4096)  # 4 GiB of spaces in ~4 MB
    read = []
    reader = jsonstream.ChromeTraceReader(path, chunk_bytes=1 << 20, progress=read.append)
    with pytest.raises(InputError, match=r"gzip expands [\d,]+x .* refused as a decompression bomb") as e:
        for _ in scan.Scanner(reader).chunks() if native else reader.chunks():
            pass
    assert str(path) in str(e.value) and "\n" not in str(e.value)
    assert sum(read) < 16 << 20  # stopped within a few MiB of the limit, not after gigabytes
    with pytest.raises(InputError, match="decompression bomb"):
        prof_engine.import_trace([path], tmp_path / "run", jobs=1)
    assert not (tmp_path / "run").exists()


def test_real_traces_are_far_below_the_ratio_limit(tmp_path):
    events = [
        {"ph": "X", "name": "aten::mm", "cat": "cpu_op", "pid": 1, "tid": 1, "ts": i, "dur": 1, "args": {}}
        for i in range(50_000)
    ]
    raw = json.dumps({"traceEvents": events}).encode()
    co = zlib.compressobj(9, zlib.DEFLATED, 31)
    packed = co.compress(raw) + co.flush()
    assert len(raw) / len(packed) < jsonstream.MAX_RATIO / 4  # even this repetitive one: ~40x


@pytest.mark.parametrize("native", _modes())
def test_an_event_or_padding_too_large_is_refused_by_both_readers(tmp_path, monkeypatch, native):
    monkeypatch.setattr(scan, "available", lambda: native)
    monkeypatch.setattr(jsonstream, "_MAX_EVENT", 1 << 20)
    ev = {"ph": "X", "name": "a", "pid": 1, "tid": 1, "ts": 1, "dur": 1}
    huge = dict(ev, name="n" * (3 << 20))
    for i, body in enumerate(
        (
            json.dumps([ev, huge, ev]),  # one 3 MiB event
            "[" + json.dumps(ev) + "," + " " * (3 << 20) + json.dumps(ev) + "]",  # padding between events
        )
    ):
        path = tmp_path / f"t{i}.json"
        path.write_text(body)
        reader = jsonstream.ChromeTraceReader(path, chunk_bytes=256 << 10)
        with pytest.raises(InputError, match=r"no event ends in \d+ MiB before byte \d+: an event over 1 MiB"):
            for _ in scan.Scanner(reader).chunks() if native else reader.chunks():
                pass
    # padding after the event array: refused, not held
    monkeypatch.setattr(jsonstream, "_MAX_HEADER", 1 << 20)
    path = tmp_path / "tail.json"
    path.write_text('{"traceEvents": [' + json.dumps(ev) + "]" + " " * (3 << 20) + "}")
    reader = jsonstream.ChromeTraceReader(path, chunk_bytes=256 << 10)
    with pytest.raises(InputError):
        for _ in scan.Scanner(reader).chunks() if native else reader.chunks():
            pass


@pytest.mark.parametrize("native", _modes())
def test_a_name_too_long_is_cut_and_counted(tmp_path, monkeypatch, native):
    monkeypatch.setattr(scan, "available", lambda: native)
    monkeypatch.setattr(chrome, "MAX_NAME", 1000)
    long_name = "kernel<" + "x" * (2 << 20) + ">"
    events = [
        {"ph": "X", "cat": "cpu_op", "name": long_name, "pid": 1, "tid": 1, "ts": 10, "dur": 5, "args": {}},
        {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 20, "dur": 5, "args": {}},
    ]
    path = tmp_path / "t.json"
    path.write_text(json.dumps({"schemaVersion": 1, "traceEvents": events}))
    with prof_engine.open(prof_engine.import_trace([path], tmp_path / "run", jobs=1)) as run:
        names = sorted(run.sql("select name from slices").arrow().to_pylist(), key=lambda r: len(r["name"]))
        assert names[0]["name"] == "aten::mm" and names[1]["name"] == long_name[:1000]
        rows = {r[2]: r for r in run.quality().rows()}
        assert rows["long_names_cut"][3] == 1 and "kernel<xxx" in rows["long_names_cut"][6]


def test_many_small_traces_are_finalised_together(tmp_path, monkeypatch):
    """Finalising has a fixed cost per call: 40 tiny traces take one call, not 40, and each
    source keeps its own rows (the oracle: the events each file holds)."""
    from prof_engine import importers
    from prof_engine.store import builder

    src = tmp_path / "job"
    src.mkdir()
    for r in range(40):
        events = [
            {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 1000 + r, "dur": 5, "args": {}}
        ] * (1 + r % 3)
        doc = {"schemaVersion": 1, "distributedInfo": {"rank": r, "world_size": 40}, "traceEvents": events}
        (src / f"r{r}.json").write_text(json.dumps(doc))
    (src / "r7.json").write_text('{"traceEvents": [{"ph": "X", "ts": "x"')  # a bad one is left out alone
    calls = []
    real = builder.finalize_unit
    monkeypatch.setattr(importers, "finalize_unit", lambda *a, **k: calls.append(a) or real(*a, **k))
    with prof_engine.open(prof_engine.import_trace([src], tmp_path / "run", jobs=1)) as run:
        assert len(calls) == 1 and len(calls[0][1]) == 39
        m = run.manifest
        assert m["ranks"] == [r for r in range(40) if r != 7] and len(m["skipped"]) == 1
        assert {s["rank"]: s["rows"]["slices"] for s in m["sources"]} == {r: 1 + r % 3 for r in range(40) if r != 7}
        assert m["tables"]["slices"] == sum(1 + r % 3 for r in range(40) if r != 7)
    # with two workers: a batch each
    assert importers.batches([importers.Source(src / "a.json", "chrome")] * 200, [100] * 200, 2) == [
        list(range(100)),
        list(range(100, 200)),
    ]


def test_a_batch_of_small_traces_has_no_fixed_cost_per_trace(tmp_path, monkeypatch):
    """What a trace's import costs whatever its size is paid once per batch, not per trace: its
    staging files (one per table for the batch), the staging writer's thread (none), the
    scanner's read buffer (the file's own size, not a read's 10 MB). Counted, not timed. A trace
    the outlier rule trims is staged apart and trimmed as if alone."""
    from prof_engine import importers
    from prof_engine.store import builder

    src = tmp_path / "job"
    src.mkdir()
    n = 30
    for r in range(n):
        events = [
            {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#1", "pid": 1, "tid": 1, "ts": 1000, "dur": 50},
            {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 1001 + r, "dur": 5, "args": {}},
            {"ph": "X", "cat": "kernel", "name": "gemm", "pid": 0, "tid": 7, "ts": 1010, "dur": 3, "args": {}},
            {"ph": "i", "cat": "cpu_instant_event", "name": "[memory]", "pid": 1, "tid": 1, "ts": 1002, "s": "t"},
        ]
        if r == 3:  # one kernel an hour after 200 ops: this trace is staged apart, the kernel dropped and said
            events += [
                {"ph": "X", "cat": "cpu_op", "name": "aten::add", "pid": 1, "tid": 2, "ts": 1000 + i, "dur": 1}
                for i in range(200)
            ]
            events.append({"ph": "X", "cat": "kernel", "name": "late", "pid": 0, "tid": 7, "ts": 3.6e9, "dur": 3})
        doc = {"schemaVersion": 1, "distributedInfo": {"rank": r, "world_size": n}, "traceEvents": events}
        (src / f"r{r}.json").write_text(json.dumps(doc))
    staged_files, pools, buffers = [], [], []
    real_finalize, real_pool, real_buffer = builder.finalize_unit, builder.ThreadPoolExecutor, scan._Buffer

    def finalize(unit, *a, **k):
        staged_files.append(sorted(p.parent.name for p in (Path(unit) / "staging").glob("*/*.parquet")))
        return real_finalize(unit, *a, **k)

    def pool(*a, **k):
        pools.append(k.get("thread_name_prefix"))
        return real_pool(*a, **k)

    monkeypatch.setattr(importers, "finalize_unit", finalize)
    monkeypatch.setattr(builder, "ThreadPoolExecutor", pool)
    monkeypatch.setattr(scan, "_Buffer", lambda size: buffers.append(size) or real_buffer(size))
    with prof_engine.open(prof_engine.import_trace([src], tmp_path / "run", jobs=1)) as run:
        assert run.manifest["tables"]["slices"] == 3 * n + 200  # the oracle: the X events written, less "late"
        rule = {r[2]: r for r in run.quality().rows()}["values_out_of_range"]
        assert rule[3] == 1 and "'late'" in rule[6]
    # a file per table for the batch (and the trace with an outlier's own, as when alone)
    assert len(staged_files) == 1 and len(staged_files[0]) <= 2 * len(set(staged_files[0]))
    assert staged_files[0].count("slices") == 2
    assert "prof-engine-stage" not in pools  # no staging thread per trace
    sizes = {p.stat().st_size for p in src.iterdir()}
    assert len(buffers) == n and max(buffers) <= max(sizes)


def test_small_traces_store_the_same_rows_batched_or_alone(tmp_path, monkeypatch):
    """A 2-rank Kineto job imported as one batch and a trace at a time stores the same rows in
    every table, and the manifest counts the same rows and span per source."""
    from conftest import fixture_path, stored_rows
    from prof_engine import importers, schema

    src = fixture_path("kineto", "hta_sampled_2rank_nccl")
    batched = prof_engine.import_trace([src], tmp_path / "batched", jobs=1)
    monkeypatch.setattr(importers, "SMALL_TRACE", 0)  # every trace a unit of its own
    alone = prof_engine.import_trace([src], tmp_path / "alone", jobs=1)
    for table in schema.stored_tables():
        assert stored_rows(batched, table) == stored_rows(alone, table), table
    m1, m2 = (json.loads((r / "manifest.json").read_text()) for r in (batched, alone))
    keys = ("path", "rank", "rows", "info")
    assert [{k: s[k] for k in keys} for s in m1["sources"]] == [{k: s[k] for k in keys} for s in m2["sources"]]
    for key in ("tables", "devices", "steps", "start_ns", "end_ns", "ranks"):
        assert m1[key] == m2[key], key


def test_process_groups_every_rank_lists_are_stored_once(tmp_path):
    """Each rank of a Kineto job lists every process group with all its member ranks
    (`distributedInfo.pg_config`): N ranks wrote N^2 values into the manifest (3,000 ranks: 57 of
    130 MB, a minute to write). The manifest keeps each distinct group once (`process_groups`) and
    each source its groups' places there; reading a source back gives the file's own list (the
    oracle: the JSON each file holds)."""
    from prof_engine.store.manifest import own_process_groups

    n, src = 12, tmp_path / "job"
    src.mkdir()
    written = {}
    for r in range(n):
        groups = [
            {
                "pg_name": "0",
                "pg_desc": "default_pg",
                "backend_config": "cuda:nccl",
                "pg_size": n,
                "ranks": list(range(n)),
            },
            {
                "pg_name": "1",
                "pg_desc": "tp",
                "backend_config": "cuda:nccl",
                "pg_size": 2,
                "ranks": [r - r % 2, r - r % 2 + 1],
            },
        ]
        written[r] = groups
        step = {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#1", "pid": 1, "tid": 1, "ts": 1000, "dur": 9}
        doc = {
            "schemaVersion": 1,
            "distributedInfo": {"backend": "nccl", "rank": r, "world_size": n, "pg_count": 2, "pg_config": groups},
            "traceEvents": [step],
        }
        (src / f"r{r}.json").write_text(json.dumps(doc))
    run = prof_engine.import_trace([src], tmp_path / "run", jobs=1)
    m = json.loads((run / "manifest.json").read_text())
    assert len(m["process_groups"]) == 1 + n // 2  # the default group once, each pair's group once
    for s in m["sources"]:
        refs = s["info"]["distributedInfo"]["pg_config"]
        assert all(isinstance(i, int) for i in refs)
        assert own_process_groups(s, m["process_groups"])["info"]["distributedInfo"]["pg_config"] == written[s["rank"]]
        assert s["info"]["distributedInfo"]["world_size"] == n
