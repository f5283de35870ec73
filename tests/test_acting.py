"""The fast paths are the same functions: numpy forward passes, population acting, one-pass
learning."""

from __future__ import annotations

import copy
import warnings

import numpy as np
import pytest
import torch

from evohpo.algos import ALGOS, MATD3, Hyperparams, Switches, optim
from evohpo.algos.acting import PopulationActor
from evohpo.algos.arch_mutations import apply_edits
from evohpo.algos.buffer import ReplayBuffer
from evohpo.algos.explore import squash
from evohpo.algos.matd3 import LearnInputs
from evohpo.algos.networks import ACTIVATIONS, MLP, numpy_activation
from evohpo.algos.surgery import add_nodes
from evohpo.evolve.mutations import mutate_weights
from tests.test_algos import fill, hetero_spec

HP = Hyperparams(lr_actor=1e-3, lr_critic=1e-3, batch_size=32, learn_step=1, tau=0.01,
                 expl_noise=0.3)


@pytest.mark.parametrize("activation", sorted(ACTIVATIONS))
def test_numpy_forward_equals_torch(activation: str) -> None:
    net = MLP(7, 4, [16, 9], activation, torch.Generator().manual_seed(0), out_scale=None)
    x = np.random.default_rng(0).normal(size=(5, 7)).astype(np.float32) * 3
    with torch.no_grad():
        ref = net(torch.from_numpy(x)).numpy()
    np.testing.assert_allclose(net.forward_numpy(x), ref, rtol=1e-5, atol=1e-6)
    # the views follow in-place changes of the weights, and new storage
    with torch.no_grad():
        for p in net.parameters():
            p.mul_(0.5)
        ref = net(torch.from_numpy(x)).numpy()
    np.testing.assert_allclose(net.forward_numpy(x), ref, rtol=1e-5, atol=1e-6)
    net.layers[0].weight.data = net.layers[0].weight.data.clone() * 2  # type: ignore[union-attr]
    with torch.no_grad():
        ref = net(torch.from_numpy(x)).numpy()
    np.testing.assert_allclose(net.forward_numpy(x), ref, rtol=1e-5, atol=1e-6)
    twin = copy.deepcopy(net)  # a copy reads its own weights, not the original's
    with torch.no_grad():
        twin.layers[-1].bias.add_(1.0)  # type: ignore[union-attr]
    assert not np.allclose(twin.forward_numpy(x), net.forward_numpy(x))


@pytest.mark.parametrize("activation", sorted(ACTIVATIONS))
def test_numpy_activation_at_extreme_inputs_matches_torch_without_warnings(activation: str,
                                                                            ) -> None:
    """Pre-activations far out (a diverging or heavily mutated network) stay exact and quiet."""
    x = np.array([[-1e4, -200.0, -88.5, -1.0, 0.0, 1.0, 88.5, 200.0, 1e4]], dtype=np.float32)
    ref = ACTIVATIONS[activation](torch.from_numpy(x.copy())).numpy()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        got = numpy_activation(activation, x.copy())
    np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-6)


def test_squash_at_extreme_inputs_is_exact_and_quiet() -> None:
    """An actor output far below zero squashes to the low end of the range, without a warning."""
    x = np.array([[-1e4, -200.0, -88.5, 0.0, 88.5, 200.0, 1e4]], dtype=np.float32)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        got = squash(x, -1.0, 2.0)
    ref = -1.0 + 3.0 * torch.sigmoid(torch.from_numpy(x)).numpy()
    np.testing.assert_allclose(got, ref, rtol=1e-6, atol=1e-6)
    assert got[0, 0] == -1.0 and got[0, -1] == 2.0 and got.dtype == np.float32


def population(spec, algo: str, noise: str,
               n: int = 4) -> tuple[list[MATD3], list[np.random.Generator]]:
    sw = Switches(**{**ALGOS[algo], "noise": noise})
    algos = [MATD3(spec, copy.copy(HP), sw, [16, 16], "relu", seed=i) for i in range(n)]
    return algos, [np.random.default_rng(100 + i) for i in range(n)]


