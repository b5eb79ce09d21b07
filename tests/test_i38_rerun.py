"""Re-running a script that records with `prof_engine.Profiler("run", ...)` (issue 38, item 8).

The second run of the same script failed with a traceback before its first step (`run` exists).
It now records into the same path and replaces the last run there once the new one is complete,
saying so in one line; a path holding anything else than a prof-engine run is refused in one line
and left exactly as it was. The oracle: the marks each run recorded (the script's own strings),
the run's id, and the files of the user's directory before and after.
"""

from __future__ import annotations

import json

import pytest

import prof_engine
from prof_engine import mstx
from prof_engine.collect import profiler as profiler_module
from prof_engine.errors import RunError


def _script(path, mark: str, monkeypatch, during=None) -> None:
    """The user's script, as a fresh process runs it (no Profiler of this process recorded yet)."""
    monkeypatch.setattr(profiler_module, "_outputs_used", {})
    schedule = prof_engine.schedule(wait=0, warmup=0, active=2)
    with prof_engine.Profiler(path, profiler_level="Level_none", schedule=schedule) as prof:
        if during is not None:
            during()
        for _ in range(2):
            mstx.mark(mark)
            prof.step()


def _messages(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "prof_engine"]


def test_a_rerun_replaces_the_last_run_once_complete_and_says_so(tmp_path, monkeypatch, caplog):
    run = tmp_path / "run"
    _script(run, "first", monkeypatch)
    first = json.loads((run / "manifest.json").read_text())

    def old_run_set_aside() -> None:  # while the new run records: renamed beside it, not deleted
        aside = [p for p in tmp_path.iterdir() if p.name != "run"]
        assert len(aside) == 1 and aside[0].name.startswith(".run.replaced-")
        assert json.loads((aside[0] / "manifest.json").read_text())["id"] == first["id"]

    with caplog.at_level("INFO", logger="prof_engine"):
        _script(run, "second", monkeypatch, during=old_run_set_aside)
    second = json.loads((run / "manifest.json").read_text())
    assert second["id"] != first["id"] and second["state"] == "complete"
    with prof_engine.open(run) as r:
        assert r.sql("SELECT DISTINCT name FROM marks").rows() == [("second",)]
    assert _messages(caplog) == [f"prof_engine: replaced run {run} (recorded {first['created']})"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run"]  # the old run is gone, nothing set aside is left


@pytest.mark.parametrize("kind", ["files", "web_manifest", "file"])
def test_a_path_that_is_not_a_run_is_refused_untouched(tmp_path, monkeypatch, kind):
    mine = tmp_path / "mine"
    if kind == "file":
        mine.write_text("my notes\n")
    else:
        mine.mkdir()
        (mine / "notes.txt").write_text("my notes\n")
        if kind == "web_manifest":  # a manifest.json that is not prof-engine's
            (mine / "manifest.json").write_text('{"name": "my app", "icons": []}')
    before = sorted((p.relative_to(tmp_path), p.read_bytes()) for p in tmp_path.rglob("*") if p.is_file())
    monkeypatch.setattr(profiler_module, "_outputs_used", {})
    with pytest.raises(RunError) as e:
        prof_engine.Profiler(mine, profiler_level="Level_none")
    assert str(e.value) == (
        f"{mine}: exists and is not a prof-engine run; refusing to record into it (nothing there was changed): "
        "choose another output path"
    )
    after = sorted((p.relative_to(tmp_path), p.read_bytes()) for p in tmp_path.rglob("*") if p.is_file())
    assert after == before and sorted(p.name for p in tmp_path.iterdir()) == ["mine"]
    assert profiler_module._running is None  # a later Profiler may record


def test_force_never_deletes_a_folder_that_merely_holds_a_manifest(tmp_path):
    """`import --force`, `collect --force` and `LiveRun(force=True)` replace a prof-engine run or an
    empty directory only: a web app's `manifest.json` does not make a folder a run (the three used
    to test for the file alone). The oracle: the folder's files, untouched."""
    from prof_engine.collect.launch import _claim
    from prof_engine.store.builder import RunBuilder
    from prof_engine.store.live import LiveRun

    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "manifest.json").write_text('{"name": "my app", "icons": []}')
    (mine / "notes.txt").write_text("my notes\n")
    before = sorted((p.name, p.read_bytes()) for p in mine.iterdir())
    for claim in (
        lambda: RunBuilder(mine, force=True),
        lambda: LiveRun(mine, sources=[], source_format="collector", force=True),
        lambda: _claim(mine, True),
    ):
        with pytest.raises(RunError, match="exists and is not a prof-engine run; refusing to replace it"):
            claim()
        assert sorted((p.name, p.read_bytes()) for p in mine.iterdir()) == before
    empty = tmp_path / "empty"
    empty.mkdir()
    _claim(empty, True)  # an empty directory may be taken
    assert not empty.exists()
