"""The columnar converter of Chrome/Kineto events: a chunk → canonical record batches, in Arrow.

Every chunk of every Chrome-family converter (`ChromeConverter` and its Ascend/msprof subclasses,
whatever read its bytes: the native scanner's `scan.Chunk` or the pure-Python `pychunks.Chunk`)
comes here: each column is built by Arrow compute from the chunk's columns, never as Python lists,
with the same rows, ids, comm rows, counts and findings as the converter's per-event code gives.
Per-value work that Arrow cannot express (the kind of a (category, name) pair, shapes text, memory
and flow device names) is done once per distinct value on the column's dictionary. Rare rows
(metadata, counters, marks, comm details), a chunk holding begin/end pairs, and the slices of a
converter that describes each row itself (`ChromeConverter.add_slices`: Ascend's) go through the
converter's per-event code with the chunk's events.
"""

from __future__ import annotations

from functools import cache
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any, Protocol

import msgspec
import pyarrow as pa
import pyarrow.compute as pc

from prof_engine import schema
from prof_engine.importers import classify
from prof_engine.importers import keys as K
from prof_engine.importers.jsonstream import Event
from prof_engine.importers.keys import _memory_device, _types_text, shapes_text
from prof_engine.importers.pairing import PAIRED_PHASES
from prof_engine.importers.scan import INT, RAW, TEXT, US

BATCH_ROWS = 50_000  # rows per row-buffer flush: bounds the converter's memory (~300 MB at 100 MB of JSON)

if TYPE_CHECKING:
    from prof_engine.importers.chrome import ChromeConverter


class Chunk(Protocol):
    """What `feed` reads of a chunk of events (`scan.Chunk`, `pychunks.Chunk`): the values of an
    event or `args` key (`keys.TOP_KEYS`, `keys.ARGS_KEYS`) in a mode (`scan.RAW`, TEXT, INT, US),
    for all events or the given rows; and the events themselves, decoded."""

    n: int  # events in the chunk

    def column(self, key: str, mode: int = TEXT, rows: pa.Array | None = None) -> pa.Array: ...

    def events(self, rows: list[int] | None = None) -> list[Event]: ...


class Rows:
    """Some rows of a chunk, as a chunk (an importer leaves events out: msprof's repeated ones)."""

    def __init__(self, chunk: Chunk, rows: list[int]) -> None:
        self._chunk, self._rows = chunk, rows
        self._at = pa.array(rows, pa.int64())
        self.n = len(rows)

    def column(self, key: str, mode: int = TEXT, rows: pa.Array | None = None) -> pa.Array:
        return self._chunk.column(key, mode, self._at if rows is None else self._at.take(rows))

    def events(self, rows: list[int] | None = None) -> list[Event]:
        return self._chunk.events(self._rows if rows is None else [self._rows[i] for i in rows])


# Value sets for `is_in`, built on first use: building an Arrow array from Python values makes
# pyarrow import pandas (~0.2 s, ~40 MB), which `import prof_engine` should not pay.
_SETS = {
    "flow": sorted("stf"),
    "instant": sorted("iIn"),
    "columnar": ["X", *"stf", *"iIn"],
    "skipped": sorted(classify.SKIPPED_CATEGORIES),
    "device": sorted(classify.DEVICE_CATEGORIES),
}


@cache
def _set(name: str) -> pa.Array:
    return pa.array(_SETS[name], pa.string())


_KINDS: dict[str, str] = {}  # "category\0name\0has collective" → kind
_MEMO: dict[tuple[str, str], Any] = {}
_MEMO_MAX = 200_000


def feed(conv: ChromeConverter, chunk: Chunk) -> None:
    ph = chunk.column("ph")
    counts = {(k.as_py() or ""): v.as_py() for k, v in zip(*pc.value_counts(ph).flatten())}
    for p, n in counts.items():
        conv.counts[p] = conv.counts.get(p, 0) + n
    # Begin/end pairs (B/E, async b/e, S/F) interleave slice ids with other events: then every
    # event takes the per-event path; else only the phases the columns below do not handle
    # (metadata, counters, unknown ones).
    per_event = not PAIRED_PHASES.isdisjoint(counts)
    if per_event:
        conv.dispatch(chunk.events())
        return
    rows = pc.indices_nonzero(pc.invert(pc.fill_null(pc.is_in(ph, _set("columnar")), False))).to_pylist()
    if rows:
        handlers = conv._handlers()
        for ev in chunk.events(rows):
            h = handlers.get(ev.ph)
            if h is not None:
                h(ev)
    ts = chunk.column("ts", US)
    if conv.pairing.thread_end:
        _see_threads(conv, chunk, ph, ts)
    has_ts = pc.is_valid(ts)
    if counts.get("X"):
        conv.add_slices(chunk, pc.indices_nonzero(pc.and_(pc.equal(ph, "X"), has_ts)).cast(pa.int64()), ts)
    if any(counts.get(p) for p in "stf"):
        _flows(
            conv,
            chunk,
            pc.and_(pc.and_(pc.is_in(ph, _set("flow")), has_ts), pc.is_valid(chunk.column("id", RAW))),
            ts,
            ph,
        )
    if any(counts.get(p) for p in "iIn"):
        _instants(conv, chunk, pc.and_(pc.is_in(ph, _set("instant")), has_ts), ts)
    for t in conv.tables.values():  # rows a converter added one by one (its hooks, rare events)
        if len(t) >= BATCH_ROWS:
            t.flush()


