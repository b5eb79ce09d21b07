-- view: op_memory
-- answers: which ops allocate and free memory — per rank, device and op: the allocations and frees
--   each op made itself (the innermost op, record_function range or step running on the allocating
--   thread at the time; Ascend's operator_memory names it), their size and the net, as
--   torch.profiler's self memory columns.
-- matches: torch.profiler key_averages' Self CPU Mem / Self CUDA Mem (profile_memory=True), with
--   `[memory]` for what was allocated or freed outside every op, as torch lists it; torch_npu
--   operator_memory.csv summed per op.
-- requires: memory_events, slices
-- scope: rank
-- column `Rank` INTEGER: global rank
-- column `Device` VARCHAR: where the memory is (`host` for CPU memory)
-- column `Name` VARCHAR: op (or range, or step) that allocated or freed, `[memory]` outside every one
-- column `Allocations` BIGINT: number of allocations
-- column `Allocated(MB)` DOUBLE: bytes allocated, MiB
-- column `Frees` BIGINT: number of frees
-- column `Freed(MB)` DOUBLE: bytes freed, MiB
-- column `Self Memory(MB)` DOUBLE: allocated less freed, MiB (torch's Self CPU Mem / Self CUDA Mem)
-- The innermost op at an event's time: ops, record_function ranges and steps of the threads that
-- allocated nest as one tree (as torch's profiler sees them). A sweep over them (+1 at each
-- start, −1 at each end; ends first at equal times, longer first at equal starts) gives each its
-- depth and counts those open at each event; the op is the latest one started before the event at
-- that depth (an ASOF join).
WITH events AS (
    SELECT rank, device, pid, tid, ts, bytes, op_name, row_number() OVER () AS n
    FROM memory_events WHERE bytes IS NOT NULL AND bytes <> 0
), threads AS (
    SELECT DISTINCT rank, pid, tid FROM events WHERE op_name IS NULL AND tid IS NOT NULL
), scopes AS (  -- those of the allocating threads only: none are read in a run without such events
    SELECT o.rank, o.pid, o.tid, o.ts, o.dur, o.id, o.name FROM slices o
    SEMI JOIN threads t ON t.rank = o.rank AND t.pid IS NOT DISTINCT FROM o.pid AND t.tid = o.tid
    WHERE o.device = 'host' AND o.kind IN ('host_op', 'user_range', 'step')
), marks AS (
    SELECT rank, pid, tid, ts AS t, 1 AS cls, -dur AS tie, 1 AS d, id, NULL::BIGINT AS n FROM scopes
    UNION ALL SELECT rank, pid, tid, ts + dur, 0, 0, -1, NULL, NULL FROM scopes
    UNION ALL SELECT rank, pid, tid, ts, 2, 0, 0, NULL, n FROM events WHERE op_name IS NULL AND tid IS NOT NULL
), swept AS (
    SELECT id, n, sum(d) OVER (PARTITION BY rank, pid, tid ORDER BY t, cls, tie ROWS UNBOUNDED PRECEDING) AS open FROM marks
), nested AS (
    SELECT s.rank, s.pid, s.tid, s.ts, s.name, w.open - 1 AS depth FROM scopes s JOIN swept w ON w.id = s.id
), attributed AS (
    SELECT e.rank, e.device, coalesce(e.op_name, o.name, '[memory]') AS name, e.bytes
    FROM events e LEFT JOIN (SELECT n, open FROM swept WHERE n IS NOT NULL) c USING (n)
    ASOF LEFT JOIN nested o ON o.rank = e.rank AND o.pid IS NOT DISTINCT FROM e.pid AND o.tid = e.tid
                           AND o.depth = c.open - 1 AND o.ts <= e.ts
)
SELECT rank AS "Rank", device AS "Device", name AS "Name",
       count(*) FILTER (WHERE bytes > 0) AS "Allocations",
       round(coalesce(sum(bytes) FILTER (WHERE bytes > 0), 0) / 1048576, 6) AS "Allocated(MB)",
       count(*) FILTER (WHERE bytes < 0) AS "Frees",
       round(-coalesce(sum(bytes) FILTER (WHERE bytes < 0), 0) / 1048576, 6) AS "Freed(MB)",
       round(sum(bytes) / 1048576, 6) AS "Self Memory(MB)"
FROM attributed GROUP BY rank, device, name
ORDER BY "Rank", "Device", "Allocated(MB)" DESC, "Name"
