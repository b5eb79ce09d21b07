"""The name- and args-based classification macros of queries/_classify.sql, on inline values."""

from __future__ import annotations

import duckdb
import pytest

from prof_engine._resources import data_dir


@pytest.fixture(scope="module")
def con() -> duckdb.DuckDBPyConnection:
    con = duckdb.connect()
    con.execute((data_dir("queries") / "_classify.sql").read_text())
    return con


@pytest.mark.parametrize(
    "category, args, level",
    [
        ("CANN_API", '{"Thread Id": 7, "level": "acl", "id": 3}', "acl"),
        ("cuda_runtime", '{"External id": 9, "cbid": 211, "correlation": 42}', "runtime"),
        ("cuda_driver", '{"cbid": 1}', "driver"),
        ("cuda_runtime", None, "runtime"),
        ("CANN_API", '{"\\u006cevel": "node"}', "node"),  # an escaped key is still the key "level"
        ("cuda_runtime", '{"name": "level", "other": {"level": "x"}}', "runtime"),  # not a top-level key
    ],
    ids=["cann", "cuda-runtime", "cuda-driver", "no-args", "escaped-key", "nested-key"],
)
def test_api_level(con, category, args, level):
    assert con.execute("SELECT api_level(?, ?)", [category, args]).fetchone() == (level,)


def test_api_level_reads_no_args_where_no_source_writes_levels(tmp_path):
    """A Kineto run's API calls never carry a level: the views must not read their args at all
    (most of the bytes of millions of API calls), and the level comes from the category."""
    import prof_engine
    from conftest import write_trace, x
    from prof_engine.store.manifest import cann_args

    assert not cann_args({"sources": [{"format": "kineto"}, {"format": "collector"}]})
    assert cann_args({"sources": [{"format": "kineto"}, {"format": "torch_npu"}]})
    assert cann_args({"sources": [{"format": "chrome"}]})
    events = [
        x("ProfilerStep#1", 0, 100, cat="user_annotation"),
        x("cudaLaunchKernel", 1, 5, cat="cuda_runtime", correlation=1, level="acl"),
    ]
    trace = write_trace(tmp_path / "t.json", events)
    with prof_engine.open(prof_engine.import_trace([trace], tmp_path / "run")) as run:
        assert run.manifest["sources"][0]["format"] == "kineto"
        assert run.sql('SELECT "Level", "API Name" FROM api_statistic').rows() == [("runtime", "cudaLaunchKernel")]
        plan = "".join(r[1] for r in run.sql("EXPLAIN SELECT * FROM api_statistic").rows())
        assert "READ_PARQUET" in plan and "args" not in plan


def test_api_statistic_merges_the_names_and_steps_of_one_api(tmp_path):
    """api_statistic counts calls in groups of what was recorded (step, category, name) and merges
    those that are one API: `AscendCL@aclrtFree` and `aclrtFree` in two steps are one row whose
    count, sum, extremes and population variance are those of all four calls together."""
    import statistics

    import prof_engine
    from conftest import write_trace, x

    durs = [2.0, 7.5, 11.0, 40.25]  # µs
    events = [
        x("ProfilerStep#1", 0, 100, cat="user_annotation"),
        x("ProfilerStep#2", 100, 100, cat="user_annotation"),
        x("AscendCL@aclrtFree", 10, durs[0], cat="cuda_runtime"),
        x("aclrtFree", 30, durs[1], cat="cuda_runtime"),
        x("aclrtFree", 110, durs[2], cat="cuda_runtime"),
        x("AscendCL@aclrtFree", 130, durs[3], cat="cuda_runtime"),
        x("cudaMalloc", 150, 3, cat="cuda_driver"),
    ]
    trace = write_trace(tmp_path / "t.json", events)
    with prof_engine.open(prof_engine.import_trace([trace], tmp_path / "run")) as run:
        rows = run.sql(
            'SELECT "Level", "API Name", "Count", "Time(us)", "Avg(us)", "Min(us)", "Max(us)", "Variance" '
            'FROM api_statistic ORDER BY "API Name"'
        ).rows()
        per_step = run.sql(
            "SELECT step, sum(calls), sum(total) FROM _api_groups WHERE name = 'aclrtFree' GROUP BY step ORDER BY step"
        ).rows()
    assert rows == [
        (
            "runtime",
            "aclrtFree",
            4,
            sum(durs),
            round(statistics.mean(durs), 3),
            2.0,
            40.25,
            round(statistics.pvariance(durs), 3),
        ),
        ("driver", "cudaMalloc", 1, 3.0, 3.0, 3.0, 3.0, 0.0),
    ]
    assert per_step == [(1, 2, 9500), (2, 2, 51250)]  # what a comparison of runs sums per step


@pytest.mark.parametrize(
    "name, api",
    [
        ("AscendCL@aclrtMemcpyAsync", "aclrtMemcpyAsync"),
        ("Node@launch", "launch"),
        ("cudaLaunchKernel", "cudaLaunchKernel"),
        ("a@b@c", "b@c"),
    ],
)
def test_api_name_drops_the_layer_prefix(con, name, api):
    assert con.execute("SELECT api_name(?)", [name]).fetchone() == (api,)