def _see_threads(conv: ChromeConverter, chunk: Chunk, ph: pa.Array, ts: pa.Array) -> None:
    """`Pairing.see_event` over a chunk: how far the threads with an open B run (their latest end)."""
    dur = pc.if_else(
        pc.fill_null(pc.equal(ph, "X"), False), pc.max_element_wise(pc.fill_null(chunk.column("dur", US), 0), 0), 0
    )
    ends = pa.table(
        {
            "pid": pc.fill_null(chunk.column("pid"), ""),
            "tid": pc.fill_null(chunk.column("tid"), ""),
            "end": pc.add(ts, dur),
        }
    ).filter(pc.is_valid(ts))
    for row in ends.group_by(["pid", "tid"]).aggregate([("end", "max")]).to_pylist():
        conv.pairing.see(row["pid"], row["tid"], row["end_max"])


@cache
def _counting(n: int) -> pa.Array:
    """0, 1, ..., n - 1 (int64), built once per size."""
    return pa.array(range(n), pa.int64())


def _ids(first: int, n: int) -> pa.Array:
    """first, first + 1, ..., first + n - 1: Arrow's addition over a counting array built once, not a
    Python range each chunk (2-6 ms of the converter's thread per chunk of ~18 k slices)."""
    return pc.add(_counting(1 << max(n - 1, 0).bit_length()).slice(0, n), pa.scalar(first, pa.int64()))


def _emit(conv: ChromeConverter, table: str, columns: dict[str, pa.Array]) -> None:
    """Send a batch to the sink after what the table's row buffers hold (ids stay in order)."""
    conv.tables[table].flush()
    t = schema.tables()[table]
    n = len(next(iter(columns.values())))
    arrays = [columns[c.name].cast(c.arrow_type) if c.name in columns else pa.nulls(n, c.arrow_type) for c in t.columns]
    conv.tables[table].sink(table, pa.RecordBatch.from_arrays(arrays, schema=t.arrow_schema))


def _per_distinct(values: pa.Array, fn, typ: pa.DataType) -> pa.Array:
    """`fn(value)` over a column, computed once per distinct value."""
    enc = values.dictionary_encode()
    return pc.take(pa.array([fn(v) for v in enc.dictionary.to_pylist()], typ), enc.indices)


def _kinds(cats: pa.Array, names: pa.Array, collective: pa.Array) -> pa.Array:
    """`classify.kind_of` per row, once per distinct (category, name, has collective)."""
    if len(_KINDS) > _MEMO_MAX:
        _KINDS.clear()
    has_coll = pc.is_valid(collective)
    # <has category><its length>:<category><name><has collective>: a name or category may hold any
    # character (a NUL too), so no separator character could split the key back
    text = pc.fill_null(cats, "")
    key = pc.binary_join_element_wise(
        pc.if_else(pc.is_valid(cats), "1", "0"),
        pc.cast(pc.utf8_length(text), pa.string()),
        ":",
        text,
        names,
        pc.if_else(has_coll, "1", "0"),
        "",
    )

    def kind(k: str) -> str:
        got = _KINDS.get(k)
        if got is None:
            length, rest = k[1:].split(":", 1)
            cat, name = rest[: int(length)], rest[int(length) : -1]
            got = _KINDS[k] = classify.kind_of(cat if k[0] == "1" else None, name, k[-1] == "1")
        return got

    return _per_distinct(key, kind, pa.string())


