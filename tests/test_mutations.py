"""Architecture and activation mutations: growth keeps the function, targets keep their lag, Adam
keeps its moments, members keep learning, bounds hold, records say what happened, state
round-trips."""

from __future__ import annotations

import dataclasses
import io
import typing
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from evohpo import config as C
from evohpo.algos import ALGOS, MATD3, Hyperparams, Switches
from evohpo.algos import arch_mutations as M
from evohpo.algos.buffer import Batch, ReplayBuffer
from evohpo.algos.networks import ACTIVATIONS, MLP
from evohpo.algos.surgery import PAIRED
from evohpo.config import ArchSpace, MutationConfig
from evohpo.envs.spec import AgentSpec, EnvSpec
from evohpo.evolve.mutations import KINDS, choose_kind, mutate

CONFIG_DIR = Path(__file__).resolve().parents[1] / "evohpo" / "presets"
HP = Hyperparams(lr_actor=1e-3, lr_critic=1e-3, batch_size=32, learn_step=1, tau=0.05,
                 expl_noise=0.1)
GROWTH = ("add_node", "add_layer")
SHRINK = ("remove_node", "remove_layer")


@pytest.fixture(autouse=True, scope="module")
def _one_thread() -> typing.Iterator[None]:
    """Tiny networks: one torch thread is fastest, and immune to busy neighbours' CPU load."""
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)


def spec(mode: str) -> EnvSpec:
    """Heterogeneous agents, all with discrete or all with continuous actions (mpe2's two modes)."""
    disc = mode == "discrete"
    return EnvSpec(f"toy-{mode}", ("speaker", "listener"), {
        "speaker": AgentSpec(obs_dim=3, discrete=disc, act_dim=3),
        "listener": AgentSpec(obs_dim=5, discrete=disc, act_dim=5 if disc else 2),
    })


def space(**kw: Any) -> ArchSpace:
    return C.build(ArchSpace, {"min_layers": 1, "max_layers": 4, "min_width": 2, "max_width": 64,
                               "node_steps": [3], **kw}, "mutation.arch")


def mcfg(**kw: Any) -> MutationConfig:
    probs = {"none": 0.0, "hyperparameters": 0.0, "weights": 0.0, "architecture": 0.0,
             "activation": 0.0}
    return C.build(MutationConfig, {**probs, **kw}, "mutation")


def fill(buf: ReplayBuffer, sp: EnvSpec, n: int, rng: np.random.Generator) -> None:
    acts = {a: (np.eye(sp[a].act_dim, dtype=np.float32)[rng.integers(0, sp[a].act_dim, n)]
                if sp[a].discrete else rng.random((n, sp[a].act_dim)).astype(np.float32))
            for a in sp.agents}
    buf.add({a: rng.normal(size=(n, sp[a].obs_dim)).astype(np.float32) for a in sp.agents}, acts,
            {a: rng.normal(size=n).astype(np.float32) for a in sp.agents},
            {a: rng.normal(size=(n, sp[a].obs_dim)).astype(np.float32) for a in sp.agents},
            {a: rng.random(n) < 0.1 for a in sp.agents})


def batch_of(sp: EnvSpec, n: int = 64, seed: int = 0) -> Batch:
    buf = ReplayBuffer(sp, n)
    fill(buf, sp, n, np.random.default_rng(seed))
    return buf.gather(np.arange(n))


def member(mode: str = "continuous", algo: str = "matd3", hidden: list[int] | None = None,
           activation: str = "relu", steps: int = 4, seed: int = 0, **sw: Any) -> MATD3:
    """A member that has learned a little (Adam state everywhere) and whose targets lag its
    weights."""
    sp = spec(mode)
    m = MATD3(sp, HP, Switches(**{**ALGOS[algo], **sw}), hidden or [8, 6], activation, seed=seed)
    b = batch_of(sp, seed=seed)
    for _ in range(steps):
        m.learn(b)
    gen = torch.Generator().manual_seed(seed + 1)
    with torch.no_grad():  # online weights well away from their targets, outputs of order 1
        for nets in (m.actors.values(), *m.critics.values()):
            for net in nets:
                for p in net.parameters():
                    p.add_(torch.randn(p.shape, generator=gen) * 0.3)
    return m


