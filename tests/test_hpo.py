"""The search: sampled starts (scales, bounds, Latin hypercube), each strategy's exploit/explore
on synthetic fitness with known answers, the noise-aware copy rule, and the kept best member
(chosen and reported on fresh episodes)."""

from __future__ import annotations

import copy
import dataclasses
import math
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest
import torch

import evohpo
from evohpo import checkpoint
from evohpo import config as C
from evohpo.algos import Hyperparams
from evohpo.config import EvolutionConfig, MutationConfig
from evohpo.envs import probe
from evohpo.evolve import space
from evohpo.evolve.evolution import next_generation
from evohpo.evolve.population import make_population
from evohpo.evolve.strategies import independent, truncation, worse_beyond
from evohpo.loop.best import BestKeeper, fresh_seeds
from evohpo.playback import load as playback
from evohpo.report.data import read_jsonl
from evohpo.runtime import evaluate as play
from evohpo.runtime.evaluate import Score

TOY = "tests.toy_envs:target_game"
HP_NAMES = [f.name for f in dataclasses.fields(Hyperparams)]
INTS = ("batch_size", "learn_step")
NAN, INF = float("nan"), math.inf


def sample_cfg(size: int = 16, **over: Any) -> C.Config:
    base = {"device": "cpu", "env": {"name": TOY, "num_envs": size, "pool": "sync"},
            "population": {"size": size, "init": "sample"}, "logging": {"console": False}}
    return C.load([base, over])


# ----------------------------------------------------------------------------- sampled starts


def test_latin_hypercube_has_one_point_per_stratum_on_every_axis() -> None:
    for n, d, seed in [(1, 3, 0), (7, 2, 1), (16, 8, 2), (30, 5, 3)]:
        u = space.latin_hypercube(n, d, np.random.default_rng(seed))
        assert u.shape == (n, d) and (u >= 0).all() and (u < 1).all()
        for j in range(d):
            assert sorted(np.floor(u[:, j] * n).astype(int)) == list(range(n))
    # the strata are shuffled independently per axis (not the same order on every axis)
    u = space.latin_hypercube(16, 4, np.random.default_rng(0))
    orders = {tuple(np.argsort(u[:, j])) for j in range(4)}
    assert len(orders) == 4


def test_sampled_starts_stay_in_bounds_and_the_arch_space() -> None:
    cfg = sample_cfg(16, algo={"hidden": [64]}, mutation={
        "bounds": {"batch_size": {"min": 16, "max": 512}, "learn_step": {"min": 2, "max": 90}},
        "arch": {"min_layers": 1, "max_layers": 3, "min_width": 16, "max_width": 128}})
    starts = space.starts(cfg, np.random.default_rng(0))
    assert len(starts) == 16
    assert not starts[0].sampled and all(s.sampled for s in starts[1:])  # keep_preset by default
    arch = cfg.mutation.arch
    for s in starts[1:]:
        assert set(s.hyperparams) == set(HP_NAMES)
        for name in HP_NAMES:
            b, v = getattr(cfg.mutation.bounds, name), s.hyperparams[name]
            assert b.min <= v <= b.max, (name, v)
            assert type(v) is (int if name in INTS else float), (name, v)
        assert arch.min_layers <= len(s.hidden) <= arch.max_layers
        assert all(arch.min_width <= w <= arch.max_width and w % 8 == 0 for w in s.hidden)
        assert len(set(s.hidden)) == 1  # one width per network
    # a Latin hypercube: 15 sampled members, 15 different values on every continuous axis
    for name in ("lr_actor", "lr_critic", "tau", "expl_noise"):
        assert len({s.hyperparams[name] for s in starts[1:]}) == 15
    # the architecture axes are explored: several depths and several widths
    assert len({len(s.hidden) for s in starts}) == 3
    assert len({s.hidden[0] for s in starts}) >= 4


def test_updates_per_env_step_is_searched_only_when_asked() -> None:
    # off by default (more updates cost wall time at the same env steps): every start keeps
    # algo.min_updates_per_step, and the draws of the other axes are the same as without it
    off = space.starts(sample_cfg(8, algo={"min_updates_per_step": 0.03}),
                       np.random.default_rng(2))
    assert {s.hyperparams["min_updates_per_step"] for s in off} == {0.03}
    on = space.starts(sample_cfg(8, algo={"min_updates_per_step": 0.03}, mutation={
        "bounds": {"min_updates_per_step": {"mutate": True, "min": 0.02, "max": 0.32}}}),
        np.random.default_rng(2))
    rates = sorted(s.hyperparams["min_updates_per_step"] for s in on[1:])
    assert len(set(rates)) == 7 and 0.02 <= rates[0] and rates[-1] <= 0.32
    # log scale: one draw per stratum, so about half below the geometric middle, 0.08
    assert 2 <= sum(r < 0.08 for r in rates) <= 5
    # mutation moves it by a factor, within its bounds
    cfg = MutationConfig(factors=[2.0], bounds=C.HyperparamSpace(**{
        f.name: C.Bound(getattr(C.HyperparamSpace(), f.name).min,
                        getattr(C.HyperparamSpace(), f.name).max,
                        mutate=f.name == "min_updates_per_step")
        for f in dataclasses.fields(C.HyperparamSpace)}))
    hp = Hyperparams(lr_actor=1e-3, lr_critic=1e-3, batch_size=64, learn_step=25, tau=0.01,
                     expl_noise=0.1, min_updates_per_step=0.2)
    from evohpo.evolve.mutations import mutate_hyperparameter
    change = mutate_hyperparameter(hp, cfg, np.random.default_rng(0))
    assert change.changes == {"min_updates_per_step": 0.25}  # 0.4, clipped at the max


