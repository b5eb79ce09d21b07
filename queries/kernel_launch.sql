-- view: kernel_launch
-- answers: how long each device task took to launch — the runtime call that launched it (the same
--   correlation id), how long that call ran, and the launch delay from its end to the task's start:
--   tasks shorter than their launch, slow launch calls, tasks that waited long to start.
-- matches: HTA get_cuda_kernel_launch_stats (cpu_duration, gpu_duration, launch_delay: equal on its
--   hta_sampled fixture's 602 kernels of rank 0, but HTA clips a negative delay to 0); on Ascend
--   the launch calls are CANN's (Node@launch, AscendCL@...).
-- requires: _tasks, slices, _units
-- column `Rank` INTEGER: global rank
-- column `Device` VARCHAR: device
-- column `Step` BIGINT: training step (NULL outside every step)
-- column `Task Name` VARCHAR: kernel or task name
-- column `Task Type` VARCHAR: core or task type (KERNEL, COMMUNICATION, MEMCPY, MEMSET, AI_CORE, ...)
-- column `OP Type` VARCHAR: the op the task belongs to (as op_summary)
-- column `Launch API` VARCHAR: the runtime call that launched it (the latest one with its correlation id)
-- column `Correlation` BIGINT: correlation id linking the call and the task
-- column `Launch Start(us)` DECIMAL(26,3): the call's start, µs since the Unix epoch
-- column `Launch Duration(us)` DOUBLE: the call's duration, µs
-- column `Task Start(us)` DECIMAL(26,3): the task's start, µs since the Unix epoch
-- column `Task Duration(us)` DOUBLE: the task's duration, µs
-- column `Launch Delay(us)` DOUBLE: task start − end of the call, µs (negative: the task started before the call returned)
-- One call per task: the latest-starting call with its correlation id (CANN's layers could share
-- one id: the innermost), whenever it started (Ascend tasks may start a few µs before their
-- Node@launch call by the host clock). An ASOF join picks it without grouping the calls; a task
-- with no call in the trace is left out.
SELECT t.rank AS "Rank", t.device AS "Device", t.step AS "Step", t.name AS "Task Name", t.task_type AS "Task Type",
       t.op_type AS "OP Type", c.name AS "Launch API", t.correlation AS "Correlation",
       us_ts(c.ts) AS "Launch Start(us)", us(c.dur) AS "Launch Duration(us)",
       us_ts(t.ts) AS "Task Start(us)", us(t.dur) AS "Task Duration(us)", us(t.ts - (c.ts + c.dur)) AS "Launch Delay(us)"
FROM (SELECT *, 9223372036854775807 AS any_time FROM _task_ops) t
ASOF JOIN (SELECT rank, correlation, ts, dur, name FROM slices WHERE kind = 'api' AND correlation IS NOT NULL) c
  ON c.rank = t.rank AND c.correlation = t.correlation AND c.ts <= t.any_time
