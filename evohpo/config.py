"""A typed, frozen config tree loaded from YAML plus ``key.path=value`` overrides.

Every key is declared here with its type, its allowed range and a one-line doc. Unknown keys,
wrong types and out-of-range values raise :class:`ConfigError` naming the key, the value and
what is allowed. The resolved tree is written to the run directory and is the W&B run config.
"""

from __future__ import annotations

import dataclasses
import math
import types
import typing
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import yaml

from evohpo.errors import ConfigError


def _f(default: Any, doc: str, lo: float | None = None, hi: float | None = None,
       lo_open: bool = False) -> Any:
    """A config field with a doc string and an optional range [lo, hi] (or (lo, hi] if lo_open)."""
    meta = {"doc": doc, "lo": lo, "hi": hi, "lo_open": lo_open}
    if isinstance(default, (list, dict)):
        return field(default_factory=lambda: type(default)(default), metadata=meta)
    if dataclasses.is_dataclass(default):
        return field(default_factory=lambda: default, metadata=meta)
    return field(default=default, metadata=meta)


Activation = Literal["relu", "elu", "gelu", "tanh", "leaky_relu", "silu"]  # = evohpo.networks.ACTIVATIONS


@dataclass(frozen=True)
class EnvConfig:
    name: str = _f("simple_speaker_listener", "short mpe2 name (see `evohpo envs`) or module:factory")
    kwargs: dict[str, Any] = _f({}, "keyword arguments passed unchanged to the env's constructor")
    num_envs: int = _f(8, "training envs in the shared pool, split evenly between members", lo=1)
    backend: Literal["auto", "pettingzoo", "batched"] = _f(
        "auto", "pettingzoo: mpe2/PettingZoo envs in a pool; batched: every mpe2 env in one numpy step "
        "(same results, many times faster); auto: batched where the env has it")
    pool: Literal["sync", "async"] = _f("async", "pettingzoo backend: sync in process; async: subprocess workers")
    workers: int = _f(0, "async pool: worker processes (0 = one per CPU core, at most num_envs)", lo=0)
    worker_timeout: float = _f(60.0, "async pool: seconds to wait for a worker before failing", lo=0, lo_open=True)
    max_restarts: int = _f(3, "env pool failures (a worker crashed, hung or raised) survived before the run stops", lo=0)


@dataclass(frozen=True)
class AlgoConfig:
    name: Literal["maddpg", "matd3"] = _f("matd3", "maddpg, or matd3 (twin critics, delayed and smoothed)")
    hidden: list[int] = _f([64, 64], "hidden layer widths of actors and critics")
    activation: Activation = _f("relu", "hidden activation of actors and critics")
    lr_actor: float = _f(1e-3, "actor learning rate (Adam)", lo=0, lo_open=True)
    lr_critic: float = _f(1e-3, "critic learning rate (Adam)", lo=0, lo_open=True)
    gamma: float = _f(0.95, "discount factor", lo=0, hi=1)
    tau: float = _f(0.01, "polyak factor for target networks", lo=0, hi=1, lo_open=True)
    batch_size: int = _f(256, "transitions per gradient step", lo=1)
    learn_step: int = _f(50, "a member learns once per this many of its own env steps", lo=1)
    gradient_steps: int = _f(1, "gradient steps each time a member learns", lo=1)
    max_grad_norm: float | None = _f(0.5, "clip gradient norm (null: no clipping)", lo=0, lo_open=True)
    policy_delay: int | None = _f(None, "critic updates per actor update (null: 2 for matd3, 1 for maddpg)", lo=1)
    target_noise: float | None = _f(None, "target policy smoothing std (null: 0.1 for matd3, 0 for maddpg)", lo=0)
    target_noise_clip: float = _f(0.25, "clip of the target policy smoothing noise", lo=0)
    noise: Literal["gaussian", "ou"] = _f("gaussian", "exploration noise for continuous actions")
    expl_noise: float = _f(0.1, "exploration: noise std (continuous) or random-action probability (discrete)", lo=0, hi=1)
    ou_theta: float = _f(0.15, "Ornstein-Uhlenbeck mean reversion", lo=0)
    ou_dt: float = _f(0.01, "Ornstein-Uhlenbeck time step", lo=0, lo_open=True)
    gumbel_temperature: float = _f(1.0, "Gumbel-softmax temperature for discrete actions", lo=0, lo_open=True)


