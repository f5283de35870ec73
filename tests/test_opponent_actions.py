"""Games of several teams with ``games.opponent_actions: played``: a member trains only its
own team, and its critics' targets take the other teams' next actions as they were played."""

from __future__ import annotations

import copy
from pathlib import Path

import numpy as np
import pytest
import torch

from evohpo import api, checkpoint
from evohpo import config as C
from evohpo.algos import MATD3, Switches
from evohpo.algos.base import Hyperparams
from evohpo.algos.buffer import Batch, ReplayBuffer
from evohpo.envs.spec import AgentSpec, EnvSpec
from evohpo.errors import ConfigError
from evohpo.evolve import mutations
from evohpo.evolve.lineage import MutationRecord
from evohpo.loop.trainer import Trainer
from evohpo.playback.load import load_member
from evohpo.runtime.ray.group import add_rows, new_rows
from tests.test_competitive import TEAMS, tag_cfg

DUEL = EnvSpec(name="duel", agents=("pred", "prey"), per_agent={
    "pred": AgentSpec(obs_dim=3, discrete=False, act_dim=2),
    "prey": AgentSpec(obs_dim=2, discrete=False, act_dim=2, low=-1.0, high=1.0)})
HP = Hyperparams(lr_actor=1e-2, lr_critic=1e-2, batch_size=8, learn_step=1, tau=0.1,
                 expl_noise=0.1)


def duel(learners: tuple[str, ...] = ("pred",)) -> MATD3:
    algo = MATD3(DUEL, HP, Switches(twin_critics=True, policy_delay=1, target_noise=0.0),
                 [8], "relu", seed=0)
    algo.learners = learners
    return algo


def batch(seed: int = 0, n: int = 8, next_actions: bool = True) -> Batch:
    g = torch.Generator().manual_seed(seed)

    def per(width: dict[str, int]) -> dict[str, torch.Tensor]:
        return {a: torch.rand((n, w), generator=g) for a, w in width.items()}

    obs_w = {a: DUEL[a].obs_dim for a in DUEL.agents}
    act_w = {a: DUEL[a].act_dim for a in DUEL.agents}
    one = {a: 1 for a in DUEL.agents}
    return Batch(obs=per(obs_w), actions=per(act_w),
                 rewards={a: r[:, 0] for a, r in per(one).items()}, next_obs=per(obs_w),
                 terminated={a: torch.zeros(n) for a in DUEL.agents},
                 alive={a: torch.ones(n) for a in DUEL.agents},
                 next_actions=per(act_w) if next_actions else None)


def same(x: object, y: object) -> bool:
    """Equal nested states (tensors compared exactly)."""
    if isinstance(x, torch.Tensor) and isinstance(y, torch.Tensor):
        return torch.equal(x, y)
    if isinstance(x, dict) and isinstance(y, dict):
        return x.keys() == y.keys() and all(same(x[k], y[k]) for k in x)
    if isinstance(x, list | tuple) and isinstance(y, list | tuple):
        return len(x) == len(y) and all(same(u, v) for u, v in zip(x, y, strict=True))
    return x == y


def test_targets_take_the_other_teams_next_actions_as_played() -> None:
    algo, b = duel(), batch()
    y = algo.td_targets(b)
    assert set(y) == {"pred"}  # only the agents it trains have targets
    with torch.no_grad():  # by hand: its own target actor, the prey as it played
        own = torch.sigmoid(algo.actor_targets["pred"](b.next_obs["pred"]))
        x = torch.cat([b.next_obs["pred"], b.next_obs["prey"], own, b.next_actions["prey"]], 1)
        q = torch.stack([t(x).squeeze(1) for t in algo.critic_targets["pred"]]).min(0).values
    torch.testing.assert_close(y["pred"], b.rewards["pred"] + 0.95 * q)
    with torch.no_grad():  # the prey's own networks play no part ...
        for p in algo.actor_targets["prey"].parameters():
            p.add_(1.0)
    torch.testing.assert_close(algo.td_targets(b)["pred"], y["pred"])
    moved = b._replace(next_actions={**b.next_actions, "prey": b.next_actions["prey"] + 0.5})
    assert not torch.allclose(algo.td_targets(moved)["pred"], y["pred"])  # ... what it did does


