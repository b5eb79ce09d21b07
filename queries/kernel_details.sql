-- view: kernel_details
-- answers: each kernel with what the device's tools measured of it — one row per Ascend compute
--   task or communication op that the source described (kernel_details.csv, or the database's
--   COMPUTE_TASK_INFO), and per CUDA kernel with its launch configuration: op type and core,
--   timing and wait, block dims, input and output shapes, types and formats, and `Metrics`: the AI
--   Core PMU metrics of the aic_metrics setting (Ascend), or the grid, block, registers, shared
--   memory and estimated occupancy (CUDA).
-- matches: torch_npu kernel_details.csv (`Metrics` holds its PMU columns as one JSON object, under
--   the CSV's names and units: `aic_mac_ratio`, `aiv_time(us)`, ...); the launch details of a
--   kernel in torch.profiler's trace.
-- requires: slices, _units
-- scope: rank
-- column `Rank` INTEGER: global rank
-- column `Device` VARCHAR: device
-- column `Step Id` BIGINT: training step
-- column `Model ID` BIGINT: graph (model) id, where the task belongs to one
-- column `Task ID` BIGINT: task id (CUDA: the launch's correlation id)
-- column `Stream ID` BIGINT: stream
-- column `Name` VARCHAR: task name
-- column `Type` VARCHAR: op type (CUDA: the framework op that launched the kernel)
-- column `OP State` VARCHAR: static or dynamic shape (text export)
-- column `Accelerator Core` VARCHAR: AI_CORE, AI_VECTOR_CORE, MIX_AIC, MIX_AIV, AI_CPU, HCCL, ...
-- column `Start Time(us)` DECIMAL(26,3): start, µs since the Unix epoch
-- column `Duration(us)` DOUBLE: duration, µs
-- column `Wait Time(us)` DOUBLE: gap since the previous listed task on the device ended (any stream; 0 for the first or an overlap), µs, as torch_npu computes it
-- column `Block Dim` BIGINT: cores the task ran on (CUDA: thread blocks, the grid's product)
-- column `Mix Block Dim` BIGINT: vector cores of a mixed task
-- column `HF32 Eligible` VARCHAR: whether HF32 could be used (text export)
-- column `Input Shapes` VARCHAR: input shapes
-- column `Input Data Types` VARCHAR: input data types
-- column `Input Formats` VARCHAR: input formats
-- column `Output Shapes` VARCHAR: output shapes
-- column `Output Data Types` VARCHAR: output data types
-- column `Output Formats` VARCHAR: output formats
-- column `Context ID` BIGINT: context (subtask) id, where the task has one
-- column `Metrics` VARCHAR: the AI Core PMU metrics (times in µs; NULL without aic_metrics), or the CUDA launch configuration and occupancy estimate, as a JSON object
WITH described AS (
    SELECT rank, device, step, name, ts, dur, stream, correlation, input_shapes, input_types,
           coalesce(op_type, launch_name) AS op_type, coalesce(task_type, 'KERNEL') AS task_type, args::JSON AS a,
           coalesce(greatest(ts - lag(ts + dur) OVER (PARTITION BY rank, device ORDER BY ts, id), 0), 0) AS wait
    FROM slices WHERE device <> 'host' AND kind IN ('kernel', 'comm')
     -- described by Ascend's tools (an op type, or a Level0 row's Block Dim: its Type is N/A), or launched by CUDA
     AND (op_type IS NOT NULL OR contains(args, '"Block Dim"') OR contains(args, '"grid"'))
), metric_keys AS (
    SELECT *, list_filter(json_keys(a), lambda k: k SIMILAR TO '(aic|aiv|aicore|cube)_.*' OR k IN (
        'grid', 'block', 'registers per thread', 'shared memory', 'blocks per SM', 'warps per SM',
        'est. achieved occupancy %')) AS pmu
    FROM described
)
SELECT rank AS "Rank", device AS "Device", step AS "Step Id", TRY_CAST(nullif(a ->> 'Model Id', '4294967295') AS BIGINT) AS "Model ID",
       coalesce(TRY_CAST(a ->> 'Task Id' AS BIGINT), CASE WHEN (a -> 'grid') IS NOT NULL THEN correlation END) AS "Task ID",
       stream AS "Stream ID", name AS "Name", op_type AS "Type",
       a ->> 'OP State' AS "OP State", task_type AS "Accelerator Core", us_ts(ts) AS "Start Time(us)",
       us(dur) AS "Duration(us)", us(wait) AS "Wait Time(us)",
       coalesce(TRY_CAST(a ->> 'Block Dim' AS BIGINT), list_reduce(TRY_CAST(a -> 'grid' AS BIGINT[]), lambda x, y: x * y)) AS "Block Dim",
       TRY_CAST(a ->> 'Mix Block Dim' AS BIGINT) AS "Mix Block Dim", a ->> 'HF32 Eligible' AS "HF32 Eligible",
       input_shapes AS "Input Shapes", input_types AS "Input Data Types", a ->> 'Input Formats' AS "Input Formats",
       a ->> 'Output Shapes' AS "Output Shapes", a ->> 'Output Data Types' AS "Output Data Types",
       a ->> 'Output Formats' AS "Output Formats", TRY_CAST(a ->> 'Context ID' AS BIGINT) AS "Context ID",
       CASE WHEN len(pmu) > 0 THEN to_json(map_from_entries(list_transform(pmu, lambda k: struct_pack(k := k, v := a -> k))))::VARCHAR END AS "Metrics"
FROM metric_keys
ORDER BY "Rank", "Device", ts, "Stream ID", "Task ID"
