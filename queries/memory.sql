-- view: memory
-- answers: how much device (and host) memory did each rank use — peak allocated and reserved per
--   device and allocator component (those that held any), and when the peak was reached.
-- matches: MindInsight's memory usage (peak, total); torch_npu memory_record.csv / npu_module_mem.csv
--   summarised; the peak of torch.profiler's allocator totals (`[memory]` events).
-- requires: memory_timeline, _units
-- scope: rank
-- column `Rank` INTEGER: global rank
-- column `Device` VARCHAR: device (`host` for CPU memory)
-- column `Component` VARCHAR: allocator or module (PTA, GE, APP, ... on Ascend; `allocator` for torch.profiler events)
-- column `Peak Allocated(MB)` DOUBLE: largest allocated total, MiB
-- column `Peak Reserved(MB)` DOUBLE: largest reserved total, MiB
-- column `Peak Time(us)` DECIMAL(26,3): when the allocated (else reserved) peak was first reached, µs since the Unix epoch
-- column `Samples` BIGINT: number of samples or allocator events
SELECT "Rank", "Device", "Component",
       max("Allocated(MB)") AS "Peak Allocated(MB)", max("Reserved(MB)") AS "Peak Reserved(MB)",
       coalesce(arg_min("Timestamp(us)", -"Allocated(MB)") FILTER (WHERE "Allocated(MB)" IS NOT NULL),
                arg_min("Timestamp(us)", -"Reserved(MB)")) AS "Peak Time(us)",
       count(*) AS "Samples"
FROM memory_timeline
GROUP BY ALL
HAVING coalesce(max("Allocated(MB)"), 0) > 0 OR coalesce(max("Reserved(MB)"), 0) > 0  -- modules that never held memory
ORDER BY "Rank", "Device", "Peak Allocated(MB)" DESC NULLS LAST, "Peak Reserved(MB)" DESC NULLS LAST
