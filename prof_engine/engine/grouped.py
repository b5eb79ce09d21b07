"""Grouped execution of the views: rank-scope views per group of ranks, cluster-scope views once.

A view of scope `rank` gives, on a run restricted to some ranks, the whole run's rows of those ranks
(`engine.views`). So the plan splits a run's ranks into groups of `ranks_per_task`, and each task
opens the run restricted to its group and writes each rank-scope view it was asked for as one
Parquet file. The driver then opens the run with those views reading the groups' files (same names,
the rows in the whole run's order), so the cluster-scope views' SQL runs unchanged over them.
Tasks run in a process pool (`local`) or as Ray tasks (`ray`), which write their files where the
driver reads them, or return their bytes through Ray's object store from a node that does not see
the driver's directory (`prof_engine._ray`). They read the run itself: on a cluster, it must be at
the same path on every node.
"""

from __future__ import annotations

import dataclasses
import multiprocessing
import os
import re
import shutil
import tempfile
from collections.abc import Iterable, Sequence
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass
from pathlib import Path

from prof_engine import _ray
from prof_engine._process import start_worker
from prof_engine._sql import list_literal, literal
from prof_engine.engine.connection import query_error
from prof_engine.engine.options import RunOptions
from prof_engine.engine.result import Result
from prof_engine.engine.session import Run, open_run, step_numbers
from prof_engine.engine.snapshots import remove_with
from prof_engine.engine.views import LITERALS, ViewDef, definitions, public_views
from prof_engine.errors import QueryError
from prof_engine.store.location import run_path
from prof_engine.store.manifest import read_manifest, restrict

# Ranks per task, at most: each task pays ~1 s to start and open its ranks, which larger groups
# share out; on 256 generated ranks 128 was as fast as 32 or 64, or faster, its largest process
# ~330 MB (benchmarks/scale_out.py). Fewer where that leaves CPUs idle: one group per CPU.
RANKS_PER_TASK = 128
# DuckDB writes a HUGEINT to Parquet as a DOUBLE; as DECIMAL(38,0) its digits all come back.
_WIDE_INTEGERS = ("HUGEINT", "UHUGEINT")


@dataclass(frozen=True)
class Plan:
    """What grouped execution computes: each group of ranks runs `rank_views`; the driver then
    answers `views` (the ones asked for) over their merged rows."""

    path: Path
    groups: tuple[tuple[int, ...], ...]
    rank_views: tuple[str, ...]
    views: tuple[str, ...]
    steps: tuple[int, ...] | None = None


@dataclass(frozen=True)
class _Task:
    path: str
    ranks: tuple[int, ...]
    views: tuple[str, ...]
    steps: tuple[int, ...] | None
    threads: int
    out_dir: str
    token: str | None = None  # a Ray task's: it writes in `out_dir` only where it sees it (`_ray.shares`)


