-- view: communication
-- answers: how each communication op spent its time — per rank, step and op: elapse, transit,
--   wait, synchronization and idle time with msprof's ratios, and what it moved over each transport
--   (size, time, bandwidth), one row per op with a column group per transport type.
-- matches: msprof / torch_npu communication.json ("Communication Time Info" and "Communication
--   Bandwidth Info" of each op; its "Total Op Info" is the sum of these rows, ratios recomputed).
-- requires: _comm, _units
-- scope: rank
-- Algorithm (Ascend/msprof `analysis/msparser/cluster/communication_parser.py`): an op's plane tasks
-- are those whose end falls in its window. Time info uses the master plane only (see `_comm`):
-- Transit = merged Memcpy/Reduce_Inline over SDMA off chip and RDMA transfers; Wait = merged
-- Notify_Wait not covered by transit; Synchronization = the wait before the first transit;
-- Idle = Elapse − merged (transit ∪ wait); Elapse = the op's duration; Wait Time Ratio =
-- Wait / (Wait + Transit), Synchronization Time Ratio = Synchronization / (Synchronization +
-- Transit), 4 decimals. Bandwidth info uses the transits of all planes: size and time summed per
-- transport (link type HCCS/HCCS_SW → HCCS, PCIE, SIO, RDMA, other SDMA links → SDMA); SDMA also
-- sums HCCS, PCIE and SIO, as msprof does; Bandwidth = size / time. Ops without plane tasks
-- (NCCL kernels, gloo ranges, Ascend Level0 traces) have Elapse only: the rest is NULL.
-- GPU ops are the communication kernels, by name or launcher (queries/_classify.sql): NCCL/RCCL,
-- DeepEP's dispatch/combine (all-to-alls), custom all-reduces, ... wherever they were launched.
-- column `Rank` INTEGER: global rank
-- column `Device` VARCHAR: device, or `host` for a rank without device records
-- column `Step` BIGINT: training step (NULL: outside every step)
-- column `Group` VARCHAR: process group name or id where the source gives it (NCCL); NULL for HCCL trace_view ops
-- column `Op Name` VARCHAR: communication op (HCCL op such as hcom_allReduce__586_0_1, or a communication kernel: NCCL, DeepEP, custom all-reduce, ...)
-- column `Op Type` VARCHAR: op type (Ascend OP Type such as hcom_allReduce_, else the collective its metadata or name says: allreduce, alltoall for DeepEP's dispatch/combine, ...)
-- column `Start Time(us)` DECIMAL(26,3): op start, µs since the Unix epoch
-- column `Elapse Time(ms)` DOUBLE: op duration, ms
-- column `Transit Time(ms)` DOUBLE: master-plane time moving data, ms
-- column `Wait Time(ms)` DOUBLE: master-plane Notify_Wait time not overlapped by transit, ms
-- column `Synchronization Time(ms)` DOUBLE: wait before the first transit, ms
-- column `Idle Time(ms)` DOUBLE: elapse minus transit and wait, ms
-- column `Wait Time Ratio` DOUBLE: wait / (wait + transit)
-- column `Synchronization Time Ratio` DOUBLE: synchronization / (synchronization + transit)
-- column `RDMA Transit Size(MB)` DOUBLE: bytes moved by RDMA transfers, MB (10^6 B)
-- column `RDMA Transit Time(ms)` DOUBLE: summed RDMA transfer time, ms
-- column `RDMA Bandwidth(GB/s)` DOUBLE: RDMA size / time, GB/s (0 when nothing moved)
-- column `HCCS Transit Size(MB)` DOUBLE: bytes copied over HCCS links, MB
-- column `HCCS Transit Time(ms)` DOUBLE: summed HCCS copy time (all planes), ms
-- column `HCCS Bandwidth(GB/s)` DOUBLE: HCCS size / time, GB/s
-- column `PCIE Transit Size(MB)` DOUBLE: bytes copied over PCIe links, MB
-- column `PCIE Transit Time(ms)` DOUBLE: summed PCIe copy time, ms
-- column `PCIE Bandwidth(GB/s)` DOUBLE: PCIe size / time, GB/s
-- column `SDMA Transit Size(MB)` DOUBLE: bytes of all off-chip SDMA copies (HCCS + PCIE + SIO + other links), MB
-- column `SDMA Transit Time(ms)` DOUBLE: summed time of those copies, ms
-- column `SDMA Bandwidth(GB/s)` DOUBLE: SDMA size / time, GB/s
-- column `SIO Transit Size(MB)` DOUBLE: bytes copied over SIO links, MB
-- column `SIO Transit Time(ms)` DOUBLE: summed SIO copy time, ms
-- column `SIO Bandwidth(GB/s)` DOUBLE: SIO size / time, GB/s
WITH ops AS (
    SELECT o.*, x.* EXCLUDE (op_id) FROM _comm_ops o LEFT JOIN _comm_op_stats x ON x.op_id = o.op_id
)
SELECT rank AS "Rank", device AS "Device", step AS "Step", group_name AS "Group", name AS "Op Name",
       op_type AS "Op Type", us_ts(ts) AS "Start Time(us)", ms(dur) AS "Elapse Time(ms)",
       ms(transit) AS "Transit Time(ms)", ms(wait) AS "Wait Time(ms)", ms(sync) AS "Synchronization Time(ms)",
       ms(idle) AS "Idle Time(ms)", comm_ratio(wait, transit) AS "Wait Time Ratio",
       comm_ratio(sync, transit) AS "Synchronization Time Ratio",
       rdma_bytes / 1e6 AS "RDMA Transit Size(MB)", ms(rdma_ns) AS "RDMA Transit Time(ms)",
       comm_bandwidth(rdma_bytes, rdma_ns) AS "RDMA Bandwidth(GB/s)",
       hccs_bytes / 1e6 AS "HCCS Transit Size(MB)", ms(hccs_ns) AS "HCCS Transit Time(ms)",
       comm_bandwidth(hccs_bytes, hccs_ns) AS "HCCS Bandwidth(GB/s)",
       pcie_bytes / 1e6 AS "PCIE Transit Size(MB)", ms(pcie_ns) AS "PCIE Transit Time(ms)",
       comm_bandwidth(pcie_bytes, pcie_ns) AS "PCIE Bandwidth(GB/s)",
       sdma_bytes / 1e6 AS "SDMA Transit Size(MB)", ms(sdma_ns) AS "SDMA Transit Time(ms)",
       comm_bandwidth(sdma_bytes, sdma_ns) AS "SDMA Bandwidth(GB/s)",
       sio_bytes / 1e6 AS "SIO Transit Size(MB)", ms(sio_ns) AS "SIO Transit Time(ms)",
       comm_bandwidth(sio_bytes, sio_ns) AS "SIO Bandwidth(GB/s)"
FROM ops
ORDER BY "Rank", "Device", "Step" NULLS LAST, ts, "Op Name"
