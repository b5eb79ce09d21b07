-- view: _tasks
-- answers: every device task (kernel, communication, memcpy, memset) with its op type (the
--   source's own, else the framework op that launched it), in ns; the shared base of op_summary, op_statistic and task_time.
-- requires: slices, run_ranks, _classify
-- The tasks with their op and task types, without the stream wait: a filter on kind (op_statistic
-- counts kernels only) reaches the scan through this view, not through the wait's window.
-- A device record holds its launcher's name, shapes and types (`launch_name`, filled in at import)
-- in runs of schema 1.2 on; `run_launch_names()` (a constant from the manifest) is false for older
-- runs, which join the launcher instead. Where it is true the join's side is empty, which DuckDB
-- folds away: 10 M device records are not joined to the host ops.
CREATE MACRO IF NOT EXISTS run_launch_names() AS false;
CREATE OR REPLACE VIEW _task_ops AS
SELECT t.id, t.rank, t.device, t.step, t.kind, t.name, t.ts, t.dur, t.stream, t.correlation,
       coalesce(t.op_type, t.launch_name, l.name, t.name) AS op_type,
       coalesce(t.task_type, task_type(t.kind)) AS task_type,
       coalesce(t.input_shapes, l.input_shapes) AS input_shapes,
       coalesce(t.input_types, l.input_types) AS input_types, t.wait AS stored_wait,
       t.launch_api AS stored_launch_api, t.launch_api_ts AS stored_launch_ts, t.launch_api_dur AS stored_launch_dur
FROM slices t
LEFT JOIN (SELECT id, name, input_shapes, input_types FROM slices WHERE NOT run_launch_names()) l ON l.id = t.launch_id
WHERE is_device_task(t.device, t.kind);

-- The stream wait: stored with each task where the run holds it (`run_waits_stored()`, a constant
-- from the manifest); else computed on the tasks' narrow timing columns and joined back by id (ids
-- are unique: a window sorts every column it carries, and the names and shapes are most of a
-- task's bytes). Where it is stored the computing side is empty, and DuckDB folds it away.
CREATE MACRO IF NOT EXISTS run_waits_stored() AS false;
CREATE OR REPLACE VIEW _tasks AS
WITH waits AS (
    SELECT id, stream_wait(rank, device, stream, ts, dur, id) AS wait
    FROM slices WHERE is_device_task(device, kind) AND NOT run_waits_stored()
)
SELECT t.* EXCLUDE (stored_wait), CASE WHEN run_waits_stored() THEN t.stored_wait ELSE w.wait END AS wait
FROM _task_ops t LEFT JOIN waits w ON w.id = t.id;

-- Ranks that recorded no device task: their reports fall back to host ops. (The run's ranks come
-- from its manifest, not from a scan of every host record; a rank without host records adds none.)
-- `run_host_only_ranks()`, a constant from the manifest, is false where every rank has device
-- tasks somewhere in the run: then this is empty without a scan, and so are the host-op branches
-- that read it (overlap's activity would otherwise hash every host op of the run).
CREATE MACRO IF NOT EXISTS run_host_only_ranks() AS true;
CREATE OR REPLACE VIEW _host_only_ranks AS
SELECT rank FROM run_ranks WHERE run_host_only_ranks()
EXCEPT SELECT DISTINCT rank FROM slices WHERE is_device_task(device, kind);
