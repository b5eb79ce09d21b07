-- view: _comm
-- answers: communication ops and the HCCL plane tasks each one is made of, in ns — the shared base
--   of `communication` and `communication_matrix`. Definitions follow msprof's communication
--   analysis (Ascend/msprof `analysis/msparser/cluster/communication_parser.py`,
--   `communication_matrix_parser.py`, `meta_parser.py`).
-- requires: slices, comm, _tasks, _classify, _units
-- scope: rank

-- Communication ops: device collectives (HCCL group ops, NCCL kernels), and gloo/NCCL host ranges
-- for ranks without device records (as `_overlap` does). The op type is the source's, else the
-- collective its metadata names, else the one its name says (`collective_kind`). `rdma_tasks`: how many plane tasks one
-- RDMA transfer spans in msprof (3 for send/receive ops, 5 with the barrier of collectives).
CREATE OR REPLACE VIEW _comm_ops AS
SELECT s.id AS op_id, s.rank, s.device, s.step, s.name, coalesce(s.op_type, c.collective, collective_kind(s.name)) AS op_type,
       c.group_name, s.ts, s.ts + s.dur AS te, s.dur, s.pid, try_cast(s.tid AS BIGINT) AS lane,
       CASE WHEN s.name ILIKE '%send%' OR s.name ILIKE '%receive%' THEN 3 ELSE 5 END AS rdma_tasks
FROM slices s LEFT JOIN comm c ON c.slice_id = s.id
WHERE s.kind = 'comm' AND (s.device <> 'host' OR s.rank IN (SELECT rank FROM _host_only_ranks));

