-- view: _task_launches
-- answers: each device task with the runtime call that launched it (NULL where the trace has none),
--   and what the gap before it on its stream was (`gap_cause`), in ns; kernel_launch lists them,
--   idle_time sums the gaps, queue_length and advice time the host's launches with them.
-- requires: _tasks, slices
-- The call is the latest-starting one with the task's correlation id (CANN's layers could share
-- one id: the innermost), whenever it started (Ascend tasks may start a few µs before their
-- Node@launch call by the host clock). An ASOF join picks it without grouping the calls.
-- The gap is the task's stream wait (none: NULL). Its cause, as HTA's idle time breakdown has it:
-- `host wait` where the launch call started after the previous task had ended (the host was
-- late), `kernel wait` where the gap is shorter than 30 µs (launching back-to-back tasks),
-- `other` where the stream waited on something else (a task without a call cannot be a host wait).
CREATE OR REPLACE VIEW _task_launches AS
SELECT t.* EXCLUDE (any_time), c.name AS launch_api, c.ts AS launch_ts, c.dur AS launch_dur,
       CASE WHEN t.wait > 0 THEN CASE WHEN c.ts > t.ts - t.wait THEN 'host wait' WHEN t.wait < 30000 THEN 'kernel wait'
                                      ELSE 'other' END END AS gap_cause
FROM (SELECT *, 9223372036854775807 AS any_time FROM _tasks) t
ASOF LEFT JOIN (SELECT rank, correlation, ts, dur, name FROM slices WHERE kind = 'api' AND correlation IS NOT NULL) c
  ON c.rank = t.rank AND c.correlation = t.correlation AND c.ts <= t.any_time;