def test_every_agent_learning_ignores_recorded_next_actions() -> None:
    algo, b = duel(("pred", "prey")), batch()
    torch.testing.assert_close(algo.td_targets(b)["pred"],
                               algo.td_targets(b._replace(next_actions=None))["pred"])


def test_a_member_learns_only_its_own_team() -> None:
    algo = duel()
    frozen = copy.deepcopy({k: algo.state_dict()[k]["prey"] for k in
                            ("actors", "actor_targets", "critics", "critic_targets",
                             "actor_opts", "critic_opts")})
    before = copy.deepcopy(algo.state_dict()["actors"]["pred"])
    for seed in range(4):
        metrics = algo.learn(batch(seed))
    assert set(metrics) == {"critic_loss/pred", "actor_loss/pred"}
    after = algo.state_dict()
    for key, want in frozen.items():
        assert same(after[key]["prey"], want), key
    assert not torch.equal(after["actors"]["pred"]["layers.0.weight"],
                           before["layers.0.weight"])


def test_without_recorded_next_actions_a_partial_learner_refuses() -> None:
    with pytest.raises(ValueError, match="next actions"):
        duel().learn(batch(next_actions=False))


def test_learners_survive_state_and_clone() -> None:
    algo = duel()
    assert algo.clone(3).learners == ("pred",)
    fresh = duel(("pred", "prey"))
    fresh.load_state_dict(algo.state_dict())
    assert fresh.learners == ("pred",)
    old = algo.state_dict()
    del old["learners"]  # a state saved before learners existed trained every agent
    fresh.load_state_dict(old)
    assert fresh.learners == DUEL.agents


def test_mutations_touch_only_the_agents_a_member_trains() -> None:
    cfg = C.load([{"mutation": {"arch": {"max_layers": 3, "max_width": 64}}}]).mutation
    for seed in range(20):
        algo = duel()
        member = type("M", (), {"algo": algo})()
        prey = copy.deepcopy(algo.actors["prey"].state_dict())
        rec = MutationRecord(1, 0, 0, "weights")
        out = mutations.OPERATORS["weights"](member, cfg, np.random.default_rng(seed), rec)
        assert set(out.after) == {"pred"}
        assert all(torch.equal(v, prey[k]) for k, v in algo.actors["prey"].state_dict().items())
        arch = algo.mutate_architecture(cfg.arch, np.random.default_rng(seed), rec)
        assert arch.kind == "none" or arch.target.startswith("pred/")
        assert algo.arch()["prey"] == duel().arch()["prey"]


def test_the_runtime_records_what_each_slot_plays_next() -> None:
    t = Trainer(tag_cfg(evolution={"learning_delay": 0}))
    rt, league = t.runtime, t.populations
    assert league is not None and rt.buffer.has_next_actions
    for m in t.members:  # each trains its own team only
        assert m.team is not None and m.algo.learners == TEAMS[m.team]
    slots = league.slots(0)
    rt.place(t.members, slots)
    rt.start()
    for _ in range(3):
        rt.step()
        n, k, buf = rt.cfg.env.num_envs, rt.k, rt.buffer
        rows = (buf.pos - n + np.arange(n)) % buf.capacity
        for j, slot in enumerate(slots):
            here = rows[j * k:(j + 1) * k]
            nxt = {a: buf.next_obs[here, buf.obs_slices[a]] for a in t.spec.agents}
            for team, (_, agents) in enumerate(league.teams):
                want = t.members[slot[team]].algo.act(nxt, None)[1]  # no exploration
                for a in agents:
                    np.testing.assert_allclose(buf.next_actions[here, buf.act_slices[a]],
                                               want[a], rtol=1e-5, atol=1e-6)
    t.close()


def test_learned_opponents_train_every_agent_and_keep_no_next_actions() -> None:
    t = Trainer(tag_cfg(games={"opponent_actions": "learned"}))
    assert not t.runtime.buffer.has_next_actions
    assert all(m.algo.learners == t.spec.agents for m in t.members)
    t.close()


