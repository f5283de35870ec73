"""Networks of one shape run together (evohpo.algos.grouped) give each network's own values and
gradients; the learner's optimizer step takes gradients of any layout."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from evohpo.algos import ALGOS, MATD3, Switches, optim
from evohpo.algos.arch_mutations import apply_edits
from evohpo.algos.grouped import forward_many
from evohpo.buffer import ReplayBuffer
from evohpo.networks import MLP, add_nodes
from tests.test_algos import HP, fill, hetero_spec


def nets_of_mixed_shapes() -> list[MLP]:
    g = torch.Generator().manual_seed(0)
    nets = [MLP(10, 3, [16, 16], "relu", g) for _ in range(3)]
    nets += [MLP(10, 3, [16], "tanh", g), MLP(10, 3, [16, 16], "elu", g),
             MLP(10, 3, [16, 16], "relu", g)]
    return nets  # two groups of one shape (0, 1, 2, 5) and two alone


@pytest.mark.parametrize("shared", [True, False])
def test_forward_many_equals_each_network(shared: bool) -> None:
    nets = nets_of_mixed_shapes()
    gen = torch.Generator().manual_seed(1)
    x = (torch.randn(33, 10, generator=gen) if shared
         else [torch.randn(33, 10, generator=gen) for _ in nets])
    params = [p for n in nets for p in n.parameters()]
    weights = [torch.randn(33, 3, generator=gen) for _ in nets]  # a different loss per network
    ys = forward_many(nets, x)
    refs = [n(x if shared else x[i]) for i, n in enumerate(nets)]
    for y, r in zip(ys, refs, strict=True):
        assert y.shape == r.shape
        torch.testing.assert_close(y, r, rtol=1e-5, atol=1e-6)
    grads = torch.autograd.grad(sum((w * y).sum() for w, y in zip(weights, ys, strict=True)),
                                params)
    ref_grads = torch.autograd.grad(
        sum((w * r).sum() for w, r in zip(weights, refs, strict=True)), params)
    for g, r in zip(grads, ref_grads, strict=True):
        torch.testing.assert_close(g, r, rtol=1e-5, atol=1e-6)
        assert g.is_contiguous()  # as a single network's: no copy before the optimizer step


def test_a_mutated_critic_runs_on_its_own() -> None:
    """A learner whose agents' critics differ in shape after a mutation learns as before."""
    spec = hetero_spec(discrete_listener=False)
    m = MATD3(spec, HP, Switches(**ALGOS["matd3"]), [16, 16], "relu", seed=0)
    critics = m.critics["listener"]
    apply_edits(m, "listener", "critic",
                [add_nodes(c, 0, 4, torch.Generator().manual_seed(0)) for c in critics])
    grown = m.critics["listener"][0]
    assert grown.hidden == [20, 16]
    x = torch.randn(8, grown.in_dim)
    nets = [m.critics["speaker"][0], grown, m.critics["speaker"][1], m.critics["listener"][1]]
    for y, net in zip(forward_many(nets, x), nets, strict=True):
        torch.testing.assert_close(y, net(x))
    buf = ReplayBuffer(spec, 200)
    fill(buf, spec, 100, np.random.default_rng(0))
    assert all(np.isfinite(v) for v in m.learn(buf.sample(16, np.random.default_rng(1))).values())


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
