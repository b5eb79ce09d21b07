-- view: kernel_launch
-- answers: how long each device task took to launch — the runtime call that launched it (the same
--   correlation id), how long that call ran, and the launch delay from its end to the task's start:
--   tasks shorter than their launch, slow launch calls, tasks that waited long to start.
-- matches: HTA get_cuda_kernel_launch_stats (cpu_duration, gpu_duration, launch_delay: equal on its
--   hta_sampled fixture's 602 kernels of rank 0, but HTA clips a negative delay to 0); on Ascend
--   the launch calls are CANN's (Node@launch, AscendCL@...).
-- requires: _task_launches, _units
-- scope: rank
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
-- One call per task (see _task_launches); a task with no call in the trace is left out.
SELECT rank AS "Rank", device AS "Device", step AS "Step", name AS "Task Name", task_type AS "Task Type",
       op_type AS "OP Type", launch_api AS "Launch API", correlation AS "Correlation",
       us_ts(launch_ts) AS "Launch Start(us)", us(launch_dur) AS "Launch Duration(us)",
       us_ts(ts) AS "Task Start(us)", us(dur) AS "Task Duration(us)", us(ts - (launch_ts + launch_dur)) AS "Launch Delay(us)"
FROM _task_launches WHERE launch_ts IS NOT NULL