def test_next_actions_in_the_replay_memory() -> None:
    spec = DUEL
    buf = ReplayBuffer(spec, 6, next_actions=True)
    rng = np.random.default_rng(0)

    def step(n: int, poison: bool = False) -> int:
        obs = {a: rng.random((n, spec[a].obs_dim), dtype=np.float32) for a in spec.agents}
        act = {a: rng.random((n, spec[a].act_dim), dtype=np.float32) for a in spec.agents}
        nxt = {a: rng.random((n, spec[a].act_dim), dtype=np.float32) for a in spec.agents}
        if poison:
            nxt["prey"][0, 0] = np.nan
        rew = {a: np.ones(n, np.float32) for a in spec.agents}
        term = {a: np.zeros(n, np.float32) for a in spec.agents}
        dropped = buf.add(obs, act, rew, obs, term, None, nxt)
        if not poison:
            np.testing.assert_array_equal(buf.next_actions[(buf.pos - n + np.arange(n)) % 6,
                                                           buf.act_slices["prey"]], nxt["prey"])
        return dropped

    assert step(4) == 0 and step(2, poison=True) == 1  # a NaN next action is never stored
    b = buf.sample(5, np.random.default_rng(1))
    assert b.next_actions is not None and b.next_actions["pred"].shape == (5, 2)
    other = ReplayBuffer(spec, 6, next_actions=True)
    other.load_state_dict(buf.state_dict())
    np.testing.assert_array_equal(other.next_actions, buf.next_actions)
    moved = ReplayBuffer(spec, 6, next_actions=True)  # Ray's replay copies move them too
    add_rows(moved, new_rows(buf, 0))
    np.testing.assert_array_equal(moved.next_actions[:5], buf.next_actions[:5])
    assert ReplayBuffer.bytes_for(spec, 10, True) - ReplayBuffer.bytes_for(spec, 10) == 160
    with pytest.raises(ValueError, match="next_actions"):
        buf.add(*([{a: np.zeros((1, 2), np.float32) for a in spec.agents}] * 2),
                {a: np.zeros(1, np.float32) for a in spec.agents},
                {a: np.zeros((1, spec[a].obs_dim), np.float32) for a in spec.agents},
                {a: np.zeros(1, np.float32) for a in spec.agents})
    plain = ReplayBuffer(spec, 6)
    plain.add({a: np.zeros((1, spec[a].obs_dim), np.float32) for a in spec.agents},
              {a: np.zeros((1, 2), np.float32) for a in spec.agents},
              {a: np.zeros(1, np.float32) for a in spec.agents},
              {a: np.zeros((1, spec[a].obs_dim), np.float32) for a in spec.agents},
              {a: np.zeros(1, np.float32) for a in spec.agents})
    with pytest.raises(ValueError, match="no next actions"):
        ReplayBuffer(spec, 6, next_actions=True).load_state_dict(plain.state_dict())


def test_a_member_plays_beside_the_runs_champions(tmp_path: Path) -> None:
    api.train(tag_cfg(), run_dir=tmp_path, quiet=True)
    meta, tensors = checkpoint.load(tmp_path / "checkpoints" / "latest.pt")
    good = next(i for i, m in enumerate(meta["members"]) if m["team"] == "good")
    mid = meta["members"][good]["id"]
    _, _, algo, info = load_member(tmp_path, str(mid))
    assert info["team"] == "good" and "others" in info
    _, _, champs, _ = load_member(tmp_path, "best")
    own = tensors["members"][good]["actors"]["agent_0"]
    assert all(torch.equal(v, own[k]) for k, v in algo.actors["agent_0"].state_dict().items())
    for a in TEAMS["adversaries"]:
        theirs = champs.actors[a].state_dict()
        assert all(torch.equal(v, theirs[k]) for k, v in algo.actors[a].state_dict().items())


def test_a_member_without_champions_to_play_the_others_is_refused(tmp_path: Path) -> None:
    api.train(tag_cfg(), run_dir=tmp_path, quiet=True)
    (tmp_path / "checkpoints" / "best.pt").unlink()
    meta, _ = checkpoint.load(tmp_path / "checkpoints" / "latest.pt")
    mid = next(m["id"] for m in meta["members"] if m["team"] == "good")
    with pytest.raises(ConfigError, match=r"plays only team 'good'.*does not exist yet"):
        load_member(tmp_path, str(mid))
