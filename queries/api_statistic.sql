-- view: api_statistic
-- answers: which host API calls take the time — runtime/driver calls (cudaLaunchKernel, ...) per
--   rank; for a rank that recorded none (CPU-only traces), its framework ops.
-- matches: msprof api_statistic_*.csv; torch_npu api_statistic.csv.
-- requires: _api_calls, _units
-- column `Rank` INTEGER: global rank
-- column `Level` VARCHAR: acl, node, hccl, runtime (CANN levels); runtime, driver (CUDA/HIP); framework (CPU ops)
-- column `API Name` VARCHAR: API or op name
-- column `Time(us)` DOUBLE: summed duration, µs
-- column `Count` BIGINT: number of calls
-- column `Avg(us)` DOUBLE: mean duration, µs
-- column `Min(us)` DOUBLE: shortest, µs
-- column `Max(us)` DOUBLE: longest, µs
-- column `Variance` DOUBLE: population variance of the durations in µs²
SELECT rank AS "Rank", level AS "Level", name AS "API Name", us(sum(dur)) AS "Time(us)", count(*) AS "Count",
       us(avg(dur)) AS "Avg(us)", us(min(dur)) AS "Min(us)", us(max(dur)) AS "Max(us)",
       round(var_pop(dur / 1000.0), 3) AS "Variance"
FROM _api_calls GROUP BY rank, level, name
ORDER BY "Rank", sum(dur) DESC, "API Name"