def nets(m: MATD3) -> dict[str, MLP]:
    out: dict[str, MLP] = {}
    for a in m.agents:
        out[f"{a}/actor"], out[f"{a}/actor_target"] = m.actors[a], m.actor_targets[a]
        for i, (c, t) in enumerate(zip(m.critics[a], m.critic_targets[a], strict=True)):
            out[f"{a}/critic{i}"], out[f"{a}/critic_target{i}"] = c, t
    return out


def probe_inputs(m: MATD3, n: int = 256) -> dict[str, torch.Tensor]:
    gen = torch.Generator().manual_seed(123)
    joint = m.critics[m.agents[0]][0].in_dim
    x = {a: torch.randn((n, m.spec[a].obs_dim), generator=gen) * 3 for a in m.agents}
    return {**x, "joint": torch.randn((n, joint), generator=gen) * 3}


@torch.no_grad()
def outputs(m: MATD3) -> dict[str, torch.Tensor]:
    x = probe_inputs(m)
    return {k: net(x[k.split("/")[0]] if "actor" in k else x["joint"])
            for k, net in nets(m).items()}


def force(m: MATD3, agent: str, which: str, op: str, pick: int = 0, step: int = 3,
          sp: ArchSpace | None = None) -> list[Any]:
    """Apply one named operator through the member-level surgery (targets and Adam included)."""
    group, _ = M.networks_of(m, agent, which)
    edits, why = M.plan_op(op, group, sp or space(), pick, step,
                           torch.Generator().manual_seed(pick))
    assert edits is not None, why
    M.apply_edits(m, agent, which, edits)
    return edits


# -------------------------------------------------------------------- growth keeps the function


@pytest.mark.parametrize("activation", sorted(ACTIVATIONS))
@pytest.mark.parametrize("mode", ["discrete", "continuous"])
@pytest.mark.parametrize("op", GROWTH)
def test_growth_preserves_outputs(op: str, mode: str, activation: str) -> None:
    m = member(mode, hidden=[8, 6], activation=activation)
    obs = {a: v.numpy() for a, v in probe_inputs(m, 64).items() if a in m.agents}
    if op == "add_layer" and activation not in ("relu", "elu", *PAIRED):
        edits, why = M.plan_op(op, [m.actors["speaker"]], space(), 0, 3, torch.Generator())
        assert edits is None and "no exact identity" in why  # tanh: refused, never approximated
        return
    for agent in m.agents:
        for which in M.NETWORKS:
            for pick in (0, 1):  # every hidden layer (for add_layer: a new layer after each)
                before, acts = outputs(m), m.act(obs, None)[0]
                edits = force(m, agent, which, op, pick)
                after = outputs(m)
                assert set(after) == set(before)
                for k in before:  # online and target networks alike, every agent and network
                    torch.testing.assert_close(after[k], before[k], rtol=1e-5, atol=1e-5, msg=k)
                acts2 = m.act(obs, None)[0]
                for a in m.agents:
                    if m.spec[a].discrete:
                        assert np.array_equal(acts2[a], acts[a])
                    else:
                        np.testing.assert_allclose(acts2[a], acts[a], atol=1e-5)
                grown = m.actors[agent] if which == "actor" else m.critics[agent][0]
                assert grown.hidden == edits[0].hidden


def test_identity_layer_widths() -> None:
    m = member(hidden=[8, 6], activation="gelu")
    force(m, "listener", "actor", "add_layer", pick=1)
    assert m.actors["listener"].hidden == [8, 6, 12]  # paired units: twice the width
    m = member(hidden=[8, 6], activation="elu")
    force(m, "listener", "critic", "add_layer", pick=0)
    assert [c.hidden for c in m.critics["listener"]] == [[8, 8, 6]] * 2


# -------------------------------------------------------------------- targets keep their lag


