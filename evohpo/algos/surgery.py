"""Structural edits of an :class:`~evohpo.algos.networks.MLP` that keep what it learned.

A structural change is an :class:`Edit`: the new shape plus, for every parameter
of the new network, a :class:`ParamPlan` saying how it is made from the old network's tensors.
The same edit is replayed on the online network, on its target network (which therefore keeps
its own lagging weights) and on the Adam moments, so nothing learned is thrown away.

Growth preserves the function exactly (to float rounding):

* ``add_nodes``: new units get fresh incoming weights and zero outgoing weights.
* ``add_layer``: the new layer starts as an identity map (Net2Net's Net2DeeperNet,
  https://arxiv.org/abs/1511.05641). It is inserted after an existing hidden layer; whether an
  identity can be exact depends on the activation sigma, see :func:`add_layer`:
  relu - inputs are relu outputs (>= 0) where relu(x) = x; plain identity, same width.
  elu - inputs are > -1; shift them by +1 into elu's identity region and take the shift back
  out of the next layer's bias; same width.
  leaky_relu, gelu, silu - sigma(x) - sigma(-x) = c * x exactly (c = 1 + slope for leaky_relu,
  1 for the others), so a pair of units (+x, -x) per input passes x through; twice the width.
  tanh - no finite exact construction (odd and saturating): add_layer does not apply.

Shrinking copies the survivors: ``remove_nodes`` drops the units with the smallest outgoing
weights; ``remove_layer`` merges the linear maps on both sides of the removed layer, replacing its
activation by a linearisation (``LINEAR_SLOPE``) chosen so that removing a layer that add_layer
inserted gives back the original function exactly; on a trained layer it is an approximation.
New weights are drawn from an explicit ``torch.Generator``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

import torch

from evohpo.algos.networks import LEAKY_SLOPE, MLP

PAIRED = {"leaky_relu": 1.0 + LEAKY_SLOPE, "gelu": 1.0, "silu": 1.0}  # sigma(x) - sigma(-x) = c * x
# remove_layer replaces the removed activation by s * x: its slope at 0 (elu, tanh: 1; gelu,
# silu: 1/2), for leaky_relu the mean of its two slopes, for relu the slope of the side a relu
# identity layer uses. Each choice makes remove_layer the exact inverse of add_layer for that
# activation.
LINEAR_SLOPE = {"relu": 1.0, "elu": 1.0, "tanh": 1.0, "gelu": 0.5, "silu": 0.5,
                "leaky_relu": (1.0 + LEAKY_SLOPE) / 2}

Compute = Callable[[Sequence[torch.Tensor]], torch.Tensor]


@dataclass
class ParamPlan:
    """How one parameter of the edited MLP is made from the old MLP's tensors (params or moments).

    ``src`` is the old parameter whose entries carry over (and whose Adam moments follow them);
    ``index`` holds, per dimension, the old position of each new position, -1 for a new entry
    (empty: same shape, copy all). New entries take their value from ``fill`` (zeros if None) and
    start with zero moments. ``compute`` instead derives the value from all old tensors (a merged
    or rescaled layer); its moments carry over only if ``src`` is set too (same shape, same role).
    """

    shape: tuple[int, ...]
    src: int | None = None
    index: tuple[torch.Tensor, ...] = ()
    fill: torch.Tensor | None = None
    compute: Compute | None = None

    def value(self, old: Sequence[torch.Tensor]) -> torch.Tensor:
        if self.compute is not None:
            return self.compute(old)
        ref = old[0]
        out = (self.fill.to(ref.device, ref.dtype).clone() if self.fill is not None
               else torch.zeros(self.shape, device=ref.device, dtype=ref.dtype))
        if self.src is not None:
            _carry(out, old[self.src], self.index)
        return out

    def moment(self, old: torch.Tensor) -> torch.Tensor:
        """The moment tensor of the new parameter from that of ``src``: sliced, zero-padded."""
        out = torch.zeros(self.shape, device=old.device, dtype=old.dtype)
        _carry(out, old, self.index)
        return out


def _carry(out: torch.Tensor, old: torch.Tensor, index: tuple[torch.Tensor, ...]) -> None:
    with torch.no_grad():
        if not index:
            out.copy_(old)
            return
        idx = [i.to(out.device) for i in index]
        new_pos = [torch.nonzero(i >= 0).squeeze(1) for i in idx]
        if len(idx) == 1:
            out[new_pos[0]] = old[idx[0][new_pos[0]]]
        else:
            r, c = new_pos
            out[r[:, None], c[None, :]] = old[idx[0][r][:, None], idx[1][c][None, :]]


@dataclass
class Edit:
    """One structural change of an MLP, replayable on the online net, its target and Adam
    moments."""

    op: str                  # what was done, e.g. "add_node +16"
    layer: int               # the hidden layer it concerns (its index after the edit)
    hidden: list[int]        # hidden widths after the edit
    activation: str
    plans: list[ParamPlan]   # one per parameter of the edited MLP, in parameters() order


def apply_edit(net: MLP, edit: Edit) -> MLP:
    old = [p.detach() for p in net.parameters()]
    values = [plan.value(old) for plan in edit.plans]
    return MLP.from_tensors(net.in_dim, net.out_dim, edit.hidden, edit.activation, values,
                            net.out_scale)


def _copy_plans(net: MLP, layers: Iterable[int]) -> list[ParamPlan]:
    """Plans for unchanged layers: each copies old layer i, wherever it now sits."""
    sizes = net.sizes()
    out = []
    for i in layers:
        out += [ParamPlan((sizes[i + 1], sizes[i]), src=2 * i),
                ParamPlan((sizes[i + 1],), src=2 * i + 1)]
    return out


def _keep(n_old: int, n_new: int) -> torch.Tensor:
    """Index map for growing a dimension: old positions, then -1 for the new ones."""
    return torch.cat([torch.arange(n_old), torch.full((n_new - n_old,), -1)])


def _all(n: int) -> torch.Tensor:
    return torch.arange(n)


def set_activation(net: MLP, activation: str) -> Edit:
    n = len(net.layers)
    return Edit(f"{net.activation} -> {activation}", -1, list(net.hidden), activation,
                _copy_plans(net, range(n)))


def add_nodes(net: MLP, layer: int, n: int, gen: torch.Generator) -> Edit:
    """``n`` new units in hidden layer ``layer``: default-initialised inputs, zero outputs."""
    sizes = net.sizes()
    fan_in, h, out = sizes[layer], sizes[layer + 1], sizes[layer + 2]
    bound = 1.0 / math.sqrt(fan_in)
    w_new = (torch.rand((n, fan_in), generator=gen) * 2 - 1) * bound
    b_new = (torch.rand((n,), generator=gen) * 2 - 1) * bound
    rows = _keep(h, h + n)
    plans = _copy_plans(net, range(layer))
    plans += [ParamPlan((h + n, fan_in), 2 * layer, (rows, _all(fan_in)),
                        torch.cat([torch.zeros(h, fan_in), w_new])),
              ParamPlan((h + n,), 2 * layer + 1, (rows,), torch.cat([torch.zeros(h), b_new])),
              ParamPlan((out, h + n), 2 * layer + 2, (_all(out), rows)),  # zero outgoing weights
              ParamPlan((out,), 2 * layer + 3)]
    plans += _copy_plans(net, range(layer + 2, len(net.layers)))
    hidden = list(net.hidden)
    hidden[layer] += n
    return Edit(f"add_node +{n}", layer, hidden, net.activation, plans)


def remove_nodes(net: MLP, layer: int, n: int) -> Edit:
    """Drop the ``n`` units of hidden layer ``layer`` with the smallest outgoing weights."""
    sizes = net.sizes()
    fan_in, h, out = sizes[layer], sizes[layer + 1], sizes[layer + 2]
    norms = list(net.parameters())[2 * layer + 2].detach().norm(dim=0).cpu()
    order = torch.argsort(norms, descending=True, stable=True)
    keep = torch.sort(order[: h - n]).values
    plans = _copy_plans(net, range(layer))
    plans += [ParamPlan((h - n, fan_in), 2 * layer, (keep, _all(fan_in))),
              ParamPlan((h - n,), 2 * layer + 1, (keep,)),
              ParamPlan((out, h - n), 2 * layer + 2, (_all(out), keep)),
              ParamPlan((out,), 2 * layer + 3)]
    plans += _copy_plans(net, range(layer + 2, len(net.layers)))
    hidden = list(net.hidden)
    hidden[layer] -= n
    return Edit(f"remove_node -{n}", layer, hidden, net.activation, plans)


def identity_width(activation: str, width: int) -> int | None:
    """Width of an exact identity layer after a hidden layer of ``width`` units (None:
    impossible)."""
    if activation in ("relu", "elu"):
        return width
    if activation in PAIRED:
        return 2 * width
    return None


def add_layer(net: MLP, after: int) -> Edit | None:
    """A new hidden layer after hidden layer ``after``, starting as an exact identity map.

    Returns None when the activation admits no exact identity (tanh). See the module docstring.
    """
    act = net.activation
    h = net.hidden[after]
    m = identity_width(act, h)
    if m is None:
        return None
    nxt = after + 1  # the old layer that read hidden layer `after`; it now reads the new layer
    out = net.sizes()[nxt + 1]
    eye = torch.eye(h)
    if act in PAIRED:
        c = PAIRED[act]
        w_id, b_id, how = torch.cat([eye, -eye]), torch.zeros(m), f"paired units, width {m}"

        def next_w(old: Sequence[torch.Tensor]) -> torch.Tensor:
            w = old[2 * nxt]
            return torch.cat([w, -w], dim=1) / c

        # the next layer's weight is rebuilt (not a slice): its Adam moments start afresh
        next_plans = [ParamPlan((out, m), compute=next_w), ParamPlan((out,), src=2 * nxt + 1)]
    else:
        # elu's outputs are > -1: +1 puts them where elu(x) = x
        shift = 1.0 if act == "elu" else 0.0
        w_id, b_id = eye, torch.full((h,), shift)
        how = "identity, elu shift +1" if shift else "identity"

        def next_b(old: Sequence[torch.Tensor]) -> torch.Tensor:
            return old[2 * nxt + 1] - shift * old[2 * nxt].sum(dim=1)

        # same shape, same role: the next layer keeps its moments (its bias only moved by the shift)
        next_plans = [ParamPlan((out, h), src=2 * nxt),
                      ParamPlan((out,), src=2 * nxt + 1, compute=next_b if shift else None)]
    plans = _copy_plans(net, range(nxt))
    plans += [ParamPlan((m, h), fill=w_id), ParamPlan((m,), fill=b_id), *next_plans]
    plans += _copy_plans(net, range(nxt + 1, len(net.layers)))
    hidden = [*net.hidden[: after + 1], m, *net.hidden[after + 1:]]
    return Edit(f"add_layer ({how})", after + 1, hidden, act, plans)


def remove_layer(net: MLP, layer: int) -> Edit:
    """Remove hidden layer ``layer``: the linear maps into and out of it merge into one.

    W = s W_out @ W_in, b = s W_out @ b_in + b_out, the removed activation linearised as s * x
    (``LINEAR_SLOPE``; every activation here has sigma(0) = 0). The merged layer is new, so its
    Adam moments start afresh; every other layer keeps its own.
    """
    sizes = net.sizes()
    fan_in, out = sizes[layer], sizes[layer + 2]
    s = LINEAR_SLOPE[net.activation]

    def merged_w(old: Sequence[torch.Tensor]) -> torch.Tensor:
        return s * (old[2 * layer + 2] @ old[2 * layer])

    def merged_b(old: Sequence[torch.Tensor]) -> torch.Tensor:
        return s * (old[2 * layer + 2] @ old[2 * layer + 1]) + old[2 * layer + 3]

    plans = _copy_plans(net, range(layer))
    plans += [ParamPlan((out, fan_in), compute=merged_w), ParamPlan((out,), compute=merged_b)]
    plans += _copy_plans(net, range(layer + 2, len(net.layers)))  # old layer i is new layer i - 1
    hidden = [*net.hidden[:layer], *net.hidden[layer + 1:]]
    return Edit("remove_layer (merged into the next layer)", layer, hidden, net.activation, plans)
