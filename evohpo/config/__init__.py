"""A typed, frozen config tree loaded from YAML plus ``key.path=value`` overrides.

Every key is declared in :mod:`evohpo.config.schema` with its type, its allowed range and a
one-line doc; :mod:`evohpo.config.loader` merges, coerces and checks the layers. Unknown keys,
wrong types and out-of-range values raise :class:`ConfigError` naming the key, the value and
what is allowed. The resolved tree is written to the run directory and is the W&B run config.
"""

from evohpo.config.choices import CHOICES
from evohpo.config.keys import RENAMED, describe_keys, show
from evohpo.config.loader import (
    build,
    deep_merge,
    describe_type,
    dump,
    load,
    parse_dotted,
    parse_override,
    read_yaml,
    replace,
    to_dict,
)
from evohpo.config.schema import (
    Activation,
    AlgoConfig,
    ArchSpace,
    Bound,
    BufferConfig,
    CheckpointConfig,
    Config,
    DistributedConfig,
    EnvConfig,
    EvalConfig,
    EvolutionConfig,
    GamesConfig,
    HyperparamSpace,
    LoggingConfig,
    MutationConfig,
    PopulationConfig,
    WandbConfig,
)
from evohpo.config.validate import validate
from evohpo.errors import ConfigError

__all__ = [
    "CHOICES",
    "RENAMED",
    "Activation",
    "AlgoConfig",
    "ArchSpace",
    "Bound",
    "BufferConfig",
    "CheckpointConfig",
    "Config",
    "ConfigError",
    "DistributedConfig",
    "EnvConfig",
    "EvalConfig",
    "EvolutionConfig",
    "GamesConfig",
    "HyperparamSpace",
    "LoggingConfig",
    "MutationConfig",
    "PopulationConfig",
    "WandbConfig",
    "build",
    "deep_merge",
    "describe_keys",
    "describe_type",
    "dump",
    "load",
    "parse_dotted",
    "parse_override",
    "read_yaml",
    "replace",
    "show",
    "to_dict",
    "validate",
]
