-- view: _task_launches
-- answers: each device task with the runtime call that launched it (NULL where the trace has none),
--   in ns; kernel_launch lists them, idle_time and queue_length time the host's launches with them.
-- requires: _tasks, slices
-- The call is the latest-starting one with the task's correlation id (CANN's layers could share
-- one id: the innermost), whenever it started (Ascend tasks may start a few µs before their
-- Node@launch call by the host clock). An ASOF join picks it without grouping the calls.
CREATE OR REPLACE VIEW _task_launches AS
SELECT t.* EXCLUDE (any_time), c.name AS launch_api, c.ts AS launch_ts, c.dur AS launch_dur
FROM (SELECT *, 9223372036854775807 AS any_time FROM _tasks) t
ASOF LEFT JOIN (SELECT rank, correlation, ts, dur, name FROM slices WHERE kind = 'api' AND correlation IS NOT NULL) c
  ON c.rank = t.rank AND c.correlation = t.correlation AND c.ts <= t.any_time;
