"""Vector env pools: per-agent batched arrays, auto-reset, and the real final observation.

mpe2 ends every episode by *truncation* at ``max_cycles``. A pool auto-resets a finished env so
the next action can be chosen at once, but the transition of the finishing step must carry the
real final observation as ``next_obs``, never the first observation of the next episode. Hence
a step returns two observation sets: ``next_obs`` (to store) and ``obs`` (to act from next).
"""

from __future__ import annotations

import abc
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

import numpy as np

from evohpo.envs.spec import EnvSpec


class StepResult(NamedTuple):
    obs: dict[str, np.ndarray]         # [n, obs_dim]: what to act from next (reset obs where done)
    next_obs: dict[str, np.ndarray]    # [n, obs_dim]: the real observation after this step
    rewards: dict[str, np.ndarray]     # [n] float32
    terminated: dict[str, np.ndarray]  # [n] bool: the MDP ended, do not bootstrap
    truncated: dict[str, np.ndarray]   # [n] bool: cut by a time limit, bootstrap through it
    alive: dict[str, np.ndarray]       # [n] bool: the agent acted in this step (agents can leave)
    done: np.ndarray                   # [n] bool: the episode ended and the env was reset


# a pool's reset seeds: one int (env ``i`` gets ``seed + i``), one seed per env, or none
Seeds = int | Sequence[int] | None


class VectorPool(abc.ABC):
    """Interface shared by the sync and async pools (``step_async`` then ``step_wait``)."""

    spec: EnvSpec
    num_envs: int

    @abc.abstractmethod
    def reset(self, seed: Seeds = None) -> dict[str, np.ndarray]:
        """Reset every env (env ``i`` with ``seed + i``, or ``seed[i]`` given one seed per env);
        returns the first observations."""

    @abc.abstractmethod
    def step_async(self, actions: dict[str, np.ndarray]) -> None:
        """Send one action per env and agent; the envs step while the caller goes on."""

    @abc.abstractmethod
    def step_wait(self) -> StepResult:
        """The results of the step ``step_async`` started (finished envs already reset)."""

    def step(self, actions: dict[str, np.ndarray]) -> StepResult:
        self.step_async(actions)
        return self.step_wait()

    @abc.abstractmethod
    def get_state(self) -> list[dict[str, Any]]:
        """Every env's state as plain data (for checkpoints); see :meth:`EnvSlots.get_state`."""

    @abc.abstractmethod
    def set_state(self, states: Sequence[dict[str, Any]]) -> dict[str, np.ndarray]:
        """Rebuild the envs from :meth:`get_state`; returns the observations to act from."""

    def close(self) -> None:  # noqa: B027 - a hook: pools with workers or files release them here
        """Release the envs' resources (processes, shared memory); nothing by default."""

    def __enter__(self) -> VectorPool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def empty_step_arrays(spec: EnvSpec, n: int) -> dict[str, Any]:
    """Preallocated per-agent result arrays for ``n`` envs (plain numpy; the async pool maps
    them)."""
    return {
        "obs": {a: np.zeros((n, spec[a].obs_dim), np.float32) for a in spec.agents},
        "next_obs": {a: np.zeros((n, spec[a].obs_dim), np.float32) for a in spec.agents},
        "rewards": {a: np.zeros(n, np.float32) for a in spec.agents},
        "terminated": {a: np.zeros(n, bool) for a in spec.agents},
        "truncated": {a: np.zeros(n, bool) for a in spec.agents},
        "alive": {a: np.zeros(n, bool) for a in spec.agents},
        "done": np.zeros(n, bool),
    }


