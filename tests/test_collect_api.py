"""The Profiler's contract around its calls: wrong calls log and carry on, config files, metadata,
the pyACL-shaped procedural API, and merging rank runs. Level_none runs: no torch, fast."""

from __future__ import annotations

import json

import prof_engine
from prof_engine import mstx
from prof_engine.collect import acl


def messages(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "prof_engine"]


def test_wrong_calls_log_a_clear_message_and_do_not_crash(tmp_path, caplog):
    prof = prof_engine.Profiler(tmp_path / "run", profiler_level="Level_none", start_profile=False)
    with caplog.at_level("INFO", logger="prof_engine"):
        prof.stop()
        prof.step()
        prof.start()
        prof.start()
        prof.step()  # no schedule: said once, however often
        prof.step()
        prof.stop()
        prof.stop()
        prof.start()
    said = messages(caplog)
    assert said == [
        "prof_engine: Profiler.stop() called before start()",
        "prof_engine: Profiler.step() called before start()",
        f"prof_engine: Profiler.start() called twice; it is already recording into {prof.run_path}",
        "prof_engine: Profiler.step() has no effect without a schedule (pass schedule=prof_engine.schedule(...) "
        "to record step by step)",
        "prof_engine: Profiler.stop() called twice",
        f"prof_engine: Profiler.start() after stop(): this Profiler finished its run {prof.run_path}; "
        "create a new Profiler to record again",
    ]
    assert prof_engine.open(tmp_path / "run").manifest["state"] == "complete"


def test_one_profiler_at_a_time(tmp_path, caplog):
    with prof_engine.Profiler(tmp_path / "a", profiler_level="Level_none"):
        with caplog.at_level("ERROR", logger="prof_engine"):
            second = prof_engine.Profiler(tmp_path / "b", profiler_level="Level_none")
        assert not second.recording and "another Profiler is already recording" in messages(caplog)[0]
    assert not (tmp_path / "b").exists()


def test_a_second_profiler_into_the_same_path_records_beside_the_first(tmp_path, caplog):
    """A script that makes a Profiler per phase with one path raised RunError (the first's run
    exists) before its first step. The second records into `<path>_2`, says so, and the first run
    stays as it was."""
    schedule = prof_engine.schedule(wait=0, warmup=0, active=2)
    paths = []
    for phase in ("warmup", "train"):
        with caplog.at_level("WARNING", logger="prof_engine"):
            with prof_engine.Profiler(tmp_path / "run", profiler_level="Level_none", schedule=schedule) as prof:
                for _ in range(2):
                    mstx.mark(phase)
                    prof.step()
        paths.append(prof.run_path)
    assert paths == [tmp_path / "run", tmp_path / "run_2"]
    assert (
        f"already recorded into {tmp_path / 'run'}; this Profiler records into {tmp_path / 'run_2'}"
        in messages(caplog)[0]
    )
    for path, phase in zip(paths, ("warmup", "train")):
        with prof_engine.open(path) as run:
            assert run.sql("SELECT DISTINCT name FROM marks").rows() == [(phase,)]


def test_analyse_prints_the_summary_tables(tmp_path, capsys):
    """`prof.analyse()` printed nothing in a script (it only returned the tables); it prints them
    as `prof-engine show` does; show=False keeps it quiet."""
    with prof_engine.Profiler(
        tmp_path / "run", profiler_level="Level_none", schedule=prof_engine.schedule(wait=0, warmup=0, active=3)
    ) as prof:
        for _ in range(3):
            mstx.mark("tick")
            prof.step()
    tables = prof.analyse()
    printed = capsys.readouterr().out
    assert f"recorded {prof.run_path}" in printed
    for title in tables:
        assert title in printed
    assert prof.analyse(show=False) and capsys.readouterr().out == ""


def test_config_file_is_honoured(tmp_path, monkeypatch):
    """PROF_ENGINE_CONFIG sets output, level and schedule of a Profiler made with no arguments."""
    config = tmp_path / "prof.json"
    config.write_text(
        json.dumps(
            {
                "profiler": {
                    "switch": "on",
                    "output": str(tmp_path / "from_config"),
                    "level": "Level_none",
                    "schedule": {"wait": 1, "active": 2, "repeat": 1},
                }
            }
        )
    )
    monkeypatch.setenv("PROF_ENGINE_CONFIG", str(config))
    with prof_engine.Profiler() as prof:
        for _ in range(5):
            mstx.mark("tick")
            prof.step()
    assert prof.run_path == tmp_path / "from_config"
    with prof_engine.open(prof.run_path) as run:
        assert sorted(s["step"] for s in run.manifest["steps"]) == [1, 2]
        assert run.sql("select step from marks order by step").rows() == [(1,), (2,)]
        assert run.manifest["sources"][0]["info"]["settings"]["level"] == "Level_none"


def test_each_recorded_step_has_a_sample_however_short(tmp_path):
    """A step shorter than the sampling interval (or one in which the sampling thread got no CPU)
    gets one sample, taken at its end, inside its window; steps not recorded get none."""
    with prof_engine.Profiler(
        tmp_path / "run",
        profiler_level="Level_none",
        sampling_interval_ms=60_000,
        schedule=prof_engine.schedule(wait=1, active=2, repeat=1),
    ) as prof:
        for _ in range(5):
            prof.step()
    with prof_engine.open(tmp_path / "run") as run:
        assert run.sql(
            "SELECT step, count(DISTINCT ts) FROM counters WHERE series = 'process rss(bytes)' "
            "GROUP BY step ORDER BY step"
        ).rows() == [(1, 1), (2, 1)]
        assert run.sql(
            "SELECT count(*) FROM counters c JOIN slices s ON s.kind = 'step' AND s.step = c.step "
            "WHERE c.ts NOT BETWEEN s.ts AND s.ts + s.dur"
        ).rows() == [(0,)]


