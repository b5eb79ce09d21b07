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
-- column `Launch API` VARCHAR: the runtime call that launched it (the latest call with its correlation id)
-- column `Correlation` BIGINT: correlation id linking the call and the task
-- column `Launch Start(us)` DECIMAL(26,3): the call's start, µs since the Unix epoch
-- column `Launch Duration(us)` DOUBLE: the call's duration, µs
-- column `Task Start(us)` DECIMAL(26,3): the task's start, µs since the Unix epoch
-- column `Task Duration(us)` DOUBLE: the task's duration, µs
-- column `Launch Delay(us)` DOUBLE: task start − end of the call, µs (negative: the task started before the call returned)
-- Tasks with no launching call in the trace (no correlation id, or its call not recorded) are left out.
WITH launches AS (  -- one call per correlation id: where several share one (CANN's layers), the innermost
    SELECT rank, correlation, arg_max(name, ts) AS name, max(ts) AS ts, arg_max(dur, ts) AS dur
    FROM slices WHERE kind = 'api' AND correlation IS NOT NULL GROUP BY rank, correlation
)
SELECT t.rank AS "Rank", t.device AS "Device", t.step AS "Step", t.name AS "Task Name", t.task_type AS "Task Type",
       t.op_type AS "OP Type", l.name AS "Launch API", t.correlation AS "Correlation",
       us_ts(l.ts) AS "Launch Start(us)", us(l.dur) AS "Launch Duration(us)",
       us_ts(t.ts) AS "Task Start(us)", us(t.dur) AS "Task Duration(us)", us(t.ts - (l.ts + l.dur)) AS "Launch Delay(us)"
FROM _task_ops t JOIN launches l ON l.rank = t.rank AND l.correlation = t.correlation
ORDER BY "Rank", "Device", t.ts, t.id
