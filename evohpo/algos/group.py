"""A group's networks and Adam state kept stacked between updates: :class:`Group`.

Members whose networks have the same shapes learn as one group (:mod:`evohpo.algos.fused`).
The group keeps their weights, targets, Adam moments and step counts stacked: for each network
shape, one ``[K, P]`` buffer per kind of tensor, row ``j * G + i`` holding member ``j``'s
``i``-th network of that shape, its parameters one after the other; each parameter's ``K`` rows
read as one ``[K, *shape]`` view for the batched products. Each member's networks and optimizer
state are views into these buffers: its
``nn.Linear`` parameters' data and its Adam state entries. So an update reads and writes the
stacks directly, with no copy into a stack and back, and Adam, clipping and Polyak run on a few
flat tensors. Whatever reads or changes a member on its own (acting, evaluation, a checkpoint,
a mutation of its weights, :meth:`MATD3.learn <evohpo.algos.matd3.MATD3.learn>`) reads and
changes the same memory.

A group is formed again only when what it stacked is gone: a member replaced or added (a copy),
a network replaced (an architecture or activation mutation), an optimizer replaced or loaded (a
resume, a state sent to a Ray actor). :meth:`Group.holds` compares the objects it stacked by
identity.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from evohpo.algos.matd3 import MATD3
from evohpo.algos.networks import MLP
from evohpo.algos.stacked import Stack, shape_key

Net = tuple[str, int]  # (agent, critic index; 0 for an actor)
BETAS, EPS = (0.9, 0.999), 1e-8  # torch's Adam defaults, which MATD3's optimizers keep


def network(algo: MATD3, kind: str, agent: str, k: int, target: bool = False) -> MLP:
    if kind == "actor":
        return algo.actor_targets[agent] if target else algo.actors[agent]
    return (algo.critic_targets if target else algo.critics)[agent][k]


def optimizer(algo: MATD3, kind: str, agent: str) -> torch.optim.Optimizer:
    return (algo.actor_opts if kind == "actor" else algo.critic_opts)[agent]


class Shape:
    """The networks ``keys`` (one shape) of a group's members, stacked (see the module's
    docstring): ``params`` (a leaf that takes gradients), ``targets``, ``exp_avg`` and
    ``exp_avg_sq`` ``[K, P]`` (a row is a network's parameters one after the other, each padded
    with zeros to a whole number of 64 bytes); ``steps``
    ``[K, parameters]``; ``w`` and ``tw`` each parameter's ``[K, *shape]`` view of ``params``
    and ``targets`` (a bias as ``[K, out, 1]``)."""

    def __init__(self, algos: Sequence[MATD3], kind: str, keys: list[Net]):
        self.kind, self.keys, self.m = kind, keys, len(algos)
        rows = [(al, a, k) for al in algos for a, k in keys]
        nets = [list(network(al, kind, a, k).parameters()) for al, a, k in rows]
        tgts = [list(network(al, kind, a, k, True).parameters()) for al, a, k in rows]
        opts = [optimizer(al, kind, a) for al, a, _ in rows]
        states = [[o.state.get(p, {}) for p in ps] for o, ps in zip(opts, nets, strict=True)]
        self.activation = network(algos[0], kind, *keys[0]).activation
        shapes = [tuple(p.shape) for p in nets[0]]
        n, k = [p.numel() for p in nets[0]], len(rows)

        # each parameter's columns start on a 64-byte boundary, as a tensor of its own does: a
        # member's weights read on their own (acting, evaluation) give the same floats as a
        # copy of them would (the BLAS kernels' rounding follows the alignment)
        align = 64 // nets[0][0].element_size()
        cols = [-(-size // align) * align for size in n]
        self.pads = [torch.zeros(k, c - size, dtype=nets[0][0].dtype, device=nets[0][0].device)
                     for c, size in zip(cols, n, strict=True)]

        def flat(tensors: Sequence[Sequence[torch.Tensor]]) -> torch.Tensor:
            return torch.stack([torch.cat([x for t, pad in zip(ts, self.pads, strict=True)
                                           for x in (t.reshape(-1), pad[0])]) for ts in tensors])

        with torch.no_grad():
            self.params = flat(nets).requires_grad_()
            self.targets = flat(tgts)
            self.exp_avg, self.exp_avg_sq = (flat([[
                s[name] if s else torch.zeros_like(p) for p, s in zip(ps, st, strict=True)]
                for ps, st in zip(nets, states, strict=True)]) for name in ("exp_avg",
                                                                           "exp_avg_sq"))
            step = next((s[0]["step"] for s in states if s and s[0]), None)
            self.steps = torch.tensor(  # float32, as torch's fused Adam keeps them
                [[float(x["step"]) if x else 0.0 for x in st] for st in states],
                dtype=torch.float32 if step is None else step.dtype, device=self.params.device)
        dev = self.params.device
        # a row's parameters step together from here on: where they start together (as they
        # do but after an architecture mutation) one step count per row holds for all of them
        self.uniform = bool((self.steps == self.steps[:, :1]).all())
        self.counts = torch.tensor(cols, device=dev)
        at = [0]
        for c in cols:
            at.append(at[-1] + c)
        views = [(at[i], at[i] + n[i], (k, *shapes[i]) if len(shapes[i]) > 1
                  else (k, shapes[i][0], 1)) for i in range(len(n))]
        self.w = [self.params[:, a:b].view(v) for a, b, v in views]
        self.tw = [self.targets[:, a:b].view(v) for a, b, v in views]
        for r, (ps, ts, opt) in enumerate(zip(nets, tgts, opts, strict=True)):
            for i, (p, t) in enumerate(zip(ps, ts, strict=True)):
                own = slice(at[i], at[i] + n[i])
                p.data = self.params.detach()[r, own].view(shapes[i])  # the member's, in place
                t.data = self.targets[r, own].view(shapes[i])
                opt.state[p] = {"step": self.steps[r, i],
                                "exp_avg": self.exp_avg[r, own].view(shapes[i]),
                                "exp_avg_sq": self.exp_avg_sq[r, own].view(shapes[i])}
        learners = algos[0].learners
        # each row's member, and its optimizer's place among the group's (member, learner)
        self.member = torch.arange(self.m, device=dev).repeat_interleave(len(keys))
        self.owner = torch.tensor([j * len(learners) + learners.index(a)
                                   for j in range(self.m) for a, _ in keys], device=dev)

    def stack(self, target: bool) -> Stack:
        """Every row's network as one :class:`~evohpo.algos.stacked.Stack` (no copy)."""
        ts = self.tw if target else self.w
        return Stack(ts[0::2], ts[1::2], self.activation)

    def flat_grad(self, grads: Sequence[torch.Tensor]) -> torch.Tensor:
        """The gradients of ``w`` (in order) as one ``[K, P]`` tensor, laid out as ``params``
        (zeros on the padding)."""
        return torch.cat([x for g, pad in zip(grads, self.pads, strict=True)
                          for x in (g.reshape(len(g), -1), pad)], dim=1)

    def adam(self, g: torch.Tensor, lr: list[float], active: torch.Tensor | None) -> None:
        """One Adam step of the rows ``active`` (``[K]`` bool; None: all) on the gradient ``g``
        (``[K, P]``), each row with its learning rate: what ``torch.optim.Adam`` does to each
        member's parameters. A row that does not step keeps its moments (its gradients are zero
        and are weighed 0) and its weights (step size 0)."""
        b1, b2 = BETAS
        with torch.no_grad():
            self.steps.add_(1.0 if active is None else active.to(self.steps.dtype)[:, None])
            s = (self.steps[:, :1] if self.uniform else self.steps).double()
            size = torch.tensor(lr, dtype=torch.float64, device=s.device)[:, None] / (1 - b1 ** s)
            root = (1 - b2 ** s).sqrt()
            on = None if active is None else active[:, None]
            if on is not None:  # a row that has never stepped has no bias correction
                size, root = torch.where(on, size, 0.0), torch.where(on, root, 1.0)
            dtype = self.params.dtype
            size, root = size.to(dtype), root.to(dtype)
            if not self.uniform:  # each parameter's own count, over its columns
                size = size.repeat_interleave(self.counts, dim=1)
                root = root.repeat_interleave(self.counts, dim=1)
            m, v = self.exp_avg, self.exp_avg_sq
            if on is None:
                m.lerp_(g, 1 - b1)
                v.mul_(b2)
            else:
                m.lerp_(g, torch.where(on, 1 - b1, 0.0).to(dtype))
                v.mul_(torch.where(on, b2, 1.0).to(dtype))
            v.addcmul_(g, g, value=1 - b2)
            self.params.sub_(m * size / (v.sqrt() / root + EPS))

    def polyak(self, tau: torch.Tensor) -> None:
        """Targets toward the networks, row by row (``tau``: each member's; 0 leaves its
        rows)."""
        with torch.no_grad():
            t = tau.to(device=self.params.device, dtype=self.params.dtype)[self.member]
            self.targets.lerp_(self.params.detach(), t[:, None])


