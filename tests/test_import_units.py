"""Import of many units (files, rank directories): parallel processes, one failure does not lose the rest."""

from __future__ import annotations

import os
import shutil

import pytest

import prof_engine
from conftest import fixture_path


def _rows(run_dir):
    with prof_engine.open(run_dir) as r:
        return r.sql(
            "SELECT rank, kind, count(*), sum(dur), sum(coalesce(step, -1)) FROM slices GROUP BY ALL ORDER BY ALL"
        ).rows()


def test_parallel_equals_sequential(tmp_path, monkeypatch):
    """With --jobs 2 this process converts one unit and one spawned worker the other (no process
    waits idle beside two workers); the run is the one --jobs 1 makes."""
    import prof_engine.importers as importers

    here = []
    convert = importers._convert
    monkeypatch.setattr(importers, "_convert", lambda unit, *a: here.append(unit.path.name) or convert(unit, *a))
    src = fixture_path("kineto", "hta_sampled_2rank_nccl")
    a = prof_engine.import_trace([src], tmp_path / "a", jobs=2)
    assert len(here) == 1  # the other unit went to the worker, where the patch does not reach
    b = prof_engine.import_trace([src], tmp_path / "b", jobs=1)
    assert _rows(a) == _rows(b)
    assert {r for r, *_ in _rows(a)} == {0, 1}


def test_a_bad_unit_is_left_out_and_reported(tmp_path):
    src = tmp_path / "traces"
    shutil.copytree(fixture_path("kineto", "hta_sampled_2rank_nccl"), src)
    (src / "aaa_broken.json").write_text('{"traceEvents": [{"ph": "X"')
    run = prof_engine.import_trace([src], tmp_path / "run", jobs=2)
    with prof_engine.open(run) as r:
        assert r.manifest["ranks"] == [0, 1]
        assert len(r.manifest["skipped"]) == 1 and "aaa_broken.json" in r.manifest["skipped"][0]["error"]
        assert r.manifest["tables"]["slices"] == sum(n for _, _, n, _, _ in _rows(run))
    assert _rows(run) == _rows(
        prof_engine.import_trace([fixture_path("kineto", "hta_sampled_2rank_nccl")], tmp_path / "ref")
    )


def test_units_finalised_apart_add_up_to_the_manifest(tmp_path):
    """Each rank is finalised in its own worker and moved into the run: the manifest's totals,
    devices, steps and span must be those of the files the run holds, and nothing is left over."""
    import duckdb

    from prof_engine.store.builder import summarise
    from prof_engine.store.live import refresh

    run = prof_engine.import_trace([fixture_path("kineto", "hta_sampled_2rank_nccl")], tmp_path / "run", jobs=2)
    with prof_engine.open(run) as r:
        manifest = r.manifest
    assert manifest == refresh(run, manifest)
    assert [d["rank"] for d in manifest["devices"]] == sorted(d["rank"] for d in manifest["devices"])
    assert {s["rank"] for s in manifest["steps"]} == {0, 1}
    assert sorted(p.name for p in run.iterdir()) == sorted(
        ["manifest.json", *(t for t, n in manifest["tables"].items() if n)]
    )
    con = duckdb.connect()
    assert summarise(con, run)["devices"] == manifest["devices"]


