-- view: kernel_details
-- answers: each Ascend compute task and communication op with what CANN measured of it — one row
--   per task that the source described (kernel_details.csv, or the database's COMPUTE_TASK_INFO):
--   its op type and core, timing and wait on its stream, block dims, input and output shapes,
--   types and formats, and the AI Core PMU metrics of its aic_metrics setting.
-- matches: torch_npu kernel_details.csv (`Metrics` holds its PMU columns as one JSON object, under
--   the CSV's names and units: `aic_mac_ratio`, `aiv_time(us)`, ...). Other sources have no such
--   descriptions: op_summary lists their tasks.
-- requires: slices, _units
-- column `Rank` INTEGER: global rank
-- column `Device` VARCHAR: device
-- column `Step Id` BIGINT: training step
-- column `Model ID` BIGINT: graph (model) id, where the task belongs to one
-- column `Task ID` BIGINT: task id
-- column `Stream ID` BIGINT: stream
-- column `Name` VARCHAR: task name
-- column `Type` VARCHAR: op type
-- column `OP State` VARCHAR: static or dynamic shape (text export)
-- column `Accelerator Core` VARCHAR: AI_CORE, AI_VECTOR_CORE, MIX_AIC, MIX_AIV, AI_CPU, HCCL, ...
-- column `Start Time(us)` DECIMAL(26,3): start, µs since the Unix epoch
-- column `Duration(us)` DOUBLE: duration, µs
-- column `Wait Time(us)` DOUBLE: gap since the previous listed task on the device ended (any stream; 0 for the first or an overlap), µs, as torch_npu computes it
-- column `Block Dim` BIGINT: cores the task ran on
-- column `Mix Block Dim` BIGINT: vector cores of a mixed task
-- column `HF32 Eligible` VARCHAR: whether HF32 could be used (text export)
-- column `Input Shapes` VARCHAR: input shapes
-- column `Input Data Types` VARCHAR: input data types
-- column `Input Formats` VARCHAR: input formats
-- column `Output Shapes` VARCHAR: output shapes
-- column `Output Data Types` VARCHAR: output data types
-- column `Output Formats` VARCHAR: output formats
-- column `Context ID` BIGINT: context (subtask) id, where the task has one
-- column `Metrics` VARCHAR: the AI Core PMU metrics as a JSON object (times in µs; NULL without aic_metrics)
WITH described AS (
    SELECT rank, device, step, name, ts, dur, stream, input_shapes, input_types, op_type, task_type, args::JSON AS a,
           coalesce(greatest(ts - lag(ts + dur) OVER (PARTITION BY rank, device ORDER BY ts, id), 0), 0) AS wait
    FROM slices WHERE device <> 'host' AND op_type IS NOT NULL AND kind IN ('kernel', 'comm')
), metric_keys AS (
    SELECT *, list_filter(json_keys(a), lambda k: k SIMILAR TO '(aic|aiv|aicore|cube)_.*') AS pmu FROM described
)
SELECT rank AS "Rank", device AS "Device", step AS "Step Id", nullif(a ->> 'Model Id', '4294967295')::BIGINT AS "Model ID",
       (a ->> 'Task Id')::BIGINT AS "Task ID", stream AS "Stream ID", name AS "Name", op_type AS "Type",
       a ->> 'OP State' AS "OP State", task_type AS "Accelerator Core", us_ts(ts) AS "Start Time(us)",
       us(dur) AS "Duration(us)", us(wait) AS "Wait Time(us)", (a ->> 'Block Dim')::BIGINT AS "Block Dim",
       (a ->> 'Mix Block Dim')::BIGINT AS "Mix Block Dim", a ->> 'HF32 Eligible' AS "HF32 Eligible",
       input_shapes AS "Input Shapes", input_types AS "Input Data Types", a ->> 'Input Formats' AS "Input Formats",
       a ->> 'Output Shapes' AS "Output Shapes", a ->> 'Output Data Types' AS "Output Data Types",
       a ->> 'Output Formats' AS "Output Formats", (a ->> 'Context ID')::BIGINT AS "Context ID",
       CASE WHEN len(pmu) > 0 THEN to_json(map_from_entries(list_transform(pmu, lambda k: struct_pack(k := k, v := a -> k))))::VARCHAR END AS "Metrics"
FROM metric_keys
ORDER BY "Rank", "Device", ts, "Stream ID", "Task ID"
