"""IPPO and MAPPO: the estimator, the losses and the normaliser against hand-computed values;
bootstrapping at truncation through the runtime; copies, checkpoints and exact resume; teams."""

from __future__ import annotations

import copy
import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from evohpo.algos import build_algo
from evohpo.algos.explore import Part
from evohpo.algos.onpolicy import (
    Rollout,
    ValueNorm,
    entropy,
    gae,
    log_prob,
    sample,
    surrogate,
    value_loss,
)
from evohpo.algos.ppo import PPO
from evohpo.algos.sharing import bias, group_forward
from evohpo.cli import main
from evohpo.config import load
from evohpo.envs import spec_for
from evohpo.evolve.member import Member
from evohpo.logs.loggers import Logger
from evohpo.runtime.local import LocalRuntime
from tests.test_checkpoint import assert_export_acts_like
from tests.test_trainer import read_jsonl, strip_time

T = torch.tensor


def test_gae_matches_hand_computed_values_with_truncation_and_termination() -> None:
    """Three steps of one env: a step mid-episode, a truncated step (bootstraps from its real
    final observation, ends the chain), then a terminated one (no bootstrap)."""
    g, lam = 0.9, 0.5
    r = T([[1.0], [2.0], [3.0]])
    v = T([[0.5], [1.0], [2.0]])
    v_next = T([[1.0], [4.0], [7.0]])  # V(next obs): the truncated step's is its final obs's
    term = T([[0.0], [0.0], [1.0]])
    done = T([[0.0], [1.0], [1.0]])
    adv, ret = gae(r, v, v_next, term, done, g, lam)
    d2 = 3.0 - 2.0                     # terminated: no bootstrap
    d1 = 2.0 + g * 4.0 - 1.0           # truncated: bootstraps from V(final obs)
    d0 = 1.0 + g * 1.0 - 0.5
    a1 = d1                            # the episode ended: the chain stops
    a0 = d0 + g * lam * a1
    np.testing.assert_allclose(adv[:, 0].numpy(), [a0, a1, d2], rtol=1e-6)
    np.testing.assert_allclose(ret[:, 0].numpy(), [a0 + 0.5, a1 + 1.0, d2 + 2.0], rtol=1e-6)


def test_gae_with_lambda_one_is_the_discounted_return_to_the_bootstrap() -> None:
    rng = np.random.default_rng(0)
    r = torch.as_tensor(rng.normal(size=(6, 2)), dtype=torch.float32)
    v = torch.as_tensor(rng.normal(size=(6, 2)), dtype=torch.float32)
    v_next = torch.cat([v[1:], T([[0.3, -0.7]])])
    zeros = torch.zeros(6, 2)
    _, ret = gae(r, v, v_next, zeros, zeros, 0.95, 1.0)
    expected = np.zeros((6, 2))
    running = np.array([0.3, -0.7])
    for t in range(5, -1, -1):
        running = r[t].numpy() + 0.95 * running
        expected[t] = running
    np.testing.assert_allclose(ret.numpy(), expected, rtol=1e-5)


def test_clipped_surrogate_and_value_loss_match_hand_computed_values() -> None:
    c = 0.2
    logp_old = torch.zeros(4)
    logp = torch.log(T([1.5, 0.5, 1.1, 0.7]))  # ratios
    adv = T([1.0, 1.0, -2.0, -2.0])
    got = surrogate(logp, logp_old, adv, c)
    # min(r A, clip(r) A): 1.5 -> clipped to 1.2 (A > 0); 0.5 -> 0.5 (smaller unclipped);
    # A < 0: 1.1 -> -2.2 (unclipped is smaller); 0.7 -> clip 0.8 gives -1.6, unclipped -1.4
    np.testing.assert_allclose(got.numpy(), [1.2, 0.5, -2.2, -1.6], rtol=1e-6)
    v_old, ret = T([0.0, 0.0, 1.0]), T([1.0, -1.0, 1.0])
    v = T([0.5, -0.1, 2.0])
    # row 0: (0.5-1)^2 = .25 vs clipped 0.2: (0.2-1)^2 = .64 -> .64; row 1: 0.81 vs 0.81;
    # row 2: (2-1)^2 = 1 vs clipped 1.2: 0.04 -> 1
    np.testing.assert_allclose(value_loss(v, v_old, ret, c).numpy(), [0.64, 0.81, 1.0],
                               rtol=1e-6)


