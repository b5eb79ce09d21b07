-- view: op_flops
-- answers: how much arithmetic the matrix multiplies and convolutions did, and how fast — each
--   aten::mm, addmm, bmm, baddbmm and conv2d call's FLOPs from its input shapes (and a
--   convolution's stride, padding and dilation), summed per op and shapes, over the time of the
--   device kernels it launched, itself or through the convolution ops nested in it (cuDNN's, for
--   a convolution); its own time on a rank without device records: achieved TFLOPS.
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
-- its kernels itself. A convolution's kernels are launched by the convolution op the dispatcher
-- reaches inside it (aten::cudnn_convolution, miopen_, mkldnn_...), and by the bias add beside
-- it: its time is that of every kernel the ops nested in it launched (torch's device time of the
-- call; equal to it on an H100's cuDNN convolutions), found by walking down from each aten::conv2d
-- a level at a time. Both kinds of call find their kernels in one pass over the device tasks.
-- Calls of one op, shapes and arguments have the same FLOPs: they are computed once per group.
WITH RECURSIVE gemms AS (
    SELECT id, rank, name, input_shapes, NULL::VARCHAR AS concrete, dur FROM slices
    WHERE kind = 'host_op' AND name IN ('aten::mm', 'aten::addmm', 'aten::bmm', 'aten::baddbmm') AND input_shapes IS NOT NULL
), convs AS (
    SELECT id, rank, name, input_shapes, json_extract(args, '$."Concrete Inputs"')::VARCHAR AS concrete, dur
    FROM slices WHERE kind = 'host_op' AND name = 'aten::conv2d' AND input_shapes IS NOT NULL
), nested(rank, conv_id, id) AS (  -- each convolution and the ops nested in it, at any depth
    SELECT rank, id, id FROM convs
    UNION ALL
    SELECT n.rank, n.conv_id, h.id FROM nested n JOIN slices h ON h.rank = n.rank AND h.parent_id = n.id
    WHERE h.device = 'host' AND h.kind = 'host_op'
), launchers AS (  -- a matrix product launches its kernels itself; a convolution through its nested ops
    SELECT rank, id, id AS call_id FROM gemms UNION ALL SELECT rank, id, conv_id FROM nested
), kernels AS (
    SELECT l.call_id AS id, sum(t.dur) AS dur FROM launchers l JOIN (
        SELECT rank, launch_id, sum(dur) AS dur FROM slices
        WHERE device <> 'host' AND launch_id IN (SELECT id FROM launchers) AND is_device_task(device, kind) GROUP BY ALL
    ) t ON t.rank = l.rank AND t.launch_id = l.id GROUP BY l.call_id
), calls AS (
    SELECT * FROM gemms UNION ALL SELECT * FROM convs
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
