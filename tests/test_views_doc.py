"""Each view's documented header matches what DuckDB builds, and declares everything it uses."""

from __future__ import annotations

from pathlib import Path

import duckdb
import pytest

import prof_engine
from conftest import REPO, write_trace, x
from prof_engine import docs, schema
from prof_engine.engine.views import definitions, public_views


def _closure(name: str) -> list[str]:
    defs, seen = definitions(), []

    def visit(n: str) -> None:
        for dep in defs[n].requires if n in defs else ():
            visit(dep)
        if n not in seen:
            seen.append(n)

    visit(name)
    return seen


@pytest.mark.parametrize("name", list(definitions()))
def test_view_builds_from_declared_dependencies_only(name):
    """Each file's views bound as soon as it is created (its statements defer their binding), in
    the order its declared requirements give: an undeclared view, macro or table makes this fail."""
    con = duckdb.connect()
    needed = _closure(name)
    for table_name, table in schema.tables().items():
        if table_name in needed:  # stored tables and run_ranks alike: plain tables of their schema
            con.register(f"_empty_{table_name}", table.arrow_schema.empty_table())
            con.execute(f"CREATE VIEW {table_name} AS SELECT * FROM _empty_{table_name}")
    for dep in needed:
        if dep in definitions():
            con.execute(definitions()[dep].statements())
            for (view,) in con.execute(
                "SELECT view_name FROM duckdb_views() WHERE NOT internal AND NOT is_bound"
            ).fetchall():
                con.execute(f'SELECT * FROM "{view}" LIMIT 0')
    if definitions()[name].public:
        con.execute(f'SELECT * FROM "{name}"').fetchall()


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    d = tmp_path_factory.mktemp("doc")
    trace = write_trace(
        d / "t.json", [x("ProfilerStep#1", 1e15, 10, cat="user_annotation"), x("aten::mm", 1e15 + 1, 2)]
    )
    with prof_engine.open(prof_engine.import_trace([trace], d / "run")) as r:
        yield r


@pytest.mark.parametrize("view", [v.name for v in public_views()])
def test_header_columns_match_describe(run, view):
    described = [(n, t) for n, t, *_ in run.sql(f'DESCRIBE "{view}"').rows()]
    documented = [(c.name, c.type) for c in definitions()[view].columns]
    assert documented == described


def test_every_public_view_is_documented():
    for v in public_views():
        assert v.answers and v.columns, f"queries/{v.name}.sql lacks answers/columns in its header"
        assert all(c.description for c in v.columns)


def test_view_comment_comes_from_header(run):
    [(comment,)] = run.sql("SELECT comment FROM duckdb_views() WHERE view_name = 'op_statistic'").rows()
    assert comment == definitions()["op_statistic"].answers


@pytest.mark.parametrize("page", list(docs.PAGES))
def test_generated_docs_are_current(page):
    """docs/*.md are generated; regenerate with `python -m prof_engine.docs` after editing schemas or queries."""
    assert (REPO / "docs" / page).read_text(encoding="utf-8") == docs.PAGES[page]() + "\n"


def test_schema_validator_rejects_wrong_batches():
    import pyarrow as pa

    table = schema.tables()["counters"]
    good = table.arrow_schema.empty_table()
    schema.validate("counters", good)
    with pytest.raises(ValueError, match="columns"):
        schema.validate("counters", good.drop_columns(["value"]))
    bad_nulls = pa.table({c.name: pa.array([None], c.arrow_type) for c in table.columns})
    with pytest.raises(ValueError, match="NULL"):
        schema.validate("counters", bad_nulls)
    assert Path(schema.__file__).name == "schema.py"


def test_readme_view_table_is_current():
    text = (REPO / "README.md").read_text(encoding="utf-8")
    assert f"{docs.README_START}\n{docs.readme_views_table()}\n{docs.README_END}" in text


def test_defer_binding_marks_each_view_and_nothing_else():
    from prof_engine.engine.views import defer_binding

    sql = (
        'CREATE OR REPLACE TEMP VIEW "a b" AS SELECT 1;\ncreate view v AS\nSELECT 2;\n'
        "CREATE MACRO m() AS TABLE SELECT 3;\nCREATE OR REPLACE VIEW s.w AS SELECT 'CREATE VIEW x AS' AS t;"
    )
    assert defer_binding(sql) == (
        'CREATE OR REPLACE TEMP VIEW "a b" WITH (DEFER_BINDING) AS SELECT 1;\ncreate view v WITH (DEFER_BINDING) AS\n'
        "SELECT 2;\nCREATE MACRO m() AS TABLE SELECT 3;\n"
        "CREATE OR REPLACE VIEW s.w WITH (DEFER_BINDING) AS SELECT 'CREATE VIEW x AS' AS t;"
    )


def test_opening_a_run_binds_no_view_until_a_query_reads_it(tmp_path):
    """Views are created unbound: opening a run binds none of them, a query binds what it reads,
    and a view that cannot bind fails at that query, as one line."""
    from prof_engine.errors import QueryError

    events = [x("ProfilerStep#1", 0, 100, cat="user_annotation"), x("aten::mm", 10, 5)]
    with prof_engine.open(prof_engine.import_trace([write_trace(tmp_path / "t.json", events)], tmp_path / "run")) as r:
        bound = dict(r.sql("SELECT view_name, is_bound FROM duckdb_views() WHERE NOT internal").rows())
        assert bound["op_statistic"] is False and bound["step_trace"] is False
        assert len(r.view("op_statistic")) == 1
        bound = dict(r.sql("SELECT view_name, is_bound FROM duckdb_views() WHERE NOT internal").rows())
        assert bound["op_statistic"] is True and bound["step_trace"] is False
        r.con.execute("CREATE OR REPLACE VIEW broken WITH (DEFER_BINDING) AS SELECT * FROM no_such_table")
        with pytest.raises(QueryError, match="SQL error: .*no_such_table"):
            r.sql("SELECT * FROM broken")
