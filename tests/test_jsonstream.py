"""The streaming Chrome-trace reader: chunk boundaries, both JSON forms, trailing keys, exact times."""

from __future__ import annotations

import gzip
import json

import pytest

from prof_engine.errors import InputError
from prof_engine.importers.jsonstream import ChromeTraceReader
from prof_engine.importers.units import us_text_to_ns


def _events(n: int) -> list[dict]:
    # names that contain what the boundary search looks for: '},{' and ']' inside strings
    return [
        {
            "ph": "X",
            "name": f'op{i} }},{{"ph":"X"}} ]',
            "ts": 1000 + i,
            "dur": 1.5,
            "pid": 1,
            "tid": "t",
            "args": {"Input Dims": [[i, 2], []]},
        }
        for i in range(n)
    ]


def _read(path, chunk: int) -> tuple[ChromeTraceReader, list]:
    reader = ChromeTraceReader(path, chunk_bytes=chunk)
    events = [e for batch in reader.chunks() for e in batch]
    return reader, events


@pytest.mark.parametrize("chunk", [7, 64, 1000, 1 << 20])
def test_object_form_any_chunking(tmp_path, chunk):
    doc = {
        "schemaVersion": 1,
        "distributedInfo": {"rank": 3},
        "traceEvents": _events(50),
        "baseTimeNanoseconds": 17,
        "traceName": "x]}",
    }
    path = tmp_path / "t.json"
    path.write_text(json.dumps(doc, indent=2))
    reader, events = _read(path, chunk)
    assert [e.name for e in events] == [e["name"] for e in doc["traceEvents"]]
    assert reader.header == {
        "schemaVersion": 1,
        "distributedInfo": {"rank": 3},
        "baseTimeNanoseconds": 17,
        "traceName": "x]}",
    }


@pytest.mark.parametrize("closing", ["]", "", ",\n"])
def test_array_form_with_or_without_closing_bracket(tmp_path, closing):
    """The trace event format allows the array's closing ']' to be missing."""
    text = "[" + ",\n".join(json.dumps(e) for e in _events(20)) + closing
    path = tmp_path / "t.json"
    path.write_text(text)
    reader, events = _read(path, 100)
    assert len(events) == 20 and reader.form == "array" and reader.header == {}


def test_gzip_by_content_not_name(tmp_path):
    path = tmp_path / "trace.json"  # gzip bytes under a .json name
    path.write_bytes(gzip.compress(json.dumps({"traceEvents": _events(5)}).encode()))
    assert len(_read(path, 64)[1]) == 5


def test_empty_event_array(tmp_path):
    path = tmp_path / "t.json"
    path.write_text('{"traceEvents": [], "x": 1}')
    reader, events = _read(path, 8)
    assert events == [] and reader.header == {"x": 1}


@pytest.mark.parametrize(
    "text, message",
    [
        ("", "empty"),
        ('{"traceEvents": [{"ph": "X", "ts": 1}, {"ph": "X", "ts"', "truncated"),
        ('{"a": 1}', 'no "traceEvents" key'),
        ("hello", "not JSON"),
        ('{"traceEvents": [{"ph": 5}]}', "event #0"),
    ],
    ids=["empty", "truncated", "not-a-trace", "not-json", "wrong-type"],
)
def test_bad_input_is_one_clear_error(tmp_path, text, message):
    path = tmp_path / "bad.json"
    path.write_text(text)
    with pytest.raises(InputError, match=message) as info:
        _read(path, 16)
    assert str(path) in str(info.value) and "\n" not in str(info.value)


@pytest.mark.parametrize(
    "text, ns",
    [
        ("1736408883704643.212", 1736408883704643212),  # 19 significant digits: a float would lose them
        ('"1736408883704643.212\\t"', 1736408883704643212),  # Ascend CSV/JSON string with an Excel tab
        ("53.7410625", 53741),  # more than ns precision: rounded half to even
        ("53.7415", 53742),
        ("53.7425", 53742),
        ("12", 12000),
        ("1.5e3", 1500000),
        ("-2.5", -2500),
        ("", None),
    ],
)
def test_us_text_to_ns(text, ns):
    assert us_text_to_ns(text) == ns


@pytest.mark.parametrize(
    "text",
    [
        b'{"a":' * 100_000 + b"1" + b"}" * 100_000,  # an object without traceEvents
        b'{"traceEvents": [{"ph": "X", "args": ' + b"[" * 100_000 + b"]" * 100_000 + b"}]}",  # one event's args
    ],
    ids=["object", "args"],
)
def test_nesting_past_the_recursion_limit_is_an_input_error(tmp_path, text):
    """msgspec decodes nesting recursively: a trace nested 100,000 deep raised RecursionError, a
    traceback from `import` (found by benchmarks/fuzz.py); it is one InputError naming the file."""
    path = tmp_path / "deep.json"
    path.write_bytes(text)
    with pytest.raises(InputError, match="deep.json: .*nested too deeply"):
        _read(path, 1 << 20)
