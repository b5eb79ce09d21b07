-- view: _device_peaks
-- answers: each device's peak arithmetic rate per precision, in TFLOPS, where its name is one of
--   the accelerators listed here: the vendors' datasheet figures for dense math (without 2:4
--   sparsity), tensor cores (matrix cores on AMD) where the precision has them, FP32 on the
--   CUDA cores. A device not listed (or named too vaguely: ROCm names an MI250's dies `AMD Radeon
--   Graphics`) has no peak, and what is measured against a peak stays NULL there, unless the
--   user gives peaks (`PROF_ENGINE_PEAK_TFLOPS=bf16=989.4,fp8=1979`, `prof_engine.open(run,
--   peak_tflops={...})`): those replace the datasheet's, per precision, for every device.
-- requires: run_devices, run_peaks
-- scope: rank
-- Rows are tried in `priority` order; the first name that matches wins (so `H100 NVL`, whose
-- figures are not listed, does not fall through to the SXM part's).
CREATE OR REPLACE VIEW _peak_table AS
SELECT priority::INTEGER AS priority, model, pattern, fp32::DOUBLE AS fp32, tf32::DOUBLE AS tf32,
       bf16::DOUBLE AS bf16, fp16::DOUBLE AS fp16, fp8::DOUBLE AS fp8
FROM (VALUES
    (1, 'H100 NVL', 'H100 NVL', NULL, NULL, NULL, NULL, NULL),
    (2, 'H200 NVL', 'H200 NVL', NULL, NULL, NULL, NULL, NULL),
    (3, 'H100 PCIe', 'H100.*PCIe', 51, 378, 756, 756, 1513),
    (4, 'H100 SXM', 'H100', 66.9, 494.7, 989.4, 989.4, 1978.9),
    (5, 'H200 SXM', 'H200', 66.9, 494.7, 989.4, 989.4, 1978.9),  -- GH200's Hopper too
    (6, 'A100', 'A100|A800', 19.5, 156, 312, 312, NULL),
    (7, 'V100 PCIe', 'V100-PCIE', 14, NULL, NULL, 112, NULL),
    (8, 'V100S', 'V100S', 16.4, NULL, NULL, 130, NULL),
    (9, 'V100 SXM2', 'V100', 15.7, NULL, NULL, 125, NULL),
    (10, 'L4', '(^|\s)L4$', 30.3, 60, 121, 121, 242.5),
    (11, 'A10', '(^|\s)A10$', 31.2, 62.5, 125, 125, NULL),
    (12, 'MI300X', 'MI300X', 163.4, 653.7, 1307.4, 1307.4, 2614.9),
    -- Blackwell, per GPU, from the GB200 NVL72 and HGX B200 datasheets (tensor: their sparse figures halved)
    (13, 'GB200', 'GB200', 80, 1250, 2500, 2500, 5000),
    (14, 'B200', 'B200', 75, 1125, 2250, 2250, 4500)
) AS t(priority, model, pattern, fp32, tf32, bf16, fp16, fp8);

-- Each device whose name is listed, or every device where the user gave peaks (run_peaks), with
-- its model and peaks.
CREATE OR REPLACE VIEW _device_models AS
WITH listed AS (
    SELECT d.rank, d.device, p.model, p.fp32, p.tf32, p.bf16, p.fp16, p.fp8
    FROM run_devices d JOIN _peak_table p ON regexp_matches(d.name, p.pattern, 'i')
    QUALIFY row_number() OVER (PARTITION BY d.rank, d.device ORDER BY p.priority) = 1
), given AS (  -- one row, whatever was given
    SELECT count(*) > 0 AS any, max(tflops) FILTER (WHERE precision = 'fp32') AS fp32,
           max(tflops) FILTER (WHERE precision = 'tf32') AS tf32, max(tflops) FILTER (WHERE precision = 'bf16') AS bf16,
           max(tflops) FILTER (WHERE precision = 'fp16') AS fp16, max(tflops) FILTER (WHERE precision = 'fp8') AS fp8
    FROM run_peaks
)
SELECT d.rank, d.device, l.model, coalesce(g.fp32, l.fp32) AS fp32, coalesce(g.tf32, l.tf32) AS tf32,
       coalesce(g.bf16, l.bf16) AS bf16, coalesce(g.fp16, l.fp16) AS fp16, coalesce(g.fp8, l.fp8) AS fp8
FROM run_devices d LEFT JOIN listed l ON l.rank = d.rank AND l.device = d.device CROSS JOIN given g
WHERE l.model IS NOT NULL OR g.any;

-- The same, a row per precision that has a peak: (rank, device, model, precision, tflops).
CREATE OR REPLACE VIEW _device_peaks AS
UNPIVOT _device_models ON fp32, tf32, bf16, fp16, fp8 INTO NAME precision VALUE tflops;
