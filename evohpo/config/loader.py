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
from typing import Any, Literal, NoReturn

import yaml

from evohpo.config.choices import CHOICES, one_of
from evohpo.config.schema import Config
from evohpo.config.validate import fit_num_envs, validate
from evohpo.errors import ConfigError


def describe_type(tp: Any) -> str:
    """The values an annotation allows, in words (as errors and the configuration page say them)."""
    origin = typing.get_origin(tp)
    if origin is Literal:
        return "one of " + ", ".join(repr(a) for a in typing.get_args(tp))
    if origin in (typing.Union, types.UnionType):
        return " or ".join(describe_type(a) for a in typing.get_args(tp))
    if tp is type(None):
        return "null"
    if origin is list:
        return f"a list of {describe_type(typing.get_args(tp)[0])}"
    if origin is dict:
        key_tp, value_tp = typing.get_args(tp) or (Any, Any)
        if value_tp is Any:
            return "a mapping"
        return f"a mapping of {describe_type(key_tp)} to {describe_type(value_tp)}"
    if dataclasses.is_dataclass(tp):
        return "a mapping"
    return getattr(tp, "__name__", str(tp))


def _coerce(tp: Any, value: Any, key: str) -> Any:
    """Check ``value`` against the annotation ``tp``; return it converted, or raise ConfigError."""
    origin = typing.get_origin(tp)
    bad = ConfigError(f"config key '{key}': {value!r} is not {describe_type(tp)}")
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
        _refuse(key, value, tuple(str(a) for a in typing.get_args(tp)))
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


def _refuse(key: str, value: Any, allowed: tuple[str, ...]) -> NoReturn:
    """Raise the error of a choice key whose ``value`` is none of ``allowed``."""
    from evohpo.errors import closest

    hint = closest(str(value), list(allowed)) if isinstance(value, str) else ""
    raise ConfigError(f"config key '{key}': {value!r} is not one of {one_of(allowed)}{hint}")


def _choose(key: str, value: Any) -> Any:
    """``value`` of the registry-named key ``key`` (:data:`CHOICES`): one of its names."""
    allowed = CHOICES[key]()
    if value not in allowed:
        _refuse(key, value, allowed)
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
            from evohpo.config.keys import RENAMED
            from evohpo.errors import closest

            full = f"{prefix}.{k}" if prefix else str(k)
            hint = (f" (did you mean: {RENAMED[full]}?)" if full in RENAMED
                    else closest(str(k), list(fields)))
            raise ConfigError(f"unknown config key '{full}'{hint}; "
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
        elif name in data and key in CHOICES:
            value = _choose(key, data[name])
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


def load(layers: Sequence[Mapping[str, Any]], inherited: int = 0,
         notes: list[str] | None = None) -> Config:
    """Merge the layers (later wins) over the defaults, then build and cross-check.

    The first ``inherited`` layers are a shipped preset's: an ``env.num_envs`` that no later layer
    gives is rounded up to fit population.size (:func:`~evohpo.config.validate.fit_num_envs`),
    with a line in ``notes`` when it changes.
    """
    merged: dict[str, Any] = {}
    for layer in layers:
        merged = deep_merge(merged, layer)
    cfg: Config = build(Config, merged)
    if not any(isinstance(layer.get("env"), Mapping) and "num_envs" in layer["env"]
               for layer in layers[inherited:]):
        cfg = fit_num_envs(cfg, notes)
    validate(cfg)
    return cfg


def replace(cfg: Config, **sections: Any) -> Config:
    """A copy of ``cfg`` with whole sections or top-level keys replaced (re-validated)."""
    return load([to_dict(cfg), sections])


def dump(cfg: Config) -> str:
    return yaml.safe_dump(to_dict(cfg), sort_keys=False)
