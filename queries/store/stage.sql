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

-- The staged step records (a few hundred), in one scan of the staged slices: the steps, the step
-- breakdown's step starts, their computed columns and the manifest read them here (at 329 MB of
-- JSON, each scan of the staged slices for them took ~0.07 s).
CREATE OR REPLACE TEMP TABLE _step_records AS SELECT * FROM _s WHERE kind = 'step';

-- The host's step records define a rank's steps; a GPU trace also has each step as a device range
-- (Kineto's gpu_user_annotation ProfilerStep#N), shorter than the host's, which must not cut the
-- host's span short. A rank with no host step records takes its steps from its devices' ones.
CREATE OR REPLACE TEMP TABLE _steps AS
WITH st AS (SELECT rank, device, step, ts, dur FROM _step_records),
host_ranks AS (SELECT DISTINCT rank FROM st WHERE device = 'host')
SELECT rank, step, min(ts) AS start_ns, max(ts + dur) AS end_ns FROM st
WHERE device = 'host' OR rank NOT IN (SELECT rank FROM host_ranks)
GROUP BY rank, step;

-- The host records but steps, with what the host pass and the statements after it read: `nests`
-- for the records it nests (host ops, API calls and user ranges whose depth the source did not
-- state); `stated_*` as the source gave them; the External id of host ops and the correlation id
-- of API calls, by which the device pass finds launchers. (rank, pid, tid) is a record's thread;
-- pid and tid as ENUMs of the host's values, so that the host pass's sort by thread carries and
-- compares a small integer for each instead of text (at 329 MB of JSON the sort spilled 7 MB
-- instead of 18 at its 80 MB, and took ~0.27 s instead of ~0.4).
-- The host's threads are read in one scan of the staged slices, for both types.
CREATE OR REPLACE TEMP TABLE _host_threads AS SELECT DISTINCT pid, tid FROM _s WHERE device = 'host';
CREATE OR REPLACE TYPE _host_pid AS ENUM (SELECT DISTINCT pid FROM _host_threads WHERE pid IS NOT NULL);
CREATE OR REPLACE TYPE _host_tid AS ENUM (SELECT DISTINCT tid FROM _host_threads WHERE tid IS NOT NULL);
DROP TABLE _host_threads;

CREATE OR REPLACE TEMP VIEW _host_input AS
SELECT _part, _row, id, rank, pid::_host_pid AS pid, tid::_host_tid AS tid, ts, dur,
       (kind IN ('host_op', 'api') OR (kind = 'user_range' AND depth IS NULL))::UTINYINT AS nests,
       kind = 'host_op' AS is_host_op, kind = 'comm' AS is_comm, kind = 'user_range' AND depth IS NULL AS is_nested_range,
       step AS stated_step, depth AS stated_depth, parent_id AS stated_parent_id,
       CASE WHEN kind = 'host_op' THEN external_id END AS op_external_id,
       CASE WHEN kind = 'api' THEN correlation END AS api_correlation
FROM _s WHERE device = 'host' AND kind <> 'step';
