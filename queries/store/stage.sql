-- Finalisation of an import, first part (queries/store/finalize.sql has the whole algorithm): the
-- staged slices on the run's rank and clock (`_s`), the steps (`_steps`) and the records to nest
-- (`_nest_input`), which prof_engine.store.nesting sorts and nests into `_nesting` before
-- finalize.sql runs.

-- The staged slices' narrow columns, on the run's rank and clock. Records of a file that `files`
-- does not list are left out of the run.
CREATE OR REPLACE TEMP VIEW _s AS
SELECT s._part, s._row, s.id, f.rank, s.device, s.kind, s.ts + f.offset_ns AS ts, s.dur, s.pid, s.tid, s.stream,
       s.correlation, s.external_id, s.step, s.depth, s.parent_id
FROM staging_slices s JOIN files f ON s.rank = f.file;

-- The host's step records define a rank's steps; a GPU trace also has each step as a device range
-- (Kineto's gpu_user_annotation ProfilerStep#N), shorter than the host's, which must not cut the
-- host's span short. A rank with no host step records takes its steps from its devices' ones.
CREATE OR REPLACE TEMP TABLE _steps AS
WITH st AS (SELECT rank, device, step, ts, dur FROM _s WHERE kind = 'step'),
host_ranks AS (SELECT DISTINCT rank FROM st WHERE device = 'host')
SELECT rank, step, min(ts) AS start_ns, max(ts + dur) AS end_ns FROM st
WHERE device = 'host' OR rank NOT IN (SELECT rank FROM host_ranks)
GROUP BY rank, step;

-- The records to nest, each on its lane: one thread of one rank (a small integer, so that the
-- sweep sorts on integers only).
CREATE OR REPLACE TEMP TABLE _nest_input AS
WITH r AS (
    SELECT id, rank, pid, tid, ts, dur FROM _s
    WHERE device = 'host' AND (kind IN ('host_op', 'api') OR (kind = 'user_range' AND depth IS NULL))
), lanes AS (
    SELECT rank, pid, tid, row_number() OVER () AS lane FROM (SELECT DISTINCT rank, pid, tid FROM r)
)
SELECT r.id, l.lane, r.ts, r.dur
FROM r JOIN lanes l ON r.rank = l.rank AND r.pid IS NOT DISTINCT FROM l.pid AND r.tid IS NOT DISTINCT FROM l.tid;

