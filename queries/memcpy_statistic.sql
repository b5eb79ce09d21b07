-- view: memcpy_statistic
-- answers: how much time and data the device's memory copies and sets took — per rank, device and
--   operation (the copy's direction and memory kinds as the source names it, such as `Memcpy
--   HtoD (Pageable -> Device)`): count, time, bytes and the bandwidth they reached.
-- matches: nsys stats `cuda_gpu_mem_time_sum` and `cuda_gpu_mem_size_sum` in one table.
-- requires: slices, _units
-- scope: rank
-- column `Rank` INTEGER: global rank
-- column `Device` VARCHAR: device
-- column `Operation` VARCHAR: copy or set, by the source's name for it
-- column `Kind` VARCHAR: memcpy or memset
-- column `Count` BIGINT: number of operations
-- column `Total Time(us)` DOUBLE: summed duration, µs
-- column `Avg(us)` DOUBLE: mean duration, µs
-- column `Min(us)` DOUBLE: shortest, µs
-- column `Max(us)` DOUBLE: longest, µs
-- column `Total Size(MB)` DOUBLE: summed bytes (10^6 B), where the source records them (Kineto's `bytes`; NULL otherwise)
-- column `Bandwidth(GB/s)` DOUBLE: bytes over the time of the operations that record them, GB/s
WITH ops AS (
    SELECT rank, device, name, kind, dur, try_cast(json_extract_string(args, '$.bytes') AS BIGINT) AS bytes
    FROM slices WHERE device <> 'host' AND kind IN ('memcpy', 'memset')
)
SELECT rank AS "Rank", device AS "Device", name AS "Operation", kind AS "Kind", count(*) AS "Count",
       us(sum(dur)) AS "Total Time(us)", us(avg(dur)) AS "Avg(us)", us(min(dur)) AS "Min(us)", us(max(dur)) AS "Max(us)",
       round(sum(bytes) / 1e6, 6) AS "Total Size(MB)",
       round(sum(bytes) / nullif(sum(dur) FILTER (WHERE bytes IS NOT NULL), 0), 3) AS "Bandwidth(GB/s)"
FROM ops GROUP BY rank, device, name, kind
ORDER BY "Rank", "Device", sum(dur) DESC, "Operation"
