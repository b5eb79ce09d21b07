-- view: task_time
-- answers: the device task scheduler's view — each task's stream, id, start, stop and duration.
-- matches: msprof task_time_*.csv (C++ exporter columns).
-- requires: _tasks, _units
-- scope: rank
-- column `Rank` INTEGER: global rank
-- column `Device` VARCHAR: device
-- column `Step` BIGINT: training step (NULL outside every step)
-- column `kernel_name` VARCHAR: task name
-- column `kernel_type` VARCHAR: KERNEL, COMMUNICATION, MEMCPY or MEMSET
-- column `stream_id` BIGINT: device stream
-- column `task_id` BIGINT: correlation id of the launch
-- column `task_time(us)` DOUBLE: duration, µs
-- column `task_start(us)` DECIMAL(26,3): start, µs since the Unix epoch
-- column `task_stop(us)` DECIMAL(26,3): end, µs since the Unix epoch
SELECT rank AS "Rank", device AS "Device", step AS "Step", name AS kernel_name, task_type AS kernel_type,
       stream AS stream_id, correlation AS task_id, us(dur) AS "task_time(us)",
       us_ts(ts) AS "task_start(us)", us_ts(ts + dur) AS "task_stop(us)"
FROM _task_ops
