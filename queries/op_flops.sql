-- view: op_flops
-- answers: how much arithmetic the matrix multiplies and convolutions did, and how fast — each
--   aten::mm, addmm, bmm, baddbmm and conv2d call's FLOPs from its input shapes (and a
--   convolution's stride, padding and dilation), summed per op and shapes, over the time of the
--   device kernels it launched, itself or through the ops nested in it (cuDNN's, for a
--   convolution); its own time on a rank without device records: achieved TFLOPS.
-- matches: torch.profiler's with_flops counts (2·M·K·N per matrix product, times the batch; addmm's
--   and baddbmm's added input not counted; conv2d as `_flops`). Other ops are not counted.
-- requires: slices, _flops, _classify, _tasks, _units
-- column `Rank` INTEGER: global rank
-- column `OP Name` VARCHAR: the framework op (aten::mm, aten::addmm, aten::bmm, aten::baddbmm, aten::conv2d)
-- column `Input Shapes` VARCHAR: its input shapes, as recorded (`;` between inputs)
-- column `Concrete Inputs` VARCHAR: a convolution's recorded scalar arguments (stride, padding, dilation, groups); NULL for matrix products
-- column `Count` BIGINT: number of calls
-- column `GFLOPs` DOUBLE: floating-point operations of all its calls, 10^9
-- column `Time(us)` DOUBLE: summed duration of the kernels the calls launched, themselves or through nested ops (of the calls, on a rank without device records), µs
-- column `TFLOPS` DOUBLE: GFLOPs / Time, 10^12 operations per second (NULL where the time is 0)
-- Calls whose shapes were not recorded (record_shapes off) are left out. A matrix product launches
-- its kernels itself; a convolution's come from the ops within its time on its thread (at 10 M
-- records a recursive walk down the parents took 3.8 s more than the matrix products alone, even
-- with no convolution to walk; this takes 1.7 s more).
-- Calls of one op, shapes and arguments have the same FLOPs: they are computed once per group.
WITH calls AS (
    SELECT id, rank, pid, tid, ts, name, input_shapes,
           CASE WHEN name = 'aten::conv2d' THEN json_extract(args, '$."Concrete Inputs"')::VARCHAR END AS concrete, dur
    FROM slices
    WHERE kind = 'host_op' AND name IN ('aten::mm', 'aten::addmm', 'aten::bmm', 'aten::baddbmm', 'aten::conv2d')
      AND input_shapes IS NOT NULL
), convs AS MATERIALIZED (
    SELECT id, rank, pid, tid, ts, dur FROM calls WHERE name = 'aten::conv2d'
), below AS (  -- each convolution and the ops nested in it: within its time, on its thread
    SELECT c.rank, c.id AS call_id, o.id FROM convs c JOIN (
        SELECT rank, pid, tid, ts, dur, id FROM slices
        WHERE device = 'host' AND kind = 'host_op' AND tid IN (SELECT tid FROM convs)  -- narrow, and none without convolutions
    ) o ON o.rank = c.rank AND o.pid IS NOT DISTINCT FROM c.pid AND o.tid = c.tid AND o.ts >= c.ts AND o.ts + o.dur <= c.ts + c.dur
), kernels AS (  -- a matrix product's own launches; a convolution's through its nested ops
    SELECT launch_id AS id, sum(dur) AS dur FROM slices
    WHERE device <> 'host' AND launch_id IN (SELECT id FROM calls WHERE name <> 'aten::conv2d')
      AND is_device_task(device, kind) GROUP BY launch_id
    UNION ALL
    SELECT b.call_id, sum(t.dur) FROM below b JOIN slices t ON t.rank = b.rank AND t.launch_id = b.id
    WHERE t.device <> 'host' AND is_device_task(t.device, t.kind) GROUP BY b.call_id
), groups AS (
    SELECT c.rank, c.name, c.input_shapes, c.concrete, count(*) AS n,
           sum(CASE WHEN c.rank IN (SELECT rank FROM _host_only_ranks) THEN c.dur ELSE coalesce(k.dur, 0) END) AS dur
    FROM calls c LEFT JOIN kernels k USING (id) GROUP BY c.rank, c.name, c.input_shapes, c.concrete
), counted AS (
    SELECT *, CASE WHEN name = 'aten::conv2d' THEN conv2d_flops(input_shapes, concrete)
                   ELSE gemm_flops(name, input_shapes) END * n AS flops
    FROM groups
)
SELECT rank AS "Rank", name AS "OP Name", input_shapes AS "Input Shapes", concrete AS "Concrete Inputs", n AS "Count",
       round(flops / 1e9, 9) AS "GFLOPs",  -- 9 decimals: single FLOPs
       us(dur) AS "Time(us)", round(flops / nullif(dur, 0) / 1e3, 6) AS "TFLOPS"
FROM counted WHERE flops IS NOT NULL
ORDER BY "Rank", "GFLOPs" DESC, "OP Name", "Input Shapes", "Concrete Inputs"