@dataclass(frozen=True)
class Bound:
    min: float = _f(0.0, "lower bound")
    max: float = _f(1.0, "upper bound")
    mutate: bool = _f(True, "whether hyperparameter mutation may change it")


@dataclass(frozen=True)
class HyperparamSpace:
    lr_actor: Bound = _f(Bound(1e-5, 1e-2), "bounds of lr_actor")
    lr_critic: Bound = _f(Bound(1e-5, 1e-2), "bounds of lr_critic")
    batch_size: Bound = _f(Bound(32, 1024), "bounds of batch_size (the max is clipped at buffer.capacity)")
    learn_step: Bound = _f(Bound(10, 400), "bounds of learn_step")
    tau: Bound = _f(Bound(1e-3, 0.1), "bounds of tau")
    expl_noise: Bound = _f(Bound(0.0, 0.5), "bounds of expl_noise")


@dataclass(frozen=True)
class ArchSpace:
    """Where architecture and activation mutations may go (mutation.arch.*).

    A network that starts outside [min, max] (algo.hidden) is only ever moved towards the range.
    """

    min_layers: int = _f(1, "fewest hidden layers remove_layer may leave", lo=1)
    max_layers: int = _f(3, "most hidden layers add_layer may make", lo=1)
    min_width: int = _f(16, "narrowest hidden layer remove_node may leave", lo=1)
    max_width: int = _f(256, "widest hidden layer add_node / add_layer may make", lo=1)
    node_steps: list[int] = _f([16, 32], "units one add_node / remove_node moves (one drawn; clipped at the bounds)",
                               lo=1)
    layer_prob: float = _f(0.2, "share of architecture mutations that add/remove a layer (the rest add/remove "
                                "nodes)", lo=0, hi=1)
    activations: list[Activation] = _f(["relu", "elu", "gelu", "tanh", "leaky_relu", "silu"],
                                       "activations an activation mutation may switch an agent's networks to")


@dataclass(frozen=True)
class MutationConfig:
    none: float = _f(0.2, "relative probability of no mutation", lo=0)
    hyperparameters: float = _f(0.4, "relative probability of an RL hyperparameter mutation", lo=0)
    weights: float = _f(0.2, "relative probability of Gaussian noise on actor weights", lo=0)
    architecture: float = _f(0.15, "relative probability of an architecture mutation (add/remove a layer or "
                                   "nodes in one agent's actor or critics; function-preserving growth)", lo=0)
    activation: float = _f(0.05, "relative probability of switching one agent's activation (actor and critics)",
                           lo=0)
    factors: list[float] = _f([0.8, 1.2], "multiplicative perturbation factors for hyperparameters")
    weight_noise_std: float = _f(0.05, "std of weight noise, relative to each tensor's std", lo=0, lo_open=True)
    weight_fraction: float = _f(0.1, "fraction of actor weights that receive noise", lo=0, hi=1, lo_open=True)
    bounds: HyperparamSpace = _f(HyperparamSpace(), "bounds of each mutable hyperparameter")
    arch: ArchSpace = _f(ArchSpace(), "bounds and steps of architecture and activation mutations")


@dataclass(frozen=True)
class PopulationConfig:
    size: int = _f(4, "members in the population", lo=1)


@dataclass(frozen=True)
class EvolutionConfig:
    evo_steps: int = _f(10_000, "env steps each member collects per evolution window", lo=1)
    tournament_size: int = _f(2, "members drawn per tournament", lo=1)
    elitism: bool = _f(True, "the best member survives unchanged")
    learning_delay: int = _f(2_000, "population env steps before anyone learns", lo=0)
    target_fitness: float | None = _f(None, "stop early once the best fitness reaches this")


@dataclass(frozen=True)
class EvalConfig:
    episodes: int = _f(8, "complete, noise-free episodes per member per evaluation", lo=1)
    fitness_agents: list[str] | None = _f(None, "agents whose returns are summed into fitness (null: all)")


@dataclass(frozen=True)
class BufferConfig:
    capacity: int = _f(1_000_000, "transitions kept in the shared replay memory", lo=1)