@pytest.mark.parametrize("op", [*GROWTH, *SHRINK, "activation"])
@pytest.mark.parametrize("which", M.NETWORKS)
def test_targets_keep_their_lag(op: str, which: str) -> None:
    m = member(hidden=[8, 6], activation="elu")  # elu: add_layer also moves the next layer's bias
    agent = "listener"
    online, targets = M.networks_of(m, agent, which)
    old_o = [[p.detach().clone() for p in n.parameters()] for n in online]
    old_t = [[p.detach().clone() for p in n.parameters()] for n in targets]
    x = probe_inputs(m)["joint" if which == "critic" else agent]
    with torch.no_grad():
        gap_before = [(t(x) - o(x)).abs() for o, t in zip(online, targets, strict=True)]
    if op == "activation":
        edits = [M.set_activation(n, "silu") for n in online]
        M.apply_edits(m, agent, which, edits)
    else:
        edits = force(m, agent, which, op, pick=0)
    online, targets = M.networks_of(m, agent, which)
    for o, t, e, oo, ot in zip(online, targets, edits, old_o, old_t, strict=True):
        assert t.hidden == o.hidden and t.activation == o.activation
        assert all(not p.requires_grad for p in t.parameters())
        for po, pt, plan in zip(o.parameters(), t.parameters(), e.plans, strict=True):
            if plan.compute is None and plan.src is not None:
                # carried entries keep exactly their old gap; new entries start equal (gap 0)
                assert torch.equal(pt - po, plan.moment(ot[plan.src] - oo[plan.src]))
            elif plan.compute is not None:
                # computed from the target's own old weights: never reset to the online ones
                assert torch.equal(pt, plan.compute(ot)) and not torch.equal(pt, po)
            else:
                assert torch.equal(pt, po)  # a new identity layer: the same in both
    if op in GROWTH:  # the function-level lag is unchanged too
        with torch.no_grad():
            for o, t, g in zip(online, targets, gap_before, strict=True):
                torch.testing.assert_close((t(x) - o(x)).abs(), g, rtol=1e-4, atol=1e-5)
                assert g.max() > 1e-3  # there was a lag to keep


# -------------------------------------------------------------------- Adam state


def adam_snapshot(opt: torch.optim.Optimizer) -> list[dict[str, Any]]:
    return [{k: (v.clone() if isinstance(v, torch.Tensor) else v) for k, v in opt.state[p].items()}
            for g in opt.param_groups for p in g["params"]]


def same_state(a: dict[str, Any], b: dict[str, Any]) -> bool:
    return a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


@pytest.mark.parametrize("op", [*GROWTH, *SHRINK, "activation"])
@pytest.mark.parametrize("algo", sorted(ALGOS))
def test_adam_state_carried(op: str, algo: str) -> None:
    m = member(algo=algo, hidden=[8, 6], activation="relu")
    agent, which = "speaker", "critic"
    opts = {(a, w): (m.actor_opts if w == "actor" else m.critic_opts)[a]
            for a in m.agents for w in M.NETWORKS}
    snaps = {k: adam_snapshot(o) for k, o in opts.items()}
    old_params = [p for n in M.networks_of(m, agent, which)[0] for p in n.parameters()]
    old_state = {id(p): snaps[(agent, which)][i] for i, p in enumerate(old_params)}
    group_before = {k: v for k, v in m.critic_opts[agent].param_groups[0].items() if k != "params"}
    old_nets = M.networks_of(m, agent, which)[0]
    if op == "activation":
        edits = [M.set_activation(n, "gelu") for n in old_nets]
        M.apply_edits(m, agent, which, edits)
    else:
        edits = force(m, agent, which, op, pick=1)
    for key, opt in opts.items():  # every other optimizer: the same object, untouched state
        if key != (agent, which):
            now = m.actor_opts[key[0]] if key[1] == "actor" else m.critic_opts[key[0]]
            assert now is opt
            assert all(same_state(a, b)
                       for a, b in zip(adam_snapshot(now), snaps[key], strict=True))
    opt = m.critic_opts[agent]
    new_nets = M.networks_of(m, agent, which)[0]
    assert opt.param_groups[0]["params"] == [p for n in new_nets for p in n.parameters()]
    assert ({k: v for k, v in opt.param_groups[0].items() if k != "params"}
            == group_before)  # lr etc.
    carried = fresh = 0
    for old, new, e in zip(old_nets, new_nets, edits, strict=True):
        olds = list(old.parameters())
        for p, plan in zip(new.parameters(), e.plans, strict=True):
            if plan.src is None:
                assert p not in opt.state or not opt.state[p]
                fresh += 1
                continue
            st, was = opt.state[p], old_state[id(olds[plan.src])]
            assert torch.equal(st["step"], was["step"]) and float(st["step"]) == 4
            for k in ("exp_avg", "exp_avg_sq"):
                expected = was[k] if not plan.index else plan.moment(was[k])
                # untouched: identical; resized: sliced / 0-padded
                assert torch.equal(st[k], expected), k
            carried += 1
    assert carried > 0
    assert fresh == {"add_layer": 2 * len(edits), "remove_layer": 2 * len(edits)}.get(op, 0)
    # the member still learns, and a learning-rate change still reaches the rebuilt optimizer in
    # place
    m.learn(batch_of(m.spec))
    state_obj = opt.state[opt.param_groups[0]["params"][0]]
    m.set_hyperparams(lr_critic=3e-4)
    assert m.critic_opts[agent] is opt and opt.param_groups[0]["lr"] == 3e-4
    assert opt.state[opt.param_groups[0]["params"][0]] is state_obj


