-- view: range_statistic
-- answers: how long the program's own marked ranges took — per rank, device and range name (user
--   annotations, record_function, NVTX/mstx ranges): instances and their total, mean, median,
--   shortest, longest and spread.
-- matches: nsys stats `nvtx_sum`; msprof's msproftx summary (`msprof_tx`).
-- requires: slices, _units
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
SELECT rank AS "Rank", device AS "Device",
       round(100.0 * sum(dur) / nullif(sum(sum(dur)) OVER (PARTITION BY rank, device), 0), 3) AS "Time(%)",
       us(sum(dur)) AS "Total Time(us)", count(*) AS "Instances", us(avg(dur)) AS "Avg(us)",
       us(median(dur)) AS "Med(us)", us(min(dur)) AS "Min(us)", us(max(dur)) AS "Max(us)",
       us(coalesce(stddev_samp(dur), 0)) AS "StdDev(us)", name AS "Range"
FROM slices WHERE kind = 'user_range'
GROUP BY rank, device, name
ORDER BY "Rank", "Device", sum(dur) DESC, "Range"
