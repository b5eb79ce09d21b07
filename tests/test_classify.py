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


@pytest.mark.parametrize("name, api", [("AscendCL@aclrtMemcpyAsync", "aclrtMemcpyAsync"), ("Node@launch", "launch"),
                                       ("cudaLaunchKernel", "cudaLaunchKernel"), ("a@b@c", "b@c")])
def test_api_name_drops_the_layer_prefix(con, name, api):
    assert con.execute("SELECT api_name(?)", [name]).fetchone() == (api,)
