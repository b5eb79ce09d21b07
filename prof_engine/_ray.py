"""Ray, where a user asks for it (`--executor ray`): the one place prof-engine reaches it.

Ray is an optional extra. Its tasks run in Ray's worker processes, which may sit on other nodes:
what they read (traces, runs) must be at the same path there (a shared file system). What they
write goes straight into the driver's directory where they see it (`shares`: a token the driver
left there), else comes back through Ray's object store as bytes, which the driver writes.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from prof_engine.errors import ProfEngineError

EXECUTORS = ("local", "ray")
RAY_MISSING = "--executor ray needs Ray: pip install 'prof-engine[ray]'"
_TOKEN = ".prof-engine-driver"
# Tasks waited for at once: a wait costs a pass over the refs waited on, so thousands of tasks
# waited for one by one would cost a pass each.
_BATCH = 32


class TaskFailed(ProfEngineError):
    """A Ray task that did not return: its own ProfEngineError, or its worker died."""


def executor_misuse(
    executor: str | None, address: str | None, ranks_per_task: int | None = None
) -> tuple[str, str] | None:
    """The first rule of the executor options that these break, as (the option at fault, why), or
    None. The one place the rules are: the CLI (a usage error), `engine.RunOptions` and the import
    each ask it."""
    if executor is not None and executor not in EXECUTORS:
        return "--executor", f"unknown executor {executor!r}; use {' or '.join(EXECUTORS)}"
    if executor is None and (address is not None or ranks_per_task is not None):
        given = [
            name for name, value in (("--address", address), ("--ranks-per-task", ranks_per_task)) if value is not None
        ]
        return "--executor", f"these options go with --executor: {', '.join(given)}"
    if address is not None and executor != "ray":
        return "--address", "--address names a Ray cluster: use it with --executor ray"
    if ranks_per_task is not None and ranks_per_task < 1:
        return "--ranks-per-task", f"ranks per task: {ranks_per_task} is not a positive number of ranks"
    return None


def check_executor(
    executor: str | None, address: str | None, error: type[ProfEngineError], ranks_per_task: int | None = None
) -> None:
    """`error` where the executor options break a rule (`executor_misuse`)."""
    if misuse := executor_misuse(executor, address, ranks_per_task):
        raise error(misuse[1])


def connect(address: str | None) -> Any:
    """The `ray` module, joined to the cluster at `address` (else to Ray's running instance, or a
    new local one) unless this process already joined one."""
    try:
        import ray
    except ImportError:
        raise ProfEngineError(RAY_MISSING) from None
    if not ray.is_initialized():
        # its notices (a local instance's token, which a user did not set up) are not ours to
        # print; a task's failure comes back to us as an error
        ray.init(address=address, include_dashboard=False, log_to_driver=False, logging_level=logging.ERROR)
    return ray


def completed(ray: Any, refs: list[Any]) -> Iterator[tuple[Any, Any]]:
    """Each of `refs` with its task's return value, in the order the tasks finish, fetched one at a
    time (the driver holds one task's bytes at once); a task that failed gives a `TaskFailed`, or
    re-raises where its error is a bug."""
    waiting = list(refs)
    while waiting:
        ready, waiting = ray.wait(waiting, num_returns=min(len(waiting), _BATCH), timeout=1.0)
        for ref in ready:
            try:
                value = ray.get(ref)
            except Exception as e:  # noqa: BLE001 - the task's failure, told apart from a bug
                if (value := task_error(ray, e)) is None:
                    raise
            yield ref, value


def task_error(ray: Any, e: BaseException) -> TaskFailed | None:
    """A Ray task's failure as prof-engine's one-line error: the task's own ProfEngineError, or a
    worker that died (killed, out of memory) after Ray's retries. None: a bug, to re-raise."""
    if isinstance(e, ray.exceptions.RayTaskError) and isinstance(e.cause, ProfEngineError):
        return TaskFailed(str(e.cause))
    if isinstance(
        e, (ray.exceptions.WorkerCrashedError, ray.exceptions.OutOfMemoryError, ray.exceptions.NodeDiedError)
    ):
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        return TaskFailed(f"a Ray worker died (out of memory?): {first}")
    return None


def mark(directory: Path) -> str:
    """Leave a new token in `directory` (made if need be), the driver's: a task that reads it back
    (`shares`) sees the driver's file system there and writes its files in place."""
    token = uuid.uuid4().hex
    directory.mkdir(parents=True, exist_ok=True)
    (directory / _TOKEN).write_text(token, encoding="ascii")
    return token


def shares(directory: str, token: str) -> bool:
    """Whether this process sees the driver's `directory`: the token `mark` left there is `token`
    (a node without the shared file system finds none, or another driver's)."""
    try:
        return (Path(directory) / _TOKEN).read_text(encoding="ascii") == token
    except OSError:
        return False
