-- view: _classify
-- answers: name-based classification that the reports need beyond a record's kind, in one place.
-- requires:
-- scope: rank

-- Receive operations: their time is pipeline bubble in step_trace (torch_npu counts `hcom_receive*`).
-- NCCL point-to-point kernels are named ncclKernel_SendRecv / ncclDevKernel_SendRecv for both
-- directions, so only explicitly receive-only names count.
CREATE OR REPLACE MACRO is_receive(name) AS
    name ILIKE 'hcom_receive%' OR regexp_matches(name, '(?i)(ncclDevKernel|ncclKernel)_Recv');

-- A device kernel is communication (kind `comm`) by its launcher or by its name; both are decided
-- once, at import, and every view reads the kind stored.
-- By name (`classify.is_comm_kernel`, prof_engine/importers/classify.py, per distinct name as each
-- record is read; a `Collective name` arg too), whatever launched it — DeepEP's all-to-alls run
-- inside user ranges (`dispatch`, `combine`) and custom all-reduces inside model code:
--   libraries: NCCL/RCCL (`ncclKernel_*`, `ncclDevKernel_*`, `rccl*`), HCCL (`hccl*`, `hcom_*`),
--     MSCCL/MSCCL++ (`msccl*`), NVSHMEM (`nvshmem*`, its send/recv and put/get kernels), DeepEP
--     (`deep_ep::{intranode,internode,internode_ll}::{dispatch,combine,notify_*,barrier}`),
--     as a word of the name, mangled names included (`_ZN7deep_ep…`);
--   collectives named in the name, at a word's start: all-reduce (`one_shot_all_reduce`,
--     `two_shot_allreduce`, `oneShotAllReduce`), all-gather, all-to-all (`all_to_all`, `allToAllV`,
--     `all2all`), reduce-scatter, and vLLM's/SGLang's custom all-reduce `cross_device_reduce_*`.
--   Not communication: names where "reduce", "gather", "scatter" or "dispatch" is not such a word
--     (`at::native::reduce_kernel`, `splitKreduce_kernel`, `cub::DeviceReduce*`,
--     `cub::DispatchReduceByKey`, `_scatter_gather_elementwise_kernel`, `small_reduce`), DeepEP's
--     layout kernel `deep_ep::layout::get_dispatch_layout` (a local count before any transfer), and
--     Triton kernels (`triton_*`: Inductor names them after the aten ops they fuse, such as the
--     copy into an all-gather's buffer).
-- By launcher (queries/store/finalize.sql step 4, with `is_collective_op` below): a kernel whose
-- launch (its API call, else its launcher) lies within a collective op of its thread, whatever its
-- name (RCCL builds' kernels, a c10d backend's own all-to-all kernels).
-- A collective op on the host: torch's c10d ops (`c10d::allreduce_`, and torch.compile's
-- `_c10d_functional::all_reduce`), the `record_param_comms` range that carries a collective's
-- metadata, and the record_function ranges of a c10d Work (`nccl:all_reduce`, `gloo:broadcast`).
-- (Prefix tests, not a regular expression: finalisation tests every host record's name, and a
-- regular expression took 13x as long.)
CREATE OR REPLACE MACRO is_collective_op(name) AS
    name = 'record_param_comms' OR starts_with(name, 'c10d::') OR starts_with(name, '_c10d_functional::')
    OR starts_with(name, 'c10d_functional::') OR starts_with(name, 'nccl:') OR starts_with(name, 'gloo:');

-- Idle time on a device stream before a task: since the latest end of the tasks before it on the
-- stream (0 where they overlap, and for the first). A window expression: one row per task.
CREATE OR REPLACE MACRO stream_wait(rank, device, stream, ts, dur, id) AS
    greatest(ts - max(ts + dur) OVER (PARTITION BY rank, device, stream ORDER BY ts, id
                                      ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING), 0);

-- A device task: what runs on a device's streams (kernels, collectives, copies, sets), as op_summary
-- lists and the manifest's per-device `tasks` counts them (not device-side ranges or markers).
-- A runtime call that replays a CUDA (HIP) graph: one call launches every task of the graph.
CREATE OR REPLACE MACRO is_graph_launch(name) AS name IN ('cudaGraphLaunch', 'cuGraphLaunch', 'hipGraphLaunch');

