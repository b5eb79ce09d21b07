-- view: overlap
-- answers: when was each device computing, communicating, communicating without overlap, or idle?
--   One row per merged interval, per rank, device and step.
-- matches: the "Overlap Analysis" lanes of Ascend timelines (torch_npu trace_view.json, msprof
--   OVERLAP_ANALYSIS table); MindInsight's timeline overlap analysis.
-- requires: _overlap, _units
-- scope: rank
-- column `Rank` INTEGER: global rank
-- column `Device` VARCHAR: device (`host` for a rank without device records)
-- column `Step` BIGINT: training step (NULL outside every step)
-- column `Type` VARCHAR: Computing, Communication, Communication(Not Overlapped) or Free (no step's activity runs; step_trace says whose)
-- column `Start Time(us)` DECIMAL(26,3): start, µs since the Unix epoch
-- column `Duration(us)` DOUBLE: duration, µs
SELECT key.rank AS "Rank", key.device AS "Device", key.step AS "Step", type AS "Type",
       us_ts(s) AS "Start Time(us)", us(e - s) AS "Duration(us)"
FROM _overlap_in_order  -- by rank, device, step (NULL last), start and lane
