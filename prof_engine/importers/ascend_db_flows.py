"""Flows of an Ascend profiler database (`export_type=db`) → `flows`, the arrows trace_view.json
draws, from the records that share a connection id (framework records through `CONNECTION_IDS`,
whose `id` is PYTORCH_API's `connectionId`):

| category | start (`s`) | end (`f`) |
|---|---|---|
| HostToDevice | the CANN API call (CANN_API) of an id that device work holds | each of its device tasks: TASK kernels and copies, COMMUNICATION_OP |
| async_npu | the framework op (PYTORCH_API of level `op`) of such an id | the same tasks |
| async_task_queue | the earliest framework record of an id no device work holds, at level `queue` (enqueue) | the latest (dequeue) |
| fwdbwd | the same at level `op` (the forward op) | the latest (the backward op) |

The categories are inferred from where an id appears, because `connectionCats (connectionId,
cat)`, which names them, is written for some ranks only (rank 1 of the fixture has none). On rank
0, which has it, async_npu, async_task_queue and fwdbwd hold its ids; HostToDevice holds 210 where
it lists 191, as many as the text export's trace_view.json draws (19 CANN launches have no
framework op). An arrow is drawn only where it has both ends. The flow id is the connection id. A
flow's ends carry the pid and tid of the records they bind to (`ends`: the converter's lanes), so
the timeline export draws the arrow between those records.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import Any

from prof_engine._sql import literal

TASK_KINDS = ("kernel", "memcpy")  # the tasks that end arrows (with communication ops)

Ends = Callable[[str, tuple], tuple[str, str | None, str | None]]  # (source, row) → device, pid, tid


@dataclass(frozen=True)
class _Records:
    """Records of one table that hold connection ids, as SQL: `where` is a FROM clause ending in
    a WHERE condition; `place` the columns `ends` takes for that table."""

    source: str
    where: str
    id: str
    start: str
    place: str = ""

    def ids(self) -> str:
        return f"SELECT {self.id} {self.where}"

    def rows(self, condition: str) -> str:
        """SQL of (id, start, *place) of the records that also meet `condition`."""
        return f"SELECT {', '.join(filter(None, (self.id, self.start, self.place)))} {self.where} AND {condition}"


def convert_db_flows(db: Any, conv: Any, ends: Ends, task_kind: Callable[[str, bool], str]) -> None:
    """Add the flows of profiler database `db` (ascend_db._Db) to converter `conv`'s `flows`.
    `ends(source, row)` places a record of `source` (PYTORCH_API, CANN_API, TASK, COMMUNICATION_OP)
    from its `place` columns; `task_kind(task type, in the compute list)` is a TASK's kind."""
    levels = {level: [str(i) for i, name in conv.api_types.items() if name == level] for level in ("op", "queue")}
    framework = db.offers("CONNECTION_IDS", "id", "connectionId") and db.offers(
        "PYTORCH_API", "connectionId", "startNs", "type", "globalTid"
    )
    device_work = [
        f"SELECT connectionId FROM {t}" for t in ("TASK", "COMMUNICATION_OP") if db.offers(t, "connectionId")
    ]
    if framework:
        _paired(db, conv, ends, levels, " UNION ".join(device_work) or "SELECT NULL WHERE 0")
    finishes = _finishes(db, task_kind)
    if not finishes:
        return
    starts = []
    if db.offers("CANN_API", "connectionId", "startNs", "globalTid"):
        starts.append(
            (
                "HostToDevice",
                _Records("CANN_API", "FROM CANN_API a WHERE 1", "a.connectionId", "a.startNs", "a.globalTid"),
            )
        )
    if framework and levels["op"]:
        starts.append(
            (
                "async_npu",
                _Records(
                    "PYTORCH_API",
                    "FROM PYTORCH_API p JOIN CONNECTION_IDS ci ON ci.id = p.connectionId "
                    f"WHERE p.type IN ({', '.join(levels['op'])})",
                    "ci.connectionId",
                    "CAST(p.startNs AS INTEGER)",
                    "p.globalTid",
                ),
            )
        )
    finished = " UNION ".join(f.ids() for f in finishes)
    for category, start in starts:  # an arrow is drawn where it has both ends
        for cid, ts, *place in db.rows(start.rows(f"{start.id} IN ({finished})")):
            _add(conv, category, cid, "s", ts, ends(start.source, tuple(place)))
        for finish in finishes:
            for cid, ts, *place in db.rows(finish.rows(f"{finish.id} IN ({start.ids()})")):
                _add(conv, category, cid, "f", ts, ends(finish.source, tuple(place)))


