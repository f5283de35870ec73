"""The population learner against each member's own update: same batches, same result.

Like the batched env against mpe2: :func:`evohpo.algos.fused.learn_together` must leave every
member's weights, targets and optimizer state where :meth:`MATD3.learn` on its own batch leaves
them, for MATD3 and MADDPG, continuous and discrete heads, members with their own learning rates,
tau, batch sizes, learn steps and shapes, and members that train only their own team.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch

from evohpo.algos import ALGOS, MATD3, Hyperparams, Switches
from evohpo.algos.buffer import ReplayBuffer
from evohpo.algos.fused import group_key, learn_together
from evohpo.config import ArchSpace
from evohpo.envs.spec import AgentSpec, EnvSpec
from evohpo.evolve.lineage import MutationRecord
from tests.test_algos import fill

HP = Hyperparams(lr_actor=1e-3, lr_critic=2e-3, batch_size=32, learn_step=1, tau=0.01,
                 expl_noise=0.1)


def spec_of(discrete: bool) -> EnvSpec:
    """Two agents of one shape (their networks stack together) and one of another."""
    return EnvSpec("toy", ("a", "b", "c"), {
        "a": AgentSpec(obs_dim=6, discrete=discrete, act_dim=3),
        "b": AgentSpec(obs_dim=6, discrete=discrete, act_dim=3),
        "c": AgentSpec(obs_dim=4, discrete=False, act_dim=2),
    })


def members(spec: EnvSpec, algo: str, n: int) -> list[MATD3]:
    out = []
    for j in range(n):
        hp = dataclasses.replace(HP, lr_actor=HP.lr_actor * (1 + j), tau=0.01 * (j + 1),
                                 batch_size=32 - 4 * (j % 3))
        out.append(MATD3(spec, hp, Switches(**ALGOS[algo]), [16, 16], "relu", seed=10 + j))
    return out


def flat(algo: MATD3) -> list[torch.Tensor]:
    """Every tensor of its state: weights, targets, Adam moments and steps, in a fixed order."""
    out: list[torch.Tensor] = []
    for a in algo.agents:
        nets = [algo.actors[a], algo.actor_targets[a], *algo.critics[a], *algo.critic_targets[a]]
        out += [p for net in nets for p in net.parameters()]
        for opt in (algo.actor_opts[a], algo.critic_opts[a]):
            for p in opt.param_groups[0]["params"]:
                out += list(opt.state[p].values()) if p in opt.state else []
    return out


def assert_same(x: MATD3, y: MATD3, atol: float = 1e-5) -> None:
    assert x.updates == y.updates and x.actor_version == y.actor_version
    assert x.arch() == y.arch()
    fx, fy = flat(x), flat(y)
    assert len(fx) == len(fy)
    for s, t in zip(fx, fy, strict=True):
        torch.testing.assert_close(s, t, atol=atol, rtol=1e-4)
    assert torch.equal(x.gen.get_state(), y.gen.get_state())  # the same noise drawn


def run_both(fused: list[MATD3], buf: ReplayBuffer, steps: int, seed: int,
             learning: list[list[int]] | None = None) -> list[MATD3]:
    """``steps`` updates of ``fused`` through learn_together and of copies of them one by one,
    on the same rows; ``learning[t]``: the members that learn at step t (default: all)."""
    alone = [m.clone(0) for m in fused]
    for a, m in zip(alone, fused, strict=True):
        a.gen.set_state(m.gen.get_state())
    rngs = [np.random.default_rng(seed + j) for j in range(len(fused))]
    twins = [np.random.default_rng(seed + j) for j in range(len(fused))]
    for t in range(steps):
        who = learning[t % len(learning)] if learning else list(range(len(fused)))
        batch, rows = buf.sample_each([fused[j].hp.batch_size for j in who],
                                      [rngs[j] for j in who])
        got = learn_together([fused[j] for j in who], batch, rows)
        for k, j in enumerate(who):
            want = alone[j].learn(buf.sample(alone[j].hp.batch_size, twins[j]))
            assert got[k].keys() == want.keys()
            for key in want:
                assert got[k][key] == pytest.approx(want[key], rel=1e-3, abs=1e-4)
    return alone


@pytest.mark.parametrize("algo", sorted(ALGOS))
@pytest.mark.parametrize("discrete", [False, True])
def test_a_population_learns_as_each_member_alone(algo: str, discrete: bool) -> None:
    spec = spec_of(discrete)
    buf = ReplayBuffer(spec, 500)
    fill(buf, spec, 500, np.random.default_rng(0))
    fused = members(spec, algo, 4)
    # learn steps differ: members 0 and 2 every step, 1 and 3 every other one (the others masked)
    alone = run_both(fused, buf, 100, seed=1, learning=[[0, 1, 2, 3], [0, 2]])
    assert [m.updates for m in fused] == [100, 50, 100, 50]
    for x, y in zip(fused, alone, strict=True):
        assert_same(x, y)


def test_groups_reform_after_architecture_mutations_and_copies() -> None:
    spec = spec_of(False)
    buf = ReplayBuffer(spec, 400)
    fill(buf, spec, 400, np.random.default_rng(1))
    fused = members(spec, "matd3", 4)
    run_both(fused, buf, 5, seed=3)
    rng = np.random.default_rng(0)
    space = ArchSpace(min_layers=1, max_layers=3, min_width=8, max_width=64, node_steps=[8])
    fused[1].mutate_architecture(space, rng, MutationRecord(1, 1, None, "architecture"))
    fused[2].mutate_activation(ArchSpace(activations=["tanh"]), rng,
                               MutationRecord(1, 2, None, "activation"))
    fused[3] = fused[0].clone(99)  # a copy: in its parent's group, with its own noise
    assert len({group_key(m) for m in fused}) == 3
    alone = run_both(fused, buf, 30, seed=5)
    for x, y in zip(fused, alone, strict=True):
        assert_same(x, y)


def test_team_members_take_the_other_teams_played_next_actions() -> None:
    spec = spec_of(False)
    buf = ReplayBuffer(spec, 300, next_actions=True)
    rng = np.random.default_rng(2)
    fill_next(buf, spec, 300, rng)
    fused = members(spec, "matd3", 3)
    for m in fused[:2]:
        m.learners = ("a", "b")
    fused[2].learners = ("c",)
    alone = run_both(fused, buf, 40, seed=7)
    for x, y in zip(fused, alone, strict=True):
        assert_same(x, y)
    # what a member does not train never moved
    fresh = members(spec, "matd3", 1)[0]
    for p, q in zip(fused[0].actors["c"].parameters(), fresh.actors["c"].parameters(),
                    strict=True):
        assert torch.equal(p, q)


def fill_next(buf: ReplayBuffer, spec: EnvSpec, n: int, rng: np.random.Generator) -> None:
    def acts() -> dict[str, np.ndarray]:
        return {a: rng.random((n, spec[a].act_dim)).astype(np.float32) for a in spec.agents}

    obs = {a: rng.normal(size=(n, spec[a].obs_dim)).astype(np.float32) for a in spec.agents}
    buf.add(obs, acts(), {a: rng.normal(size=n).astype(np.float32) for a in spec.agents},
            {a: rng.normal(size=(n, spec[a].obs_dim)).astype(np.float32) for a in spec.agents},
            {a: rng.random(n) < 0.2 for a in spec.agents},
            alive={a: (rng.random(n) < 0.9).astype(np.float32) for a in spec.agents},
            next_actions=acts())


def test_another_learner_learns_through_its_own_learn_on_its_own_rows() -> None:
    spec = spec_of(False)
    buf = ReplayBuffer(spec, 200)
    fill(buf, spec, 200, np.random.default_rng(3))
    seen: list[int] = []

    class Mine(MATD3):
        def learn(self, batch):  # type: ignore[no-untyped-def]
            seen.append(batch.rewards["a"].shape[0])
            return {"loss": 1.0}

    ms = members(spec, "matd3", 2)
    own = Mine(spec, dataclasses.replace(HP, batch_size=20), Switches(**ALGOS["matd3"]),
               [16, 16], "relu", seed=1)
    batch, rows = buf.sample_each([32, 20, 28], [np.random.default_rng(j) for j in range(3)])
    out = learn_together([ms[0], own, ms[1]], batch, rows)
    assert seen == [20] and out[1] == {"loss": 1.0}
    assert "critic_loss/a" in out[0] and "critic_loss/a" in out[2]
    assert [m.updates for m in ms] == [1, 1]