def _count_unknown(conv: ChromeConverter, cats: pa.Array, kinds: pa.Array) -> None:
    """Count the slices of kind "other" by category where no table of `classify` knows it."""
    other = pc.equal(kinds, "other")
    if not pc.any(other).as_py():
        return
    for cat, n in zip(*pc.value_counts(cats.filter(other)).flatten()):
        if classify.is_unknown_category(cat.as_py()):
            conv.unknown_categories[cat.as_py()] += n.as_py()


def _memo_text(raws: pa.Array, convert, kind: str) -> pa.Array:
    """`convert(decoded JSON)` per row of raw JSON texts, once per distinct text (NULL stays NULL)."""
    if len(_MEMO) > _MEMO_MAX:
        _MEMO.clear()

    def one(raw: str | None) -> Any:
        if raw is None:
            return None
        got = _MEMO.get((kind, raw), _MEMO)
        if got is _MEMO:
            got = _MEMO[kind, raw] = convert(msgspec.json.decode(raw))
        return got

    return _per_distinct(raws, one, pa.string())


def slices(conv: ChromeConverter, chunk: Chunk, rows: pa.Array, ts_all: pa.Array) -> None:
    """The `X` events at `rows` (int64 indices, as `Chunk.column` takes them) as slices, described
    as `ChromeConverter.describe` and `after_slice` do; `ts_all`: the chunk's times in ns."""
    cats = chunk.column("cat", TEXT, rows)
    keys = pc.ascii_lower(cats)  # `classify.category_key`: the tables know categories in lower case
    skipped = pc.fill_null(pc.is_in(keys, _set("skipped")), False)
    if pc.any(skipped).as_py():
        keep = pc.invert(skipped)
        rows, cats, keys = rows.filter(keep), cats.filter(keep), keys.filter(keep)
    durs = chunk.column("dur", US, rows)
    ts = ts_all.take(rows)
    bad = pc.or_(
        pc.or_(pc.less_equal(ts, -classify.TS_LIMIT), pc.greater_equal(ts, classify.TS_LIMIT)),
        pc.fill_null(pc.greater(durs, classify.DUR_LIMIT), False),
    )
    if pc.any(bad).as_py():  # slices outside any run (`ChromeConverter._slice`): dropped
        i = pc.index(bad, True).as_py()
        conv.out_of_range_seen(
            "time",
            pc.sum(bad).as_py(),
            chunk.column("name", TEXT, rows.slice(i, 1))[0].as_py() or "",
            ts[i].as_py(),
            durs[i].as_py(),
        )
        keep = pc.invert(bad)
        rows, cats, keys, durs, ts = (v.filter(keep) for v in (rows, cats, keys, durs, ts))
    n = len(rows)
    if not n:
        return
    first = conv.seq + 1

    def col(key: str, mode: int = TEXT) -> pa.Array:
        return chunk.column(key, mode, rows)

    names = pc.fill_null(col("name"), "")
    collective = col(K.COLLECTIVE)
    kinds = _kinds(cats, names, collective)
    _count_unknown(conv, cats, kinds)
    is_step = pc.equal(kinds, "step")
    steps = pa.nulls(n, pa.int64())
    named = pc.starts_with(names, "ProfilerStep#")
    if pc.any(named).as_py():  # steps, and step names whose number is beyond int32 (not steps)
        number = pc.struct_field(pc.extract_regex(names, classify.STEP_NAME.pattern.replace("(", "(?P<n>", 1)), [0])
        steps = pc.cast(pc.if_else(is_step, number, pa.scalar(None, number.type)), pa.int64())
        for name in names.filter(pc.and_(pc.is_valid(number), pc.invert(is_step))).to_pylist():
            conv.out_of_range_seen("step", 1, name)
    on_device = pc.fill_null(pc.is_in(keys, _set("device")), False)
    pid = col("pid")
    if pc.any(on_device).as_py():
        dev = pc.coalesce(col(K.DEVICE, INT), pc.cast(chunk.column("pid", INT, rows), pa.int64()), 0)
        devices = pc.if_else(on_device, pc.binary_join_element_wise("gpu", pc.cast(dev, pa.string()), ""), "host")
        streams = pc.if_else(on_device, col(K.STREAM, INT), pa.nulls(n, pa.int64()))
    else:
        devices, streams = pa.repeat(pa.scalar("host"), n), pa.nulls(n, pa.int64())
    conv.negative_durations += pc.sum(pc.less(durs, 0)).as_py() or 0
    args = col("args", RAW)
    objects = pc.starts_with(args, "{")
    if not pc.all(objects).as_py():  # args that are a number or a list name nothing: none
        args = pc.if_else(objects, args, pa.scalar(None, args.type))
    _emit(
        conv,
        "slices",
        {
            "id": _ids(first, n),
            "rank": pa.repeat(pa.scalar(conv.file_index, pa.int32()), n),
            "device": devices,
            "step": steps,
            "kind": kinds,
            "name": names,
            "category": cats,
            "ts": ts,
            "dur": pc.max_element_wise(pc.fill_null(durs, 0), 0),
            "pid": pid,
            "tid": col("tid"),
            "stream": streams,
            # Kineto's device and runtime records of 2021 spell it `external id`
            "correlation": col(K.CORRELATION, INT),
            "external_id": pc.coalesce(col(K.EXTERNAL_ID, INT), col(K.EXTERNAL_ID_2021, INT)),
            "input_shapes": _memo_text(col(K.INPUT_DIMS, RAW), shapes_text, "shapes"),
            "input_types": _memo_text(col(K.INPUT_TYPE, RAW), _types_text, "types"),
            "args": args,
        },
    )
    conv.seq = first + n - 1
    comm = pc.or_(pc.is_valid(collective), pc.is_valid(col(K.PG_NAME)))
    if pc.any(comm).as_py():
        from prof_engine.importers.chrome import _ARGS

        at = pc.indices_nonzero(comm)  # (only their rows to Python: a chunk's every args took ~4 ms)
        for i, text, dev in zip(at.to_pylist(), args.take(at).to_pylist(), devices.take(at).to_pylist()):
            conv.seq = first + i
            conv._comm(_ARGS.decode(text), dev)
        conv.seq = first + n - 1