def _finishes(db: Any, task_kind: Callable[[str, bool], str]) -> list[_Records]:
    """The device work that ends arrows: tasks whose kind is in TASK_KINDS (listed as compute, or of
    a task type of such a kind), and communication ops."""
    finishes = []
    if db.offers("TASK", "connectionId", "startNs", "globalTaskId"):
        t = partial(db.col, "t", "TASK")
        types = [
            v for (v,) in db.rows(f"SELECT DISTINCT s.value FROM TASK t JOIN STRING_IDS s ON s.id = {t('taskType')}")
        ]
        kept = ", ".join(literal(v) for v in types if task_kind(str(v), False) in TASK_KINDS)
        listed = (
            "EXISTS (SELECT 1 FROM COMPUTE_TASK_INFO k WHERE k.globalTaskId = t.globalTaskId)"
            if db.offers("COMPUTE_TASK_INFO", "globalTaskId")
            else "0"
        )
        finishes.append(
            _Records(
                "TASK",
                f"FROM TASK t LEFT JOIN STRING_IDS s ON s.id = {t('taskType')} "
                f"WHERE ({listed} OR s.value IN ({kept or 'NULL'}))",
                "t.connectionId",
                "t.startNs",
                f"{t('deviceId')}, {t('globalPid')}, {t('streamId')}",
            )
        )
    if db.offers("COMMUNICATION_OP", "connectionId", "startNs"):
        finishes.append(_Records("COMMUNICATION_OP", "FROM COMMUNICATION_OP o WHERE 1", "o.connectionId", "o.startNs"))
    return finishes


def _paired(db: Any, conv: Any, ends: Ends, levels: dict[str, list[str]], launched: str) -> None:
    """Flows between framework records of an id no device work holds: earliest → latest, named
    by the records' level (queue: enqueue → dequeue; op: forward → backward)."""
    category = {**dict.fromkeys(levels["queue"], "async_task_queue"), **dict.fromkeys(levels["op"], "fwdbwd")}
    if not category:
        return
    group: list[tuple] = []
    for row in db.rows(
        "SELECT ci.connectionId, CAST(p.startNs AS INTEGER) AS start, p.globalTid, p.type FROM PYTORCH_API p "
        f"JOIN CONNECTION_IDS ci ON ci.id = p.connectionId WHERE p.type IN ({', '.join(category)}) "
        f"AND ci.connectionId NOT IN ({launched}) ORDER BY ci.connectionId, start"
    ):
        if group and row[0] != group[0][0]:
            _pair(conv, ends, group, category)
            group = []
        group.append(row)
    _pair(conv, ends, group, category)


def _pair(conv: Any, ends: Ends, group: list[tuple], category: dict[str, str]) -> None:
    if len(group) >= 2:
        name = category[str(group[0][3])]
        for (cid, start, gtid, _), phase in ((group[0], "s"), (group[-1], "f")):
            _add(conv, name, cid, phase, start, ends("PYTORCH_API", (gtid,)))


def _add(conv: Any, cat: str, cid: Any, phase: str, ts: Any, where: tuple[str, str | None, str | None]) -> None:
    if ts is None or cid is None:
        return
    device, pid, tid = where
    conv.add_row(
        "flows",
        {
            "rank": conv.file_index,
            "device": device,
            "step": None,
            "category": cat,
            "flow_id": str(cid),
            "phase": phase,
            "ts": int(ts),
            "pid": pid,
            "tid": tid,
        },
    )