@dataclass(frozen=True)
class CheckpointConfig:
    enabled: bool = _f(True, "write checkpoints/latest.pt every generation and checkpoints/best.pt")
    buffer: bool = _f(True, "include the replay memory (turn off for huge buffers: resume then refills it)")


@dataclass(frozen=True)
class WandbConfig:
    """Weights & Biases (logging.wandb.*): off unless asked for, so a run needs no account."""

    mode: Literal["disabled", "offline", "online"] = _f(
        "disabled", "disabled: no W&B; offline: W&B run files in <run dir>/wandb, no account or network "
        "(upload later with `wandb sync`); online: stream to W&B (needs `wandb login` or WANDB_API_KEY)")
    project: str = _f("evohpo", "W&B project")
    entity: str | None = _f(None, "W&B user or team (null: your default entity)")
    group: str | None = _f(None, "W&B run group (null; `evohpo sweep` sets the sweep's name)")
    tags: list[str] = _f([], "W&B run tags")
    name: str | None = _f(None, "W&B run name (null: the run directory's name)")
    checkpoint: bool = _f(True, "log checkpoints/best.pt as a model artifact when the run ends")


@dataclass(frozen=True)
class LoggingConfig:
    console: bool = _f(True, "progress bar and one line per generation")
    jsonl: bool = _f(True, "metrics.jsonl and lineage.jsonl in the run directory")
    wandb: WandbConfig = _f(WandbConfig(), "Weights & Biases")


@dataclass(frozen=True)
class DistributedConfig:
    """Where the population runs (distributed.*): this process, or Ray actors (see evohpo.distributed)."""

    backend: Literal["local", "ray"] = _f(
        "local", "local: one process; ray: groups of members in Ray actors, each with its own envs, learning and "
        "replay copy; the driver selects, mutates, logs and checkpoints (pip install 'evohpo[ray]')")
    address: str | None = _f(None, "ray: cluster address HOST:PORT (or 'auto'); null: start a local Ray instance")
    num_actors: int = _f(0, "ray: actors (member groups); population.size must be a multiple; 0 = auto: as many "
                            "as the cluster's CPUs (GPUs) allow, at most population.size", lo=0)
    cpus_per_actor: float = _f(1.0, "ray: CPUs each actor asks for (also each job's CPUs in `evohpo sweep`)",
                               lo=0, lo_open=True)
    gpus_per_actor: float | None = _f(None, "ray: GPUs each actor asks for; a fraction shares a GPU (0.25: four "
                                            "actors per GPU); 0: the CPU; null: the cluster's GPUs shared evenly "
                                            "(at most one per actor), none if it has none or device is cpu", lo=0)
    max_actor_restarts: int = _f(3, "ray: lost actors (a crash, a lost node) recreated before the run stops", lo=0)


@dataclass(frozen=True)
class Config:
    seed: int = _f(0, "one seed for every random stream", lo=0)
    steps: int = _f(2_000_000, "budget: env steps for the whole population", lo=1)
    device: str = _f("auto", "auto, cpu, cuda or cuda:N")
    torch_threads: int = _f(0, "torch intra-op threads (0 = auto: one; raise it for large networks)", lo=0)
    env: EnvConfig = _f(EnvConfig(), "environment and vector pool")
    algo: AlgoConfig = _f(AlgoConfig(), "algorithm and its initial hyperparameters")
    population: PopulationConfig = _f(PopulationConfig(), "population")
    evolution: EvolutionConfig = _f(EvolutionConfig(), "evolution schedule and selection")
    mutation: MutationConfig = _f(MutationConfig(), "mutation operators and their probabilities")
    eval: EvalConfig = _f(EvalConfig(), "fitness evaluation")
    buffer: BufferConfig = _f(BufferConfig(), "replay memory")
    checkpoint: CheckpointConfig = _f(CheckpointConfig(), "checkpoints and resume")
    logging: LoggingConfig = _f(LoggingConfig(), "loggers")
    distributed: DistributedConfig = _f(DistributedConfig(), "where the population runs: local or Ray")


# ----------------------------------------------------------------------------- building

def _describe(tp: Any) -> str:
    origin = typing.get_origin(tp)
    if origin is Literal:
        return "one of " + ", ".join(repr(a) for a in typing.get_args(tp))
    if origin in (typing.Union, types.UnionType):
        return " or ".join(_describe(a) for a in typing.get_args(tp))
    if tp is type(None):
        return "null"
    if origin is list:
        return f"a list of {_describe(typing.get_args(tp)[0])}"
    if origin is dict:
        return "a mapping"
    if dataclasses.is_dataclass(tp):
        return "a mapping"
    return getattr(tp, "__name__", str(tp))


