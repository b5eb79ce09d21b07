"""Fuzz campaign over the importers: mutated copies of real profiler outputs, each imported by the CLI.

Each case copies one fixture (a trace file or a rank/PROF_* directory) into its own temp directory,
mutates one file of the copy (truncate, flip bytes, delete keys, change types, huge/negative/NaN
numbers, invalid UTF-8, BOM, corrupt gzip, deep nesting, CSV column changes, corrupt SQLite), runs
`python -m prof_engine import <copy> -o <case>/out/run` in a subprocess with a timeout and, when that
imports, `show` and `export`. Each case is classified:

  ok        exit 0, nothing on stderr          warned    exit 0 with warnings
  error     exit 1 with exactly one `Error:` line
  traceback a Python traceback or a crash (signal)        hang      ran past the timeout
  unclear   any other exit, or exit 1 without exactly one `Error:` line
  partial   a run without a manifest, `.importing` debris, a run left by a failed import,
            a half-written export
  outside   a file written, changed or removed outside `-o` (the input copy, cwd, TMPDIR, the case dir)

Cases are deterministic by (seed, case id): `--case ID` reruns one. Non-clean cases keep their mutated
input and a `repro.sh` under `--out`.

    python benchmarks/fuzz.py --cases 300 --seed 1 --jobs 2
"""

from __future__ import annotations

import argparse
import csv
import gzip
import io
import json
import os
import random
import shlex
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
FIXTURES = REPO.parent / "shared" / "fixtures"

# (label, path): relative to the fixtures root, or absolute for the inputs that ship in the repository.
SOURCES: list[tuple[str, str | Path]] = [
    ("kineto", "kineto/hta_amd_mi250_rocm/mi250_minitoy_train_ROCm6_2_kineto.json.gz"),
    ("kineto", "kineto/hta_sampled_2rank_nccl/sampled_rank-0.json.gz"),
    ("kineto_2rank", "kineto/hta_sampled_2rank_nccl"),
    ("chrome", "chrome/catapult_nestable_async/nestable_async.json"),
    ("chrome", "chrome/catapult_flow/flow.json"),
    ("torch_npu_text", "ascend/torch_npu_2rank_level0_text/rank0_ascend_pt"),
    ("torch_npu_2023", "ascend/torch_npu_2023_2rank_and_cluster_output_16rank/test_rank_0"),
    ("torch_npu_db", "ascend/torch_npu_2rank_level1_db/rank0_ascend_pt"),
    ("torch_npu_db_2rank", "ascend/torch_npu_2rank_level1_db"),
    ("mindspore_cpu", REPO / "tests/data/mindspore_cpu/vm_11552_20261126230356963_ascend_ms"),
    ("mindspore_legacy", "ascend/mindspore_legacy_4rank_pipeline_parallel"),
    ("msprof", "ascend/msprof_cann7_2device_timeline_legacy/PROF_000001_20230818142704322_COJGGGCANRMICFBC"),
]

OUTCOMES = ("ok", "warned", "error", "traceback", "hang", "unclear", "partial", "outside")
BAD = ("traceback", "hang", "unclear", "partial", "outside")
_RAW = "\x00RAW\x00"  # a JSON string holding this prefix is written as a raw token (1e999, NaN)


class NotApplicable(Exception):
    """The mutator found nothing to change in this file (the case falls back to flipping bytes)."""


# ---------------------------------------------------------------- file kinds and content helpers


def file_kind(path: Path) -> str:
    """gz, db, csv, json or text: which mutators apply to a file."""
    name = path.name
    if name.endswith(".gz"):
        return "gz"
    if name.endswith(".db"):
        return "db"
    if name.endswith(".csv"):
        return "csv"
    try:
        json.loads(path.read_bytes())
        return "json"
    except (ValueError, UnicodeDecodeError):
        return "text"


def _inner(path: Path, edit: Callable[[bytes], bytes]) -> None:
    """Apply `edit` to the file's content, through gzip when the file is gzipped."""
    data = path.read_bytes()
    if path.name.endswith(".gz"):
        path.write_bytes(gzip.compress(edit(gzip.decompress(data)), mtime=0))
    else:
        path.write_bytes(edit(data))


def _dump(doc: Any) -> bytes:
    text = json.dumps(doc, separators=(",", ":"), ensure_ascii=False)
    out = text.replace('"\\u0000RAW\\u0000', "\x01")
    parts = out.split("\x01")
    for i in range(1, len(parts)):
        tok, _, rest = parts[i].partition('"')
        parts[i] = tok + rest
    return "".join(parts).encode("utf-8", "surrogatepass")


