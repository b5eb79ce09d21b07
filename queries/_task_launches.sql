-- view: _task_launches
-- answers: each device task with the runtime call that launched it (NULL where the trace has none),
--   and what the gap before it on its stream was (`gap_cause`), in ns; kernel_launch lists them,
--   idle_time sums the gaps, queue_length and advice time the host's launches with them.
-- requires: _tasks, slices
-- The call is the latest-starting one with the task's correlation id (CANN's layers could share
-- one id: the innermost), whenever it started (Ascend tasks may start a few µs before their
-- Node@launch call by the host clock). Runs of schema 1.6 on store it with each task
-- (`launch_api`, `launch_api_ts`, `launch_api_dur`: `run_launch_apis_stored()`, a constant from
-- the manifest; DuckDB folds the other branch away); for the others an ASOF join picks it without
-- grouping the calls (at 10 M tasks and 12 M calls: 5.4 s, most of kernel_launch's and advice's time).
-- The gap is the task's stream wait (none: NULL). Its cause, as HTA's idle time breakdown has it:
-- `host wait` where the launch call started after the previous task had ended (the host was
-- late), `kernel wait` where the gap is shorter than 30 µs (launching back-to-back tasks),
-- `other` where the stream waited on something else (a task without a call cannot be a host wait).
CREATE MACRO IF NOT EXISTS run_launch_apis_stored() AS false;
CREATE OR REPLACE VIEW _task_launches AS
WITH launched AS (
    SELECT * EXCLUDE (stored_launch_api, stored_launch_ts, stored_launch_dur), stored_launch_api AS launch_api,
           stored_launch_ts AS launch_ts, stored_launch_dur AS launch_dur
    FROM _tasks WHERE run_launch_apis_stored()
    UNION ALL
    SELECT t.* EXCLUDE (any_time, stored_launch_api, stored_launch_ts, stored_launch_dur), c.name, c.ts, c.dur
    FROM (SELECT *, 9223372036854775807 AS any_time FROM _tasks WHERE NOT run_launch_apis_stored()) t
    ASOF LEFT JOIN (SELECT rank, correlation, ts, dur, name FROM slices WHERE kind = 'api' AND correlation IS NOT NULL) c
      ON c.rank = t.rank AND c.correlation = t.correlation AND c.ts <= t.any_time
)
SELECT *, CASE WHEN wait > 0 THEN CASE WHEN launch_ts > ts - wait THEN 'host wait' WHEN wait < 30000 THEN 'kernel wait'
                                       ELSE 'other' END END AS gap_cause
FROM launched;
