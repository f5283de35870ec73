"""Evolvable MLPs for actors and critics.

An :class:`MLP` is defined by its input and output sizes, a list of hidden widths and an
activation name, so an architecture mutation is "build the new shape, copy what overlaps".
Initialisation draws from an explicit ``torch.Generator``: never from global state.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterable

import torch
from torch import nn

ACTIVATIONS: dict[str, type[nn.Module]] = {
    "relu": nn.ReLU,
    "elu": nn.ELU,
    "gelu": nn.GELU,
    "tanh": nn.Tanh,
    "leaky_relu": nn.LeakyReLU,
    "silu": nn.SiLU,
}


def init_linear(layer: nn.Linear, gen: torch.Generator, scale: float | None = None) -> None:
    """PyTorch's default Linear init (or uniform(+-scale)), drawn from ``gen``."""
    with torch.no_grad():
        if scale is None:
            nn.init.kaiming_uniform_(layer.weight, a=math.sqrt(5), generator=gen)
            bound = 1.0 / math.sqrt(layer.in_features) if layer.in_features > 0 else 0.0
            nn.init.uniform_(layer.bias, -bound, bound, generator=gen)
        else:
            nn.init.uniform_(layer.weight, -scale, scale, generator=gen)
            nn.init.uniform_(layer.bias, -scale, scale, generator=gen)


class MLP(nn.Module):
    """in -> hidden... -> out, with one activation between layers and none at the output."""

    def __init__(self, in_dim: int, out_dim: int, hidden: Iterable[int], activation: str,
                 gen: torch.Generator, out_scale: float | None = 3e-3):
        super().__init__()
        self.in_dim, self.out_dim = int(in_dim), int(out_dim)
        self.hidden = [int(h) for h in hidden]
        self.activation = activation
        self.out_scale = out_scale
        sizes = [self.in_dim, *self.hidden, self.out_dim]
        self.layers = nn.ModuleList(nn.Linear(a, b) for a, b in itertools.pairwise(sizes))
        for layer in self.layers[:-1]:
            init_linear(layer, gen)  # type: ignore[arg-type]
        # a small output layer: actions start near the middle of their range, Q-values near 0
        init_linear(self.layers[-1], gen, out_scale)  # type: ignore[arg-type]
        self.act = ACTIVATIONS[activation]()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        *hidden, last = self.layers
        for layer in hidden:
            x = self.act(layer(x))
        return last(x)

    def arch(self) -> dict[str, object]:
        return {"in_dim": self.in_dim, "out_dim": self.out_dim, "hidden": list(self.hidden),
                "activation": self.activation}

    def num_params(self) -> int:
        return sum(p.numel() for p in self.parameters())


def polyak_update(online: Iterable[torch.Tensor], target: Iterable[torch.Tensor], tau: float) -> None:
    """target <- target + tau * (online - target), for every pair of tensors at once."""
    with torch.no_grad():
        torch._foreach_lerp_(list(target), list(online), tau)
