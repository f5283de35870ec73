"""Selection and mutation: known answers, bounds that hold, records that say what happened."""

from __future__ import annotations

import dataclasses
import math
import zlib
from dataclasses import dataclass

import numpy as np
import pytest
import torch

from evohpo import config as C
from evohpo.algos import MATD3, Hyperparams, Switches
from evohpo.config import HyperparamSpace, MutationConfig
from evohpo.envs.spec import AgentSpec, EnvSpec
from evohpo.evolve.lineage import MutationRecord
from evohpo.evolve.mutations import (
    KINDS,
    OPERATORS,
    HyperparamChange,
    mutate,
    mutate_hyperparameter,
)
from evohpo.evolve.space import INT_HPS
from evohpo.evolve.strategies import select

# an off-policy member's (the on-policy learners' bounds are theirs: test_onpolicy.py)
HP_NAMES = [f.name for f in dataclasses.fields(HyperparamSpace)
            if f.name in {h.name for h in dataclasses.fields(Hyperparams)}]
# explicit bounds (the config's own defaults, written out)
BOUNDS = {"lr_actor": (1e-5, 1e-2), "lr_critic": (1e-5, 1e-2), "batch_size": (32, 1024),
          "learn_step": (10, 400), "tau": (1e-3, 0.1), "expl_noise": (0.0, 0.5),
          "min_updates_per_step": (0.01, 0.25)}


def mcfg(**kw) -> MutationConfig:
    """A MutationConfig built (and type-checked) by config.build, with explicit bounds."""
    # architecture / activation kinds are off unless asked for: tests/test_mutations.py covers them
    data = {"architecture": 0.0, "activation": 0.0,
            "bounds": {k: {"min": lo, "max": hi, "mutate": True}  # every one, this one's too
                       for k, (lo, hi) in BOUNDS.items()}}
    for k, v in kw.items():
        if k == "bounds":
            for name, b in v.items():
                data["bounds"][name].update(b)
        else:
            data[k] = v
    return C.build(MutationConfig, data, "mutation")


def hp_at(where: str) -> Hyperparams:
    vals = {}
    for k, (lo, hi) in BOUNDS.items():
        v = {"min": lo, "max": hi, "near_min": lo * 1.05 + 1e-3 * (hi - lo),
             "near_max": hi * 0.97}[where]
        vals[k] = round(v) if k in INT_HPS else float(v)
    return Hyperparams(**vals)


# ---------------------------------------------------------------------------- select


def test_select_elite_is_argmax_and_parents_in_range():
    fit = [1.0, -3.0, 7.5, 2.0, 7.0, 0.0]
    for seed in range(20):
        p = select(fit, 3, True, np.random.default_rng(seed))
        assert len(p) == len(fit)
        assert p[0] == 2
        assert all(isinstance(i, int) and 0 <= i < len(fit) for i in p)
        # with tournaments of 3 out of 6, the two worst can never win
        assert 1 not in p[1:] and 5 not in p[1:]


def test_select_without_elitism_has_no_guaranteed_slot():
    fit = [0.0, 1.0, 2.0, 3.0]
    firsts = {select(fit, 1, False, np.random.default_rng(s))[0] for s in range(50)}
    assert firsts == {0, 1, 2, 3}


@pytest.mark.parametrize("elitism", [True, False])
def test_full_tournament_always_picks_the_best(elitism):
    fit = [0.3, 0.9, -1.0, 0.5, 0.1]
    for seed in range(10):
        assert select(fit, len(fit), elitism, np.random.default_rng(seed)) == [1] * 5


def test_tournament_size_one_is_uniform():
    n, rounds = 5, 4000
    rng = np.random.default_rng(11)
    counts = np.zeros(n)
    for _ in range(rounds):
        for i in select([5.0, 4.0, 3.0, 2.0, 1.0], 1, False, rng):
            counts[i] += 1
    exp = n * rounds / n
    chi2 = float(((counts - exp) ** 2 / exp).sum())
    assert chi2 < 18.5, counts  # 4 dof, p = 0.001


def test_tournament_of_two_win_probabilities():
    # ranks from worst: idx0 (0 worse), idx2 (1), idx3 (2), idx1 (3): P(win) = worse / C(4, 2)
    fit = [10.0, 40.0, 20.0, 30.0]
    rng = np.random.default_rng(5)
    counts = np.zeros(4)
    rounds = 3000
    for _ in range(rounds):
        for i in select(fit, 2, False, rng):
            counts[i] += 1
    freq = counts / counts.sum()
    np.testing.assert_allclose(freq, [0.0, 3 / 6, 1 / 6, 2 / 6], atol=0.02)
    assert counts[0] == 0


