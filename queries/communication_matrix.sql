-- view: communication_matrix
-- answers: what each communication op moved over each link — per rank, step, op and src→dst rank
--   pair: transport type, size, time and bandwidth, with the op's rank among the ops of its kind on
--   that link.
-- matches: msprof / torch_npu communication_matrix.json, one row per op and link instead of its
--   buckets: torch_npu groups a step's ops by kind (the first of send, reduce, invalid, broadcast,
--   allreduce, receive, allgather, reducescatter, scatter, alltoall, alltoallv, alltoallvc,
--   batchsendrecv found in the lower-cased op name) and group, sorts each link's ops by bandwidth
--   (fastest first) and keeps `<kind>-top1` (rank 1), `-middle` (rank ⌊n/2⌋+1), `-bottom1/2/3`
--   (ranks n, n−1, n−2) and `-total` (size and time summed over the n ops, bandwidth recomputed);
--   `Buckets` names the ones a row stands for.
-- requires: _comm, _units
-- scope: rank
-- Algorithm (Ascend/msprof `analysis/msparser/cluster/communication_matrix_parser.py`): over all
-- planes of the op, every Memcpy/Reduce_Inline of transport SDMA (on-chip copies included, shown as
-- LOCAL) and every RDMA transfer counts for the link `src rank`-`dst rank` (dst = src where the
-- task has none); size and time are summed per link, Transport Type is the task's link type
-- (ON_CHIP → LOCAL, HCCS_SW → HCCS). Only Ascend traces with HCCL plane tasks have links; NCCL
-- kernels carry no per-link data.
-- Links to or from ranks the run does not hold (the job's other ranks, not imported: 0→2…7 in a
-- 2-rank capture of an 8-rank group) are kept, as the vendor's communication_matrix.json lists
-- them, though their peer side is in no view; `data_quality` says so (the note
-- links_to_absent_ranks: per rank, those links, the ranks and the MB moved over them).
-- column `Rank` INTEGER: global rank
-- column `Device` VARCHAR: device
-- column `Step` BIGINT: training step (NULL: outside every step)
-- column `Group` VARCHAR: process group name where the source gives it; NULL for HCCL trace_view ops
-- column `Op Name` VARCHAR: communication op (e.g. hcom_allReduce__586_2_1)
-- column `Op Type` VARCHAR: op type (Ascend OP Type such as hcom_allReduce_)
-- column `Src Rank` INTEGER: sending rank (the task's src rank)
-- column `Dst Rank` INTEGER: receiving rank (= Src Rank for on-chip copies)
-- column `Transport Type` VARCHAR: link type: LOCAL (on chip), HCCS, PCIE, SIO, RDMA, ...
-- column `Transit Size(MB)` DOUBLE: bytes moved over the link by this op, MB (10^6 B)
-- column `Transit Time(ms)` DOUBLE: summed duration of those transfers, ms
-- column `Bandwidth(GB/s)` DOUBLE: size / time, GB/s, 4 decimals (0 when the time is 0)
-- column `Bandwidth Rank` BIGINT: 1 for the fastest of the step's ops of this kind and group on this link
-- column `Buckets` VARCHAR: the communication_matrix.json buckets this row is (top1, middle, bottom1..3, comma separated); NULL for none
WITH links AS (
    SELECT t.op_id, t.src_rank AS src, coalesce(t.dst_rank, t.src_rank) AS dst,
           arg_max(t.link_type, t.ts) AS transport, sum(t.bytes) AS nbytes, sum(t.te - t.ts) AS ns
    FROM _comm_plane_tasks t
    WHERE t.link_type IS NOT NULL AND t.src_rank IS NOT NULL
    GROUP BY t.op_id, src, dst
), ranked AS (
    SELECT o.rank, o.device, o.step, o.group_name, o.name, o.op_type, o.ts, l.*,
           comm_bandwidth(l.nbytes, l.ns) AS bandwidth,
           row_number() OVER k AS pos, count(*) OVER g AS n
    FROM links l JOIN _comm_ops o ON o.op_id = l.op_id
    WINDOW g AS (
        PARTITION BY o.rank, o.device, o.step, o.group_name, l.src, l.dst,
                     coalesce(nullif(regexp_extract(lower(o.name), 'send|reduce|invalid|broadcast|allreduce|receive|allgather|reducescatter|scatter|alltoall|alltoallv|alltoallvc|batchsendrecv'), ''),
                              split_part(o.name, '__', 1))),
        k AS (g ORDER BY comm_bandwidth(l.nbytes, l.ns) DESC, o.ts, o.op_id)
)
SELECT rank AS "Rank", device AS "Device", step AS "Step", group_name AS "Group", name AS "Op Name",
       op_type AS "Op Type", src AS "Src Rank", dst AS "Dst Rank", transport AS "Transport Type",
       nbytes / 1e6 AS "Transit Size(MB)", ms(ns) AS "Transit Time(ms)", bandwidth AS "Bandwidth(GB/s)",
       pos AS "Bandwidth Rank",
       nullif(concat_ws(',', CASE WHEN pos = 1 THEN 'top1' END, CASE WHEN pos = n // 2 + 1 THEN 'middle' END,
                        CASE WHEN pos = n THEN 'bottom1' END, CASE WHEN n >= 2 AND pos = n - 1 THEN 'bottom2' END,
                        CASE WHEN n >= 3 AND pos = n - 2 THEN 'bottom3' END), '') AS "Buckets"
FROM ranked
ORDER BY "Rank", "Device", "Step" NULLS LAST, ts, "Op Name", "Src Rank", "Dst Rank"
