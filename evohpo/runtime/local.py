"""The local runtime: one vector pool, one replay memory, the population acting in one pass.

How members share the pool: the pool's ``num_envs`` envs are split into equal, fixed slices, one
per member slot. Every vector step, each member picks actions for its own slice, all actions go
out in one ``step_async`` and every env advances at once. So every worker is busy on every step,
all members collect at the same rate (each member's ``evo_steps`` window ends on the same step),
and no episode is ever cut short at a window boundary: a member's replacement simply takes over
its slot's envs. Learning runs between ``step_async`` and ``step_wait``, overlapping the envs.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import torch

from evohpo.algos import Algorithm
from evohpo.algos.acting import PopulationActor
from evohpo.algos.base import Actions
from evohpo.algos.buffer import ReplayBuffer
from evohpo.algos.explore import Part, explore
from evohpo.algos.fused import PopulationLearner
from evohpo.algos.onpolicy import sample
from evohpo.algos.registry import on_policy
from evohpo.config import Config
from evohpo.devices import auto_choice, resolve_device
from evohpo.envs import VectorPool, make_pool
from evohpo.envs.heuristics import Scripted
from evohpo.envs.pool import StepResult
from evohpo.envs.spec import EnvSpec, Policy
from evohpo.errors import EnvError
from evohpo.evolve.member import Member
from evohpo.logs.loggers import Logger
from evohpo.runtime import Opponent, Runtime
from evohpo.runtime.clock import on_tick, steps_owed
from evohpo.runtime.evaluate import Lineup, Score, episode_returns, eval_pool
from evohpo.runtime.memory import check_memory, describe, replay_capacity
from evohpo.runtime.rollouts import Rollouts, member_rows


def nonfinite_weights(algo: Algorithm) -> str | None:
    """Where the first NaN/inf weight of a member's actors or critics is, or None."""
    nets = [(f"{a} actor", n) for a, n in algo.actors.items()]
    nets += [(f"{a} critic {i}", c) for a, cs in algo.critics.items() for i, c in enumerate(cs)]
    for where, net in nets:
        for name, p in net.named_parameters():
            if not bool(torch.isfinite(p).all()):
                return f"{where} {name}"
    return None


