-- Finalisation of an import, first part (queries/store/finalize.sql has the whole algorithm): the
-- staged slices on the run's rank and clock (`_s`), the steps (`_steps`) and the host records
-- (`_host_input`), which prof_engine.store.host_pass sorts and passes over into `_host` before
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

-- The host records but steps, each on its lane (one thread of one rank: a small integer, so that
-- the pass sorts on integers only), with what the pass and the statements after it read: `nests`
-- for the records it nests (host ops, API calls and user ranges whose depth the source did not
-- state); `stated_*` as the source gave them; the External id of host ops and the correlation id
-- of API calls, by which the device pass finds launchers.
CREATE OR REPLACE TEMP VIEW _host_input AS
WITH r AS (
    SELECT * FROM _s WHERE device = 'host' AND kind <> 'step'
), lanes AS (
    SELECT rank, pid, tid, row_number() OVER () AS lane FROM (SELECT DISTINCT rank, pid, tid FROM r)
)
SELECT r._part, r._row, r.id, r.rank, l.lane, r.ts, r.dur,
       (r.kind IN ('host_op', 'api') OR (r.kind = 'user_range' AND r.depth IS NULL))::UTINYINT AS nests,
       r.kind = 'host_op' AS is_host_op, r.kind = 'comm' AS is_comm,
       r.kind = 'user_range' AND r.depth IS NULL AS is_nested_range,
       r.step AS stated_step, r.depth AS stated_depth, r.parent_id AS stated_parent_id,
       CASE WHEN r.kind = 'host_op' THEN r.external_id END AS op_external_id,
       CASE WHEN r.kind = 'api' THEN r.correlation END AS api_correlation
FROM r JOIN lanes l ON r.rank = l.rank AND r.pid IS NOT DISTINCT FROM l.pid AND r.tid IS NOT DISTINCT FROM l.tid;