def test_log_prob_and_entropy_of_both_heads() -> None:
    spec = spec_for(load([{"env": {"name": "simple_speaker_listener",
                                   "kwargs": {"continuous_actions": True}}}]).env)
    s = spec[spec.agents[0]]
    out, log_std = T([[0.1, -0.2, 0.3]])[:, :s.act_dim], torch.full((s.act_dim,), -0.5)
    act = out + 0.4
    want = sum(-0.5 * (0.4 / math.exp(-0.5)) ** 2 + 0.5 - 0.5 * math.log(2 * math.pi)
               for _ in range(s.act_dim))
    assert float(log_prob(s, out, log_std, act)) == pytest.approx(want, rel=1e-5)
    want_h = s.act_dim * (-0.5 + 0.5 * (1 + math.log(2 * math.pi)))
    assert float(entropy(s, out, log_std)[0]) == pytest.approx(want_h, rel=1e-5)
    d = spec_for(load([{"env": {"name": "simple_spread"}}]).env)
    sd = d[d.agents[0]]
    logits = T([[1.0, 2.0, 0.0, 0.0, -1.0]])
    p = torch.softmax(logits, -1)
    assert float(log_prob(sd, logits, None, T([[1.0]]))) == pytest.approx(math.log(p[0, 1]))
    assert float(entropy(sd, logits, None)[0]) == pytest.approx(float(-(p * p.log()).sum()))


def test_value_norm_matches_the_statistics_of_everything_seen() -> None:
    rng = np.random.default_rng(1)
    batches = [rng.normal(3.0, 2.0, size=n) for n in (5, 40, 1, 17)]
    vn = ValueNorm()
    for b in batches:
        vn.update(torch.as_tensor(b))
    allx = np.concatenate(batches)
    assert vn.mean == pytest.approx(allx.mean()) and vn.var == pytest.approx(allx.var())
    x = T([1.0, 5.0])
    np.testing.assert_allclose(vn.denormalize(vn.normalize(x)).numpy(), x.numpy(), rtol=1e-6)
    np.testing.assert_allclose(vn.normalize(x).numpy(), (x.numpy() - allx.mean()) / allx.std(),
                               rtol=1e-5)


def cfg_for(name: str, **extra: object) -> Any:
    layer = {"algo": {"name": name, "hidden": [16], "rollout": 4, "epochs": 2,
                      "minibatches": 2},
             "env": {"name": "simple_spread", "num_envs": 4, "pool": "sync",
                     "backend": "batched"},
             "population": {"size": 2}, "evolution": {"evo_steps": 16, "learning_delay": 0},
             "eval": {"episodes": 2}}
    return load([layer, extra])


def collecting(cfg: Any, spec: Any) -> tuple[LocalRuntime, list[Member]]:
    """A started local runtime with two fresh members placed."""
    rt = LocalRuntime(cfg, spec, Logger(), 0, list(spec.agents))
    members = [Member(i, None, build_algo(cfg, spec, i, "cpu"), np.random.default_rng(i))
               for i in range(2)]
    rt.start()
    rt.place(members)
    return rt, members


@pytest.mark.parametrize("algo", ["ippo", "mappo"])
def test_sampled_actions_stay_in_bounds_and_deterministic_ones_are_the_squashed_mean(
        algo: str) -> None:
    cfg = load([{"algo": {"name": algo}, "env": {"name": "simple_speaker_listener",
                                                  "kwargs": {"continuous_actions": True}}}])
    spec = spec_for(cfg.env)
    ppo = build_algo(cfg, spec, 0, "cpu")
    rng = np.random.default_rng(0)
    obs = {a: rng.normal(size=(64, spec[a].obs_dim)).astype(np.float32) for a in spec.agents}
    env_act, stored = ppo.act(obs, np.random.default_rng(1))
    det, _ = ppo.act(obs, None)
    for a in spec.agents:
        s = spec[a]
        assert (env_act[a] >= s.low).all() and (env_act[a] <= s.high).all()
        out = ppo.policy_output(a, obs[a])
        np.testing.assert_allclose(det[a], s.low + (s.high - s.low) / (1 + np.exp(-out)),
                                   rtol=1e-5)
        # the stored draw is the pre-squash sample; its spread is the policy's std
        assert np.std(stored[a] - out) == pytest.approx(float(np.exp(-0.5)), rel=0.15)
    # the population sampler gives each member's own draws
    parts = [Part(ppo, np.random.default_rng(1), slice(0, 64), None)]
    outs = {a: ppo.policy_output(a, obs[a]) for a in spec.agents}
    _, s2 = sample(spec, outs, parts)
    for a in spec.agents:
        np.testing.assert_array_equal(s2[a], stored[a])


