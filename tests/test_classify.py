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


@pytest.mark.parametrize("category, args, level", [
    ("CANN_API", '{"Thread Id": 7, "level": "acl", "id": 3}', "acl"),
    ("cuda_runtime", '{"External id": 9, "cbid": 211, "correlation": 42}', "runtime"),
    ("cuda_driver", '{"cbid": 1}', "driver"),
    ("cuda_runtime", None, "runtime"),
    ("CANN_API", '{"\\u006cevel": "node"}', "node"),  # an escaped key is still the key "level"
    ("cuda_runtime", '{"name": "level", "other": {"level": "x"}}', "runtime"),  # not a top-level key
], ids=["cann", "cuda-runtime", "cuda-driver", "no-args", "escaped-key", "nested-key"])
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
    events = [x("ProfilerStep#1", 0, 100, cat="user_annotation"),
              x("cudaLaunchKernel", 1, 5, cat="cuda_runtime", correlation=1, level="acl")]
    trace = write_trace(tmp_path / "t.json", events)
    with prof_engine.open(prof_engine.import_trace([trace], tmp_path / "run")) as run:
        assert run.manifest["sources"][0]["format"] == "kineto"
        assert run.sql('SELECT "Level", "API Name" FROM api_statistic').rows() == [("runtime", "cudaLaunchKernel")]
        plan = "".join(r[1] for r in run.sql("EXPLAIN SELECT * FROM api_statistic").rows())
        assert "READ_PARQUET" in plan and "args" not in plan


@pytest.mark.parametrize("name, api", [("AscendCL@aclrtMemcpyAsync", "aclrtMemcpyAsync"), ("Node@launch", "launch"),
                                       ("cudaLaunchKernel", "cudaLaunchKernel"), ("a@b@c", "b@c")])
def test_api_name_drops_the_layer_prefix(con, name, api):
    assert con.execute("SELECT api_name(?)", [name]).fetchone() == (api,)
