"""AsyncPool: bitwise the same results as SyncPool, the real final observation, and faults that
surface as EnvError quickly instead of hanging."""

from __future__ import annotations

import functools
import os
import signal
import threading
import time
from typing import Any

import numpy as np
import pytest
from gymnasium import spaces
from pettingzoo.utils.env import ParallelEnv

from evohpo.envs import make_env, make_pool, probe, spec_of
from evohpo.envs.async_pool import AsyncPool
from evohpo.envs.pool import StepResult, SyncPool, episode_seed
from evohpo.envs.spec import EnvSpec
from evohpo.errors import EnvError

SEED = 123
N_ENVS = 5  # odd, so the two workers hold uneven chunks (3 + 2)
CASES = [
    ("simple_speaker_listener", {"continuous_actions": True}),
    ("simple_speaker_listener", {"continuous_actions": False}),
    ("simple_spread", {}),
]


class FaultyEnv(ParallelEnv):
    """One agent; from step ``at`` on, ``fault`` makes step raise, exit the process, or hang."""

    metadata = {"name": "faulty"}

    def __init__(self, fault: str | None = None, at: int = 3):
        self.fault, self.at = fault, at
        self.possible_agents = ["a"]
        self.agents: list[str] = []
        self.t = 0

    def observation_space(self, agent: str) -> spaces.Box:
        return spaces.Box(-1.0, 1.0, (2,), np.float32)

    def action_space(self, agent: str) -> spaces.Discrete:
        return spaces.Discrete(2)

    def reset(self, seed: int | None = None, options: dict | None = None) -> tuple[dict, dict]:
        self.agents, self.t = ["a"], 0
        return {"a": np.zeros(2, np.float32)}, {"a": {}}

    def step(self, actions: dict) -> tuple[dict, dict, dict, dict, dict]:
        self.t += 1
        if self.fault is not None and self.t >= self.at:
            if self.fault == "raise":
                raise ValueError(f"boom at step {self.t}")
            if self.fault == "exit":
                os._exit(3)
            if self.fault == "hang":
                time.sleep(60)
        obs = {"a": np.full(2, self.t / 100, np.float32)}
        return obs, {"a": 1.0}, {"a": False}, {"a": self.t >= 10}, {"a": {}}


def make_faulty(fault: str | None = None, at: int = 3) -> FaultyEnv:
    return FaultyEnv(fault, at)


def faulty_pool(fault: str | None, timeout: float = 10.0) -> tuple[AsyncPool, EnvSpec]:
    """4 envs in 2 workers; only env 3 (held by worker 1) is faulty."""
    spec = spec_of(FaultyEnv(), "faulty")
    fns = [functools.partial(make_faulty, fault if i == 3 else None) for i in range(4)]
    return AsyncPool(fns, spec, workers=2, timeout=timeout, name="faulty"), spec