# -------------------------------------------------------------------- keeps learning


def critic_loss(m: MATD3, b: Batch, agent: str) -> float:
    with torch.no_grad():
        y = m.td_targets(b)[agent]
        x = torch.cat([*(b.obs[a] for a in m.agents), *(b.actions[a] for a in m.agents)], dim=1)
        return float(sum(((c(x).squeeze(1) - y) ** 2).mean() for c in m.critics[agent]))


@pytest.mark.parametrize("op", [*GROWTH, *SHRINK, "activation"])
def test_mutated_member_keeps_training(op: str) -> None:
    # no smoothing noise: a deterministic loss
    m = member(hidden=[16, 16], steps=0, target_noise=0.0)
    b = batch_of(m.spec, n=128, seed=3)
    for _ in range(30):
        m.learn(b)
    before = critic_loss(m, b, "listener")
    if op == "activation":
        for which in M.NETWORKS:
            M.apply_edits(m, "listener", which,
                          [M.set_activation(n, "elu")
                           for n in M.networks_of(m, "listener", which)[0]])
    else:
        force(m, "listener", "critic", op, pick=0, step=8)
        force(m, "listener", "actor", op, pick=1, step=8)
    at_mutation = critic_loss(m, b, "listener")
    if op in GROWTH:
        assert at_mutation == pytest.approx(before, rel=1e-4)
    new_params = [p.detach().clone() for c in m.critics["listener"] for p in c.parameters()]
    losses = [m.learn(b)["critic_loss/listener"] for _ in range(100)]
    after = critic_loss(m, b, "listener")
    assert np.isfinite(losses).all()
    assert after < 0.9 * at_mutation, (before, at_mutation, after)
    assert np.mean(losses[-10:]) < np.mean(losses[:10])
    moved = [not torch.equal(p, q)
             for p, q in zip(new_params,
                             (p for c in m.critics["listener"] for p in c.parameters()),
                             strict=True)]
    assert all(moved)  # every parameter, new ones included, gets gradient steps


# -------------------------------------------------------------------- bounds and records


def check_member(m: MATD3, sp: ArchSpace, start_inside: bool = True) -> None:
    for a in m.agents:
        for which in M.NETWORKS:
            online, targets = M.networks_of(m, a, which)
            archs = {(tuple(n.hidden), n.activation) for n in online + targets}
            assert len(archs) == 1  # twins, targets: one architecture
            hidden = online[0].hidden
            if start_inside:
                assert sp.min_layers <= len(hidden) <= sp.max_layers, hidden
                assert all(sp.min_width <= h <= sp.max_width for h in hidden), hidden
            opt = (m.actor_opts if which == "actor" else m.critic_opts)[a]
            assert opt.param_groups[0]["params"] == [p for n in online for p in n.parameters()]
        assert m.actors[a].activation == m.critics[a][0].activation