def test_a_state_saved_before_min_updates_per_step_was_a_members_own_restores() -> None:
    from evohpo.algos import build_algo, restore_algo
    cfg = sample_cfg(1, algo={"min_updates_per_step": 0.1})
    spec = probe(TOY)
    state = build_algo(cfg, spec, 0, "cpu").state_dict()
    assert state["hp"]["min_updates_per_step"] == 0.1
    del state["hp"]["min_updates_per_step"]  # as written by older versions
    assert restore_algo(cfg, spec, state, "cpu").hp.min_updates_per_step == 0.1


def test_sampled_starts_are_reproducible_per_seed() -> None:
    cfg = sample_cfg(16)
    a = space.starts(cfg, np.random.default_rng(5))
    b = space.starts(cfg, np.random.default_rng(5))
    c = space.starts(cfg, np.random.default_rng(6))
    assert a == b
    assert a[1:] != c[1:] and a[0] == c[0]  # member 0 is the preset either way
    assert all(x.hyperparams["lr_actor"] != y.hyperparams["lr_actor"]
               for x, y in zip(a[1:], c[1:], strict=True))


def test_log_scale_spreads_over_the_decades_and_linear_over_the_range() -> None:
    bounds = {"lr_actor": {"min": 1e-5, "max": 1e-2, "scale": "log"},
              "expl_noise": {"min": 0.0, "max": 0.5, "scale": "linear"},
              "tau": {"min": 1e-3, "max": 0.1, "scale": "linear"},
              "lr_critic": {"min": 1e-3, "max": 0.1, "scale": "log"}}
    cfg = sample_cfg(30, population={"keep_preset": False}, mutation={"bounds": bounds})
    starts = space.starts(cfg, np.random.default_rng(0))
    lr = np.array([s.hyperparams["lr_actor"] for s in starts])
    decades = np.bincount(np.floor(np.log10(lr) + 5).astype(int).clip(0, 2), minlength=3)
    assert decades.sum() == 30 and (decades >= 7).all(), decades  # linear: ~27 in the top one
    noise = np.array([s.hyperparams["expl_noise"] for s in starts])
    assert 12 <= (noise > 0.25).sum() <= 18  # about half above the middle of [0, 0.5]
    # the same range [1e-3, 0.1]: linear halves it at its midpoint, log at its geometric mean
    tau = np.array([s.hyperparams["tau"] for s in starts])
    lrc = np.array([s.hyperparams["lr_critic"] for s in starts])
    assert 12 <= (tau > 0.0505).sum() <= 18 and (tau > 0.01).sum() >= 25
    assert 12 <= (lrc > 0.01).sum() <= 18 and (lrc > 0.0505).sum() <= 7


def test_from_unit_known_values() -> None:
    log, lin = C.Bound(1e-4, 1e-2, scale="log"), C.Bound(0.0, 0.5, scale="linear")
    assert space.from_unit(log, 0.0) == pytest.approx(1e-4)
    assert space.from_unit(log, 0.5) == pytest.approx(1e-3)
    assert space.from_unit(log, 1.0) == pytest.approx(1e-2)
    assert space.from_unit(lin, 0.5) == pytest.approx(0.25)
    ints = C.Bound(10, 1000, scale="log")
    assert space.from_unit(ints, 0.5, integer=True) == 100
    assert space.from_unit(ints, 1.0, integer=True) == 1000


def test_keep_preset_pinned_bounds_and_init_preset() -> None:
    cfg = sample_cfg(8, algo={"tau": 0.02, "batch_size": 128, "hidden": [48, 48]},
                     mutation={"bounds": {"tau": {"mutate": False},
                                          "batch_size": {"mutate": False}}})
    a = cfg.algo
    preset = {"lr_actor": a.lr_actor, "lr_critic": a.lr_critic, "batch_size": a.batch_size,
              "learn_step": a.learn_step, "tau": a.tau, "expl_noise": a.expl_noise,
              "min_updates_per_step": a.min_updates_per_step}
    starts = space.starts(cfg, np.random.default_rng(1))
    assert starts[0].hyperparams == preset and starts[0].hidden == [48, 48]
    assert not starts[0].sampled
    for s in starts:  # a bound with mutate: false is never sampled
        assert s.hyperparams["tau"] == 0.02 and s.hyperparams["batch_size"] == 128
    assert len({s.hyperparams["lr_actor"] for s in starts}) == 8
    # without keep_preset member 0 is sampled too
    off = C.load([C.to_dict(cfg), {"population": {"keep_preset": False}}])
    first = space.starts(off, np.random.default_rng(1))[0]
    assert first.sampled and first.hyperparams != preset
    # init: preset: every member is the preset
    pre = C.load([C.to_dict(cfg), {"population": {"init": "preset"}}])
    for s in space.starts(pre, np.random.default_rng(1)):
        assert s.hyperparams == preset and s.hidden == [48, 48] and not s.sampled


