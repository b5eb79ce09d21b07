"""CSV writing of results: neutralised formulas, the same bytes as a plain Arrow CSV write, errors raised."""

from __future__ import annotations

import io

import pyarrow as pa
import pyarrow.csv as pacsv
import pytest

from prof_engine.engine.tables import neutralise, write_csv


def _batches():
    schema = pa.schema([("name", pa.string()), ("us", pa.float64())])
    names = ["=SUM(A1)", "aten::mm", "-2+3", None, "@x", "ok"]
    return schema, [
        pa.record_batch([pa.array(names[i : i + 2]), pa.array([1.5, 0.0][: len(names[i : i + 2])])], schema=schema)
        for i in range(0, len(names), 2)
    ]


def test_write_csv_neutralises_and_matches_arrow(tmp_path):
    schema, batches = _batches()
    assert write_csv(iter(batches), schema, str(tmp_path / "a.csv")) == 6
    plain = io.BytesIO()
    pacsv.write_csv(
        neutralise(pa.Table.from_batches(batches)), plain, write_options=pacsv.WriteOptions(quoting_style="needed")
    )
    assert (tmp_path / "a.csv").read_bytes() == plain.getvalue()
    assert "'=SUM(A1)" in plain.getvalue().decode() and "'-2+3" in plain.getvalue().decode()


@pytest.mark.parametrize("text_type", [pa.string(), pa.large_string()])
def test_neutralise_prefixes_each_formula_start_and_nothing_else(text_type):
    cells = ["=1+1", "+cmd", "-2", "@SUM(A1)", "\tx", "\rx", "a=b", "", None, "ŝ=", "1-2"]
    table = pa.table({"t": pa.chunked_array([cells[:5], cells[5:]], text_type), "n": list(range(len(cells)))})
    got = neutralise(table)
    assert got.schema == table.schema
    assert got.column("t").to_pylist() == [
        "'=1+1",
        "'+cmd",
        "'-2",
        "'@SUM(A1)",
        "'\tx",
        "'\rx",
        "a=b",
        "",
        None,
        "ŝ=",
        "1-2",
    ]
    assert got.column("n").to_pylist() == list(range(len(cells)))


def test_write_csv_raises_what_the_producer_raised(tmp_path):
    schema, batches = _batches()

    def failing():
        yield batches[0]
        raise RuntimeError("query failed")

    with pytest.raises(RuntimeError, match="query failed"):
        write_csv(failing(), schema, str(tmp_path / "b.csv"))


def test_write_csv_raises_what_the_writer_raised(tmp_path):
    schema, batches = _batches()
    with pytest.raises(OSError):
        write_csv(iter(batches * 50), schema, str(tmp_path / "no such dir" / "c.csv"))


def test_result_html_escapes_every_name_and_shows_the_first_rows():
    """Jupyter shows a Result as an HTML table: names from the profiled program (`<lambda>`,
    `vector<float>`, `a & b`) are escaped, in the header and in the cells; long results are cut."""
    from prof_engine.engine.session import Result

    table = pa.table({"<Name>": ["<lambda>", 'vector<float> & "x"', None] * 10, "n": list(range(30))})
    html = Result(table)._repr_html_()
    assert "<lambda>" not in html and "&lt;lambda&gt;" in html and "&lt;Name&gt;" in html
    assert "vector&lt;float&gt; &amp; &quot;x&quot;" in html
    assert html.count("<tr>") == 1 + 20 and "30 rows × 2 columns, first 20 shown" in html


def test_run_repr_says_what_the_run_is(tmp_path):
    """In a notebook, an opened run shows its path, source, ranks, steps and records (and the step
    filter it was opened with), not an object address."""
    import prof_engine
    from conftest import write_trace, x

    events = [x("ProfilerStep#3", 0, 100, cat="user_annotation"), x("aten::mm", 10, 5)]
    run = prof_engine.import_trace([write_trace(tmp_path / "t.json", events)], tmp_path / "run")
    with prof_engine.open(run) as r, prof_engine.open(run, steps=[3]) as one:
        assert repr(r) == f"<Run {run}: kineto, ranks [0], 1 steps, 2 records>"
        assert repr(one).endswith("2 records, steps [3]>")
