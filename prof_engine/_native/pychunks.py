"""Chunks of Chrome/Kineto events for the columnar converter, read by Python alone: the port of the
native scanner (`scan.c`, whose face is `importers/scan.py`), beside it.

Where the native scanner (`scan`) is unavailable, `chunks(reader)` hands `chunkconv.feed` the
chunks of `ChromeTraceReader.chunks()` (msgspec-decoded `Event`s) behind `scan.Chunk`'s interface,
so that one converter serves both: `column(key, mode, rows)` is the values of an event key or an
`args` key (`keys.TOP_KEYS`, `keys.ARGS_KEYS`) in the scanner's modes (RAW: the JSON text; TEXT: a
string's text, else `str` of the value; INT: `keys._int` of it; US: µs as int64 ns, as
`units.us_text_to_ns`), JSON null and an absent key being NULL; `events(rows)` is the events.
A chunk's `args` are decoded in one msgspec call when one of their keys is first asked for, and
each column is built once per chunk.

The columns equal the scanner's value for value, but: an absent `ph` or `name` reads as "" (the
`Event` struct's default) where the scanner gives NULL, which `chunkconv` reads alike; and RAW of
a key that `Event` decodes (all but `ts`, `dur` and `args`) is its value encoded again: the same
JSON, not always the same text (`chunkconv` reads only whether it is there).
"""

from __future__ import annotations

from collections.abc import Iterator
from operator import attrgetter
from typing import Any

import msgspec
import pyarrow as pa
import pyarrow.compute as pc

from prof_engine.importers.jsonstream import ChromeTraceReader, Event, args_text
from prof_engine.importers.keys import ARGS_KEYS, TOP_KEYS, _int, _text
from prof_engine.importers.scan import INT, RAW, TEXT, US
from prof_engine.importers.units import us_array_to_ns

_RAW_KEYS = ("ts", "dur", "args")  # the event keys `Event` keeps as JSON text
_FIELD = {k: f"k{i}" for i, k in enumerate(ARGS_KEYS)}  # args key → attribute of `_Args`
_Args = msgspec.defstruct(
    "_Args",
    [(f, msgspec.Raw, msgspec.Raw(b"")) for f in _FIELD.values()],
    rename={f: k for k, f in _FIELD.items()},
    gc=False,
)
_ARGS = msgspec.json.Decoder(list[_Args])  # type: ignore[valid-type]
_NO_ARGS = _Args()
_INTEGER = r"^-?[0-9]+$"


def chunks(reader: ChromeTraceReader) -> Iterator[Chunk]:
    """The file's chunks, as `scan.Scanner.chunks` gives them (header and errors: the reader's)."""
    for events in reader.chunks():
        yield Chunk(events)


class Chunk:
    """The events of one decoded chunk, with their columns as the native scanner gives them."""

    def __init__(self, events: list[Event]) -> None:
        self._events = events
        self.n = len(events)
        self._columns: dict[tuple[str, int], pa.Array] = {}
        self._args: list[Any] | None = None

    def column(self, key: str, mode: int = TEXT, rows: pa.Array | None = None) -> pa.Array:
        """Values of `key` (an event key or an `args` key) as a string array (TEXT, or RAW: JSON
        text) or an int64 array (INT, or US: µs as ns); for all events or the given `rows`."""
        if key not in _FIELD and key not in TOP_KEYS:
            raise KeyError(f"{key!r} is not a key the scanner records (keys.TOP_KEYS, keys.ARGS_KEYS)")
        got = self._columns.get((key, mode))
        if got is None:
            got = self._columns[key, mode] = self._column(key, mode)
        return got if rows is None else got.take(rows)

    def events(self, rows: list[int] | None = None) -> list[Event]:
        """The events (all, or `rows`)."""
        return self._events if rows is None else [self._events[i] for i in rows]

    def _column(self, key: str, mode: int) -> pa.Array:
        if key in _FIELD:
            if self._args is None:
                self._args = _decode_args(self._events)
            return _from_json(_json_texts(list(map(attrgetter(_FIELD[key]), self._args))), mode)
        values = list(map(attrgetter(key), self._events))
        if key in _RAW_KEYS:
            return _from_json(_json_texts(values), mode)
        if mode == TEXT:
            return pa.array(_texts(values), pa.string())
        if mode == INT:
            return pa.array(_ints(values), pa.int64())
        return _from_json(_json_texts([b"" if v is None else msgspec.json.encode(v) for v in values]), mode)


