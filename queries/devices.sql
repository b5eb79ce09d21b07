-- view: devices
-- answers: which accelerators the run ran on — each device with records, its hardware as the
--   source recorded it (name, memory, compute capability, multiprocessors), its records and
--   tasks, and the peak TFLOPS per precision that op_flops measures utilization against.
-- matches: the `deviceProperties` of a Kineto trace (torch.profiler), and the peaks of the
--   vendors' datasheets (dense math, see _device_peaks); Ascend sources record no hardware name.
-- requires: run_devices, _device_peaks
-- scope: rank
-- column `Rank` INTEGER: global rank
-- column `Device` VARCHAR: device, as in the records (gpu0, npu1, ...)
-- column `Name` VARCHAR: hardware name as the driver reports it (NULL where the source has none)
-- column `Memory(GiB)` DOUBLE: device memory, GiB (2^30 bytes)
-- column `Compute Capability` VARCHAR: major.minor
-- column `Multiprocessors` INTEGER: streaming multiprocessors (compute units on AMD)
-- column `Records` BIGINT: records of the device in the run
-- column `Tasks` BIGINT: device tasks among them (kernels, copies, sets, communication)
-- column `Model` VARCHAR: the listed accelerator the name matched (NULL: not listed; no peaks but those given, see _device_peaks)
-- column `Peak FP32 TFLOPS` DOUBLE: dense FP32 peak (CUDA cores; matrix cores on AMD), 10^12 operations per second
-- column `Peak TF32 TFLOPS` DOUBLE: dense TF32 tensor-core peak
-- column `Peak BF16 TFLOPS` DOUBLE: dense BF16 tensor-core peak
-- column `Peak FP16 TFLOPS` DOUBLE: dense FP16 tensor-core peak
-- column `Peak FP8 TFLOPS` DOUBLE: dense FP8 tensor-core peak
WITH d AS (  -- renamed: an alias that differs from its column only in case keeps the column's name
    SELECT rank AS r, device AS dev, name AS hw, memory_bytes, compute_capability AS cc, multiprocessors AS sms,
           records AS n, tasks AS t
    FROM run_devices
)
SELECT d.r AS "Rank", d.dev AS "Device", d.hw AS "Name", round(d.memory_bytes / 2 ^ 30, 2) AS "Memory(GiB)",
       d.cc AS "Compute Capability", d.sms AS "Multiprocessors", d.n AS "Records", d.t AS "Tasks", m.model AS "Model",
       m.fp32 AS "Peak FP32 TFLOPS", m.tf32 AS "Peak TF32 TFLOPS", m.bf16 AS "Peak BF16 TFLOPS",
       m.fp16 AS "Peak FP16 TFLOPS", m.fp8 AS "Peak FP8 TFLOPS"
FROM d LEFT JOIN _device_models m ON m.rank = d.r AND m.device = d.dev
ORDER BY "Rank", "Device"
