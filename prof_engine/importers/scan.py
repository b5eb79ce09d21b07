"""Native streaming reader of Chrome trace events: chunks of events as Arrow columns.

The C scanner (`prof_engine/_native/scan.c`) walks the event array of a chunk of the file and
records, per event, where the values of the keys the converter reads lie (top-level keys and keys
of `args`), checking the JSON grammar as it goes. A column is then copied out in one C call into
an Arrow string array: raw JSON text (times, `args`), or unquoted text (names, categories, ids).
Values that text alone cannot give right (strings with escapes, literals, non-integer numbers)
are flagged and redone in Python from their decoded JSON, so the columns equal what the
pure-Python reader (`jsonstream.ChromeTraceReader` + msgspec) gives.

Memory: one read chunk plus the span tables (fixed size, reused) plus the columns of one chunk.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable, Iterator
from typing import Any

import msgspec
import pyarrow as pa
import pyarrow.compute as pc

from prof_engine._native import load
from prof_engine.importers import jsonstream
from prof_engine.importers.jsonstream import _ANY, ChromeTraceReader, Event
from prof_engine.importers.keys import ARGS_KEYS, TOP_KEYS, _int
from prof_engine.importers.units import us_array_to_ns

_SLOT = {**{k: i for i, k in enumerate(TOP_KEYS)}, **{k: len(TOP_KEYS) + i for i, k in enumerate(ARGS_KEYS)}}
_TOP_NAMES = b"\0".join(k.encode() for k in TOP_KEYS) + b"\0"
_ARGS_NAMES = b"\0".join(k.encode() for k in ARGS_KEYS) + b"\0"
CAP = 32768  # events per scan call: a span table takes (keys × CAP × 12) bytes, ~9 MB
# Span tables in turn: the chunk being converted, one queued, one being scanned (see Scanner.chunks).
_POOL = 3
_DONE = object()

RAW, TEXT, INT, US = 0, 1, 2, 3  # US: µs as int64 ns
_EVENT = msgspec.json.Decoder(Event)
_EVENTS = msgspec.json.Decoder(list[Event])


def available() -> bool:
    return load() is not None


def _text_of(v: Any) -> str | None:
    return None if v is None else str(v)


class _Spans:
    """Where each wanted key's value lies in each event of one scan call (see scan.c): per key, `cap`
    int64 starts and int32 lengths; per event, its own start and length."""

    def __init__(self, cap: int = CAP) -> None:
        n_slots = len(TOP_KEYS) + len(ARGS_KEYS)
        self.cap = cap
        self.starts = memoryview(bytearray(8 * n_slots * cap)).cast("q")
        self.lens = memoryview(bytearray(4 * n_slots * cap)).cast("i")
        self.ev_starts = memoryview(bytearray(8 * cap)).cast("q")
        self.ev_lens = memoryview(bytearray(4 * cap)).cast("i")


class _Buffer:
    """A read buffer the scanner reuses: the file's text in `view[:used]` (the view also keeps
    `data` from being resized while C reads it). Reading into a few such buffers instead of
    joining each read to the rest of the last (new bytes objects of ~8 MB each, faulted in page by
    page) took the scanner's thread ~0.06 s less at 329 MB of JSON (0.85 → 0.79 s)."""

    def __init__(self, size: int) -> None:
        self.data = bytearray(size)
        self.view = memoryview(self.data)
        self.used = 0
        self.last = -_POOL  # the last chunk scanned from it