def _decode_args(events: list[Event]) -> list[Any]:
    """The `args` of each event as `_Args` (its keys' JSON texts), decoded with one msgspec call."""
    raws = list(map(args_text, events))
    present = [r for r in raws if r]
    decoded = iter(_ARGS.decode(b"[" + b",".join(present) + b"]") if present else [])
    return [next(decoded) if r else _NO_ARGS for r in raws]


def _json_texts(texts: list) -> pa.Array:
    """JSON texts (bytes or msgspec.Raw; b"" where absent) as a string array, absent and null NULL.
    Joined at NUL bytes and split by Arrow in one pass: JSON text never holds a NUL byte. msgspec
    leaves raw text unchecked: text that is not UTF-8 is a UnicodeDecodeError, as where it decodes."""
    if not texts:
        return pa.array([], pa.string())
    joined = pc.split_pattern(pa.array([b"\0".join(texts)], pa.binary()), b"\0").flatten()
    try:
        arr = joined.cast(pa.string())
    except pa.ArrowInvalid:
        for text in joined.to_pylist():
            text.decode()
        raise
    absent = pc.or_(pc.equal(arr, ""), pc.equal(arr, "null"))
    return pc.if_else(absent, pa.scalar(None, pa.string()), arr) if pc.any(absent).as_py() else arr


def _from_json(texts: pa.Array, mode: int) -> pa.Array:
    """A column of JSON texts in `mode`, as the scanner reads them."""
    if mode == RAW:
        return texts
    if mode == US:
        return us_array_to_ns(texts)
    if mode == INT:
        try:
            return pc.cast(texts, pa.int64())  # integer texts within int64, the usual case
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
            return pa.array(
                [None if t is None else _int(msgspec.json.decode(t)) for t in texts.to_pylist()], pa.int64()
            )
    # TEXT: a string without escapes is its text between the quotes, an integer its digits; the
    # rest (escapes, other numbers, literals, objects, arrays) `str` of the decoded value
    plain_string = pc.and_(pc.starts_with(texts, '"'), pc.invert(pc.match_substring(texts, "\\")))
    out = pc.if_else(plain_string, pc.utf8_slice_codeunits(texts, 1, -1), texts)
    other = pc.invert(pc.or_(plain_string, pc.match_substring_regex(texts, _INTEGER)))
    if not pc.any(other).as_py():
        return out
    values = out.to_pylist()
    for i in pc.indices_nonzero(other).to_pylist():
        values[i] = _text(msgspec.json.decode(values[i]))
    return pa.array(values, pa.string())


_NONE = type(None)


def _ints(values: list) -> list[int | None]:
    """`_int` over a column. A column of int64s and None (the usual case) is returned as it is,
    after C-level passes over the types and for the least and greatest value."""
    if set(map(type, values)) <= {int, _NONE}:
        ints = [v for v in values if v is not None]
        if not ints or (min(ints) >= -(2**63) and max(ints) < 2**63):
            return values
    return [_int(v) for v in values]


def _texts(values: list) -> list[str | None]:
    """`_text` over a column, with C-level passes for the usual all-str and all-int columns."""
    types = set(map(type, values))
    if types <= {str, _NONE}:
        return values
    if types == {int}:  # Kineto's pid and tid: a few distinct ints, converted once each
        text = {v: str(v) for v in set(values)}
        return list(map(text.__getitem__, values))
    return [v if v.__class__ is str or v is None else str(v) for v in values]