def test_the_runtime_bootstraps_a_truncated_step_from_its_real_final_observation(
        tmp_path: Path) -> None:
    """A rollout spanning an episode's end: at the truncated step the stored next observation is
    the episode's last (not the reset one that the next step starts from), and the step is
    marked done but not terminated."""
    cfg = cfg_for("mappo", algo={"rollout": 1000}, env={"kwargs": {"max_cycles": 5}})
    spec = spec_for(cfg.env)
    rt, _ = collecting(cfg, spec)
    rt.collect(7, 0, 0)
    ro = rt.rollouts.rollout(0, slice(0, 2))
    assert ro.steps == 7
    assert ro.done[4].all() and not ro.done[3].any()
    a = spec.agents[0]
    assert not ro.terminated[a].any()
    # the next step starts from the reset observation, not from the final one
    assert not np.allclose(ro.next_obs[a][4], ro.obs[a][5])
    np.testing.assert_array_equal(ro.next_obs[a][3], ro.obs[a][4])
    rt.close()


@pytest.mark.parametrize("algo", ["ippo", "mappo"])
def test_a_copy_carries_weights_optimizer_and_normaliser_and_learns_alone(algo: str) -> None:
    cfg = cfg_for(algo)
    spec = spec_for(cfg.env)
    rt, members = collecting(cfg, spec)
    rt.collect(12, 0, 0)
    algo0 = members[0].algo
    assert algo0.updates == 3 and all(v.count > 0 for v in algo0.value_norms.values())
    twin = algo0.clone(seed=5)
    a = spec.agents[0]
    assert twin.value_norms[a].state_dict() == algo0.value_norms[a].state_dict()
    assert twin.value_norms[a] is not algo0.value_norms[a]
    sd, tw = algo0.state_dict(), twin.state_dict()
    for x, y in zip(sd["actor_opts"][a]["state"].values(), tw["actor_opts"][a]["state"].values(),
                    strict=True):
        torch.testing.assert_close(x["exp_avg"], y["exp_avg"])
    before = copy.deepcopy(algo0.state_dict())
    rt.place([members[1], Member(9, 0, twin, np.random.default_rng(9))])
    rt.collect(8, 0, 0)  # the copy learns; the original does not move
    after = algo0.state_dict()
    torch.testing.assert_close(after["actors"], before["actors"])
    assert after["value_norms"] == before["value_norms"]
    assert twin.value_norms[a].count > algo0.value_norms[a].count
    rt.close()


ARGS = ["--env", "simple_spread", "--quiet", "--set", "env.pool=sync",
        "--set", "env.backend=batched", "--set", "env.num_envs=8",
        "--set", "population.size=2", "--set", "evolution.evo_steps=48",
        "--set", "evolution.learning_delay=0", "--set", "algo.hidden=[16]",
        "--set", "algo.rollout=5", "--set", "algo.epochs=2", "--set", "algo.minibatches=2",
        "--set", "eval.episodes=2", "--set", "evolution.strategy=tournament",
        "--set", "mutation.none=0", "--set", "mutation.weights=1",
        "--set", "mutation.hyperparameters=1", "--set", "mutation.architecture=1"]


def logs(run: Path) -> tuple[list[dict], list[dict]]:
    return strip_time(read_jsonl(run / "metrics.jsonl")), read_jsonl(run / "lineage.jsonl")


