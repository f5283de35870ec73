"""Evolvable MLPs for actors and critics: the network, its forward pass (torch, and numpy for
acting on the CPU), target copies and the Polyak update.

An :class:`MLP` is defined by its input and output sizes, a list of hidden widths and an
activation name. Its structural changes (nodes, layers, activation) that keep what it learned are
in :mod:`evohpo.algos.surgery`. Initialisation draws from an explicit ``torch.Generator``.
"""

from __future__ import annotations

import copy
import itertools
import math
from collections.abc import Callable, Iterable, Sequence
from typing import cast

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

LEAKY_SLOPE = 0.01  # nn.LeakyReLU's default negative slope
# the activations by name, as functions (the forward pass of small nets is call overhead:
# no modules)
ACTIVATIONS: dict[str, Callable[[torch.Tensor], torch.Tensor]] = {
    "relu": torch.relu,
    "elu": F.elu,
    "gelu": F.gelu,
    "tanh": torch.tanh,
    "leaky_relu": lambda x: F.leaky_relu(x, LEAKY_SLOPE),
    "silu": F.silu,
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
    """in -> hidden... -> out, with one activation between layers and none at the output.

    With ``gen=None`` the layers are left uninitialised (for :meth:`from_tensors`).
    """

    def __init__(self, in_dim: int, out_dim: int, hidden: Iterable[int], activation: str,
                 gen: torch.Generator | None, out_scale: float | None = 3e-3,
                 device: torch.device | str | None = None):
        super().__init__()
        self.in_dim, self.out_dim = int(in_dim), int(out_dim)
        self.hidden = [int(h) for h in hidden]
        self.activation = activation
        self.out_scale = out_scale
        sizes = [self.in_dim, *self.hidden, self.out_dim]
        if gen is None:
            self.layers = nn.ModuleList(nn.utils.skip_init(nn.Linear, a, b, device=device)
                                        for a, b in itertools.pairwise(sizes))
        else:
            self.layers = nn.ModuleList(nn.Linear(a, b, device=device)
                                        for a, b in itertools.pairwise(sizes))
            for layer in self.layers[:-1]:
                init_linear(layer, gen)  # type: ignore[arg-type]
            # a small output layer: actions start near the middle of their range, Q-values near 0
            init_linear(self.layers[-1], gen, out_scale)  # type: ignore[arg-type]

    @classmethod
    def from_tensors(cls, in_dim: int, out_dim: int, hidden: list[int], activation: str,
                     tensors: Sequence[torch.Tensor], out_scale: float | None = 3e-3) -> MLP:
        """An MLP holding ``tensors`` (weight, bias per layer, in order)."""
        net = cls(in_dim, out_dim, hidden, activation, None, out_scale, device=tensors[0].device)
        with torch.no_grad():
            for p, t in zip(net.parameters(), tensors, strict=True):
                p.copy_(t)
        return net

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        fn, last = ACTIVATIONS[self.activation], len(self.layers) - 1
        for i, layer in enumerate(self.layers):
            lin = cast(nn.Linear, layer)
            x = F.linear(x, lin.weight, lin.bias)
            if i < last:
                x = fn(x)
        return x

    def forward_numpy(self, x: np.ndarray) -> np.ndarray:
        """The same function on a float32 array, for acting on the CPU (numpy calls on arrays this
        small cost a fraction of torch's dispatch). Reads the live weights: no copy to refresh."""
        views = self.numpy_views()
        last = len(views) - 1
        for i, (w, b) in enumerate(views):
            x = x @ w
            x += b
            if i < last:
                x = numpy_activation(self.activation, x)
        return x

    def numpy_views(self) -> list[tuple[np.ndarray, np.ndarray]]:
        # numpy views share the parameters' memory, so in-place optimizer steps and load_state_dict
        # show through; a parameter given new storage (a device move) rebuilds them
        cache = self.__dict__.get("_np_cache")
        if cache is not None and all(t.data_ptr() == ptr
                                     for t, ptr in zip(cache[0], cache[1], strict=True)):
            return cache[2]
        linears = [cast(nn.Linear, layer) for layer in self.layers]
        tensors = [t for lin in linears for t in (lin.weight, lin.bias)]
        views = [(lin.weight.detach().numpy().T, lin.bias.detach().numpy()) for lin in linears]
        self.__dict__["_np_cache"] = (tensors, [t.data_ptr() for t in tensors], views)
        return views

    def __getstate__(self) -> dict[str, object]:
        state = self.__dict__.copy()
        state.pop("_np_cache", None)  # views of this module's own tensors: never carried to a copy
        return state

    def sizes(self) -> list[int]:
        return [self.in_dim, *self.hidden, self.out_dim]

    def arch(self) -> dict[str, object]:
        return {"in_dim": self.in_dim, "out_dim": self.out_dim, "hidden": list(self.hidden),
                "activation": self.activation}

    def num_params(self) -> int:
        return sum(p.numel() for p in self.parameters())


def numpy_activation(name: str, x: np.ndarray) -> np.ndarray:
    if name == "relu":
        return np.maximum(x, 0.0, out=x)
    if name == "tanh":
        return np.tanh(x, out=x)
    if name == "leaky_relu":
        return np.where(x > 0, x, np.float32(LEAKY_SLOPE) * x)
    if name == "elu":
        return np.where(x > 0, x, np.expm1(np.minimum(x, 0.0)))
    if name == "silu":
        with np.errstate(over="ignore"):  # exp(-x) overflows to inf below about -88: x/inf = -0
            return x / (1.0 + np.exp(-x))
    return ACTIVATIONS[name](torch.from_numpy(x)).numpy()  # gelu: erf, which numpy lacks


def polyak_update(online: Iterable[torch.Tensor], target: Iterable[torch.Tensor],
                  tau: float) -> None:
    """target <- target + tau * (online - target), for every pair of tensors at once."""
    with torch.no_grad():
        torch._foreach_lerp_(list(target), list(online), tau)


def frozen_copy(net: MLP) -> MLP:
    """A copy that takes no gradients (a target network)."""
    t = copy.deepcopy(net)
    t.requires_grad_(False)
    return t