def test_bounds_never_crossed_over_thousands_of_mutations() -> None:
    sp = space(min_layers=1, max_layers=3, min_width=2, max_width=12, node_steps=[1, 3, 5],
               layer_prob=0.4)
    cfg = mcfg(architecture=0.8, activation=0.2, arch=C.to_dict(sp))
    m = member(hidden=[8], steps=1)
    rng = np.random.default_rng(0)
    ops: dict[str, int] = {}
    for gen in range(2000):
        arch = m.arch()
        rec = mutate(_Member(1, 0, m), cfg, gen, rng)
        ops[rec.op.split(" ")[0]] = ops.get(rec.op.split(" ")[0], 0) + 1
        check_member(m, sp)
        if rec.kind == "architecture":
            agent, which, _ = rec.target.split("/")
            assert rec.before == arch[agent][which] and rec.after == m.arch()[agent][which]
            assert rec.before != rec.after
        elif rec.kind == "activation":
            agent = rec.target.split("/")[0]
            assert ((rec.before, rec.after)
                    == (arch[agent]["activation"], m.arch()[agent]["activation"]))
        else:
            assert m.arch() == arch
    assert set(ops) == {"add_node", "remove_node", "add_layer", "remove_layer", "set_activation"}
    x = {a: np.zeros((3, m.spec[a].obs_dim), np.float32) for a in m.agents}
    m.act(x, None)
    assert np.isfinite(list(m.learn(batch_of(m.spec)).values())).all()


@dataclass
class _Member:
    id: int
    parent_id: int | None
    algo: MATD3


def test_growth_at_its_bound_becomes_a_shrink_and_says_so() -> None:
    sp = space(min_layers=1, max_layers=2, min_width=4, max_width=8, node_steps=[2], layer_prob=0.5)
    cfg = mcfg(architecture=1.0, arch=C.to_dict(sp))
    seen = set()
    for seed in range(40):
        m = member(hidden=[8, 8], steps=0, seed=seed)
        arch = m.arch()
        rec = mutate(_Member(5, 2, m), cfg, 3, np.random.default_rng(seed))
        assert (rec.kind, rec.generation, rec.member_id, rec.parent_id) == ("architecture", 3, 5, 2)
        assert rec.op.startswith("remove_")  # nothing can grow: 2 layers of 8 are the maximum
        agent, which, layer = rec.target.split("/")
        assert rec.before == arch[agent][which] == [8, 8] and rec.after == m.arch()[agent][which]
        if "drew add_" in rec.note:
            assert "became remove_" in rec.note and ("max_layers 2" in rec.note
                                                     or "max_width 8" in rec.note)
            seen.add("fallback")
        else:
            seen.add("as drawn")
        if rec.op.startswith("remove_node"):
            assert rec.after[int(layer.removeprefix("layer"))] == 6
        else:
            assert rec.after == [8]
    assert seen == {"fallback", "as drawn"}


def test_nothing_applies_is_recorded_as_none() -> None:
    sp = space(min_layers=2, max_layers=2, min_width=8, max_width=8)
    m = member(hidden=[8, 8], steps=1)
    params = [p for n in nets(m).values() for p in n.parameters()]
    for seed in range(10):
        rec = mutate(_Member(1, 0, m), mcfg(architecture=1.0, arch=C.to_dict(sp)), 0,
                     np.random.default_rng(seed))
        assert rec.kind == "none" and rec.target == "" and rec.before is None and rec.after is None
        assert "architecture" in rec.note and "no operator applies" in rec.note
    assert all(p is q for p, q in zip(params, (p for n in nets(m).values() for p in n.parameters()),
                                      strict=True))
    rec = mutate(_Member(1, 0, m), mcfg(activation=1.0, arch={"activations": ["relu"]}), 0,
                 np.random.default_rng(0))
    assert rec.kind == "none" and "activation" in rec.note


def test_tanh_add_layer_falls_back_to_add_node() -> None:
    sp = space(layer_prob=1.0, max_width=64)
    for seed in range(30):
        rng = np.random.default_rng(seed)
        m = member(hidden=[8, 8], activation="tanh", steps=0)
        rec = mutate(_Member(1, 0, m), mcfg(architecture=1.0, arch=C.to_dict(sp)), 0, rng)
        if "drew add_layer" in rec.note:
            assert rec.op.startswith("add_node") and "no exact identity layer for tanh" in rec.note
            return
    raise AssertionError("add_layer was never drawn")