def test_config_switch_off_makes_the_profiler_a_no_op(tmp_path, monkeypatch, caplog):
    config = tmp_path / "prof.json"
    config.write_text(json.dumps({"switch": "off"}))
    monkeypatch.setenv("PROF_ENGINE_CONFIG", str(config))
    with caplog.at_level("INFO", logger="prof_engine"):
        with prof_engine.Profiler(tmp_path / "run") as prof:
            prof.step()
            mstx.mark("not recorded")
    assert not (tmp_path / "run").exists() and not mstx.enabled()
    assert messages(caplog) == [
        "prof_engine: profiling is switched off (PROF_ENGINE_CONFIG); Profiler.start() does nothing"
    ]


def test_metadata_goes_to_the_manifest_size_capped(tmp_path, caplog):
    with prof_engine.Profiler(tmp_path / "run", profiler_level="Level_none") as prof:
        prof.add_metadata("model", "mlp")
        prof.add_metadata_json("hyper", '{"lr": 0.1, "layers": [32, 64]}')
        with caplog.at_level("ERROR", logger="prof_engine"):
            prof.add_metadata_json("broken", "{")
            prof.add_metadata("huge", "x" * (2 << 20))
    assert [m.split(":")[1].strip() for m in messages(caplog)] == [
        "add_metadata_json('broken')",
        "metadata 'huge' left out",
    ]
    with prof_engine.open(tmp_path / "run") as run:
        assert run.manifest["metadata"] == {"model": "mlp", "hyper": {"lr": 0.1, "layers": [32, 64]}}


def test_export_summaries_handler(tmp_path):
    with prof_engine.Profiler(
        tmp_path / "run",
        profiler_level="Level_none",
        on_trace_ready=prof_engine.export_summaries(tmp_path / "out", fmt="json"),
    ):
        mstx.mark("x")
    assert sorted(p.suffix for p in (tmp_path / "out").iterdir()) == [".json"] * 5


def test_acl_procedural_api(tmp_path, caplog):
    """init / create_config / start / stop / finalize, twice with different configs: two runs."""
    assert acl.start(acl.create_config([0], data_type_config=acl.ACL_PROF_MSPROFTX)) == acl.ACL_ERROR_UNINITIALIZE
    assert acl.init(str(tmp_path / "acl")) == acl.ACL_SUCCESS
    assert acl.init(str(tmp_path / "acl")) == acl.ACL_ERROR_REPEAT_INITIALIZE
    markers = acl.create_config([0], data_type_config=acl.ACL_PROF_MSPROFTX | acl.ACL_PROF_TRAINING_TRACE)
    assert markers.level is prof_engine.ProfilerLevel.Level_none
    assert acl.stop(markers) == acl.ACL_ERROR_PROF_NOT_RUN
    for name in ("first", "second"):
        assert acl.start(markers) == acl.ACL_SUCCESS
        assert acl.start(markers) == acl.ACL_ERROR_PROF_ALREADY_RUN
        mstx.mark(name)
        assert acl.stop(markers) == acl.ACL_SUCCESS
    caplog.clear()
    with caplog.at_level("WARNING", logger="prof_engine"):
        assert (
            acl.create_config([0], data_type_config=acl.ACL_PROF_AICORE_METRICS).level
            is prof_engine.ProfilerLevel.Level_none
        )
    assert "need Ascend hardware" in messages(caplog)[0]
    assert acl.create_config([0], data_type_config=1 << 40) is None
    assert acl.destroy_config(markers) == acl.ACL_SUCCESS and acl.start(markers) == acl.ACL_ERROR_INVALID_PARAM
    runs = acl.runs()
    assert acl.finalize() == acl.ACL_SUCCESS and acl.finalize() == acl.ACL_ERROR_UNINITIALIZE
    assert [r.name for r in runs] == ["run_000", "run_001"]
    for run_dir, name in zip(runs, ("first", "second")):
        with prof_engine.open(run_dir) as run:
            assert run.sql("select name from marks").rows() == [(name,)]
            assert run.manifest["metadata"]["acl_config"]["data_type_config"] == 0x80 | 0x40


def test_offline_analyse_merges_rank_runs(tmp_path, monkeypatch):
    """Two ranks' runs (RANK/WORLD_SIZE as torchrun sets them) become one run with a rank each."""
    for rank in (0, 1):
        monkeypatch.setenv("RANK", str(rank))
        monkeypatch.setenv("WORLD_SIZE", "2")
        with prof_engine.Profiler(
            tmp_path / "job", profiler_level="Level_none", schedule=prof_engine.schedule(active=1)
        ) as prof:
            for step in range(2 + rank):
                with mstx.range(f"rank {rank} step {step}"):
                    mstx.mark("m")
                prof.step()
    assert sorted(p.name for p in (tmp_path / "job").iterdir()) == ["rank0", "rank1"]
    merged = prof_engine.Profiler.offline_analyse(tmp_path / "job", jobs=2)
    assert merged == tmp_path / "job_run"
    with prof_engine.open(merged) as run:
        assert run.manifest["ranks"] == [0, 1]
        assert run.sql("select rank, count(*) from slices where kind = 'user_range' group by 1 order by 1").rows() == [
            (0, 2),
            (1, 3),
        ]
        assert run.sql("select count(*) = count(distinct id) from slices").rows() == [(True,)]
        assert run.sql("select count(*) from run_ranks").rows() == [(2,)]