def _coerce(tp: Any, value: Any, key: str) -> Any:
    """Check ``value`` against the annotation ``tp``; return it converted, or raise ConfigError."""
    origin = typing.get_origin(tp)
    bad = ConfigError(f"config key '{key}': {value!r} is not {_describe(tp)}")
    if origin in (typing.Union, types.UnionType):
        args = typing.get_args(tp)
        if value is None and type(None) in args:
            return None
        for a in args:
            if a is type(None):
                continue
            try:
                return _coerce(a, value, key)
            except ConfigError:
                pass
        raise bad
    if origin is Literal:
        if value in typing.get_args(tp):
            return value
        from evohpo.errors import closest

        hint = closest(str(value), [str(a) for a in typing.get_args(tp)]) if isinstance(value, str) else ""
        raise ConfigError(f"config key '{key}': {value!r} is not {_describe(tp)}{hint}")
    if origin is list:
        if not isinstance(value, (list, tuple)):
            raise bad
        (inner,) = typing.get_args(tp)
        return [_coerce(inner, v, f"{key}[{i}]") for i, v in enumerate(value)]
    if origin is dict:
        if not isinstance(value, Mapping):
            raise bad
        return dict(value)
    if dataclasses.is_dataclass(tp):
        if not isinstance(value, Mapping):
            raise bad
        return build(tp, value, key)  # type: ignore[arg-type]
    if tp is bool:
        if isinstance(value, bool):
            return value
        if isinstance(value, str) and value.lower() in ("true", "false"):
            return value.lower() == "true"
        raise bad
    if tp is int:
        if isinstance(value, bool):
            raise bad
        if isinstance(value, int):
            return value
        if isinstance(value, float) and value.is_integer():
            return int(value)
        if isinstance(value, str):
            try:
                f = float(value)
            except ValueError:
                raise bad from None
            if f.is_integer():
                return int(f)
        raise bad
    if tp is float:
        if isinstance(value, bool):
            raise bad
        if isinstance(value, (int, float)):
            return float(value)
        if isinstance(value, str):  # YAML reads 3e-4 as a string
            try:
                return float(value)
            except ValueError:
                raise bad from None
        raise bad
    if tp is str:
        if isinstance(value, str):
            return value
        raise bad
    return value


def _check_range(f: dataclasses.Field, value: Any, key: str) -> None:
    lo, hi, lo_open = f.metadata.get("lo"), f.metadata.get("hi"), f.metadata.get("lo_open")
    if value is None or not isinstance(value, (int, float)) or isinstance(value, bool):
        return
    if value != value or value in (math.inf, -math.inf):
        raise ConfigError(f"config key '{key}': {value!r} is not a finite number")
    too_low = lo is not None and (value <= lo if lo_open else value < lo)
    too_high = hi is not None and value > hi
    if too_low or too_high:
        left = "(" if lo_open else "["
        allowed = f"{left}{lo if lo is not None else '-inf'}, {hi if hi is not None else 'inf'}]"
        raise ConfigError(f"config key '{key}': {value!r} is out of range; allowed {allowed}")


def _default_of(f: dataclasses.Field) -> Any:
    if f.default_factory is not dataclasses.MISSING:
        return f.default_factory()
    return f.default


def build(cls: type, data: Mapping[str, Any], prefix: str = "") -> Any:
    """Build the dataclass ``cls`` from ``data``, filling defaults; validate keys, types, ranges."""
    hints = typing.get_type_hints(cls)
    fields = {f.name: f for f in dataclasses.fields(cls)}
    for k in data:
        if k not in fields:
            from evohpo.errors import closest

            where = f"'{prefix}.{k}'" if prefix else f"'{k}'"
            raise ConfigError(f"unknown config key {where}{closest(str(k), list(fields))}; "
                              f"known keys here: {', '.join(fields)}")
    kwargs = {}
    for name, f in fields.items():
        key = f"{prefix}.{name}" if prefix else name
        if dataclasses.is_dataclass(hints[name]):
            # a section starts from the field's own default instance (e.g. each Bound's range),
            # not from the section class's bare defaults
            raw = data.get(name, {})
            if isinstance(raw, Mapping):
                raw = _deep_merge(to_dict(_default_of(f)), raw)
            value = _coerce(hints[name], raw, key)
        elif name in data:
            value = _coerce(hints[name], data[name], key)
        else:
            continue
        _check_range(f, value, key)
        if isinstance(value, list):
            for i, v in enumerate(value):
                _check_range(f, v, f"{key}[{i}]")
        kwargs[name] = value
    return cls(**kwargs)


