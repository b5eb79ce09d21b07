-- view: kernel_statistic
-- answers: which kernels take the device time — per rank, device and kernel name, its instances
--   and their total, mean, median, shortest, longest and spread. Every kernel the device ran,
--   compute and communication (NCCL/RCCL/HCCL collectives) alike, as nsys counts them; not
--   copies, sets or device-side ranges (memcpy_statistic, range_statistic). op_statistic groups
--   the compute kernels by the op that launched them instead.
-- matches: nsys stats `cuda_gpu_kern_sum` (times in µs here); torch_npu kernel_details.csv summed per name.
-- requires: slices, _durations, _units
-- scope: rank
-- column `Rank` INTEGER: global rank
-- column `Device` VARCHAR: device
-- column `Time(%)` DOUBLE: share of the device's kernel time (communication kernels included)
-- column `Total Time(us)` DOUBLE: summed duration, µs
-- column `Instances` BIGINT: number of kernels of this name
-- column `Avg(us)` DOUBLE: mean duration, µs
-- column `Med(us)` DOUBLE: median duration, µs
-- column `Min(us)` DOUBLE: shortest, µs
-- column `Max(us)` DOUBLE: longest, µs
-- column `StdDev(us)` DOUBLE: sample standard deviation of the durations (0 for one instance), µs
-- column `Name` VARCHAR: kernel name
WITH records AS (SELECT rank, device, name, dur FROM slices WHERE device <> 'host' AND kind IN ('kernel', 'comm'))
SELECT rank AS "Rank", device AS "Device", round(share, 3) AS "Time(%)", us(total) AS "Total Time(us)",
       n AS "Instances", us(mean) AS "Avg(us)", us(med) AS "Med(us)", us(lo) AS "Min(us)", us(hi) AS "Max(us)",
       us(sd) AS "StdDev(us)", name AS "Name"
FROM duration_stats(records)
ORDER BY "Rank", "Device", total DESC, "Name"
