"""N copies of one mpe2 world held as arrays and advanced in one numpy step.

mpe2 is the definition of truth: every formula below follows ``mpe2/_mpe_utils/core.py`` and
``simple_env.py`` operation for operation (same order of additions, same float32 action
arithmetic), so a batched env and an mpe2 env given the same state and actions agree to the
last bits, and chaotic contacts cannot blow small differences up. ``tests/test_batched.py``
proves it scenario by scenario.

Layout: entities are the agents followed by the landmarks, as in ``World.entities``;
``pos`` and ``vel`` are ``[n, entities, 2]`` float64, ``c`` (utterances) ``[n, agents, dim_c]``.
"""

from __future__ import annotations

import abc
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from evohpo.errors import ConfigError

# mpe2's discrete movement actions: no-op, -x, +x, -y, +y
MOVES = np.array([[0.0, 0.0], [-1.0, 0.0], [1.0, 0.0], [0.0, -1.0], [0.0, 1.0]])
MDIM = 5  # dim_p * 2 + 1 movement choices / continuous movement entries


@dataclass(frozen=True)
class Body:
    """The static properties of one entity (mpe2's Entity/Agent attributes)."""

    size: float = 0.05
    movable: bool = False
    collide: bool = True
    mass: float = 1.0
    max_speed: float | None = None
    accel: float | None = None  # agents: action sensitivity (mpe2 uses 5.0 when None)
    silent: bool = False         # agents: cannot speak


def agent(**kw: Any) -> Body:
    return Body(**{"movable": True, **kw})


def landmark(**kw: Any) -> Body:
    return Body(**{"movable": False, **kw})


def _index(ids: Sequence[int]) -> slice | np.ndarray:
    """A slice where the indices are contiguous (views, no copies), else an index array."""
    if len(ids) and list(ids) == list(range(ids[0], ids[0] + len(ids))):
        return slice(ids[0], ids[0] + len(ids))
    return np.asarray(ids, dtype=np.intp)


class World:
    """Physics of ``n`` identical mpe2 worlds: action forces, contacts, integration, max speed."""

    dt = 0.1
    damping = 0.25
    contact_force = 1e2
    contact_margin = 1e-3

    def __init__(self, n: int, agents: Sequence[Body], landmarks: Sequence[Body], dim_c: int):
        bodies = [*agents, *landmarks]
        self.n, self.num_agents, self.num_landmarks = n, len(agents), len(landmarks)
        self.agent_bodies, self.dim_c = list(agents), dim_c
        self.size = np.array([b.size for b in bodies])
        self.pos = np.zeros((n, len(bodies), 2))
        self.vel = np.zeros((n, len(bodies), 2))
        self.c = np.zeros((n, len(agents), dim_c))
        moving = [i for i, b in enumerate(bodies) if b.movable]
        if any(i >= len(agents) for i in moving):
            raise ValueError("only agents can be movable")
        self.moving = _index(moving) if moving else None
        self.mass = np.array([bodies[i].mass for i in moving])[:, None]
        speeds = [bodies[i].max_speed for i in moving]
        self.max_speed = (None if all(s is None for s in speeds)
                          else np.array([np.inf if s is None else s for s in speeds]))
        self.sensitivity = np.array([5.0 if b.accel is None else b.accel for b in agents])
        # contact forces act between colliding entities; a pair of two fixed ones changes nothing
        ci = [i for i, b in enumerate(bodies) if b.collide]
        if not any(bodies[i].movable for i in ci) or len(ci) < 2:
            ci = []
        self.colliders = np.asarray(ci, dtype=np.intp)
        sz = self.size[self.colliders]
        self.dist_min = sz[:, None] + sz[None, :]
        self.speakers = _index([i for i, b in enumerate(agents) if not b.silent])

    def contact_forces(self, force: np.ndarray) -> None:
        """Add mpe2's soft contact forces into ``force`` [n, agents, 2] (only agents can move).

        mpe2 adds each entity's contact forces one pair at a time in increasing partner order
        (``p_force[a] = f_a + p_force[a]``); the loop over partners below does the same.
        """
        ci = self.colliders
        p = self.pos[:, ci]
        delta = p[:, :, None, :] - p[:, None, :, :]  # [n, K, K, 2]: pos_a - pos_b
        dist = np.sqrt(np.square(delta[..., 0]) + np.square(delta[..., 1]))
        k = self.contact_margin
        with np.errstate(divide="ignore", invalid="ignore"):
            pen = np.logaddexp(0, -(dist - self.dist_min) / k) * k
            f = self.contact_force * delta / dist[..., None] * pen[..., None]
        eye = np.eye(len(ci), dtype=bool)
        f[:, eye] = 0.0  # no force on itself (0/0 above)
        movers = np.flatnonzero(ci < self.num_agents)
        for b in range(len(ci)):
            force[:, ci[movers]] += f[:, movers, b]

    def step(self, u: np.ndarray, c_act: np.ndarray) -> None:
        """Advance every world one step: ``u`` [n, agents, 2] forces from actions, ``c_act``
        utterances."""
        if self.moving is not None:
            m = self.moving
            force = u.copy() if self.colliders.size else u
            if self.colliders.size:
                self.contact_forces(force)
            # explicit Euler, in mpe2's order: position with the old velocity, then damping, force
            pos, vel = self.pos[:, m], self.vel[:, m]
            pos += vel * self.dt
            vel = vel * (1 - self.damping)
            vel += (force[:, m] / self.mass) * self.dt
            if self.max_speed is not None:
                speed = np.sqrt(np.square(vel[..., 0]) + np.square(vel[..., 1]))
                fast = speed > self.max_speed
                if fast.any():
                    scale = np.where(fast, speed, 1.0)
                    vel = np.where(fast[..., None],
                                   vel / scale[..., None] * self.max_speed[:, None], vel)
            self.pos[:, m] = pos
            self.vel[:, m] = vel
        # utterances are set directly (mpe2 sets no communication noise in any scenario)
        if self.dim_c:
            self.c[:, self.speakers] = c_act[:, self.speakers]


