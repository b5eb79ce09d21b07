"""Stream the events of a Chrome trace JSON file in bounded chunks.

Chrome traces come as an object (`{"traceEvents": [...], ...other keys}`, torch.profiler) or as a
bare array (`[...]`, Ascend trace_view.json / msprof_*.json). Either way the events are one JSON
array that can be gigabytes long, so it is never decoded whole.

Algorithm: read the file in chunks of `chunk_bytes`; cut the buffer after the last `}` that is
followed by `,` and `{` (an event boundary, unless it lies inside a string); decode the part before
the cut as a JSON array of typed events with msgspec. If that part does not decode, the cut was
inside a string and an earlier candidate is tried. At end of file the array's closing `]` is found
from the right, and what follows it (the object's remaining keys) is decoded as the trailer.
Memory is bounded by a few chunks plus the decoded events of one chunk.
"""

from __future__ import annotations

import gzip
import io
import re
import zlib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, BinaryIO, cast

import msgspec

from prof_engine.errors import InputError

_BOUNDARY = re.compile(rb"\}\s*,\s*\{")
_EVENTS_KEY = re.compile(rb'"traceEvents"\s*:\s*\[')
_MAX_HEADER = 64 << 20
_TRIES = 8
_MAX_EVENT = 64 << 20  # an event bigger than this is taken as corrupt input


class Event(msgspec.Struct, gc=False):
    """The fields of a Chrome trace event that prof-engine reads; numbers kept as raw text."""

    ph: str = ""
    name: Any = ""
    cat: Any = None
    pid: Any = None
    tid: Any = None
    ts: msgspec.Raw = msgspec.Raw(b"")
    dur: msgspec.Raw = msgspec.Raw(b"")
    id: Any = None
    id2: Any = None  # async ids as {"local": ...} or {"global": ...}
    s: Any = None
    bp: Any = None
    args: msgspec.Raw = msgspec.Raw(b"")


SIDE_FILE_LIMIT = 64 << 20  # a side file (profiler_info, metadata, a config) is kilobytes


def read_json(path: Path, what: str = "JSON", limit: int = SIDE_FILE_LIMIT) -> Any:
    """A small JSON file (a profiler's side file, a config) decoded whole, strictly: NaN, Infinity,
    numbers no double holds, nesting past the recursion limit, a file larger than `limit` (or
    endless, /dev/zero) are an InputError naming `path`, never a traceback or a hang."""
    try:
        with open(path, "rb") as f:
            data = f.read(limit + 1)
    except OSError as e:
        raise InputError(f"{path}: cannot read {what}: {e.strerror or e}") from None
    if len(data) > limit:
        raise InputError(f"{path}: over {limit >> 20} MiB: too large for {what}")
    try:
        return msgspec.json.decode(data.removeprefix(b"\xef\xbb\xbf"))
    except RecursionError:
        raise InputError(f"{path}: not valid {what}: nested too deeply") from None
    except msgspec.MsgspecError as e:
        raise InputError(f"{path}: not valid {what} ({e})") from None


def args_text(ev: Event) -> bytes:
    """The event's `args` JSON text; b"" when it has none (absent, null, or not an object: a
    number or a list names no argument)."""
    raw = bytes(ev.args)
    return raw if raw[:1] == b"{" else b""


_EVENTS = msgspec.json.Decoder(list[Event])
_ANY = msgspec.json.Decoder()


# Real trace JSON gzips 10-30x (the fixtures: 14-30x); a stream that expands over 200x (whitespace,
# one repeated byte: deflate's limit is ~1000x) is a decompression bomb, refused once RATIO_AFTER
# bytes are out (a header alone may compress well).
MAX_RATIO = 200
RATIO_AFTER = 64 << 20


class _GuardedGzip(gzip.GzipFile):
    """A gzip file that refuses, in one line, to expand past MAX_RATIO times the compressed bytes
    it has consumed (readinto goes through `read`)."""

    def __init__(self, path: Path) -> None:
        self._raw = open(path, "rb")
        self._path, self._out = path, 0
        super().__init__(fileobj=self._raw, mode="rb")

    def _check(self, n: int) -> None:
        self._out += n
        if self._out > RATIO_AFTER and self._out > MAX_RATIO * max(consumed := self._raw.tell(), 1):
            raise InputError(
                f"{self._path}: gzip expands {self._out / max(consumed, 1):,.0f}x ({self._out >> 20} MiB from "
                f"{consumed >> 10} KiB): far beyond any trace (JSON compresses 10-30x); refused as a decompression bomb"
            )

    def read(self, size: int | None = -1) -> bytes:
        data = super().read(size)
        self._check(len(data))
        return data

    def read1(self, size: int = -1) -> bytes:
        data = super().read1(size)
        self._check(len(data))
        return data

    def close(self) -> None:
        try:
            super().close()
        finally:
            self._raw.close()


