"""Loading the config tree of :mod:`evohpo.config.schema`: YAML and ``key.path=value`` layers are
merged over the defaults, coerced to each key's type and checked against its range.

Unknown keys, wrong types and out-of-range values raise :class:`ConfigError` naming the key, the
value and what is allowed.
"""

from __future__ import annotations

import dataclasses
import math
import types
import typing
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Literal

import yaml

from evohpo.config.schema import Bound, Config
from evohpo.errors import ConfigError


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
        key_tp, value_tp = typing.get_args(tp) or (Any, Any)
        if value_tp is Any:
            return "a mapping"
        return f"a mapping of {_describe(key_tp)} to {_describe(value_tp)}"
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
        inner: ConfigError | None = None
        for a in args:
            if a is type(None):
                continue
            try:
                return _coerce(a, value, key)
            except ConfigError as e:
                if typing.get_origin(a) is dict and isinstance(value, Mapping):
                    inner = e  # a mapping with a bad entry: say which entry
        raise inner or bad
    if origin is Literal:
        if value in typing.get_args(tp):
            return value
        from evohpo.errors import closest

        allowed = [str(a) for a in typing.get_args(tp)]
        hint = closest(str(value), allowed) if isinstance(value, str) else ""
        raise ConfigError(f"config key '{key}': {value!r} is not {_describe(tp)}{hint}")
    if origin is list:
        if not isinstance(value, (list, tuple)):
            raise bad
        (inner,) = typing.get_args(tp)
        return [_coerce(inner, v, f"{key}[{i}]") for i, v in enumerate(value)]
    if origin is dict:
        if not isinstance(value, Mapping):
            raise bad
        key_tp, value_tp = typing.get_args(tp) or (Any, Any)
        if value_tp is Any:
            return dict(value)
        out = {}
        for k, v in value.items():
            if key_tp is str and not isinstance(k, str):
                raise ConfigError(f"config key '{key}': the key {k!r} is not a str")
            out[k] = _coerce(value_tp, v, f"{key}.{k}")
        return out
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
                raw = deep_merge(to_dict(_default_of(f)), raw)
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


def _free_mappings(cls: type) -> frozenset[str]:
    """Names of the keys in ``cls``'s tree whose values are mappings of the user's, not config
    sections (``dict[...]`` in the schema, optional or not: env.kwargs, teams, shaping)."""
    names: set[str] = set()
    for name, tp in typing.get_type_hints(cls).items():
        if isinstance(tp, type) and dataclasses.is_dataclass(tp):
            names |= _free_mappings(tp)
        elif dict in {typing.get_origin(a) for a in (tp, *typing.get_args(tp))}:
            names.add(name)
    return frozenset(names)


# a layer's mapping merges into these one level (``--set env.shaping.good=1`` adds a team), and
# an empty one clears them (``--set env.shaping={}`` turns off a preset's shaping)
LEAF_MAPPINGS = _free_mappings(Config)


def deep_merge(base: dict[str, Any], upd: Mapping[str, Any]) -> dict[str, Any]:
    """``upd`` over ``base``: sections merge by key, the env's free mappings one level (an empty
    one clears them), the rest replaces."""
    out = dict(base)
    for k, v in upd.items():
        if not (isinstance(v, Mapping) and isinstance(out.get(k), Mapping)):
            out[k] = v
        elif k not in LEAF_MAPPINGS:
            out[k] = deep_merge(dict(out[k]), v)
        else:
            out[k] = {**out[k], **v} if v else {}
    return out


def parse_dotted(text: str) -> tuple[str, Any]:
    """'a.b.c=value' -> ('a.b.c', value); the value is read as YAML."""
    if "=" not in text:
        raise ConfigError(f"--set {text!r}: expected dotted.key=value, e.g. algo.lr_actor=3e-4")
    key, raw = text.split("=", 1)
    key = key.strip()
    if not key or any(not part for part in key.split(".")):
        raise ConfigError(
            f"--set {text!r}: the key {key!r} is not a dotted path like algo.lr_actor")
    try:
        value = yaml.safe_load(raw) if raw.strip() else ""
    except yaml.YAMLError:
        value = raw
    return key, value


def parse_override(text: str) -> dict[str, Any]:
    """'a.b.c=value' -> {'a': {'b': {'c': value}}}; the value is read as YAML."""
    key, value = parse_dotted(text)
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
        raise ConfigError(f"config file {str(p)!r} must hold a mapping of keys, "
                          f"not {type(data).__name__}")
    return data


def load(layers: Sequence[Mapping[str, Any]]) -> Config:
    """Merge the layers (later wins) over the defaults, then build and cross-check."""
    merged: dict[str, Any] = {}
    for layer in layers:
        merged = deep_merge(merged, layer)
    cfg: Config = build(Config, merged)
    validate(cfg)
    return cfg


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
    for key, value, what in (("past_opponents", cfg.population.past_opponents, "past champions"),
                             ("scripted_opponents", cfg.population.scripted_opponents,
                              "the scripted heuristic")):
        if value and (cfg.env.num_envs // pop) % 2:
            raise ConfigError(f"config key 'population.{key}': {value} plays {what} in half of "
                              "each member's envs, so env.num_envs / population.size "
                              f"({cfg.env.num_envs} / {pop}) must be even; e.g. env.num_envs: "
                              f"{2 * cfg.env.num_envs}, or population.{key}: 0")
    if d.num_actors and (d.num_actors > pop or pop % d.num_actors):
        ok = [n for n in range(1, pop + 1) if pop % n == 0]
        raise ConfigError(f"config key 'distributed.num_actors': {d.num_actors} must divide "
                          f"population.size ({pop}) so that every actor holds the same number "
                          "of members; allowed 0 (auto), "
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