@pytest.mark.parametrize("algo", ["ippo", "mappo", "mappo+share"])
def test_resume_mid_window_equals_the_uninterrupted_run(tmp_path: Path, algo: str) -> None:
    """Stopped mid-window with a rollout half full (its steps travel in the checkpoint), then
    resumed: the same metrics and lineage as the run that never stopped. Windows of 12 steps
    against rollouts of 5: every window ends with a short rollout learned at its end. With
    shared networks, activation mutations act too."""
    name, _, share = algo.partition("+")
    extra = ["--set", "algo.share=true", "--set", "mutation.activation=1"] if share else []

    def train(run: Path, steps: int) -> int:
        return main(["train", "--algo", name, *ARGS, *extra, "--steps", str(steps),
                     "--run-dir", str(run)])

    assert train(tmp_path / "full", 480) == 0
    assert train(tmp_path / "part", 208) == 0  # 26 vector steps: 2 into a window and a rollout
    assert main(["train", "--resume", str(tmp_path / "part"), "--steps", "480", "--quiet"]) == 0
    full, part = logs(tmp_path / "full"), logs(tmp_path / "part")
    assert part == full
    kinds = {r["kind"] for r in full[1]}
    assert {"architecture", "hyperparameters", "weights"} & kinds, kinds
    assert all(math.isfinite(r["eval/best_fitness"]) for r in full[0])


def test_teams_with_an_on_policy_learner_train_and_resume(tmp_path: Path) -> None:
    """A population per team, cross-play, each member learning its own team's agents."""
    args = ["--algo", "ippo", "--env", "simple_adversary", "--quiet", "--set", "env.pool=sync",
            "--set", "env.backend=batched", "--set", "env.num_envs=8",
            "--set", "population.size=2", "--set", "evolution.evo_steps=40",
            "--set", "evolution.learning_delay=0", "--set", "algo.hidden=[16]",
            "--set", "algo.rollout=5", "--set", "eval.episodes=2",
            "--set", "games.reference_episodes=0"]
    full, part = tmp_path / "full", tmp_path / "part"
    assert main(["train", *args, "--steps", "320", "--run-dir", str(full)]) == 0
    assert main(["train", *args, "--steps", "176", "--run-dir", str(part)]) == 0
    assert main(["train", "--resume", str(part), "--steps", "320", "--quiet"]) == 0
    assert logs(part) == logs(full)
    lines = read_jsonl(full / "metrics.jsonl")
    assert any("team/" in k or "adversary" in k for k in lines[-1]), sorted(lines[-1])
    from evohpo import checkpoint

    meta, tensors = checkpoint.load(full / "checkpoints" / "latest.pt")
    teams = {m["team"] for m in meta["members"]}
    assert len(teams) == 2
    # each member trained its own team's agents only: the others' actors are as initialised
    for m, st in zip(meta["members"], tensors["members"], strict=True):
        assert set(st["learners"]) < set(st["actors"]), (m["team"], st["learners"])


def test_eval_reproduces_the_kept_members_fitness_and_export_acts_like_it(tmp_path: Path) -> None:
    """The kept member of an IPPO run with continuous actions: `eval` plays the trainer's
    episodes to the same return, and the exported actors act like its deterministic policy."""
    from evohpo import checkpoint
    from evohpo.playback import load as playback
    from evohpo.runtime import evaluate as play

    run = tmp_path / "r"
    assert main(["train", "--algo", "ippo", "--env", "simple_speaker_listener", "--quiet",
                 "--steps", "640", "--set", "env.pool=sync", "--set", "env.num_envs=4",
                 "--set", "population.size=2", "--set", "evolution.evo_steps=160",
                 "--set", "evolution.learning_delay=0", "--set", "algo.rollout=10",
                 "--set", "algo.hidden=[16]", "--set", "eval.episodes=2", "--set", "device=cpu",
                 "--set", "env.kwargs.continuous_actions=true", "--run-dir", str(run)]) == 0
    meta, _ = checkpoint.load(run / "checkpoints" / "best.pt")
    best = meta["member"]
    cfg, spec, algo, _ = playback.load_member(run, "best")
    assert type(algo).__name__ == "PPO" and algo.updates > 0
    returns = play.play(cfg, algo, spec, best["episodes"], best["eval_seed"])
    assert sum(returns[a].mean() for a in spec.agents) == pytest.approx(best["fitness"], abs=1e-9)
    assert_export_acts_like(run, tmp_path / "export", spec, algo)


