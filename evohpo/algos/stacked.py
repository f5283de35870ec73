"""Many MLPs of one shape as one: their weights stacked along a leading axis, run with batched
matrix products.

A :class:`Stack` runs on ``[K, out, in]`` weights (views into a group's buffers,
:mod:`evohpo.algos.group`); a loss computed from them gives gradients in the same ``[K, ...]``
layout, which :mod:`evohpo.algos.fused` clips and steps. Networks that read the same input (a
member's critics) take their first layer as one product (:meth:`Stack.shared`), not one per
network.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from evohpo.algos.networks import ACTIVATIONS, MLP


@dataclass
class Stack:
    """K networks of one shape: per layer, weights ``[K, out, in]`` and biases ``[K, out, 1]``.

    Activations run feature-major (``[K, features, B]``), so each weight's gradient comes out of
    its product in the weight's own layout: no transposed copies before the optimizer.
    """

    weights: list[torch.Tensor]
    biases: list[torch.Tensor]
    activation: str

    @property
    def k(self) -> int:
        return self.weights[0].shape[0]

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        """``x``: ``[K, B, in]``, one input per network; returns ``[K, B, out]``."""
        h = torch.baddbmm(self.biases[0], self.weights[0], x.transpose(1, 2))
        return self._rest(h).transpose(1, 2)

    def shared(self, x: torch.Tensor) -> torch.Tensor:
        """``x``: ``[M, B, in]``, read by the K = M * G networks ``m * G .. m * G + G - 1``;
        returns ``[K, B, out]``. The first layer is one product per ``m`` for all G networks."""
        m = x.shape[0]
        w0, b0 = self.weights[0], self.biases[0]
        g, out, inp = self.k // m, w0.shape[1], w0.shape[2]
        h = torch.baddbmm(b0.reshape(m, g * out, 1), w0.reshape(m, g * out, inp),
                          x.transpose(1, 2))  # [M, G*out, B]
        return self._rest(h.reshape(m * g, out, x.shape[1])).transpose(1, 2)

    def take(self, idx: torch.Tensor) -> Stack:
        """The networks ``idx`` (a network may come more than once): a stack of copies whose
        gradients sum back into this one's."""
        return Stack([w.index_select(0, idx) for w in self.weights],
                     [b.index_select(0, idx) for b in self.biases], self.activation)

    def _rest(self, h: torch.Tensor) -> torch.Tensor:
        """From the first layer's output on (feature-major)."""
        fn, last = ACTIVATIONS[self.activation], len(self.weights) - 1
        for i in range(1, last + 1):
            h = torch.baddbmm(self.biases[i], self.weights[i], fn(h))
        return h


def shape_key(net: MLP) -> tuple[int, int, tuple[int, ...], str]:
    """What networks must share to be stacked."""
    return net.in_dim, net.out_dim, tuple(net.hidden), net.activation
