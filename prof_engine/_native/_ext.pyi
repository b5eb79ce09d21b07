"""prof-engine's native helpers (`module.c`): arrays are buffers (bytes, bytearray, memoryview,
pyarrow.Buffer) whose sizes the functions check against the counts; states are opaque capsules."""

from typing import NewType

from typing_extensions import Buffer  # collections.abc.Buffer from 3.12

HostState = NewType("HostState", object)
LanesState = NewType("LanesState", object)

def scan(
    buf: Buffer,
    start: int,
    end: int,
    after_event: int,
    cap: int,
    top_names: bytes,
    args_names: bytes,
    starts: Buffer,
    lens: Buffer,
    ev_starts: Buffer,
    ev_lens: Buffer,
    /,
) -> tuple[int, int, int, int, int]:
    """Scan up to `cap` events of `buf[start:end]`: (consumed, n, err_pos, status, after_event)."""

def gather_size(buf: Buffer, starts: Buffer, lens: Buffer, rows: Buffer | None, n: int, /) -> int: ...
def gather(
    buf: Buffer,
    starts: Buffer,
    lens: Buffer,
    rows: Buffer | None,
    n: int,
    mode: int,
    data: Buffer,
    offsets: Buffer,
    validity: Buffer,
    special: Buffer,
    /,
) -> tuple[int, int]:
    """(values flagged special, nulls)."""

def gather_i64(
    buf: Buffer, starts: Buffer, lens: Buffer, rows: Buffer | None, n: int, mode: int, out: Buffer, validity: Buffer, /
) -> tuple[int, int]:
    """(values left to the caller, nulls)."""

def host_new(n: int, rank: Buffer, start: Buffer, end: Buffer, step: Buffer, known: Buffer, /) -> HostState: ...
def step_at(state: HostState, n: int, rank: Buffer, ts: Buffer, step: Buffer, step_valid: Buffer, /) -> None: ...
def host_pass(
    state: HostState,
    n: int,
    lane: Buffer,
    rank: Buffer,
    ts: Buffer,
    dur: Buffer,
    id: Buffer,
    nests: Buffer,
    step: Buffer,
    step_valid: Buffer,
    depth: Buffer,
    depth_valid: Buffer,
    parent: Buffer,
    parent_valid: Buffer,
    /,
) -> None: ...
def lanes_new() -> LanesState: ...
def lanes(
    state: LanesState,
    n: int,
    key: Buffer,
    b: Buffer,
    s: Buffer,
    e: Buffer,
    out_key: Buffer,
    out_lane: Buffer,
    out_s: Buffer,
    out_e: Buffer,
    /,
) -> int: ...
def lanes_finish(state: LanesState, out_key: Buffer, out_lane: Buffer, out_s: Buffer, out_e: Buffer, /) -> int: ...