def test_evolution_moves_only_the_on_policy_hyperparameters_within_their_bounds() -> None:
    """Mutations and sampled starts of an on-policy member reach every one of its evolvable
    hyperparameters (integers stay integers) and never an off-policy one."""
    import dataclasses

    from evohpo.algos.base import OnPolicyHyperparams
    from evohpo.algos.registry import initial_hyperparams
    from evohpo.evolve import space
    from evohpo.evolve.mutations import mutate_hyperparameter

    cfg = cfg_for("mappo", population={"size": 8, "init": "sample"}, env={"num_envs": 8})
    hp = initial_hyperparams(cfg)
    assert isinstance(hp, OnPolicyHyperparams)
    own = {f.name for f in dataclasses.fields(hp)}
    rng = np.random.default_rng(0)
    moved: set[str] = set()
    for _ in range(600):
        change = mutate_hyperparameter(hp, cfg.mutation, rng)
        moved |= set(change.changes)
        hp = dataclasses.replace(hp, **change.changes)
        for name in own:
            b, v = getattr(cfg.mutation.bounds, name), getattr(hp, name)
            assert b.min <= v <= b.max, (name, v)
            assert isinstance(v, int) == (name in space.INT_HPS), (name, v)
    assert moved == own
    starts = space.starts(cfg, np.random.default_rng(1))
    assert all(set(s.hyperparams) == own for s in starts)
    assert len({s.hyperparams["rollout"] for s in starts[1:]}) > 1  # sampled, not the preset


def assert_tied(ppo: Any) -> None:
    """Every agent of a group holds its leader's tensors, except its own first-layer bias."""
    for group in ppo.groups():
        lead = group[0]
        for f in group[1:]:
            for nets in (ppo.actors, {a: cs[0] for a, cs in ppo.critics.items()}):
                x, y = nets[lead], nets[f]
                assert y.layers[0].weight is x.layers[0].weight
                assert bias(y) is not bias(x) and bias(y).shape == bias(x).shape
                assert all(p is q for p, q in zip(y.layers[1:], x.layers[1:], strict=True))
            assert ppo.value_norms[f] is ppo.value_norms[lead]


def test_shared_networks_learn_as_one_with_an_id_per_agent() -> None:
    """With algo.share the three agents of simple_spread hold one actor and one critic: each
    agent's networks compute what a one-hot id in the input would, the group's single pass equals
    each agent's own, and learning moves the shared tensors with every agent's gradient (an agent
    with no live rows moves only through them, never its own bias)."""
    cfg = cfg_for("mappo", algo={"share": True})
    spec = spec_for(cfg.env)
    ppo = build_algo(cfg, spec, 0, "cpu")
    lead, *rest = spec.agents
    assert ppo.groups() == [spec.agents] and ppo.leaders() == [lead]
    assert_tied(ppo)
    unshared = build_algo(cfg_for("mappo"), spec, 0, "cpu")
    one_net = sum(p.numel() for p in unshared.actors[lead].parameters()) + sum(
        p.numel() for p in unshared.critics[lead][0].parameters())
    assert ppo.num_params() == one_net + 2 * len(rest) * 16  # plus each follower's two biases
    x = torch.randn(6, spec[lead].obs_dim)
    # the first layer's bias is the agent's id: the leader's net with a one-hot id column
    net, f = ppo.actors[lead], ppo.actors[rest[0]]
    w_id = torch.cat([net.layers[0].weight, (bias(f) - bias(net))[:, None]], dim=1)
    h = torch.relu(torch.cat([x, torch.ones(6, 1)], 1) @ w_id.T + bias(net))
    torch.testing.assert_close(net.layers[1](h), f(x))
    outs = group_forward([ppo.actors[a] for a in spec.agents], [x] * 3)
    for a, out in zip(spec.agents, outs, strict=True):
        torch.testing.assert_close(out, ppo.actors[a](x))
    # a rollout where the last agent is never alive
    rng = np.random.default_rng(0)
    T, k = 4, 3
    ro = Rollout(obs={a: rng.normal(size=(T, k, 18)).astype(np.float32) for a in spec.agents},
                 actions={a: rng.integers(0, 5, (T, k, 1)).astype(np.float32)
                          for a in spec.agents},
                 rewards={a: rng.normal(size=(T, k)).astype(np.float32) for a in spec.agents},
                 next_obs={a: rng.normal(size=(T, k, 18)).astype(np.float32)
                           for a in spec.agents},
                 terminated={a: np.zeros((T, k), np.float32) for a in spec.agents},
                 alive={a: np.full((T, k), float(a != spec.agents[-1]), np.float32)
                        for a in spec.agents},
                 done=np.zeros((T, k), np.float32))
    before = copy.deepcopy(ppo)
    ppo.learn_rollout(ro)
    assert_tied(ppo)
    last = spec.agents[-1]
    assert torch.equal(bias(ppo.actors[last]), bias(before.actors[last]))
    assert not torch.equal(bias(ppo.actors[lead]), bias(before.actors[lead]))
    assert not torch.equal(ppo.actors[last].layers[1].weight, before.actors[last].layers[1].weight)
    # the shared normaliser saw the live agents' returns once each: 2 agents x 12 steps
    assert ppo.value_norms[lead].count == 2 * T * k
    # a copy, and a checkpoint's state, keep the ties
    assert_tied(ppo.clone(3))
    back = PPO.from_state_dict(spec, ppo.sw, copy.deepcopy(ppo.state_dict()))
    assert_tied(back)
    for a in spec.agents:
        torch.testing.assert_close(back.actors[a](x), ppo.actors[a](x))


