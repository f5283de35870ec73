"""On-policy members learning together against each member's own update: same rollouts, same
result.

:class:`~evohpo.algos.fused_ppo.RolloutLearner` must leave every member's weights, log-stds,
Adam moments and step counts, value normaliser and random stream where
:meth:`PPO.learn_rollout` on its own rollout leaves them, for IPPO and MAPPO, discrete and
continuous agents, members apart in every hyperparameter the update reads, and groups formed
again after a resume, a copy, an architecture mutation and a load.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator

import numpy as np
import pytest
import torch

from evohpo.algos.fused_ppo import STATS, RolloutLearner, rollout_key
from evohpo.algos.ppo import PPO
from evohpo.algos.switches import OnPolicySwitches
from evohpo.config import ArchSpace
from evohpo.evolve.lineage import MutationRecord
from evohpo.evolve.member import Member
from evohpo.runtime.rollouts import FIELDS, Rollouts, member_rows
from tests.test_ppo import HP, make_rollout, make_spec

# members 0-3 apart in every per-member setting of the update; 4 and 5 take other epochs (a
# group of their own), 6 other minibatches (alone)
APART = [dict(lr_actor=3e-3, lr_critic=7e-3, clip=0.15, ent_coef=0.05, gae_lambda=0.7),
         dict(lr_actor=1e-3, lr_critic=2e-3, clip=0.05, ent_coef=0.0, gae_lambda=0.95),
         dict(lr_actor=6e-3, lr_critic=1e-2, clip=0.3, ent_coef=0.2, gae_lambda=0.5),
         dict(lr_actor=2e-3, lr_critic=4e-3, clip=0.1, ent_coef=0.01, gae_lambda=0.9),
         dict(lr_actor=4e-3, lr_critic=3e-3, clip=0.2, ent_coef=0.03, gae_lambda=0.8, epochs=2),
         dict(lr_actor=5e-4, lr_critic=9e-3, clip=0.25, ent_coef=0.1, gae_lambda=0.6, epochs=2),
         dict(lr_actor=2e-3, lr_critic=2e-3, clip=0.2, ent_coef=0.02, gae_lambda=0.85,
              minibatches=2)]


@pytest.fixture
def float64() -> Iterator[None]:
    """Networks, rollouts and updates in float64: a member's fused and own updates then agree to
    about 1e-15, so that a real error cannot hide in float32 rounding."""
    before = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    yield
    torch.set_default_dtype(before)


def population(centralised: bool, discrete: bool, n: int = len(APART)) -> list[PPO]:
    spec = make_spec(discrete)
    sw = OnPolicySwitches(centralised=centralised, gamma=0.9, max_grad_norm=0.3)
    out = []
    for j in range(n):
        ppo = PPO(spec, dataclasses.replace(HP, **APART[j]), sw, [8, 6], "tanh", seed=3 + j)
        for i, norm in enumerate(ppo.value_norms.values()):  # normalisers with a history
            norm.load_state_dict({"mean": 1.5 - i + j, "var": 2.0 + i, "count": 7.0})
        out.append(ppo)
    return out


def twin(m: PPO) -> PPO:
    """A copy that learns alone, drawing what ``m`` draws."""
    a = m.clone(0)
    a.gen.set_state(m.gen.get_state())
    return a


def state(algo: PPO) -> list[torch.Tensor]:
    """Every tensor of its state: weights, log-stds, Adam moments and steps, in a fixed order."""
    out: list[torch.Tensor] = []
    for a in algo.agents:
        out += [*algo.actors[a].parameters(), *algo.critics[a][0].parameters()]
        out += [algo.log_std[a]] if a in algo.log_std else []
    for opt in algo.optimizers():
        for p in opt.param_groups[0]["params"]:
            st = opt.state[p]
            out += [st["exp_avg"], st["exp_avg_sq"], st["step"]]
    return out


def assert_same(x: PPO, y: PPO, atol: float, rtol: float) -> None:
    assert x.updates == y.updates and x.actor_version == y.actor_version
    assert x.arch() == y.arch()
    sx, sy = state(x), state(y)
    assert len(sx) == len(sy)
    for s, t in zip(sx, sy, strict=True):
        torch.testing.assert_close(s.detach(), t.detach(), atol=atol, rtol=rtol)
    for a in x.agents:
        nx, ny = x.value_norms[a].state_dict(), y.value_norms[a].state_dict()
        assert nx["count"] == ny["count"]
        assert nx["mean"] == pytest.approx(ny["mean"], rel=rtol, abs=atol)
        assert nx["var"] == pytest.approx(ny["var"], rel=rtol, abs=atol)
    assert torch.equal(x.gen.get_state(), y.gen.get_state())  # the same permutations drawn


class Both:
    """A population learning through one RolloutLearner, and beside it a copy of each member
    learning alone through learn_rollout, on the same rollouts."""

    def __init__(self, fused: list[PPO]):
        self.fused, self.alone = fused, [twin(m) for m in fused]
        self.learner, self.seed = RolloutLearner(), 0

    def put(self, j: int, algo: PPO) -> None:
        self.fused[j], self.alone[j] = algo, twin(algo)

    def updates(self, n: int, rel: float = 1e-9, abs_: float = 1e-12) -> None:
        spec = self.fused[0].spec
        for _ in range(n):
            self.seed += 1
            ros = [make_rollout(spec, 100 * self.seed + j) for j in range(len(self.fused))]
            got = self.learner.learn(self.fused, ros)
            for j, g in enumerate(got):
                want = self.alone[j].learn_rollout(ros[j])
                assert g.keys() == want.keys()
                for key in want:
                    assert g[key] == pytest.approx(want[key], rel=rel, abs=abs_), (j, key)

    def check(self, atol: float = 1e-12, rtol: float = 1e-10) -> None:
        for x, y in zip(self.fused, self.alone, strict=True):
            assert_same(x, y, atol, rtol)


def assert_in_stacks(learner: RolloutLearner, algos: list[PPO]) -> None:
    """Every member of a group holds its weights, log-stds and Adam moments in its stacks."""
    for group in learner.groups.values():
        stacks = {t.untyped_storage().data_ptr() for shapes in group.shapes.values()
                  for sh in shapes for t in (sh.params, sh.exp_avg, sh.exp_avg_sq, sh.steps)}
        for algo in group.algos:
            assert any(algo is a for a in algos)
            for t in state(algo):
                assert t.untyped_storage().data_ptr() in stacks


CASES = [pytest.param(c, d, id=f"{'mappo' if c else 'ippo'}-{'discrete' if d else 'continuous'}")
         for c in (False, True) for d in (False, True)]


@pytest.mark.usefixtures("float64")
@pytest.mark.parametrize(("centralised", "discrete"), CASES)
def test_members_apart_learn_together_as_each_alone(centralised: bool, discrete: bool) -> None:
    """Three successive updates: every member ends where its own learn_rollout leaves it (float64,
    to 1e-12), members 0-3 and 4-5 in two groups, member 6 alone."""
    both = Both(population(centralised, discrete))
    both.updates(3)
    both.check()
    keys = [rollout_key(m, make_rollout(m.spec, 0)) for m in both.fused]
    assert len(set(keys[:4])) == 1 and keys[4] == keys[5] and len(set(keys)) == 3
    assert both.learner.formed == 2  # formed once, kept from one update to the next
    assert {len(g.algos) for g in both.learner.groups.values()} == {4, 2}
    assert_in_stacks(both.learner, both.fused)


def test_in_float32_too() -> None:
    both = Both(population(True, False, 4))
    both.updates(3, rel=1e-3, abs_=1e-5)
    both.check(atol=2e-5, rtol=1e-3)


@pytest.mark.usefixtures("float64")
def test_groups_reform_after_a_resume_a_copy_a_mutation_and_a_load() -> None:
    both = Both(population(True, False, 4))
    both.updates(2)
    fused, learner = both.fused, both.learner
    assert learner.formed == 1
    # a resume: member 0 rebuilt from its state (new objects, the same values); member 1's
    # architecture mutates; member 3 becomes a copy of member 2 with a learning rate of its own
    fused[0] = PPO.from_state_dict(fused[0].spec, fused[0].sw, fused[0].state_dict())
    both.alone[0].actor_version = fused[0].actor_version  # counts changes since it was built
    rec = fused[1].mutate_architecture(ArchSpace(min_width=8, max_width=16),
                                       np.random.default_rng(0),
                                       MutationRecord(1, 1, None, "architecture"))
    assert rec.kind == "architecture"
    both.put(1, fused[1])
    copy = fused[2].clone(99)
    copy.set_hyperparams(lr_critic=4e-3)
    both.put(3, copy)
    # a copy and a state take no stack along
    for t in [*state(copy), *[v for v in fused[0].state_dict()["log_std"].values()]]:
        assert t.untyped_storage().nbytes() == t.numel() * t.element_size()
    both.updates(2)
    both.check()
    assert learner.formed == 2  # the other three together again; member 1 alone (its shapes)
    assert [len(g.algos) for g in learner.groups.values()] == [3]
    assert_in_stacks(learner, fused)
    # a state loaded in place: the same objects, new Adam state
    fused[2].load_state_dict(fused[2].state_dict())
    both.alone[2].actor_version = fused[2].actor_version
    both.updates(2)
    both.check()
    assert learner.formed == 3
    assert_in_stacks(learner, fused)


@pytest.mark.usefixtures("float64")
def test_members_that_share_networks_learn_alone() -> None:
    """With ``share`` (tied tensors between agents) each member takes its own update."""
    fused = population(True, True, 2)
    for j, m in enumerate(fused):
        fused[j] = PPO(m.spec, m.hp, dataclasses.replace(m.sw, share=True), [8, 6], "tanh", 3 + j)
    both = Both(fused)
    both.updates(2)
    both.check(atol=0, rtol=0)
    assert both.learner.formed == 0 and rollout_key(fused[0], make_rollout(fused[0].spec, 0)) \
        is None



@pytest.mark.usefixtures("float64")
def test_the_runtime_learns_members_that_finish_together_in_one_group() -> None:
    """Rollouts.learn hands the members whose rollouts end on this step to one RolloutLearner:
    members 0-2 (the same shapes) learn together, member 6 (other minibatches) alone, each as its
    own learn_rollout on its rows of the pool's steps; what it reports is that update's losses."""
    fused = [population(True, True)[j] for j in (0, 1, 2, 6)]
    alone = [twin(m) for m in fused]
    members = [Member(j, None, m, np.random.default_rng(j)) for j, m in enumerate(fused)]
    ros = [make_rollout(fused[0].spec, 40 + j) for j in range(len(fused))]
    pool = Rollouts()
    pool.place(len(members))
    for t in range(ros[0].steps):
        step = [{a: np.concatenate([getattr(ro, f)[a][t] for ro in ros]) for a in fused[0].agents}
                for f in FIELDS]
        pool.add(*step, np.concatenate([ro.done[t] for ro in ros]).astype(bool))
    got: dict[int, dict[str, float]] = {}
    pool.learn(members, member_rows(len(members), 2, None), True,
               lambda j, m, metrics: got.__setitem__(j, metrics))
    assert pool.learner.formed == 1 and [len(g.algos) for g in pool.learner.groups.values()] == [3]
    for j, (x, y) in enumerate(zip(fused, alone, strict=True)):
        want = y.learn_rollout(ros[j])
        for name in STATS:
            total = sum(v for k, v in want.items() if k.startswith(name))
            assert got[j][name] == pytest.approx(total, rel=1e-9, abs=1e-12)
        assert_same(x, y, 1e-12, 1e-10)
