"""The learner's semantics: shapes, targets (termination vs truncation), MADDPG vs MATD3,
convergence."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from evohpo.algos import ALGOS, MATD3, Hyperparams, Switches
from evohpo.algos.buffer import ReplayBuffer
from evohpo.envs import probe
from evohpo.envs.spec import AgentSpec, EnvSpec

HP = Hyperparams(lr_actor=1e-3, lr_critic=1e-3, batch_size=64, learn_step=1, tau=0.01,
                 expl_noise=0.1)


def switches(name: str, **kw) -> Switches:
    return Switches(**{**ALGOS[name], **kw})


def hetero_spec(discrete_listener: bool) -> EnvSpec:
    return EnvSpec("toy", ("speaker", "listener"), {
        "speaker": AgentSpec(obs_dim=3, discrete=True, act_dim=3),
        "listener": AgentSpec(obs_dim=11, discrete=discrete_listener, act_dim=5),
    })


def fill(buf: ReplayBuffer, spec: EnvSpec, n: int, rng: np.random.Generator,
         term_p: float = 0.2) -> None:
    acts = {}
    for a in spec.agents:
        s = spec[a]
        acts[a] = (np.eye(s.act_dim, dtype=np.float32)[rng.integers(0, s.act_dim, n)] if s.discrete
                   else rng.random((n, s.act_dim)).astype(np.float32))
    buf.add({a: rng.normal(size=(n, spec[a].obs_dim)).astype(np.float32) for a in spec.agents},
            acts,
            {a: rng.normal(size=n).astype(np.float32) for a in spec.agents},
            {a: rng.normal(size=(n, spec[a].obs_dim)).astype(np.float32) for a in spec.agents},
            {a: (rng.random(n) < term_p) for a in spec.agents})


@pytest.mark.parametrize("algo", sorted(ALGOS))
@pytest.mark.parametrize("discrete_listener", [True, False])
def test_shapes_heterogeneous(algo: str, discrete_listener: bool) -> None:
    spec = hetero_spec(discrete_listener)
    m = MATD3(spec, HP, switches(algo), [32, 32], "relu", seed=0)
    obs = {a: np.zeros((7, spec[a].obs_dim), np.float32) for a in spec.agents}
    rng = np.random.default_rng(0)
    env_act, stored = m.act(obs, rng)
    assert env_act["speaker"].shape == (7, 1)  # an index per env for a discrete agent
    assert set(np.unique(env_act["speaker"])) <= {0.0, 1.0, 2.0}
    assert stored["speaker"].shape == (7, 3) and np.all(stored["speaker"].sum(1) == 1)  # one-hot
    assert stored["listener"].shape == (7, 5)
    if not discrete_listener:
        assert env_act["listener"].min() >= 0.0 and env_act["listener"].max() <= 1.0
    # the critic sees every agent's obs and action: 3 + 11 + 3 + 5 inputs
    assert m.critics["speaker"][0].in_dim == 22 and m.critics["listener"][0].in_dim == 22
    assert m.actors["speaker"].in_dim == 3 and m.actors["listener"].in_dim == 11
    assert len(m.critics["speaker"]) == (2 if algo == "matd3" else 1)
    buf = ReplayBuffer(spec, 500)
    fill(buf, spec, 200, rng)
    metrics = m.learn(buf.sample(32, rng))
    assert {"critic_loss/speaker", "critic_loss/listener"} <= set(metrics)
    assert all(np.isfinite(v) for v in metrics.values())


def test_deterministic_policy_has_no_noise() -> None:
    spec = hetero_spec(False)
    m = MATD3(spec, HP, switches("matd3"), [16], "relu", seed=1)
    obs = {a: np.random.default_rng(0).normal(size=(5, spec[a].obs_dim)).astype(np.float32)
           for a in spec.agents}
    a1, _ = m.act(obs, None)
    a2, _ = m.act(obs, None)
    a3, _ = m.act(obs, np.random.default_rng(0))
    assert all(np.array_equal(a1[a], a2[a]) for a in spec.agents)
    assert not np.array_equal(a1["listener"], a3["listener"])


def test_td_target_stops_only_at_termination() -> None:
    spec = hetero_spec(False)
    m = MATD3(spec, HP, switches("matd3"), [16], "relu", seed=0)
    for a in spec.agents:  # target critics output exactly 5 whatever the input
        for t in m.critic_targets[a]:
            last = t.layers[-1]
            last.weight.data.zero_()
            last.bias.data.fill_(5.0)
    rng = np.random.default_rng(0)
    buf = ReplayBuffer(spec, 10)
    fill(buf, spec, 4, rng)
    buf.terminated[:4] = np.array([[1, 1], [0, 0], [1, 0], [0, 1]], np.float32)
    batch = buf.gather(np.arange(4))
    y = m.td_targets(batch)
    g = m.sw.gamma
    for j, a in enumerate(spec.agents):
        term = torch.from_numpy(buf.terminated[:4, j])
        expected = batch.rewards[a] + g * (1 - term) * 5.0
        torch.testing.assert_close(y[a], expected)
    # a truncated transition (terminated = 0) bootstraps: row 1 gets r + gamma * 5
    torch.testing.assert_close(y["speaker"][1], batch.rewards["speaker"][1] + g * 5.0)


def test_twin_critics_take_the_minimum() -> None:
    spec = hetero_spec(False)
    m = MATD3(spec, HP, switches("matd3", target_noise=0.0), [16], "relu", seed=0)
    for a in spec.agents:
        for t, v in zip(m.critic_targets[a], (3.0, -2.0), strict=True):
            t.layers[-1].weight.data.zero_()
            t.layers[-1].bias.data.fill_(v)
    buf = ReplayBuffer(spec, 10)
    fill(buf, spec, 4, np.random.default_rng(0), term_p=0.0)
    batch = buf.gather(np.arange(4))
    y = m.td_targets(batch)
    torch.testing.assert_close(y["listener"], batch.rewards["listener"] + m.sw.gamma * -2.0)


def test_maddpg_is_matd3_with_switches_off() -> None:
    assert ALGOS["maddpg"] == {"twin_critics": False, "policy_delay": 1, "target_noise": 0.0}
    assert ALGOS["matd3"]["twin_critics"] and ALGOS["matd3"]["policy_delay"] == 2
    spec = hetero_spec(False)
    rng = np.random.default_rng(0)
    buf = ReplayBuffer(spec, 300)
    fill(buf, spec, 300, rng)
    td3 = MATD3(spec, HP, switches("matd3"), [16], "relu", seed=0)
    before = [p.clone() for p in td3.actors["listener"].parameters()]
    td3.learn(buf.sample(32, rng))  # update 1: critics only (policy delay 2)
    assert all(torch.equal(a, b)
               for a, b in zip(before, td3.actors["listener"].parameters(), strict=True))
    td3.learn(buf.sample(32, rng))  # update 2: actors too
    assert not all(torch.equal(a, b)
                   for a, b in zip(before, td3.actors["listener"].parameters(), strict=True))
    dd = MATD3(spec, HP, switches("maddpg"), [16], "relu", seed=0)
    before = [p.clone() for p in dd.actors["listener"].parameters()]
    dd.learn(buf.sample(32, rng))
    assert not all(torch.equal(a, b)
                   for a, b in zip(before, dd.actors["listener"].parameters(), strict=True))


def test_targets_lag_by_polyak() -> None:
    spec = hetero_spec(False)
    m = MATD3(spec, HP, switches("maddpg"), [16], "relu", seed=0)
    rng = np.random.default_rng(0)
    buf = ReplayBuffer(spec, 300)
    fill(buf, spec, 300, rng)
    old_t = [p.clone() for p in m.actor_targets["listener"].parameters()]
    m.learn(buf.sample(32, rng))
    new_online = list(m.actors["listener"].parameters())
    for t_old, t_new, o in zip(old_t, m.actor_targets["listener"].parameters(), new_online,
                               strict=True):
        torch.testing.assert_close(t_new, t_old + HP.tau * (o - t_old))


@pytest.mark.parametrize("algo", sorted(ALGOS))
def test_learns_known_optimum(algo: str) -> None:
    """One-step game: mover's best action is (0.7, 0.7), picker's best is action 2."""
    spec = probe("tests.toy_envs:target_game")
    hp = Hyperparams(lr_actor=3e-3, lr_critic=3e-3, batch_size=128, learn_step=1, tau=0.05,
                     expl_noise=0.3)
    m = MATD3(spec, hp, switches(algo, max_grad_norm=None), [32, 32], "relu", seed=0)
    from evohpo.envs import make_pool

    pool = make_pool("tests.toy_envs:target_game", {}, 16, "sync", spec)
    rng = np.random.default_rng(0)
    buf = ReplayBuffer(spec, 20_000)
    obs = pool.reset(seed=0)
    for _ in range(400):
        env_act, stored = m.act(obs, rng)
        res = pool.step(env_act)
        assert res.done.all() and all(res.terminated[a].all() for a in spec.agents)
        buf.add(obs, stored, res.rewards, res.next_obs, res.terminated)
        obs = res.obs
        for _ in range(2):
            m.learn(buf.sample(128, rng))
    act, _ = m.act(obs, None)
    np.testing.assert_allclose(act["mover"], 0.7, atol=0.1)
    assert np.all(act["picker"][:, 0] == 2)


def test_a_state_saved_on_a_gpu_loads_on_a_cpu() -> None:
    """A CUDA generator's state (Philox: seed, offset) does not fit a CPU generator: a member
    trained on a GPU must still load on a CPU (eval, export, resume), its noise stream reseeded
    from the saved seed. Made here by hand, as this machine may have no GPU."""
    spec = hetero_spec(False)
    m = MATD3(spec, HP, switches("matd3"), [16], "relu", seed=3)
    state = m.state_dict()
    philox = torch.tensor(list((1234).to_bytes(8, "little") + (40).to_bytes(8, "little")),
                          dtype=torch.uint8)
    loaded = MATD3.from_state_dict(spec, m.sw, {**state, "gen": philox})
    assert loaded.gen.initial_seed() == 1234
    obs = {a: np.ones((4, spec[a].obs_dim), np.float32) for a in spec.agents}
    assert all(np.array_equal(m.act(obs, None)[0][a], loaded.act(obs, None)[0][a])
               for a in spec.agents)
    # a state of its own device type loads as it is: the stream goes on where it was
    torch.rand(3, generator=m.gen)
    again = MATD3.from_state_dict(spec, m.sw, m.state_dict())
    assert torch.equal(torch.rand(5, generator=again.gen), torch.rand(5, generator=m.gen))


def test_action_reg_weighs_the_penalty_on_raw_actor_outputs() -> None:
    """algo.action_reg reaches the learner, and the actor's loss is -Q plus exactly that weight
    times the mean squared raw output (pre-squash, or logits), over the agent's live rows."""
    from evohpo import config as C
    from evohpo.algos.matd3 import LearnInputs
    from evohpo.algos.registry import switches as switches_of

    assert switches_of(C.load([{}])).action_reg == 1e-3  # the default: the former fixed value
    assert switches_of(C.load([{"algo": {"action_reg": 0.25}}])).action_reg == 0.25
    spec = hetero_spec(False)
    rng = np.random.default_rng(0)
    buf = ReplayBuffer(spec, 100)
    fill(buf, spec, 100, rng)
    batch = buf.sample(32, rng)
    losses = {}
    for reg in (0.0, 0.5):
        m = MATD3(spec, HP, switches("matd3", action_reg=reg), [16], "relu", seed=0)
        x = LearnInputs.of(m, batch)
        losses[reg] = [m.actor_loss(i, x).item() for i in range(len(spec.agents))]
    for i, a in enumerate(spec.agents):
        raw = m.actors[a](batch.obs[a]).detach()
        expect = 0.5 * raw.pow(2).mean(1).mean().item()
        assert losses[0.5][i] - losses[0.0][i] == pytest.approx(expect, rel=1e-4)