def test_sampled_population_matches_its_birth_records() -> None:
    cfg = sample_cfg(4, algo={"hidden": [16]},
                     mutation={"arch": {"max_layers": 2, "min_width": 8, "max_width": 32}})
    spec = probe(TOY)
    members, records = make_population(cfg, spec, np.random.default_rng(7), torch.device("cpu"))
    starts = space.starts(cfg, np.random.default_rng(7))  # the same draws, made first
    assert [m.id for m in members] == [r.member_id for r in records] == [0, 1, 2, 3]
    assert [r.op for r in records] == ["preset", "sample", "sample", "sample"]
    for m, r, s in zip(members, records, starts, strict=True):
        assert (r.kind, r.generation, r.parent_id, m.parent_id) == ("birth", 0, None, None)
        hp = {k: v for k, v in r.after.items() if k != "hidden"}
        assert hp == s.hyperparams and r.after["hidden"] == s.hidden
        assert m.algo.hp == Hyperparams(**hp)
        for agent, arch in m.algo.arch().items():
            assert arch["actor"] == r.after["hidden"] and arch["critic"] == r.after["hidden"], agent
        # the learning rates reach the optimizers
        for opts, name in ((m.algo.actor_opts, "lr_actor"), (m.algo.critic_opts, "lr_critic")):
            assert {g["lr"] for o in opts.values() for g in o.param_groups} == {hp[name]}
    assert members[0].algo.hp == Hyperparams(**{k: getattr(cfg.algo, k) for k in HP_NAMES})
    assert len({m.algo.hp.lr_actor for m in members}) == 4


def test_sampled_batch_size_respects_the_buffer_capacity() -> None:
    from evohpo.loop.trainer import Trainer

    cfg = sample_cfg(8, algo={"batch_size": 64, "hidden": [16]}, buffer={"capacity": 100})
    t = Trainer(cfg)
    try:
        assert all(m.hp.batch_size <= 100 for m in t.members), [m.hp.batch_size for m in t.members]
    finally:
        t.close()


# ----------------------------------------------------------------------------- strategies

BOUNDS = {"lr_actor": (1e-5, 1e-2), "lr_critic": (1e-5, 1e-2), "batch_size": (32, 1024),
          "learn_step": (10, 400), "tau": (1e-3, 0.1), "expl_noise": (0.0, 0.5)}
MID = Hyperparams(lr_actor=1e-3, lr_critic=2e-3, batch_size=128, learn_step=50, tau=0.01,
                  expl_noise=0.2)


def mcfg(**kw: Any) -> MutationConfig:
    data: dict[str, Any] = {"none": 0.0, "hyperparameters": 1.0, "weights": 0.0,
                            "architecture": 0.0, "activation": 0.0,
                            "bounds": {k: {"min": lo, "max": hi} for k, (lo, hi) in BOUNDS.items()}}
    data["bounds"]["expl_noise"]["scale"] = "linear"
    for name, b in kw.pop("bounds", {}).items():
        data["bounds"][name].update(b)
    return C.build(MutationConfig, {**data, **kw}, "mutation")


def ecfg(**kw: Any) -> EvolutionConfig:
    """Without explore_kept unless asked: these tests are of the copy rule alone."""
    return C.build(EvolutionConfig, {"explore_kept": False, **kw}, "evolution")


@dataclass
class FakeAlgo:
    hp: Hyperparams
    seed: int = -1

    def set_hyperparams(self, **changes: Any) -> None:
        self.hp = dataclasses.replace(self.hp, **changes)

    def clone(self, seed: int) -> FakeAlgo:
        other = copy.deepcopy(self)
        other.seed = seed
        return other


@dataclass
class FakeMember:
    id: int
    parent_id: int | None
    algo: FakeAlgo
    rng: np.random.Generator
    born: int = 0
    fitness: list[float] = field(default_factory=list)
    diverged: bool = False
    diverged_why: str = ""


def population(n: int, diverged: tuple[int, ...] = (), hp: Hyperparams = MID,
               ) -> list[FakeMember]:
    """Members with ids 100 + slot (ids are not slots), each with its own hyperparameters."""
    return [FakeMember(100 + i, 90 + i, FakeAlgo(dataclasses.replace(hp)),
                       np.random.default_rng(i), fitness=[float(i)], diverged=i in diverged,
                       diverged_why="nan loss" if i in diverged else "") for i in range(n)]


def slot_of(members: list[FakeMember], member_id: int) -> int:
    return next(i for i, m in enumerate(members) if m.id == member_id)


def expected_perturb(name: str, before: float, factor: float) -> float:
    lo, hi = BOUNDS[name]
    if name in INTS:
        new = min(max(round(before * factor), lo), hi)
        return new if new != before else min(max(before + (1 if factor > 1 else -1), lo), hi)
    return min(max(before * factor, lo), hi)


def ops_of(op: str) -> dict[str, str]:
    return dict(part.split(" ", 1) for part in op.split(", ")) if op else {}