-- Plane tasks (kind comm_task) with the op they belong to and their role in msprof's analysis.
-- Owner: an op of the task's group thread — the nearest op thread of the same lane process before the
-- task's thread (trace_view numbers a group's thread N and its planes N+1+plane, the next group after
-- them; legacy msprof timelines put the op thread after the planes: then the nearest one after) —
-- whose window holds the task's end (msprof attributes a task to the op whose window its end falls
-- in; a task ending exactly where an op starts belongs to the op before, unless it lasts 0 ns).
-- The window's end is the vendor's, to the ns: trace_view.json writes durations in µs with sub-ns
-- digits, each end rounded to a whole ns here, so a task whose end the source puts up to 1 ns past
-- its op's (an op's last Reduce_Inline ending 0.69 ns after it) lies in the window.
-- Plane: the thread, in trace order. Roles, per plane in time order:
--   transit — an SDMA Memcpy/Reduce_Inline over a link other than ON_CHIP (local copies are not
--             transit), or an RDMA transfer: a task of transport RDMA followed by RDMASend and
--             Notify_Wait, spanning `rdma_tasks` tasks (msprof `determine_rdma`/`get_rdma_time_info`;
--             size is the first task's) — the tasks it spans have no role of their own;
--   local   — an SDMA Memcpy/Reduce_Inline on chip (counted by the matrix as LOCAL, not as transit);
--   wait    — a Notify_Wait.
-- `master`: the task is on the op's master plane (see `mastered` below); `bandwidth_type`: the
-- communication.json key a transit counts under (HCCS for HCCS and HCCS_SW, PCIE, SIO, RDMA, else
-- SDMA); `link_type`: the matrix's Transport Type (ON_CHIP shows as LOCAL).
CREATE OR REPLACE VIEW _comm_plane_tasks AS
WITH ops AS (
    SELECT op_id, rank, device, pid, lane, ts, te, dur, rdma_tasks FROM _comm_ops
), tasks AS (
    SELECT id, rank, device, pid, tid, name, ts, dur, args FROM slices WHERE kind = 'comm_task'
), groups AS (
    SELECT t.rank, t.device, t.pid, t.tid, o.lane
    FROM (SELECT DISTINCT rank, device, pid, tid FROM tasks) t
    JOIN (SELECT DISTINCT rank, device, pid, lane FROM ops) o
        ON o.rank = t.rank AND o.device = t.device AND o.pid IS NOT DISTINCT FROM t.pid
    QUALIFY row_number() OVER (PARTITION BY t.rank, t.device, t.pid, t.tid
                               ORDER BY o.lane < try_cast(t.tid AS BIGINT) DESC NULLS LAST,
                                        abs(try_cast(t.tid AS BIGINT) - o.lane) NULLS LAST) = 1
), owned AS (
    -- the op of the task's group that started last before the task's last ns
    SELECT o.op_id, o.ts AS op_ts, o.te AS op_te, o.rdma_tasks, t.id, try_cast(t.tid AS BIGINT) AS plane, t.name,
           t.ts, t.ts + t.dur AS te, c.transport, json_extract_string(t.args, '$."link type"') AS link, c.bytes,
           c.src_rank, c.dst_rank
    FROM (SELECT t.*, g.lane AS group_lane FROM tasks t
          JOIN groups g ON g.rank = t.rank AND g.device = t.device AND g.pid IS NOT DISTINCT FROM t.pid
               AND g.tid IS NOT DISTINCT FROM t.tid) t
    ASOF JOIN ops o ON o.rank = t.rank AND o.device = t.device AND coalesce(o.pid, '') = coalesce(t.pid, '')
         AND coalesce(o.lane, -1) = coalesce(t.group_lane, -1) AND t.ts + greatest(t.dur, 1) - 1 >= o.ts
    LEFT JOIN comm c ON c.slice_id = t.id
    WHERE t.ts + t.dur <= o.te + 1
), ordered AS (
    SELECT *,
           transport = 'RDMA' AND lead(name, 1) OVER p = 'RDMASend' AND lead(name, 2) OVER p = 'Notify_Wait'
               AND (CASE rdma_tasks WHEN 3 THEN lead(te, 2) OVER p ELSE lead(te, 4) OVER p END) IS NOT NULL AS rdma_start,
           CASE rdma_tasks WHEN 3 THEN lead(te, 2) OVER p ELSE lead(te, 4) OVER p END AS rdma_end
    FROM owned WINDOW p AS (PARTITION BY op_id, plane ORDER BY ts, id)
), spanned AS (
    SELECT *,
           coalesce(CASE rdma_tasks
               WHEN 3 THEN bool_or(rdma_start) OVER (p ROWS BETWEEN 2 PRECEDING AND 1 PRECEDING)
               ELSE bool_or(rdma_start) OVER (p ROWS BETWEEN 4 PRECEDING AND 1 PRECEDING) END, false) AS inside_rdma
    FROM ordered WINDOW p AS (PARTITION BY op_id, plane ORDER BY ts, id)
), roles AS (
    SELECT op_id, op_ts, op_te, id, plane, name, ts, CASE WHEN rdma_start THEN rdma_end ELSE te END AS te,
           transport, link, bytes, src_rank, dst_rank,
           CASE WHEN inside_rdma THEN NULL
                WHEN rdma_start THEN 'transit'
                WHEN transport = 'SDMA' AND name IN ('Memcpy', 'Reduce_Inline')
                    THEN CASE WHEN link IS DISTINCT FROM 'ON_CHIP' THEN 'transit' ELSE 'local' END
                WHEN name = 'Notify_Wait' THEN 'wait' END AS role,
           rdma_start AND NOT inside_rdma AS rdma
    FROM spanned
), mastered AS (
    -- The master plane, whose tasks alone make the op's time breakdown (msprof: the tasks HCCL flags
    -- is_master). trace_view.json does not carry that flag: the master plane is taken as the first
    -- plane with a Notify_Wait or a transit — on torch_npu's FFTS+ traces Plane 0 holds only on-chip
    -- copies and Plane 1 is the one msprof reports (checked on both ranks of two fixtures).
    SELECT *, count(*) FILTER (WHERE role IN ('transit', 'wait')) OVER o > 0
                  AND plane IS NOT DISTINCT FROM min(plane) FILTER (WHERE role IN ('transit', 'wait')) OVER o AS master
    FROM roles WINDOW o AS (PARTITION BY op_id)
)
SELECT op_id, op_ts, op_te, id, plane, master, name, ts, te, transport, link, bytes, src_rank, dst_rank, role,
       CASE WHEN role <> 'transit' OR role IS NULL THEN NULL WHEN rdma THEN transport
            WHEN link IN ('HCCS', 'HCCS_SW') THEN 'HCCS' WHEN link IN ('PCIE', 'SIO') THEN link ELSE 'SDMA' END
           AS bandwidth_type,
       CASE WHEN role NOT IN ('transit', 'local') OR role IS NULL THEN NULL WHEN rdma THEN transport
            WHEN link = 'ON_CHIP' THEN 'LOCAL' WHEN link = 'HCCS_SW' THEN 'HCCS' ELSE link END AS link_type
FROM mastered;