def test_clipped_step_is_recorded() -> None:
    sp = space(max_width=10, node_steps=[16], layer_prob=0.0)
    for seed in range(30):
        m = member(hidden=[8], steps=0)
        rec = mutate(_Member(1, 0, m), mcfg(architecture=1.0, arch=C.to_dict(sp)), 0,
                     np.random.default_rng(seed))
        if rec.op.startswith("add_node"):
            assert rec.op == "add_node +2 (step 16 clipped at max_width 10)" and rec.after == [10]
            return
    raise AssertionError("add_node was never drawn")


def test_twin_critics_mutate_together() -> None:
    m = member(hidden=[8, 8])
    rng = np.random.default_rng(1)
    cfg = mcfg(architecture=1.0, arch=C.to_dict(space(layer_prob=0.5)))
    kinds = set()
    for g in range(60):
        rec = mutate(_Member(1, 0, m), cfg, g, rng)
        if "/critic/" in rec.target:
            assert "both twin critics" in rec.note
            kinds.add(rec.op.split(" ")[0])
        for a in m.agents:
            c0, c1 = m.critics[a]
            assert c0.hidden == c1.hidden
            assert not all(torch.equal(p, q)
                           for p, q in zip(c0.parameters(), c1.parameters(), strict=True))
    assert len(kinds) >= 3


# -------------------------------------------------------------------- activation


@pytest.mark.parametrize("algo", sorted(ALGOS))
def test_activation_mutation_changes_one_agents_networks(algo: str) -> None:
    m = member(algo=algo, hidden=[8, 6])
    before = {k: [p.detach().clone() for p in n.parameters()] for k, n in nets(m).items()}
    outs = outputs(m)
    rec = mutate(_Member(4, 1, m), mcfg(activation=1.0, arch={"activations": ["relu", "tanh"]}), 2,
                 np.random.default_rng(0))
    agent = rec.target.split("/")[0]
    assert (rec.kind, rec.target, rec.before, rec.after, rec.op) == (
        "activation", f"{agent}/actor+critic", "relu", "tanh", "set_activation")
    after = outputs(m)
    for k, n in nets(m).items():
        assert n.activation == ("tanh" if k.startswith(agent) else "relu")
        assert all(torch.equal(p, q)
                   for p, q in zip(before[k], n.parameters(), strict=True))  # weights kept
        assert torch.equal(after[k], outs[k]) != k.startswith(agent)
    assert m.arch()[agent]["activation"] == "tanh"


# -------------------------------------------------------------------- state, clone, reproducibility


def mutated_member(algo: str = "matd3", n: int = 12) -> MATD3:
    m = member(algo=algo, hidden=[8])
    cfg = mcfg(architecture=0.8, activation=0.2, arch=C.to_dict(space(layer_prob=0.4)))
    rng = np.random.default_rng(7)
    for g in range(n):
        mutate(_Member(1, 0, m), cfg, g, rng)
    m.learn(batch_of(m.spec))
    return m


@pytest.mark.parametrize("algo", sorted(ALGOS))
def test_state_dict_round_trip_after_architecture_changes(algo: str) -> None:
    m = mutated_member(algo)
    arch = m.arch()
    assert len({str(arch[a]) for a in m.agents}) > 1 or arch[m.agents[0]]["actor"] != [8]
    state = m.state_dict()
    assert state["arch"] == arch
    buf = io.BytesIO()
    torch.save(state, buf)
    buf.seek(0)
    loaded = torch.load(buf, weights_only=False)
    restored = MATD3.from_state_dict(m.spec, m.sw, loaded, "cpu")
    assert restored.arch() == arch
    o1, o2 = outputs(m), outputs(restored)
    assert all(torch.equal(o1[k], o2[k]) for k in o1)
    other = MATD3(m.spec, HP, m.sw, [32], "relu", seed=9)  # another shape: load_state_dict rebuilds
    other.load_state_dict(state)
    assert other.arch() == arch
    opt_tensors = {id(v) for o in m.critic_opts.values() for st in o.state.values()
                   for v in st.values()}
    # loaded by value: stepping one never moves the other
    assert not opt_tensors & {id(v) for o in other.critic_opts.values() for st in o.state.values()
                              for v in st.values()}
    b = batch_of(m.spec, seed=5)
    clone = m.clone(seed=0)
    clone.gen.set_state(m.gen.get_state())
    r1, r2, r3 = m.learn(b), restored.learn(b), other.learn(b)
    assert r1 == r2 == r3  # weights, targets, Adam state and counters all came back
    r4 = clone.learn(b)
    assert r4 == r1
    assert all(p is not q for p, q in zip(clone.actors["speaker"].parameters(),
                                          m.actors["speaker"].parameters(), strict=True))


