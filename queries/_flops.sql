-- view: _flops
-- answers: FLOPs of a matrix multiply from its recorded input shapes, as torch.profiler's with_flops
--   counts them: 2·M·K·N for aten::mm and addmm, times the batch for bmm and baddbmm (the added
--   input of addmm and baddbmm not counted); NULL for other ops or shapes that do not fit.
-- requires:
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