-- Per op with plane tasks, in ns: msprof's time breakdown of the master plane and the transits of
-- all planes per communication.json transport key.
-- Time, a one-drop partition of the master plane's transit and wait sections clipped to the op's
-- window: emit +1/−1 per section start/end and class, sum the running counts; each segment between
-- two consecutive points is transit when a transit covers it, else wait when a Notify_Wait does
-- (wait = Notify_Wait not covered by transit); synchronization = the wait segments before the
-- first transit starts; busy = transit + wait, idle = elapse − busy.
-- Transports: size and time summed per `bandwidth_type`; SDMA sums every off-chip SDMA copy
-- (HCCS, PCIE, SIO and other links), as msprof adds HCCS, PCIE and SIO into SDMA.
CREATE OR REPLACE VIEW _comm_op_stats AS
WITH tasks AS (
    SELECT * FROM _comm_plane_tasks
), sections AS (
    SELECT op_id, role = 'transit' AS transit, greatest(ts, op_ts) AS s, least(te, op_te) AS e
    FROM tasks WHERE master AND role IN ('transit', 'wait')
), points AS (
    SELECT op_id, t, sum(dt) AS dt, sum(dw) AS dw FROM (
        SELECT op_id, s AS t, transit::INT AS dt, (NOT transit)::INT AS dw FROM sections WHERE e > s
        UNION ALL SELECT op_id, e, -transit::INT, -(NOT transit)::INT FROM sections WHERE e > s
    ) GROUP BY op_id, t
), sweep AS (
    SELECT op_id, t AS s, lead(t) OVER w - t AS len,
           sum(dt) OVER (w ROWS UNBOUNDED PRECEDING) > 0 AS in_transit,
           sum(dw) OVER (w ROWS UNBOUNDED PRECEDING) > 0 AS in_wait
    FROM points WINDOW w AS (PARTITION BY op_id ORDER BY t)
), segments AS (
    SELECT *, min(s) FILTER (WHERE in_transit) OVER (PARTITION BY op_id) AS first_transit FROM sweep WHERE len > 0
), time_info AS (
    SELECT op_id, sum(len) FILTER (WHERE in_transit) AS transit,
           sum(len) FILTER (WHERE in_wait AND NOT in_transit) AS wait,
           sum(len) FILTER (WHERE in_wait AND NOT in_transit AND (first_transit IS NULL OR s < first_transit)) AS sync,
           sum(len) FILTER (WHERE in_wait OR in_transit) AS busy
    FROM segments GROUP BY op_id
), transports AS (
    SELECT op_id, any_value(op_te - op_ts) AS elapse,
           sum(bytes) FILTER (WHERE bandwidth_type = 'RDMA') AS rdma_bytes, sum(te - ts) FILTER (WHERE bandwidth_type = 'RDMA') AS rdma_ns,
           sum(bytes) FILTER (WHERE bandwidth_type = 'HCCS') AS hccs_bytes, sum(te - ts) FILTER (WHERE bandwidth_type = 'HCCS') AS hccs_ns,
           sum(bytes) FILTER (WHERE bandwidth_type = 'PCIE') AS pcie_bytes, sum(te - ts) FILTER (WHERE bandwidth_type = 'PCIE') AS pcie_ns,
           sum(bytes) FILTER (WHERE bandwidth_type = 'SIO') AS sio_bytes, sum(te - ts) FILTER (WHERE bandwidth_type = 'SIO') AS sio_ns,
           sum(bytes) FILTER (WHERE bandwidth_type <> 'RDMA') AS sdma_bytes, sum(te - ts) FILTER (WHERE bandwidth_type <> 'RDMA') AS sdma_ns
    FROM tasks GROUP BY op_id
)
-- an op with plane tasks moved 0 bytes over the transports it did not use (msprof writes 0)
SELECT x.op_id, coalesce(t.transit, 0) AS transit, coalesce(t.wait, 0) AS wait, coalesce(t.sync, 0) AS sync,
       x.elapse - coalesce(t.busy, 0) AS idle,
       coalesce(rdma_bytes, 0) AS rdma_bytes, coalesce(rdma_ns, 0) AS rdma_ns,
       coalesce(hccs_bytes, 0) AS hccs_bytes, coalesce(hccs_ns, 0) AS hccs_ns,
       coalesce(pcie_bytes, 0) AS pcie_bytes, coalesce(pcie_ns, 0) AS pcie_ns,
       coalesce(sdma_bytes, 0) AS sdma_bytes, coalesce(sdma_ns, 0) AS sdma_ns,
       coalesce(sio_bytes, 0) AS sio_bytes, coalesce(sio_ns, 0) AS sio_ns
FROM transports x LEFT JOIN time_info t ON t.op_id = x.op_id;

-- Bytes over ns → GB/s (= MB/ms, msprof's Bandwidth(GB/s)), rounded to 4 decimals as msprof; 0
-- when nothing moved, NULL when unknown.
CREATE OR REPLACE MACRO comm_bandwidth(nbytes, ns) AS
    CASE WHEN ns > 0 THEN round(nbytes / ns, 4) WHEN ns IS NOT NULL THEN 0 END;

-- msprof's Wait Time Ratio and Synchronization Time Ratio: part / (part + transit), 4 decimals;
-- 0 when both are 0, NULL when unknown.
CREATE OR REPLACE MACRO comm_ratio(part, transit) AS
    CASE WHEN part + transit > 0 THEN round(part / (part + transit), 4) WHEN part + transit IS NOT NULL THEN 0 END;