def test_nan_never_wins_against_a_number():
    # NaN first: a position-based tie-break or a naive max() would pick it
    nan = float("nan")
    assert select([nan, 1.0, 1.0], 3, True, np.random.default_rng(0)) == [1, 1, 1]
    assert select([nan, -1e9], 2, True, np.random.default_rng(0)) == [1, 1]
    # every 2-of-3 tournament holds a number, so index 0 is never a parent
    for seed in range(200):
        assert 0 not in select([nan, 5.0, 3.0], 2, True, np.random.default_rng(seed))


def test_all_nan_but_one():
    nan = float("nan")
    fit = [nan, nan, -2.0, nan, nan]
    assert select(fit, 5, True, np.random.default_rng(1)) == [2] * 5
    for seed in range(50):
        p = select(fit, 2, True, np.random.default_rng(seed))
        assert p[0] == 2
    # all NaN: still a valid selection (ties to the lower index)
    assert select([nan] * 3, 3, True, np.random.default_rng(0)) == [0, 0, 0]


def test_nan_loses_to_minus_infinity():
    assert select([float("nan"), -math.inf], 2, True, np.random.default_rng(0)) == [1, 1]


def test_ties_go_to_lower_index():
    assert select([3.0, 3.0, 3.0], 3, True, np.random.default_rng(0)) == [0, 0, 0]
    assert select([1.0, 4.0, 2.0, 4.0], 4, True, np.random.default_rng(0)) == [1] * 4
    # in a 2-of-3 tournament among equals the lower index wins, so index 2 never does
    for seed in range(100):
        assert 2 not in select([0.0, 0.0, 0.0], 2, False, np.random.default_rng(seed))


def test_select_is_deterministic_per_seed():
    fit = list(np.random.default_rng(0).normal(size=12))
    a = select(fit, 3, True, np.random.default_rng(99))
    b = select(fit, 3, True, np.random.default_rng(99))
    assert a == b
    others = {tuple(select(fit, 3, True, np.random.default_rng(s))) for s in range(5)}
    assert len(others) > 1


def test_select_errors():
    rng = np.random.default_rng(0)
    with pytest.raises(ValueError, match="empty"):
        select([], 1, True, rng)
    with pytest.raises(ValueError, match="tournament_size"):
        select([1.0, 2.0], 0, True, rng)
    with pytest.raises(ValueError, match="tournament_size"):
        select([1.0, 2.0], 3, True, rng)


def test_single_member():
    assert select([0.5], 1, True, np.random.default_rng(0)) == [0]
    assert select([0.5], 1, False, np.random.default_rng(0)) == [0]


# ---------------------------------------------------------------------------- mutate_hyperparameter


def _in_bounds(hp: Hyperparams, cfg: MutationConfig) -> None:
    for name in HP_NAMES:
        b = getattr(cfg.bounds, name)
        v = getattr(hp, name)
        assert b.min <= v <= b.max, (name, v, b)
        if name in INT_HPS:
            assert type(v) is int, (name, v)


@pytest.mark.parametrize("start", ["min", "max", "near_min", "near_max"])
@pytest.mark.parametrize("factors", [[0.8, 1.2], [0.1, 10.0], [0.5, 1.0, 1.5, 3.0]])
def test_mutation_random_walk_stays_in_bounds(start, factors):
    cfg = mcfg(factors=factors)
    rng = np.random.default_rng(zlib.crc32(f"{start}{factors}".encode()))
    hp = hp_at(start)
    _in_bounds(hp, cfg)
    moved = set()
    for _ in range(1500):
        changes, name, before, after, op = mutate_hyperparameter(hp, cfg, rng)
        if not changes:
            assert (name, before, after, op) == ("", None, None, "")
            continue
        assert changes == {name: after}
        assert before == getattr(hp, name) and after != before
        assert op.startswith("*")
        moved.add(name)
        hp = dataclasses.replace(hp, **changes)
        _in_bounds(hp, cfg)
    assert moved == set(HP_NAMES)


