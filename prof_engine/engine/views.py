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

import re
from collections.abc import Iterable
from dataclasses import dataclass
from functools import cache
from pathlib import Path

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
# Literals and comments of SQL: they name nothing a statement reads (`words`), and hold no clause
# of it (`grouped._order_by`).
LITERALS = re.compile(r"'(?:[^']|'')*'|--[^\n]*")


def defer_binding(sql: str) -> str:
    """`sql` with each CREATE VIEW marked `WITH (DEFER_BINDING)` (DuckDB 2.0): DuckDB then parses
    the view and binds it where a query first reads it, instead of binding it, and every view it
    reads, at its creation (the views of queries/ read each other dozens of levels deep: binding
    them all took ~0.7 s of every `prof_engine.open`, whichever view was then asked for)."""
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

    def statements(self, defer: bool = False) -> str:
        """SQL that creates this view (public) or its macros and helpers (private); with `defer`,
        its views are bound at their first use (`defer_binding`)."""
        sql = self.sql if not self.public else f'CREATE OR REPLACE VIEW "{self.name}" AS\n{self.sql}'
        return defer_binding(sql) if defer else sql


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


def words(sql: str, literals: bool = False) -> set[str]:
    """The identifiers of `sql`, lower case, outside its literals and comments (`literals`: in them
    too, as SQL run from a string, `query_table('op_summary')`, names them)."""
    text = sql if literals else LITERALS.sub(" ", sql)
    return {w.strip('"').lower() for w in re.findall(r'"(?:[^"]|"")+"|[A-Za-z_][A-Za-z0-9_$]*', text)}


def named(sql: str, literals: bool = False) -> list[str]:
    """The files of queries/ (`definitions`) that create a name `sql` reads: a view, macro or helper
    view of theirs that is a word of it (`literals`: see `words`). A word that is only a column of
    the same name costs a view created (or computed) and not read, never a wrong row."""
    used = words(sql, literals)
    return [v.name for v in definitions().values() if any(d.lower() in used for d in v.defines)]


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