def plan(
    path: Path | str,
    views: Sequence[str],
    ranks_per_task: int | None = None,
    steps: Sequence[int] | None = None,
    ranks: Sequence[int] | None = None,
    cpus: int = 1,
) -> Plan:
    """The groups of the run's ranks (or of `ranks`), in rank order, and the rank-scope views each
    computes for `views` (`_rank_views`). Groups hold `ranks_per_task` ranks; by default, the
    ranks spread over `cpus`, `RANKS_PER_TASK` at most."""
    defs = definitions()
    for name in views:
        if name not in defs:
            known = ", ".join(v.name for v in public_views())
            raise QueryError(f"unknown view {name!r}; views: {known}")
    _ray.check_executor("local", None, QueryError, ranks_per_task)  # the rules of ranks_per_task
    have = read_manifest(run_path(path))["ranks"]
    chosen = sorted({int(r) for r in ranks}) if ranks else list(have)
    if missing := sorted(set(chosen) - set(have)):
        raise QueryError(f"{path}: no rank {', '.join(map(str, missing))} in this run")
    if ranks_per_task is None:
        ranks_per_task = min(RANKS_PER_TASK, max(1, -(-len(chosen) // max(cpus, 1))))
    groups = tuple(tuple(chosen[i : i + ranks_per_task]) for i in range(0, len(chosen), ranks_per_task))
    return Plan(
        run_path(path).absolute(), groups, tuple(_rank_views(views)), tuple(views), tuple(steps) if steps else None
    )


def _rank_views(names: Sequence[str]) -> list[str]:
    """The rank-scope views the groups compute for `names`, in creation order: the public ones
    among them, and every rank-scope view a cluster-scope one among them reads, through other
    cluster-scope views (private ones too: the driver then reads only the groups' outputs), but
    files of macros alone, which the driver creates as it does any file. A rank-scope view's own
    requirements are its task's to compute."""
    defs, seen, grouped = definitions(), set(), set()
    todo = [(name, False) for name in names]  # (view, reached through a cluster-scope view)
    while todo:
        name, via_cluster = todo.pop()
        if name not in defs or (name, via_cluster) in seen:
            continue
        seen.add((name, via_cluster))
        view = defs[name]
        # a file of macros only (no view of its name: `_ranks`) has no rows to compute
        if view.scope == "rank" and (view.public or via_cluster) and name in view.defines:
            grouped.add(name)
        elif view.scope == "cluster":
            todo.extend((required, True) for required in view.requires)
    return [n for n in defs if n in grouped]


class GroupedRun(Run):
    """A run whose rank-scope views are computed by grouped execution: the first time a query
    (`sql`, `view`, `summary`, `export`) reads one, it and the other rank-scope views that query
    reads are computed in one round of tasks, one per group of `ranks_per_task` ranks, on
    `executor` (`local`: a process pool of this machine's cores; `ray`: Ray tasks on the cluster
    at `address`, else on Ray's running or a new local instance). The view then reads the groups'
    files, and gives the rows `prof_engine.open(path).view(v)` gives; cluster-scope views read it
    unchanged. The files are removed when the run is closed."""

    def __init__(self, path: Path | str, *, options: RunOptions | None = None) -> None:
        options = options if options is not None else RunOptions()
        if options.executor is None:  # opened as a GroupedRun: on this machine's cores by default
            options = dataclasses.replace(options, executor="local")
        assert options.executor is not None  # for type checkers: set just above
        self.executor, self.ranks_per_task, self.address = options.executor, options.ranks_per_task, options.address
        self._pool: ProcessPoolExecutor | None = None  # `executor="local"`'s workers, from the first round
        super().__init__(path, options=options)

    def _open(self) -> None:
        self._groups = Path(tempfile.mkdtemp(prefix="prof-engine-groups-"))
        self._grouped: set[str] = set()  # the views that read the groups' files
        try:
            super()._open()
        except BaseException:
            shutil.rmtree(self._groups, ignore_errors=True)
            raise
        remove_with(self.con, self._groups)

    def _derived_dirs(self) -> list[Path]:
        return [self._groups]

    def prepare(self, names: Iterable[str]) -> None:
        """Compute on the executor the rank-scope views `names` read (`compute_by_groups`); then
        create the rest of what they need (`create_views`), over the groups' rows (macros bind at
        their creation)."""
        names = list(names)
        self.compute_by_groups(names)
        self.create_views(names)

    def compute_by_groups(self, names: Sequence[str]) -> None:
        """Compute by grouped execution, in one round of tasks, the rank-scope views that `names`
        read (`_rank_views`) and no earlier query computed; each then reads its groups' files."""
        if any(n not in self._grouped for n in _rank_views(names)):
            chosen = plan(self.path, names, self.ranks_per_task, self.steps, self.ranks, self._cpus())
            wanted = tuple(n for n in chosen.rank_views if n not in self._grouped)
            self.create_views(wanted)  # the views over the run, whose columns the groups' files get
            chosen = dataclasses.replace(chosen, rank_views=wanted)
            if self.executor == "ray":
                files = _run_ray(chosen, self._groups, self.address)
            else:
                files = self._run_local(chosen)
            for name in wanted:
                _read_groups(self, definitions()[name], files[name])
                self._grouped.add(name)

    def summary(self, top: int = 10, more: bool = False) -> dict[str, Result]:
        self.prepare(["_summary", "data_quality"])  # one round: summary's tables open with its warnings
        return super().summary(top, more)

    def _run_local(self, chosen: Plan) -> dict[str, list[Path]]:
        """Each group in a spawned worker process (tuned as the import's workers are), files in the
        run's groups directory. The pool lives as long as the run: a spawned worker takes ~1 s to
        load pyarrow and DuckDB, on every query's round otherwise."""
        cores = os.cpu_count() or 1
        workers = min(len(chosen.groups), cores)  # the same groups every round: the run's ranks
        if self._pool is None:
            self._pool = ProcessPoolExecutor(
                workers,
                mp_context=multiprocessing.get_context("spawn"),
                initializer=start_worker,
                initargs=(os.getpid(),),
            )
        tasks = _tasks(chosen, self._groups, max(1, cores // workers))  # DuckDB's threads: the cores shared out
        try:
            return _by_view(chosen, list(self._pool.map(compute_group, tasks)))
        except BrokenProcessPool:
            self._pool = None  # a new one next round
            raise QueryError("a worker process died (out of memory?): give fewer --ranks-per-task") from None

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(cancel_futures=True)
            self._pool = None
        super().close()

    def _cpus(self) -> int:
        """The CPUs the tasks may use: this machine's, or the Ray cluster's."""
        if self.executor == "ray":
            return int(_ray.connect(self.address).cluster_resources().get("CPU", 1))
        return os.cpu_count() or 1


def open_grouped(
    path: Path | str,
    views: Sequence[str],
    executor: str = "local",
    ranks_per_task: int | None = None,
    address: str | None = None,
    steps: Sequence[int] | None = None,
    ranks: Sequence[int] | None = None,
    memory_limit: str | None = None,
) -> GroupedRun:
    """The run at `path` opened for `views` (and what they require), computed now by grouped
    execution in one round of tasks (`GroupedRun`)."""
    known = {v.name for v in public_views()}
    for name in views:
        if name not in known:
            raise QueryError(f"unknown view {name!r}; views: {', '.join(sorted(known))}")
    options = RunOptions(
        steps=tuple(steps) if steps else None,
        ranks=tuple(ranks) if ranks else None,
        memory_limit=memory_limit,
        executor=executor,
        ranks_per_task=ranks_per_task,
        address=address,
    )
    run = GroupedRun(path, options=options)
    try:
        run.prepare(views)
    except BaseException:
        run.close()
        raise
    return run


def views(
    path: Path | str,
    names: Sequence[str],
    executor: str = "local",
    ranks_per_task: int | None = None,
    address: str | None = None,
) -> dict[str, Result]:
    """The rows of each view of `names` by grouped execution (`open_grouped`), by name."""
    with open_grouped(path, names, executor, ranks_per_task, address) as run:
        return {name: run.view(name) for name in names}


def _tasks(chosen: Plan, out_dir: Path, threads: int, token: str | None = None) -> list[_Task]:
    return [
        _Task(str(chosen.path), group, chosen.rank_views, chosen.steps, threads, str(out_dir), token)
        for group in chosen.groups
    ]


def _run_ray(chosen: Plan, where: Path, address: str | None) -> dict[str, list[Path]]:
    """Each group as a Ray task, writing its files under `where`, or returning their bytes where
    its node does not see it, written there here as the task finishes."""
    ray = _ray.connect(address)
    task = ray.remote(num_cpus=1)(compute_group)  # with one DuckDB thread: the one CPU Ray reserves it
    refs = {task.remote(t): i for i, t in enumerate(_tasks(chosen, where, 1, _ray.mark(where)))}
    done: list[dict[str, str | bytes]] = [{} for _ in refs]
    for ready, outputs in _ray.completed(ray, list(refs)):
        if isinstance(outputs, _ray.TaskFailed):
            raise QueryError(str(outputs))
        index = refs[ready]
        for name, value in outputs.items():
            if isinstance(value, bytes):
                target = where / _file_name(name, chosen.groups[index])
                target.write_bytes(value)
                value = str(target)
            done[index][name] = value
    return _by_view(chosen, done)


def _by_view(chosen: Plan, done: list[dict[str, str | bytes]]) -> dict[str, list[Path]]:
    """The groups' files of each view, in the groups' (the ranks') order: paths, a Ray task's bytes
    written to a file first (`_run_ray`)."""
    files: dict[str, list[Path]] = {name: [] for name in chosen.rank_views}
    for outputs in done:
        for name, value in outputs.items():
            assert isinstance(value, str), f"{name}: bytes, not a file"  # str() would make a path of them
            files[name].append(Path(value))
    return files


def _file_name(view: str, ranks: Sequence[int]) -> str:
    return f"{view}.ranks-{ranks[0]:08d}-{ranks[-1]:08d}.parquet"


def compute_group(task: _Task) -> dict[str, str | bytes]:
    """A task: the run restricted to `task.ranks`, each view of `task.views` written as one Parquet
    file in `task.out_dir`, its path by view name; or, for a Ray task on a node that does not see
    `out_dir`, written in a directory of its own and its bytes returned."""
    direct = task.token is None or _ray.shares(task.out_dir, task.token)
    out = Path(task.out_dir) if direct else Path(tempfile.mkdtemp(prefix="prof-engine-group-"))
    # the steps asked for that these ranks have (the driver checked the run has each); with none
    # of them, the group's views are empty, of the views' columns
    steps = None
    if task.steps:
        have = set(step_numbers(restrict(read_manifest(run_path(task.path)), list(task.ranks))))
        steps = [s for s in task.steps if s in have]
    try:
        with open_run(task.path, steps or None, ranks=task.ranks) as run:
            run.con.execute(f"SET threads = {int(task.threads)}")
            run.prepare(task.views)
            written: dict[str, str | bytes] = {}
            for name in task.views:
                target = out / _file_name(name, task.ranks)
                _write_view(run, name, target, empty=steps == [])
                written[name] = str(target) if direct else target.read_bytes()
            return written
    finally:
        if not direct:
            shutil.rmtree(out, ignore_errors=True)


def _write_view(run: Run, name: str, target: Path, empty: bool = False) -> None:
    """`name`'s rows as a Parquet file at `target`, written beside it and renamed when complete."""
    columns = run.con.execute(f'DESCRIBE "{name}"').fetchall()
    select = ", ".join(
        f'"{c}"::DECIMAL(38,0) AS "{c}"' if t in _WIDE_INTEGERS else f'"{c}"' for c, t, *_ in _escaped(columns)
    )
    tmp = target.with_name(f".{target.name}.tmp")
    try:
        limit = " LIMIT 0" if empty else ""
        run.con.execute(
            f'COPY (SELECT {select} FROM "{name}"{limit}) TO {literal(tmp)} (FORMAT parquet, COMPRESSION zstd)'
        )
    except Exception as e:  # noqa: BLE001 - any failure of a task's query is one line for the driver
        tmp.unlink(missing_ok=True)
        raise QueryError(f"{name} on ranks {run.ranks}: {query_error(e)}") from None
    os.replace(tmp, target)


def _escaped(columns: list[tuple]) -> list[tuple]:
    return [(c.replace('"', '""'), t, *rest) for c, t, *rest in columns]


def _read_groups(run: Run, view: ViewDef, files: list[Path]) -> None:
    """Make `view` read the groups' files in `run`, its columns of the types the view gives.

    Groups come in rank order, so where the view orders by rank first the files' rows, one after
    the other, are in its order. Otherwise its ORDER BY is applied again, ties in group and row
    order. Rows the view holds for the run whole (a NULL `Rank`: no group has them, `restrict`)
    come from the view over the run itself."""
    columns = _escaped(run.con.execute(f'DESCRIBE "{view.name}"').fetchall())
    cast = ", ".join(f'CAST("{c}" AS {t}) AS "{c}"' for c, t, *_ in columns)
    names = ", ".join(f'"{c}"' for c, *_ in columns)
    listed = list_literal(files)
    whole, order = _run_rows(view), _order_by(view.sql)
    if not whole and (order is None or _rank_first(order)):  # DuckDB reads the files in the list's order
        sql = f"SELECT {cast} FROM read_parquet({listed})"
    else:
        source = f"read_parquet({listed}, filename = true, file_row_number = true)"
        merged = f"SELECT {cast}, filename AS _group, file_row_number AS _row FROM {source}"
        if whole:
            run.con.execute(f'CREATE OR REPLACE VIEW "_whole_{view.name}" AS {view.sql}')
            merged += f" UNION ALL SELECT {names}, '', 0 FROM \"_whole_{view.name}\" WHERE {whole}"
        sql = f"SELECT {names} FROM ({merged}) ORDER BY {order + ', ' if order else ''}_group, _row"
    try:
        run.con.execute(f'CREATE OR REPLACE VIEW "{view.name}" AS {sql}')
    except Exception as e:  # noqa: BLE001 - an ORDER BY over the view's inner names cannot be applied again
        raise QueryError(f"queries/{view.path.name}: its ORDER BY is not over its columns ({e})") from None


def _run_rows(view: ViewDef) -> str | None:
    """The filter of the rows `view` holds for the run whole, where its `Rank` column documents
    them (data_quality: "NULL for the run as a whole")."""
    rank = next((c for c in view.columns if c.name == "Rank"), None)
    return '"Rank" IS NULL' if rank is not None and "NULL" in rank.description else None


def _order_by(sql: str) -> str | None:
    """The terms of the ORDER BY at the top level of `sql` (outside parentheses, literals and
    comments), or None where it has none."""
    text = LITERALS.sub(lambda m: " " * len(m.group()), sql)
    depth, found = 0, None
    for m in re.finditer(r"[()]|\bORDER\s+BY\b", text, re.IGNORECASE):
        token = m.group()
        if token == "(":
            depth += 1
        elif token == ")":
            depth -= 1
        elif depth == 0:
            found = m.end()
    return sql[found:].strip() if found is not None else None


def _rank_first(order: str) -> bool:
    first = order.split(",", 1)[0].split()[0].split(".")[-1].strip('"')
    return first.lower() == "rank"
