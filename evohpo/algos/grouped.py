"""Several MLPs of one shape as one batched matmul per layer, for learning.

A MATD3 update runs every learning agent's critics (two each) on the same joint input, and
their targets on another; each forward of a 64-wide MLP on a few hundred rows is a handful of
small kernels whose cost is mostly dispatch, and so is its backward pass. Networks of the same
shape (input, hidden widths, output, activation) run here as one group: their weights stacked
per layer (``torch.stack`` passes the gradients back to each network's own parameters), a shared
input through one wide matmul, then one batched matmul per layer. Networks a mutation has made
unlike the others run on their own. The outputs equal each network's own forward to float
rounding (a test compares them, and the gradients).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import cast

import torch
from torch import nn

from evohpo.networks import ACTIVATIONS, MLP


def shape_of(net: MLP) -> tuple[int, tuple[int, ...], int, str]:
    return net.in_dim, tuple(net.hidden), net.out_dim, net.activation


def forward_many(nets: Sequence[MLP], x: torch.Tensor | Sequence[torch.Tensor]
                 ) -> list[torch.Tensor]:
    """``[net(x) for net in nets]``, or ``[net(xi) for net, xi in zip(nets, x)]`` when ``x`` is a
    list: the same values, with the networks of one shape run together."""
    shared = isinstance(x, torch.Tensor)
    groups: dict[tuple[int, tuple[int, ...], int, str], list[int]] = {}
    for i, net in enumerate(nets):
        groups.setdefault(shape_of(net), []).append(i)
    out: list[torch.Tensor | None] = [None] * len(nets)
    for idx in groups.values():
        if len(idx) == 1:
            i = idx[0]
            out[i] = nets[i](x if shared else x[i])
            continue
        ys = _run_group([nets[i] for i in idx],
                        x if isinstance(x, torch.Tensor) else [x[i] for i in idx])
        for i, y in zip(idx, ys, strict=True):
            out[i] = y
    return cast(list[torch.Tensor], out)


def _run_group(nets: list[MLP], x: torch.Tensor | list[torch.Tensor]) -> tuple[torch.Tensor, ...]:
    """The group's outputs. Activations run feature-major, [G, width, rows]: each layer is then
    ``W @ h`` and the weights' gradients come out contiguous (``h @ W.T`` would hand back
    transposed ones)."""
    g, fn = len(nets), ACTIVATIONS[nets[0].activation]
    layers = [[cast(nn.Linear, n.layers[k]) for n in nets] for k in range(len(nets[0].layers))]
    h = torch.empty(0)
    for k, lins in enumerate(layers):
        w = torch.stack([lin.weight for lin in lins])  # [G, out, in]
        b = torch.stack([lin.bias for lin in lins])    # [G, out]
        if k == 0 and isinstance(x, torch.Tensor):  # one input: one matmul, G * out rows
            h = torch.addmm(b.reshape(-1, 1), w.reshape(-1, w.shape[2]), x.t())
            h = h.view(g, w.shape[1], x.shape[0])
        else:
            if k == 0:
                h = torch.stack(cast(list[torch.Tensor], x)).transpose(1, 2)  # [G, in, rows]
            h = torch.baddbmm(b.unsqueeze(2), w, h)
        if k < len(layers) - 1:
            h = fn(h)
    return h.transpose(1, 2).unbind(0)
