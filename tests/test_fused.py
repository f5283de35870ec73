"""The population learner against each member's own update: same batches, same result.

Like the batched env against mpe2: :func:`evohpo.algos.fused.learn_together` must leave every
member's weights, targets and optimizer state where :meth:`MATD3.learn` on its own batch leaves
them, for MATD3 and MADDPG, continuous and discrete heads, members with their own learning rates,
tau, batch sizes (rounds laid out in chunks), learn steps and update rates on the population's
learn clock, and shapes, and members that train only their own team.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator

import numpy as np
import pytest
import torch

from evohpo.algos import ALGOS, MATD3, Hyperparams, Switches
from evohpo.algos.buffer import Batch, ReplayBuffer
from evohpo.algos.chunks import chunk_width
from evohpo.algos.fused import PopulationLearner, group_key, learn_together
from evohpo.config import ArchSpace
from evohpo.envs.spec import AgentSpec, EnvSpec
from evohpo.evolve.lineage import MutationRecord
from evohpo.evolve.member import Member
from evohpo.runtime.clock import on_tick, steps_owed
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


def assert_same(x: MATD3, y: MATD3, atol: float = 1e-5, rtol: float = 1e-4) -> None:
    assert x.updates == y.updates and x.actor_version == y.actor_version
    assert x.arch() == y.arch()
    fx, fy = flat(x), flat(y)
    assert len(fx) == len(fy)
    for s, t in zip(fx, fy, strict=True):
        torch.testing.assert_close(s, t, atol=atol, rtol=rtol)
    assert torch.equal(x.gen.get_state(), y.gen.get_state())  # the same noise drawn


def run_both(fused: list[MATD3], buf: ReplayBuffer, steps: int, seed: int) -> list[MATD3]:
    """``steps`` updates of ``fused`` together (one PopulationLearner) and of copies of them one
    by one, on the same rows."""
    alone = [twin(m) for m in fused]
    learner = PopulationLearner()
    rngs = [np.random.default_rng(seed + j) for j in range(len(fused))]
    twins = [np.random.default_rng(seed + j) for j in range(len(fused))]
    for _ in range(steps):
        got = learner.learn(fused, buf, rngs)
        for j, g in enumerate(got):
            same_losses(g, alone[j].learn(buf.sample(alone[j].hp.batch_size, twins[j])))
    return alone


def twin(m: MATD3) -> MATD3:
    """A copy that learns alone, drawing what ``m`` draws."""
    a = m.clone(0)
    a.gen.set_state(m.gen.get_state())
    return a


def same_losses(got: dict[str, float], want: dict[str, float]) -> None:
    assert got.keys() == want.keys()
    for key in want:
        assert got[key] == pytest.approx(want[key], rel=1e-3, abs=1e-4)


# every per-member hyperparameter the learner reads differs; batches of 40 to 300 rows make
# rounds of 64-row chunks; learn steps and update rates as PBT leaves them apart
APART = {"lr_actor": [1e-3, 2e-3, 5e-4, 1.5e-3], "lr_critic": [2e-3, 1e-3, 3e-3, 5e-4],
         "tau": [0.01, 0.02, 0.05, 0.005], "batch_size": [300, 40, 64, 256],
         "learn_step": [16, 19, 24, 30], "min_updates_per_step": [0.0, 0.04, 0.1, 0.04]}


def members_apart(spec: EnvSpec, algo: str) -> list[MATD3]:
    return [MATD3(spec, dataclasses.replace(HP, **{k: v[j] for k, v in APART.items()}),
                  Switches(**ALGOS[algo]), [16, 16], "relu", seed=10 + j) for j in range(4)]


class Clock:
    """The population on the learn clock (:mod:`evohpo.runtime.clock`, ``k`` env steps per
    member and vector step), each tick's owed steps taken in rounds through one
    PopulationLearner; beside it, a copy of each member takes the same steps one by one through
    MATD3.learn, on the same draws."""

    def __init__(self, fused: list[MATD3], buf: ReplayBuffer, seed: int, k: int = 2):
        self.fused, self.buf, self.k, self.v = fused, buf, k, 0
        self.learner = PopulationLearner()
        self.on = [Member(j, None, m, np.random.default_rng(seed + j))
                   for j, m in enumerate(fused)]
        self.twins = [np.random.default_rng(seed + j) for j in range(len(fused))]
        self.alone = [twin(m) for m in fused]

    def put(self, j: int, algo: MATD3) -> None:
        """Member ``j`` is now ``algo`` (its copy alone starts from it)."""
        self.fused[j] = self.on[j].algo = algo
        self.alone[j] = twin(algo)

    def ticks(self, n: int) -> None:
        done = 0
        while done < n:
            if on_tick(self.v, self.on, self.k):
                done += 1
                owed = steps_owed(self.on, 1, [True] * len(self.on))
                for r in range(max(owed)):
                    who = [j for j, n in enumerate(owed) if n > r]
                    got = self.learner.learn([self.fused[j] for j in who], self.buf,
                                             [self.on[j].rng for j in who], self.fused)
                    for j, g in zip(who, got, strict=True):
                        alone = self.alone[j]
                        same_losses(g, alone.learn(self.buf.sample(alone.hp.batch_size,
                                                                   self.twins[j])))
            for m in self.on:
                m.steps += self.k
                m.learn_acc += self.k
            self.v += 1

    def check(self, atol: float = 1e-5, rtol: float = 1e-4) -> None:
        for x, y in zip(self.fused, self.alone, strict=True):
            assert_same(x, y, atol, rtol)


@pytest.fixture
def float64(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Networks, batches and draws in float64. Over a hundred updates float32 rounding alone
    can move a weight by 1e-3 (Adam divides a gradient near zero, summed in another order, by
    its own small size), which would hide a real error; in float64 a member's fused and own
    updates agree to about 1e-15."""
    gather = ReplayBuffer.gather

    def in_float64(self: ReplayBuffer, idx: np.ndarray) -> Batch:
        return Batch(*[None if d is None else {a: t.double() for a, t in d.items()}
                       for d in gather(self, idx)])

    monkeypatch.setattr(ReplayBuffer, "gather", in_float64)
    torch.set_default_dtype(torch.float64)
    try:
        yield
    finally:
        torch.set_default_dtype(torch.float32)


