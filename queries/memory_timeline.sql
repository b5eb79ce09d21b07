-- view: memory_timeline
-- answers: memory in use over time, per rank, device and allocator component.
-- matches: torch_npu memory_record.csv and npu_module_mem.csv (MB); torch.profiler's memory
--   timeline (allocator totals after each `[memory]` event).
-- requires: counters, memory_events, _units
-- scope: rank
-- column `Rank` INTEGER: global rank
-- column `Device` VARCHAR: device (`host` for CPU memory)
-- column `Step` BIGINT: step containing the sample (NULL outside every step)
-- column `Component` VARCHAR: allocator or module (PTA, GE, APP, SLOG, ... on Ascend; `allocator` for torch.profiler)
-- column `Timestamp(us)` DECIMAL(26,3): sample time, µs since the Unix epoch
-- column `Allocated(MB)` DOUBLE: allocated total, MiB (NULL where the source gives none)
-- column `Reserved(MB)` DOUBLE: reserved total, MiB (NULL where the source gives none)
WITH sampled AS (
    SELECT rank, device, step, regexp_replace(name, '^[a-z_]*memory/', '') AS component, ts,
           max(value) FILTER (WHERE series = 'allocated_bytes') AS allocated,
           max(value) FILTER (WHERE series = 'reserved_bytes') AS reserved
    FROM counters WHERE name LIKE 'memory/%' OR name LIKE 'module_memory/%'
    GROUP BY ALL
), events AS (
    SELECT rank, device, step, 'allocator' AS component, ts, total_allocated::DOUBLE, total_reserved::DOUBLE
    FROM memory_events WHERE op_name IS NULL AND (total_allocated IS NOT NULL OR total_reserved IS NOT NULL)
)
SELECT rank AS "Rank", device AS "Device", step AS "Step", component AS "Component", us_ts(ts) AS "Timestamp(us)",
       round(allocated / 1048576, 6) AS "Allocated(MB)", round(reserved / 1048576, 6) AS "Reserved(MB)"
FROM (SELECT * FROM sampled UNION ALL SELECT * FROM events)
ORDER BY "Rank", "Device", "Component", "Timestamp(us)"