def test_a_unit_that_cannot_be_finalised_is_left_out(tmp_path, monkeypatch):
    """Units are finalised one by one: one that runs out of DuckDB's memory is skipped and
    reported like a unit that failed to parse, and the others make the run."""
    from conftest import write_trace, x

    # DuckDB's memory grows with its threads (one per core): on 16 cores the small unit's finalize
    # needs more than 8 MB. Two, as in CI, whatever the machine.
    monkeypatch.setattr(os, "cpu_count", lambda: 2)

    small = [x("ProfilerStep#1", 0, 100, cat="user_annotation"), x("aten::mm", 1, 5)]
    big = [x("ProfilerStep#1", 0, 100_000, cat="user_annotation")] + [x(f"op{i}", 1 + i, 0.5) for i in range(60_000)]
    src = tmp_path / "traces"
    src.mkdir()
    write_trace(src / "a_small.json", small, distributedInfo={"rank": 0})
    write_trace(src / "b_big.json", big, distributedInfo={"rank": 1})
    # 8 MB: enough for the small unit's finalize (at 2 threads), far too little for the big one's
    run = prof_engine.import_trace([src], tmp_path / "run", jobs=1, memory_limit="8MB")
    with prof_engine.open(run) as r:
        assert r.manifest["ranks"] == [0]
        (skipped,) = r.manifest["skipped"]
        assert "b_big.json" in skipped["error"] and "ran out of memory" in skipped["error"]
        assert r.sql("SELECT rank, name FROM slices ORDER BY ts").rows() == [(0, "ProfilerStep#1"), (0, "aten::mm")]
    assert not list(tmp_path.glob(".run.*"))  # no unit's directory is left beside the run


PANDAS_IN_THE_CLI = """
import sys
from prof_engine._entry import main
sys.argv = ["prof-engine", "import", *sys.argv[1:]]
try:
    main()
except SystemExit as e:
    assert not e.code, e.code
assert "pandas" not in sys.modules, "pandas imported by an import"
print("no pandas")
"""


@pytest.mark.parametrize("jobs", ["1", "2"])
def test_cli_imports_leave_pandas_out(tmp_path, jobs):
    """pyarrow would import pandas (~0.3 s, ~30 MiB of a 100 MB import) at its first conversion of
    a Python value; `prof-engine import` keeps it out of its process and its workers
    (`prof_engine._no_pandas`). A library call leaves the caller's imports alone
    (test_library_hygiene)."""
    import subprocess
    import sys

    from conftest import write_trace, x

    traces = [
        write_trace(
            tmp_path / f"rank{r}.json",
            [x("ProfilerStep#1", 0, 100, cat="user_annotation"), x("aten::mm", 10, 50)],
            distributedInfo={"rank": r},
        )
        for r in (0, 1)
    ]
    p = subprocess.run(
        [sys.executable, "-c", PANDAS_IN_THE_CLI, *map(str, traces), "-o", str(tmp_path / "run"), "--jobs", jobs],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert p.returncode == 0, p.stderr[-2000:]
    assert p.stdout.split() == ["no", "pandas"]


def test_nothing_to_import_is_an_error_and_one_path_is_a_source(tmp_path):
    """import_trace([]) made an empty run; a lone path (not in a list) was read as its characters."""
    from prof_engine.errors import InputError

    with pytest.raises(InputError, match="nothing to import"):
        prof_engine.import_trace([], tmp_path / "empty")
    assert not (tmp_path / "empty").exists()
    src = fixture_path("kineto", "hta_sampled_2rank_nccl")
    assert _rows(prof_engine.import_trace(str(src), tmp_path / "one")) == _rows(
        prof_engine.import_trace([src], tmp_path / "two")
    )


def test_a_units_finalize_takes_at_most_four_threads(tmp_path, monkeypatch):
    """On many cores one unit's finalize does not take a DuckDB thread per core: each thread holds
    buffers within the unit's memory limit (on 16 cores a 200 MB trace ran out of its 96 MB), and
    past 4 threads it was no faster."""
    from conftest import write_trace, x
    from prof_engine import importers

    seen = []
    finalize = importers.finalize_unit

    def spy(*args, threads=None, **kwargs):
        seen.append(threads)
        return finalize(*args, threads=threads, **kwargs)

    monkeypatch.setattr(importers, "finalize_unit", spy)
    trace = write_trace(tmp_path / "t.json", [x("ProfilerStep#1", 0, 100, cat="user_annotation"), x("aten::mm", 1, 5)])
    for cores, want in ((16, 4), (3, 3)):
        monkeypatch.setattr(os, "cpu_count", lambda cores=cores: cores)
        prof_engine.import_trace([trace], tmp_path / "run", jobs=1, force=True)
        assert seen.pop() == want