def check_explore(rec: Any, mut: MutationConfig) -> dict[str, str]:
    """Every change in a PBT record is a factor of mutation.factors or a resample in bounds."""
    ops = ops_of(rec.op)
    assert set(ops) == set(rec.after or {}) == set(rec.before or {})
    assert rec.target == ",".join(ops)
    for name, op in ops.items():
        before, after = rec.before[name], rec.after[name]
        assert after != before and type(after) is (int if name in INTS else float)
        lo, hi = BOUNDS[name]
        assert lo <= after <= hi, (name, after)
        if op != "resample":
            factor = float(op.removeprefix("*"))
            assert factor in mut.factors
            assert after == pytest.approx(expected_perturb(name, before, factor)), (name, op)
    return ops


def test_truncation_known_answer() -> None:
    mut, ev = mcfg(), ecfg(strategy="truncation", ready=1, quantile=0.25, resample_probability=0.25)
    for seed in range(20):
        members = population(8)
        snapshot = [dataclasses.replace(m.algo.hp) for m in members]
        out = next_generation(members, [float(i) for i in range(8)], [0.0] * 8, 3, 50, ev, mut,
                              np.random.default_rng(seed))
        assert out.next_id == 52 and len(out.members) == 8
        assert [m.id for m in out.members[:2]] == [50, 51]
        assert all(out.members[i] is members[i] for i in range(2, 8))
        for slot in (0, 1):
            child = out.members[slot]
            t = slot_of(members, child.parent_id)
            assert t in (6, 7)
            assert child.born == 4 and child.fitness == [] and child.algo is not members[t].algo
            rec = next(r for r in out.records if r.member_id == child.id)
            assert (rec.generation, rec.parent_id) == (3, members[t].id)
            assert rec.kind == "hyperparameters"
            assert members[slot].id == 100 + slot and str(100 + slot) in rec.note
            check_explore(rec, mut)
            assert rec.before == {k: getattr(members[t].algo.hp, k) for k in rec.before}
            assert child.algo.hp == dataclasses.replace(members[t].algo.hp, **rec.after)
        # the parents were copied, not changed
        assert [m.algo.hp for m in members] == snapshot
        elite = sorted(r.member_id for r in out.records if r.kind == "elite")
        assert elite == list(range(102, 108)) and len(out.records) == 8


def test_truncation_resample_probability_one_draws_from_the_prior() -> None:
    mut, ev = mcfg(), ecfg(strategy="truncation", ready=1, quantile=0.25, resample_probability=1.0)
    lrs, changed = [], 0
    for seed in range(60):
        out = truncation(population(8), [float(i) for i in range(8)], [0.0] * 8, 0, 8, ev, mut,
                         np.random.default_rng(seed))
        for rec in out.records[:2]:
            ops = check_explore(rec, mut)
            assert set(ops.values()) == {"resample"}
            changed += len(ops)
            lrs.append(rec.after["lr_actor"])
    assert changed >= 0.98 * 120 * 6  # all six move (an integer may redraw its own value)
    lrs_a = np.array(lrs)
    # log-uniform on [1e-5, 1e-2]: half below the geometric mean 10^-3.5, not near the parent
    assert 0.35 <= (lrs_a < 10 ** -3.5).mean() <= 0.65
    assert (np.abs(lrs_a / 1e-3 - 1) < 0.25).mean() < 0.2


def test_truncation_resample_probability_zero_only_perturbs() -> None:
    mut = mcfg(bounds={"tau": {"mutate": False}})
    ev = ecfg(strategy="truncation", ready=1, quantile=0.25, resample_probability=0.0)
    near_max = dataclasses.replace(MID, lr_actor=9.5e-3, learn_step=390)
    factors = set()
    for seed in range(20):
        out = truncation(population(8, hp=near_max), [float(i) for i in range(8)], [0.0] * 8, 0,
                         8, ev, mut, np.random.default_rng(seed))
        for rec in out.records[:2]:
            ops = check_explore(rec, mut)
            # mutate: false stays put (min_updates_per_step's by default)
            assert set(ops) == set(HP_NAMES) - {"tau", "min_updates_per_step"}
            assert set(ops.values()) <= {"*0.8", "*1.2"}
            factors |= set(ops.values())
            if ops["lr_actor"] == "*1.2":  # clipped at the bound
                assert rec.after["lr_actor"] == 1e-2
            if ops["learn_step"] == "*1.2":
                assert rec.after["learn_step"] == 400
    assert factors == {"*0.8", "*1.2"}