def _shapes(algos: Sequence[MATD3], kind: str, keys: list[Net]) -> list[Shape]:
    """One :class:`Shape` per network shape among ``keys``."""
    by: dict[object, list[Net]] = {}
    for a, k in keys:
        by.setdefault(shape_key(network(algos[0], kind, a, k)), []).append((a, k))
    return [Shape(algos, kind, ks) for ks in by.values()]


class Group:
    """A group's members (one shape key) and their networks stacked, :class:`Shape` by shape."""

    def __init__(self, algos: Sequence[MATD3]):
        self.algos = list(algos)
        first = algos[0]
        self.learners = first.learners
        for algo in self.algos:
            for opt in [*algo.actor_opts.values(), *algo.critic_opts.values()]:
                g = opt.param_groups[0]
                if (type(opt) is not torch.optim.Adam or len(opt.param_groups) != 1
                        or tuple(g["betas"]) != BETAS or g["eps"] != EPS or g["weight_decay"]
                        or g["amsgrad"] or g["maximize"]):
                    raise ValueError("members learn together with torch's Adam at its default "
                                     "options only")
        self.index = {id(a): j for j, a in enumerate(self.algos)}
        self.shapes = {
            "actor": _shapes(algos, "actor", [(a, 0) for a in self.learners]),
            "critic": _shapes(algos, "critic", [(a, k) for a in self.learners
                                                for k in range(len(first.critics[a]))])}
        self.held = [self._objects(a) for a in self.algos]

    def _objects(self, algo: MATD3) -> list[object]:
        """What a member's stacked state hangs on: its networks, targets, optimizers and their
        state, and where its first weight lives."""
        out: list[object] = []
        for a in self.learners:
            out += [algo.actors[a], algo.actor_targets[a], *algo.critics[a],
                    *algo.critic_targets[a], algo.actor_opts[a], algo.actor_opts[a].state,
                    algo.critic_opts[a], algo.critic_opts[a].state]
        out.append(algo.actor_opts[self.learners[0]].param_groups[0]["params"][0].data_ptr())
        return out

    def holds(self, algos: Sequence[MATD3]) -> bool:
        """Whether these members, in this order, are the group's and still hold its stacks."""
        return (len(algos) == len(self.algos)
                and all(a is b for a, b in zip(algos, self.algos, strict=True))
                and all(_same(self._objects(a), h) for a, h in zip(algos, self.held, strict=True)))

    @property
    def size(self) -> int:
        return len(self.algos)

    def rows(self, sh: Shape, members: Sequence[int]) -> torch.Tensor:
        """``[K]``: True on the rows of ``members`` (group indices)."""
        on = torch.zeros(self.size, dtype=torch.bool, device=sh.member.device)
        on[list(members)] = True
        return on[sh.member]

    def lr(self, sh: Shape) -> list[float]:
        """Each row's learning rate (its member's optimizer's, for that network's agent)."""
        return [float(optimizer(al, sh.kind, a).param_groups[0]["lr"])
                for al in self.algos for a, _ in sh.keys]


def _same(now: list[object], then: list[object]) -> bool:
    return len(now) == len(then) and all(
        x is y or (isinstance(x, int) and x == y) for x, y in zip(now, then, strict=True))