def test_mutation_from_every_start_stays_in_bounds():
    """Fresh draws (not a walk) from values at and around the bounds."""
    cfg = mcfg(factors=[0.8, 1.2])
    rng = np.random.default_rng(0)
    starts = [hp_at(w) for w in ("min", "max", "near_min", "near_max")]
    for i in range(4000):
        hp = starts[i % 4]
        changes, *_ = mutate_hyperparameter(hp, cfg, rng)
        assert len(changes) <= 1
        _in_bounds(dataclasses.replace(hp, **changes), cfg)


def test_pinned_at_max_returns_no_change():
    cfg = mcfg(factors=[1.2])
    hp = hp_at("max")
    for seed in range(50):
        assert (mutate_hyperparameter(hp, cfg, np.random.default_rng(seed))
                == ({}, "", None, None, ""))


def test_pinned_at_min_returns_no_change():
    cfg = mcfg(factors=[0.8])
    hp = hp_at("min")
    for seed in range(50):
        assert (mutate_hyperparameter(hp, cfg, np.random.default_rng(seed))
                == ({}, "", None, None, ""))


def test_nothing_mutable_returns_no_change():
    cfg = mcfg(bounds={k: {"mutate": False} for k in BOUNDS})
    assert mutate_hyperparameter(hp_at("near_min"), cfg, np.random.default_rng(0))[0] == {}


def test_only_mutable_hyperparameters_change():
    cfg = mcfg(bounds={k: {"mutate": k == "tau"} for k in BOUNDS})
    rng = np.random.default_rng(1)
    hp = hp_at("near_min")
    for _ in range(100):
        changes, name, *_ = mutate_hyperparameter(hp, cfg, rng)
        assert name == "tau" and list(changes) == ["tau"]


def _only(name: str, factors: list[float]) -> MutationConfig:
    return mcfg(factors=factors, bounds={k: {"mutate": k == name} for k in BOUNDS})


def test_known_answers():
    rng = np.random.default_rng(0)
    hp = Hyperparams(lr_actor=1e-3, lr_critic=1e-3, batch_size=100, learn_step=50, tau=0.01,
                     expl_noise=0.0)
    # plain multiplicative step
    ch, name, before, after, op = mutate_hyperparameter(hp, _only("lr_actor", [1.2]), rng)
    assert (name, before, op) == ("lr_actor", 1e-3, "*1.2") and after == pytest.approx(1.2e-3)
    # clipped at the bound, and said so
    hp2 = dataclasses.replace(hp, lr_critic=9e-3)
    ch, name, before, after, op = mutate_hyperparameter(hp2, _only("lr_critic", [1.2]), rng)
    assert after == 1e-2 and "clipped" in op
    # ints are rounded
    ch, *_ = mutate_hyperparameter(hp, _only("batch_size", [1.25]), rng)
    assert ch == {"batch_size": 125} and type(ch["batch_size"]) is int
    ch, *_ = mutate_hyperparameter(hp, _only("batch_size", [0.8]), rng)
    assert ch == {"batch_size": 80}
    # expl_noise cannot stay stuck at 0 when the factor grows it
    ch, *_ = mutate_hyperparameter(hp, _only("expl_noise", [1.2]), rng)
    assert ch == {"expl_noise": 0.01}
    # but a shrinking factor at 0 has nothing to do
    assert mutate_hyperparameter(hp, _only("expl_noise", [0.8]), rng)[0] == {}


def test_small_ints_move_by_at_least_one():
    cfg_up = mcfg(factors=[1.2], bounds={k: {"mutate": k == "learn_step"} for k in BOUNDS}
                  | {"learn_step": {"min": 1, "max": 400, "mutate": True}})
    cfg_down = dataclasses.replace(cfg_up, factors=[0.8])
    hp = Hyperparams(1e-3, 1e-3, 64, 2, 0.01, 0.1)
    assert mutate_hyperparameter(hp, cfg_up, np.random.default_rng(0))[0] == {"learn_step": 3}
    assert mutate_hyperparameter(hp, cfg_down, np.random.default_rng(0))[0] == {"learn_step": 1}
    hp1 = dataclasses.replace(hp, learn_step=1)
    assert mutate_hyperparameter(hp1, cfg_down, np.random.default_rng(0))[0] == {}


def test_mutate_hyperparameter_is_deterministic_per_seed():
    cfg = mcfg()
    hp = hp_at("near_min")
    a = [mutate_hyperparameter(hp, cfg, np.random.default_rng(s)) for s in range(20)]
    b = [mutate_hyperparameter(hp, cfg, np.random.default_rng(s)) for s in range(20)]
    assert a == b
    assert len({r[1] for r in a}) > 1  # the hyperparameter is drawn at random


