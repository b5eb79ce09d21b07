"""Issue 38 item 7: a folder of mixed sources drops nothing without a word.

Every file of an imported directory is imported or listed as left out with its reason (stderr,
the manifest's `left_out`, the `unread_files` rule); sources that are not one job (Ascend output
beside Kineto traces, different world sizes, hosts of rank-less traces, times far apart) are
refused in one line unless `--merge-unrelated`. The oracle is the folder's own listing.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

import prof_engine
from conftest import fixture_path, write_trace, x
from prof_engine.cli import app
from prof_engine.errors import InputError


def _kineto(path: Path, rank: int | None, world: int = 2, ts: float = 1000.0, host: str | None = None) -> Path:
    top: dict = {} if rank is None else {"distributedInfo": {"rank": rank, "world_size": world}}
    if host:
        top["host_name"] = host
    path.parent.mkdir(parents=True, exist_ok=True)
    return write_trace(path, [x("aten::mm", ts, 5), x("aten::add", ts + 10, 3)], **top)


def _ascend_rank(root: Path, rank: int) -> Path:
    """A torch_npu rank directory as the detector sees it: ASCEND_PROFILER_OUTPUT/ and its
    profiler_info (conversion is not reached: the mix is refused first)."""
    d = root / f"rank{rank}_ascend_pt"
    (d / "ASCEND_PROFILER_OUTPUT").mkdir(parents=True)
    (d / f"profiler_info_{rank}.json").write_text("{}", encoding="utf-8")
    (d / "ASCEND_PROFILER_OUTPUT" / "trace_view.json").write_text("[]", encoding="utf-8")
    return d


def _imp(sources: list[Path], out: Path, **kw) -> Path:
    return prof_engine.import_trace(sources, out, jobs=1, **kw)


def _cli(*args: str):
    """The CLI in this process (`main` turns a raised ProfEngineError into its one `Error:` line)."""
    return CliRunner().invoke(app, [*args, "--jobs", "1"], env={"COLUMNS": "200"})


def test_a_folder_of_one_jobs_kineto_traces_imports_every_one_and_lists_the_rest(tmp_path, monkeypatch):
    src = tmp_path / "job"
    for r in range(4):
        _kineto(src / ("nested" if r % 2 else "") / f"rank{r}.json", r, world=4)
    (src / "config.json").write_text('{"lr": 0.1}', encoding="utf-8")
    (src / "metrics.csv").write_text("a,b\n1,2\n", encoding="utf-8")
    (src / "notes.bin").write_bytes(b"\0\1")
    (src / "README.md").write_text("docs are never data", encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    res = _cli("import", "job", "-o", "run")
    assert res.exit_code == 0, res.output
    # the oracle: the folder's own listing, less the traces and the documentation
    listed = sorted(p.name for p in src.rglob("*") if p.is_file())
    traces = sorted(p.name for p in src.rglob("rank*.json"))
    assert len(traces) == 4 and "imported 4 file(s)" in res.output
    with prof_engine.open(tmp_path / "run") as run:
        left = run.manifest["left_out"]
        assert sorted(Path(e["path"]).name for e in left) == sorted(set(listed) - set(traces) - {"README.md"})
        assert run.manifest["ranks"] == [0, 1, 2, 3]
        rows = {r[2]: r for r in run.quality().rows()}
        assert rows["unread_files"][3] == 3 and rows["unread_files"][8] == "note"
    reasons = {Path(e["path"]).name: e["reason"] for e in left}
    assert "traceEvents" in reasons["config.json"] and "CSV" in reasons["metrics.csv"]
    for name in ("config.json", "metrics.csv", "notes.bin"):
        assert name in res.output  # said at import, on stderr
    assert "Note: left out 1 file(s)" in res.output


def test_ascend_output_beside_kineto_traces_is_refused_naming_both(tmp_path):
    src = tmp_path / "mixed"
    for r in range(2):
        _ascend_rank(src, r)
    for r in range(3):
        _kineto(src / "kineto" / f"r{r}.json", r, world=3)
    with pytest.raises(InputError) as e:
        _imp([src], tmp_path / "run")
    msg = str(e.value)
    assert "\n" not in msg and "two jobs" in msg
    assert "2 unit(s)" in msg and "3 Kineto/Chrome trace(s)" in msg
    # how to import each: the Kineto traces' own folder, the rank directories by name
    assert f"prof-engine import {src / 'kineto'} -o" in msg
    assert str(src / "rank0_ascend_pt") in msg and "--merge-unrelated" in msg
    assert not (tmp_path / "run").exists()
    # one CLI line, exit 1, no traceback
    res = _cli("import", str(src), "-o", str(tmp_path / "run"))
    assert res.exit_code == 1 and isinstance(res.exception, InputError) and "two jobs" in str(res.exception)


def test_real_ascend_ranks_beside_kineto_traces(tmp_path):
    """The issue's case on real files: 2 torch_npu ranks and Kineto traces, the Kineto ones
    loose at the top (no folder of their own: named file by file)."""
    fixture = fixture_path("ascend", "torch_npu_2rank_level1_text")
    src = tmp_path / "mixed"
    for r in ("rank0_ascend_pt", "rank1_ascend_pt"):
        shutil.copytree(fixture / r, src / r)
    loose = [_kineto(src / f"t{i}.json", i, world=2) for i in range(2)]
    with pytest.raises(InputError, match="two jobs") as e:
        _imp([src], tmp_path / "run")
    assert all(str(p) in str(e.value) for p in loose)
    # the Ascend job alone still imports as before
    with prof_engine.open(_imp([src / "rank0_ascend_pt", src / "rank1_ascend_pt"], tmp_path / "a")) as run:
        assert run.manifest["ranks"] == [0, 1] and run.manifest["left_out"] == []


def test_unrelated_traces_given_as_arguments_are_refused_unless_asked(tmp_path):
    a = _kineto(tmp_path / "a.json", 0, world=2)
    b = _kineto(tmp_path / "b.json", 1, world=8)
    with pytest.raises(InputError, match=r"not one job: world sizes 2, 8") as e:
        _imp([a, b], tmp_path / "run")
    assert "--merge-unrelated" in str(e.value) and not (tmp_path / "run").exists()
    # rank-less traces from two hosts, and two captures an hour apart
    c = _kineto(tmp_path / "c.json", None, host="node-a")
    d = _kineto(tmp_path / "d.json", None, host="node-b")
    with pytest.raises(InputError, match="hosts node-a, node-b"):
        _imp([c, d], tmp_path / "run")
    e_ = _kineto(tmp_path / "e.json", None, ts=1000.0)
    f = _kineto(tmp_path / "f.json", None, ts=1000.0 + 3600e6)
    with pytest.raises(InputError, match=r"f.json starts 3,600 s after"):
        _imp([e_, f], tmp_path / "run")
    # asked for: one run, and data_quality says it merged unrelated sources
    with prof_engine.open(_imp([a, b], tmp_path / "run", merge_unrelated=True)) as run:
        rows = {r[2]: r for r in run.quality().rows()}
        assert "world sizes 2, 8" in rows["unrelated_sources"][6] and rows["unrelated_sources"][8] == "warning"
    res = _cli("import", str(a), str(b), "-o", str(tmp_path / "run2"), "--merge-unrelated")
    assert res.exit_code == 0 and "unrelated_sources" in res.output


def test_a_unit_that_fails_is_counted_in_data_quality(tmp_path):
    src = tmp_path / "job"
    _kineto(src / "r0.json", 0, world=2)
    (src / "r1.json").write_text('{"traceEvents": [{"ph": "X", "ts": "x"', encoding="utf-8")
    with prof_engine.open(_imp([src], tmp_path / "run")) as run:
        assert len(run.manifest["skipped"]) == 1
        rows = {r[2]: r for r in run.quality().rows()}
        assert rows["left_out_units"][3:5] == (1, 2) and "r1.json" in rows["left_out_units"][6]
        assert json.loads((tmp_path / "run" / "manifest.json").read_text())["left_out"] == []