def test_tournament_keeps_the_elite_and_never_breeds_from_a_diverged_member() -> None:
    mut = mcfg()
    fitness = [3.0, 1.0, 9.0, 5.0, 2.0, 0.0]  # slot 2 scores best but has diverged
    for size in (2, 3):
        ev = ecfg(strategy="tournament", tournament_size=size)
        for seed in range(30):
            members = population(6, diverged=(2,))
            out = next_generation(members, fitness, [0.0] * 6, 1, 20, ev, mut,
                                  np.random.default_rng(seed))
            assert out.members[0] is members[3]  # the best healthy member, unchanged
            assert out.members[0].algo.hp == MID
            kinds = {r.member_id: r.kind for r in out.records}
            assert kinds[103] == "elite" and kinds[102] == "diverged"
            children = out.members[1:]
            assert [c.id for c in children] == list(range(20, 25)) and out.next_id == 25
            assert all(c.parent_id != 102 and c.born == 2 for c in children)
            for c in children:  # one hyperparameter moved by a factor
                rec = next(r for r in out.records if r.member_id == c.id)
                assert rec.kind == "hyperparameters" and rec.parent_id == c.parent_id
                assert getattr(c.algo.hp, rec.target) == rec.after
    # a full tournament: every slot's parent is the best healthy member
    ev = ecfg(strategy="tournament", tournament_size=6)
    out = next_generation(population(6, diverged=(2,)), fitness, [0.0] * 6, 0, 6, ev, mut,
                          np.random.default_rng(0))
    assert [m.parent_id for m in out.members[1:]] == [103] * 5


def test_independent_keeps_the_healthy_and_replaces_the_diverged() -> None:
    mut, ev = mcfg(), ecfg(strategy="independent")
    members = population(5, diverged=(1, 3))
    fitness = [2.0, 8.0, 4.0, NAN, -1.0]  # slot 1 scores best but has diverged
    out = next_generation(members, fitness, [0.1] * 5, 2, 40, ev, mut,
                          np.random.default_rng(0))
    for i in (0, 2, 4):
        assert out.members[i] is members[i] and out.members[i].algo.hp == MID
    for i, new_id in ((1, 40), (3, 41)):
        child = out.members[i]
        assert (child.id, child.parent_id, child.born) == (new_id, 102, 3)
        assert child.algo is not members[2].algo and child.algo.hp == members[2].algo.hp
    assert out.next_id == 42
    kinds = sorted((r.member_id, r.kind, r.parent_id) for r in out.records)
    assert kinds == [(40, "none", 102), (41, "none", 102), (100, "elite", 90),
                     (101, "diverged", 91), (102, "elite", 92), (103, "diverged", 93),
                     (104, "elite", 94)]
    # nobody diverged: the same population, no new ids
    healthy = population(4)
    out = independent(healthy, [1.0, 4.0, 2.0, 3.0], [0.0] * 4, 0, 9, ev, mut,
                      np.random.default_rng(0))
    assert all(a is b for a, b in zip(out.members, healthy, strict=True)) and out.next_id == 9


# ----------------------------------------------------------------------------- noise-aware rule


def order_key(m: FakeMember, f: float, i: int) -> tuple:
    return (not m.diverged, (0, 0.0) if f != f else (1, f), -i)


