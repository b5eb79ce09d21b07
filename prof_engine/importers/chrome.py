"""Chrome trace / Kineto JSON → canonical record batches.

Handles torch.profiler (Kineto) object-form traces and array-form Chrome traces: `X` and `B`/`E`
duration events, async `b`/`e` and `S`/`F` ones on tracks of their own (importers.pairing pairs
begins and ends), `i`/`I`/`n`/`T`/`p` instants (Kineto `[memory]` events become allocator rows),
`C` counters, `s`/`t`/`f` flows, `M` metadata (process and thread names, kept as lanes).
Times stay relative to the file's clock here; the store adds `baseTimeNanoseconds` and the rank,
known only once the whole file is read (those keys may follow the events).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from itertools import compress
from pathlib import Path
from typing import Any, NamedTuple, cast

import msgspec
import pyarrow as pa

from prof_engine import schema
from prof_engine.importers import chunkconv, classify, scan
from prof_engine.importers import keys as K
from prof_engine.importers.columns import (
    _MEMORY_ARGS,
    _NO_MEMORY_ARGS,
    _SHAPES,
    _TYPES,
    _decode_slice_args,
    _field,
    _gpu,
    _ints,
    _kinds,
    _memo_column,
    _positions,
    _SliceArgs,
    _texts,
)
from prof_engine.importers.jsonstream import ChromeTraceReader, Event, args_text
from prof_engine.importers.keys import (  # _int, _text, shapes_text: other importers take them from here
    _int,
    _memory_device,
    _text,
    _types_text,
    shapes_text,
)
from prof_engine.importers.pairing import PAIRED_PHASES, Pairing
from prof_engine.importers.units import us_text_to_ns, us_texts_to_ns
from prof_engine.store.quality import add_finding

Sink = Callable[[str, pa.RecordBatch], None]
BATCH_ROWS = 50_000  # rows per column buffer flush: bounds the converter's memory (~300 MB at 100 MB of JSON)
# Slice columns the converter leaves NULL: finalisation fills them in (queries/store/finalize.sql).
FINALIZED = ("depth", "parent_id", "self_dur", "launch_id", "launch_name", "wait", "launch_api", "launch_api_ts",
             "launch_api_dur")


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


_FLOW_PHASES = frozenset("stf")
_INSTANT_PHASES = frozenset("iIn")
_EVENT_HOOKS = ("describe", "after_slice", "point_device", "_slice", "_flow", "_instant", "_memory")
_COLUMNAR_PHASES = frozenset({"X"}) | _FLOW_PHASES | _INSTANT_PHASES


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
        add_finding(out, "unknown_categories", sum(unknown.values()), f"categories {named}{more}")
    return out


class ChromeConverter:
    """Converts the events of one file into staging batches (rank = `file_index`, relative ts)."""

    def __init__(self, file_index: int, sink: Sink) -> None:
        self.file_index = file_index
        self.seq = file_index << 40
        self.tables = {name: _Columns(name, sink) for name, t in schema.stored_tables().items() if not t.derived}
        self.lanes: dict[tuple[str, str], dict[str, Any]] = {}
        self.pairing = Pairing(self._slice)  # B/E and async begin/end pairs (see importers.pairing)
        self.counts: dict[str, int] = {}
        self.negative_durations = 0  # slices whose end is before their start: read as 0 µs long
        self.unknown_categories: Counter[str] = Counter()  # slices of kind "other" by unknown category
        self.out_of_range: dict[str, list] = {}  # "time" / "step" -> [count, the first's detail]
        # The columnar fast path reproduces the base class's per-event hooks; a subclass that
        # overrides any of them (Ascend, msprof) keeps the event-by-event path.
        self.columnar = all(getattr(type(self), m) is getattr(ChromeConverter, m) for m in _EVENT_HOOKS)

    def feed(self, events: list[Event]) -> None:
        phases = _field(events, "ph")
        counts = Counter(phases)
        if self.columnar and PAIRED_PHASES.isdisjoint(counts):
            self._feed_columnar(events, phases, counts)
            if self.pairing.thread_end:  # threads with an open B: how far they run
                for ev in events:
                    self.pairing.see_event(ev)
        else:
            self.dispatch(events)
        for ph, n in counts.items():
            self.counts[ph] = self.counts.get(ph, 0) + n
        for t in self.tables.values():
            if len(t) >= BATCH_ROWS:
                t.flush()

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
        return {"X": self._slice, "B": paired.begin, "E": paired.end, "i": self._instant, "I": self._instant,
                "n": self._instant, "C": self._counter, "s": self._flow, "t": self._flow, "f": self._flow,
                "M": self._meta, "b": paired.async_event, "e": paired.async_event, "S": paired.async_event,
                "F": paired.async_event, "T": self._instant, "p": self._instant}

    def _feed_columnar(self, events: list[Event], phases: list[str], counts: Counter[str]) -> None:
        """The plain Chrome/Kineto chunk: X slices and flows (~90 % of a Kineto trace) are built a
        column at a time, the rest event by event. Only B/E pairs interleave slice ids with other
        events, so chunks with them take the event-by-event path; otherwise each table gets the
        same rows in the same order (ids included) as `_slice` / `_flow` would give it."""
        n_slices, n_flows, n_instants = (sum(map(counts.get, ps, [0] * len(ps)))
                                         for ps in ("X", _FLOW_PHASES, _INSTANT_PHASES))
        slices = events if n_slices == len(events) else list(compress(events, map("X".__eq__, phases)))
        flows = list(compress(events, map(_FLOW_PHASES.__contains__, phases))) if n_flows else []
        instants = list(compress(events, map(_INSTANT_PHASES.__contains__, phases))) if n_instants else []
        if n_slices + n_flows + n_instants < len(events):
            handlers = self._handlers()
            for ev in events:
                h = handlers.get(ev.ph) if ev.ph not in _COLUMNAR_PHASES else None
                if h is not None:
                    h(ev)
        if slices:
            self._slice_columns(slices)
        if flows:
            self._flow_columns(flows)
        if instants:
            self._instant_columns(instants)

    def add_row(self, table: str, values: dict[str, Any]) -> None:
        """Append one row to `table` (columns missing from `values` are NULL), flushing full buffers."""
        t = self.tables[table]
        for col, vals in t.cols.items():
            vals.append(values.get(col))
        if len(t) >= BATCH_ROWS:
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

    def out_of_range_seen(self, what: str, count: int, name: str, ts: int | None = None, dur: int | None = None) -> None:
        """Count `count` slices out of range (`what`: "time", dropped; "step", a step number beyond
        int32, not a step); the first one's name and times are the finding's detail."""
        if what not in self.out_of_range:
            detail = (f"first: {name[:80]!r} at {ts} ns, {dur} ns long: dropped" if what == "time"
                      else f"first: {name[:80]!r}: step number beyond int32, read as a range")
            self.out_of_range[what] = [0, detail]
        self.out_of_range[what][0] += count

    def _slice(self, ev: Event, dur_ns: int | None = None) -> None:
        ts = us_text_to_ns(ev.ts)
        if ts is None:
            return
        raw_args = args_text(ev)
        a = _ARGS.decode(raw_args) if raw_args else _NO_ARGS
        name = _text(ev.name) or ""
        if dur_ns is None:
            dur_ns = us_text_to_ns(ev.dur) or 0
        if (not -classify.TS_LIMIT < ts < classify.TS_LIMIT or dur_ns > classify.DUR_LIMIT) \
                and not classify.is_skipped_category(_text(ev.cat)):
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
            c["args"].append(msgspec.json.encode({**(msgspec.json.decode(raw_args) if raw_args else {}),
                                                  **d.more_args}).decode())
        else:
            c["args"].append(raw_args.decode() if raw_args else None)
        self.after_slice(a, d)

    def _slice_columns(self, events: list[Event]) -> None:
        """`_slice` with the base `describe` and `after_slice` over a chunk's X events, a column
        at a time: the same rows, ids and comm rows, with per-value work done once per column."""
        read_ts = us_texts_to_ns(_field(events, "ts"))
        cats = _texts(_field(events, "cat"))
        skipped = list(map(classify.is_skipped_category, cats))
        if None in read_ts or True in skipped:
            keep = [i for i, (t, skip) in enumerate(zip(read_ts, skipped)) if t is not None and not skip]
            events, read_ts, cats = [events[i] for i in keep], [read_ts[i] for i in keep], [cats[i] for i in keep]
        ts = cast("list[int]", read_ts)  # the unreadable (None) ones are left out above
        durs = us_texts_to_ns(_field(events, "dur"))
        if ts and (min(ts) <= -classify.TS_LIMIT or max(ts) >= classify.TS_LIMIT
                   or max(filter(None, durs), default=0) > classify.DUR_LIMIT):  # slices outside any run: dropped
            bad = [i for i, (t, d) in enumerate(zip(ts, durs))
                   if not -classify.TS_LIMIT < t < classify.TS_LIMIT or (d or 0) > classify.DUR_LIMIT]
            self.out_of_range_seen("time", len(bad), _text(events[bad[0]].name) or "", ts[bad[0]], durs[bad[0]])
            keep = sorted(set(range(len(ts))).difference(bad))
            events, ts = [events[i] for i in keep], [ts[i] for i in keep]
            cats, durs = [cats[i] for i in keep], [durs[i] for i in keep]
        if not events:
            return
        raws = list(map(args_text, events))
        args = _decode_slice_args(raws)
        read_names = _texts(_field(events, "name"))
        names = [v or "" for v in read_names] if None in read_names else cast("list[str]", read_names)
        n, first = len(events), self.seq + 1
        on_device = list(compress(range(n), map(classify.is_device_category, cats)))
        devices = ["host"] * n
        streams: list[int | None] = [None] * n
        for i in on_device:
            devices[i], streams[i] = _gpu(args[i], events[i]), _int(args[i].stream)
        collective = _field(args, "collective")
        c = self.tables["slices"].cols
        c["id"].extend(range(first, first + n))
        c["rank"].extend([self.file_index] * n)
        c["device"].extend(devices)
        self._kind_columns(c, cats, names, collective, self.unknown_categories)
        if "ProfilerStep#" in "\0".join(names):  # (a C-level search: steps are in few chunks)
            for name in names:
                if name.startswith("ProfilerStep#") and classify.step_out_of_range(name):
                    self.out_of_range_seen("step", 1, name)
        c["name"].extend(names)
        c["category"].extend(cats)
        c["ts"].extend(ts)
        if None in durs or min(cast("list[int]", durs), default=0) < 0:  # (no None when min runs)
            self.negative_durations += sum(1 for d in durs if d is not None and d < 0)
            durs = [max(d or 0, 0) for d in durs]
        c["dur"].extend(durs)
        c["pid"].extend(_texts(_field(events, "pid")))
        c["tid"].extend(_texts(_field(events, "tid")))
        c["stream"].extend(streams)
        c["correlation"].extend(_ints(_field(args, "correlation")))
        external = _ints(_field(args, "external_id"))
        if None in external:  # Kineto's device and runtime records of 2021 spell it `external id`
            external = [e if e is not None else _int(a.external_id_2021) for e, a in zip(external, args)]
        c["external_id"].extend(external)
        nones = [None] * n
        for k in ("op_type", "task_type", *FINALIZED):
            c[k].extend(nones)
        c["input_shapes"].extend(_memo_column(_SHAPES, list(map(bytes, _field(args, "input_dims"))), shapes_text))
        c["input_types"].extend(_memo_column(_TYPES, list(map(bytes, _field(args, "input_type"))), _types_text))
        texts = list(map(bytes.decode, raws))
        c["args"].extend([t or None for t in texts] if b"" in raws else texts)
        self._comm_columns(args, raws, devices, collective, first)
        self.seq = first + n - 1

    @staticmethod
    def _kind_columns(c: dict[str, list], cats: list[str | None], names: list[str], collective: list,
                      unknown: Counter[str]) -> None:
        """The kind and step columns: `classify.kind_of` once per distinct (category, name), then
        the few rows with a `Collective name` arg redone (they may be comm kernels); the rows of
        kind "other" counted in `unknown` by category where no table of `classify` knows it."""
        kinds = _kinds(cats, names)
        if collective.count(None) < len(collective):
            for i, coll in enumerate(collective):
                if coll is not None:
                    kinds[i] = classify.kind_of(cats[i], names[i], True)
        others = _positions(kinds, "other")
        if others:
            unknown.update(cat for cat in map(cats.__getitem__, others) if classify.is_unknown_category(cat))
        steps: list[int | None] = [None] * len(kinds)
        for i in _positions(kinds, "step"):
            steps[i] = classify.step_number(names[i])
        c["kind"].extend(kinds)
        c["step"].extend(steps)

    def _comm_columns(self, args: list[_SliceArgs], raws: list[bytes], devices: list[str], collective: list,
                      first: int) -> None:
        """`after_slice` for the chunk: comm rows for slices with collective or process-group args."""
        groups = [a.pg_name for a in args]
        if collective.count(None) == len(args) and groups.count(None) == len(args):
            return
        for i, (coll, group) in enumerate(zip(collective, groups)):
            if coll is not None or group is not None:
                self.seq = first + i
                self._comm(_ARGS.decode(raws[i]), devices[i])

    def _flow_columns(self, events: list[Event]) -> None:
        """`_flow` (base `point_device`: the host) over a chunk's flow events, a column at a time."""
        ts = us_texts_to_ns(_field(events, "ts"))
        ids = _field(events, "id")
        if None in ts or None in ids:
            keep = [i for i, (t, fid) in enumerate(zip(ts, ids)) if t is not None and fid is not None]
            events, ts, ids = [events[i] for i in keep], [ts[i] for i in keep], [ids[i] for i in keep]
        n = len(events)
        c = self.tables["flows"].cols
        c["rank"].extend([self.file_index] * n)
        c["device"].extend(["host"] * n)
        c["step"].extend([None] * n)
        c["category"].extend([v or "" for v in _texts(_field(events, "cat"))])
        c["flow_id"].extend(_texts(ids))
        c["phase"].extend(_field(events, "ph"))
        c["ts"].extend(ts)
        c["pid"].extend(_texts(_field(events, "pid")))
        c["tid"].extend(_texts(_field(events, "tid")))

    def _instant_columns(self, events: list[Event]) -> None:
        """`_instant` over a chunk's instants: `[memory]` ones (allocator events, most of them in a
        Kineto trace) a column at a time, marks one by one."""
        ts = us_texts_to_ns(_field(events, "ts"))
        names = [v or "" for v in _texts(_field(events, "name"))]
        memory = [i for i, (t, nm) in enumerate(zip(ts, names)) if t is not None and nm == "[memory]"]
        for ev, t, nm in zip(events, ts, names):
            if t is not None and nm != "[memory]":
                self._mark(ev, t, nm)
        if not memory:
            return
        raws = [args_text(events[i]) for i in memory]
        present = [r for r in raws if r]
        decoded = iter(_MEMORY_ARGS.decode(b"[" + b",".join(present) + b"]") if present else [])
        args = [next(decoded) if r else _NO_MEMORY_ARGS for r in raws]
        nbytes = _ints([a.nbytes for a in args])
        rows = [(events[i], ts[i], a, nb) for i, a, nb in zip(memory, args, nbytes) if nb is not None]
        n = len(rows)
        c = self.tables["memory_events"].cols
        c["rank"].extend([self.file_index] * n)
        c["device"].extend([_memory_device(a) for _, _, a, _ in rows])
        c["step"].extend([None] * n)
        c["ts"].extend([t for _, t, _, _ in rows])
        c["pid"].extend(_texts([ev.pid for ev, _, _, _ in rows]))
        c["tid"].extend(_texts([ev.tid for ev, _, _, _ in rows]))
        c["op_name"].extend([None] * n)
        c["addr"].extend(_ints([a.addr for _, _, a, _ in rows]))
        c["bytes"].extend([nb for _, _, _, nb in rows])
        c["total_allocated"].extend(_ints([a.total_allocated for _, _, a, _ in rows]))
        c["total_reserved"].extend(_ints([a.total_reserved for _, _, a, _ in rows]))

    def point_device(self, ev: Event) -> str:
        """Device of an instant, counter or flow event (Chrome traces: the host)."""
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
        c["device"].append(self.point_device(ev))
        c["step"].append(None)
        c["name"].append(name)
        c["category"].append(_text(ev.cat))
        c["ts"].append(ts)
        c["pid"].append(_text(ev.pid))
        # async instants (`n`, legacy steps `T`/`p`) on their operation's track, not their thread's
        c["tid"].append(self.pairing.track_point(ev) if ev.ph in "nTp" and (ev.id is not None or ev.id2 is not None)
                        else _text(ev.tid))
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
        device = self.point_device(ev)
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
        c["device"].append(self.point_device(ev))
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


def convert_file(path: Path, file_index: int, sink: Sink, progress: Callable[[int], None] | None = None):
    """Stream one Chrome trace file into `sink`; return (header keys, lanes, event counts by phase)."""
    reader = ChromeTraceReader(path, progress=progress)
    conv = ChromeConverter(file_index, sink)
    if conv.columnar and scan.available():  # the native scanner, straight to Arrow columns
        for chunk in scan.Scanner(reader).chunks():
            chunkconv.feed(conv, chunk)
    else:
        for events in reader.chunks():
            conv.feed(events)
    conv.finish()
    return reader, conv