def _flows(conv: ChromeConverter, chunk: Chunk, mask: pa.Array, ts_all: pa.Array, ph: pa.Array) -> None:
    rows = pc.indices_nonzero(mask).cast(pa.int64())
    n = len(rows)
    if not n:
        return
    pid = chunk.column("pid", TEXT, rows)
    _emit(
        conv,
        "flows",
        {
            "rank": pa.repeat(pa.scalar(conv.file_index, pa.int32()), n),
            "device": _per_distinct(pid, conv.point_device, pa.string()),
            "category": pc.fill_null(chunk.column("cat", TEXT, rows), ""),
            "flow_id": chunk.column("id", TEXT, rows),
            "phase": ph.take(rows),
            "ts": ts_all.take(rows),
            "pid": pid,
            "tid": chunk.column("tid", TEXT, rows),
        },
    )


def _instants(conv: ChromeConverter, chunk: Chunk, mask: pa.Array, ts_all: pa.Array) -> None:
    """`[memory]` instants become allocator rows, a column at a time; others are marks, one by one."""
    rows = pc.indices_nonzero(mask).cast(pa.int64())
    if not len(rows):
        return
    names = pc.fill_null(chunk.column("name", TEXT, rows), "")
    is_memory = pc.equal(names, "[memory]")
    marks = rows.filter(pc.invert(is_memory)).to_pylist()
    if marks:
        ts_py = ts_all.take(pa.array(marks)).to_pylist()
        for ev, t in zip(chunk.events(marks), ts_py):
            conv._mark(ev, t, str(ev.name) if ev.name is not None else "")
    rows = rows.filter(is_memory)
    nbytes = chunk.column(K.BYTES, INT, rows)
    rows, nbytes = rows.filter(pc.is_valid(nbytes)), nbytes.filter(pc.is_valid(nbytes))
    n = len(rows)
    if not n:
        return
    dtype, dev_id = chunk.column(K.DEVICE_TYPE, RAW, rows), chunk.column(K.DEVICE_ID, RAW, rows)

    def device(key: str) -> str:
        t, d = key.split("\x00")
        return _memory_device(SimpleNamespace(device_type=_json(t), device_id=_json(d)))

    devices = _per_distinct(
        pc.binary_join_element_wise(pc.fill_null(dtype, ""), pc.fill_null(dev_id, ""), "\x00"), device, pa.string()
    )
    _emit(
        conv,
        "memory_events",
        {
            "rank": pa.repeat(pa.scalar(conv.file_index, pa.int32()), n),
            "device": devices,
            "ts": ts_all.take(rows),
            "pid": chunk.column("pid", TEXT, rows),
            "tid": chunk.column("tid", TEXT, rows),
            "addr": chunk.column(K.ADDR, INT, rows),
            "bytes": nbytes,
            "total_allocated": chunk.column(K.TOTAL_ALLOCATED, INT, rows),
            "total_reserved": chunk.column(K.TOTAL_RESERVED, INT, rows),
        },
    )


def _json(text: str) -> Any:
    return msgspec.json.decode(text) if text else None
