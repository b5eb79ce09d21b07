-- view: _flop_calls
-- answers: every matrix multiply and convolution call whose FLOPs can be counted (aten::mm, addmm,
--   bmm, baddbmm, conv2d with recorded shapes), with its step, the precision it ran in (whose peak
--   its rate is measured against), and the time and device
--   of the device kernels it launched, itself or through the ops nested in it (device NULL: it
--   launched none); on a rank without device records its own time, on `host`. op_flops sums them
--   per op and shapes, flops_summary per step.
-- requires: slices, _flops, _classify, _tasks, _device_peaks
-- scope: rank
-- A matrix product launches its kernels itself. A convolution's kernels are launched by the
-- convolution op the dispatcher reaches inside it (aten::cudnn_convolution, miopen_, mkldnn_...),
-- and by the bias add beside it: its time is that of every kernel the ops nested in it launched
-- (torch's device time of the call; equal to it on an H100's cuDNN convolutions), found by walking
-- down from each aten::conv2d a level at a time. Both kinds of call find their kernels in one pass
-- over the device tasks.
CREATE OR REPLACE VIEW _flop_calls AS
WITH RECURSIVE gemms AS (
    SELECT id, rank, step, name, input_shapes, NULL::VARCHAR AS concrete, flops_precision(name, input_types) AS precision, dur
    FROM slices
    WHERE kind = 'host_op' AND name IN ('aten::mm', 'aten::addmm', 'aten::bmm', 'aten::baddbmm') AND input_shapes IS NOT NULL
), convs AS (
    SELECT id, rank, step, name, input_shapes, json_extract(args, '$."Concrete Inputs"')::VARCHAR AS concrete,
           flops_precision(name, input_types) AS precision, dur
    FROM slices WHERE kind = 'host_op' AND name = 'aten::conv2d' AND input_shapes IS NOT NULL
), nested(rank, conv_id, id) AS (  -- each convolution and the ops nested in it, at any depth
    SELECT rank, id, id FROM convs
    UNION ALL
    SELECT n.rank, n.conv_id, h.id FROM nested n JOIN slices h ON h.rank = n.rank AND h.parent_id = n.id
    WHERE h.device = 'host' AND h.kind = 'host_op'
), launchers AS (  -- a matrix product launches its kernels itself; a convolution through its nested ops
    SELECT rank, id, id AS call_id FROM gemms UNION ALL SELECT rank, id, conv_id FROM nested
), kernels AS (
    SELECT l.call_id AS id, sum(t.dur) AS dur, any_value(t.device) AS device FROM launchers l JOIN (
        SELECT rank, launch_id, sum(dur) AS dur, any_value(device) AS device FROM slices
        WHERE device <> 'host' AND launch_id IN (SELECT id FROM launchers) AND is_device_task(device, kind) GROUP BY ALL
    ) t ON t.rank = l.rank AND t.launch_id = l.id GROUP BY l.call_id
), calls AS (
    SELECT * FROM gemms UNION ALL SELECT * FROM convs
)
SELECT c.rank, c.step, c.id, c.name, c.input_shapes, c.concrete,
       -- an fp32 convolution runs on TF32 tensor cores where the device has them (cuDNN's default in
       -- PyTorch, torch.backends.cudnn.allow_tf32), an fp32 matrix product on the FP32 cores (TF32 is
       -- off for them by default)
       CASE WHEN c.precision = 'fp32' AND c.name = 'aten::conv2d' AND EXISTS (
                SELECT 1 FROM _device_peaks p WHERE p.rank = c.rank AND p.device = k.device AND p.precision = 'tf32')
            THEN 'tf32' ELSE c.precision END AS precision,
       CASE WHEN h.rank IS NOT NULL THEN 'host' ELSE k.device END AS device,
       CASE WHEN h.rank IS NOT NULL THEN c.dur ELSE coalesce(k.dur, 0) END AS dur
FROM calls c LEFT JOIN kernels k USING (id) LEFT JOIN _host_only_ranks h ON h.rank = c.rank;

-- The FLOPs of calls of one op, shapes and arguments (`_flop_calls` rows grouped by them).
CREATE OR REPLACE MACRO call_flops(name, input_shapes, concrete) AS CASE
    WHEN name = 'aten::conv2d' THEN conv2d_flops(input_shapes, concrete) ELSE gemm_flops(name, input_shapes) END;