def test_truncation_copies_only_over_a_member_worse_beyond_min_gap() -> None:
    mut = mcfg()
    rng = np.random.default_rng(2024)
    quiet = 0
    for draw in range(400):
        n = int(rng.integers(2, 13))
        noisy = draw % 3 == 0  # errors wide enough that no gap is sure
        fitness = list(rng.normal(0, 1, n))
        se = list(rng.uniform(5, 10, n) if noisy else rng.uniform(0, 1, n) * (rng.random(n) < 0.8))
        gap = float(rng.choice([0.0, 0.5, 1.0, 2.0, 3.0]) if not noisy else rng.uniform(1, 3))
        div = tuple(int(i) for i in np.flatnonzero(rng.random(n) < 0.1)) if not noisy else ()
        for i in div:
            fitness[i] = float(rng.choice([-INF, NAN, fitness[i]]))
        members = population(n, diverged=div)
        ev = ecfg(strategy="truncation", ready=1, quantile=float(rng.uniform(0.05, 0.5)),
                  min_gap=gap)
        out = truncation(members, fitness, se, 0, 1000, ev, mut, np.random.default_rng(draw))

        def beyond(b: int, t: int, f: list[float] = fitness, s: list[float] = se,
                   g: float = gap) -> bool:
            return f[t] - f[b] > g * math.sqrt(s[b] ** 2 + s[t] ** 2)

        q = max(1, min(n // 2, round(ev.quantile * n)))
        order = sorted(range(n), key=lambda i: order_key(members[i], fitness[i], i))
        top = [i for i in order[-q:] if not members[i].diverged]
        diverged = [i for i in order if members[i].diverged]  # replaced beyond the quantile too
        bottom = diverged + [i for i in order[:q] if i not in diverged and i not in top]
        replaced = [i for i in range(n) if out.members[i] is not members[i]]
        assert out.next_id == 1000 + len(replaced)
        for b in replaced:
            t = slot_of(members, out.members[b].parent_id)
            assert b in bottom and t in top and not members[t].diverged
            assert members[b].diverged or fitness[b] != fitness[b] or beyond(b, t), (draw, b, t)
        for b in bottom:
            if not top:
                assert b not in replaced
            elif members[b].diverged or all(beyond(b, t) for t in top):
                assert b in replaced, (draw, b)
            elif not any(beyond(b, t) for t in top):
                assert b not in replaced, (draw, b)
        healthy = [i for i in range(n) if not members[i].diverged]
        if not div and not any(beyond(b, t) for b in healthy for t in healthy):
            quiet += 1
            assert replaced == [] and out.next_id == 1000
            assert sorted(r.member_id for r in out.records if r.kind == "elite") == \
                [m.id for m in members]
    assert quiet >= 100  # the "nothing is sure" branch was exercised


def test_worse_beyond_edge_cases() -> None:
    assert worse_beyond(0.0, 3.0, 5.001, 4.0, 1.0)
    assert not worse_beyond(0.0, 3.0, 5.0, 4.0, 1.0)  # exactly at the threshold: not beyond
    assert not worse_beyond(0.0, 3.0, 9.9, 4.0, 2.0)
    assert not worse_beyond(1.0, 1.0, 1.0, 1.0, 0.0)  # gap 0: equal is not worse
    assert worse_beyond(1.0, 1.0, 1.0001, 1.0, 0.0)
    assert not worse_beyond(2.0, 0.0, 1.0, 0.0, 0.0)  # better is never worse
    # NaN or -inf fitness counts as worse, whatever the other and the errors
    assert worse_beyond(NAN, 0.0, -5.0, 0.0, 100.0)
    assert worse_beyond(NAN, INF, NAN, INF, 1.0)
    assert worse_beyond(-INF, 0.0, -1e9, 1e9, 100.0)
    # a NaN standard error counts as 0
    assert worse_beyond(0.0, NAN, 1.0, NAN, 50.0)
    assert not worse_beyond(0.0, NAN, 1.0, 0.6, 2.0)  # 1 > 2 * 0.6 is false
    assert worse_beyond(0.0, 0.6, 1.0, NAN, 1.0)      # 1 > 0.6


def test_truncation_with_nan_errors_and_nan_fitness() -> None:
    mut = mcfg()
    ev = ecfg(strategy="truncation", ready=1, quantile=0.25, min_gap=5.0)
    # NaN errors count as 0: a clear ranking copies the best quarter over the worst quarter
    out = truncation(population(8), [float(i) for i in range(8)], [NAN] * 8, 0, 8, ev, mut,
                     np.random.default_rng(0))
    assert [m.id for m in out.members[:2]] == [8, 9]
    # a healthy member whose fitness is NaN is replaced even when the errors are huge
    fitness = [1.0, NAN, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0]
    members = population(8)
    out = truncation(members, fitness, [INF] * 8, 0, 8, ev, mut, np.random.default_rng(0))
    assert [i for i, m in enumerate(out.members) if m is not members[i]] == [1]
    # huge errors and no NaN: nobody is worse beyond them, nobody moves
    out = truncation(population(8), [float(i) for i in range(8)], [100.0] * 8, 0, 8, ev, mut,
                     np.random.default_rng(0))
    assert out.next_id == 8 and all(r.kind == "elite" for r in out.records)


def test_truncation_waits_until_a_member_is_ready() -> None:
    """PBT's ready: a member younger than evolution.ready windows is not copied over, however
    bad its fitness; once it has trained that long it is; a broken one goes at any age."""
    mut = mcfg()
    fitness = [float(i) for i in range(8)]  # slots 0 and 1 are the bottom quarter

    def replaced(ready: int, generation: int, born: int, fit: list[float] = fitness,
                 diverged: tuple[int, ...] = ()) -> list[int]:
        members = population(8, diverged=diverged)
        for m in members:
            m.born = born
        ev = ecfg(strategy="truncation", quantile=0.25, min_gap=0.0, ready=ready)
        out = truncation(members, fit, [0.0] * 8, generation, 8, ev, mut,
                         np.random.default_rng(0))
        return [i for i, m in enumerate(out.members) if m is not members[i]]

    assert replaced(1, 0, 0) == [0, 1]        # the default: replaced after one window
    assert replaced(5, 3, 0) == []            # trained 4 windows of 5: kept
    assert replaced(5, 4, 0) == [0, 1]        # trained 5: ready
    assert replaced(5, 6, 3) == []            # a copy born in generation 3 starts over
    assert replaced(5, 7, 3) == [0, 1]
    broken = [NAN, -INF, *fitness[2:]]
    assert replaced(50, 0, 0, broken) == [0, 1]
    assert replaced(50, 0, 0, diverged=(1,)) == [1]


def test_truncation_explore_kept_explores_a_ready_tie_in_place() -> None:
    """With evolution.explore_kept, a ready bottom member within the noise of the top keeps its
    id, lineage and weights and explores its own hyperparameters, then waits ``ready`` again; a
    young one does not; one worse beyond the noise is still copied over; off, nothing moves."""
    mut = mcfg()
    fitness = [float(i) for i in range(8)]

    def step(members: list[FakeMember], generation: int, se: float = 100.0, kept: bool = True,
             seed: int = 0) -> Any:
        ev = ecfg(strategy="truncation", quantile=0.25, min_gap=1.0, ready=5, explore_kept=kept)
        return truncation(members, fitness, [se] * 8, generation, 8, ev, mut,
                          np.random.default_rng(seed))

    for seed in range(10):
        members = population(8)
        algos = [m.algo for m in members]
        out = step(members, 4, seed=seed)
        moved = [i for i, m in enumerate(out.members) if m is not members[i]]
        assert moved == [0, 1] and out.next_id == 8  # no new member: the same two, explored
        for i in moved:
            new, old = out.members[i], members[i]
            assert (new.id, new.parent_id, new.born) == (old.id, old.parent_id, 5)
            assert new.algo is algos[i] and new.fitness == old.fitness  # its weights go on
            rec = next(r for r in out.records if r.member_id == new.id)
            assert rec.kind == "hyperparameters" and "explores in place" in rec.note
            assert rec.parent_id == old.parent_id and rec.before == {
                k: getattr(MID, k) for k in rec.before}
            check_explore(rec, mut)
            assert new.algo.hp == dataclasses.replace(MID, **rec.after)
        assert all(out.members[i].algo.hp == MID for i in range(2, 8))
        # now young again: the next window leaves them alone
        again = step(out.members, 5, seed=seed)
        assert all(a is b for a, b in zip(again.members, out.members, strict=True))
    young = population(8)
    assert all(a is b for a, b in zip(step(young, 3).members, young, strict=True))
    off = population(8)
    out = step(off, 4, kept=False)
    assert all(a is b for a, b in zip(out.members, off, strict=True))
    assert all(m.algo.hp == MID for m in off)
    # worse beyond the noise: copied over as before, explore_kept or not
    for kept in (True, False):
        out = step(population(8), 4, se=0.0, kept=kept)
        assert [m.id for m in out.members[:2]] == [8, 9] and out.next_id == 10


# ----------------------------------------------------------------------------- the kept best


@dataclass
class FixedPolicy:
    """A policy on target_game with a known return: mover plays ``c`` (or 0.7 + luck x its
    observation noise, a return that depends on the episode), picker plays ``p``."""

    c: float
    p: int = 2
    luck: float = 0.0
    hp: Hyperparams = field(default_factory=lambda: dataclasses.replace(MID))

    def act(self, obs: dict[str, np.ndarray], rng: Any) -> tuple[dict[str, np.ndarray], None]:
        n = len(obs["mover"])
        mover = (0.7 + self.luck * obs["mover"][:, 1:] if self.luck
                 else np.full((n, 2), self.c))
        return {"mover": mover.astype(np.float32),
                "picker": np.full((n, 1), self.p, np.float32)}, None

    def clone(self, seed: int) -> FixedPolicy:
        return copy.deepcopy(self)

    def arch(self) -> dict[str, Any]:
        return {"mover": {"actor": [1], "critic": [1], "activation": "relu"}}

    @property
    def fitness(self) -> float:
        return -2 * (self.c - 0.7) ** 2 + (self.p == 2)


def keeper_member(id_: int, policy: FixedPolicy) -> Any:
    return SimpleNamespace(id=id_, parent_id=id_ - 1, algo=policy, hp=policy.hp)


def test_best_keeper_keeps_the_better_on_fresh_episodes_and_reports_on_others() -> None:
    cfg = sample_cfg(2, eval={"confirm_episodes": 4})
    keeper = BestKeeper(cfg, probe(TOY), ["mover", "picker"])
    try:
        a = keeper_member(10, FixedPolicy(0.6))                      # 0.98
        assert keeper.offer(a, 0.5, 0, 100, eval_seed=7)
        assert keeper.algo is not a.algo and keeper.score is not None
        assert keeper.score.fitness == pytest.approx(a.algo.fitness)
        rec = keeper.record()
        assert (rec["id"], rec["parent_id"], rec["generation"], rec["env_steps"]) == (10, 9, 0, 100)
        assert rec["screened_fitness"] == 0.5 and rec["episodes"] == 4
        assert rec["eval_seed"] == fresh_seeds(7)[1] and rec["hyperparams"]["batch_size"] == 128
        a.algo.c = 0.0  # the member goes on changing: the kept copy does not
        # a worse member with a lucky screening score is not kept
        b = keeper_member(11, FixedPolicy(0.4))                      # 0.82
        assert not keeper.offer(b, 99.0, 1, 200, eval_seed=8)
        rec = keeper.record()
        assert (rec["id"], rec["generation"], rec["screened_fitness"]) == (10, 0, 0.5)
        assert keeper.score.fitness == pytest.approx(0.98)
        assert rec["eval_seed"] == fresh_seeds(8)[1]  # reported on this generation's episodes
        # a tie keeps the kept one; a better one replaces it
        assert not keeper.offer(keeper_member(12, FixedPolicy(0.6)), 1.0, 2, 300, eval_seed=9)
        c = keeper_member(13, FixedPolicy(0.7, p=2))                 # 1.0, the optimum
        assert keeper.offer(c, 0.1, 3, 400, eval_seed=10)
        assert (keeper.record()["id"], keeper.record()["generation"]) == (13, 3)
        assert keeper.score.fitness == pytest.approx(1.0)
        assert not keeper.offer(keeper_member(14, FixedPolicy(0.7, p=1)), 5.0, 4, 500, 11)
        # an episode-dependent return: the report is the kept member's score on the second
        # fresh seed (not the choosing one, nor the screening one)
        lucky = BestKeeper(cfg, probe(TOY), ["mover", "picker"])
        try:
            assert lucky.offer(keeper_member(20, FixedPolicy(0.0, luck=3.0)), 0.0, 0, 0, 7)
            assert lucky.score is not None
            choose, report = fresh_seeds(7)
            agents = ["mover", "picker"]
            on = {s: Score.of(play.play(cfg, FixedPolicy(0.0, luck=3.0), probe(TOY), 4, s),
                              agents) for s in (choose, report, 7)}
            assert lucky.score == on[report] and lucky.score.fitness < 1.0
            assert on[choose].fitness != on[report].fitness != on[7].fitness
        finally:
            lucky.close()
    finally:
        keeper.close()


RUN = {"steps": 160, "seed": 6, "device": "cpu",  # seed 6: a new member is kept at gen 1
       "env": {"name": TOY, "num_envs": 3, "pool": "sync"},
       "population": {"size": 3, "init": "sample"},
       "evolution": {"evo_steps": 16, "learning_delay": 0},
       "algo": {"batch_size": 8, "learn_step": 4, "hidden": [16], "lr_actor": 0.01},
       "mutation": {"bounds": {"batch_size": {"min": 4, "max": 64}},
                    "arch": {"max_layers": 2, "max_width": 32}},
       "eval": {"episodes": 2, "confirm_episodes": 6},
       "buffer": {"capacity": 1000}, "logging": {"console": False},
       "checkpoint": {"enabled": True}}


def train_keeping_best(run: Path, confirm: int) -> tuple[list[dict[str, Any]], list[Path]]:
    """A short run; the metrics, and best.pt as it stood after each generation."""
    snaps: list[Path] = []

    def snapshot(gen: evohpo.GenerationInfo) -> None:
        snap = run.parent / f"gen{gen.generation}"
        (snap / "checkpoints").mkdir(parents=True)
        shutil.copy(run / "checkpoints" / "best.pt", snap / "checkpoints" / "best.pt")
        shutil.copy(run / "config.yaml", snap / "config.yaml")
        snaps.append(snap)

    evohpo.train(RUN, run_dir=run, overrides={"eval.confirm_episodes": confirm},
                 callbacks=[snapshot])
    return read_jsonl(run / "metrics.jsonl"), snaps


def replayed(run: Path) -> tuple[dict[str, Any], Score]:
    """best.pt's record, and its member re-scored on the episodes the record names."""
    meta, _ = checkpoint.load(run / "checkpoints" / "best.pt")
    cfg, spec, algo, info = playback.load_member(run, "best")
    returns = play.play(cfg, algo, spec, info["episodes"], info["eval_seed"])
    assert len(returns[spec.agents[0]]) == info["episodes"]
    return meta, Score.of(returns, list(spec.agents))


def test_best_pt_is_the_kept_member_scored_on_fresh_episodes(tmp_path: Path) -> None:
    ms, snaps = train_keeping_best(tmp_path / "r", 6)
    assert len(ms) == len(snaps) == 4
    prev: dict[str, Any] = {}
    seeds, branches = set(), []
    for gen, (row, snap) in enumerate(zip(ms, snaps, strict=True)):
        meta, sc = replayed(snap)
        rec = meta["member"]
        assert meta["generation"] == gen and rec["episodes"] == 6
        # what best.pt and eval/best_ever report is reproduced exactly on the named episodes
        assert rec["fitness"] == pytest.approx(sc.fitness, abs=1e-9) == row["eval/best_ever"]
        assert rec["fitness_se"] == pytest.approx(sc.std_error, abs=1e-9)
        assert rec["fitness_se"] == row["eval/best_ever_se"]
        seeds.add(rec["eval_seed"])
        # the kept member is this generation's screening winner, or the one kept before
        branches.append("new" if rec["generation"] == gen else "kept")
        if rec["generation"] == gen:
            assert rec["id"] == row["eval/best_member"]
            assert rec["screened_fitness"] == row["eval/best_fitness"]
            assert rec["hyperparams"]["lr_actor"] == row[f"member/{rec['id']}/lr_actor"]
        else:
            assert gen > 0 and {k: rec[k] for k in prev} == prev
        prev = {k: rec[k] for k in ("id", "generation", "screened_fitness", "hyperparams")}
        # fresh episodes: the report is not the screening estimate
        assert row["eval/best_ever"] != row["eval/best_fitness"]
    assert len(seeds) == 4  # new report episodes every generation
    assert branches[0] == "new" and "new" in branches[1:] and "kept" in branches
    assert replayed(tmp_path / "r")[0] == meta


def test_without_confirmation_best_ever_is_the_highest_screening_fitness(tmp_path: Path) -> None:
    ms, _ = train_keeping_best(tmp_path / "r", 0)
    screened = [m["eval/best_fitness"] for m in ms]
    assert [m["eval/best_ever"] for m in ms] == list(np.maximum.accumulate(screened))
    assert not any("eval/best_ever_se" in m for m in ms)
    meta, sc = replayed(tmp_path / "r")
    rec, gen = meta["member"], screened.index(max(screened))
    assert rec["fitness"] == max(screened) == pytest.approx(sc.fitness, abs=1e-9)
    assert rec["episodes"] == RUN["eval"]["episodes"]
    assert meta["generation"] == gen and rec["id"] == ms[gen]["eval/best_member"]
