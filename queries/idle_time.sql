-- view: idle_time
-- answers: why a device stream sits idle between its tasks — per rank, device, stream and step,
--   the gaps before each task, split by cause: `host wait` (the runtime call that launched the
--   task started after the previous task had ended: the host was late), `kernel wait` (a shorter
--   gap than 30 µs: the cost of launching back-to-back tasks) and `other` (the stream waited on
--   something else: an event, another stream, a synchronisation).
-- matches: HTA get_idle_time_breakdown (consecutive_kernel_delay 30 µs; its idle_time, count and
--   idle_time_ratio per stream); HTA rounds times to whole µs, these are exact.
-- requires: _task_launches, _units
-- scope: rank
-- column `Rank` INTEGER: global rank
-- column `Device` VARCHAR: device
-- column `Stream` BIGINT: stream (queue) the tasks ran on
-- column `Step` BIGINT: training step of the task that ends the gap (NULL outside every step)
-- column `Category` VARCHAR: host wait, kernel wait or other
-- column `Count` BIGINT: number of gaps
-- column `Idle Time(us)` DOUBLE: summed gaps, µs
-- column `Ratio(%)` DOUBLE: share of the stream's idle time in the step
-- column `Avg(us)` DOUBLE: mean gap, µs
-- column `Max(us)` DOUBLE: longest gap, µs
-- A gap is the task's stream wait (as op_summary's Wait Time): from the latest end of the stream's
-- earlier tasks to its start (none before a stream's first task, nor for a task that starts
-- before the previous one ended). Its cause is `_task_launches`' `gap_cause`.
SELECT rank AS "Rank", device AS "Device", stream AS "Stream", step AS "Step", gap_cause AS "Category",
       count(*) AS "Count", us(sum(wait)) AS "Idle Time(us)",
       round(100.0 * sum(wait) / sum(sum(wait)) OVER (PARTITION BY rank, device, stream, step), 2) AS "Ratio(%)",
       us(avg(wait)) AS "Avg(us)", us(max(wait)) AS "Max(us)"
FROM _task_launches WHERE gap_cause IS NOT NULL
GROUP BY rank, device, stream, step, gap_cause
ORDER BY "Rank", "Device", "Stream", "Step" NULLS FIRST, "Category"
