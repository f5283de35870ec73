"""Async vector pool: envs stepped in subprocess workers, data exchanged through shared memory.

Every array of a step (observations, rewards, flags, and the actions) lives in one shared
buffer laid out exactly like ``empty_step_arrays`` / ``action_arrays`` over the whole pool.
Each worker runs an :class:`EnvSlots` over its own contiguous row slice of those arrays, so the
semantics are those of :class:`SyncPool`; the pipes carry only tiny command and ack messages.
A worker that raises, dies or hangs becomes an :class:`EnvError`, never a hang.
"""

from __future__ import annotations

import contextlib
import multiprocessing as mp
import os
import pickle
import signal
import time
import traceback
from collections.abc import Callable, Sequence
from multiprocessing.connection import Connection
from multiprocessing.connection import wait as mp_wait
from multiprocessing.process import BaseProcess
from typing import Any, NoReturn

import numpy as np

from evohpo.envs.pool import (
    EnvSlots,
    Seeds,
    StepResult,
    VectorPool,
    action_arrays,
    copy_result,
    empty_step_arrays,
    env_seeds,
)
from evohpo.envs.spec import EnvSpec
from evohpo.errors import EnvError

_POLL_S = 0.5  # longest single wait, so a dead worker is noticed even if its sentinel is missed
_ALIGN = 64    # cache-line aligned arrays
_STEP, _OK = b"s", b"k"  # the hot-path messages, sent as raw bytes: no pickling per step

Layout = list[tuple[tuple[str, ...], tuple[int, ...], np.dtype, int]]  # path, shape, dtype, offset


class _RemoteTraceback(Exception):
    """Carries a worker's formatted traceback as the ``__cause__`` of the EnvError."""

    def __str__(self) -> str:
        return str(self.args[0])


