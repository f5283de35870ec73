"""Adam and gradient clipping for the learner's hot path.

A learner update steps a handful of small networks; ``torch.optim.Adam.step`` and
``clip_grad_norm_`` spend most of their time in Python bookkeeping around one or two kernel calls.
:func:`step` calls those kernels directly on gradients handed over by ``autograd.grad``, with the
optimizer's own state (its moments and step counts), and gives bitwise the result of setting
``p.grad``, clipping with ``clip_grad_norm_`` and calling ``opt.step()``; where it cannot (no fused
kernel, an optimizer that has not stepped yet, a parameter without a gradient) it does just that.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

_ADAM = torch.optim.Adam


def adam(params: Any, lr: float, device: torch.device) -> torch.optim.Adam:
    """Adam with its fused kernel where the device has one (one call per step, not one per tensor);
    torch before 2.4 has none for the CPU: there it takes the multi-tensor (foreach) form."""
    params = list(params)
    if device.type in ("cpu", "cuda"):
        try:
            return torch.optim.Adam(params, lr=lr, fused=True)
        except RuntimeError:
            pass
    return torch.optim.Adam(params, lr=lr, foreach=True)


def clip_(grads: Sequence[torch.Tensor], max_norm: float) -> None:
    """Scale ``grads`` in place so their joint 2-norm is at most ``max_norm``: the operations of
    ``clip_grad_norm_(foreach=True)`` for tensors on one device, without its grouping."""
    grads = list(grads)
    total = torch.linalg.vector_norm(torch.stack(torch._foreach_norm(grads, 2.0)), 2.0)
    torch._foreach_mul_(grads, torch.clamp(max_norm / (total + 1e-6), max=1.0))


def _fused_options(opt: torch.optim.Optimizer) -> tuple[Any, ...] | None:
    """What a direct fused Adam call needs from ``opt``; None where it must step on its own."""
    if type(opt) is not _ADAM or len(opt.param_groups) != 1:
        return None
    g = opt.param_groups[0]
    if (not g.get("fused") or g["amsgrad"] or g["maximize"] or g["differentiable"]
            or g.get("decoupled_weight_decay")):
        return None
    lr = g["lr"]
    if isinstance(lr, torch.Tensor):
        return None
    beta1, beta2 = g["betas"]
    return (float(lr), float(beta1), float(beta2), float(g["weight_decay"]), float(g["eps"]))


def step(opts: Sequence[torch.optim.Optimizer], grads: Sequence[torch.Tensor | None],
         max_norm: float | None) -> None:
    """Clip each optimizer's gradients on their own (``max_norm``, if given), then step them all.

    ``grads`` follow the optimizers' parameters in order (``opts[0]``'s first). Optimizers with
    the same options share one fused Adam call: it works tensor by tensor, so grouping them
    changes nothing in the result.
    """
    # torch's fused CPU Adam reads a gradient's memory as if contiguous (seen on 2.13: a
    # transposed gradient stepped the wrong elements): hand it contiguous ones only
    grads = [g if g is None or g.is_contiguous() else g.contiguous() for g in grads]
    fused: dict[tuple[Any, ...], list[list[torch.Tensor]]] = {}
    at = 0
    for opt in opts:
        params = opt.param_groups[0]["params"]
        gs, at = grads[at:at + len(params)], at + len(params)
        options = _fused_options(opt)
        complete = (all(g is not None for g in gs)
                    and all(len(opt.state.get(p, ())) > 0 for p in params))
        if max_norm is not None:
            present = [g for g in gs if g is not None]
            if present:
                clip_(present, max_norm)
        if options is None or not complete or params[0].device.type not in ("cpu", "cuda"):
            for p, g in zip(params, gs, strict=True):
                p.grad = g
            opt.step()
            for p in params:
                p.grad = None
            continue
        lists = fused.setdefault((*options, params[0].device), [[], [], [], [], []])
        for p, g in zip(params, gs, strict=True):
            s = opt.state[p]
            lists[0].append(p)
            lists[1].append(g)  # type: ignore[arg-type]  # complete: none is None
            lists[2].append(s["exp_avg"])
            lists[3].append(s["exp_avg_sq"])
            lists[4].append(s["step"])
    with torch.no_grad():
        for (lr, beta1, beta2, wd, eps, _), (ps, grad_list, m1, m2, steps) in fused.items():
            torch._foreach_add_(steps, 1)
            torch._fused_adam_(ps, grad_list, m1, m2, [], steps, amsgrad=False, lr=lr,
                               beta1=beta1, beta2=beta2, weight_decay=wd, eps=eps,
                               maximize=False, grad_scale=None, found_inf=None)