CREATE OR REPLACE MACRO is_device_task(device, kind) AS
    device <> 'host' AND kind IN ('kernel', 'comm', 'memcpy', 'memset');

-- A task the AI Core ran (torch_npu's "With AICore"), by the hardware task type its source wrote:
-- AI_CORE in the text export's trace_view.json, KERNEL_AICORE or KERNEL_AIVEC in its `.db`.
CREATE OR REPLACE MACRO is_ai_core_task(hardware_type) AS
    hardware_type IN ('AI_CORE', 'KERNEL_AICORE', 'KERNEL_AIVEC');

-- Task type of a device record, in msprof's words where they exist.
CREATE OR REPLACE MACRO task_type(kind) AS
    CASE kind WHEN 'kernel' THEN 'KERNEL' WHEN 'comm' THEN 'COMMUNICATION' WHEN 'memcpy' THEN 'MEMCPY'
              WHEN 'memset' THEN 'MEMSET' WHEN 'host_op' THEN 'CPU_OP' ELSE upper(kind) END;

-- Level of a host API call: the CANN level the source recorded (acl, node, hccl, runtime), else
-- CUDA/HIP runtime or driver by category.
-- (JSON is parsed only where a key "level" can be: the run has a source that writes CANN's keys
-- (`run_cann_args()`, a constant from the manifest, defined when a run is opened) and the text
-- holds `level`, or a \u escape.)
-- Opening a run defines run_cann_args() from its manifest first; this default (read the args)
-- is for a connection that did not.
CREATE MACRO IF NOT EXISTS run_cann_args() AS true;
CREATE OR REPLACE MACRO api_arg_level(args) AS
    CASE WHEN run_cann_args() AND (contains(args, 'level') OR contains(args, '\u'))
         THEN json_extract_string(args, '$.level') END;
CREATE OR REPLACE MACRO api_category_level(category) AS CASE WHEN category ILIKE '%driver%' THEN 'driver' ELSE 'runtime' END;
CREATE OR REPLACE MACRO api_level(category, args) AS coalesce(api_arg_level(args), api_category_level(category));

-- Name of a host API call as api_statistic reports it: CANN writes `<layer>@<api>`
-- (`AscendCL@aclrtMemcpyAsync`, `Node@launch`, `Hccl@Launch_Ffts`), msprof reports `<api>`.
CREATE OR REPLACE MACRO api_name(name) AS CASE WHEN contains(name, '@') THEN regexp_replace(name, '^[^@]*@', '') ELSE name END;

-- Collective of a communication op in one word for every vendor, so runs from different sources
-- meet: hcom_allReduce_, ncclKernel_AllReduce_RING_LL_Sum_float and nccl:all_reduce are all
-- `allreduce`; NULL when the name says none. Longer words first (allreduce before reduce).
-- Kernels that do not say it: DeepEP's dispatch and combine (and their notify_*) are all-to-alls
-- of tokens among the expert-parallel ranks; `cross_device_reduce_*` is vLLM's custom all-reduce.
CREATE OR REPLACE MACRO collective_kind(name) AS CASE
    WHEN contains(name, 'deep_ep') AND regexp_matches(name, 'dispatch|combine') THEN 'alltoall'
    WHEN contains(name, 'cross_device_reduce_') THEN 'allreduce'
    ELSE nullif(regexp_replace(regexp_extract(
        replace(lower(name), '_', ''),
        '(allreduce|allgather|reducescatter|alltoall|broadcast|sendrecv|send|receive|recv|reduce|gather|scatter|barrier)'),
        '^recv$', 'receive'), '') END;

-- A record the import could not classify: kind 'other' with no category to tell what it is.
-- ('other' records with a category are the importers' to judge: a category they know is 'other'
-- by design, as torch_npu's enqueue/dequeue and Kineto's overhead are; one they do not know is
-- their `unknown_categories` finding, counted once there.)
CREATE OR REPLACE MACRO is_unclassified(kind, category) AS kind = 'other' AND coalesce(category, '') = '';