def open_bytes(path: Path) -> BinaryIO:
    """Open a trace file for binary reading, gunzipping by content (not by name), with the
    decompression-ratio guard of `_GuardedGzip`."""
    f = open(path, "rb")
    if f.read(2) == b"\x1f\x8b":
        f.close()
        return _GuardedGzip(path)  # type: ignore[return-value]
    f.seek(0)
    return f


def names_trace_events(path: Path, limit: int = _MAX_HEADER) -> bool:
    """Whether the key "traceEvents" occurs in the first `limit` bytes of the (gunzipped) file: a
    trace object's keys before its event array (a large `metadata` first) may be longer than a
    sniff's head; the reader takes up to `_MAX_HEADER` of them. Unreadable files say True, so
    that the reader reports their precise error."""
    try:
        with open_bytes(path) as f:
            tail, seen = b"", 0
            while seen < limit:
                block = f.read(1 << 20)
                if not block:
                    return False
                if b'"traceEvents"' in tail + block:
                    return True
                tail, seen = block[-16:], seen + len(block)
    except (OSError, EOFError, zlib.error):
        return True
    return False


class ChromeTraceReader:
    """Iterate the events of one Chrome trace file; `header` holds its other top-level keys.

    `header` is complete only once `chunks()` is exhausted (keys may follow the event array).
    """

    def __init__(self, path: Path, chunk_bytes: int = 8 << 20, progress: Callable[[int], None] | None = None) -> None:
        self.path = path
        self.chunk_bytes = chunk_bytes
        self.progress = progress  # called with the number of (uncompressed) bytes of each chunk read
        self.header: dict[str, Any] = {}
        self.form = ""  # "object" or "array"
        self.bytes_read = 0

    def _fail(self, what: str) -> InputError:
        return InputError(f"{self.path}: {what}")

    def too_large(self, held: int) -> InputError:
        """No event ends in the `held` bytes before what was read last (both readers say this)."""
        return self._fail(
            f"no event ends in {held >> 20} MiB before byte {self.bytes_read}: an event over "
            f"{_MAX_EVENT >> 20} MiB, or padding (corrupt or hostile input)"
        )

    def read_rest(self, f: BinaryIO, rest: bytes) -> bytes:
        """`rest` and the rest of the file, up to `_MAX_HEADER` bytes more (the keys after the
        event array are kilobytes; gigabytes of padding there are refused, not held)."""
        parts, size = [rest], len(rest)
        while more := self._read(f):
            parts.append(more)
            size += len(more)
            if size > _MAX_HEADER + len(rest):
                raise self._fail(f"over {_MAX_HEADER >> 20} MiB after the event array: corrupt or hostile input")
        return b"".join(parts)

    def chunks(self) -> Iterator[list[Event]]:
        return self.stream(self._chunks)

    def stream(self, chunks_of: Callable[[BinaryIO], Iterator[Any]]) -> Iterator[Any]:
        """`chunks_of(file)` over the opened file, with open and read errors as one-line InputErrors."""
        try:
            f = open_bytes(self.path)
        except OSError as e:
            raise self._fail(f"cannot open ({e.strerror})") from None
        with f:
            try:
                yield from chunks_of(f)
            except (OSError, EOFError, zlib.error) as e:
                raise self._fail(f"cannot read ({e}; truncated or corrupt gzip?)") from None
            except RecursionError:  # msgspec decodes nesting recursively: a hostile trace nests past the limit
                raise self._fail("not valid JSON: nested too deeply") from None

    def _read(self, f: BinaryIO) -> bytes:
        data = f.read(self.chunk_bytes)
        self.bytes_read += len(data)
        if self.progress and data:
            self.progress(len(data))
        return data

    def _readinto(self, f: BinaryIO, into: memoryview) -> int:
        """`_read` into `into` (filled unless the file ends); the number of bytes read."""
        got = 0
        buffered = cast(io.BufferedIOBase, f)  # open_bytes's BufferedReader or GzipFile: both have readinto
        while got < len(into):
            n = buffered.readinto(into[got:])
            if not n:
                break
            got += n
        self.bytes_read += got
        if self.progress and got:
            self.progress(got)
        return got

    def _open_array(self, f: BinaryIO) -> bytes:
        """Read up to the event array's '[' (the object's keys before it go to `header`); return
        what was read after it."""
        buf = self._read(f)
        if not buf.strip():
            raise self._fail("file is empty")
        buf = buf.lstrip(b"\xef\xbb\xbf \t\r\n")
        if buf[:1] == b"[":
            self.form, buf = "array", buf[1:]
        elif buf[:1] == b"{":
            self.form = "object"
            buf = self._skip_header(f, buf)
        else:
            raise self._fail("not JSON: a Chrome trace starts with '{' or '['")
        return buf

    def _chunks(self, f: BinaryIO) -> Iterator[list[Event]]:
        buf = self._open_array(f)
        seen = 0
        while True:
            more = self._read(f)
            if not more:
                break
            buf += more
            cut, events = self._decode_prefix(buf, seen)
            if events:
                seen += len(events)
                yield events
                buf = buf[cut:].lstrip()
                buf = buf[1:] if buf[:1] == b"," else buf
            elif len(buf) - len(more) > _MAX_EVENT:
                raise self.too_large(len(buf) - len(more))
        yield self._decode_last(buf, seen)

    def _skip_header(self, f: BinaryIO, buf: bytes) -> bytes:
        """Consume the object's keys before "traceEvents"; return the buffer after its '['."""
        while True:
            m = _EVENTS_KEY.search(buf)
            if m:
                break
            more = self._read(f) if len(buf) < _MAX_HEADER else b""
            if not more:
                self._not_a_trace(buf)
            buf += more
        head = buf[: m.start()].rstrip().rstrip(b",") + b"}"
        try:
            self.header.update(_ANY.decode(head))
        except msgspec.DecodeError:
            raise self._fail("the keys before traceEvents are not valid JSON") from None
        return buf[m.end() :]

    def _not_a_trace(self, buf: bytes) -> None:
        try:
            obj = _ANY.decode(buf)
        except msgspec.DecodeError:
            raise self._fail('not a Chrome trace: no "traceEvents" array found (truncated or not a trace?)') from None
        keys = ", ".join(list(obj)[:8]) if isinstance(obj, dict) else type(obj).__name__
        raise self._fail(f'JSON but not a Chrome trace: no "traceEvents" key (keys: {keys})')

    def _decode(self, body: bytes, seen: int) -> list[Event]:
        try:
            return _EVENTS.decode(b"[" + body + b"]")
        except msgspec.ValidationError as e:
            detail = re.sub(r"\$\[(\d+)\]", lambda m: f"event #{seen + int(m.group(1))}", str(e))
            raise self._fail(f"unexpected event field type: {detail}") from None

    def _decode_prefix(self, buf: bytes, seen: int) -> tuple[int, list[Event]]:
        """Decode the longest run of whole events at the start of `buf`; return (cut, events)."""
        cuts = [m.start() + 1 for m in _BOUNDARY.finditer(buf, max(0, len(buf) - (1 << 20)))]
        if not cuts:
            cuts = [m.start() + 1 for m in _BOUNDARY.finditer(buf)]
        for cut in reversed(cuts[-_TRIES:]):
            try:
                return cut, self._decode(buf[:cut], seen)
            except msgspec.DecodeError:
                continue
        return 0, []

    def _decode_last(self, buf: bytes, seen: int) -> list[Event]:
        """Decode the final events and the keys after the array's closing ']'."""
        end = len(buf)
        for _ in range(64):
            end = buf.rfind(b"]", 0, end)
            if end < 0:
                break
            tail = buf[end + 1 :].strip()
            if self.form == "object":
                if not tail.endswith(b"}"):
                    continue
                tail_obj = b"{" + tail.lstrip(b",").lstrip() if tail != b"}" else b"{}"
                try:
                    trailer = _ANY.decode(tail_obj)
                except msgspec.DecodeError:
                    continue
            elif tail:
                continue
            try:
                events = self._decode(buf[:end], seen)
            except msgspec.DecodeError:
                continue
            if self.form == "object" and isinstance(trailer, dict):
                self.header.update(trailer)
            return events
        if self.form == "array":  # the trace event format allows omitting the closing ']'
            try:
                return self._decode(buf.rstrip().rstrip(b","), seen)
            except msgspec.DecodeError:
                pass
        raise self._fail(
            f"truncated or corrupt JSON: the event array does not end properly (after {seen} events, "
            f"{self.bytes_read} bytes read)"
        )
