"""Chrome trace / Kineto JSON → canonical record batches.

Handles torch.profiler (Kineto) object-form traces and array-form Chrome traces: `X` and `B`/`E`
duration events, async `b`/`e` and `S`/`F` ones on tracks of their own (importers.pairing pairs
begins and ends), `i`/`I`/`n`/`T`/`p` instants (Kineto `[memory]` events become allocator rows),
`C` counters, `s`/`t`/`f` flows, `M` metadata (process and thread names, kept as lanes).
Times stay relative to the file's clock here; the store adds `baseTimeNanoseconds` and the rank,
known only once the whole file is read (those keys may follow the events).

Every converter's chunks (`chunks`: read by the native scanner `scan` or, without it, by `pychunks`)
go to the columnar converter (`chunkconv`); it calls back here for the rare events (metadata,
counters, marks) and for chunks holding begin/end pairs. Subclasses (Ascend, msprof) override the
hooks: `describe`/`after_slice` (so `add_slices` describes their slices row by row) and
`point_device`.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, NamedTuple

import msgspec
import pyarrow as pa
import pyarrow.compute as pc

from prof_engine import schema
from prof_engine._native import pychunks
from prof_engine.importers import chunkconv, classify, scan
from prof_engine.importers import keys as K
from prof_engine.importers.jsonstream import ChromeTraceReader, Event, args_text
from prof_engine.importers.keys import (  # _int, _text, shapes_text: other importers take them from here
    _int,
    _memory_device,
    _text,
    _types_text,
    shapes_text,
)
from prof_engine.importers.pairing import Pairing
from prof_engine.importers.units import us_text_to_ns
from prof_engine.store.quality import add_finding

Sink = Callable[[str, pa.RecordBatch], None]
# Slice columns the converter leaves NULL: finalisation fills them in (queries/store/finalize.sql).
FINALIZED = (
    "depth",
    "parent_id",
    "self_dur",
    "launch_id",
    "launch_name",
    "wait",
    "launch_api",
    "launch_api_ts",
    "launch_api_dur",
)


class Args(msgspec.Struct, gc=False):
    """The `args` keys that map onto canonical columns; the rest stays in the JSON `args` column."""

    external_id: Any = msgspec.field(default=None, name=K.EXTERNAL_ID)
    external_id_2021: Any = msgspec.field(default=None, name=K.EXTERNAL_ID_2021)
    correlation: Any = msgspec.field(default=None, name=K.CORRELATION)
    stream: Any = msgspec.field(default=None, name=K.STREAM)
    device: Any = msgspec.field(default=None, name=K.DEVICE)
    input_dims: Any = msgspec.field(default=None, name=K.INPUT_DIMS)
    input_type: Any = msgspec.field(default=None, name=K.INPUT_TYPE)
    collective: Any = msgspec.field(default=None, name=K.COLLECTIVE)
    in_nelems: Any = msgspec.field(default=None, name="In msg nelems")
    out_nelems: Any = msgspec.field(default=None, name="Out msg nelems")
    group_size: Any = msgspec.field(default=None, name="Group size")
    dtype: Any = None
    pg_name: Any = msgspec.field(default=None, name=K.PG_NAME)
    pg_desc: Any = msgspec.field(default=None, name="Process Group Description")
    pg_ranks: Any = msgspec.field(default=None, name="Process Group Ranks")
    total_allocated: Any = msgspec.field(default=None, name=K.TOTAL_ALLOCATED)
    total_reserved: Any = msgspec.field(default=None, name=K.TOTAL_RESERVED)
    nbytes: Any = msgspec.field(default=None, name=K.BYTES)
    device_id: Any = msgspec.field(default=None, name=K.DEVICE_ID)
    device_type: Any = msgspec.field(default=None, name=K.DEVICE_TYPE)
    addr: Any = msgspec.field(default=None, name=K.ADDR)
    name: Any = None
    labels: Any = None
    # Ascend (torch_npu / msprof trace_view.json)
    physic_stream: Any = msgspec.field(default=None, name="Physic Stream Id")
    task_id: Any = msgspec.field(default=None, name="Task Id")
    ascend_task_type: Any = msgspec.field(default=None, name="Task Type")
    connection_id: Any = None
    src_rank: Any = msgspec.field(default=None, name="src rank")
    dst_rank: Any = msgspec.field(default=None, name="dst rank")
    transport: Any = msgspec.field(default=None, name="transport type")
    size_bytes: Any = msgspec.field(default=None, name="size(Byte)")
    data_type: Any = msgspec.field(default=None, name="data type")
    hccl_data_type: Any = msgspec.field(default=None, name="data_type")
    count: Any = None


_ARGS = msgspec.json.Decoder(Args)
_NO_ARGS = Args()


class Described(NamedTuple):
    """What a converter makes of one duration event (see `ChromeConverter.describe`)."""

    kind: str
    device: str
    stream: int | None = None
    correlation: int | None = None
    op_type: str | None = None
    task_type: str | None = None
    input_shapes: str | None = None
    input_types: str | None = None
    more_args: dict[str, Any] | None = None  # added to the event's args (what another file says of it)


# A name longer than this (characters) is cut to it, and counted: real names (a C++ template
# kernel's) run to a few KiB; a hostile one of gigabytes would be held whole by every later step.
MAX_NAME = 64 << 10


class _Columns:
    """Column buffers of one table, flushed to the sink as validated record batches."""

    def __init__(self, table: str, sink: Sink) -> None:
        self.table = schema.tables()[table]
        self.sink = sink
        self.cols: dict[str, list] = {c: [] for c in self.table.column_names}

    def __len__(self) -> int:
        return len(self.cols["rank"])

    def flush(self) -> None:
        if not len(self):
            return
        batch = pa.RecordBatch.from_pydict(self.cols, schema=self.table.arrow_schema)
        self.sink(self.table.name, batch)
        for v in self.cols.values():
            v.clear()


def anomalies(conv: ChromeConverter) -> dict[str, Any]:
    """What a source's manifest entry (`info`) says was odd in it and read anyway: slices that end
    before they start (`negative_durations`, read as 0 µs long; `prof-engine import` warns), and
    the `findings` (store.quality) of slices whose category no table of `classify` knows."""
    out: dict[str, Any] = {"negative_durations": conv.negative_durations} if conv.negative_durations else {}
    for rule, count, detail in conv.pairing.findings():  # begins never ended, ends of nothing
        add_finding(out, rule, count, detail)
    for what in ("time", "step"):  # slices outside any run, step numbers beyond int32
        if what in conv.out_of_range:
            add_finding(out, "values_out_of_range", *conv.out_of_range[what])
    unknown = conv.unknown_categories
    if unknown:
        named = ", ".join(f"{c!r} ({n})" for c, n in unknown.most_common(5))
        more = f" and {len(unknown) - 5} more" if len(unknown) > 5 else ""
        # a share of the source's slices (ids count them), not of its events: a B/E pair is two
        slices = conv.seq - (conv.file_index << 40)
        add_finding(out, "unknown_categories", sum(unknown.values()), f"categories {named}{more}", total=slices)
    n, first = conv.long_names
    add_finding(out, "long_names_cut", n, f"names over {MAX_NAME:,} characters cut to it, the first {first!r}…")
    return out


def with_anomalies(info: dict[str, Any], conv: ChromeConverter) -> dict[str, Any]:
    """`info` with the converter's `anomalies` added, the findings of both kept (a plain
    `{**info, **anomalies(conv)}` would replace the importer's findings with the converter's)."""
    odd = anomalies(conv)
    merged = {**info, **odd, "findings": [*(info.get("findings") or []), *(odd.get("findings") or [])]}
    if not merged["findings"]:
        del merged["findings"]
    return merged


class ChromeConverter:
    """Converts the events of one file into staging batches (rank = `file_index`, relative ts)."""

    def __init__(self, file_index: int, sink: Sink) -> None:
        self.file_index = file_index
        self.seq = file_index << 40
        self.long_names: list = [0, ""]  # names cut to MAX_NAME: how many, the first's start
        cut = self._cut_names(sink)
        self.tables = {name: _Columns(name, cut) for name, t in schema.stored_tables().items() if not t.derived}
        self.lanes: dict[tuple[str, str], dict[str, Any]] = {}
        self.pairing = Pairing(self._slice)  # B/E and async begin/end pairs (see importers.pairing)
        self.counts: dict[str, int] = {}
        self.negative_durations = 0  # slices whose end is before their start: read as 0 µs long
        self.unknown_categories: Counter[str] = Counter()  # slices of kind "other" by unknown category
        self.out_of_range: dict[str, list] = {}  # "time" / "step" -> [count, the first's detail]

    def _cut_names(self, sink: Sink) -> Sink:
        """`sink` with every `name` over MAX_NAME characters cut to MAX_NAME (and counted)."""

        def put(table: str, batch: pa.RecordBatch) -> None:
            i = batch.schema.get_field_index("name")
            if i >= 0 and len(batch):
                names = batch.column(i)
                long = pc.fill_null(pc.greater(pc.binary_length(names), MAX_NAME), False)
                if n := pc.sum(long).as_py():
                    cut = pc.if_else(long, pc.utf8_slice_codeunits(names, 0, MAX_NAME), names)
                    if not self.long_names[0]:
                        self.long_names[1] = names.filter(long)[0].as_py()[:60]
                    self.long_names[0] += n
                    batch = batch.set_column(i, batch.schema.field(i), cut.cast(names.type))
            sink(table, batch)

        return put

    def feed(self, chunk: chunkconv.Chunk) -> None:
        """Convert one chunk of the file's events (`chunkconv.feed`)."""
        chunkconv.feed(self, chunk)

    def add_slices(self, chunk: chunkconv.Chunk, rows: pa.Array, ts: pa.Array) -> None:
        """The `X` events at `rows` (int64 indices) of a chunk whose times in ns are `ts`, as
        slices: in columns (`chunkconv.slices`); a converter whose `describe` reads other files per
        event (Ascend) describes each row."""
        chunkconv.slices(self, chunk, rows, ts)

    def dispatch(self, events: list[Event]) -> None:
        """Each event to its phase's handler, in order; threads with an open B see how far they run."""
        handlers = self._handlers()
        pairing = self.pairing
        for ev in events:
            h = handlers.get(ev.ph)
            if h is not None:
                h(ev)
            if pairing.thread_end:
                pairing.see_event(ev)

    def _handlers(self) -> dict[str, Callable[[Event], None]]:
        paired = self.pairing
        return {
            "X": self._slice,
            "B": paired.begin,
            "E": paired.end,
            "i": self._instant,
            "I": self._instant,
            "n": self._instant,
            "C": self._counter,
            "s": self._flow,
            "t": self._flow,
            "f": self._flow,
            "M": self._meta,
            "b": paired.async_event,
            "e": paired.async_event,
            "S": paired.async_event,
            "F": paired.async_event,
            "T": self._instant,
            "p": self._instant,
        }

    def add_row(self, table: str, values: dict[str, Any]) -> None:
        """Append one row to `table` (columns missing from `values` are NULL), flushing full buffers."""
        t = self.tables[table]
        for col, vals in t.cols.items():
            vals.append(values.get(col))
        if len(t) >= chunkconv.BATCH_ROWS:
            t.flush()

    def finish(self) -> None:
        self.pairing.finish()
        for t in self.tables.values():
            t.flush()

    # -- duration records ---------------------------------------------------------------------
    def describe(self, ev: Event, a: Args, name: str, cat: str | None) -> Described | None:
        """Kind, device and links of a duration event; None to leave it out. Subclasses for other
        producers (Ascend lanes) override this, the rest of the conversion is shared."""
        if classify.is_skipped_category(cat):
            return None
        on_device = classify.is_device_category(cat)
        dev = _int(a.device)
        kind = classify.kind_of(cat, name, a.collective is not None)
        if kind == "other" and classify.is_unknown_category(cat):
            self.unknown_categories[cat] += 1
        return Described(
            kind=kind,
            device=f"gpu{dev if dev is not None else _int(ev.pid) or 0}" if on_device else "host",
            stream=_int(a.stream) if on_device else None,
            correlation=_int(a.correlation),
            input_shapes=shapes_text(a.input_dims),
            input_types=_types_text(a.input_type),
        )

    def out_of_range_seen(
        self, what: str, count: int, name: str, ts: int | None = None, dur: int | None = None
    ) -> None:
        """Count `count` slices out of range (`what`: "time", dropped; "step", a step number beyond
        int32, not a step); the first one's name and times are the finding's detail."""
        if what not in self.out_of_range:
            detail = (
                f"first: {name[:80]!r} at {ts} ns, {dur} ns long: dropped"
                if what == "time"
                else f"first: {name[:80]!r}: step number beyond int32, read as a range"
            )
            self.out_of_range[what] = [0, detail]
        self.out_of_range[what][0] += count

    def checked_dur(self, name: str, ts: int, dur: int) -> int | None:
        """`_slice`'s value checks, for a record another importer builds (an Ascend `.db` task, a
        kernel_details row): one no run holds (`classify.time_out_of_range`: an `endNs` of 2^63-1)
        is None, drop it (`values_out_of_range`); one that ends before it starts is read as 0 long
        (`negative_durations`). Returns the duration to store."""
        if classify.time_out_of_range(ts, dur):
            self.out_of_range_seen("time", 1, name, ts, dur)
            return None
        if dur < 0:
            self.negative_durations += 1
            return 0
        return dur

    def _slice(self, ev: Event, dur_ns: int | None = None) -> None:
        ts = us_text_to_ns(ev.ts)
        if ts is None:
            return
        raw_args = args_text(ev)
        a = _ARGS.decode(raw_args) if raw_args else _NO_ARGS
        name = _text(ev.name) or ""
        if dur_ns is None:
            dur_ns = us_text_to_ns(ev.dur) or 0
        if classify.time_out_of_range(ts, dur_ns) and not classify.is_skipped_category(_text(ev.cat)):
            self.out_of_range_seen("time", 1, name, ts, dur_ns)
            return
        d = self.describe(ev, a, name, _text(ev.cat))
        if d is None:
            return
        if d.kind != "step" and classify.step_out_of_range(name):
            self.out_of_range_seen("step", 1, name)
        self.seq += 1
        c = self.tables["slices"].cols
        c["id"].append(self.seq)
        c["rank"].append(self.file_index)
        c["device"].append(d.device)
        c["step"].append(classify.step_number(name) if d.kind == "step" else None)
        c["kind"].append(d.kind)
        c["name"].append(name)
        c["category"].append(_text(ev.cat))
        c["op_type"].append(d.op_type)
        c["task_type"].append(d.task_type)
        c["ts"].append(ts)
        if dur_ns < 0:
            self.negative_durations += 1
            dur_ns = 0
        c["dur"].append(dur_ns)
        c["pid"].append(_text(ev.pid))
        c["tid"].append(_text(ev.tid))
        c["stream"].append(d.stream)
        c["correlation"].append(d.correlation)
        c["external_id"].append(_external_id(a))
        for k in FINALIZED:
            c[k].append(None)
        c["input_shapes"].append(d.input_shapes)
        c["input_types"].append(d.input_types)
        if d.more_args:
            c["args"].append(
                msgspec.json.encode({**(msgspec.json.decode(raw_args) if raw_args else {}), **d.more_args}).decode()
            )
        else:
            c["args"].append(raw_args.decode() if raw_args else None)
        self.after_slice(a, d)

    def point_device(self, pid: str | None) -> str:
        """Device of the instants, counters and flows of process `pid` (Chrome traces: the host)."""
        return "host"

    def after_slice(self, a: Args, d: Described) -> None:
        """Hook after a slice row is added (its id is `self.seq`): communication details."""
        if a.collective is not None or a.pg_name is not None:
            self._comm(a, d.device)

    def _comm(self, a: Args, device: str) -> None:
        c = self.tables["comm"].cols
        nel = _int(a.in_nelems)
        size = classify.DTYPE_BYTES.get(str(a.dtype).lower()) if a.dtype is not None else None
        c["slice_id"].append(self.seq)
        c["rank"].append(self.file_index)
        c["device"].append(device)
        c["step"].append(None)
        c["collective"].append(_text(a.collective))
        c["group_name"].append(_text(a.pg_name))
        c["group_desc"].append(_text(a.pg_desc))
        c["group_ranks"].append(_text(a.pg_ranks))
        c["group_size"].append(_int(a.group_size))
        c["dtype"].append(_text(a.dtype))
        c["in_nelems"].append(nel)
        c["out_nelems"].append(_int(a.out_nelems))
        c["bytes"].append(nel * size if nel is not None and size else None)
        for k in ("src_rank", "dst_rank", "transport"):
            c[k].append(None)

    # -- instants, counters, flows, metadata ---------------------------------------------------
    def _instant(self, ev: Event) -> None:
        ts = us_text_to_ns(ev.ts)
        if ts is None:
            return
        raw_args = args_text(ev)
        name = _text(ev.name) or ""
        if name == "[memory]":
            self._memory(ev, ts, _ARGS.decode(raw_args) if raw_args else _NO_ARGS)
            return
        self._mark(ev, ts, name)

    def _mark(self, ev: Event, ts: int, name: str) -> None:
        raw_args = args_text(ev)
        c = self.tables["marks"].cols
        c["rank"].append(self.file_index)
        c["device"].append(self.point_device(_text(ev.pid)))
        c["step"].append(None)
        c["name"].append(name)
        c["category"].append(_text(ev.cat))
        c["ts"].append(ts)
        c["pid"].append(_text(ev.pid))
        # async instants (`n`, legacy steps `T`/`p`) on their operation's track, not their thread's
        c["tid"].append(
            self.pairing.track_point(ev)
            if ev.ph in "nTp" and (ev.id is not None or ev.id2 is not None)
            else _text(ev.tid)
        )
        c["scope"].append(_text(ev.s))
        c["args"].append(raw_args.decode() if raw_args else None)

    def _memory(self, ev: Event, ts: int, a: Args) -> None:
        nbytes = _int(a.nbytes)
        if nbytes is None:
            return
        c = self.tables["memory_events"].cols
        c["rank"].append(self.file_index)
        c["device"].append(_memory_device(a))
        c["step"].append(None)
        c["ts"].append(ts)
        c["pid"].append(_text(ev.pid))
        c["tid"].append(_text(ev.tid))
        c["op_name"].append(None)
        c["addr"].append(_int(a.addr))
        c["bytes"].append(nbytes)
        c["total_allocated"].append(_int(a.total_allocated))
        c["total_reserved"].append(_int(a.total_reserved))

    def _counter(self, ev: Event) -> None:
        ts = us_text_to_ns(ev.ts)
        raw_args = args_text(ev)
        if ts is None or not raw_args:
            return
        values = msgspec.json.decode(raw_args)
        if not isinstance(values, dict):
            return
        c = self.tables["counters"].cols
        device = self.point_device(_text(ev.pid))
        for series, value in values.items():
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                c["rank"].append(self.file_index)
                c["device"].append(device)
                c["step"].append(None)
                c["name"].append(_text(ev.name) or "")
                c["series"].append(series)
                c["ts"].append(ts)
                c["value"].append(float(value))
                c["pid"].append(_text(ev.pid))

    def _flow(self, ev: Event) -> None:
        ts = us_text_to_ns(ev.ts)
        if ts is None or ev.id is None:
            return
        c = self.tables["flows"].cols
        c["rank"].append(self.file_index)
        c["device"].append(self.point_device(_text(ev.pid)))
        c["step"].append(None)
        c["category"].append(_text(ev.cat) or "")
        c["flow_id"].append(str(ev.id))
        c["phase"].append(ev.ph)
        c["ts"].append(ts)
        c["pid"].append(_text(ev.pid))
        c["tid"].append(_text(ev.tid))

    def _meta(self, ev: Event) -> None:
        raw_args = args_text(ev)
        a = _ARGS.decode(raw_args) if raw_args else _NO_ARGS
        pid = _text(ev.pid) or ""
        key = {"process_name": (pid, ""), "process_labels": (pid, ""), "thread_name": (pid, _text(ev.tid) or "")}
        if not isinstance(ev.name, str) or ev.name not in key:
            return
        lane = self.lanes.setdefault(key[ev.name], {"pid": pid, "tid": key[ev.name][1] or None})
        field = {"process_name": "process", "process_labels": "labels", "thread_name": "thread"}[ev.name]
        lane[field] = _text(a.labels if ev.name == "process_labels" else a.name)


def _external_id(a: Args) -> int | None:
    """The `External id` of a slice; Kineto's device and runtime records of 2021 spell it `external id`."""
    got = _int(a.external_id)
    return got if got is not None else _int(a.external_id_2021)


def chunks(reader: ChromeTraceReader) -> Iterator[chunkconv.Chunk]:
    """The chunks of the reader's file: the native scanner's, or where it is not built `pychunks`'."""
    if not scan.available():
        return pychunks.chunks(reader)
    # reading ahead on a thread pays for large files; a small one waits on the handoffs instead
    return scan.Scanner(reader).chunks(threaded=reader.path.stat().st_size > (4 << 20))


def convert_file(path: Path, file_index: int, sink: Sink, progress: Callable[[int], None] | None = None):
    """Stream one Chrome trace file into `sink`; return (header keys, lanes, event counts by phase)."""
    reader = ChromeTraceReader(path, progress=progress)
    conv = ChromeConverter(file_index, sink)
    for chunk in chunks(reader):
        conv.feed(chunk)
    conv.finish()
    return reader, conv
