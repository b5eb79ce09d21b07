-- view: op_flops
-- answers: how much arithmetic the matrix multiplies did, and how fast — each aten::mm, addmm, bmm
--   and baddbmm call's FLOPs from its input shapes, summed per op and shapes, over the time of the
--   device kernels it launched (its own time on a rank without device records): achieved TFLOPS.
-- matches: torch.profiler's with_flops counts (2·M·K·N per matrix product, times the batch; addmm's
--   and baddbmm's added input not counted). Other ops (convolutions among them) are not counted.
-- requires: slices, _flops, _classify, _tasks, _units
-- column `Rank` INTEGER: global rank
-- column `OP Name` VARCHAR: the framework op (aten::mm, aten::addmm, aten::bmm, aten::baddbmm)
-- column `Input Shapes` VARCHAR: its input shapes, as recorded (`;` between inputs)
-- column `Count` BIGINT: number of calls
-- column `GFLOPs` DOUBLE: floating-point operations of all its calls, 10^9
-- column `Time(us)` DOUBLE: summed duration of the kernels the calls launched (of the calls, on a rank without device records), µs
-- column `TFLOPS` DOUBLE: GFLOPs / Time, 10^12 operations per second (NULL where the time is 0)
-- Calls whose shapes were not recorded (record_shapes off) are left out.
-- Calls of one op and shapes have the same FLOPs: the shapes are parsed once per group.
WITH calls AS (
    SELECT id, rank, name, input_shapes, dur FROM slices
    WHERE kind = 'host_op' AND name IN ('aten::mm', 'aten::addmm', 'aten::bmm', 'aten::baddbmm') AND input_shapes IS NOT NULL
), kernels AS (
    SELECT launch_id AS id, sum(dur) AS dur FROM slices
    WHERE device <> 'host' AND launch_id IN (SELECT id FROM calls) AND is_device_task(device, kind) GROUP BY launch_id
), groups AS (
    SELECT c.rank, c.name, c.input_shapes, count(*) AS n,
           sum(CASE WHEN c.rank IN (SELECT rank FROM _host_only_ranks) THEN c.dur ELSE coalesce(k.dur, 0) END) AS dur
    FROM calls c LEFT JOIN kernels k USING (id) GROUP BY c.rank, c.name, c.input_shapes
), counted AS (
    SELECT *, gemm_flops(name, input_shapes) * n AS flops FROM groups
)
SELECT rank AS "Rank", name AS "OP Name", input_shapes AS "Input Shapes", n AS "Count",
       round(flops / 1e9, 9) AS "GFLOPs",  -- 9 decimals: single FLOPs
       us(dur) AS "Time(us)", round(flops / nullif(dur, 0) / 1e3, 6) AS "TFLOPS"
FROM counted WHERE flops IS NOT NULL
ORDER BY "Rank", "GFLOPs" DESC, "OP Name", "Input Shapes"
