"""Read-only SQL for serving others (`Run(read_only_sql=True)`, `query --safe`): which statements
may run (`refusal`, an allow-list over DuckDB's parse) and what the connection may open (`sandbox`)."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

import duckdb

# PRAGMAs that only read the catalog or the build: the rest change settings or state, and the
# statements --safe SQL may run are an allow-list (`refusal`), so an unknown one is refused.
READING_PRAGMAS = frozenset(
    "show_tables show_tables_expanded table_info show version platform database_list database_size "
    "functions collations storage_info".split()
)


def _tokens(sql: str) -> list[tuple[int, str]]:
    """(offset, text) of each token of `sql` but comments, by DuckDB's own tokenizer."""
    found = [(start, kind) for start, kind in duckdb.tokenize(sql)]
    ends = [start for start, _ in found[1:]] + [len(sql)]
    return [
        (start, sql[start:end].strip()) for (start, kind), end in zip(found, ends) if kind != duckdb.token_type.comment
    ]


def _kind(con: duckdb.DuckDBPyConnection, sql: str) -> str | None:
    """The kind of statement `sql` is ("SELECT", "COPY"...), where it is exactly one; else None.
    SHOW, DESCRIBE and SUMMARIZE are SELECTs."""
    try:
        statements = con.extract_statements(sql)
        return str(statements[0].type).rsplit(".", 1)[-1] if len(statements) == 1 else None
    except (duckdb.Error, ValueError):  # ValueError: a kind DuckDB's Python API has no name for
        return None


def _explained(con: duckdb.DuckDBPyConnection, sql: str) -> str:
    """The kind of statement the EXPLAIN statement `sql` explains: what follows `EXPLAIN [ANALYZE]`
    and its options in parentheses, if any ("SELECT" where either reading parses as one SELECT;
    "a statement" where neither parses alone). EXPLAIN ANALYZE runs its statement: a COPY in it writes."""
    kinds = [kind for _, kind in explained_statements(con, sql)]
    return "SELECT" if "SELECT" in kinds else next((k for k in kinds if k), "a statement")


def explained_statements(con: duckdb.DuckDBPyConnection, sql: str) -> list[tuple[str, str | None]]:
    """The readings of what the EXPLAIN statement `sql` explains, each with its kind (`_kind`):
    what follows `EXPLAIN [ANALYZE]`, and what follows its options in parentheses, if any."""
    tokens = _tokens(sql)
    at = 1 + (len(tokens) > 1 and tokens[1][1].upper() in ("ANALYZE", "ANALYSE"))
    starts = [tokens[at][0]] if at < len(tokens) else []
    if starts and tokens[at][1] == "(":  # `EXPLAIN (FORMAT json) SELECT`: what follows the options
        depth = 0
        for k in range(at, len(tokens)):
            depth += {"(": 1, ")": -1}.get(tokens[k][1], 0)
            if depth == 0:
                starts += [tokens[k + 1][0]] if k + 1 < len(tokens) else []
                break
    return [(sql[start:], _kind(con, sql[start:])) for start in starts]


def refusal(con: duckdb.DuckDBPyConnection, query: str) -> str | None:
    """Why `query` is not read-only SQL (the kind of its first statement that is not), or None:
    every statement is a SELECT, an EXPLAIN [ANALYZE] of a SELECT, or a PRAGMA of READING_PRAGMAS.
    An allow-list over DuckDB's own parse: a statement kind it does not know is refused too."""
    for statement in con.extract_statements(query):
        try:
            kind = statement.type
        except ValueError:  # a kind DuckDB's Python API has no name for (`UPDATE EXTENSIONS`)
            return "this statement"
        name = str(kind).rsplit(".", 1)[-1]
        if kind == duckdb.StatementType.SELECT:
            continue
        if kind == duckdb.StatementType.EXPLAIN:
            if (explained := _explained(con, statement.query)) == "SELECT":
                continue
            return f"EXPLAIN of {explained}"
        if kind == duckdb.StatementType.PRAGMA:
            tokens = _tokens(statement.query)
            # `PRAGMA name` or `PRAGMA name(args)`; `PRAGMA name = value` sets
            if (
                len(tokens) > 1
                and tokens[1][1].lower() in READING_PRAGMAS
                and (len(tokens) == 2 or tokens[2][1] in ("(", ";"))
            ):
                continue
            return "a PRAGMA that is not a read of the catalog"
        return name
    return None


def sandbox(con: duckdb.DuckDBPyConnection, files: Iterable[str], *also: Path) -> None:
    """Lock `con` for SQL from others, once the run's tables exist: DuckDB may open only `files`
    (the run's Parquet files its views read: no directory, so no new file anywhere, and not the
    manifest) and the directories `also` (files derived from it, in a private temporary directory);
    no extension installed or loaded, no database attached, and no setting changed after this.
    DuckDB can still write a file it may read, so `Run.sql` lets only reads through (`refusal`);
    what it spills goes to its own private temporary directory, which DuckDB allows itself."""
    con.execute("SET allowed_paths = ?", [sorted(set(files))])
    con.execute("SET allowed_directories = ?", [[f"{d.resolve()}/" for d in also]])
    con.execute("SET enable_external_access = false")
    con.execute("SET autoinstall_known_extensions = false")
    con.execute("SET autoload_known_extensions = false")
    con.execute("SET lock_configuration = true")
