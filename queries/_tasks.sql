-- view: _tasks
-- answers: every device task (kernel, communication, memcpy, memset) with its op type (the
--   source's own, else the framework op that launched it), in ns; the shared base of op_summary, op_statistic and task_time.
-- requires: slices, run_ranks, _classify
-- scope: rank
-- Each device task as finalisation stored it: its op type (the source's, else its launcher's name,
-- `launch_name`), its launcher's shapes and types where the source gave none, its launching API
-- call (`launch_api*`) and its stream wait (`wait`: since the previous task on its stream ended).
-- `_task_ops`: the same without the launch and the wait, for the views that read neither.
CREATE OR REPLACE VIEW _tasks AS
SELECT id, rank, device, step, kind, name, ts, dur, stream, correlation,
       coalesce(op_type, launch_name, name) AS op_type, coalesce(task_type, task_type(kind)) AS task_type,
       input_shapes, input_types, launch_api, launch_api_ts, launch_api_dur, wait
FROM slices WHERE is_device_task(device, kind);
CREATE OR REPLACE VIEW _task_ops AS
SELECT * EXCLUDE (launch_api, launch_api_ts, launch_api_dur, wait) FROM _tasks;

-- Ranks that recorded no device task: their reports fall back to host ops. (The run's ranks come
-- from its manifest, not from a scan of every host record; a rank without host records adds none.)
-- `run_host_only_ranks()`, a constant from the manifest, is false where every rank has device
-- tasks somewhere in the run: then this is empty without a scan, and so are the host-op branches
-- that read it (overlap's activity would otherwise hash every host op of the run).
CREATE MACRO IF NOT EXISTS run_host_only_ranks() AS true;
CREATE OR REPLACE VIEW _host_only_ranks AS
SELECT rank FROM run_ranks WHERE run_host_only_ranks()
EXCEPT SELECT DISTINCT rank FROM slices WHERE is_device_task(device, kind);