class Chunk:
    """The events of one scan call. Valid until the scanner has scanned `_POOL` chunks more
    (its span tables are then reused): a consumer takes one chunk at a time."""

    def __init__(self, scanner: Scanner, spans: _Spans, buf: _Buffer, n: int, seen: int) -> None:
        self._s = scanner
        self._spans = spans
        self.buf = buf
        self.n = n
        self.seen = seen  # events of the file before this chunk

    def column(self, key: str, mode: int = TEXT, rows: pa.Array | None = None) -> pa.Array:
        """Values of `key` (a top-level key or an `args` key) as a string array (TEXT, or RAW: JSON
        text) or an int64 array (INT, or US: µs as ns, as `units.us_text_to_ns` gives them); for
        all events or the given `rows` (int64 indices)."""
        from prof_engine._native import _ext

        s, text = self._spans, self.buf.data
        slot = _SLOT[key]
        starts, lens = s.starts[slot * s.cap : (slot + 1) * s.cap], s.lens[slot * s.cap : (slot + 1) * s.cap]
        rows_data = None
        if rows is not None:
            rows = rows if rows.type == pa.int64() else rows.cast(pa.int64())  # (callers cast once per chunk)
            n = len(rows)
            if n:
                rows_data = rows.buffers()[1].slice(rows.offset * 8, n * 8)
        else:
            n = self.n
        if mode in (INT, US):  # parsed in C; the values it leaves (quoted, exponents, ...) below
            values, validity = pa.allocate_buffer(max(8 * n, 1)), pa.allocate_buffer((n + 7) // 8)
            n_other, nulls = _ext.gather_i64(text, starts, lens, rows_data, n, int(mode == US), values, validity)
            if not n_other:
                return pa.Array.from_buffers(pa.int64(), n, [validity, values], null_count=nulls)
            if mode == US:
                return us_array_to_ns(self.column(key, RAW, rows))
        size = _ext.gather_size(text, starts, lens, rows_data, n)
        data = pa.allocate_buffer(max(size, 1))
        offsets = pa.allocate_buffer(4 * (n + 1))
        validity = pa.allocate_buffer((n + 7) // 8)
        special = pa.allocate_buffer(max(n, 1))
        n_special, nulls = _ext.gather(text, starts, lens, rows_data, n, mode, data, offsets, validity, special)
        arr = pa.Array.from_buffers(pa.string(), n, [validity, offsets, data], null_count=nulls)
        if mode == INT:
            return self._ints(arr, special, n_special)
        if n_special:
            arr = self._redo(arr, special, _text_of, pa.string())
        return arr

    def _ints(self, arr: pa.Array, special: pa.Buffer, n_special: int) -> pa.Array:
        if n_special:
            return self._redo(arr, special, _int, pa.int64(), cast_rest=True)
        try:
            return pc.cast(arr, pa.int64())
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):  # an integer beyond int64
            return pa.array([_int(int(v)) if v is not None else None for v in arr.to_pylist()], pa.int64())

    @staticmethod
    def _redo(
        arr: pa.Array, special: pa.Buffer, convert: Callable[[Any], Any], typ: pa.DataType, cast_rest: bool = False
    ) -> pa.Array:
        """Values flagged by the scanner, from their decoded JSON: `convert(value)`."""
        flags = pa.Array.from_buffers(pa.uint8(), len(arr), [None, special])
        values = arr.to_pylist()
        raw = [None] * len(values)
        for i in pc.indices_nonzero(flags).to_pylist():
            raw[i] = values[i]
        out: list[Any] = []
        for v, r in zip(values, raw):
            if r is not None:
                # the scanner removed a string's quotes (TEXT/INT); other flagged values are JSON text
                out.append(convert(_decode_text(r)))
            elif v is None:
                out.append(None)
            else:
                out.append(int(v) if cast_rest else v)
        return pa.array(out, typ)

    def raw_event(self, i: int) -> bytes:
        s = self._spans
        return bytes(self.buf.view[s.ev_starts[i] : s.ev_starts[i] + s.ev_lens[i]])

    def events(self, rows: list[int] | None = None) -> list[Event]:
        """The events (all, or `rows`) decoded as the pure-Python reader gives them: in one msgspec
        call; event by event only to name the one whose field has an unexpected type."""
        at = range(self.n) if rows is None else rows
        try:
            return _EVENTS.decode(b"[" + b",".join(map(self.raw_event, at)) + b"]")
        except msgspec.ValidationError:
            pass
        out = []
        for i in at:
            try:
                out.append(_EVENT.decode(self.raw_event(i)))
            except msgspec.ValidationError as e:
                raise self._s.reader._fail(f"unexpected event field type: {e} (event #{self.seen + i})") from None
        return out


def _decode_text(text: str) -> Any:
    """A flagged value's text back to its JSON value: quoted strings came without their quotes."""
    try:
        return msgspec.json.decode(text)
    except msgspec.DecodeError:
        return msgspec.json.decode(f'"{text}"')


class Scanner:
    """Streams a Chrome trace file as `Chunk`s; header/trailer keys and errors as ChromeTraceReader."""

    def __init__(self, reader: ChromeTraceReader) -> None:
        if load() is None:
            raise RuntimeError("native scanner unavailable")
        self.reader = reader
        # A small file's tables are small: 3 of ~9 MB zeroed per file took 80 ms of each tiny trace,
        # and 3 of size/16 events (the most a file can hold) still 2.5 ms of each 0.1 MB one. A
        # trace's events take ~100-600 bytes of text: size/128 a call leaves few files more than
        # one call, and a file of smaller events takes a few more calls.
        try:
            size = reader.path.stat().st_size * (32 if reader.path.name.endswith(".gz") else 1)
        except OSError:
            size = CAP * 128
        self.cap = min(CAP, max(256, size // 128))
        self._pool = [_Spans(self.cap) for _ in range(_POOL)]

    def chunks(self, threaded: bool = True) -> Iterator[Chunk]:
        """The file's chunks. `threaded`: read and scan ahead in a thread (the C scanner and
        gunzip release the GIL), so that reading and converting use two cores."""
        if not threaded:
            yield from self._file_chunks()
            return
        q: queue.Queue = queue.Queue(maxsize=_POOL - 2)
        stop = threading.Event()

        def put(item: object) -> bool:
            """Queue `item` unless the consumer has gone (then False)."""
            while not stop.is_set():
                try:
                    q.put(item, timeout=0.1)
                    return True
                except queue.Full:
                    continue
            return False

        def produce() -> None:
            try:
                for chunk in self._file_chunks():
                    if not put(chunk):
                        return
                put(_DONE)
            except BaseException as e:  # handed to the consumer, raised there
                put(e)

        t = threading.Thread(target=produce, name="prof-engine-scan", daemon=True)
        t.start()
        try:
            while True:
                item = q.get()
                if item is _DONE:
                    return
                if isinstance(item, BaseException):
                    raise item
                yield item
        finally:
            stop.set()
            t.join()

    def _file_chunks(self) -> Iterator[Chunk]:
        return self.reader.stream(self._chunks)

    def _chunks(self, f) -> Iterator[Chunk]:
        from prof_engine._native import _ext

        r = self.reader
        first = r._open_array(f)
        buffers: list[_Buffer] = []
        calls = 0

        def buffer(size: int) -> _Buffer:
            """A buffer of at least `size` bytes that no chunk still in use reads (one is valid until
            `_POOL` more are scanned, as the span tables)."""
            for b in buffers:
                if b.last <= calls - _POOL and len(b.data) >= size:
                    return b
            b = _Buffer(max(size, r.chunk_bytes + (r.chunk_bytes >> 2)))
            buffers[:] = [o for o in buffers if o.last > calls - _POOL] + [b]  # smaller free ones go
            return b

        # a first read this short met the end of the file (a read returns all it asked for until
        # then; no header takes half of it): the file needs no read-sized buffer (10 MB zeroed
        # took 19 ms of each tiny trace)
        if len(first) < r.chunk_bytes // 2:
            buf = _Buffer(len(first))
            buffers.append(buf)
        else:
            buf = buffer(len(first))
        buf.view[: len(first)] = first
        buf.used = len(first)
        del first
        pos, after, seen = 0, 0, 0
        while True:
            spans = self._pool[calls % _POOL]  # the next table only once a chunk used this one
            consumed, n, err_pos, status, after = _ext.scan(
                buf.data,
                pos,
                buf.used,
                after,
                self.cap,
                _TOP_NAMES,
                _ARGS_NAMES,
                spans.starts,
                spans.lens,
                spans.ev_starts,
                spans.ev_lens,
            )
            if status == -2:
                where = r.bytes_read - buf.used + err_pos
                what = "text that is not UTF-8" if err_pos < buf.used and buf.data[err_pos] >= 0x80 else "corrupt JSON"
                raise r._fail(
                    f"{what} at byte {where} (in event #{seen + n}): "
                    f"{bytes(buf.view[max(err_pos - 20, 0) : min(err_pos + 20, buf.used)])!r}"
                )
            if n:
                yield Chunk(self, spans, buf, n, seen)
                buf.last = calls
                calls += 1
                seen += n
            pos = consumed
            if status == 1:
                self._trailer(f, bytes(buf.view[pos : buf.used]), seen)
                return
            if n == self.cap:
                continue
            rest = buf.used - pos  # an event cut by the end of the read: the next buffer starts with it
            if rest > jsonstream._MAX_EVENT:  # memory stays bounded whatever the input: as the Python reader
                raise r.too_large(rest)
            nxt = buffer(rest + r.chunk_bytes)
            nxt.view[:rest] = buf.view[pos : buf.used]
            got = r._readinto(f, nxt.view[rest : rest + r.chunk_bytes])
            if not got:
                self._end_without_bracket(bytes(nxt.view[:rest]), seen)
                return
            buf, buf.used, pos = nxt, rest + got, 0

    def _trailer(self, f, rest: bytes, seen: int) -> None:
        """The object's keys after the event array's ']'."""
        r = self.reader
        tail = r.read_rest(f, rest).strip()
        if r.form == "array":
            if tail:
                raise r._fail(f"unexpected data after the event array: {tail[:40]!r}")
            return
        if not tail.endswith(b"}"):
            raise r._fail(f"truncated or corrupt JSON: the trace object does not end properly (after {seen} events)")
        try:
            trailer = _ANY.decode(b"{" + tail.lstrip(b",").lstrip() if tail != b"}" else b"{}")
        except msgspec.DecodeError:
            raise r._fail("the keys after traceEvents are not valid JSON") from None
        if isinstance(trailer, dict):
            r.header.update(trailer)

    def _end_without_bracket(self, rest: bytes, seen: int) -> None:
        r = self.reader
        if r.form == "array" and not rest.strip().rstrip(b",").strip():
            return  # the trace event format allows omitting the closing ']'
        raise r._fail(
            f"truncated or corrupt JSON: the event array does not end properly (after {seen} events, "
            f"{r.bytes_read} bytes read)"
        )
