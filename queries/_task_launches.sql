-- view: _task_launches
-- answers: each device task with the runtime call that launched it (NULL where the trace has none),
--   and what the gap before it on its stream was (`gap_cause`), in ns; kernel_launch lists them,
--   idle_time sums the gaps, queue_length and advice time the host's launches with them.
-- requires: _tasks
-- scope: rank
-- The call is the latest-starting one with the task's correlation id (CANN's layers could share
-- one id: the innermost), whenever it started (Ascend tasks may start a few µs before their
-- Node@launch call by the host clock): finalisation stores it with each task (`launch_api`,
-- `launch_api_ts`, `launch_api_dur`, queries/store/finalize.sql step 6).
-- The gap is the task's stream wait (none: NULL). Its cause, as HTA's idle time breakdown has it:
-- `host wait` where the launch call started after the previous task had ended (the host was
-- late), `kernel wait` where the gap is shorter than 30 µs (launching back-to-back tasks),
-- `other` where the stream waited on something else (a task without a call cannot be a host wait).
CREATE OR REPLACE VIEW _task_launches AS
WITH launched AS (
    SELECT * EXCLUDE (launch_api, launch_api_ts, launch_api_dur), launch_api, launch_api_ts AS launch_ts,
           launch_api_dur AS launch_dur
    FROM _tasks
)
SELECT *, CASE WHEN wait > 0 THEN CASE WHEN launch_ts > ts - wait THEN 'host wait' WHEN wait < 30000 THEN 'kernel wait'
                                       ELSE 'other' END END AS gap_cause
FROM launched;
