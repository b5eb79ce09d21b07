-- view: slice_statistic
-- answers: where a trace's time goes by slice name, for any Chrome trace whatever its producer —
--   per rank, device, process, thread (or async track) and name: how many slices, their summed
--   wall time and self time, mean and longest.
-- matches: chrome://tracing's 'selection statistics' of a selection of slices (Name, Wall
--   Duration, Self time, Average Wall Duration, Occurrences) and Perfetto's slice summary of an
--   area selection, per thread: every slice of a track nests in the slices around it, whatever
--   its kind (so a Kineto op's self time here also leaves out the Python frames nested in it,
--   unlike op_statistic's). Async slices (b/e, S/F) have tracks of their
--   own (thread `async:<cat>:<id>`, see prof_engine/importers/pairing.py), so they nest only in
--   their own operation. A B slice never ended is here, closed at its thread's last event.
-- Self time: a slice's duration less the part of it that its direct children cover. Algorithm:
--   +1 at each start and -1 at each end of a track's slices, in order of time, at equal times an
--   end before a start (touching is not nesting) but a zero-length slice's end after the starts
--   at its time, starts longer first; a slice's depth is the running sum before its start and its
--   parent the latest slice before it one level up (an ASOF join): the import's nesting rule of
--   host records (queries/store/finalize.sql, step 2), here over every kind.
-- requires: slices, _units
-- scope: rank
-- column `Rank` INTEGER: global rank
-- column `Device` VARCHAR: `host`, or the device the slices ran on
-- column `Process` VARCHAR: the source's process id (pid), '' where it has none
-- column `Thread` VARCHAR: the source's thread id (tid), or an async track `async:<cat>:<id>`, '' where it has none
-- column `Name` VARCHAR: slice name
-- column `Occurrences` BIGINT: number of slices
-- column `Wall Duration(us)` DOUBLE: summed duration, µs
-- column `Self Time(us)` DOUBLE: summed self time (duration less that of the direct children on the same track), µs
-- column `Average Wall Duration(us)` DOUBLE: mean duration, µs
-- column `Max Wall Duration(us)` DOUBLE: longest, µs
WITH s AS (
    SELECT id, rank, device, coalesce(pid, '') AS pid, coalesce(tid, '') AS tid, name, ts, dur FROM slices
), edges AS (  -- order at equal times: 0 an end, 1 a start (longer first), 2 a zero-length slice's end
    SELECT rank, device, pid, tid, id, ts AS t, 1 AS o, -dur AS len, 1 AS delta FROM s
    UNION ALL
    SELECT rank, device, pid, tid, id, ts + dur, CASE WHEN dur = 0 THEN 2 ELSE 0 END, 0, -1 FROM s
), walked AS (
    SELECT id, rank, device, pid, tid, delta,
           row_number() OVER w AS pos,
           coalesce(sum(delta) OVER (w ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING), 0) AS depth
    FROM edges WINDOW w AS (PARTITION BY rank, device, pid, tid ORDER BY t, o, len, id)
), starts AS (
    SELECT w.*, s.ts, s.dur FROM walked w JOIN s USING (id, rank) WHERE w.delta = 1
), covered AS (  -- per parent: the part of it its direct children cover (a child never outlives it when nested)
    SELECT p.id, sum(greatest(least(c.ts + c.dur, p.ts + p.dur) - c.ts, 0)) AS child_dur
    FROM starts c ASOF JOIN starts p
      ON c.rank = p.rank AND c.device = p.device AND c.pid = p.pid AND c.tid = p.tid
     AND c.depth - 1 = p.depth AND c.pos > p.pos
    GROUP BY p.id
)
SELECT s.rank AS "Rank", s.device AS "Device", s.pid AS "Process", s.tid AS "Thread", s.name AS "Name",
       count(*) AS "Occurrences", us(sum(s.dur)) AS "Wall Duration(us)",
       us(sum(s.dur - coalesce(c.child_dur, 0))) AS "Self Time(us)", us(avg(s.dur)) AS "Average Wall Duration(us)",
       us(max(s.dur)) AS "Max Wall Duration(us)"
FROM s LEFT JOIN covered c USING (id)
GROUP BY ALL
ORDER BY "Rank", "Device", "Process", "Thread", sum(s.dur) DESC, "Name"
