"""The batched mpe2 backend against mpe2 itself.

Differential: the batched pool's state is written into real mpe2 envs after every reset, both
get the same random actions, and every observation, reward, termination and truncation must
agree (1e-5). Random streams differ, so resets are compared as distributions (KS tests on
every observation entry at reset). Plus the pool semantics, seeding, state round trips and
the backend selection.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from scipy import stats

from evohpo import config as C
from evohpo.envs import make_env, make_pool, probe, resolve_backend
from evohpo.envs.batched import SCENARIOS
from evohpo.envs.batched.pool import BatchedPool
from evohpo.envs.registry import MPE2_ENVS
from evohpo.errors import ConfigError

TOL = 1e-5

# (env, extra kwargs): every scenario with its defaults, then its other settings
CASES: list[tuple[str, dict[str, Any]]] = [(name, {}) for name in SCENARIOS] + [
    ("simple_spread", {"N": 4, "local_ratio": 0.3, "num_agent_neighbors": 2,
                       "num_landmark_neighbors": 5, "max_cycles": 10}),
    ("simple_spread", {"curriculum": True, "terminate_on_success": True}),
    ("simple_tag", {"num_good": 2, "num_adversaries": 2, "num_obstacles": 3,
                    "num_agent_neighbors": 2, "num_landmark_neighbors": 1, "curriculum": True}),
    ("simple_adversary", {"N": 3, "num_agent_neighbors": 2, "num_landmark_neighbors": 2}),
    ("simple_reference", {"local_ratio": 0.8}),
    ("simple_world_comm", {"num_good": 3, "num_adversaries": 2, "num_obstacles": 2, "num_food": 3,
                           "num_forests": 1}),
    ("collect_treasure", {"num_collectors": 3, "num_deposits": 3, "num_treasures": 4}),
    ("simple_formation", {"N": 7}),  # more than 6 agents: the scipy assignment path
    ("simple_line", {"N": 3, "terminate_on_success": True}),
]
# per action mode: 24 envs x 50 steps = 1,200 env steps for each scenario's defaults (600 for the
# other settings), across two episode ends and auto-resets
N_ENVS, STEPS = 24, 50


def random_actions(spec: Any, n: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    return {a: (rng.integers(0, spec[a].act_dim, (n, 1)).astype(np.float32) if spec[a].discrete
                else rng.random((n, spec[a].act_dim), dtype=np.float32)) for a in spec.agents}


class ScriptedRandom:
    """Stands in for collect_treasure's world generator: replays the batched pool's respawns."""

    def __init__(self, pos: list[np.ndarray], kinds: list[int]):
        self.pos, self.kinds = list(pos), list(kinds)

    def uniform(self, low: float = 0.0, high: float = 1.0, size: Any = None) -> Any:
        return 0.0 if size is None else self.pos.pop(0)

    def integers(self, *args: Any, **kwargs: Any) -> int:
        return self.kinds.pop(0)


class Mirror:
    """n mpe2 envs that follow a batched pool: same state after each reset, same actions."""

    def __init__(self, pool: BatchedPool, name: str, kwargs: dict[str, Any]):
        self.pool, self.sc = pool, pool.scenario
        self.envs = [make_env(name, kwargs) for _ in range(pool.num_envs)]
        for i, env in enumerate(self.envs):
            env.reset(seed=i)
        self.treasure = name == "collect_treasure"
        if self.treasure:  # record each step's respawns before an auto-reset overwrites them
            post = self.sc.post_step

            def recorded() -> None:
                post()
                sc: Any = self.sc
                a = sc.world.num_agents
                self.respawns = (sc.respawned.copy(), sc.world.pos[:, a:].copy(), sc.kind.copy())

            self.sc.post_step = recorded  # type: ignore[method-assign]

    def sync(self, i: int) -> None:
        raw = self.envs[i].unwrapped
        self.sc.write_mpe2(i, raw)
        raw.steps = int(self.pool.t[i])

    def observe(self, i: int) -> dict[str, np.ndarray]:
        raw = self.envs[i].unwrapped
        return {a: raw.observe(a) for a in self.pool.spec.agents}

    def step(self, i: int, actions: dict[str, np.ndarray]) -> tuple[Any, ...]:
        spec = self.pool.spec
        act = {a: int(actions[a][i, 0]) if spec[a].discrete else actions[a][i].copy()
               for a in spec.agents}
        if self.treasure:
            mask, pos, kinds = self.respawns
            t = np.flatnonzero(mask[i])
            self.envs[i].unwrapped.world._np_random = ScriptedRandom(
                list(pos[i, t]), [int(k) for k in kinds[i, t]])
        return self.envs[i].step(act)


def assert_close(got: dict[str, np.ndarray], want: dict[str, np.ndarray], what: str) -> None:
    for a, w in want.items():
        np.testing.assert_allclose(got[a], w, rtol=TOL, atol=TOL, err_msg=f"{what} of {a}")


def run_differential(name: str, kwargs: dict[str, Any], n: int, steps: int, seed: int = 0,
                     prepare: Any = None) -> dict[str, float]:
    """Step a batched pool and its mpe2 mirror side by side; every result must agree.

    With ``prepare``, the state after the first reset is edited (then copied to mpe2) and the
    agents do nothing, to reach events random actions rarely reach.
    """
    pool = BatchedPool(name, kwargs, n, probe(name, kwargs))
    spec = pool.spec
    agents = spec.agents
    mirror = Mirror(pool, name, kwargs)
    obs = pool.reset(seed=seed)
    if prepare is not None:
        prepare(pool)
        obs = pool.scenario.observe()
    for i in range(n):
        mirror.sync(i)
    assert_close(obs, stack([mirror.observe(i) for i in range(n)]), "reset observation")
    rng = np.random.default_rng(seed + 1)
    seen = {"done": 0.0, "terminated": 0.0, "reward_max": -np.inf, "delivered": 0.0}
    for _ in range(steps):
        actions = random_actions(spec, n, rng) if prepare is None else {
            a: np.zeros((n, 1 if spec[a].discrete else spec[a].act_dim), np.float32)
            for a in agents}
        res = pool.step(actions)
        out = [mirror.step(i, actions) for i in range(n)]
        assert_close(res.next_obs, stack([o[0] for o in out]), "observation")
        assert_close(res.rewards, stack([o[1] for o in out]), "reward")
        for k, flags in ((2, res.terminated), (3, res.truncated)):
            want = stack([o[k] for o in out])
            for a in agents:
                np.testing.assert_array_equal(
                    flags[a], want[a], err_msg=f"{('', '', 'terminated', 'truncated')[k]} {a}")
        np.testing.assert_array_equal(res.done, [not env.agents for env in mirror.envs])
        for i in np.flatnonzero(res.done):
            mirror.envs[i].reset()
            mirror.sync(i)
            assert_close({a: res.obs[a][i] for a in agents}, mirror.observe(i),
                         f"env {i}'s reset observation")
        seen["done"] += res.done.sum()
        seen["terminated"] += sum(res.terminated[a].sum() for a in agents)
        seen["reward_max"] = max(seen["reward_max"], max(r.max() for r in res.rewards.values()))
        seen["delivered"] += float(np.sum(getattr(pool.scenario, "delivered", 0.0)))
    return seen


def stack(rows: list[dict[str, Any]]) -> dict[str, np.ndarray]:
    return {a: np.array([r[a] for r in rows]) for a in rows[0]}


@pytest.mark.parametrize("continuous", [False, True], ids=["discrete", "continuous"])
@pytest.mark.parametrize(("name", "kwargs"), CASES,
                         ids=[f"{n}-{i}" for i, (n, _) in enumerate(CASES)])
def test_matches_mpe2_step_by_step(name: str, kwargs: dict[str, Any], continuous: bool) -> None:
    kw = {**kwargs, "continuous_actions": continuous}
    seen = run_differential(name, kw, N_ENVS if not kwargs else N_ENVS // 2, STEPS)
    assert seen["done"] >= N_ENVS // 2  # episode ends and auto-resets were compared too
    if name == "simple_tag" and not kwargs:
        assert seen["reward_max"] > 0  # an adversary caught the prey: contacts were exercised


def _prepare(pool: BatchedPool) -> None:
    """Put the agents where their scenario counts as solved, or where treasure changes hands."""
    sc: Any = pool.scenario
    w = sc.world
    na = w.num_agents
    if pool.name == "simple_spread":
        w.pos[:, :na] = w.pos[:, na:]
    elif pool.name == "simple_tag":
        w.pos[:, sc.na:na] = w.pos[:, :1] + 0.01  # touching, not coincident (0/0 in mpe2)
    elif pool.name == "simple_line":
        w.pos[:, :na] = sc.targets
    elif pool.name == "collect_treasure":
        sc.holding[:, 0] = 1  # collector 0 brings type 1 home, collector 1 picks up treasure 0
        w.pos[:, 0] = w.pos[:, sc.nc + 1] + 0.05
        w.pos[:, 1] = w.pos[:, na] - 0.03
        w.pos[:, 2] = w.pos[:, 1] + 0.04  # and bumps into collector 2


@pytest.mark.parametrize(("name", "kwargs", "steps"), [
    ("simple_spread", {"terminate_on_success": True, "N": 2}, 1),
    ("simple_tag", {"terminate_on_success": True}, 1),
    ("simple_line", {"terminate_on_success": True}, 1),
    ("collect_treasure", {}, 3),  # pickup, delivery, then the respawn a step later
])
def test_prepared_events_match_mpe2(name: str, kwargs: dict[str, Any], steps: int) -> None:
    seen = run_differential(name, kwargs, 16, steps, prepare=_prepare)
    assert seen["terminated"] > 0 or seen["delivered"] > 0


def reset_observations(name: str, kwargs: dict[str, Any], n: int) -> tuple[dict, dict]:
    pool = BatchedPool(name, kwargs, n)
    ours = pool.reset(seed=7)
    env = make_env(name, kwargs)
    theirs: dict[str, list[np.ndarray]] = {a: [] for a in pool.spec.agents}
    for i in range(n):
        obs, _ = env.reset(seed=10_000 + i)
        for a in theirs:
            theirs[a].append(obs[a])
    return ours, {a: np.array(v) for a, v in theirs.items()}


@pytest.mark.parametrize("name", list(SCENARIOS))
def test_resets_draw_from_mpe2_distributions(name: str) -> None:
    """Two-sample KS test per observation entry at reset (positions, goal colours, keys...)."""
    ours, theirs = reset_observations(name, {}, 1500)
    worst = 1.0
    for a, t in theirs.items():
        for k in range(t.shape[1]):
            x, y = ours[a][:, k], t[:, k]
            if np.ptp(x) == 0 and np.ptp(y) == 0:
                assert x[0] == y[0], (a, k)
                continue
            worst = min(worst, stats.ks_2samp(x, y, method="asymp").pvalue)
            assert (abs(x.mean() - y.mean())
                    < 0.1 + 4 * (x.std() + y.std()) / np.sqrt(len(x))), (a, k)
    assert worst > 1e-4, (f"{name}: an observation entry at reset is distributed unlike mpe2's "
                          f"(p={worst:.2g})")


def _pools(name: str, kwargs: dict[str, Any], n: int) -> tuple[Any, Any]:
    spec = probe(name, kwargs)
    return (make_pool(name, kwargs, n, "sync", spec),
            make_pool(name, kwargs, n, "sync", spec, backend="batched"))


def assert_same_step(a: Any, b: Any, agents: tuple[str, ...]) -> None:
    for field in ("obs", "next_obs", "rewards"):
        assert_close(getattr(a, field), getattr(b, field), field)
    for field in ("terminated", "truncated", "alive"):
        for ag in agents:
            np.testing.assert_array_equal(getattr(a, field)[ag], getattr(b, field)[ag],
                                          err_msg=field)
    np.testing.assert_array_equal(a.done, b.done)


@pytest.mark.parametrize("continuous", [False, True], ids=["discrete", "continuous"])
@pytest.mark.parametrize("name", list(SCENARIOS))
def test_same_results_as_the_pettingzoo_pool(name: str, continuous: bool) -> None:
    """Seeded alike (each env's episode from its own seed), the batched pool and a SyncPool of
    mpe2 envs give the same results, resets included: the backend changes nothing but speed."""
    kw = {"continuous_actions": continuous, "max_cycles": 12}
    sync, batched = _pools(name, kw, 3)
    assert_close(sync.reset(seed=5), batched.reset(seed=5), "first observation")
    rng = np.random.default_rng(0)
    for _ in range(30):  # two episode ends and resets
        actions = random_actions(sync.spec, 3, rng)
        assert_same_step(sync.step(actions), batched.step(actions), sync.spec.agents)


@pytest.mark.parametrize("name", ["simple_speaker_listener", "collect_treasure", "simple_tag"])
def test_env_state_rebuilds_exactly_and_across_backends(name: str) -> None:
    kw = {"continuous_actions": True, "max_cycles": 10,
          **({"terminate_on_success": True} if name == "simple_tag" else {})}
    sync, batched = _pools(name, kw, 4)
    rng = np.random.default_rng(1)
    for pool in (sync, batched):
        pool.reset(seed=3)
    for _ in range(17):  # mid-episode, with one episode behind
        actions = random_actions(sync.spec, 4, rng)
        sync.step(actions)
        batched.step(actions)
    state = batched.get_state()
    assert [s["episode"] for s in state] == [s["episode"] for s in sync.get_state()]
    fresh = make_pool(name, kw, 4, "sync", sync.spec, backend="batched")
    fresh.reset(seed=99)
    from_batched = fresh.set_state(state)
    other = make_pool(name, kw, 4, "sync", sync.spec, backend="batched")
    other.reset(seed=98)
    # a PettingZoo pool's state rebuilds a batched one
    from_sync = other.set_state(sync.get_state())
    assert_close(from_batched, from_sync, "rebuilt observation")
    for _ in range(12):
        actions = random_actions(sync.spec, 4, rng)
        want = batched.step(actions)
        assert_same_step(want, fresh.step(actions), sync.spec.agents)
        assert_same_step(want, other.step(actions), sync.spec.agents)


def test_same_seed_same_results_and_seedless_reset() -> None:
    kw = {"continuous_actions": True}
    a, b = (BatchedPool("simple_spread", kw, 8) for _ in range(2))
    assert_close(a.reset(seed=4), b.reset(seed=4), "obs")
    rng = np.random.default_rng(0)
    for _ in range(30):
        actions = random_actions(a.spec, 8, rng)
        assert_same_step(a.step(actions), b.step(actions), a.spec.agents)
    first = a.reset()  # no seed: fresh entropy, still a valid episode
    assert not np.allclose(first["agent_0"], b.reset(seed=4)["agent_0"])
    with pytest.raises(ValueError, match="without a seed"):
        b.set_state(a.get_state())


def test_batched_pool_interface_errors() -> None:
    pool = BatchedPool("simple_speaker_listener", {}, 2)
    pool.reset(seed=0)
    act = {"speaker_0": np.zeros((2, 1), np.float32), "listener_0": np.full((2, 1), 7, np.float32)}
    with pytest.raises(ValueError, match=r"must lie in \[0, 5\)"):
        pool.step(act)
    with pytest.raises(RuntimeError):
        pool.step_wait()
    pool.step_async({"speaker_0": np.zeros((2, 1)), "listener_0": np.zeros((2, 1))})
    with pytest.raises(RuntimeError):
        pool.step_async({"speaker_0": np.zeros((2, 1)), "listener_0": np.zeros((2, 1))})


def test_backend_selection_and_errors() -> None:
    assert resolve_backend("simple_tag", {}, "auto") == "batched"
    assert resolve_backend("simple_tag", {}, "pettingzoo") == "pettingzoo"
    assert resolve_backend("tests.toy_envs:target_game", {}, "auto") == "pettingzoo"
    assert resolve_backend("simple_tag", {"render_mode": "rgb_array"}, "auto") == "pettingzoo"
    with pytest.raises(ConfigError, match=r"no batched implementation.*batched envs: simple, "):
        resolve_backend("tests.toy_envs:target_game", {}, "batched")
    with pytest.raises(ConfigError, match=r"render_mode"):
        resolve_backend("simple_tag", {"render_mode": "rgb_array"}, "batched")
    with pytest.raises(ConfigError, match=r"env\.backend"):
        C.load([{"env": {"name": "tests.toy_envs:target_game", "backend": "batched"}}])
    assert C.load([{}]).env.backend == "auto"
    pool = make_pool("simple_spread", {"N": 2}, 3, backend="auto")
    assert isinstance(pool, BatchedPool) and pool.spec == probe("simple_spread", {"N": 2})
    assert not isinstance(make_pool("simple_spread", {}, 1), BatchedPool)  # the default: pettingzoo
    with pytest.raises(ConfigError, match=r"not taken by mpe2\.simple_tag_v3"):
        BatchedPool("simple_tag", {"N": 3}, 2)


def test_every_short_name_is_batched_with_mpe2_defaults() -> None:
    """The registry and the batched scenarios agree, and each takes mpe2's keywords and defaults."""
    import importlib
    import inspect

    assert set(SCENARIOS) == set(MPE2_ENVS)
    for name, cls in SCENARIOS.items():
        assert cls.mpe2_module == MPE2_ENVS[name]
        raw = importlib.import_module(MPE2_ENVS[name]).raw_env
        theirs = {k: p.default for k, p in inspect.signature(raw.__init__).parameters.items()
                  if k != "self"}
        ours = {**_common_kwargs(), **cls.params}
        assert ours == theirs, name


def _common_kwargs() -> dict[str, Any]:
    from evohpo.envs.batched.core import COMMON_KWARGS

    return COMMON_KWARGS


@pytest.mark.parametrize("continuous", [False, True], ids=["discrete", "continuous"])
def test_training_is_the_same_run_with_either_backend(tmp_path: Any, continuous: bool) -> None:
    """The trainer with env.backend batched repeats the PettingZoo backend's run exactly."""
    from tests.test_trainer import TINY, run_trainer, strip_time

    cfg = C.load([TINY, {"steps": 96,
                         "env": {"backend": "pettingzoo",
                                 "kwargs": {"continuous_actions": continuous}},
                         "mutation": {"none": 0.0, "hyperparameters": 1.0, "weights": 1.0}}])
    m1, l1 = run_trainer(cfg, tmp_path / "pettingzoo")
    m2, l2 = run_trainer(C.load([C.to_dict(cfg), {"env": {"backend": "batched"}}]),
                         tmp_path / "batched")
    assert len(m1) == 3 and strip_time(m1) == strip_time(m2) and l1 == l2