@pytest.mark.parametrize("discrete_listener", [True, False])
@pytest.mark.parametrize("noise", ["gaussian", "ou"])
def test_population_acting_equals_member_by_member(discrete_listener: bool, noise: str) -> None:
    """Same actions, bit for bit, as each member acting on its slice with its own generator, while
    the members learn, have their weights mutated, change architecture and are replaced."""
    spec = hetero_spec(discrete_listener)
    k = 3
    algos, rngs = population(spec, "matd3", noise)
    twins = copy.deepcopy((algos, rngs))
    actor = PopulationActor(spec)
    obs_rng = np.random.default_rng(7)
    buf = ReplayBuffer(spec, 500)
    fill(buf, spec, 200, obs_rng)
    algos[2].set_hyperparams(expl_noise=0.0)
    twins[0][2].set_hyperparams(expl_noise=0.0)
    for step in range(12):
        obs = {a: obs_rng.normal(size=(4 * k, spec[a].obs_dim)).astype(np.float32)
               for a in spec.agents}
        done = obs_rng.random(4 * k) < 0.3
        env_act, stored = actor.act(algos, rngs, obs, done)
        parts = [t.act({a: o[j * k:(j + 1) * k] for a, o in obs.items()}, r,
                       done[j * k:(j + 1) * k])
                 for j, (t, r) in enumerate(zip(*twins, strict=True))]
        for a in spec.agents:
            np.testing.assert_array_equal(env_act[a], np.concatenate([p[0][a] for p in parts]))
            np.testing.assert_array_equal(stored[a], np.concatenate([p[1][a] for p in parts]))
        for pop in (algos, twins[0]):  # the same changes on both sides
            batch_rng = np.random.default_rng(step)
            pop[step % 4].learn(buf.sample(32, batch_rng))
            pop[step % 4].learn(buf.sample(32, batch_rng))  # a policy-delayed actor step
            if step == 4:
                pop[1].actor_version += 1
                mutate_weights(pop[1].actors, _WeightCfg(), torch.Generator().manual_seed(3))
            if step == 6:  # architecture change: member 3's actor leaves the stacked group
                net = pop[3].actors["listener"]
                apply_edits(pop[3], "listener", "actor",
                            [add_nodes(net, 0, 4, torch.Generator().manual_seed(1))])
            if step == 9:  # a clone replaces member 0
                pop[0] = pop[1].clone(seed=5)
    assert actor.groups("listener", algos)[0][1] == [0, 1, 2]  # the shapes it grouped by


class _WeightCfg:
    weight_fraction = 0.5
    weight_noise_std = 0.1


def sequential_learn(m: MATD3, batch) -> None:
    """The reference: each agent's critics, then its actor, stepped one agent after the other
    (own backward pass, torch's clip_grad_norm_, own Adam step)."""
    inputs = LearnInputs.of(m, batch)
    m.updates += 1
    update_actor = m.updates % m.sw.policy_delay == 0

    def step(opt: torch.optim.Optimizer, loss: torch.Tensor) -> None:
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(opt.param_groups[0]["params"], m.sw.max_grad_norm)
        opt.step()

    for i, a in enumerate(m.agents):
        step(m.critic_opts[a], m.critic_loss(i, inputs))
        if update_actor:
            step(m.actor_opts[a], m.actor_loss(i, inputs))
    if update_actor:
        m.update_targets()


@pytest.mark.parametrize("algo", sorted(ALGOS))
@pytest.mark.parametrize("discrete_listener", [True, False])
def test_one_pass_learning_equals_agent_by_agent(algo: str, discrete_listener: bool) -> None:
    """All agents' losses through one backward pass each for critics and actors give the updates
    that stepping the agents one after the other gives (each loss touches only its agent's nets)."""
    spec = hetero_spec(discrete_listener)
    sw = Switches(**{**ALGOS[algo], "max_grad_norm": 0.05})  # small: clipping is active
    m = MATD3(spec, HP, sw, [16, 16], "relu", seed=0)
    ref = m.clone(seed=0)
    rng = np.random.default_rng(0)
    buf = ReplayBuffer(spec, 500)
    fill(buf, spec, 300, rng)
    for i in range(6):
        batch = buf.sample(32, np.random.default_rng(i))
        m.learn(batch)
        sequential_learn(ref, batch)
    for which in ("actors", "actor_targets", "critics", "critic_targets"):
        for a in spec.agents:
            nets = getattr(m, which)[a]
            refs = getattr(ref, which)[a]
            for n, r in zip(nets if isinstance(nets, list) else [nets],
                            refs if isinstance(refs, list) else [refs],
                            strict=True):
                for p, q in zip(n.parameters(), r.parameters(), strict=True):
                    torch.testing.assert_close(p, q, rtol=1e-5, atol=1e-6)
    assert m.actor_version == ref.updates // sw.policy_delay