# ---------------------------------------------------------------------------- mutate (a member)

SPEC = EnvSpec(
    name="tiny",
    agents=("speaker", "listener"),
    per_agent={
        "speaker": AgentSpec(obs_dim=3, discrete=True, act_dim=3),
        "listener": AgentSpec(obs_dim=4, discrete=False, act_dim=2, low=-1.0, high=1.0),
    },
)


@dataclass
class FakeMember:
    id: int
    parent_id: int | None
    algo: MATD3


def make_member(hp: Hyperparams | None = None, seed: int = 0) -> FakeMember:
    hp = hp or Hyperparams(lr_actor=1e-3, lr_critic=2e-3, batch_size=64, learn_step=50, tau=0.01,
                           expl_noise=0.1)
    sw = Switches(twin_critics=True, policy_delay=2, target_noise=0.1)
    algo = MATD3(SPEC, hp, sw, hidden=[32], activation="relu", seed=seed, device="cpu")
    return FakeMember(id=7, parent_id=3, algo=algo)


def snapshot(algo: MATD3) -> dict[str, list[torch.Tensor]]:
    out = {}
    for a in SPEC.agents:
        out[f"actor:{a}"] = [p.detach().clone() for p in algo.actors[a].parameters()]
        out[f"actor_target:{a}"] = [p.detach().clone() for p in algo.actor_targets[a].parameters()]
        out[f"critic:{a}"] = [p.detach().clone() for c in algo.critics[a] for p in c.parameters()]
        out[f"critic_target:{a}"] = [p.detach().clone() for c in algo.critic_targets[a]
                                     for p in c.parameters()]
    return out


def same(x: list[torch.Tensor], y: list[torch.Tensor]) -> bool:
    return all(torch.equal(a, b) for a, b in zip(x, y, strict=True))


def _lrs(algo: MATD3) -> tuple[set[float], set[float]]:
    actor = {g["lr"] for o in algo.actor_opts.values() for g in o.param_groups}
    critic = {g["lr"] for o in algo.critic_opts.values() for g in o.param_groups}
    return actor, critic


def test_hyperparameter_mutation_record_matches_algo():
    cfg = mcfg(none=0, hyperparameters=1, weights=0)
    rng = np.random.default_rng(0)
    seen = set()
    m = make_member()
    for gen in range(40):
        before_hp = dataclasses.replace(m.algo.hp)
        before_w = snapshot(m.algo)
        rec = mutate(m, cfg, gen, rng)
        assert isinstance(rec, MutationRecord)
        assert (rec.generation, rec.member_id, rec.parent_id) == (gen, 7, 3)
        assert rec.kind == "hyperparameters"
        assert rec.target in HP_NAMES
        seen.add(rec.target)
        assert rec.before == getattr(before_hp, rec.target)
        assert rec.after == getattr(m.algo.hp, rec.target) != rec.before
        for name in HP_NAMES:  # only the target changed
            if name != rec.target:
                assert getattr(m.algo.hp, name) == getattr(before_hp, name)
        assert _lrs(m.algo) == ({m.algo.hp.lr_actor}, {m.algo.hp.lr_critic})
        after_w = snapshot(m.algo)
        assert all(same(before_w[k], after_w[k]) for k in before_w)  # no weights touched
        assert rec.to_json()["kind"] == "hyperparameters"
    assert {"lr_actor", "lr_critic"} <= seen


def test_lr_mutation_reaches_the_optimizers():
    m = make_member()
    rec = mutate(m, mcfg(none=0, hyperparameters=1, weights=0, factors=[0.5],
                         bounds={k: {"mutate": k == "lr_actor"} for k in BOUNDS}),
                 0, np.random.default_rng(0))
    assert (rec.target, rec.before, rec.after) == ("lr_actor", 1e-3, 5e-4)
    assert _lrs(m.algo) == ({5e-4}, {2e-3})
    rec = mutate(m, mcfg(none=0, hyperparameters=1, weights=0, factors=[2.0],
                         bounds={k: {"mutate": k == "lr_critic"} for k in BOUNDS}),
                 1, np.random.default_rng(0))
    assert (rec.target, rec.before, rec.after) == ("lr_critic", 2e-3, 4e-3)
    assert _lrs(m.algo) == ({5e-4}, {4e-3})


