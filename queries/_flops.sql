-- view: _flops
-- answers: FLOPs of a matrix multiply or a 2-D convolution from its recorded input shapes, as
--   torch.profiler's with_flops counts them: 2·M·K·N for aten::mm and addmm, times the batch for
--   bmm and baddbmm (the added input of addmm and baddbmm not counted); conv2d below; NULL for
--   other ops or shapes that do not fit.
-- requires:
-- scope: rank
-- `shapes` is the recorded text: inputs separated by ';', dimensions by ',' (`64,32;32,16`).
CREATE OR REPLACE MACRO _shape_dims(shapes) AS
    list_transform(string_split(shapes, ';'), lambda s: list_transform(string_split(s, ','), lambda d: TRY_CAST(d AS DOUBLE)));
CREATE OR REPLACE MACRO _matmul_flops(a, b) AS CASE
    WHEN len(a) = 2 AND len(b) = 2 AND a[2] = b[1] THEN 2 * a[1] * a[2] * b[2]
    WHEN len(a) = 3 AND len(b) = 3 AND a[1] = b[1] AND a[3] = b[2] THEN 2 * a[1] * a[2] * a[3] * b[3] END;
-- The matrices are the first two inputs, after the added one for addmm and baddbmm.
CREATE OR REPLACE MACRO gemm_flops(name, shapes) AS CASE WHEN name IN ('aten::mm', 'aten::bmm')
    THEN _matmul_flops(_shape_dims(shapes)[1], _shape_dims(shapes)[2])
    WHEN name IN ('aten::addmm', 'aten::baddbmm') THEN _matmul_flops(_shape_dims(shapes)[2], _shape_dims(shapes)[3]) END;

-- FLOPs of aten::conv2d as torch.profiler counts them: 2·N·H_out·W_out·(the weight's C_out·C_in/groups·kH·kW),
-- H_out = ⌊(H + 2·padding − dilation·(kH − 1) − 1) / stride⌋ + 1 (likewise W_out). The input and
-- weight dims are the first two recorded shapes; stride, padding and dilation are Kineto's
-- `Concrete Inputs` 4 to 6 (JSON text such as `["", "", "", "[2, 2]", "[1, 1]", "[1, 1]", "1"]`).
-- NULL where one is missing or not a pair of numbers (padding='same' records none, and torch
-- counts nothing then either).
CREATE OR REPLACE MACRO _conv_out(size, kernel, stride, padding, dilation) AS
    floor((size + 2 * padding - dilation * (kernel - 1) - 1) / stride) + 1;
CREATE OR REPLACE MACRO _conv2d_flops(x, w, s, p, d) AS CASE
    WHEN len(x) = 4 AND len(w) = 4 AND len(s) = 2 AND len(p) = 2 AND len(d) = 2 AND s[1] > 0 AND s[2] > 0
    THEN 2 * x[1] * _conv_out(x[3], w[3], s[1], p[1], d[1]) * _conv_out(x[4], w[4], s[2], p[2], d[2])
           * w[1] * w[2] * w[3] * w[4] END;
CREATE OR REPLACE MACRO conv2d_flops(shapes, concrete) AS _conv2d_flops(
    _shape_dims(shapes)[1], _shape_dims(shapes)[2],
    TRY_CAST(json_extract_string(concrete, '$[3]') AS DOUBLE[]), TRY_CAST(json_extract_string(concrete, '$[4]') AS DOUBLE[]),
    TRY_CAST(json_extract_string(concrete, '$[5]') AS DOUBLE[]));

-- The precision of a matrix multiply or convolution: its (first) matrix input's recorded type,
-- `Input type` as torch.profiler's record_shapes writes it (float, c10::BFloat16, ...); inputs
-- separated by ';' as in the shapes. NULL where the type is not one of these or not recorded.
CREATE OR REPLACE MACRO _dtype_precision(t) AS CASE
    WHEN t = 'c10::BFloat16' THEN 'bf16' WHEN t = 'c10::Half' THEN 'fp16' WHEN t = 'float' THEN 'fp32'
    WHEN t = 'double' THEN 'fp64' WHEN t LIKE 'c10::Float8%' THEN 'fp8' END;
CREATE OR REPLACE MACRO flops_precision(name, types) AS _dtype_precision(trim(split_part(types, ';',
    CASE WHEN name IN ('aten::addmm', 'aten::baddbmm') THEN 2 ELSE 1 END)));