def random_actions(spec: EnvSpec, n: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    out = {}
    for a in spec.agents:
        s = spec[a]
        if s.discrete:
            out[a] = rng.integers(0, s.act_dim, size=(n, 1)).astype(np.float32)
        else:
            out[a] = rng.uniform(s.low, s.high, size=(n, s.act_dim)).astype(np.float32)
    return out


def assert_bitwise(x: Any, y: Any, what: str) -> None:
    if isinstance(x, dict):
        assert x.keys() == y.keys(), what
        for k in x:
            assert_bitwise(x[k], y[k], f"{what}[{k}]")
        return
    assert x.dtype == y.dtype and x.shape == y.shape, what
    assert x.tobytes() == y.tobytes(), what


def env_action(spec: EnvSpec, actions: dict[str, np.ndarray], i: int) -> dict[str, Any]:
    """Env i's actions as EnvSlots hands them to the env."""
    return {a: int(actions[a][i, 0]) if spec[a].discrete else actions[a][i] for a in spec.agents}


@pytest.mark.parametrize(("name", "kwargs"), CASES)
def test_async_matches_sync_bitwise_and_keeps_final_obs(name: str, kwargs: dict) -> None:
    spec = probe(name, kwargs)
    rng = np.random.default_rng(0)
    sync = make_pool(name, kwargs, N_ENVS, pool="sync", spec=spec)
    with make_pool(name, kwargs, N_ENVS, pool="async", spec=spec, workers=2) as pool:
        assert isinstance(pool, AsyncPool) and pool.num_workers == 2
        obs0 = pool.reset(SEED)
        assert_bitwise(obs0, sync.reset(SEED), "reset obs")
        acts: list[dict[str, np.ndarray]] = []
        results: list[StepResult] = []
        for t in range(60):
            acts.append(random_actions(spec, N_ENVS, rng))
            res, ref = pool.step(acts[-1]), sync.step(acts[-1])
            for field in StepResult._fields:
                assert_bitwise(getattr(res, field), getattr(ref, field), f"step {t} {field}")
            results.append(res)
    sync.close()

    done_steps = [t for t, r in enumerate(results) if r.done.any()]
    assert done_steps == [24, 49]  # max_cycles 25: every env truncates, then auto-resets
    assert all(results[t].done.all() for t in done_steps)
    final = results[24]
    for i in (0, N_ENVS - 1):  # first worker's first env, second worker's last env
        env = make_env(name, kwargs)
        o, _ = env.reset(seed=SEED + i)
        for a in spec.agents:
            np.testing.assert_array_equal(obs0[a][i], o[a])
        for t in range(25):
            o, _, _, trunc, _ = env.step(env_action(spec, acts[t], i))
        assert all(trunc.values())
        reset_obs, _ = env.reset(seed=episode_seed(SEED + i, 1))  # each episode has its own seed
        env.close()
        for a in spec.agents:
            np.testing.assert_array_equal(final.next_obs[a][i], np.asarray(o[a], np.float32))
            np.testing.assert_array_equal(final.obs[a][i], np.asarray(reset_obs[a], np.float32))


def test_split_protocol_errors_and_idempotent_close() -> None:
    pool, spec = faulty_pool(None)
    pool.reset(0)
    with pytest.raises(RuntimeError, match="without a pending step_async"):
        pool.step_wait()
    acts = random_actions(spec, 4, np.random.default_rng(0))
    pool.step_async(acts)
    with pytest.raises(RuntimeError, match="already pending"):
        pool.step_async(acts)
    res = pool.step_wait()
    np.testing.assert_array_equal(res.next_obs["a"], np.full((4, 2), 0.01, np.float32))
    pool.close()
    pool.close()
    with pytest.raises(EnvError, match="closed"):
        pool.reset(0)


def test_workers_ignore_sigint() -> None:
    pool, spec = faulty_pool(None)
    with pool:
        pool.reset(0)
        for pid in pool.pids:
            assert pid is not None
            os.kill(pid, signal.SIGINT)
        time.sleep(0.2)
        res = pool.step(random_actions(spec, 4, np.random.default_rng(0)))
        assert res.rewards["a"].tolist() == [1.0] * 4


def run_until_error(pool: AsyncPool, spec: EnvSpec) -> tuple[str, float]:
    """Step until the pool raises; the error message and how long the failing step took."""
    acts = random_actions(spec, 4, np.random.default_rng(0))
    pool.reset(0)
    for _ in range(10):
        start = time.monotonic()
        try:
            pool.step(acts)
        except EnvError as e:
            return str(e), time.monotonic() - start
    raise AssertionError("the pool never raised")


def assert_closed(pool: AsyncPool, spec: EnvSpec) -> None:
    for pid in pool.pids:
        assert pid is not None
        with pytest.raises(ProcessLookupError):  # terminated and reaped
            os.kill(pid, 0)
    with pytest.raises(EnvError, match="pool is closed"):
        pool.step(random_actions(spec, 4, np.random.default_rng(0)))


def test_worker_exception_surfaces_as_env_error() -> None:
    pool, spec = faulty_pool("raise")
    msg, took = run_until_error(pool, spec)
    assert "'faulty'" in msg and "worker 1" in msg and "envs 2-3" in msg
    assert "ValueError: boom at step 3" in msg
    assert took < 2.0
    assert_closed(pool, spec)


def test_killed_worker_surfaces_with_exit_code() -> None:
    pool, spec = faulty_pool(None)
    pool.reset(0)
    pid = pool.pids[1]
    assert pid is not None
    os.kill(pid, signal.SIGKILL)
    start = time.monotonic()
    with pytest.raises(EnvError) as info:
        pool.step(random_actions(spec, 4, np.random.default_rng(0)))
    assert time.monotonic() - start < 3.0
    msg = str(info.value)
    assert "'faulty'" in msg and "worker 1" in msg and "exit code -9" in msg and "SIGKILL" in msg
    assert_closed(pool, spec)


def test_exiting_worker_surfaces_with_exit_code() -> None:
    pool, spec = faulty_pool("exit")
    msg, took = run_until_error(pool, spec)
    assert "worker 1" in msg and "envs 2-3" in msg and "died with exit code 3" in msg
    assert took < 3.0
    assert_closed(pool, spec)


def test_hung_worker_times_out() -> None:
    pool, spec = faulty_pool("hang", timeout=0.5)
    msg, took = run_until_error(pool, spec)
    assert "worker 1" in msg and "timed out after 0.5 s" in msg
    assert took < 3.0
    assert_closed(pool, spec)


def test_ctrl_c_in_parent_closes_pool_instead_of_desyncing() -> None:
    """Ctrl-C while acks are in flight: later calls must not read a stale ack, so the pool
    closes."""
    pool, spec = faulty_pool("hang", timeout=30.0)
    pool.reset(0)
    acts = random_actions(spec, 4, np.random.default_rng(0))
    pool.step(acts)
    pool.step(acts)
    # a process started in the background by a shell without job control ignores SIGINT:
    # Ctrl-C is what this test is about, so it gets Python's own handler back
    before = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        threading.Timer(0.3, os.kill, (os.getpid(), signal.SIGINT)).start()
        with pytest.raises(KeyboardInterrupt):
            pool.step(acts)  # step 3 hangs in worker 1
    finally:
        signal.signal(signal.SIGINT, before)
    with pytest.raises(EnvError, match="KeyboardInterrupt while waiting for step"):
        pool.reset(0)
    assert_closed(pool, spec)


def test_constructor_failure_surfaces_from_init() -> None:
    spec = spec_of(FaultyEnv(), "faulty")
    # the second factory raises inside its worker, before any reset
    fns = [functools.partial(make_faulty), functools.partial(int, "not a number")]
    with pytest.raises(EnvError, match=r"worker 1 \(env 1\) raised ValueError: invalid literal"):
        AsyncPool(fns, spec, workers=2, name="faulty")


def test_sync_pool_reference_is_deterministic() -> None:
    """Guards the reference: two SyncPools with one seed agree, so agreement above means
    something."""
    spec = probe("simple_spread", {})
    fns = [functools.partial(make_env, "simple_spread", {}) for _ in range(2)]
    a, b = SyncPool(fns, spec), SyncPool(fns, spec)
    assert_bitwise(a.reset(1), b.reset(1), "reset")
    assert not np.array_equal(a.reset(1)["agent_0"], b.reset(2)["agent_0"])


@pytest.mark.parametrize("pool_kind", ["sync", "async"])
def test_env_state_rebuilds_mid_episode(pool_kind: str) -> None:
    """get_state/set_state is data only (seeds, episode numbers, actions) and rebuilds envs
    exactly."""
    name, kwargs = "simple_speaker_listener", {"continuous_actions": True, "max_cycles": 25}
    spec = probe(name, kwargs)
    rng = np.random.default_rng(3)
    a = make_pool(name, kwargs, 4, pool_kind, spec, workers=2)
    a.reset(seed=5)
    for _ in range(37):  # one auto-reset behind, 12 steps into the second episode
        a.step(random_actions(spec, 4, rng))
    state = a.get_state()
    assert ([st["episode"] for st in state] == [1] * 4
            and all(len(st["actions"]) == 12 for st in state))
    b = make_pool(name, kwargs, 4, "sync" if pool_kind == "async" else "async", spec, workers=2)
    b.reset(seed=99)
    b.set_state(state)
    for _ in range(40):
        acts = random_actions(spec, 4, rng)
        ra, rb = a.step(acts), b.step(acts)
        for field in StepResult._fields:
            assert_bitwise(getattr(ra, field), getattr(rb, field), field)
    a.close()
    b.close()