@pytest.mark.parametrize("algo", sorted(ALGOS))
def test_direct_adam_step_is_bitwise_torchs(algo: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The learner's direct clip and fused-Adam calls give exactly what p.grad, clip_grad_norm_ and
    opt.step() give, in the weights and in Adam's moments and steps."""
    spec = hetero_spec(discrete_listener=True)
    sw = Switches(**{**ALGOS[algo], "max_grad_norm": 0.05})
    m = MATD3(spec, HP, sw, [16, 16], "tanh", seed=0)
    buf = ReplayBuffer(spec, 500)
    fill(buf, spec, 300, np.random.default_rng(0))
    m.learn(buf.sample(32, np.random.default_rng(99)))  # Adam's state exists from here on
    ref = copy.deepcopy(m)  # its random stream too
    calls = []
    real_fused = torch._fused_adam_
    monkeypatch.setattr(torch, "_fused_adam_",
                        lambda *a, **k: (calls.append(1), real_fused(*a, **k))[1])
    for i in range(5):
        m.learn(buf.sample(32, np.random.default_rng(i)))
    assert calls, "the direct path did not run"
    def torch_step(opts, grads, max_norm):  # what the learner did before: torch's own calls
        params = [p for opt in opts for p in opt.param_groups[0]["params"]]
        for p, g in zip(params, grads, strict=True):
            p.grad = g
        for opt in opts:
            torch.nn.utils.clip_grad_norm_(opt.param_groups[0]["params"], max_norm, foreach=True)
            opt.step()

    monkeypatch.setattr(optim, "step", torch_step)
    for i in range(5):
        ref.learn(buf.sample(32, np.random.default_rng(i)))
    for a in spec.agents:
        for opts in ("actor_opts", "critic_opts"):
            o, r = getattr(m, opts)[a], getattr(ref, opts)[a]
            for p, q in zip(o.param_groups[0]["params"], r.param_groups[0]["params"], strict=True):
                assert torch.equal(p, q)
                for key in ("exp_avg", "exp_avg_sq", "step"):
                    assert torch.equal(o.state[p][key], r.state[q][key]), key
    for p, q in zip(m.critic_targets[spec.agents[0]][0].parameters(),
                    ref.critic_targets[spec.agents[0]][0].parameters(), strict=True):
        assert torch.equal(p, q)


@pytest.mark.parametrize("which", ["actor", "critic"])
def test_soft_updates_reach_the_networks_a_mutation_made(which: str) -> None:
    """The target update keeps its parameter lists between updates: after an architecture change
    the new target must still move toward the new online network, by exactly tau."""
    spec = hetero_spec(discrete_listener=False)
    m = MATD3(spec, HP, Switches(**ALGOS["maddpg"]), [16, 16], "relu", seed=0)
    buf = ReplayBuffer(spec, 500)
    fill(buf, spec, 300, np.random.default_rng(0))
    m.learn(buf.sample(32, np.random.default_rng(1)))
    nets = [m.actors["listener"]] if which == "actor" else m.critics["listener"]
    apply_edits(m, "listener", which,
                [add_nodes(n, 0, 4, torch.Generator().manual_seed(1)) for n in nets])
    online = m.actors["listener"] if which == "actor" else m.critics["listener"][0]
    target = m.actor_targets["listener"] if which == "actor" else m.critic_targets["listener"][0]
    before = [t.detach().clone() for t in target.parameters()]
    m.learn(buf.sample(32, np.random.default_rng(2)))
    for b, t, o in zip(before, target.parameters(), online.parameters(), strict=True):
        torch.testing.assert_close(t, b + HP.tau * (o.detach() - b))
        assert not torch.equal(t, b)


def test_adam_falls_back_where_the_device_has_no_fused_kernel(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """torch before 2.4 refuses fused=True for CPU tensors: the optimizer is then the foreach
    form."""
    real = torch.optim.Adam

    def no_fused(params, **kw):  # as torch 2.2-2.3 answers fused=True on the CPU
        if kw.get("fused"):
            raise RuntimeError("`fused=True` requires all the params to be floating point "
                               "Tensors of supported devices: ['cuda', 'xpu', 'privateuseone']")
        return real(params, **kw)

    monkeypatch.setattr(torch.optim, "Adam", no_fused)
    opt = optim.adam(MLP(3, 2, [4], "relu", torch.Generator().manual_seed(0)).parameters(), 1e-3,
                     torch.device("cpu"))
    assert opt.defaults["foreach"] is True and not opt.defaults["fused"]
    assert len(opt.param_groups[0]["params"]) == 4  # the parameters survived the failed first try


def test_optimizer_step_takes_transposed_gradients() -> None:
    """torch's fused CPU Adam steps the wrong elements for a non-contiguous gradient: the
    learner's step hands it contiguous ones, so the layout of a gradient changes nothing."""
    gen = torch.Generator().manual_seed(0)
    p, q = (torch.nn.Parameter(torch.zeros(3, 4)) for _ in range(2))
    o, r = (optim.adam([x], 0.1, torch.device("cpu")) for x in (p, q))
    for _ in range(3):
        g = torch.randn(4, 3, generator=gen).t()  # transposed: not contiguous
        optim.step([o], [g.clone()], 0.05)
        optim.step([r], [g.contiguous()], 0.05)
        assert torch.equal(p, q)
