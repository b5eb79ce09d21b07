-- view: l2_cache
-- answers: how well each compute task used the L2 cache — per Ascend compute task that the
--   profiler measured (l2_cache collection on), its L2 hit rate and victim rate (the share of
--   accesses that evicted a line).
-- matches: torch_npu l2_cache.csv, row for row (`N/A` as NULL).
-- requires: slices, _classify
-- scope: rank
-- column `Rank` INTEGER: global rank
-- column `Device` VARCHAR: device
-- column `Step` BIGINT: training step
-- column `Stream Id` BIGINT: stream
-- column `Task Id` BIGINT: task id
-- column `Hit Rate` DOUBLE: L2 hit rate (NULL where the hardware gives none)
-- column `Victim Rate` DOUBLE: L2 victim rate
-- column `Op Name` VARCHAR: the task's op name
-- Read from the task's args (the import puts l2_cache.csv's rates there), only in runs whose args
-- may hold CANN keys (`run_cann_args`).
SELECT rank AS "Rank", device AS "Device", step AS "Step", stream AS "Stream Id",
       (args ->> 'Task Id')::BIGINT AS "Task Id", (args ->> 'L2 Hit Rate')::DOUBLE AS "Hit Rate",
       (args ->> 'L2 Victim Rate')::DOUBLE AS "Victim Rate", name AS "Op Name"
FROM slices
WHERE run_cann_args() AND device <> 'host' AND kind IN ('kernel', 'comm') AND contains(args, '"L2 Victim Rate"')
ORDER BY "Rank", "Device", ts, "Stream Id", "Task Id"
