-- view: cluster_step_trace
-- answers: how do the ranks of a job compare step by step — each rank's step breakdown, and per
--   pipeline stage the slowest value of each column over the stage's ranks.
-- matches: msprof-analyze cluster_analysis_output/cluster_step_trace_time.csv (Type rank|stage,
--   Index, the step_trace columns, DP/PP/TP Index).
-- requires: step_trace, run_ranks
-- scope: cluster
-- A rank with several devices contributes one row per device. Stage rows take the per-column
-- maximum over the ranks of one pipeline stage (from the profiler's parallel-group metadata,
-- `run_ranks.pp_stage`); without that metadata all ranks form one stage, as msprof-analyze does.
-- column `Step` BIGINT: training step (NULL: records outside every step)
-- column `Type` VARCHAR: rank or stage
-- column `Index` VARCHAR: the rank, or the stage's ranks as "(0, 1, ...)"
-- column `Device` VARCHAR: the rank's device (NULL on stage rows)
-- column `Computing` DOUBLE: merged computing time, µs
-- column `Communication(Not Overlapped)` DOUBLE: communication not hidden by computing, µs
-- column `Overlapped` DOUBLE: communication hidden by computing, µs
-- column `Communication` DOUBLE: merged communication time, µs
-- column `Free` DOUBLE: idle time between activities, µs
-- column `Stage` DOUBLE: step span minus bubble, µs
-- column `Bubble` DOUBLE: time of receive ops, µs
-- column `Communication(Not Overlapped and Exclude Receive)` DOUBLE: not-overlapped communication minus bubble, µs
-- column `Preparing` DOUBLE: from host step start to the device's first activity, µs
-- column `DP Index` INTEGER: data-parallel index of the rank (NULL on stage rows or when unknown)
-- column `PP Index` INTEGER: pipeline stage of the rank or of the stage row (NULL when unknown)
-- column `TP Index` INTEGER: tensor-parallel index of the rank (NULL on stage rows or when unknown)
WITH ranked AS (
    SELECT t.*, r.dp_index, r.pp_stage, r.tp_index
    FROM step_trace t LEFT JOIN run_ranks r ON r.rank = t."Rank"
)
SELECT "Step", 'rank' AS "Type", "Rank"::VARCHAR AS "Index", "Device", "Computing", "Communication(Not Overlapped)",
       "Overlapped", "Communication", "Free", "Stage", "Bubble", "Communication(Not Overlapped and Exclude Receive)",
       "Preparing", dp_index AS "DP Index", pp_stage AS "PP Index", tp_index AS "TP Index"
FROM ranked
UNION ALL
SELECT "Step", 'stage', '(' || array_to_string(list_sort(list(DISTINCT "Rank")), ', ') || ')', NULL,
       max("Computing"), max("Communication(Not Overlapped)"), max("Overlapped"), max("Communication"), max("Free"),
       max("Stage"), max("Bubble"), max("Communication(Not Overlapped and Exclude Receive)"), max("Preparing"),
       NULL, pp_stage, NULL
FROM ranked GROUP BY "Step", pp_stage
ORDER BY "Step" NULLS LAST, "Type", length("Index"), "Index", "Device"