def test_architecture_mutations_are_reproducible() -> None:
    a, b = mutated_member(n=25), mutated_member(n=25)
    assert a.arch() == b.arch()
    sa, sb = a.state_dict(), b.state_dict()
    for k in ("actors", "actor_targets"):
        for agent in a.agents:
            assert all(torch.equal(sa[k][agent][n], sb[k][agent][n]) for n in sa[k][agent])


# -------------------------------------------------------------------- config and dispatch


def test_choose_kind_reads_all_five_keys() -> None:
    assert KINDS == ("none", "hyperparameters", "weights", "architecture", "activation")
    rng = np.random.default_rng(0)
    for kind in KINDS:
        assert {choose_kind(mcfg(**{kind: 1.0}), rng) for _ in range(20)} == {kind}
    kinds = [choose_kind(mcfg(none=1, architecture=2, activation=1), rng) for _ in range(2000)]
    assert kinds.count("architecture") / 2000 == pytest.approx(0.5, abs=0.04)
    assert kinds.count("activation") / 2000 == pytest.approx(0.25, abs=0.04)


def test_config_keys_and_validation() -> None:
    keys = {k for k, _, _ in C.describe_keys()}
    assert {"mutation.none", "mutation.hyperparameters", "mutation.weights",
            "mutation.architecture", "mutation.activation", "mutation.arch.min_layers",
            "mutation.arch.max_layers", "mutation.arch.min_width", "mutation.arch.max_width",
            "mutation.arch.node_steps", "mutation.arch.layer_prob",
            "mutation.arch.activations"} <= keys
    assert set(typing.get_args(C.Activation)) == set(ACTIVATIONS)
    assert C.load([]).mutation.architecture > 0 and C.load([]).mutation.activation > 0

    def err(arch: dict[str, Any]) -> str:
        with pytest.raises(C.ConfigError) as ei:
            C.load([{"mutation": {"arch": arch}}])
        return str(ei.value)

    assert "mutation.arch.min_layers" in err({"min_layers": 3, "max_layers": 2})
    assert "mutation.arch.min_width" in err({"min_width": 65, "max_width": 64})
    assert "mutation.arch.node_steps" in err({"node_steps": []})
    assert "mutation.arch.node_steps[1]" in err({"node_steps": [8, 0]})
    assert "mutation.arch.activations" in err({"activations": []})
    assert "mutation.arch.activations[0]" in err({"activations": ["swish"]})
    assert "mutation.arch.layer_prob" in err({"layer_prob": 1.5})
    assert "mutation.arch.max_widht" in err({"max_widht": 3})


@pytest.mark.parametrize("path", sorted(CONFIG_DIR.glob("*.yaml")), ids=lambda p: p.stem)
def test_presets_turn_architecture_mutations_on(path: Path) -> None:
    cfg = C.load([C.read_yaml(path)])
    assert cfg.mutation.architecture > 0 and cfg.mutation.activation > 0
    a = cfg.mutation.arch
    assert all(a.min_width <= h <= a.max_width for h in cfg.algo.hidden)
    assert a.min_layers <= len(cfg.algo.hidden) <= a.max_layers