def filled(spec: EnvSpec, seed: int) -> ReplayBuffer:
    """A replay memory of 500 random transitions."""
    buf = ReplayBuffer(spec, 500)
    fill(buf, spec, 500, np.random.default_rng(seed))
    return buf


@pytest.mark.usefixtures("float64")
@pytest.mark.parametrize("algo", sorted(ALGOS))
@pytest.mark.parametrize("discrete", [False, True])
def test_a_population_on_the_clock_learns_as_each_member_alone(algo: str,
                                                                discrete: bool) -> None:
    spec = spec_of(discrete)
    buf = filled(spec, 0)
    fused = members_apart(spec, algo)
    assert fused[0].actors["a"].layers[0].weight.dtype == torch.float64
    clock = Clock(fused, buf, seed=1)
    clock.ticks(100)
    # ticks every 8 vector steps from the start, the last at 1584 env steps each: 99, 83, 66
    # and 52 learns; member 2 takes 0.1 per env step (2 or 3 per learn of 24), member 3 0.04
    # (1 or 2 per learn of 30)
    assert [m.updates for m in fused] == [99, 83, 158, 62]
    clock.check(atol=1e-11, rtol=1e-9)
    # one group, formed once: the members' weights, targets and Adam state live in its stacks
    assert clock.learner.formed == 1
    assert_in_stacks(clock.learner, fused)


def test_in_float32_too() -> None:
    spec = spec_of(True)
    buf = filled(spec, 0)
    clock = Clock(members_apart(spec, "matd3"), buf, seed=1)
    clock.ticks(20)
    clock.check()


def test_chunk_width_and_the_chunks_of_a_round() -> None:
    assert chunk_width([256] * 4) == 256
    assert chunk_width([40, 64, 256, 300]) == 64          # 11 chunks, 704 rows, not 4 x 300
    assert chunk_width([32, 28, 24, 32]) == 32            # one chunk each beats padding less
    spec = spec_of(False)
    buf = ReplayBuffer(spec, 300)
    fill(buf, spec, 300, np.random.default_rng(4))
    batch, rows = buf.sample_each([70, 20], [np.random.default_rng(j) for j in range(2)], 32)
    assert rows.shape == (4, 32) and rows.sum(1).tolist() == [32, 32, 6, 20]
    for j, (at, n) in enumerate([(0, 70), (96, 20)]):  # each caller's draws, as sample gives
        want = buf.sample(n, np.random.default_rng(j))
        torch.testing.assert_close(batch.obs["a"].flatten(0, 1)[at:at + n], want.obs["a"])