def _walk(doc: Any) -> Iterator[tuple[Any, Any]]:
    """Every (container, key) below `doc`, iteratively (fixtures nest deeper than a few levels)."""
    stack = [doc]
    while stack:
        node = stack.pop()
        items = node.items() if isinstance(node, dict) else enumerate(node)
        for key, value in items:
            yield node, key
            if isinstance(value, (dict, list)):
                stack.append(value)


def _json_edit(path: Path, edit: Callable[[Any, random.Random], str], rng: random.Random) -> str:
    note = ""

    def apply(data: bytes) -> bytes:
        nonlocal note
        doc = json.loads(data)
        note = edit(doc, rng)
        return _dump(doc)

    _inner(path, apply)
    return note


def _sample_locations(doc: Any, rng: random.Random, want: Callable[[Any], bool]) -> list[tuple[Any, Any]]:
    locations = [(c, k) for c, k in _walk(doc) if want(c[k])]
    if not locations:
        raise NotApplicable("no location")
    return locations


# ---------------------------------------------------------------- mutators: (path, rng) -> what was done


def m_truncate(path: Path, rng: random.Random) -> str:
    data = path.read_bytes()
    cut = rng.choice([0, 1, len(data) // 2, rng.randrange(max(1, len(data))), max(0, len(data) - 1)])
    if path.name.endswith(".gz") and rng.random() < 0.5:
        _inner(path, lambda d: d[: rng.randrange(max(1, len(d)))])
        return "truncate (inside the gzip)"
    path.write_bytes(data[:cut])
    return f"truncate at {cut} of {len(data)} bytes"


def m_flip_bytes(path: Path, rng: random.Random) -> str:
    n = rng.choice([1, 3, 20])

    def flip(d: bytes) -> bytes:
        b = bytearray(d)
        for _ in range(n if b else 0):
            b[rng.randrange(len(b))] ^= rng.randrange(1, 256)
        return bytes(b)

    if path.name.endswith(".gz") and rng.random() < 0.5:
        _inner(path, flip)
        return f"flip {n} byte(s) inside the gzip"
    path.write_bytes(flip(path.read_bytes()))
    return f"flip {n} byte(s)"


def _key_names(doc: Any) -> list[str]:
    return sorted({k for c, k in _walk(doc) if isinstance(c, dict)})


def m_delete_keys(path: Path, rng: random.Random) -> str:
    if path.name.endswith(".db"):
        return _db_edit(path, rng, "drop")

    def edit(doc: Any, rng: random.Random) -> str:
        names = _key_names(doc)
        if not names:
            raise NotApplicable("no keys")
        if rng.random() < 0.5:
            key = rng.choice(names)
            for c, k in list(_walk(doc)):
                if isinstance(c, dict) and k == key:
                    c.pop(k, None)
            return f"delete key {key!r} everywhere"
        locs = _sample_locations(doc, rng, lambda v: True)
        picked = [loc for loc in rng.sample(locs, min(len(locs), rng.choice([1, 5, 50]))) if isinstance(loc[0], dict)]
        for c, k in picked:
            c.pop(k, None)
        return f"delete {len(picked)} random key(s)"

    return _json_edit(path, edit, rng)


def _other_type(value: Any, rng: random.Random) -> Any:
    options: list[Any] = ["x", "12abc", "", None, True, [], {}, [1, 2], {"a": 1}, 7, -1.5]
    return rng.choice([o for o in options if type(o) is not type(value)])


def m_change_types(path: Path, rng: random.Random) -> str:
    kind = file_kind(path)
    if kind == "db":
        return _db_edit(path, rng, "types")
    if kind == "csv":
        return _csv_cells(path, rng, ["abc", "", "1,2", "[]", "None", "TRUE", "0x1F", " 12 "])

    def edit(doc: Any, rng: random.Random) -> str:
        if rng.random() < 0.5:
            key = rng.choice(_key_names(doc) or ["?"])
            n = 0
            for c, k in list(_walk(doc)):
                if isinstance(c, dict) and k == key:
                    c[k], n = _other_type(c[k], rng), n + 1
            if n:
                return f"change the type of {key!r} everywhere ({n})"
        locs = _sample_locations(doc, rng, lambda v: True)
        picked = rng.sample(locs, min(len(locs), rng.choice([1, 5, 50])))
        for c, k in picked:
            c[k] = _other_type(c[k], rng)
        return f"change the type of {len(picked)} value(s)"

    return _json_edit(path, edit, rng)


_NUMBERS: list[Any] = [
    1e308,
    -1e308,
    float("nan"),
    float("inf"),
    float("-inf"),
    2**63,
    2**64,
    -(2**63) - 1,
    10**30,
    -1,
    -123456789,
    0,
    1e-300,
    -0.0,
    _RAW + "1e999",
    _RAW + "-1e999",
    "NaN",
    "99999999999999999999999",
    "-5",
]
_CSV_NUMBERS = [
    "nan",
    "NaN",
    "inf",
    "-inf",
    "-1",
    "1e308",
    "1e999",
    "99999999999999999999999",
    "-0",
    "",
    "18446744073709551616",
    "-9223372036854775809",
    "1.5e-320",
]


def _is_number(value: Any) -> bool:
    if isinstance(value, bool):
        return False
    if isinstance(value, (int, float)):
        return True
    if isinstance(value, str):
        try:
            float(value)
            return True
        except ValueError:
            return False
    return False


def m_numbers(path: Path, rng: random.Random) -> str:
    kind = file_kind(path)
    if kind == "db":
        return _db_edit(path, rng, "numbers")
    if kind == "csv":
        return _csv_cells(path, rng, _CSV_NUMBERS, numeric_only=True)

    def edit(doc: Any, rng: random.Random) -> str:
        locs = _sample_locations(doc, rng, _is_number)
        if rng.random() < 0.5:
            _, k0 = rng.choice([loc for loc in locs if isinstance(loc[0], dict)] or locs)
            value = rng.choice(_NUMBERS)
            picked = [(c, k) for c, k in locs if k == k0]
            note = f"set every numeric {k0!r} to {value!r}"
        else:
            picked = rng.sample(locs, min(len(locs), rng.choice([1, 5, 50])))
            value, note = None, f"set {len(picked)} number(s) to extreme values"
        for c, k in picked:
            c[k] = value if value is not None else rng.choice(_NUMBERS)
        return note.replace(_RAW, "")

    return _json_edit(path, edit, rng)


_BAD_UTF8 = [b"\xff", b"\xc3\x28", b"\xed\xa0\x80", b"\xf8\x88\x80\x80\x80", b"\x80", b"\xc0\xaf", b"\xe2\x82"]


def m_invalid_utf8(path: Path, rng: random.Random) -> str:
    n = rng.choice([1, 3, 30])

    def edit(d: bytes) -> bytes:
        b = bytearray(d)
        quotes = [i for i in range(len(b)) if b[i] == 0x22][:100000] if rng.random() < 0.7 else []
        for _ in range(n):
            at = rng.choice(quotes) + 1 if quotes else rng.randrange(len(b) + 1)
            b[at:at] = rng.choice(_BAD_UTF8)
        return bytes(b)

    _inner(path, edit)
    return f"insert {n} invalid UTF-8 sequence(s)"


def m_bom(path: Path, rng: random.Random) -> str:
    mode = rng.choice(["utf8", "utf8x2", "utf16", "utf16be", "middle"])

    def edit(d: bytes) -> bytes:
        if mode == "utf8":
            return b"\xef\xbb\xbf" + d
        if mode == "utf8x2":
            return b"\xef\xbb\xbf\xef\xbb\xbf" + d
        if mode == "middle":
            at = d.find(b"\n") + 1
            return d[:at] + b"\xef\xbb\xbf" + d[at:]
        text = d.decode("utf-8", "replace")
        return text.encode("utf-16" if mode == "utf16" else "utf-16-be")

    _inner(path, edit)
    return f"byte order mark: {mode}"


def m_corrupt_gzip(path: Path, rng: random.Random) -> str:
    data = path.read_bytes()
    gz = data if data[:2] == b"\x1f\x8b" else gzip.compress(data, mtime=0)
    mode = rng.choice(["truncate", "crc", "body", "trailing", "members", "header", "magic"])
    if mode == "truncate":
        gz = gz[: rng.randrange(10, max(11, len(gz) - 8))]
    elif mode == "crc":
        gz = gz[:-8] + bytes(8 * [rng.randrange(256)])
    elif mode == "body":
        b = bytearray(gz)
        for _ in range(rng.choice([1, 10])):
            b[rng.randrange(10, len(b) - 8)] ^= 0xFF
        gz = bytes(b)
    elif mode == "trailing":
        gz = gz + b"garbage after the stream"
    elif mode == "members":
        gz = gz + gz
    elif mode == "header":
        gz = gz[:10]
    else:
        gz = b"\x1f\x8c" + gz[2:]
    path.write_bytes(gz)
    return f"corrupt gzip: {mode}"


def m_deep_nesting(path: Path, rng: random.Random) -> str:
    depth = rng.choice([1000, 100_000, 1_000_000])
    mode = rng.choice(["value", "args", "whole"])

    def edit(d: bytes) -> bytes:
        deep = b"[" * depth + b"]" * depth if rng.random() < 0.5 else b'{"a":' * depth + b"1" + b"}" * depth
        if mode == "whole":
            return deep
        key = b'"args":' if mode == "args" and b'"args":' in d else b'":'
        starts = [i for i in range(len(d)) if d.startswith(key, i)][:5000]
        if not starts:
            return d[:1] + deep + b"," + d[1:] if d[:1] == b"[" else deep
        at = rng.choice(starts) + len(key)
        return d[:at] + deep + _drop_value(d[at:])

    _inner(path, edit)
    return f"deep nesting: {depth} levels ({mode})"


def _drop_value(rest: bytes) -> bytes:
    """`rest` without its leading JSON value, so a deep value replaces it (a scan, good enough for fuzzing)."""
    depth, in_str, i = 0, False, 0
    while i < len(rest):
        ch = rest[i]
        if in_str:
            if ch == 0x5C:
                i += 1
            elif ch == 0x22:
                in_str = False
        elif ch == 0x22:
            in_str = True
        elif ch in b"[{":
            depth += 1
        elif ch in b"]}":
            if depth == 0:
                return rest[i:]
            depth -= 1
        elif ch == 0x2C and depth == 0:
            return rest[i:]
        i += 1
    return b""


# ---------------------------------------------------------------- CSV


def _read_csv(path: Path) -> list[list[str]]:
    text = path.read_bytes().decode("utf-8", "surrogateescape")
    return list(csv.reader(io.StringIO(text)))


def _write_csv(path: Path, rows: list[list[str]], delimiter: str = ",") -> None:
    buf = io.StringIO()
    csv.writer(buf, delimiter=delimiter, lineterminator="\n").writerows(rows)
    path.write_bytes(buf.getvalue().encode("utf-8", "surrogateescape"))


def _csv_cells(path: Path, rng: random.Random, values: list[str], numeric_only: bool = False) -> str:
    rows = _read_csv(path)
    cells = [
        (r, c) for r in range(1, len(rows)) for c in range(len(rows[r])) if not numeric_only or _is_number(rows[r][c])
    ]
    if not cells:
        raise NotApplicable("no cells")
    if rng.random() < 0.5:
        col = rng.choice(cells)[1]
        value = rng.choice(values)
        for r in range(1, len(rows)):
            if col < len(rows[r]):
                rows[r][col] = value
        note = f"set column {rows[0][col] if col < len(rows[0]) else col!r} to {value!r}"
    else:
        picked = rng.sample(cells, min(len(cells), rng.choice([1, 5, 50])))
        for r, c in picked:
            rows[r][c] = rng.choice(values)
        note = f"set {len(picked)} cell(s)"
    _write_csv(path, rows)
    return note


def m_csv_columns(path: Path, rng: random.Random) -> str:
    rows = _read_csv(path)
    if not rows or not rows[0]:
        raise NotApplicable("no header")
    width = len(rows[0])
    col = rng.randrange(width)
    mode = rng.choice(
        [
            "drop",
            "rename",
            "swap",
            "duplicate",
            "extra",
            "no_header",
            "short_rows",
            "long_rows",
            "delimiter",
            "header_only",
            "unbalanced_quote",
            "blank_header",
        ]
    )
    delimiter = ","
    if mode == "drop":
        rows = [r[:col] + r[col + 1 :] for r in rows]
    elif mode == "rename":
        rows[0][col] = rng.choice(["", "x", rows[0][col].upper() + " ", rows[0][col] + "(ms)"])
    elif mode == "swap":
        other = rng.randrange(width)
        for r in rows:
            if max(col, other) < len(r):
                r[col], r[other] = r[other], r[col]
    elif mode == "duplicate":
        rows[0][rng.randrange(width)] = rows[0][col]
    elif mode == "extra":
        rows = [r + (["extra"] if i == 0 else [str(i)]) for i, r in enumerate(rows)]
    elif mode == "no_header":
        rows = rows[1:]
    elif mode in ("short_rows", "long_rows"):
        for r in rng.sample(rows[1:], min(len(rows) - 1, 5)) if len(rows) > 1 else []:
            r[:] = r[: rng.randrange(len(r) + 1)] if mode == "short_rows" else r + ["1", "x", ""]
    elif mode == "delimiter":
        delimiter = rng.choice([";", "\t", "|"])
    elif mode == "header_only":
        rows = rows[:1]
    elif mode == "unbalanced_quote":
        _write_csv(path, rows)
        data = path.read_bytes()
        at = data.find(b"\n") + 1
        path.write_bytes(data[:at] + b'"' + data[at:])
        return "csv: unbalanced quote"
    else:
        rows[0] = [""] * width
    _write_csv(path, rows, delimiter)
    return f"csv: {mode} (column {col})"


# ---------------------------------------------------------------- SQLite


def _tables(con: sqlite3.Connection) -> list[str]:
    return [r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type='table'")]


def _columns(con: sqlite3.Connection, table: str) -> list[tuple[str, str]]:
    return [(r[1], r[2]) for r in con.execute(f'PRAGMA table_info("{table}")')]


def _db_edit(path: Path, rng: random.Random, mode: str) -> str:
    """drop (a table or a column), types (text/blob/NULL into a column), numbers (extreme values)."""
    con = sqlite3.connect(path, isolation_level=None)
    try:
        tables = [t for t in _tables(con) if con.execute(f'SELECT count(*) FROM "{t}"').fetchone()[0]]
        if not tables:
            raise NotApplicable("no rows")
        table = rng.choice(tables)
        cols = _columns(con, table)
        name, ctype = rng.choice(cols)
        if mode == "drop":
            if rng.random() < 0.4 or len(cols) < 2:
                con.execute(f'DROP TABLE "{table}"')
                return f"sqlite: drop table {table}"
            try:
                con.execute(f'ALTER TABLE "{table}" DROP COLUMN "{name}"')
            except sqlite3.OperationalError:  # a key column: rename it instead
                con.execute(f'ALTER TABLE "{table}" RENAME COLUMN "{name}" TO "{name}_x"')
            return f"sqlite: drop column {table}.{name}"
        if mode == "types":
            value = rng.choice(["text", b"\x00\x01blob", None, "", 1.5, "12abc"])
        else:
            ints = [c for c, t in cols if "INT" in t.upper() or "REAL" in t.upper() or t == ""]
            name = rng.choice(ints or [name])
            value = rng.choice([2**63 - 1, -(2**63), -1, 0, 1e308, -1e308, 10**18, 4294967295])
        where = "" if rng.random() < 0.5 else f' WHERE rowid IN (SELECT rowid FROM "{table}" ORDER BY random() LIMIT 5)'
        con.execute(f'UPDATE OR IGNORE "{table}" SET "{name}" = ?{where}', (value,))  # rows a UNIQUE key keeps stay
        return f"sqlite: {table}.{name} ({ctype}) = {value!r}{' on 5 rows' if where else ''}"
    finally:
        con.close()


def m_corrupt_sqlite(path: Path, rng: random.Random) -> str:
    data = bytearray(path.read_bytes())
    page = int.from_bytes(data[16:18], "big") or 4096
    mode = rng.choice(["header", "page", "truncate", "page_size", "schema", "wal", "empty_tables", "not_sqlite"])
    if mode == "header":
        data[:16] = bytes(16)
    elif mode == "page":
        p = rng.randrange(max(1, len(data) // page))
        for _ in range(rng.choice([1, 16, 200])):
            data[p * page + rng.randrange(page)] ^= rng.randrange(1, 256)
    elif mode == "truncate":
        data = data[: page * rng.randrange(1, max(2, len(data) // page))]
    elif mode == "page_size":
        data[16:18] = rng.choice([b"\x00\x03", b"\xff\xff", b"\x00\x00"])
    elif mode == "not_sqlite":
        data = bytearray(b"this is not a database\n" * 10)
    else:
        con = sqlite3.connect(path, isolation_level=None)
        try:
            if mode == "schema":
                con.execute("PRAGMA writable_schema=ON")
                con.execute(
                    "UPDATE sqlite_master SET sql = 'CREATE TABLE broken (' WHERE rowid = "
                    "(SELECT rowid FROM sqlite_master WHERE type='table' ORDER BY random() LIMIT 1)"
                )
            elif mode == "wal":
                con.execute("PRAGMA journal_mode=WAL")
            else:
                for t in _tables(con):
                    con.execute(f'DELETE FROM "{t}"')
        finally:
            con.close()
        return f"sqlite: {mode}"
    path.write_bytes(bytes(data))
    return f"sqlite: {mode}"


MUTATORS: dict[str, tuple[Callable[[Path, random.Random], str], frozenset[str]]] = {
    "truncate": (m_truncate, frozenset({"gz", "db", "csv", "json", "text"})),
    "flip_bytes": (m_flip_bytes, frozenset({"gz", "db", "csv", "json", "text"})),
    "delete_keys": (m_delete_keys, frozenset({"gz", "json", "db"})),
    "change_types": (m_change_types, frozenset({"gz", "json", "csv", "db"})),
    "numbers": (m_numbers, frozenset({"gz", "json", "csv", "db"})),
    "invalid_utf8": (m_invalid_utf8, frozenset({"gz", "json", "csv", "text"})),
    "bom": (m_bom, frozenset({"gz", "json", "csv", "text"})),
    "corrupt_gzip": (m_corrupt_gzip, frozenset({"gz", "json"})),
    "deep_nesting": (m_deep_nesting, frozenset({"gz", "json"})),
    "csv_columns": (m_csv_columns, frozenset({"csv"})),
    "corrupt_sqlite": (m_corrupt_sqlite, frozenset({"db"})),
}


# ---------------------------------------------------------------- cases


@dataclass(frozen=True)
class Case:
    id: int
    seed: int
    mutator: str
    label: str
    source: Path
    target: str  # the mutated file, relative to the source (empty when the source is that file)


@dataclass
class Result:
    case: Case
    outcome: str
    note: str = ""
    detail: str = ""
    seconds: float = 0.0
    kept: str = ""
    steps: list[str] = field(default_factory=list)


def available_sources(fixtures: Path) -> list[tuple[str, Path, list[tuple[str, str]]]]:
    """(label, path, [(relative file, kind)]) of each source present on this machine."""
    found = []
    for label, rel in SOURCES:
        path = rel if isinstance(rel, Path) else fixtures / rel
        if not path.exists():
            continue
        files = [path] if path.is_file() else sorted(p for p in path.rglob("*") if p.is_file())
        files = [f for f in files if f.name != "PROVENANCE.md" and not f.name.endswith(".done")]
        found.append((label, path, [("" if f == path else str(f.relative_to(path)), file_kind(f)) for f in files]))
    return found


def make_cases(n: int, seed: int, fixtures: Path) -> list[Case]:
    """Case i uses mutator i mod 11 (an even table), a source and file drawn from Random((seed, i))."""
    sources = available_sources(fixtures)
    names = list(MUTATORS)
    cases = []
    for i in range(n):
        rng = random.Random(f"{seed}:{i}")
        mutator = names[i % len(names)]
        kinds = MUTATORS[mutator][1]
        fitting = [(label, path, [f for f, k in files if k in kinds]) for label, path, files in sources]
        fitting = [s for s in fitting if s[2]]
        if not fitting:
            continue
        label, path, files = rng.choice(fitting)
        cases.append(Case(i, seed, mutator, label, path, rng.choice(files)))
    return cases


def _copy(src: Path, dst: Path) -> None:
    """A writable copy (the fixtures are read-only; copytree would keep their modes)."""
    if src.is_file():
        shutil.copyfile(src, dst)
        return
    dst.mkdir()
    for p in sorted(src.rglob("*")):
        (dst / p.relative_to(src)).mkdir() if p.is_dir() else shutil.copyfile(p, dst / p.relative_to(src))


def _snapshot(root: Path, skip: tuple[Path, ...]) -> dict[str, tuple[int, int]]:
    snap = {}
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = [d for d in dirnames if Path(dirpath, d) not in skip]
        for name in filenames + dirnames:
            p = Path(dirpath, name)
            if p in skip:
                continue
            st = p.lstat()  # a directory counts by its presence (its mtime moves as -o fills)
            snap[str(p.relative_to(root))] = (-1, 0) if p.is_dir() else (st.st_size, st.st_mtime_ns)
    return snap


def _run(cmd: list[str], cwd: Path, env: dict[str, str], timeout: float) -> tuple[int | None, str]:
    """(exit code or None on timeout, stdout+stderr); a hung command's whole process group is killed."""
    proc = subprocess.Popen(
        cmd,
        cwd=cwd,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        out, _ = proc.communicate(timeout=timeout)
        return proc.returncode, out.decode("utf-8", "replace")
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, _ = proc.communicate()
        return None, out.decode("utf-8", "replace")


def classify(rc: int | None, output: str) -> str:
    """ok, warned, error, traceback, hang or unclear for one command's exit and output."""
    if rc is None:
        return "hang"
    if "Traceback (most recent call last)" in output or rc < 0 or rc >= 128:
        return "traceback"
    errors = sum(1 for line in output.splitlines() if line.startswith("Error:"))
    if rc == 0:
        return "unclear" if errors else ("warned" if "Warning" in output else "ok")
    return "error" if rc == 1 and errors == 1 else "unclear"


def _export_problems(export: Path) -> list[str]:
    """Half-written export files: temp or hidden names, empty files, CSV/JSON that does not parse."""
    problems = []
    for p in sorted(export.rglob("*")) if export.exists() else []:
        if p.is_dir():
            continue
        if p.name.startswith(".") or p.suffix in (".tmp", ".part") or p.stat().st_size == 0:
            problems.append(f"export left {p.name}")
            continue
        try:
            if p.suffix == ".csv":
                with open(p, newline="", encoding="utf-8") as f:
                    rows = list(csv.reader(f))
                widths = {len(r) for r in rows}
                if not rows or len(widths) > 1:
                    problems.append(f"export {p.name}: ragged or empty CSV")
            elif p.suffix == ".json":
                json.loads(p.read_bytes())
        except (ValueError, csv.Error) as e:
            problems.append(f"export {p.name} does not parse: {e}")
    return problems


def _run_problems(out: Path, run: Path, imported: bool) -> list[str]:
    problems = [
        f"debris {p.name}"
        for p in out.iterdir()
        if p.name.endswith(".importing") or (p.name.startswith(".") and p.name != ".")
    ]
    if imported and not (run / "manifest.json").is_file():
        problems.append("exit 0 but the run has no manifest.json")
    if not imported and run.exists():
        problems.append("a failed import left the run directory")
    return problems


WORST = ("hang", "traceback", "partial", "outside", "unclear", "error", "warned", "ok")


def run_case(case: Case, work: Path, timeout: float, keep_dir: Path | None) -> Result:
    """Mutate a copy of the case's source in its own directory, import it, show and export it, classify."""
    t0 = time.monotonic()
    root = Path(tempfile.mkdtemp(prefix=f"case-{case.id:04d}-", dir=work))
    inp, out, cwd, tmp = root / "in", root / "out", root / "cwd", root / "tmp"
    for d in (inp, out, cwd, tmp):
        d.mkdir()
    src = inp / case.source.name
    _copy(case.source, src)
    target = src / case.target if case.target else src
    rng = random.Random(f"{case.seed}:{case.id}:mutate")
    try:
        note = MUTATORS[case.mutator][0](target, rng)
    except Exception as e:  # noqa: BLE001  (the mutator could not parse or change this file: the case still runs)
        note = f"{m_flip_bytes(target, rng)} (fallback: {type(e).__name__}: {e})"
    run, export = out / "run", out / "export"
    skip = (run, export)
    before = _snapshot(root, skip)
    env = {**os.environ, "TMPDIR": str(tmp), "NO_COLOR": "1", "COLUMNS": "160", "PYTHONFAULTHANDLER": "1"}
    py = [sys.executable, "-m", "prof_engine"]
    steps = [("import", py + ["import", str(src), "-o", str(run)])]
    kinds: list[str] = []
    detail = ""
    problems: list[str] = []
    for name, cmd in steps:
        rc, output = _run(cmd, cwd, env, timeout)
        kind = classify(rc, output)
        kinds.append(kind)
        if kind in BAD or (name != "import" and kind not in ("ok", "warned", "error")):
            detail = detail or f"{name}: {_tail(output)}"
        if name == "import":
            problems += _run_problems(out, run, rc == 0)
            if rc == 0 and not problems:
                steps.append(("show", py + ["show", str(run)]))
                steps.append(("export", py + ["export", str(run), "-o", str(export)]))
        elif name == "export":
            problems += _export_problems(export)
    outside = sorted(set(_snapshot(root, skip).items()) ^ set(before.items()))
    outcome = min([kinds[0]] + [k for k in kinds[1:] if k in BAD], key=WORST.index)
    if problems and WORST.index("partial") < WORST.index(outcome):
        outcome, detail = "partial", "; ".join(problems)
    if outside and WORST.index("outside") < WORST.index(outcome):
        outcome, detail = "outside", "changed outside -o: " + ", ".join(sorted({p for p, _ in outside})[:5])
    result = Result(case, outcome, note, detail or _tail(output), time.monotonic() - t0, steps=kinds)
    if outcome in BAD and keep_dir is not None:
        result.kept = _keep(case, src, keep_dir, [c for _, c in steps])
    shutil.rmtree(root, ignore_errors=True)
    return result


def _tail(output: str) -> str:
    lines = [line for line in output.strip().splitlines() if line.strip()]
    return lines[-1][:300] if lines else "(no output)"


def _keep(case: Case, src: Path, keep_dir: Path, cmds: list[list[str]]) -> str:
    """The mutated input and a repro.sh that runs the same commands on it."""
    dest = keep_dir / f"case-{case.id:04d}"
    shutil.rmtree(dest, ignore_errors=True)
    dest.mkdir(parents=True)
    kept = dest / src.name
    shutil.copytree(src, kept) if src.is_dir() else shutil.copyfile(src, kept)
    lines = [
        "#!/bin/sh",
        f"# seed {case.seed} case {case.id}: {case.mutator} on {case.label} {case.target}",
        'cd "$(dirname "$0")" && rm -rf out && mkdir out',
    ]
    for cmd in cmds:
        args = ["python", "-m", "prof_engine", cmd[3]]
        args += cmd[4:]
        lines.append(shlex.join(args).replace(str(src), src.name).replace(str(src.parents[1] / "out"), "out"))
    (dest / "repro.sh").write_text("\n".join(lines) + "\n")
    return str(dest)


def run_campaign(
    cases: list[Case], jobs: int, timeout: float, out: Path, progress: Callable[[Result], None] | None = None
) -> list[Result]:
    work = out / "work"
    work.mkdir(parents=True, exist_ok=True)
    with ThreadPoolExecutor(max_workers=jobs) as pool, open(out / "results.jsonl", "w") as log:
        futures = [pool.submit(run_case, c, work, timeout, out / "failures") for c in cases]
        results = []
        for f in as_completed(futures):
            r = f.result()
            results.append(r)
            log.write(
                json.dumps(
                    {
                        "seed": r.case.seed,
                        "case": r.case.id,
                        "mutator": r.case.mutator,
                        "source": r.case.label,
                        "target": r.case.target,
                        "outcome": r.outcome,
                        "note": r.note,
                        "detail": r.detail,
                        "seconds": round(r.seconds, 1),
                    }
                )
                + "\n"
            )
            log.flush()
            if progress:
                progress(r)
    return sorted(results, key=lambda r: r.case.id)


def table(results: list[Result]) -> str:
    """Markdown: cases per mutator x outcome, with a total row."""
    counts = Counter((r.case.mutator, r.outcome) for r in results)
    rows = ["| mutator | cases | " + " | ".join(OUTCOMES) + " |", "|---" * (len(OUTCOMES) + 2) + "|"]
    for m in [m for m in MUTATORS if any(r.case.mutator == m for r in results)] + ["total"]:
        cells = [sum(v for (mm, o), v in counts.items() if o == oc and m in (mm, "total")) for oc in OUTCOMES]
        rows.append(f"| {m} | {sum(cells)} | " + " | ".join(str(c) for c in cells) + " |")
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cases", type=int, default=300)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--jobs", type=int, default=2, help="cases run at once")
    ap.add_argument("--timeout", type=float, default=30.0, help="seconds per command before a case is a hang")
    ap.add_argument("--case", type=int, action="append", help="only this case id (repeatable)")
    ap.add_argument("--mutator", action="append", choices=list(MUTATORS), help="only this mutator (repeatable)")
    ap.add_argument("--fixtures", type=Path, default=FIXTURES)
    ap.add_argument(
        "--out",
        type=Path,
        default=Path(tempfile.gettempdir()) / "prof-engine-fuzz",
        help="where non-clean cases keep their input and repro.sh",
    )
    args = ap.parse_args(argv)
    cases = make_cases(max(args.cases, max(args.case or [0]) + 1), args.seed, args.fixtures)
    cases = [
        c for c in cases if (not args.case or c.id in args.case) and (not args.mutator or c.mutator in args.mutator)
    ]
    if not cases:
        print(f"no cases: no fixtures under {args.fixtures}", file=sys.stderr)
        return 1
    t0 = time.monotonic()

    def progress(r: Result) -> None:
        print(
            f"case {r.case.id:4d} {r.case.mutator:14s} {r.case.label:18s} {r.outcome:9s} {r.seconds:5.1f}s",
            file=sys.stderr,
            flush=True,
        )

    results = run_campaign(cases, args.jobs, args.timeout, args.out, progress)
    wall = time.monotonic() - t0
    print(table(results))
    print(f"\n{len(results)} cases, seed {args.seed}, --jobs {args.jobs}, timeout {args.timeout:g} s: {wall:.0f} s")
    bad = [r for r in results if r.outcome in BAD]
    for r in bad:
        c = r.case
        print(
            f"\n{r.outcome}: seed {c.seed} case {c.id} ({c.mutator}: {r.note}) on {c.label} "
            f"{c.target or c.source.name}\n  {r.detail}\n  reproduce: sh {r.kept}/repro.sh "
            f"or python benchmarks/fuzz.py --seed {c.seed} --case {c.id}"
        )
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