def to_dict(obj: Any) -> Any:
    """The config as plain dicts and lists (for YAML, JSON and W&B)."""
    if dataclasses.is_dataclass(obj):
        return {f.name: to_dict(getattr(obj, f.name)) for f in dataclasses.fields(obj)}
    if isinstance(obj, list):
        return [to_dict(v) for v in obj]
    if isinstance(obj, dict):
        return {k: to_dict(v) for k, v in obj.items()}
    return obj


def _deep_merge(base: dict[str, Any], upd: Mapping[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for k, v in upd.items():
        if isinstance(v, Mapping) and isinstance(out.get(k), Mapping) and k != "kwargs":
            out[k] = _deep_merge(dict(out[k]), v)
        elif isinstance(v, Mapping) and isinstance(out.get(k), Mapping):  # env.kwargs merge too
            out[k] = {**out[k], **v}
        else:
            out[k] = v
    return out


def parse_override(text: str) -> dict[str, Any]:
    """'a.b.c=value' -> {'a': {'b': {'c': value}}}; the value is read as YAML."""
    if "=" not in text:
        raise ConfigError(f"--set {text!r}: expected dotted.key=value, e.g. algo.lr_actor=3e-4")
    key, raw = text.split("=", 1)
    key = key.strip()
    if not key or any(not part for part in key.split(".")):
        raise ConfigError(f"--set {text!r}: the key {key!r} is not a dotted path like algo.lr_actor")
    try:
        value = yaml.safe_load(raw) if raw.strip() else ""
    except yaml.YAMLError:
        value = raw
    out: dict[str, Any] = {}
    cur = out
    parts = key.split(".")
    for p in parts[:-1]:
        cur = cur.setdefault(p, {})
    cur[parts[-1]] = value
    return out


def read_yaml(path: str | Path) -> dict[str, Any]:
    p = Path(path)
    if p.is_dir():
        raise ConfigError(f"config file {str(p)!r} is a directory; give a YAML file")
    if not p.is_file():
        raise ConfigError(f"config file {str(p)!r} does not exist")
    try:
        data = yaml.safe_load(p.read_text())
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark is not None else ""
        raise ConfigError(f"config file {str(p)!r} is not valid YAML{where}") from None
    except (OSError, UnicodeDecodeError) as e:
        raise ConfigError(f"config file {str(p)!r} cannot be read: {e}") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError(f"config file {str(p)!r} must hold a mapping of keys, not {type(data).__name__}")
    return data


def load(layers: Sequence[Mapping[str, Any]]) -> Config:
    """Merge the layers (later wins) over the defaults, then build and cross-check."""
    merged: dict[str, Any] = {}
    for layer in layers:
        merged = _deep_merge(merged, layer)
    cfg: Config = build(Config, merged)
    validate(cfg)
    return cfg


def validate(cfg: Config) -> None:
    """Checks that involve more than one key."""
    pop = cfg.population.size
    if cfg.evolution.tournament_size > pop:
        raise ConfigError(f"config key 'evolution.tournament_size': {cfg.evolution.tournament_size} is larger "
                          f"than population.size ({pop}); allowed 1..{pop}")
    if cfg.env.num_envs % pop:
        raise ConfigError(f"config key 'env.num_envs': {cfg.env.num_envs} must be a multiple of population.size "
                          f"({pop}) so that every member drives the same number of envs; e.g. "
                          f"{pop * max(1, round(cfg.env.num_envs / pop))}")
    if cfg.algo.batch_size > cfg.buffer.capacity:
        raise ConfigError(f"config key 'algo.batch_size': {cfg.algo.batch_size} is larger than "
                          f"buffer.capacity ({cfg.buffer.capacity})")
    if not cfg.algo.hidden:
        raise ConfigError("config key 'algo.hidden': needs at least one hidden layer, e.g. [64, 64]")
    if any(h < 1 for h in cfg.algo.hidden):
        raise ConfigError(f"config key 'algo.hidden': {cfg.algo.hidden} has a width below 1")
    m = cfg.mutation
    if m.none + m.hyperparameters + m.weights + m.architecture + m.activation <= 0:
        raise ConfigError("config keys 'mutation.{none,hyperparameters,weights,architecture,activation}': "
                          "the probabilities sum to 0; give at least one a weight")
    a = m.arch
    if a.min_layers > a.max_layers:
        raise ConfigError(f"config key 'mutation.arch.min_layers': {a.min_layers} is above "
                          f"mutation.arch.max_layers ({a.max_layers})")
    if a.min_width > a.max_width:
        raise ConfigError(f"config key 'mutation.arch.min_width': {a.min_width} is above "
                          f"mutation.arch.max_width ({a.max_width})")
    if not a.node_steps:
        raise ConfigError("config key 'mutation.arch.node_steps': needs at least one step, e.g. [16, 32]")
    if not a.activations:
        raise ConfigError("config key 'mutation.arch.activations': needs at least one activation, e.g. [relu, elu]")
    if not m.factors or any(f <= 0 for f in m.factors):
        raise ConfigError(f"config key 'mutation.factors': {m.factors} must be positive numbers, e.g. [0.8, 1.2]")
    for f in dataclasses.fields(m.bounds):
        b: Bound = getattr(m.bounds, f.name)
        if b.min > b.max:
            raise ConfigError(f"config key 'mutation.bounds.{f.name}': min {b.min} is above max {b.max}")
        if f.name in ("batch_size", "learn_step") and (math.ceil(b.min) > math.floor(b.max) or b.min < 1):
            raise ConfigError(f"config key 'mutation.bounds.{f.name}': [{b.min}, {b.max}] must hold a "
                              "whole number of at least 1")
    if m.bounds.batch_size.min > cfg.buffer.capacity:  # the max is clipped at the capacity
        raise ConfigError(f"config key 'mutation.bounds.batch_size.min': {m.bounds.batch_size.min:g} is larger "
                          f"than buffer.capacity ({cfg.buffer.capacity})")
    if cfg.env.backend == "batched":  # say it now, not when the trainer builds the pool
        from evohpo.envs import resolve_backend

        resolve_backend(cfg.env.name, cfg.env.kwargs, cfg.env.backend)
    w = cfg.logging.wandb
    if not w.project or any(c in w.project for c in '/\\#?%:'):
        raise ConfigError(f"config key 'logging.wandb.project': {w.project!r} is not a W&B project name "
                          "(non-empty, none of / \\ # ? % :)")
    dev = cfg.device
    if not (dev in ("auto", "cpu", "cuda") or (dev.startswith("cuda:") and dev[5:].isdigit())):
        raise ConfigError(f"config key 'device': {dev!r} is not one of 'auto', 'cpu', 'cuda', 'cuda:N'")
    d = cfg.distributed
    if d.num_actors and (d.num_actors > pop or pop % d.num_actors):
        ok = [n for n in range(1, pop + 1) if pop % n == 0]
        raise ConfigError(f"config key 'distributed.num_actors': {d.num_actors} must divide population.size ({pop}) "
                          f"so that every actor holds the same number of members; allowed 0 (auto), "
                          f"{', '.join(map(str, ok))}")


def replace(cfg: Config, **sections: Any) -> Config:
    """A copy of ``cfg`` with whole sections or top-level keys replaced (re-validated)."""
    return load([to_dict(cfg), sections])


def dump(cfg: Config) -> str:
    return yaml.safe_dump(to_dict(cfg), sort_keys=False)


def describe_keys(obj: Any = None, prefix: str = "") -> list[tuple[str, str, Any]]:
    """(key, doc, default) for every leaf key: used by `evohpo config` and the docs."""
    obj = Config() if obj is None else obj
    out = []
    for f in dataclasses.fields(obj):
        key = f"{prefix}.{f.name}" if prefix else f.name
        value = getattr(obj, f.name)
        if dataclasses.is_dataclass(value):
            out.extend(describe_keys(value, key))
        else:
            out.append((key, f.metadata.get("doc", ""), value))
    return out
