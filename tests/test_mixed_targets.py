"""``population.opponent_actions: mixed``: a member keeps its own model of the other team, and its
critics' targets take the other team's next actions as played where the scripted heuristic
played it."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from evohpo.algos.buffer import ReplayBuffer
from evohpo.errors import ConfigError
from evohpo.games.references import heuristic_policy
from evohpo.loop.trainer import Trainer
from evohpo.runtime.ray.group import add_rows, new_rows
from tests.test_competitive import SCRIPTED, TEAMS, tag_cfg
from tests.test_opponent_actions import DUEL, batch, duel

MIXED = {**SCRIPTED, "population": {"scripted_opponents": 1.0, "opponent_actions": "mixed"}}


def test_targets_take_the_heuristic_as_played_where_it_played() -> None:
    algo = duel(("pred", "prey"))  # pred's team: it also trains its own model of the prey
    algo.scripted_known = ("prey",)
    where = torch.tensor([1.0, 0, 0, 1, 1, 0, 1, 0])
    b = batch()._replace(scripted={"pred": 1.0 - where, "prey": where})
    mixed = algo.td_targets(b)
    assert set(mixed) == {"pred", "prey"}
    algo.scripted_known = ()
    learned = algo.td_targets(b)  # the prey's next actions from its own model everywhere
    algo.learners = ("pred",)
    played = algo.td_targets(b)  # ... and as played everywhere
    on = where.bool()
    torch.testing.assert_close(mixed["pred"][on], played["pred"][on])
    torch.testing.assert_close(mixed["pred"][~on], learned["pred"][~on])
    assert not torch.allclose(played["pred"][~on], learned["pred"][~on])  # the rows differ
    # the member's own agents always act by its own target actors, even where the mask
    # (another member's batch: the heuristic played the pred there) says otherwise
    algo.learners, algo.scripted_known = ("pred", "prey"), ("prey",)
    no_pred = b._replace(scripted={"pred": torch.zeros(8), "prey": where})
    torch.testing.assert_close(algo.td_targets(no_pred)["pred"], mixed["pred"])


def test_mixed_targets_need_the_recorded_actions() -> None:
    algo = duel(("pred", "prey"))
    algo.scripted_known = ("prey",)
    with pytest.raises(ValueError, match="scripted heuristic"):
        algo.td_targets(batch())  # next actions kept, but not where the heuristic played
    with pytest.raises(ValueError, match="scripted heuristic"):
        algo.td_targets(batch(next_actions=False))


def test_scripted_known_survives_state_and_clone() -> None:
    algo = duel(("pred", "prey"))
    algo.scripted_known = ("prey",)
    assert algo.clone(2).scripted_known == ("prey",)
    fresh = duel(("pred", "prey"))
    fresh.load_state_dict(algo.state_dict())
    assert fresh.scripted_known == ("prey",)
    old = algo.state_dict()
    del old["scripted_known"]  # a state saved before it existed took nothing as played
    fresh.load_state_dict(old)
    assert fresh.scripted_known == ()


def test_the_runtime_marks_the_envs_where_the_heuristic_played() -> None:
    t = Trainer(tag_cfg(**MIXED))
    rt, league = t.runtime, t.league
    assert league is not None and rt.buffer.has_next_actions and rt.buffer.has_scripted
    for m in t.members:  # whole learners, the other team's heuristic actions known
        assert m.team is not None and m.algo.learners == t.spec.agents
        assert m.algo.scripted_known == tuple(a for a in t.spec.agents if a not in TEAMS[m.team])
    heuristic = heuristic_policy(t.spec, "simple_tag", t.cfg.env.kwargs)
    buf, k, n = rt.buffer, rt.k, t.cfg.env.num_envs
    rt.start()
    for generation in (0, 1):  # each team meets the heuristic in turn
        opponents = league.opponents(generation)
        assert opponents is not None
        rt.place(t.members, league.slots(generation), opponents)
        for _ in range(2):
            rt.step()
            rows = (buf.pos - n + np.arange(n)) % buf.capacity
            for j, (live, _) in enumerate(opponents):
                for team, (_, agents) in enumerate(league.teams):
                    for i in range(j * k, (j + 1) * k):
                        by_rule = team != live and i >= j * k + k // 2
                        for a in agents:
                            assert buf.scripted[rows[i], t.spec.agents.index(a)] == by_rule
                    second = rows[j * k + k // 2:(j + 1) * k]
                    nxt = {a: buf.next_obs[second, buf.obs_slices[a]] for a in t.spec.agents}
                    want = heuristic.act(nxt)[1]
                    for a in agents if team != live else ():
                        np.testing.assert_allclose(buf.next_actions[second, buf.act_slices[a]],
                                                   want[a], rtol=1e-5, atol=1e-6)
    assert buf.scripted[:len(buf)].any() and not buf.scripted[:len(buf)].all()
    t.close()


def test_mixed_needs_the_heuristic_to_play() -> None:
    with pytest.raises(ConfigError, match="scripted_opponents"):
        Trainer(tag_cfg(population={"opponent_actions": "mixed"}))


def test_where_the_heuristic_played_in_the_replay_memory() -> None:
    spec, rng = DUEL, np.random.default_rng(0)
    buf = ReplayBuffer(spec, 6, next_actions=True, scripted=True)

    def rows(n: int, width: str) -> dict[str, np.ndarray]:
        return {a: rng.random((n, getattr(spec[a], width)), dtype=np.float32)
                for a in spec.agents}

    def add(b: ReplayBuffer, n: int, scripted: dict[str, np.ndarray] | None) -> int:
        obs = rows(n, "obs_dim")
        return b.add(obs, rows(n, "act_dim"), {a: np.ones(n, np.float32) for a in spec.agents},
                     obs, {a: np.zeros(n, np.float32) for a in spec.agents}, None,
                     rows(n, "act_dim"), scripted)

    mask = {"pred": np.array([True, False, False]), "prey": np.array([False, True, True])}
    assert add(buf, 3, mask) == 0
    np.testing.assert_array_equal(buf.scripted[:3], np.stack([mask["pred"], mask["prey"]], 1))
    b = buf.gather(np.array([2, 0]))
    assert b.scripted is not None
    np.testing.assert_array_equal(b.scripted["prey"].numpy(), [1.0, 0.0])
    other = ReplayBuffer(spec, 6, next_actions=True, scripted=True)
    other.load_state_dict(buf.state_dict())
    np.testing.assert_array_equal(other.scripted, buf.scripted)
    moved = ReplayBuffer(spec, 6, next_actions=True, scripted=True)  # Ray's replay copies
    add_rows(moved, new_rows(buf, 0))
    np.testing.assert_array_equal(moved.scripted[:3], buf.scripted[:3])
    assert (ReplayBuffer.bytes_for(spec, 10, True, True)
            - ReplayBuffer.bytes_for(spec, 10, True)) == 80
    with pytest.raises(ValueError, match="scripted"):
        add(buf, 1, None)
    played = ReplayBuffer(spec, 6, next_actions=True)
    with pytest.raises(ValueError, match="scripted"):
        add(played, 1, mask)
    add(played, 1, None)
    with pytest.raises(ValueError, match="scripted heuristic played"):
        ReplayBuffer(spec, 6, next_actions=True, scripted=True).load_state_dict(
            played.state_dict())
    with pytest.raises(ValueError, match="next actions too"):
        ReplayBuffer(spec, 6, scripted=True)
