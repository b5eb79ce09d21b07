-- view: fusion_op
-- answers: which fused operators the compiler made and what they cost — per rank, device and
--   fused kernel, the ops it fuses (as its name says them), how it was fused, its instances and
--   device time: CANN's graph fusion (`FusionOp_BiasAdd_ReluV2`) and torch.compile's Inductor
--   kernels (`triton_poi_fused_add_mul_0`).
-- matches: the Fusion Op and Original Ops columns of msprof's fusion_op.csv, as far as the op
--   type names them (the memory columns come from the model's graph, which no trace has); the
--   Triton kernel names torch.compile gives its fused kernels.
-- requires: slices, _durations, _units
-- scope: rank
-- Ascend names a fused op's type `FusionOp_` and its ops' types, which are CamelCase and hold no
-- `_`: the original ops are the parts. Inductor names a kernel `triton_<kind>_fused_<ops>_<n>`:
-- `poi` pointwise, `red` reduction, `per` persistent reduction, `tem` a template (a GEMM with
-- its epilogue); the ops are aten names joined by `_`, which hold `_` themselves (`native_layer_norm`),
-- so they are shown as written.
-- column `Rank` INTEGER: global rank
-- column `Device` VARCHAR: device
-- column `Fusion Op` VARCHAR: the fused op: its op type (Ascend), its kernel name (Triton)
-- column `Original Ops` VARCHAR: the ops it fuses: op types joined by `, ` (Ascend); the kernel name's part between `fused_` and its index (Triton)
-- column `Fusion Type` VARCHAR: graph fusion (Ascend); pointwise, reduction, persistent reduction or template (Triton)
-- column `Count` BIGINT: instances run
-- column `Total Time(us)` DOUBLE: summed duration, µs
-- column `Avg(us)` DOUBLE: mean duration, µs
-- column `Max(us)` DOUBLE: longest, µs
-- column `Time(%)` DOUBLE: share of the device's kernel time (fused or not)
WITH records AS (  -- every kernel, named by its fused op ('' if none: in the shares, not a row)
    SELECT rank, device, dur, CASE WHEN starts_with(op_type, 'FusionOp_') THEN op_type
                                   WHEN regexp_matches(name, '^triton_(poi|red|per|tem)_fused_.+_\d+$') THEN name
                                   ELSE '' END AS name
    FROM slices WHERE device <> 'host' AND kind = 'kernel'
), stats AS (
    SELECT rank, device, name AS fused, starts_with(name, 'FusionOp_') AS graph, share, total, n, mean, hi
    FROM duration_stats(records)
)
SELECT rank AS "Rank", device AS "Device", fused AS "Fusion Op",
       CASE WHEN graph THEN replace(fused[10:], '_', ', ')
            ELSE regexp_extract(fused, '^triton_[a-z]+_fused_(.+)_\d+$', 1) END AS "Original Ops",
       CASE WHEN graph THEN 'graph fusion'
            ELSE CASE regexp_extract(fused, '^triton_([a-z]+)_', 1) WHEN 'poi' THEN 'pointwise' WHEN 'red' THEN 'reduction'
                                                                  WHEN 'per' THEN 'persistent reduction' ELSE 'template' END
       END AS "Fusion Type",
       n AS "Count", us(total) AS "Total Time(us)", us(mean) AS "Avg(us)", us(hi) AS "Max(us)",
       round(share, 3) AS "Time(%)"
FROM stats WHERE fused <> ''
ORDER BY "Rank", "Device", total DESC, "Fusion Op"