class LocalRuntime(Runtime):
    def __init__(self, cfg: Config, spec: EnvSpec, log: Logger, pool_seed: int,
                 fitness_agents: list[str], run_dir: Path | None = None):
        super().__init__(cfg, spec, log, pool_seed, fitness_agents, run_dir)
        self.device = resolve_device(cfg)
        if cfg.device == "auto" and self.device.type == "cpu" and torch.cuda.is_available():
            log.message(auto_choice(cfg))
        self.pool: VectorPool = self.make_train_pool()
        # the same backend as training: a batched pool plays the episodes a PettingZoo pool would
        self.eval_pool = eval_pool(cfg, spec, cfg.eval.episodes)
        # on-policy members learn from rollouts of their own; the others share a replay memory
        self.rollouts = Rollouts() if on_policy(cfg) else None
        self.pick = explore if self.rollouts is None else sample
        self.buffer: ReplayBuffer | None = None
        if self.rollouts is None:
            capacity = replay_capacity(cfg)  # no more than the budget can fill
            check_memory(spec, capacity, self.next_actions)
            self.buffer = ReplayBuffer(spec, capacity, self.device, self.next_actions)
        self.actor = PopulationActor(spec)
        self.learner = PopulationLearner()  # keeps the groups' stacks between rounds
        # one per team, each acting for its own agents only
        self.team_actors = [PopulationActor(dataclasses.replace(spec, agents=agents))
                            for _, agents in self.teams or []]
        self.env_steps = 0  # the population's, while collecting (drives the learning delay)

    def make_train_pool(self) -> VectorPool:
        e = self.cfg.env
        return make_pool(e.name, e.kwargs, e.num_envs, e.pool, self.spec, e.workers,
                         e.worker_timeout, e.backend)

    def start(self) -> None:
        if self.buffer is not None:
            self.log.message(describe(self.cfg, self.buffer.nbytes))
        if self.obs is None:  # a restored runtime has its envs and observations back already
            self.obs = self.pool.reset(seed=self.pool_seed)

    # ----------------------------------------------------------------------------- collecting
    def collect(self, n: int, env_steps: int, generation: int,
                stop: Callable[[], bool] = lambda: False) -> int:
        self.env_steps = env_steps
        taken = 0
        while taken < n and not stop():
            taken += self.step()  # a step lost to an env failure is taken again
        return taken

    def step(self) -> bool:
        """One vector step: act, dispatch, learn while the envs run, store. False if it was lost.

        On-policy members store the step in their rollouts and learn after it, once a rollout is
        full: the next action comes from the policy that learned."""
        obs, ph = self.obs, self.phases  # the rest of a step is the collect phase's
        assert obs is not None, "start() resets the pool before stepping"
        with ph("act"):
            env_actions, stored = self.act(obs)
        try:
            self.pool.step_async(env_actions)
            if self.rollouts is None:
                with ph("learn"):
                    self.learn()  # overlaps the envs' step; sees the buffer as of the last step
            res = self.pool.step_wait()
        except EnvError as e:
            self.restart_pool(e)  # this step's transitions are lost, never stored as if complete
            return False
        with ph("store"):
            self.store(obs, stored, res)
        if self.rollouts is not None:
            self.learn_rollouts()
        return True

    def store(self, obs: dict[str, np.ndarray], stored: dict[str, np.ndarray],
              res: StepResult) -> None:
        """A step's transitions into the replay memory (or the rollouts), and its counts."""
        rewards = (res.rewards if self.shaping is None
                   else self.shaping(obs, res.rewards, res.next_obs, res.terminated))
        if self.rollouts is not None:
            self.rollouts.add(obs, stored, rewards, res.next_obs, res.terminated, res.alive,
                              res.done)
        else:
            # what the policies that played each env do next (the other teams' next actions in
            # the critics' targets): at the real next observation, without exploration noise
            nxt = None
            if self.next_actions:
                with self.phases("act"):
                    nxt = self.act(res.next_obs, noise=False)[1]
            assert self.buffer is not None
            self.dropped += self.buffer.add(obs, stored, rewards, res.next_obs, res.terminated,
                                            res.alive, nxt)
        self.track_episodes(res)
        self.obs = res.obs
        self.count_steps()

    def act(self, obs: dict[str, np.ndarray], noise: bool = True
            ) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
        """Each member acts, with exploration (unless not ``noise``), on its own slice of the
        pool (all in one pass). On a game of several teams, each slot's member of each team acts
        for that team."""
        def rngs(playing: list[Member]) -> list[np.random.Generator | None]:
            return [m.rng if noise else None for m in playing]

        if self.slots is None:
            env_act, stored = self.actor.act([m.algo for m in self.members], rngs(self.members),
                                             obs, self.done, self.pick)
        else:
            env_act, stored = {}, {}
            for t, actor in enumerate(self.team_actors):
                playing = [self.members[slot[t]] for slot in self.slots]
                e, s = (actor.act([m.algo for m in playing], rngs(playing), obs, self.done,
                                  self.pick)
                        if self.opponents is None
                        else self.act_with_past(t, actor, playing, obs, noise))
                env_act.update(e)
                stored.update(s)
        for a in self.spec.agents:  # a policy gone NaN must not drive the envs into NaN states
            if not np.isfinite(env_act[a]).all():
                sp = self.spec[a]
                for x in (env_act[a], stored[a]):
                    np.nan_to_num(x, copy=False, nan=sp.low, posinf=sp.high, neginf=sp.low)
        return env_act, stored

    def act_with_past(self, t: int, actor: PopulationActor, playing: list[Member],
                      obs: dict[str, np.ndarray], noise: bool = True) -> Actions:
        """Team ``t``'s actions when the scripted policy plays the second half of some slots
        (``Runtime.place``): there it acts, without exploration; elsewhere the slot's member
        (one part over the whole slot where it plays every env, so that its OU noise keeps one
        state)."""
        assert self.opponents is not None
        k, h = self.k, self.k // 2
        algos: list[Algorithm] = []
        parts: list[Part] = []
        scripted: list[Scripted] = []
        scripted_rows: list[np.ndarray] = []
        for j, (m, (live, other)) in enumerate(zip(playing, self.opponents, strict=True)):
            rows, first, second = (slice(j * k, (j + 1) * k), slice(j * k, j * k + h),
                                   slice(j * k + h, (j + 1) * k))
            rng = m.rng if noise else None
            algos += [m.algo, m.algo]
            if live == t or other is None:
                parts.append(Part(m.algo, rng, rows, self.done[rows]))
            else:  # its rows are overwritten below
                parts.append(Part(m.algo, rng, first, self.done[first]))
                scripted.append(other)
                scripted_rows.append(np.arange(second.start, second.stop))
        env_act, stored = explore(actor.spec, actor.outputs(algos, obs, h), parts)
        if scripted:  # one call over all its rows (a rule reads one row of its own agent's obs)
            policy = scripted[0]
            assert all(p is policy for p in scripted), "one scripted policy per runtime"
            idx = np.concatenate(scripted_rows)
            with self.phases("scripted"):
                e, st = policy.act({a: obs[a][idx] for a in actor.spec.agents})
            for a in actor.spec.agents:
                env_act[a][idx], stored[a][idx] = e[a], st[a]
        return env_act, stored

    def learn(self) -> None:
        """On the population's learn ticks (:mod:`evohpo.runtime.clock`) every member takes the
        gradient steps it owes, from the shared memory: round ``r`` holds every member that owes
        more than ``r``, and takes its steps together
        (:class:`~evohpo.algos.fused.PopulationLearner`), each member on its own batch."""
        if not on_tick(self.env_steps // self.cfg.env.num_envs, self.members, self.k):
            return  # between ticks each member's learn_acc keeps what it owes
        ready = self.env_steps >= self.cfg.evolution.learning_delay
        buffer = self.buffer
        assert buffer is not None, "off-policy members learn from the replay memory"
        owed = steps_owed(self.members, self.cfg.algo.gradient_steps,
                          [ready and len(buffer) >= m.hp.batch_size for m in self.members])
        for r in range(max(owed, default=0)):
            who = [j for j, n in enumerate(owed) if n > r and not self.members[j].diverged]
            if not who:
                break
            ms = [self.members[j] for j in who]
            # on a game of several teams, each team's groups timed apart
            timed = None if self.teams is None else (
                lambda group, ms=ms: self.phases(self.learning(ms[group[0]])))
            got = self.learner.learn([m.algo for m in ms], buffer, [m.rng for m in ms],
                                     [m.algo for m in self.members], timed)
            for j, m, metrics in zip(who, ms, got, strict=True):
                self.learned(j, m, metrics)

    # ----------------------------------------------------------------------------- on-policy
    def place(self, members: list[Member], slots: list[list[int]] | None = None,
              opponents: list[tuple[int, Opponent]] | None = None) -> None:
        super().place(members, slots, opponents)
        if self.rollouts is not None:
            self.rollouts.place(len(self.members))

    def learn_rollouts(self, finish: bool = False) -> None:
        """On-policy members with a full rollout (``finish``: any) learn from it."""
        assert self.rollouts is not None
        ready = self.env_steps >= self.cfg.evolution.learning_delay
        rows = member_rows(len(self.members), self.k, self.slots)
        with self.phases("learn"):
            self.rollouts.learn(self.members, rows, ready, self.learned, finish,
                                lambda m: self.phases(self.learning(m)))

    def finish_window(self) -> None:
        if self.rollouts is not None:
            self.learn_rollouts(finish=True)

    def track_episodes(self, res: StepResult) -> None:
        self.ep_return += sum(res.rewards[a] for a in self.fitness_agents)
        self.done = res.done
        if res.done.any():
            for i in np.flatnonzero(res.done):
                self.train_returns.append(float(self.ep_return[i]))
            self.ep_return[res.done] = 0.0

    def count_steps(self) -> None:
        self.env_steps += self.cfg.env.num_envs
        for m in self.members:
            m.steps += self.k
            m.learn_acc += self.k
        if (self.env_steps // self.cfg.env.num_envs) % 16 == 0:
            self.log.progress(self.env_steps, {})

    def restart_pool(self, error: EnvError) -> None:
        """Replace a failed pool with fresh envs; past ``env.max_restarts`` failures, stop."""
        self.env_failed(error, "restarting the env pool with fresh envs")
        with contextlib.suppress(Exception):
            self.pool.close()
        self.pool = self.make_train_pool()
        # the run's count, not the session's: a resumed run's fresh envs play other episodes
        seed = int(np.random.SeedSequence([self.pool_seed, self.restarts]).generate_state(1)[0])
        self.obs = self.pool.reset(seed=seed)
        self.ep_return[:] = 0.0  # the cut episodes are not counted as returns
        self.done[:] = True      # and exploration noise restarts with the new episodes

    # ----------------------------------------------------------------------------- evaluating
    def scored_returns(self, lineup: Lineup | Policy, seed: int) -> dict[str, np.ndarray]:
        """:func:`~evohpo.runtime.evaluate.episode_returns` on the scoring envs, fresh ones
        where an env fails (:meth:`~evohpo.runtime.Runtime.scoring`)."""
        return self.scoring(lambda: episode_returns(lineup, self.eval_pool, seed),
                            self.fresh_scoring_envs)

    def fresh_scoring_envs(self) -> None:
        with contextlib.suppress(Exception):
            self.eval_pool.close()
        self.eval_pool = eval_pool(self.cfg, self.spec, self.cfg.eval.episodes)

    def evaluate(self, seed: int) -> list[Score]:
        """Mean return of complete, noise-free episodes on the evaluation envs (one per env)."""
        results = []
        for m in self.members:
            broken = nonfinite_weights(m.algo)
            if broken:
                self.mark_diverged(m, f"non-finite weights in {broken}")
            if m.diverged:  # the worst fitness: it is replaced at this selection
                results.append(Score.diverged(self.spec.agents))
            else:
                results.append(Score.of(self.scored_returns(m.algo, seed),
                                        self.fitness_agents))
        return results

    def play(self, matches: list[list[Member]], seed: int) -> list[dict[str, np.ndarray]]:
        assert self.teams is not None, "matches are between the teams' members"
        return [self.scored_returns([(m.algo, agents)
                                     for m, (_, agents) in zip(match, self.teams, strict=True)],
                                    seed) for match in matches]

    # ----------------------------------------------------------------------------- state
    def reset_envs(self, seed: int | None) -> dict[str, np.ndarray]:
        self.obs = self.pool.reset(seed=seed)
        return self.obs

    def pool_states(self) -> list[dict[str, Any]]:
        return self.pool.get_state()

    def set_pool_states(self, states: list[dict[str, Any]]) -> dict[str, np.ndarray]:
        self.obs = self.pool.set_state(states)
        return self.obs

    def buffer_state(self) -> dict[str, Any]:
        """The replay memory; on-policy: the rollouts being collected (a window stopped
        part-way)."""
        if self.rollouts is not None:
            return self.rollouts.state_dict()
        assert self.buffer is not None
        return self.buffer.state_dict()

    def load_buffer(self, state: dict[str, Any]) -> None:
        if self.rollouts is not None:
            self.rollouts.load_state_dict(state)
        elif self.buffer is not None:
            self.buffer.load_state_dict(state)

    def held(self) -> int:
        """Transitions the replay memory holds (on-policy: steps the rollouts hold)."""
        if self.rollouts is not None:
            return len(self.rollouts.steps)
        assert self.buffer is not None
        return len(self.buffer)

    def close(self) -> None:
        self.pool.close()
        self.eval_pool.close()