def test_trainer_logs_the_architectures_the_lineage_describes(tmp_path: Path) -> None:
    from evohpo.logs.loggers import JsonlLogger
    from evohpo.loop.trainer import Trainer

    cfg = C.load([{
        "steps": 96, "device": "cpu", "env": {"num_envs": 2, "pool": "sync"},
        "population": {"size": 2},
        "evolution": {"evo_steps": 16, "learning_delay": 0, "strategy": "tournament"},
        "algo": {"batch_size": 8, "learn_step": 4, "hidden": [16]}, "eval": {"episodes": 1},
        "buffer": {"capacity": 1000}, "logging": {"console": False},
        "mutation": {"none": 0, "hyperparameters": 0, "weights": 0, "architecture": 1,
                     "activation": 0, "bounds": {"batch_size": {"min": 4, "max": 64}}},
    }])
    log = JsonlLogger(tmp_path)
    t = Trainer(cfg, log)
    try:
        t.train()
    finally:
        t.close()
        log.close()
    import json

    metrics = [json.loads(x) for x in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    lineage = [json.loads(x) for x in (tmp_path / "lineage.jsonl").read_text().splitlines()]
    arch_recs = [r for r in lineage if r["kind"] == "architecture"]
    assert arch_recs and all(r["kind"] in ("birth", "architecture", "elite") for r in lineage)
    assert metrics[-1]["evo/architecture"] >= 0 and "evo/activation" in metrics[-1]
    # the child's architecture, logged the next generation, is the record's "after"
    for r in arch_recs:
        agent, which, _ = r["target"].split("/")
        nxt = next(m for m in metrics if m["generation"] == r["generation"] + 1)
        assert (nxt[f"member/{r['member_id']}/hidden/{agent}/{which}"]
                == "-".join(map(str, r["after"])))
        assert nxt[f"member/{r['member_id']}/activation/{agent}"] == "relu"


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_mutations_on_cuda() -> None:
    sp = spec("continuous")
    m = MATD3(sp, HP, Switches(**ALGOS["matd3"]), [8, 8], "elu", seed=0, device="cuda")
    b = batch_of(sp)
    b = Batch(*(None if part is None else {a: v.cuda() for a, v in part.items()} for part in b))
    m.learn(b)
    x = {a: torch.randn(16, sp[a].obs_dim, device="cuda") for a in sp.agents}
    with torch.no_grad():
        before = {a: m.actors[a](x[a]) for a in sp.agents}
    for op in GROWTH:
        for a in sp.agents:
            force(m, a, "actor", op)
            force(m, a, "critic", op)
    with torch.no_grad():
        for a in sp.agents:
            torch.testing.assert_close(m.actors[a](x[a]), before[a], rtol=1e-5, atol=1e-5)
    rng = np.random.default_rng(0)
    cfg = mcfg(architecture=0.8, activation=0.2, arch=C.to_dict(space()))
    for g in range(30):
        mutate(_Member(1, 0, m), cfg, g, rng)
        assert all(p.is_cuda for n in nets(m).values() for p in n.parameters())
        m.learn(b)
    state = m.state_dict()
    assert MATD3.from_state_dict(sp, m.sw, state, "cuda").arch() == m.arch()
    assert dataclasses.asdict(m.hp) == state["hp"]
    on_cpu = MATD3.from_state_dict(sp, m.sw, state, "cpu")  # a GPU run evaluated on a CPU
    obs = {a: x[a].cpu().numpy() for a in sp.agents}
    for a in sp.agents:
        np.testing.assert_allclose(on_cpu.act(obs, None)[0][a], m.act(obs, None)[0][a],
                                   rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("activation", ["relu", "elu", *sorted(PAIRED)])
@pytest.mark.parametrize("which", M.NETWORKS)
def test_remove_layer_undoes_add_layer(activation: str, which: str) -> None:
    m = member(hidden=[8, 6], activation=activation)
    before = outputs(m)
    for pick in (0, 1):
        edits = force(m, "listener", which, "add_layer", pick=pick)
        force(m, "listener", which, "remove_layer", pick=edits[0].layer)
        assert m.arch() == member(hidden=[8, 6], activation=activation).arch()
        after = outputs(m)
        for k in before:
            torch.testing.assert_close(after[k], before[k], rtol=1e-5, atol=1e-5, msg=k)
