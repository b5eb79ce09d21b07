-- view: range_statistic
-- answers: how long the program's own marked ranges took — per rank, device and range name (user
--   annotations, record_function, NVTX/mstx ranges): instances and their total, mean, median,
--   shortest, longest and spread.
-- matches: nsys stats `nvtx_sum`; msprof's msproftx summary (`msprof_tx`).
-- requires: slices, _durations, _units
-- scope: rank
-- column `Rank` INTEGER: global rank
-- column `Device` VARCHAR: `host`, or the device a device-side range (Kineto's gpu_user_annotation) ran on
-- column `Time(%)` DOUBLE: share of the summed time of the rank's ranges on that device
-- column `Total Time(us)` DOUBLE: summed duration, µs
-- column `Instances` BIGINT: number of ranges of this name
-- column `Avg(us)` DOUBLE: mean duration, µs
-- column `Med(us)` DOUBLE: median duration, µs
-- column `Min(us)` DOUBLE: shortest, µs
-- column `Max(us)` DOUBLE: longest, µs
-- column `StdDev(us)` DOUBLE: sample standard deviation of the durations (0 for one instance), µs
-- column `Range` VARCHAR: range name
WITH records AS (SELECT rank, device, name, dur FROM slices WHERE kind = 'user_range')
SELECT rank AS "Rank", device AS "Device", round(share, 3) AS "Time(%)", us(total) AS "Total Time(us)",
       n AS "Instances", us(mean) AS "Avg(us)", us(med) AS "Med(us)", us(lo) AS "Min(us)", us(hi) AS "Max(us)",
       us(sd) AS "StdDev(us)", name AS "Range"
FROM duration_stats(records)
ORDER BY "Rank", "Device", total DESC, "Range"
