"""Checks of the config tree that involve more than one key (the loader runs them on every
load); checks that need the env's spec are in :mod:`evohpo.config.checks`."""

from __future__ import annotations

import dataclasses
import math

from evohpo.config.schema import Bound, Config
from evohpo.errors import ConfigError


def _on_policy() -> tuple[str, ...]:
    from evohpo.algos.switches import ON_POLICY

    return tuple(ON_POLICY)


def fit_num_envs(cfg: Config, notes: list[str] | None = None) -> Config:
    """``cfg`` with ``env.num_envs`` rounded up to the next multiple of what :func:`validate` asks
    (population.size, or twice it where scripted opponents take half of each member's envs).

    For a num_envs the user did not give (a preset's or the default), so that changing
    population.size alone works; a num_envs the user gave is checked as it is. ``notes`` gets a
    line saying what changed.
    """
    step = cfg.population.size * (2 if cfg.games.scripted_opponents else 1)
    n = -(-cfg.env.num_envs // step) * step
    if n == cfg.env.num_envs:
        return cfg
    if notes is not None:
        why = ("the same, even number of envs (games.scripted_opponents)"
               if step > cfg.population.size else "the same number of envs")
        notes.append(f"env.num_envs: {n} ({cfg.env.num_envs} rounded up to a multiple of {step}, "
                     f"so that each of the {cfg.population.size} members drives {why}); "
                     "set env.num_envs to choose")
    return dataclasses.replace(cfg, env=dataclasses.replace(cfg.env, num_envs=n))


def validate(cfg: Config) -> None:
    """Checks that involve more than one key."""
    pop = cfg.population.size
    if cfg.evolution.strategy == "tournament" and cfg.evolution.tournament_size > pop:
        raise ConfigError("config key 'evolution.tournament_size': "
                          f"{cfg.evolution.tournament_size} is larger than population.size "
                          f"({pop}); allowed 1..{pop}")
    if cfg.env.num_envs % pop:
        raise ConfigError(f"config key 'env.num_envs': {cfg.env.num_envs} must be a multiple of "
                          f"population.size ({pop}) so that every member drives the same number "
                          "of envs; e.g. "
                          f"{pop * max(1, round(cfg.env.num_envs / pop))}")
    if cfg.steps < cfg.env.num_envs:  # a run moves in whole steps of the pool
        raise ConfigError(f"config key 'steps': {cfg.steps:,} is less than one step of the "
                          f"pool's {cfg.env.num_envs} envs (env.num_envs); allowed: at least "
                          f"{cfg.env.num_envs}")
    if cfg.algo.batch_size > cfg.buffer.capacity:
        raise ConfigError(f"config key 'algo.batch_size': {cfg.algo.batch_size} is larger than "
                          f"buffer.capacity ({cfg.buffer.capacity})")
    if not cfg.algo.hidden:
        raise ConfigError(
            "config key 'algo.hidden': needs at least one hidden layer, e.g. [64, 64]")
    if any(h < 1 for h in cfg.algo.hidden):
        raise ConfigError(f"config key 'algo.hidden': {cfg.algo.hidden} has a width below 1")
    m = cfg.mutation
    if m.none + m.hyperparameters + m.weights + m.architecture + m.activation <= 0:
        raise ConfigError("config keys "
                          "'mutation.{none,hyperparameters,weights,architecture,activation}': "
                          "the probabilities sum to 0; give at least one a weight")
    a = m.arch
    if a.min_layers > a.max_layers:
        raise ConfigError(f"config key 'mutation.arch.min_layers': {a.min_layers} is above "
                          f"mutation.arch.max_layers ({a.max_layers})")
    if a.min_width > a.max_width:
        raise ConfigError(f"config key 'mutation.arch.min_width': {a.min_width} is above "
                          f"mutation.arch.max_width ({a.max_width})")
    if not a.node_steps:
        raise ConfigError(
            "config key 'mutation.arch.node_steps': needs at least one step, e.g. [16, 32]")
    if not a.activations:
        raise ConfigError("config key 'mutation.arch.activations': needs at least one "
                          "activation, e.g. [relu, elu]")
    if not m.factors or any(f <= 0 for f in m.factors):
        raise ConfigError(f"config key 'mutation.factors': {m.factors} must be positive "
                          "numbers, e.g. [0.8, 1.2]")
    for f in dataclasses.fields(m.bounds):
        b: Bound = getattr(m.bounds, f.name)
        if b.min > b.max:
            raise ConfigError(
                f"config key 'mutation.bounds.{f.name}': min {b.min} is above max {b.max}")
        if b.scale == "log" and b.min <= 0:
            raise ConfigError(f"config key 'mutation.bounds.{f.name}.scale': 'log' needs a "
                              f"positive min, not {b.min:g}; use scale: linear")
        whole = f.name in ("batch_size", "learn_step")
        if whole and (math.ceil(b.min) > math.floor(b.max) or b.min < 1):
            raise ConfigError(f"config key 'mutation.bounds.{f.name}': [{b.min}, {b.max}] must "
                              "hold a whole number of at least 1")
    rate = m.bounds.min_updates_per_step
    if rate.min < 0 or rate.max > 1:
        raise ConfigError(f"config key 'mutation.bounds.min_updates_per_step': [{rate.min:g}, "
                          f"{rate.max:g}] must lie within [0, 1]")
    if m.bounds.batch_size.min > cfg.buffer.capacity:  # the max is clipped at the capacity
        raise ConfigError("config key 'mutation.bounds.batch_size.min': "
                          f"{m.bounds.batch_size.min:g} is larger than buffer.capacity "
                          f"({cfg.buffer.capacity})")
    if cfg.env.backend == "batched":  # say it now, not when the trainer builds the pool
        from evohpo.envs import resolve_backend

        resolve_backend(cfg.env.name, cfg.env.kwargs, cfg.env.backend)
    w = cfg.logging.wandb
    if not w.project or any(c in w.project for c in '/\\#?%:'):
        raise ConfigError(f"config key 'logging.wandb.project': {w.project!r} is not a W&B "
                          "project name (non-empty, none of / \\ # ? % :)")
    dev = cfg.device
    if not (dev in ("auto", "cpu", "cuda") or (dev.startswith("cuda:") and dev[5:].isdigit())):
        raise ConfigError(
            f"config key 'device': {dev!r} is not one of 'auto', 'cpu', 'cuda', 'cuda:N'")
    d = cfg.distributed
    if d.backend == "ray" and dev.startswith("cuda:"):
        raise ConfigError(f"config key 'device': {dev!r} names a GPU, but Ray gives each actor "
                          "its own share of a GPU; use 'auto' or 'cuda' with "
                          "distributed.gpus_per_actor")
    value = cfg.games.scripted_opponents
    if cfg.algo.name in _on_policy():
        if value:
            raise ConfigError(f"config key 'games.scripted_opponents': {value} is for off-policy "
                              f"learners; {cfg.algo.name} learns only from what its own policy "
                              "played; set it to 0")
        if cfg.games.opponent_actions != "played":
            raise ConfigError(f"config key 'games.opponent_actions': "
                              f"{cfg.games.opponent_actions!r} models the other teams in "
                              f"off-policy critics; {cfg.algo.name} takes 'played'")
    if value and (cfg.env.num_envs // pop) % 2:
        raise ConfigError(f"config key 'games.scripted_opponents': {value} plays the scripted "
                          "heuristic in half of each member's envs, so env.num_envs / "
                          f"population.size ({cfg.env.num_envs} / {pop}) must be even; e.g. "
                          f"env.num_envs: {2 * cfg.env.num_envs}, or games.scripted_opponents: 0")
    if d.num_actors and (d.num_actors > pop or pop % d.num_actors):
        ok = [n for n in range(1, pop + 1) if pop % n == 0]
        raise ConfigError(f"config key 'distributed.num_actors': {d.num_actors} must divide "
                          f"population.size ({pop}) so that every actor holds the same number "
                          "of members; allowed 0 (auto), "
                          f"{', '.join(map(str, ok))}")
