"""Acting: actor outputs to env actions, for one member or the whole population in one pass.

Every vector step each member acts on its own slice of the pool. Done member by member, that is
population x agents small forward passes plus their noise and squashing, each a handful of
Python-level calls on arrays of a few rows: most of the loop's time once the envs are batched.
:class:`PopulationActor` does it per agent instead: the actors of members with the same shapes
are stacked and run as one batched matmul per layer, and the squashing, noise and clipping run
on the whole pool's rows at once. Only the random draws stay per member (each member explores
with its own generator, in the order :meth:`Algorithm.act` draws), so acting together gives
exactly the actions acting one by one gives. On the CPU the forward passes run in numpy (its
calls on arrays this small cost a fraction of torch's); on an accelerator they run in torch,
per member.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from evohpo.algos.base import Actions, Algorithm
from evohpo.algos.explore import Part, explore
from evohpo.algos.networks import MLP, numpy_activation
from evohpo.envs.spec import EnvSpec

Pick = Callable[[EnvSpec, dict[str, np.ndarray], list[Part]], Actions]


class _Stack:
    """One agent's actors of members with the same shapes, stacked: weights [G, in, out]."""

    def __init__(self, nets: list[MLP], algos: list[Algorithm]):
        self.nets, self.algos = nets, algos
        self.activation = nets[0].activation
        views = [net.numpy_views() for net in nets]
        # [G, out, in] (torch's layout) read transposed: each member's matmul is the one
        # forward_numpy does on its own weights, so the stacked actions are bitwise the same
        self._w = [np.stack([v[i][0].T for v in views]) for i in range(len(views[0]))]
        self.ws = [w.transpose(0, 2, 1) for w in self._w]
        self.bs = [np.stack([v[i][1] for v in views])[:, None, :] for i in range(len(views[0]))]
        self.versions = [algo.actor_version for algo in algos]

    def forward(self, x: np.ndarray) -> np.ndarray:
        """x [G, rows, in] -> [G, rows, out]."""
        for g, algo in enumerate(self.algos):
            if algo.actor_version != self.versions[g]:  # it learned: copy its new weights in
                for i, (w, b) in enumerate(self.nets[g].numpy_views()):
                    self._w[i][g] = w.T
                    self.bs[i][g, 0] = b
                self.versions[g] = algo.actor_version
        last = len(self.ws) - 1
        for i, (w, b) in enumerate(zip(self.ws, self.bs, strict=True)):
            x = np.matmul(x, w)
            x += b
            if i < last:
                x = numpy_activation(self.activation, x)
        return x


class PopulationActor:
    """Acts for the whole population on a pool split into equal slices, one per member in order.

    Caches the stacked actor weights; a member's slice of them is refreshed when its
    ``actor_version`` moves (it learned, was loaded or its weights were mutated) and the stacks are
    rebuilt when any member's actor is a different network object (a new member or clone, an
    architecture change): the cache holds the networks it stacked and compares by identity.
    """

    def __init__(self, spec: EnvSpec):
        self.spec = spec
        self._groups: dict[str, tuple[list[MLP], list[tuple[_Stack | None, list[int]]]]] = {}

    def act(self, algos: list[Algorithm], rngs: list[np.random.Generator | None],
            obs: dict[str, np.ndarray], done: np.ndarray | None = None,
            pick: Pick = explore) -> Actions:
        """Every member's actions on its slice; ``pick`` turns actor outputs into actions:
        off-policy exploration, or an on-policy learner's sampling."""
        n = next(iter(obs.values())).shape[0]
        k = n // len(algos)
        parts = [Part(algo, rng, slice(j * k, (j + 1) * k),
                      None if done is None else done[j * k:(j + 1) * k])
                 for j, (algo, rng) in enumerate(zip(algos, rngs, strict=True))]
        return pick(self.spec, self.outputs(algos, obs, k), parts)

    def outputs(self, algos: list[Algorithm], obs: dict[str, np.ndarray],
                k: int) -> dict[str, np.ndarray]:
        """Every member's raw actor outputs on its own ``k`` rows, per agent: [P * k, act_dim]."""
        outs: dict[str, np.ndarray] = {}
        cpu = all(algo.device.type == "cpu" for algo in algos)
        for a in self.spec.agents:
            if not cpu:
                outs[a] = np.concatenate([algo.policy_output(a, obs[a][j * k:(j + 1) * k])
                                          for j, algo in enumerate(algos)])
                continue
            x = np.ascontiguousarray(obs[a], np.float32).reshape(len(algos), k, -1)
            groups = self.groups(a, algos)
            if len(groups) == 1 and groups[0][0] is not None:
                outs[a] = groups[0][0].forward(x).reshape(len(algos) * k, -1)
                continue
            out = np.empty((len(algos), k, self.spec[a].act_dim), np.float32)
            for stack, members in groups:
                if stack is None:
                    j = members[0]
                    out[j] = algos[j].actors[a].forward_numpy(x[j])
                else:
                    out[members] = stack.forward(x[members])
            outs[a] = out.reshape(len(algos) * k, -1)
        return outs

    def groups(self, agent: str, algos: list[Algorithm]) -> list[tuple[_Stack | None, list[int]]]:
        """Members grouped by actor shape; a group of one runs on its own network (no stack)."""
        nets = [algo.actors[agent] for algo in algos]
        cached = self._groups.get(agent)
        if cached is not None and len(cached[0]) == len(nets) and all(
                c is net for c, net in zip(cached[0], nets, strict=True)):
            return cached[1]
        by_shape: dict[tuple[tuple[int, ...], str], list[int]] = {}
        for j, net in enumerate(nets):
            by_shape.setdefault((tuple(net.sizes()), net.activation), []).append(j)
        groups = [(_Stack([nets[j] for j in js], [algos[j] for j in js]) if len(js) > 1
                   else None, js) for js in by_shape.values()]
        self._groups[agent] = (nets, groups)  # holds the networks: their ids stay theirs
        return groups