def _layout(spec: EnvSpec, n: int) -> tuple[Layout, int]:
    """Where each pool array lives in the shared buffer, and the buffer's size in bytes."""
    template: dict[str, Any] = {**empty_step_arrays(spec, n), "actions": action_arrays(spec, n)}
    layout: Layout = []
    offset = 0
    for key, v in template.items():
        items = ([((key,), v)] if isinstance(v, np.ndarray)
                 else [((key, a), x) for a, x in v.items()])
        for path, arr in items:
            layout.append((path, arr.shape, arr.dtype, offset))
            offset += -(-arr.nbytes // _ALIGN) * _ALIGN
    return layout, max(offset, _ALIGN)


def _views(buf: Any, layout: Layout, lo: int,
           hi: int) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    """Numpy views of rows ``lo:hi`` of every shared array: (step arrays, actions)."""
    out: dict[str, Any] = {}
    for path, shape, dtype, offset in layout:
        view = np.frombuffer(buf, dtype, int(np.prod(shape)), offset).reshape(shape)[lo:hi]
        if len(path) == 1:
            out[path[0]] = view
        else:
            out.setdefault(path[0], {})[path[1]] = view
    return out, out.pop("actions")


def _worker(conn: Connection, inherited: list[Connection],
            env_fns: Sequence[Callable[[], Any]], spec: EnvSpec, buf: Any, layout: Layout,
            lo: int, hi: int) -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's to handle
    # a worker forked while the trainer's SIGTERM handler is installed would run it when the
    # pool terminates the worker: the default ends the worker, silently and at once
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    for c in inherited:  # forked copies of parent ends would keep pipes open after the parent dies
        c.close()
    envs: list[Any] = []
    try:
        arrays, actions = _views(buf, layout, lo, hi)
        envs = [fn() for fn in env_fns]
        slots = EnvSlots(envs, spec, arrays, actions)
        conn.send_bytes(_OK)
        while True:
            msg = conn.recv_bytes()
            if msg == _STEP:
                slots.step()
            else:
                cmd, arg = pickle.loads(msg)
                if cmd == "get_state":
                    conn.send_bytes(pickle.dumps(("state", slots.get_state())))
                    continue
                if cmd == "set_state":
                    slots.set_state(arg)
                elif cmd == "reset":
                    slots.reset(arg)
                else:  # "close"
                    break
            conn.send_bytes(_OK)
    except EOFError:  # the parent went away; nothing to report to
        pass
    except BaseException as e:  # everything goes back to the parent
        with contextlib.suppress(Exception):
            conn.send_bytes(pickle.dumps((type(e).__name__, str(e), traceback.format_exc())))
    finally:
        for env in envs:
            with contextlib.suppress(Exception):
                env.close()
        conn.close()


class AsyncPool(VectorPool):
    """Envs in ``workers`` subprocesses (0: one per CPU), several contiguous envs per worker."""

    def __init__(self, env_fns: Sequence[Callable[[], Any]], spec: EnvSpec, workers: int = 0,
                 timeout: float = 60.0, name: str = "env"):
        self._closed, self._reason = True, ""  # so close()/__del__ work if __init__ fails early
        n = len(env_fns)
        if n < 1:
            raise ValueError("AsyncPool needs at least one env")
        if workers < 0:
            raise ValueError(f"workers must be >= 0, got {workers}")
        self.spec, self.num_envs, self.timeout, self.name = spec, n, float(timeout), name
        w = min(workers or os.cpu_count() or 1, n)
        base, extra = divmod(n, w)
        sizes = [base + (i < extra) for i in range(w)]
        self._bounds = [(sum(sizes[:i]), sum(sizes[:i + 1])) for i in range(w)]
        method = "fork" if "fork" in mp.get_all_start_methods() else "spawn"
        ctx: Any = mp.get_context(method)  # typeshed: BaseContext has no Process
        layout, nbytes = _layout(spec, n)
        self._buf: Any = ctx.RawArray("b", nbytes)
        self._arrays, self._actions = _views(self._buf, layout, 0, n)
        self._conns: list[Connection] = []
        self._procs: list[BaseProcess] = []
        self._closed, self._waiting = False, False
        for i, (lo, hi) in enumerate(self._bounds):
            parent, child = ctx.Pipe()
            inherited = [*self._conns, parent] if method == "fork" else []
            p = ctx.Process(target=_worker, name=f"evohpo-{name}-{i}", daemon=True,
                            args=(child, inherited, list(env_fns[lo:hi]), spec, self._buf,
                                  layout, lo, hi))
            p.start()
            child.close()  # only the worker holds it now, so its death shows up as EOF here
            self._conns.append(parent)
            self._procs.append(p)
        self._gather("env construction")

    @property
    def num_workers(self) -> int:
        return len(self._procs)

    @property
    def pids(self) -> list[int | None]:
        return [p.pid for p in self._procs]

    def _held(self, w: int) -> str:
        lo, hi = self._bounds[w]
        return f"env {lo}" if hi - lo == 1 else f"envs {lo}-{hi - 1}"

    def _check(self, stepping: bool | None = None) -> None:
        if self._closed:
            after = f" after an error: {self._reason}" if self._reason else ""
            raise EnvError(f"env {self.name!r}: the async pool is closed{after}")
        if stepping is not None and self._waiting != stepping:
            raise RuntimeError("step_wait() called without a pending step_async()" if stepping
                               else "step_async() already pending; call step_wait() first")

    def _fail(self, msg: str, cause: BaseException | None = None) -> NoReturn:
        self._reason = msg
        self._shutdown(graceful=False)
        raise EnvError(msg) from cause

    def _died(self, w: int) -> NoReturn:
        p = self._procs[w]
        p.join(1.0)  # the pipe can close a moment before the exit status is ready
        code = p.exitcode
        sig = {-s.value: f" ({s.name})" for s in signal.Signals}.get(code or 0, "")  # -9: SIGKILL
        self._fail(f"env {self.name!r}: worker {w} ({self._held(w)}, pid {p.pid}) died "
                   f"with exit code {code}{sig}")

    def _send(self, w: int, msg: bytes) -> None:
        try:
            self._conns[w].send_bytes(msg)
        except OSError:  # broken pipe: the worker is gone
            self._died(w)

    def _gather(self, what: str) -> dict[int, Any]:
        """Wait for every worker's ack (or reply); any error, death or timeout closes the pool
        and raises."""
        try:
            return self._collect(what)
        except BaseException as e:
            if not self._closed:  # e.g. Ctrl-C: acks still in flight would desync later calls
                self._reason = f"{type(e).__name__} while waiting for {what}"
                self._shutdown(graceful=False)
            raise

    def _collect(self, what: str) -> dict[int, Any]:
        replies: dict[int, Any] = {}
        pending = set(range(len(self._procs)))
        deadline = time.monotonic() + self.timeout
        while pending:
            left = deadline - time.monotonic()
            if left <= 0:
                w = min(pending)
                self._fail(f"env {self.name!r}: worker {w} ({self._held(w)}) timed out after "
                           f"{self.timeout:g} s during {what}")
            objs: list[Any] = [self._conns[w] for w in pending]
            mp_wait(objs + [self._procs[w].sentinel for w in pending], min(left, _POLL_S))
            for w in sorted(pending):
                conn = self._conns[w]
                if conn.poll():  # read before judging liveness: a worker may report, then exit
                    try:
                        msg = conn.recv_bytes()
                    except (EOFError, OSError):
                        self._died(w)
                    if msg != _OK:
                        reply = pickle.loads(msg)
                        if reply[0] == "state":
                            replies[w] = reply[1]
                            pending.discard(w)
                            continue
                        etype, emsg, tb = reply
                        self._fail(f"env {self.name!r}: worker {w} ({self._held(w)}) raised "
                                   f"{etype}: {emsg}", _RemoteTraceback(tb))
                    pending.discard(w)
                elif not self._procs[w].is_alive():
                    self._died(w)
        return replies

    def reset(self, seed: Seeds = None) -> dict[str, np.ndarray]:
        self._check(stepping=False)
        seeds = env_seeds(seed, self.num_envs)
        for w, (lo, hi) in enumerate(self._bounds):
            self._send(w, pickle.dumps(("reset", seeds[lo:hi])))
        self._gather("reset")
        return {a: v.copy() for a, v in self._arrays["obs"].items()}

    def get_state(self) -> list[dict[str, Any]]:
        self._check(stepping=False)
        for w in range(len(self._procs)):
            self._send(w, pickle.dumps(("get_state", None)))
        replies = self._gather("get_state")
        return [st for w in range(len(self._procs)) for st in replies[w]]

    def set_state(self, states: Sequence[dict[str, Any]]) -> dict[str, np.ndarray]:
        self._check(stepping=False)
        if len(states) != self.num_envs:
            raise ValueError(f"env state for {len(states)} envs, but this pool holds "
                             f"{self.num_envs}")
        for w, (lo, hi) in enumerate(self._bounds):
            self._send(w, pickle.dumps(("set_state", list(states[lo:hi]))))
        self._gather("set_state")
        return {a: v.copy() for a, v in self._arrays["obs"].items()}

    def step_async(self, actions: dict[str, np.ndarray]) -> None:
        self._check(stepping=False)
        for a in self.spec.agents:
            self._actions[a][:] = actions[a].reshape(self._actions[a].shape)
        # the pipe write is a syscall, so the actions are visible to the worker before "step"
        for w in range(len(self._procs)):
            self._send(w, _STEP)
        self._waiting = True

    def step_wait(self) -> StepResult:
        self._check(stepping=True)
        self._waiting = False
        self._gather("step")
        return copy_result(self._arrays)

    def _shutdown(self, graceful: bool) -> None:
        if self._closed:
            return
        self._closed = True
        if graceful:  # let workers close their envs; a busy one still answers a pending step first
            for conn in self._conns:
                with contextlib.suppress(OSError):
                    conn.send_bytes(pickle.dumps(("close", None)))
            deadline = time.monotonic() + min(self.timeout, 5.0)
            for p in self._procs:
                p.join(max(0.0, deadline - time.monotonic()))
        for p in self._procs:
            if p.is_alive():
                p.terminate()
        for p in self._procs:
            p.join(1.0)
            if p.is_alive():
                p.kill()
                p.join()
        for conn in self._conns:
            conn.close()
        self._arrays, self._actions, self._buf = {}, {}, None  # drop views, then the shared buffer

    def close(self) -> None:
        self._shutdown(graceful=True)

    def __del__(self) -> None:
        with contextlib.suppress(Exception):  # never raise from a finalizer (e.g. at exit)
            self._shutdown(graceful=False)
