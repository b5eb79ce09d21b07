"""The views of `queries/*.sql`: their documented headers, their dependencies, their creation order.

A file `queries/<name>.sql` opens with a comment header:

    -- view: <name>              (optional; the file name is the view name)
    -- answers: what question it answers (continued on `--   ` lines)
    -- matches: which msprof / torch_npu report it reproduces
    -- requires: the views, macros and tables it builds on, comma separated
    -- scope: rank | cluster       (required of the views of queries/*.sql)
    -- column `<Name>` <TYPE>: meaning, with the unit

Scope says where a view can be computed: `rank` from one rank's records alone (every group, window
and join is within a rank, so a run restricted to some ranks gives the whole run's rows of those
ranks), `cluster` across ranks (it compares ranks, or requires a cluster view). A view file without
a valid scope is an error when the views are loaded (`definitions`); the comparison's files
(queries/compare/, read by `parse` alone) compare runs, not ranks, and declare none.

Public files (no leading `_`) hold one SELECT, created as `VIEW <name>`; private files (`_name`)
hold whole statements (macros, helper views) and are executed as written.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import duckdb

from prof_engine._resources import data_dir

_KEY = re.compile(r"^--\s*(answers|matches|requires|scope):\s?(.*)$")
SCOPES = ("rank", "cluster")
_COLUMN = re.compile(r"^--\s*column\s+`([^`]+)`\s+([A-Z][A-Z0-9_(), ]*?):\s*(.*)$")
_CONTINUATION = re.compile(r"^--\s{2,}(\S.*)$")
# A view's CREATE up to its AS (`CREATE OR REPLACE TEMP VIEW "name" AS`), at the start of a line
# (as the statements of queries/ begin; not text in a literal), for `defer_binding`.
_CREATE_VIEW = re.compile(
    r"^(\s*CREATE\s+(?:OR\s+REPLACE\s+)?(?:TEMP(?:ORARY)?\s+)?VIEW\s+(?:IF\s+NOT\s+EXISTS\s+)?"
    r'(?:"[^"]+"|\w+)(?:\.(?:"[^"]+"|\w+))?)\s+AS\b',
    re.IGNORECASE | re.MULTILINE,
)


# What a file of queries/ creates (its macros, helper views and tables), at the start of a line.
_CREATES = re.compile(
    r"^\s*CREATE\s+(?:OR\s+REPLACE\s+)?(?:TEMP(?:ORARY)?\s+)?(?:MACRO|FUNCTION|VIEW|TABLE)\s+"
    r'(?:IF\s+NOT\s+EXISTS\s+)?("[^"]+"|\w+)',
    re.IGNORECASE | re.MULTILINE,
)
# Literals and comments of SQL: they hold no clause of it (`grouped._order_by`).
LITERALS = re.compile(r"'(?:[^']|'')*'|--[^\n]*")


def defer_binding(sql: str) -> str:
    """`sql` with each CREATE VIEW marked `WITH (DEFER_BINDING)` (DuckDB 2.0, the floor pyproject
    requires): DuckDB then parses the view and binds it where a query first reads it, instead of
    binding it, and every view it reads, at its creation (the views of queries/ read each other
    dozens of levels deep: binding them all took ~0.7 s of every `prof_engine.open`, whichever
    view was then asked for)."""
    return _CREATE_VIEW.sub(r"\1 WITH (DEFER_BINDING) AS", sql)


@dataclass(frozen=True)
class ColumnDoc:
    name: str
    type: str
    description: str


@dataclass(frozen=True)
class ViewDef:
    name: str
    path: Path
    answers: str
    matches: str
    requires: tuple[str, ...]
    columns: tuple[ColumnDoc, ...]
    sql: str
    scope: str  # one of SCOPES; "" where the file declares none (queries/compare/)
    defines: tuple[str, ...]  # the names it creates: its view, or its macros and helper views

    @property
    def summary(self) -> str:
        """The first sentence of `answers`, for one-line listings."""
        return re.split(r"(?<=[.?!])\s+| — ", self.answers)[0].rstrip(".")

    @property
    def public(self) -> bool:
        return not self.name.startswith("_")

    def statements(self) -> str:
        """SQL that creates this view (public) or its macros and helpers (private), its views bound
        at their first use (`defer_binding`)."""
        sql = self.sql if not self.public else f'CREATE OR REPLACE VIEW "{self.name}" AS\n{self.sql}'
        return defer_binding(sql)


def parse(path: Path) -> ViewDef:
    """The view of file `path`; ValueError where its header declares a scope other than SCOPES."""
    fields: dict[str, str] = {"answers": "", "matches": "", "requires": "", "scope": ""}
    columns: list[ColumnDoc] = []
    body: list[str] = []
    last = None
    for line in path.read_text(encoding="utf-8").splitlines():
        if body or not line.startswith("--"):
            body.append(line)
            continue
        if m := _KEY.match(line):
            last = m.group(1)
            fields[last] = m.group(2).strip()
        elif m := _COLUMN.match(line):
            columns.append(ColumnDoc(m.group(1), m.group(2).strip(), m.group(3).strip()))
            last = None
        elif (m := _CONTINUATION.match(line)) and last in ("answers", "matches"):
            fields[last] += " " + m.group(1).strip()
        else:
            last = None
    if fields["scope"] not in ("", *SCOPES):
        raise ValueError(
            f"queries/{path.name}: scope {fields['scope']!r} in its header; say `-- scope: rank` or `-- scope: cluster`"
        )
    requires = tuple(r.strip() for r in fields["requires"].split(",") if r.strip())
    sql = "\n".join(body).strip().rstrip(";")
    name = path.stem
    defines = (name,) if not name.startswith("_") else tuple(n.strip('"') for n in _CREATES.findall(sql))
    return ViewDef(
        name, path, fields["answers"], fields["matches"], requires, tuple(columns), sql, fields["scope"], defines
    )


@cache
def definitions() -> dict[str, ViewDef]:
    """All view files, in an order where each comes after what it requires."""
    found = {p.stem: parse(p) for p in sorted(data_dir("queries").glob("*.sql"))}
    if unscoped := [v.path.name for v in found.values() if not v.scope]:
        raise ValueError(
            f"queries/{unscoped[0]}: no `-- scope:` line in its header; say `-- scope: rank` "
            f"(computable from one rank's records) or `-- scope: cluster`"
        )
    ordered: dict[str, ViewDef] = {}

    def visit(name: str, chain: tuple[str, ...]) -> None:
        if name in ordered or name not in found:
            return
        if name in chain:
            raise ValueError(f"queries/: dependency cycle {' -> '.join(chain + (name,))}")
        for dep in found[name].requires:
            visit(dep, chain + (name,))
        ordered[name] = found[name]

    for name in found:
        visit(name, ())
    return ordered


# What reads DuckDB's catalog: a `Run` then creates every view first, so that what the catalog
# lists is the run's views, not the few its queries named so far.
CATALOG_SCHEMAS = frozenset({"information_schema", "pg_catalog"})
CATALOG_NAMES = frozenset(
    "duckdb_views duckdb_tables duckdb_columns duckdb_functions duckdb_dependencies sqlite_master".split()
)


@dataclass(frozen=True)
class Reads:
    """What SQL reads, by DuckDB's parser (`reads`): the tables, views, functions and table
    functions its statements name (lower case); the names in its strings, and what the SQL in
    them reads; whether it reads DuckDB's catalog."""

    names: frozenset[str]
    in_strings: frozenset[str]
    catalog: bool


