"""env.shaping: potential-based shaping of the training rewards, and only of those."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
from mpe2 import simple_tag_v3

from evohpo.envs import spec_for
from evohpo.envs.shaping import Shaping
from evohpo.errors import ConfigError
from evohpo.loop.trainer import Trainer
from tests.test_competitive import run, tag_cfg
from tests.test_trainer import read_jsonl, strip_time

LAYOUTS = [{}, {"num_good": 2, "num_adversaries": 2, "num_obstacles": 1}]


def _world_potentials(env: Any) -> tuple[float, float]:
    """Both teams' potentials from the env's own state (what the observations must give)."""
    w = env.unwrapped.world
    adv = [a.state.p_pos for a in w.agents if a.adversary]
    good = [a.state.p_pos for a in w.agents if not a.adversary]
    chase = -sum(min(float(np.linalg.norm(g - a)) for g in good) for a in adv)
    flee = sum(float(np.linalg.norm(g - a)) for g in good for a in adv)
    return chase, flee


def _shaping(kwargs: dict[str, Any], coefs: dict[str, float], gamma: float) -> Shaping:
    cfg = tag_cfg(env={"kwargs": kwargs})
    return Shaping(spec_for(cfg.env), "simple_tag", cfg.env.kwargs, coefs, gamma)


def _rows(obs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    return {a: np.asarray(o, np.float32)[None] for a, o in obs.items()}


@pytest.mark.parametrize("layout", LAYOUTS)
def test_potentials_read_from_observations_match_the_world(layout: dict[str, int]) -> None:
    kwargs = {"continuous_actions": True, "max_cycles": 25, **layout}
    env = simple_tag_v3.parallel_env(**kwargs)
    obs, _ = env.reset(seed=3)
    shaping = _shaping(kwargs, {"adversaries": 1.0, "good": 1.0}, 0.95)
    (_, chase, chasers), (_, flee, prey) = shaping.terms
    assert chasers == tuple(a for a in env.possible_agents if a.startswith("adversary_"))
    assert prey == tuple(a for a in env.possible_agents if a.startswith("agent_"))
    rng = np.random.default_rng(0)
    for _ in range(10):
        want = _world_potentials(env)
        np.testing.assert_allclose([chase(_rows(obs))[0], flee(_rows(obs))[0]], want, rtol=1e-5)
        obs, *_ = env.step({a: rng.uniform(0, 1, 5).astype(np.float32) for a in env.agents})
    env.close()


def test_shaping_adds_the_potential_difference_to_its_team_only() -> None:
    kwargs = {"continuous_actions": True, "max_cycles": 25}
    env = simple_tag_v3.parallel_env(**kwargs)
    obs, _ = env.reset(seed=1)
    gamma, c = 0.9, 0.5
    shaping = _shaping(kwargs, {"adversaries": c}, gamma)
    rng = np.random.default_rng(1)
    before = _world_potentials(env)[0]
    for step in range(25):
        nxt, rew, term, *_ = env.step({a: rng.uniform(0, 1, 5).astype(np.float32)
                                       for a in env.agents})
        ended = step == 24  # as if the game had ended there: no value beyond it
        rewards = {a: np.array([r], np.float32) for a, r in rew.items()}
        env_rewards = {a: r.copy() for a, r in rewards.items()}
        terminated = {a: np.array([ended or term[a]]) for a in rew}
        out = shaping(_rows(obs), rewards, _rows(nxt), terminated)
        after = 0.0 if ended else gamma * _world_potentials(env)[0]
        for a in rew:
            want = rew[a] + (c * (after - before) if a.startswith("adversary_") else 0.0)
            assert out[a].dtype == np.float32
            np.testing.assert_allclose(out[a], [want], rtol=1e-5, atol=1e-6)
            np.testing.assert_array_equal(rewards[a], env_rewards[a])  # the env's left alone
        before = _world_potentials(env)[0]
        obs = nxt
    env.close()


def test_undiscounted_shaping_telescopes_over_an_episode() -> None:
    kwargs = {"continuous_actions": True, "max_cycles": 25}
    env = simple_tag_v3.parallel_env(**kwargs)
    obs, _ = env.reset(seed=2)
    c = 2.0
    shaping = _shaping(kwargs, {"good": c}, 1.0)
    start = _world_potentials(env)[1]
    rng = np.random.default_rng(2)
    total = 0.0
    for _ in range(25):
        nxt, rew, *_ = env.step({a: rng.uniform(0, 1, 5).astype(np.float32)
                                 for a in env.agents})
        zeros = {a: np.zeros(1, np.float32) for a in rew}
        out = shaping(_rows(obs), zeros, _rows(nxt), {a: np.zeros(1, bool) for a in rew})
        total += float(out["agent_0"][0])
        assert all(out[a][0] == 0 for a in rew if a.startswith("adversary_"))
        obs = nxt
    np.testing.assert_allclose(total, c * (_world_potentials(env)[1] - start), rtol=1e-4)
    env.close()


def test_the_memory_learns_from_shaped_rewards_everything_else_from_the_env(
        tmp_path: Path) -> None:
    """Without learning (learning_delay past the budget) a shaped and an unshaped run act the
    same: every logged return and fitness is the same, and the replay memory differs exactly by
    the shaping of the adversaries' rewards."""
    over: dict[str, Any] = {"evolution": {"learning_delay": 10**6}}
    shaped = {"env": {"shaping": {"adversaries": 0.7}}}
    _, plain = run(tag_cfg(**over), tmp_path / "plain")
    _, with_shaping = run(tag_cfg(**over, **shaped), tmp_path / "shaped")
    assert (strip_time(read_jsonl(tmp_path / "plain" / "metrics.jsonl"))
            == strip_time(read_jsonl(tmp_path / "shaped" / "metrics.jsonl")))
    a, b = plain.runtime.buffer, with_shaping.runtime.buffer
    n = a.size
    assert n == b.size and n > 0
    np.testing.assert_array_equal(a.obs[:n], b.obs[:n])
    np.testing.assert_array_equal(a.next_obs[:n], b.next_obs[:n])
    spec, gamma = plain.spec, plain.cfg.algo.gamma
    obs = {ag: a.obs[:n, a.obs_slices[ag]] for ag in spec.agents}
    nxt = {ag: a.next_obs[:n, a.obs_slices[ag]] for ag in spec.agents}
    term = {ag: a.terminated[:n, j] > 0 for j, ag in enumerate(spec.agents)}
    rewards = {ag: a.rewards[:n, j] for j, ag in enumerate(spec.agents)}
    want = Shaping(spec, "simple_tag", plain.cfg.env.kwargs, {"adversaries": 0.7}, gamma)(
        obs, rewards, nxt, term)
    for j, ag in enumerate(spec.agents):
        np.testing.assert_allclose(b.rewards[:n, j], want[ag], rtol=1e-5, atol=1e-6)
        same = np.array_equal(b.rewards[:n, j], a.rewards[:n, j])
        assert same == (not ag.startswith("adversary_"))


@pytest.mark.parametrize(("over", "says"), [
    ({"env": {"name": "simple_adversary", "shaping": {"adversaries": 1.0}}},
     "'simple_adversary' has no shaping potentials"),
    ({"env": {"shaping": {"prey": 1.0}}}, "'prey' is not a team"),
    ({"env": {"shaping": {"adversaries": -1.0}}}, "at least 0"),
    ({"env": {"shaping": {"adversaries": 1.0}, "kwargs": {"num_agent_neighbors": 1}}},
     "partial observability"),
])
def test_shaping_config_errors(over: dict[str, Any], says: str) -> None:
    with pytest.raises(ConfigError) as ei:
        Trainer(tag_cfg(**over)).close()
    assert "env.shaping" in str(ei.value) and says in str(ei.value)