def test_weight_mutation_changes_only_actors():
    m = make_member()
    hp_before = dataclasses.replace(m.algo.hp)
    before = snapshot(m.algo)
    cfg = mcfg(none=0, hyperparameters=0, weights=1, weight_fraction=0.25, weight_noise_std=0.1)
    rec = mutate(m, cfg, 2, np.random.default_rng(0))
    after = snapshot(m.algo)
    assert rec.kind == "weights" and rec.target == "actors"
    assert (rec.generation, rec.member_id, rec.parent_id) == (2, 7, 3)
    assert m.algo.hp == hp_before
    assert set(rec.after) == set(SPEC.agents)
    changed = total = 0
    for a in SPEC.agents:
        assert not same(before[f"actor:{a}"], after[f"actor:{a}"])
        assert same(before[f"actor_target:{a}"], after[f"actor_target:{a}"])
        assert same(before[f"critic:{a}"], after[f"critic:{a}"])
        assert same(before[f"critic_target:{a}"], after[f"critic_target:{a}"])
        deltas = [y - x for x, y in zip(before[f"actor:{a}"], after[f"actor:{a}"], strict=True)]
        l2 = math.sqrt(sum(float(d.pow(2).sum()) for d in deltas))
        assert rec.after[a] == pytest.approx(l2, abs=2e-6)
        changed += sum(int((d != 0).sum()) for d in deltas)
        total += sum(d.numel() for d in deltas)
    assert 0.18 < changed / total < 0.32  # ~ weight_fraction of the weights got noise


def test_weight_mutation_is_deterministic_per_seed():
    m1, m2 = make_member(), make_member()
    cfg = mcfg(none=0, hyperparameters=0, weights=1)
    r1 = mutate(m1, cfg, 0, np.random.default_rng(4))
    r2 = mutate(m2, cfg, 0, np.random.default_rng(4))
    assert r1 == r2
    s1, s2 = snapshot(m1.algo), snapshot(m2.algo)
    assert all(same(s1[k], s2[k]) for k in s1)


def test_none_mutation_changes_nothing():
    m = make_member()
    before, hp = snapshot(m.algo), dataclasses.replace(m.algo.hp)
    rec = mutate(m, mcfg(none=1, hyperparameters=0, weights=0), 0, np.random.default_rng(0))
    assert rec.kind == "none" and rec.note == "" and rec.target == ""
    assert m.algo.hp == hp
    after = snapshot(m.algo)
    assert all(same(before[k], after[k]) for k in before)


def test_hyperparameter_mutation_that_cannot_apply_is_recorded_as_none():
    hp = hp_at("max")
    m = make_member(hp=dataclasses.replace(hp))
    before = snapshot(m.algo)
    cfg = mcfg(none=0, hyperparameters=1, weights=0, factors=[1.2])
    rec = mutate(m, cfg, 5, np.random.default_rng(0))
    assert rec.kind == "none"
    assert "hyperparameters" in rec.note and "bound" in rec.note
    assert rec.target == "" and rec.before is None and rec.after is None
    assert m.algo.hp == hp
    assert _lrs(m.algo) == ({hp.lr_actor}, {hp.lr_critic})
    after = snapshot(m.algo)
    assert all(same(before[k], after[k]) for k in before)


def test_mutation_kind_frequencies_follow_the_probabilities():
    cfg = mcfg(none=1, hyperparameters=2, weights=1, factors=[0.9, 1.1])
    rng = np.random.default_rng(3)
    m = make_member()
    kinds = [mutate(m, cfg, g, rng).kind for g in range(400)]
    freq = {k: kinds.count(k) / len(kinds) for k in ("none", "hyperparameters", "weights")}
    assert freq["none"] == pytest.approx(0.25, abs=0.07)
    assert freq["hyperparameters"] == pytest.approx(0.5, abs=0.07)
    assert freq["weights"] == pytest.approx(0.25, abs=0.07)


def test_every_kind_has_one_operator_in_the_order_of_the_draw():
    assert tuple(OPERATORS) == KINDS
    assert set(KINDS) <= {f.name for f in dataclasses.fields(MutationConfig)}


def test_hyperparameter_change_names_its_fields():
    hp = Hyperparams(lr_actor=1e-3, lr_critic=1e-3, batch_size=256, learn_step=50, tau=0.01,
                     expl_noise=0.1)
    change = mutate_hyperparameter(hp, mcfg(factors=[1.2]), np.random.default_rng(0))
    assert isinstance(change, HyperparamChange)
    assert change.changes == {change.name: change.after}
    assert change.before == getattr(hp, change.name)
    assert change.op == "*1.2"
