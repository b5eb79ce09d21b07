"""`python -m prof_engine.collect.run SCRIPT ARGS...` (or `-m MODULE ARGS...`): run a Python program
under the collector without changing its code. `prof-engine collect` starts programs this way.

The settings come from the file `PROF_ENGINE_CONFIG` names. Steps are found in the program
itself: each return from the first optimizer's `step()` ends a step (see `OptimizerSteps`).
A program that never steps an optimizer is recorded as one step. The Profiler is stopped when
the program ends, however it ends, so its run is complete; the program's exit status is kept.
"""

from __future__ import annotations

import functools
import logging
import os
import runpy
import sys
from typing import Any

from prof_engine.collect import handoff
from prof_engine.collect.launch import WRITER_FD_ENV
from prof_engine.collect.profiler import Profiler

log = logging.getLogger("prof_engine")


class OptimizerSteps:
    """Ends a Profiler step each time the first optimizer the program steps returns from `step()`.

    Not through torch's optimizer post-hooks: they run inside the optimizer's `record_function`
    range, and a step boundary restarts Kineto, which must not happen while a range is open (torch
    then crashes ending it). torch wraps each optimizer class's `step` with
    `Optimizer.profile_hook_step` when its first instance is made; wrapping what that returns puts
    the boundary just after the range closes. Without that hook (another torch) steps are not found.
    """

    def __init__(self, prof: Profiler) -> None:
        self.prof = prof
        self.optimizer: Any = None
        self._restore: Any = None
        if prof.settings.schedule is None or "torch" not in sys.modules and not _torch_importable():
            return
        from torch.optim import Optimizer

        original = Optimizer.__dict__.get("profile_hook_step")
        if not isinstance(original, staticmethod):
            log.warning("prof_engine: cannot find optimizer steps in this torch; the program is recorded as one step")
            return
        stepped = self._stepped

        def profile_hook_step(func: Any) -> Any:
            wrapped = original.__func__(func)

            @functools.wraps(wrapped)
            def step_then_mark(*args: Any, **kwargs: Any) -> Any:
                out = wrapped(*args, **kwargs)
                stepped(args[0])
                return out

            return step_then_mark

        # patching torch's class is the point here: mypy rejects assigning to a method
        Optimizer.profile_hook_step = staticmethod(profile_hook_step)  # type: ignore[method-assign]
        self._restore = (Optimizer, original)

    def _stepped(self, optimizer: Any) -> None:
        if self.optimizer is None:
            self.optimizer = optimizer
        if optimizer is self.optimizer:
            self.prof.step()

    def remove(self) -> None:
        if self._restore is not None:
            cls, original = self._restore
            cls.profile_hook_step = original


def _writer_fd() -> int | None:
    """The pipe `prof-engine collect` waits on (see launch.py), taken out of the environment so
    that no process the program starts looks for it."""
    value = os.environ.pop(WRITER_FD_ENV, None)
    try:
        fd = int(value) if value is not None else None
        if fd is not None:
            os.fstat(fd)
    except (ValueError, OSError):
        return None
    return fd


def _torch_importable() -> bool:
    import importlib.util

    return importlib.util.find_spec("torch") is not None


def run_program(args: list[str]) -> int:
    """Run `args` (a script and its arguments, or `-m module ...`) as `__main__`, profiled."""
    sys.argv = [args[1], *args[2:]] if args[0] == "-m" else list(args)  # as the program will see it
    if args[0] != "-m":
        sys.path.insert(0, os.path.dirname(os.path.abspath(args[0])))
    prof = Profiler(start_profile=False)
    steps = OptimizerSteps(prof)
    done_fd = _writer_fd()
    handoff.inherited_fds = (done_fd,) if done_fd is not None else ()
    try:
        prof.start()
    finally:
        handoff.inherited_fds = ()
        if done_fd is not None:  # the writer holds it now (if one started); the program's forks must not
            os.close(done_fd)
    code: Any = 0
    try:
        if args[0] == "-m":
            runpy.run_module(args[1], run_name="__main__", alter_sys=True)
        else:
            runpy.run_path(args[0], run_name="__main__")
    except SystemExit as e:
        code = e.code
    finally:
        steps.remove()
        prof.stop()
    if code is None or isinstance(code, int):
        return code or 0
    print(code, file=sys.stderr)
    return 1


def main() -> None:
    args = sys.argv[1:]
    if not args or args[0] in ("-h", "--help") or (args[0] == "-m" and len(args) < 2):
        print(__doc__.strip().splitlines()[0], file=sys.stderr)
        sys.exit(2)
    sys.exit(run_program(args))


if __name__ == "__main__":
    main()