class EnvSlots:
    """Steps a list of PettingZoo envs and writes the results into given arrays.

    Used by the sync pool in process and by each async worker on its own share of the envs,
    so both pools have exactly the same semantics.
    """

    def __init__(self, envs: Sequence[Any], spec: EnvSpec, out: dict[str, Any],
                 actions: dict[str, np.ndarray]):
        self.envs = list(envs)
        self.spec = spec
        self.out = out
        self.actions = actions

    def _write_obs(self, which: str, i: int, obs: dict[str, Any]) -> None:
        for a in self.spec.agents:
            o = obs.get(a)
            if o is None:
                self.out[which][a][i] = 0.0
            else:
                self.out[which][a][i] = o

    def reset(self, seeds: Sequence[int | None]) -> None:
        self.base_seeds = list(seeds)
        self.episodes = [0] * len(self.envs)
        self.logs: list[list[dict[str, Any]]] = [[] for _ in self.envs]
        for i, (env, s) in enumerate(zip(self.envs, seeds, strict=True)):
            obs, _ = env.reset(seed=s)
            self._write_obs("obs", i, obs)

    def get_state(self) -> list[dict[str, Any]]:
        """Each env's state as data: its seed, episode number and the actions of this episode.

        Every episode is reset with a seed derived from the env's seed and the episode number,
        so (seed, episode, actions) rebuilds the env exactly, whatever the env class is.
        """
        return [{"seed": s, "episode": e, "actions": list(log)}
                for s, e, log in zip(self.base_seeds, self.episodes, self.logs, strict=True)]

    def set_state(self, states: Sequence[dict[str, Any]]) -> None:
        """Rebuild every env from :meth:`get_state`'s data: reset with the episode's seed,
        replay."""
        if len(states) != len(self.envs):
            raise ValueError(f"env state for {len(states)} envs, but this pool holds "
                             f"{len(self.envs)}")
        self.base_seeds = [st["seed"] for st in states]
        self.episodes = [int(st["episode"]) for st in states]
        self.logs = [list(st["actions"]) for st in states]
        for i, env in enumerate(self.envs):
            if self.base_seeds[i] is None:
                raise ValueError("an env reset without a seed cannot be rebuilt")
            obs, _ = env.reset(seed=episode_seed(self.base_seeds[i], self.episodes[i]))
            for act in self.logs[i]:
                obs, *_ = env.step(act)
            self._write_obs("obs", i, obs)

    def step(self) -> None:
        spec, out = self.spec, self.out
        for i, env in enumerate(self.envs):
            self.current = i
            live = env.agents
            act = {}
            for a in live:
                if spec[a].discrete:
                    act[a] = int(self.actions[a][i, 0])
                else:  # a copy: the pool's action rows are overwritten by the next step
                    act[a] = self.actions[a][i].copy()
            self.logs[i].append(act)
            obs, rew, term, trunc, _ = env.step(act)
            for a in spec.agents:
                present = a in act
                out["alive"][a][i] = present
                out["rewards"][a][i] = rew.get(a, 0.0)
                out["terminated"][a][i] = bool(term.get(a, False))
                out["truncated"][a][i] = bool(trunc.get(a, False))
            self._write_obs("next_obs", i, obs)
            done = not env.agents or all(term.get(a, False) or trunc.get(a, False) for a in act)
            out["done"][i] = done
            if done:
                self.episodes[i] += 1
                self.logs[i] = []
                obs, _ = env.reset(seed=episode_seed(self.base_seeds[i], self.episodes[i]))
                self._write_obs("obs", i, obs)
            else:
                still = env.agents
                # an agent that left has nothing to observe: zeros, masked later
                for a in spec.agents:
                    out["obs"][a][i] = out["next_obs"][a][i] if a in still else 0.0


def action_arrays(spec: EnvSpec, n: int) -> dict[str, np.ndarray]:
    """Per-agent action arrays as the pools take them: [n, 1] for discrete, [n, dim] for Box."""
    return {a: np.zeros((n, 1 if spec[a].discrete else spec[a].act_dim), np.float32)
            for a in spec.agents}


def episode_seed(seed: int | None, episode: int) -> int | None:
    """The reset seed of an env's ``episode``-th episode (episode 0 uses the env's own seed)."""
    if seed is None or episode == 0:
        return seed
    return int(np.random.SeedSequence([seed, episode]).generate_state(1)[0])


def env_seeds(seed: Seeds, n: int) -> list[int | None]:
    """The first seed of each of ``n`` envs: ``seed + i`` (training pools), or ``seed[i]``
    (evaluation pools: :func:`evohpo.runtime.evaluate.scoring_seeds`)."""
    if seed is None or isinstance(seed, (int, np.integer)):
        return [None if seed is None else int(seed) + i for i in range(n)]
    seeds = [int(s) for s in seed]
    if len(seeds) != n:
        raise ValueError(f"{len(seeds)} seeds for a pool of {n} envs")
    return list(seeds)


class SyncPool(VectorPool):
    """All envs in this process, stepped one after another."""

    def __init__(self, env_fns: Sequence[Callable[[], Any]], spec: EnvSpec):
        self.spec = spec
        self.num_envs = len(env_fns)
        self._arrays = empty_step_arrays(spec, self.num_envs)
        self._actions = action_arrays(spec, self.num_envs)
        self._slots = EnvSlots([fn() for fn in env_fns], spec, self._arrays, self._actions)
        self._pending = False

    def reset(self, seed: Seeds = None) -> dict[str, np.ndarray]:
        self._slots.reset(env_seeds(seed, self.num_envs))
        return {a: v.copy() for a, v in self._arrays["obs"].items()}

    def step_async(self, actions: dict[str, np.ndarray]) -> None:
        if self._pending:
            raise RuntimeError("step_async called twice without step_wait")
        for a in self.spec.agents:
            self._actions[a][:] = actions[a].reshape(self._actions[a].shape)
        self._pending = True

    def step_wait(self) -> StepResult:
        if not self._pending:
            raise RuntimeError("step_wait called without step_async")
        self._pending = False
        try:
            self._slots.step()
        except Exception as e:  # a faulty env: say which, so the trainer can restart the pool
            from evohpo.errors import EnvError

            raise EnvError(f"env {self.spec.name!r}: env {self._slots.current} raised "
                           f"{type(e).__name__}: {e}") from e
        return copy_result(self._arrays)

    def get_state(self) -> list[dict[str, Any]]:
        return self._slots.get_state()

    def set_state(self, states: Sequence[dict[str, Any]]) -> dict[str, np.ndarray]:
        self._slots.set_state(states)
        return {a: v.copy() for a, v in self._arrays["obs"].items()}

    def render(self, index: int = 0) -> Any:
        return self._slots.envs[index].render()

    def close(self) -> None:
        for env in self._slots.envs:
            env.close()


def copy_result(arrays: dict[str, Any]) -> StepResult:
    """Copy the pool's live arrays into a StepResult the caller owns."""
    out: dict[str, Any] = {k: (v.copy() if isinstance(v, np.ndarray)
                               else {a: x.copy() for a, x in v.items()})
                           for k, v in arrays.items()}
    return StepResult(**out)