def assert_in_stacks(learner: PopulationLearner, algos: list[MATD3]) -> None:
    """Every member's parameters, targets and Adam moments are views into its group's stacks."""
    for algo in algos:
        group = learner.groups[group_key(algo)]
        stacks = {t.untyped_storage().data_ptr() for shapes in group.shapes.values()
                  for sh in shapes for t in (*sh.params, *sh.targets, *sh.exp_avg,
                                             *sh.exp_avg_sq, sh.steps)}
        for a in algo.learners:
            for net in (algo.actors[a], algo.actor_targets[a], *algo.critics[a],
                        *algo.critic_targets[a]):
                for p in net.parameters():
                    assert p.untyped_storage().data_ptr() in stacks
            for opt in (algo.actor_opts[a], algo.critic_opts[a]):
                for st in opt.state.values():
                    assert all(t.untyped_storage().data_ptr() in stacks for t in st.values())


def own_memory(tensors: list[torch.Tensor]) -> bool:
    """Whether each of ``tensors`` holds only its own elements (no view into a stack)."""
    return all(t.untyped_storage().nbytes() == t.numel() * t.element_size() for t in tensors)


def leaves(x: object) -> list[torch.Tensor]:
    if isinstance(x, torch.Tensor):
        return [x]
    if isinstance(x, dict):
        return [t for v in x.values() for t in leaves(v)]
    return [t for v in x for t in leaves(v)] if isinstance(x, list) else []


def held(algo: MATD3) -> list[torch.Tensor]:
    """Its networks' parameters and its optimizers' state."""
    nets = [*algo.actors.values(), *algo.actor_targets.values(),
            *[c for cs in (*algo.critics.values(), *algo.critic_targets.values()) for c in cs]]
    return [p for net in nets for p in net.parameters()] + [
        t for opt in (*algo.actor_opts.values(), *algo.critic_opts.values())
        for st in opt.state.values() for t in st.values()]


@pytest.mark.usefixtures("float64")
def test_groups_reform_after_mutations_copies_and_a_resume() -> None:
    spec = spec_of(False)
    buf = filled(spec, 1)
    clock = Clock(members_apart(spec, "matd3"), buf, seed=3)
    clock.ticks(30)
    fused, learner = clock.fused, clock.learner
    # a state or a copy takes no stack along
    assert learner.formed == 1 and not own_memory(held(fused[0]))
    assert own_memory(leaves(fused[0].state_dict())) and own_memory(held(fused[1].clone(7)))
    # a resume: member 0 rebuilt from its state (new objects, the same values: its copy alone
    # goes on as it was); member 1's architecture and member 2's activation mutate; member 3
    # becomes a copy of member 0 with a learning rate of its own
    state = fused[0].state_dict()
    fused[0] = clock.on[0].algo = MATD3.from_state_dict(spec, fused[0].sw, state)
    clock.alone[0].actor_version = fused[0].actor_version  # counts changes since it was built
    rng = np.random.default_rng(0)
    # only a new layer fits: fresh tensors, whose Adam steps start again beside the others'
    space = ArchSpace(min_layers=2, max_layers=3, min_width=16, max_width=16, layer_prob=1.0)
    rec = fused[1].mutate_architecture(space, rng, MutationRecord(1, 1, None, "architecture"))
    assert rec.op.startswith("add_layer")
    clock.put(1, fused[1])
    fused[2].mutate_activation(ArchSpace(activations=["tanh"]), rng,
                               MutationRecord(1, 2, None, "activation"))
    clock.put(2, fused[2])
    copy = fused[0].clone(99)
    copy.set_hyperparams(lr_critic=4e-3)
    clock.put(3, copy)
    assert len({group_key(m) for m in fused}) == 3
    clock.ticks(40)
    clock.check(atol=1e-11, rtol=1e-9)
    assert learner.formed == 1 + 3 and set(learner.groups) == {group_key(m) for m in fused}
    # the new layer's Adam steps count from 0, the others' on
    kind = rec.target.split("/")[1]
    assert not all(sh.uniform for sh in learner.groups[group_key(fused[1])].shapes[kind])
    assert_in_stacks(learner, fused)
    # a state loaded in place (as into a Ray actor's member): the same objects, new Adam state
    fused[2].load_state_dict(fused[2].state_dict())
    clock.alone[2].actor_version = fused[2].actor_version
    clock.ticks(30)
    clock.check(atol=1e-11, rtol=1e-9)
    assert learner.formed == 5
    assert_in_stacks(learner, fused)


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
    out = learn_together([ms[0], own, ms[1]], buf, [np.random.default_rng(j) for j in range(3)])
    assert seen == [20] and out[1] == {"loss": 1.0}
    assert "critic_loss/a" in out[0] and "critic_loss/a" in out[2]
    assert [m.updates for m in ms] == [1, 1]