def reads(con: duckdb.DuckDBPyConnection, sql: str) -> Reads | None:
    """What the statements of `sql` read, from DuckDB's parse of them (`json_serialize_sql`): the
    table references and function calls of its tree, not its words (a column named as a view is
    no read of it). A string constant is SQL run from a string (`query_table('op_summary')`,
    `query('SELECT ...')`): it names what it is, and what it reads where it parses. None where a
    statement is not a SELECT (DuckDB serialises only those: EXPLAIN, COPY, PRAGMA...) or `sql`
    does not parse; `Run.sql` then finds what they read by binding them."""
    tree = json.loads(con.execute("SELECT json_serialize_sql(?)", [sql]).fetchall()[0][0])
    if tree.get("error"):
        return None
    names: set[str] = set()
    strings: set[str] = set()
    catalog = _walk(tree, names, strings)
    in_strings = {s.strip().strip('"').lower() for s in strings}
    todo = [s for s in strings if " " in s.strip()]  # a name has no space; SQL has
    while todo:  # the strings that may be SQL, each level parsed in one call
        parsed = con.execute("SELECT json_serialize_sql(s) FROM unnest(?::VARCHAR[]) AS t(s)", [todo]).fetchall()
        found: set[str] = set()
        for (text,) in parsed:
            if not (inner := json.loads(text)).get("error"):
                catalog |= _walk(inner, in_strings, found)
        todo = [s for s in found - strings if " " in s.strip()]
        strings |= found
        in_strings |= {s.strip().strip('"').lower() for s in found}
    return Reads(frozenset(names), frozenset(in_strings), catalog)


def _walk(node: object, names: set[str], strings: set[str]) -> bool:
    """Collect the names a parse tree (`json_serialize_sql`'s) reads into `names`, its string
    constants into `strings`; return whether it reads the catalog."""
    catalog = False
    if isinstance(node, dict):
        kind = node.get("type")
        if kind == "BASE_TABLE":
            name, schema = str(node.get("table_name", "")).lower(), str(node.get("schema_name", "")).lower()
            names.add(name)
            catalog |= schema in CATALOG_SCHEMAS or name in CATALOG_NAMES
        elif kind == "SHOW_REF" and node.get("query") is None:
            # SHOW TABLES, DESCRIBE alone: the catalog; SHOW <name> describes <name> (DESCRIBE
            # and SUMMARIZE <name> hold a query over it, walked below)
            name = str(node.get("table_name", "")).strip('"').lower()
            if node.get("show_type") == "SHOW" and name:
                names.add(name)
            else:
                catalog = True
        elif kind == "VALUE_CONSTANT" and (node.get("literal") or {}).get("kind") == "STRING":
            strings.add(node["literal"]["text"])
        if isinstance(function := node.get("function_name"), str):
            names.add(function.lower())
            catalog |= function.lower() in CATALOG_NAMES
        for value in node.values():
            catalog |= _walk(value, names, strings)
    elif isinstance(node, list):
        for value in node:
            catalog |= _walk(value, names, strings)
    return catalog


def defining(names: Iterable[str]) -> list[str]:
    """The files of queries/ (`definitions`) that create any of `names` (a view, macro or helper
    view of theirs), in creation order."""
    wanted = {n.lower() for n in names}
    return [v.name for v in definitions().values() if any(d.lower() in wanted for d in v.defines)]


def closure(names: Iterable[str]) -> set[str]:
    """The files `names` and every file they require, transitively."""
    defs, seen, todo = definitions(), set(), list(names)
    while todo:
        name = todo.pop()
        if name in defs and name not in seen:
            seen.add(name)
            todo.extend(defs[name].requires)
    return seen


def public_views() -> list[ViewDef]:
    """The views users query, by name."""
    return sorted((v for v in definitions().values() if v.public), key=lambda v: v.name)