def test_mutations_of_a_shared_network_move_the_whole_group() -> None:
    """Architecture and activation mutations draw among the groups' leaders and every agent of
    the group follows: ties kept, each agent's function kept by growth; a weight mutation moves
    a shared tensor once."""
    from evohpo.evolve.lineage import MutationRecord
    from evohpo.evolve.mutations import mutate_weights

    cfg = cfg_for("ippo", algo={"share": True, "hidden": [16, 16]})
    spec = spec_for(cfg.env)
    rt, members = collecting(cfg, spec)
    rt.collect(8, 0, 0)  # Adam moments to carry
    ppo = members[0].algo
    rt.close()
    x = torch.randn(5, 18)
    space = cfg.mutation.arch
    rng = np.random.default_rng(0)
    for _ in range(8):
        funcs = {a: ppo.actors[a](x).detach() for a in spec.agents}
        rec = ppo.mutate_architecture(space, rng, MutationRecord(1, 0, None, "architecture"))
        assert rec.kind == "architecture" and rec.target.startswith(spec.agents[0]), rec
        assert_tied(ppo)
        assert len({tuple(ppo.actors[a].hidden) for a in spec.agents}) == 1
        if rec.op.startswith(("add_node", "add_layer")):
            for a in spec.agents:
                torch.testing.assert_close(ppo.actors[a](x), funcs[a], atol=1e-5, rtol=1e-5)
        for a in spec.agents:  # every optimizer holds exactly its networks' own tensors
            held = ppo.actor_opts[a].param_groups[0]["params"]
            if a == spec.agents[0]:
                assert [id(p) for p in held] == [id(p) for p in ppo.actors[a].parameters()]
            else:
                assert len(held) == 1 and held[0] is bias(ppo.actors[a])
    rec = ppo.mutate_activation(space, rng, MutationRecord(1, 0, None, "activation"))
    assert len({ppo.actors[a].activation for a in spec.agents}) == 1
    assert_tied(ppo)
    shared = ppo.actors[spec.agents[0]].layers[-1].weight
    before = shared.detach().clone()
    gen = torch.Generator().manual_seed(0)
    single = copy.deepcopy(ppo.actors[spec.agents[0]])
    mutate_weights({a: ppo.actors[a] for a in spec.agents}, cfg.mutation, gen)
    mutate_weights({"x": single}, cfg.mutation, torch.Generator().manual_seed(0))
    torch.testing.assert_close(shared, single.layers[-1].weight)  # moved once, not three times
    assert not torch.equal(shared, before)


class Halved(PPO):
    """A new on-policy class: PPO whose every update counts itself (here, only to be seen)."""

    calls = 0

    def learn_rollout(self, ro: Rollout) -> dict[str, float]:
        Halved.calls += 1
        return super().learn_rollout(ro)


def test_a_new_on_policy_class_is_its_module_and_one_entry(tmp_path: Path,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """An entry in switches.ON_POLICY naming a class is all the config, the registry, the
    runtimes, checkpoints and playback need: the run trains with it and `eval` restores it."""
    from evohpo.algos.switches import ON_POLICY
    from evohpo.playback import load as playback

    monkeypatch.setitem(ON_POLICY, "halved", {"learner": "tests.test_onpolicy:Halved",
                                              "centralised": False})
    run = tmp_path / "r"
    assert main(["train", "--algo", "halved", *ARGS, "--steps", "192", "--run-dir",
                 str(run)]) == 0
    assert Halved.calls > 0
    _, _, algo, _ = playback.load_member(run, "best")
    assert type(algo) is Halved and algo.updates > 0
