-- view: kernel_statistic
-- answers: which kernels take the device time — per rank, device and kernel name, its instances
--   and their total, mean, median, shortest, longest and spread; op_statistic groups the same
--   kernels by the op that launched them instead.
-- matches: nsys stats `cuda_gpu_kern_sum` (times in µs here); torch_npu kernel_details.csv summed per name.
-- requires: slices, _units
-- column `Rank` INTEGER: global rank
-- column `Device` VARCHAR: device
-- column `Time(%)` DOUBLE: share of the device's kernel time
-- column `Total Time(us)` DOUBLE: summed duration, µs
-- column `Instances` BIGINT: number of kernels of this name
-- column `Avg(us)` DOUBLE: mean duration, µs
-- column `Med(us)` DOUBLE: median duration, µs
-- column `Min(us)` DOUBLE: shortest, µs
-- column `Max(us)` DOUBLE: longest, µs
-- column `StdDev(us)` DOUBLE: sample standard deviation of the durations (0 for one instance), µs
-- column `Name` VARCHAR: kernel name
SELECT rank AS "Rank", device AS "Device",
       round(100.0 * sum(dur) / nullif(sum(sum(dur)) OVER (PARTITION BY rank, device), 0), 3) AS "Time(%)",
       us(sum(dur)) AS "Total Time(us)", count(*) AS "Instances", us(avg(dur)) AS "Avg(us)",
       us(median(dur)) AS "Med(us)", us(min(dur)) AS "Min(us)", us(max(dur)) AS "Max(us)",
       us(coalesce(stddev_samp(dur), 0)) AS "StdDev(us)", name AS "Name"
FROM slices WHERE device <> 'host' AND kind = 'kernel'
GROUP BY rank, device, name
ORDER BY "Rank", "Device", sum(dur) DESC, "Name"
