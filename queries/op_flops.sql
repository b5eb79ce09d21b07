-- view: op_flops
-- answers: how much arithmetic the matrix multiplies and convolutions did, and how fast — each
--   aten::mm, addmm, bmm, baddbmm and conv2d call's FLOPs from its input shapes (and a
--   convolution's stride, padding and dilation), summed per op and shapes, over the time of the
--   device kernels it launched, itself or through the convolution ops nested in it (cuDNN's, for
--   a convolution); its own time on a rank without device records: achieved TFLOPS, and their
--   share of the device's datasheet peak in the calls' precision.
-- matches: torch.profiler's with_flops counts (2·M·K·N per matrix product, times the batch; addmm's
--   and baddbmm's added input not counted; conv2d as `_flops`). Other ops are not counted.
-- requires: _flop_calls, _units, _device_peaks
-- scope: rank
-- column `Rank` INTEGER: global rank
-- column `OP Name` VARCHAR: the framework op (aten::mm, aten::addmm, aten::bmm, aten::baddbmm, aten::conv2d)
-- column `Input Shapes` VARCHAR: its input shapes, as recorded (`;` between inputs)
-- column `Concrete Inputs` VARCHAR: a convolution's recorded scalar arguments (stride, padding, dilation, groups); NULL for matrix products
-- column `Count` BIGINT: number of calls
-- column `GFLOPs` DOUBLE: floating-point operations of all its calls, 10^9
-- column `Time(us)` DOUBLE: summed duration of the kernels the calls launched, themselves or through nested ops (of the calls, on a rank without device records), µs
-- column `TFLOPS` DOUBLE: GFLOPs / Time, 10^12 operations per second (NULL where the time is 0)
-- column `Precision` VARCHAR: the arithmetic the calls ran in, from their matrix input's recorded type: bf16, fp16, fp32, fp64, fp8, and tf32 for an fp32 convolution on a device with TF32 tensor cores (NULL: types not recorded)
-- column `Peak TFLOPS` DOUBLE: the device's dense peak in that precision (see `devices`; NULL where the device is not listed, and on the host)
-- column `FLOPS Utilization(%)` DOUBLE: TFLOPS as a share of Peak TFLOPS, %
-- Calls whose shapes were not recorded (record_shapes off) are left out; `_flop_calls` says which
-- kernels are a call's. Calls of one op, shapes, arguments and precision have the same FLOPs: they
-- are computed once per group.
WITH groups AS (
    SELECT rank, name, input_shapes, concrete, precision, count(*) AS n, any_value(device) AS device, sum(dur) AS dur
    FROM _flop_calls GROUP BY rank, name, input_shapes, concrete, precision
), counted AS (
    SELECT *, call_flops(name, input_shapes, concrete) * n AS flops FROM groups
)
SELECT c.rank AS "Rank", c.name AS "OP Name", c.input_shapes AS "Input Shapes", c.concrete AS "Concrete Inputs",
       c.n AS "Count", round(c.flops / 1e9, 9) AS "GFLOPs",  -- 9 decimals: single FLOPs
       us(c.dur) AS "Time(us)", round(c.flops / nullif(c.dur, 0) / 1e3, 6) AS "TFLOPS",
       c.precision AS "Precision", p.tflops AS "Peak TFLOPS",
       round(100 * c.flops / nullif(c.dur, 0) / 1e3 / p.tflops, 2) AS "FLOPS Utilization(%)"
FROM counted c LEFT JOIN _device_peaks p ON p.rank = c.rank AND p.device = c.device AND p.precision = c.precision
WHERE c.flops IS NOT NULL
ORDER BY "Rank", "GFLOPs" DESC, "OP Name", "Input Shapes", "Concrete Inputs", "Precision"
