-- view: op_summary
-- answers: one row per device task or kernel — what ran, where, when, for how long, launched by
--   which framework op. For a rank without device records (CPU-only traces): one row per CPU op.
--   Rows in rank, device and start order, ties broken by stream, task id and then the source's
--   own order (record ids: file index << 40 + position), so two imports list them alike.
-- matches: msprof op_summary_*.csv; torch_npu kernel_details.csv (same columns renamed).
-- requires: _op_summary_rows, slices, _units
-- scope: rank
-- column `Rank` INTEGER: global rank
-- column `Device` VARCHAR: device (`gpu0`, `npu3`), or `host` for CPU ops
-- column `Step` BIGINT: training step (NULL outside every step)
-- column `Task ID` BIGINT: Ascend: the hardware task id (kernel_details.csv's Task ID; NULL for communication ops, msprof's N/A); CUDA: the launch's correlation id
-- column `Stream ID` BIGINT: device stream
-- column `Op Name` VARCHAR: kernel or task name
-- column `OP Type` VARCHAR: framework op that launched it (through correlation), else the kernel name
-- column `Task Type` VARCHAR: KERNEL, COMMUNICATION, MEMCPY, MEMSET or CPU_OP
-- column `Task Start Time(us)` DECIMAL(26,3): start, µs since the Unix epoch
-- column `Task Duration(us)` DOUBLE: duration, µs
-- column `Task Wait Time(us)` DOUBLE: idle gap since the previous task on the same stream ended, µs
-- column `Input Shapes` VARCHAR: input shapes, dims by `,`, tensors by `;`
-- column `Input Data Types` VARCHAR: input data types by `;`
-- An Ascend task's id is in its args (`Task Id`), not its correlation (the CANN connection id that
-- links it to its launch); only npu devices' tasks are read for it, so a CUDA run joins nothing.
SELECT r.rank AS "Rank", r.device AS "Device", r.step AS "Step",
       CASE WHEN starts_with(r.device, 'npu') THEN h.task_id ELSE r.correlation END AS "Task ID",
       r.stream AS "Stream ID", r.name AS "Op Name", r.op_type AS "OP Type", r.task_type AS "Task Type",
       us_ts(r.ts) AS "Task Start Time(us)", us(r.dur) AS "Task Duration(us)", us(r.wait) AS "Task Wait Time(us)",
       r.input_shapes AS "Input Shapes", r.input_types AS "Input Data Types"
FROM _op_summary_rows r
LEFT JOIN (SELECT id, TRY_CAST(args ->> 'Task Id' AS BIGINT) AS task_id FROM slices
           WHERE starts_with(device, 'npu') AND contains(args, '"Task Id"')) h ON h.id = r.id
-- (integer keys only: string keys double the cost of the sort)
ORDER BY r.rank, r.device, r.ts, r.stream NULLS FIRST, "Task ID" NULLS FIRST, r.id
