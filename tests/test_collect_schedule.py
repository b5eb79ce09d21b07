"""The collector's schedule and its config file: torch's semantics step for step, clear errors."""

from __future__ import annotations

import json

import pytest

from prof_engine import CollectError, ProfilerActivity, ProfilerLevel, schedule
from prof_engine.collect import config
from prof_engine.collect.launch import child_command, steps_schedule
from prof_engine.collect.schedule import ProfilerAction

CASES = [
    dict(wait=1, warmup=1, active=3, repeat=1),
    dict(wait=0, warmup=0, active=1),
    dict(wait=2, warmup=1, active=2, repeat=2, skip_first=3),
    dict(wait=0, warmup=2, active=1, repeat=0, skip_first=1),
]


@pytest.mark.parametrize("kwargs", CASES, ids=lambda k: ",".join(f"{a}={b}" for a, b in k.items()))
def test_schedule_is_torch_schedule(kwargs):
    """For 30 steps, prof_engine.schedule answers what torch.profiler.schedule answers."""
    tp = pytest.importorskip("torch.profiler")
    ours, theirs = schedule(**kwargs), tp.schedule(**kwargs)
    assert [ours(s).name for s in range(30)] == [theirs(s).name for s in range(30)]


def test_schedule_last_step():
    assert schedule(wait=1, warmup=1, active=3, repeat=1).last_step() == 4
    assert schedule(active=1).last_step() is None


@pytest.mark.parametrize(
    "kwargs, says",
    [
        (dict(active=0), "active must be at least 1"),
        (dict(wait=-1, active=1), "wait must be a whole number"),
        (dict(active=1.5), "active must be a whole number"),
    ],
)
def test_bad_schedule_is_one_clear_error(kwargs, says):
    with pytest.raises(CollectError, match=says):
        schedule(**kwargs)


def test_steps_option_maps_onto_a_schedule():
    """--steps 3-5 records exactly steps 3, 4, 5 (after one warmup step); --steps 0 only step 0."""
    recorded = lambda s: [n for n in range(12) if s(n).records]  # noqa: E731
    assert recorded(steps_schedule("3-5")) == [3, 4, 5]
    assert steps_schedule("3-5")(2) is ProfilerAction.WARMUP
    assert recorded(steps_schedule("0")) == [0]
    assert recorded(steps_schedule(None)) == list(range(12))
    with pytest.raises(CollectError, match="--steps"):
        steps_schedule("5-3")


def test_child_command_puts_the_runner_before_the_script(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "train.py").write_text("")
    assert child_command(["python3", "-u", "train.py", "--lr", "1"]) == [
        "python3",
        "-u",
        "-m",
        "prof_engine.collect.run",
        "train.py",
        "--lr",
        "1",
    ]
    assert child_command(["python", "-m", "pkg.train"]) == [
        "python",
        "-m",
        "prof_engine.collect.run",
        "-m",
        "pkg.train",
    ]
    with pytest.raises(CollectError, match="runs Python programs"):
        child_command(["bash", "train.sh"])
    with pytest.raises(CollectError, match="-c is not supported"):
        child_command(["python", "-c", "print(1)"])
    with pytest.raises(CollectError, match="trian.py: no such file"):  # refused before a run is made
        child_command(["python", "trian.py"])


def test_config_file_keys(tmp_path):
    """acl.json-style keys (under "profiler" or at the top) become settings; interval N = every Nth step."""
    path = tmp_path / "c.json"
    path.write_text(
        json.dumps(
            {
                "profiler": {
                    "switch": "on",
                    "output": "out",
                    "activities": ["cpu"],
                    "level": "level2",
                    "interval": 3,
                    "sampling_interval_ms": 20,
                    "flush": "cycle",
                }
            }
        )
    )
    s = config.load(path)
    assert s.output == "out" and s.activities == (ProfilerActivity.CPU,) and s.level is ProfilerLevel.Level2
    assert [n for n in range(9) if s.schedule(n).records] == [2, 5, 8]
    assert s.sampling_interval_ms == 20 and s.flush == "cycle"
    assert s.resolved("profile_memory") is True  # Level2 turns allocator events on


def test_acl_json_and_profiling_options_keys_are_read_with_a_warning(tmp_path, caplog):
    """An existing acl.json `profiler` block (or TF profiling_options) is read: its keys that have a
    setting here are used, the Ascend-only ones are named in a warning instead of failing."""
    path = tmp_path / "acl.json"
    path.write_text(
        json.dumps(
            {
                "profiler": {
                    "switch": "on",
                    "output": "out",
                    "aicpu": "on",
                    "aic_metrics": "PipeUtilization",
                    "acl_api": "on",
                    "interval": 2,
                }
            }
        )
    )
    with caplog.at_level("WARNING", logger="prof_engine"):
        s = config.load(path)
    assert s.output == "out" and [n for n in range(4) if s.schedule(n).records] == [1, 3]
    warned = " ".join(r.getMessage() for r in caplog.records)
    assert all(f"'{k}'" in warned for k in ("aicpu", "aic_metrics", "acl_api")) and "no effect" in warned


@pytest.mark.parametrize(
    "raw, says",
    [
        ({"swtich": "on"}, "unknown key 'swtich'"),
        ({"switch": "maybe"}, "switch must be"),
        ({"activities": ["TPU"]}, "unknown activity"),
        ({"level": "Level9"}, "unknown level"),
        ({"schedule": {"active": 1}, "interval": 2}, "not both"),
        ({"schedule": {"active": 0}}, "active must be at least 1"),
        ({"flush": "sometimes"}, "flush must be"),
        ([1, 2], "must be a JSON object"),
    ],
)
def test_bad_config_is_one_clear_error(tmp_path, raw, says):
    path = tmp_path / "c.json"
    path.write_text(json.dumps(raw))
    with pytest.raises(CollectError, match=says) as e:
        config.load(path)
    assert str(path) in str(e.value) and "\n" not in str(e.value)


def test_unreadable_config(tmp_path):
    with pytest.raises(CollectError, match="cannot read"):
        config.load(tmp_path / "missing.json")
    (tmp_path / "bad.json").write_text("{")
    with pytest.raises(CollectError, match="not valid JSON"):
        config.load(tmp_path / "bad.json")


@pytest.mark.parametrize(
    "text, says",
    [
        ('{"profiler": {"sampling_interval_ms": NaN}}', "not valid JSON"),
        ('{"profiler": {"sampling_interval_ms": Infinity}}', "not valid JSON"),
        ('{"profiler": {"sampling_interval_ms": 1e400}}', "not valid JSON"),
        ("[" * 100_000 + "]" * 100_000, "nested too deeply"),
    ],
)
def test_hostile_config_values_are_one_clear_error(tmp_path, text, says):
    """NaN and Infinity (which Python's json reads), numbers no double holds and nesting past the
    recursion limit (a RecursionError traceback) are one CollectError naming the file."""
    path = tmp_path / "c.json"
    path.write_text(text)
    with pytest.raises(CollectError, match=says) as e:
        config.load(path)
    assert str(path) in str(e.value) and "\n" not in str(e.value)


def test_an_endless_config_file_is_refused_not_read_forever():
    """/dev/zero as the config file hung the collector, reading it whole."""
    with pytest.raises(CollectError, match="too large"):
        config.load("/dev/zero")


def test_code_wins_over_file():
    file = config.Settings(switch=False, output="from_file", level=ProfilerLevel.Level0)
    code = config.Settings(output="from_code")
    merged = code.merged_over(file)
    assert merged.output == "from_code" and merged.level is ProfilerLevel.Level0 and merged.switch is False
