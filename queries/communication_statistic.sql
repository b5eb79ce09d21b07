-- view: communication_statistic
-- answers: which kinds of communication op take the time — per rank, device and op type: count
--   and time of the collectives and point-to-point ops.
-- matches: msprof communication_statistic_*.csv (`Device_id` is Rank and Device here).
-- requires: _comm, _units
-- column `Rank` INTEGER: global rank
-- column `Device` VARCHAR: device, or `host` for a rank without device records (gloo/NCCL host ranges)
-- column `OP Type` VARCHAR: op type (Ascend OP Type such as hcom_allReduce_, or the NCCL collective)
-- column `Count` BIGINT: number of ops
-- column `Total Time(us)` DOUBLE: summed duration, µs
-- column `Min Time(us)` DOUBLE: shortest, µs
-- column `Avg Time(us)` DOUBLE: mean, µs
-- column `Max Time(us)` DOUBLE: longest, µs
-- column `Ratio(%)` DOUBLE: share of the device's communication time
SELECT rank AS "Rank", device AS "Device", op_type AS "OP Type", count(*) AS "Count", us(sum(dur)) AS "Total Time(us)",
       us(min(dur)) AS "Min Time(us)", us(avg(dur)) AS "Avg Time(us)", us(max(dur)) AS "Max Time(us)",
       round(100.0 * sum(dur) / nullif(sum(sum(dur)) OVER (PARTITION BY rank, device), 0), 3) AS "Ratio(%)"
FROM _comm_ops GROUP BY rank, device, op_type
ORDER BY "Rank", "Device", sum(dur) DESC, "OP Type"
