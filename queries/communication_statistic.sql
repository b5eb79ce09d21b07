-- view: communication_statistic
-- answers: which kinds of communication op take the time — per rank, device and op type: count
--   and time of the collectives and point-to-point ops.
-- matches: msprof communication_statistic_*.csv (`Device_id` is Rank and Device here).
-- requires: _comm, _durations, _units
-- scope: rank
-- column `Rank` INTEGER: global rank
-- column `Device` VARCHAR: device, or `host` for a rank without device records (gloo/NCCL host ranges)
-- column `OP Type` VARCHAR: op type (Ascend OP Type such as hcom_allReduce_, or the NCCL collective)
-- column `Count` BIGINT: number of ops
-- column `Total Time(us)` DOUBLE: summed duration, µs
-- column `Min Time(us)` DOUBLE: shortest, µs
-- column `Avg Time(us)` DOUBLE: mean, µs
-- column `Max Time(us)` DOUBLE: longest, µs
-- column `Ratio(%)` DOUBLE: share of the device's communication time
WITH records AS (SELECT rank, device, op_type AS name, dur FROM _comm_ops)
SELECT rank AS "Rank", device AS "Device", name AS "OP Type", n AS "Count", us(total) AS "Total Time(us)",
       us(lo) AS "Min Time(us)", us(mean) AS "Avg Time(us)", us(hi) AS "Max Time(us)", round(share, 3) AS "Ratio(%)"
FROM duration_stats(records)
ORDER BY "Rank", "Device", total DESC, "OP Type"
