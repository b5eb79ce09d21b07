-- view: flops_summary
-- answers: how much of the device's peak the model's arithmetic used, step by step — the FLOPs
--   of the matrix multiplies and convolutions that op_flops counts, over the step's span on the
--   device: the achieved rate and the FLOPS utilization (MFU, where those ops are the model's
--   arithmetic, as in a transformer).
-- matches: MindSpore Profiler's flops_summary_{rank}.json (FLOPs, FLOPS, FLOPS_Utilization), per
--   step. FLOPs count as torch.profiler's with_flops does (see op_flops).
-- requires: _flop_calls, _device_peaks, step_trace, _units
-- scope: rank
-- column `Rank` INTEGER: global rank
-- column `Device` VARCHAR: the device the counted calls' kernels ran on (`host` for a rank without device records)
-- column `Step` BIGINT: training step (NULL: calls outside every step)
-- column `Calls` BIGINT: counted calls (matrix multiplies and convolutions with recorded shapes)
-- column `GFLOPs` DOUBLE: their floating-point operations, 10^9
-- column `Kernel Time(us)` DOUBLE: summed duration of their kernels, µs
-- column `Step Time(us)` DOUBLE: the step's span on the device (step_trace's Start to End Time), µs
-- column `TFLOPS` DOUBLE: GFLOPs over Step Time, 10^12 operations per second
-- column `FLOPS Utilization(%)` DOUBLE: the share of Step Time the device would need at its peak for these FLOPs, each call at the peak of its precision (op_flops' Precision; `devices`' peaks), %; NULL where a counted call's peak is unknown
-- Calls that launched no device work (on CPU tensors, in a GPU run) are not the device's and are
-- left out.
WITH groups AS (
    SELECT rank, device, step, name, precision, count(*) AS n, sum(dur) AS dur,
           call_flops(name, input_shapes, concrete) * count(*) AS flops
    FROM _flop_calls WHERE device IS NOT NULL GROUP BY rank, device, step, name, input_shapes, concrete, precision
), at_peak AS (  -- each group's FLOPs and the time they take at the device's peak in their precision
    SELECT g.rank, g.device, g.step, g.n, g.dur, g.flops, g.flops / (p.tflops * 1e12) AS peak_s,
           p.tflops IS NULL AS no_peak
    FROM groups g LEFT JOIN _device_peaks p ON p.rank = g.rank AND p.device = g.device AND p.precision = g.precision
    WHERE g.flops IS NOT NULL
), steps AS (
    SELECT rank, device, step, sum(n)::BIGINT AS n, sum(dur) AS dur, sum(flops) AS flops, sum(peak_s) AS peak_s,
           bool_or(no_peak) AS no_peak
    FROM at_peak GROUP BY rank, device, step
)
SELECT s.rank AS "Rank", s.device AS "Device", s.step AS "Step", s.n AS "Calls", round(s.flops / 1e9, 9) AS "GFLOPs",
       us(s.dur) AS "Kernel Time(us)", t.span AS "Step Time(us)",
       round(s.flops / nullif(t.span, 0) / 1e6, 6) AS "TFLOPS",
       CASE WHEN NOT s.no_peak THEN round(100 * s.peak_s * 1e6 / nullif(t.span, 0), 2) END AS "FLOPS Utilization(%)"
FROM steps s LEFT JOIN (
    SELECT "Rank" AS rank, "Device" AS device, "Step" AS step, ("End Time(us)" - "Start Time(us)")::DOUBLE AS span
    FROM step_trace
) t ON t.rank = s.rank AND t.device = s.device AND t.step IS NOT DISTINCT FROM s.step
ORDER BY "Rank", "Device", "Step" NULLS LAST
