"""Column-at-a-time helpers for the Chrome converter's fast path (`ChromeConverter.feed`).

The plain Kineto case converts a whole decoded chunk per column instead of per event: the `args`
of a chunk are decoded in one msgspec call, coercions run as C-level passes over a column, and
per-value conversions (kind, shapes, types) are memoised, since a trace repeats a few values.
"""

from __future__ import annotations

from collections.abc import Callable
from operator import attrgetter
from typing import Any, cast

import msgspec

from prof_engine.importers import classify
from prof_engine.importers.jsonstream import Event
from prof_engine.importers.keys import _INT64, _int


class _SliceArgs(msgspec.Struct, gc=False):
    """The `args` keys the columnar path reads per slice. The shapes stay raw JSON text so that
    their text can be converted once per distinct value (a trace repeats the same few shapes)."""

    external_id: Any = msgspec.field(default=None, name="External id")
    external_id_2021: Any = msgspec.field(default=None, name="external id")
    correlation: Any = None
    stream: Any = None
    device: Any = None
    input_dims: msgspec.Raw = msgspec.field(default=msgspec.Raw(b""), name="Input Dims")
    input_type: msgspec.Raw = msgspec.field(default=msgspec.Raw(b""), name="Input type")
    collective: Any = msgspec.field(default=None, name="Collective name")
    pg_name: Any = msgspec.field(default=None, name="Process Group Name")


_SLICE_ARGS = msgspec.json.Decoder(list[_SliceArgs])


class _MemoryArgs(msgspec.Struct, gc=False):
    """The `args` keys of a Kineto `[memory]` instant (see `ChromeConverter._memory`)."""

    total_allocated: Any = msgspec.field(default=None, name="Total Allocated")
    total_reserved: Any = msgspec.field(default=None, name="Total Reserved")
    nbytes: Any = msgspec.field(default=None, name="Bytes")
    device_id: Any = msgspec.field(default=None, name="Device Id")
    device_type: Any = msgspec.field(default=None, name="Device Type")
    addr: Any = msgspec.field(default=None, name="Addr")


_MEMORY_ARGS = msgspec.json.Decoder(list[_MemoryArgs])
_NO_MEMORY_ARGS = _MemoryArgs()
_NO_SLICE_ARGS = _SliceArgs()


_NONE = type(None)


def _field(values: list, name: str) -> list:
    """One attribute of each event or args struct, as a column (a C-level loop via `map`)."""
    return list(map(attrgetter(name), values))


def _ints(values: list) -> list[int | None]:
    """`_int` over a column. A column of int64s and None (the usual case) is returned as it is,
    after C-level passes over the types and for the least and greatest value."""
    if set(map(type, values)) <= {int, _NONE}:
        ints = [v for v in values if v is not None]
        if not ints or (min(ints) in _INT64 and max(ints) in _INT64):
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


def _decode_slice_args(raws: list[bytes]) -> list[_SliceArgs]:
    """Decode the non-empty `args` of a chunk's slices with one msgspec call (one JSON array)."""
    if b"" not in raws:
        return _SLICE_ARGS.decode(b"[" + b",".join(raws) + b"]")
    present = [r for r in raws if r]
    if not present:
        return [_NO_SLICE_ARGS] * len(raws)
    decoded = iter(_SLICE_ARGS.decode(b"[" + b",".join(present) + b"]"))
    return [next(decoded) if r else _NO_SLICE_ARGS for r in raws]


def _gpu(a: _SliceArgs, ev: Event) -> str:
    """Device of a device-category slice, as in `ChromeConverter.describe`."""
    dev = _int(a.device)
    return f"gpu{dev if dev is not None else _int(ev.pid) or 0}"


# Memo tables for the columnar path. Their results depend on the key alone; a trace has few
# distinct (category, name) pairs and shapes, so each is computed once instead of per event.
_KINDS: dict[tuple[str | None, str], str] = {}
_SHAPES: dict[bytes, str | None] = {}
_TYPES: dict[bytes, str | None] = {}
_MEMO_MAX = 200_000  # entries; a memo is emptied when it reaches this (unbounded names, e.g. kernels)


def _positions(values: list, x: Any) -> list[int]:
    """Indices of `x` in `values`, found by C-level `list.index` (for rare values like steps)."""
    out: list[int] = []
    try:
        while True:
            out.append(values.index(x, out[-1] + 1 if out else 0))
    except ValueError:
        return out


def _kinds(cats: list[str | None], names: list[str]) -> list[str]:
    """`classify.kind_of` (without a collective arg) over a column, memoised per (category, name)."""
    if len(_KINDS) > _MEMO_MAX:
        _KINDS.clear()
    kinds = list(map(_KINDS.get, zip(cats, names)))
    if None in kinds:  # new pairs: classify each distinct one once, then look the column up again
        for cat, name in {key for k, key in zip(kinds, zip(cats, names)) if k is None}:
            _KINDS[cat, name] = classify.kind_of(cat, name, False)
        return list(map(_KINDS.__getitem__, zip(cats, names)))
    return cast(list[str], kinds)  # every pair was known: no None


def _memo_column(memo: dict[bytes, str | None], raws: list[bytes],
                 text: Callable[[Any], str | None]) -> list[str | None]:
    """`text(decoded JSON)` over a column of raw JSON values, computed once per distinct raw text
    (a trace repeats the same few shapes and types); b"" (the key is absent) gives None."""
    if len(memo) > _MEMO_MAX:
        memo.clear()
    for raw in set(raws).difference(memo):
        memo[raw] = text(msgspec.json.decode(raw)) if raw else None
    return list(map(memo.__getitem__, raws))
