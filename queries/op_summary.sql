-- view: op_summary
-- answers: one row per device task or kernel — what ran, where, when, for how long, launched by
--   which framework op. For a rank without device records (CPU-only traces): one row per CPU op.
-- matches: msprof op_summary_*.csv; torch_npu kernel_details.csv (same columns renamed).
-- requires: _op_summary_rows, _units
-- column `Rank` INTEGER: global rank
-- column `Device` VARCHAR: device (`gpu0`, `npu3`), or `host` for CPU ops
-- column `Step` BIGINT: training step (NULL outside every step)
-- column `Task ID` BIGINT: correlation id of the launch (CUDA) / task id
-- column `Stream ID` BIGINT: device stream
-- column `Op Name` VARCHAR: kernel or task name
-- column `OP Type` VARCHAR: framework op that launched it (through correlation), else the kernel name
-- column `Task Type` VARCHAR: KERNEL, COMMUNICATION, MEMCPY, MEMSET or CPU_OP
-- column `Task Start Time(us)` DECIMAL(26,3): start, µs since the Unix epoch
-- column `Task Duration(us)` DOUBLE: duration, µs
-- column `Task Wait Time(us)` DOUBLE: idle gap since the previous task on the same stream ended, µs
-- column `Input Shapes` VARCHAR: input shapes, dims by `,`, tensors by `;`
-- column `Input Data Types` VARCHAR: input data types by `;`
SELECT rank AS "Rank", device AS "Device", step AS "Step", correlation AS "Task ID", stream AS "Stream ID",
       name AS "Op Name", op_type AS "OP Type", task_type AS "Task Type",
       us_ts(ts) AS "Task Start Time(us)", us(dur) AS "Task Duration(us)", us(wait) AS "Task Wait Time(us)",
       input_shapes AS "Input Shapes", input_types AS "Input Data Types"
FROM _op_summary_rows