# ----------------------------------------------------------------------------- helpers

def dist(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Euclidean distance over the last axis (2), as mpe2 computes it: sqrt(sum(square(a - b)))."""
    d = a - b
    return np.sqrt(np.square(d[..., 0]) + np.square(d[..., 1]))


def draw(gens: Sequence[np.random.Generator], fn: Any) -> np.ndarray:
    """``fn(g)`` for each env's generator, stacked: [len(gens), ...]."""
    return np.array([fn(g) for g in gens])


def flat(x: np.ndarray) -> np.ndarray:
    return x.reshape(x.shape[0], -1)


def nearest(rel: np.ndarray, k: int, *values: np.ndarray) -> list[np.ndarray]:
    """mpe2's partial observability: the ``k`` nearest of ``rel`` [n, M, 2] (closest first),
    with the matching rows of each of ``values`` [n, M, d]; slots past M are zeros."""
    n, m = rel.shape[:2]
    order = np.argsort(np.sqrt(np.square(rel[..., 0]) + np.square(rel[..., 1])), axis=1,
                       kind="stable")[:, :k]
    out = []
    for x in (rel, *values):
        got = np.take_along_axis(x, order[..., None], axis=1)
        if m < k:
            got = np.concatenate([got, np.zeros((n, k - m, x.shape[2]))], axis=1)
        out.append(got)
    return out


def others_index(n_agents: int) -> np.ndarray:
    """[agents, agents - 1]: for each agent, the other agents in mpe2's order."""
    return np.array([[o for o in range(n_agents) if o != j] for j in range(n_agents)],
                    dtype=np.intp)


def relative(p: np.ndarray, targets: np.ndarray) -> np.ndarray:
    """[n, agents, M, 2]: ``targets`` [n, M, 2] relative to each agent of ``p`` [n, agents, 2]."""
    return targets[:, None, :, :] - p[:, :, None, :]


def nearest_per_agent(rel: np.ndarray, k: int, *values: np.ndarray) -> list[np.ndarray]:
    """:func:`nearest` for every agent at once: rel [n, agents, M, 2], values [n, agents, M, d]."""
    n, a, m = rel.shape[:3]
    got = nearest(rel.reshape(n * a, m, 2), k, *(v.reshape(n * a, m, -1) for v in values))
    return [g.reshape(n, a, k, -1) for g in got]


def bound_penalty(x: np.ndarray) -> np.ndarray:
    """simple_tag / simple_world_comm's penalty for leaving the screen, per coordinate |x|."""
    with np.errstate(over="ignore"):
        far = np.minimum(np.exp(2 * x - 2), 10)
    return np.where(x < 0.9, 0.0, np.where(x < 1.0, (x - 0.9) * 10, far))


COMMON_KWARGS: dict[str, Any] = {"max_cycles": 25, "continuous_actions": False, "render_mode": None,
                                 "dynamic_rescaling": True, "benchmark_data": False}


class Scenario(abc.ABC):
    """One mpe2 scenario for ``n`` envs. Subclasses build the world and define reset,
    observations, rewards (and termination); this base decodes actions exactly as mpe2 does.

    ``params`` lists the scenario's own constructor keywords with mpe2's defaults; the common
    ones (max_cycles, continuous_actions, ...) are added here. ``dynamic_rescaling`` and
    ``benchmark_data`` only affect rendering and infos, which the pool does not expose.
    """

    mpe2_module: ClassVar[str]
    params: ClassVar[dict[str, Any]] = {}
    state_arrays: ClassVar[tuple[str, ...]] = ()  # the scenario's own per-env arrays
    state_lists: ClassVar[tuple[str, ...]] = ()   # per-env Python objects (lists of length n)
    agents: tuple[str, ...]
    world: World

    def __init__(self, n: int, **kwargs: Any):
        allowed = {**COMMON_KWARGS, **self.params}
        unknown = sorted(set(kwargs) - set(allowed))
        if unknown:
            raise ConfigError(f"env.kwargs {unknown} are not taken by {self.mpe2_module}; "
                              f"it takes {', '.join(allowed)}")
        kw = {**allowed, **kwargs}
        self.n = n
        self.kw = kw
        self.max_cycles = int(kw["max_cycles"])
        self.continuous = bool(kw["continuous_actions"])
        self.build(kw)
        self.u = np.zeros((n, self.world.num_agents, 2))
        self.c_act = np.zeros((n, self.world.num_agents, self.world.dim_c))
        self._groups = self._action_groups()

    # ------------------------------------------------------------------ subclass interface
    @abc.abstractmethod
    def build(self, kw: dict[str, Any]) -> None:
        """Make ``self.agents`` and ``self.world`` (its bodies and their constant properties)."""

    @abc.abstractmethod
    def reset(self, idx: np.ndarray, gens: Sequence[np.random.Generator]) -> None:
        """Start new episodes in the envs ``idx``; ``gens[k]`` is env ``idx[k]``'s generator.

        Each env draws from its own generator with the same calls, in the same order, as
        mpe2's ``reset_world`` (see :func:`draw`), so a batched env and an mpe2 env reset
        with the same seed start from the same state.
        """

    @abc.abstractmethod
    def observe(self) -> dict[str, np.ndarray]:
        """Every agent's observation, [n, obs_dim] float32."""

    @abc.abstractmethod
    def rewards(self) -> dict[str, np.ndarray]:
        """Every agent's reward for the step just taken, [n] float64."""

    def terminal(self) -> np.ndarray | None:
        """[n] bool where the scenario ends the episode early; None where it never does."""
        return None

    def post_step(self) -> None:  # noqa: B027 - a hook: most scenarios have nothing here
        """Scenario logic between physics and rewards (collect_treasure's pickups)."""

    def write_mpe2(self, i: int, env: Any) -> None:
        """Put env ``i``'s state into an mpe2 raw env (for the differential test)."""
        world = env.world
        for j, a in enumerate(world.agents):
            a.state.p_pos = self.world.pos[i, j].copy()
            a.state.p_vel = self.world.vel[i, j].copy()
            a.state.c = self.world.c[i, j].copy()
        for j, lm in enumerate(world.landmarks):
            lm.state.p_pos = self.world.pos[i, self.world.num_agents + j].copy()
            lm.state.p_vel = self.world.vel[i, self.world.num_agents + j].copy()

    # ------------------------------------------------------------------ actions
    def action_size(self, j: int) -> int:
        """Discrete(n) or Box(n) size of agent ``j``, as SimpleEnv.__init__ computes it."""
        b = self.world.agent_bodies[j]
        size = MDIM if b.movable else (0 if self.continuous else 1)
        if not b.silent:
            size = size + self.world.dim_c if self.continuous else size * self.world.dim_c
        return size

    def _action_groups(self) -> list[tuple[slice, bool, bool, int]]:
        """Runs of neighbouring agents with the same action layout, decoded together."""
        groups: list[tuple[slice, bool, bool, int]] = []
        bodies = self.world.agent_bodies
        for j, b in enumerate(bodies):
            key = (b.movable, b.silent, self.action_size(j))
            if groups and groups[-1][1:] == key:
                groups[-1] = (slice(groups[-1][0].start, j + 1), *key)
            else:
                groups.append((slice(j, j + 1), *key))
        return groups

    def decode(self, actions: dict[str, np.ndarray]) -> None:
        """Actions -> forces ``u`` and utterances ``c_act``, as SimpleEnv._set_action does.

        Continuous: clipped to [0, 1] (mpe2's ClipOutOfBoundsWrapper); force = (right - left,
        up - down) computed in float32 like mpe2, times the sensitivity. Discrete: an index
        ``move + 5 * word`` for agents that move and speak.
        """
        dim_c = self.world.dim_c
        for sl, movable, silent, size in self._groups:
            names = self.agents[sl]
            if self.continuous:
                x = (actions[names[0]].reshape(self.n, 1, -1) if len(names) == 1 else
                     np.stack([actions[a].reshape(self.n, -1) for a in names], axis=1))
                x = np.clip(x.astype(np.float32, copy=False), np.float32(0), np.float32(1))
                if x.shape[2] != size:
                    raise ValueError(f"actions of {names[0]} have {x.shape[2]} entries; "
                                     f"expected {size}")
                off = 0
                if movable:
                    self.u[:, sl, 0] = x[..., 2] - x[..., 1]
                    self.u[:, sl, 1] = x[..., 4] - x[..., 3]
                    self.u[:, sl] *= self.world.sensitivity[sl, None]
                    off = MDIM
                if not silent:
                    self.c_act[:, sl] = x[..., off:off + dim_c]
            else:
                k = (actions[names[0]].reshape(self.n, 1) if len(names) == 1 else
                     np.stack([actions[a].reshape(self.n) for a in names], axis=1)).astype(np.int64)
                if k.size and (k.min() < 0 or k.max() >= size):
                    raise ValueError(f"discrete actions of {', '.join(names)} must lie in "
                                     f"[0, {size})")
                if movable:
                    self.u[:, sl] = MOVES[k % MDIM] * self.world.sensitivity[sl, None]
                    k = k // MDIM
                if not silent:
                    self.c_act[:, sl] = np.eye(dim_c)[k]

    def step(self, actions: dict[str, np.ndarray]) -> None:
        self.decode(actions)
        self.world.step(self.u, self.c_act)
        self.post_step()

    # ------------------------------------------------------------------ state as data
    def state_names(self) -> tuple[str, ...]:
        return ("world.pos", "world.vel", "world.c", *self.state_arrays)

    def get_array(self, name: str) -> np.ndarray:
        obj: Any = self
        for part in name.split("."):
            obj = getattr(obj, part)
        return obj


def split(x: np.ndarray, names: Sequence[str]) -> dict[str, np.ndarray]:
    """[n, agents, d] -> {agent: [n, d] float32}, one contiguous array per agent."""
    return {a: np.ascontiguousarray(x[:, j], dtype=np.float32) for j, a in enumerate(names)}
