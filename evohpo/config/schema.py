"""The config schema: every key with its type, its allowed range and a one-line doc.

Each section is a frozen dataclass; ``_f`` puts the doc and the range [lo, hi] into the field's
metadata, where :mod:`evohpo.config.loader` checks them and ``evohpo config`` lists them.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Literal


def _f(default: Any, doc: str, lo: float | None = None, hi: float | None = None,
       lo_open: bool = False) -> Any:
    """A config field with a doc string and an optional range [lo, hi] (or (lo, hi] if lo_open)."""
    meta = {"doc": doc, "lo": lo, "hi": hi, "lo_open": lo_open}
    if isinstance(default, (list, dict)):
        return field(default_factory=lambda: type(default)(default), metadata=meta)
    if dataclasses.is_dataclass(default):
        return field(default_factory=lambda: default, metadata=meta)
    return field(default=default, metadata=meta)


# the names of evohpo.algos.networks.ACTIVATIONS
Activation = Literal["relu", "elu", "gelu", "tanh", "leaky_relu", "silu"]


@dataclass(frozen=True)
class EnvConfig:
    name: str = _f("simple_speaker_listener",
                   "short mpe2 name (see `evohpo envs`) or module:factory")
    kwargs: dict[str, Any] = _f({}, "keyword arguments passed unchanged to the env's constructor")
    teams: dict[str, list[str]] | None = _f(
        None, "{team: [agents or glob patterns]} (null: mpe2's adversaries vs good agents)")
    shaping: dict[str, float] = _f(
        {}, "{team: c}: potential-based shaping of that team's training rewards ({}: off)")
    frames: int = _f(
        1, "observations per agent side by side, the newest first (1: the env's own)",
        lo=1, hi=16)
    num_envs: int = _f(8, "training envs in the shared pool, split evenly between members", lo=1)
    backend: Literal["auto", "pettingzoo", "batched"] = _f(
        "auto", "pettingzoo: PettingZoo envs; batched: mpe2 in one numpy step; "
        "auto: batched where able")
    pool: Literal["sync", "async"] = _f(
        "async", "pettingzoo backend: sync in process; async: subprocess workers")
    workers: int = _f(
        0, "async pool: worker processes (0: one per CPU core, at most num_envs)", lo=0)
    worker_timeout: float = _f(
        60.0, "async pool: seconds to wait for a worker before failing", lo=0, lo_open=True)
    max_restarts: int = _f(
        3, "env failures (training or scoring) survived per session before the run stops",
        lo=0)


@dataclass(frozen=True)
class AlgoConfig:
    name: str = _f("matd3", "the algorithm (ippo and mappo learn on-policy)")
    hidden: list[int] = _f([64, 64], "hidden layer widths of actors and critics")
    activation: Activation = _f("relu", "hidden activation of actors and critics")
    lr_actor: float = _f(1e-3, "actor learning rate (Adam)", lo=0, lo_open=True)
    lr_critic: float = _f(1e-3, "critic learning rate (Adam)", lo=0, lo_open=True)
    gamma: float = _f(0.95, "discount factor", lo=0, hi=1)
    tau: float = _f(0.01, "polyak factor for target networks", lo=0, hi=1, lo_open=True)
    batch_size: int = _f(256, "transitions per gradient step", lo=1)
    learn_step: int = _f(50, "a member learns once per this many of its own env steps", lo=1)
    gradient_steps: int = _f(1, "gradient steps each time a member learns", lo=1)
    min_updates_per_step: float = _f(
        0.04, "fewest gradient steps per env step of a member's own (0: off)", lo=0, hi=1)
    max_grad_norm: float | None = _f(
        0.5, "clip gradient norm (null: no clipping)", lo=0, lo_open=True)
    policy_delay: int | None = _f(
        None, "critic updates per actor update (null: 2 for matd3, 1 for maddpg)", lo=1)
    target_noise: float | None = _f(
        None, "target policy smoothing std (null: 0.1 for matd3, 0 for maddpg)", lo=0)
    target_noise_clip: float = _f(0.25, "clip of the target policy smoothing noise", lo=0)
    noise: Literal["gaussian", "ou"] = _f(
        "gaussian", "exploration noise for continuous actions")
    expl_noise: float = _f(
        0.1, "exploration: noise std (continuous) or random-action probability (discrete)",
        lo=0, hi=1)
    ou_theta: float = _f(0.15, "Ornstein-Uhlenbeck mean reversion", lo=0)
    ou_dt: float = _f(0.01, "Ornstein-Uhlenbeck time step", lo=0, lo_open=True)
    gumbel_temperature: float = _f(
        1.0, "Gumbel-softmax temperature for discrete actions", lo=0, lo_open=True)
    action_reg: float = _f(
        1e-3, "weight of a penalty on the actor's raw outputs (keeps them unsaturated)", lo=0)
    rollout: int = _f(
        25, "ippo/mappo: vector steps each member collects between its updates", lo=1)
    epochs: int = _f(5, "ippo/mappo: passes over each rollout", lo=1)
    minibatches: int = _f(2, "ippo/mappo: minibatches per pass", lo=1)
    clip: float = _f(
        0.2, "ippo/mappo: clip range of the policy ratio and of the value change", lo=0,
        lo_open=True)
    ent_coef: float = _f(0.01, "ippo/mappo: weight of the entropy bonus", lo=0)
    gae_lambda: float = _f(0.95, "ippo/mappo: GAE lambda", lo=0, hi=1)
    share: bool = _f(
        False, "ippo/mappo: agents of one kind (name prefix, spaces) share actor and critic")


@dataclass(frozen=True)
class Bound:
    """The range of one mutable hyperparameter (``mutation.bounds.<name>``).

    ``min`` and ``max`` bound it; ``mutate`` says whether evolution may change it (and
    ``population.init: sample`` draw it); ``scale`` is how it is sampled and resampled: ``log``
    (uniform in its logarithm) or ``linear``.
    """

    min: float = 0.0
    max: float = 1.0
    mutate: bool = True
    scale: Literal["log", "linear"] = "log"


@dataclass(frozen=True)
class HyperparamSpace:
    lr_actor: Bound = _f(Bound(1e-5, 1e-2), "range of lr_actor")
    lr_critic: Bound = _f(Bound(1e-5, 1e-2), "range of lr_critic")
    batch_size: Bound = _f(Bound(32, 1024), "range of batch_size (max clipped at buffer.capacity)")
    learn_step: Bound = _f(Bound(10, 400), "range of learn_step")
    tau: Bound = _f(Bound(1e-3, 0.1), "range of tau")
    expl_noise: Bound = _f(Bound(0.0, 0.5, scale="linear"), "range of expl_noise")
    min_updates_per_step: Bound = _f(
        Bound(0.01, 0.25, mutate=False), "range of min_updates_per_step (within [0, 1])")
    rollout: Bound = _f(Bound(10, 200), "range of rollout")
    epochs: Bound = _f(Bound(1, 15), "range of epochs")
    minibatches: Bound = _f(Bound(1, 8), "range of minibatches")
    clip: Bound = _f(Bound(0.05, 0.4, scale="linear"), "range of clip")
    ent_coef: Bound = _f(Bound(1e-4, 0.05), "range of ent_coef")
    gae_lambda: Bound = _f(Bound(0.8, 1.0, scale="linear"), "range of gae_lambda")


@dataclass(frozen=True)
class ArchSpace:
    """Where architecture and activation mutations may go (mutation.arch.*).

    A network that starts outside [min, max] (algo.hidden) is only ever moved towards the range.
    """

    min_layers: int = _f(1, "fewest hidden layers remove_layer may leave", lo=1)
    max_layers: int = _f(3, "most hidden layers add_layer may make", lo=1)
    min_width: int = _f(16, "narrowest hidden layer remove_node may leave", lo=1)
    max_width: int = _f(256, "widest hidden layer add_node / add_layer may make", lo=1)
    node_steps: list[int] = _f(
        [16, 32], "units one add_node / remove_node moves (one drawn; clipped at the bounds)",
        lo=1)
    layer_prob: float = _f(
        0.2, "share of architecture mutations that add/remove a layer (else nodes)", lo=0, hi=1)
    activations: list[Activation] = _f(
        ["relu", "elu", "gelu", "tanh", "leaky_relu", "silu"],
        "activations an activation mutation may switch an agent's networks to")


@dataclass(frozen=True)
class MutationConfig:
    none: float = _f(0.2, "relative probability of no mutation", lo=0)
    hyperparameters: float = _f(
        0.4, "relative probability of an RL hyperparameter mutation", lo=0)
    weights: float = _f(0.2, "relative probability of Gaussian noise on actor weights", lo=0)
    architecture: float = _f(
        0.15, "relative probability of adding/removing a layer or nodes in one agent's nets",
        lo=0)
    activation: float = _f(
        0.05, "relative probability of switching one agent's activation", lo=0)
    factors: list[float] = _f(
        [0.8, 1.2], "multiplicative perturbation factors for hyperparameters")
    weight_noise_std: float = _f(
        0.05, "std of weight noise, relative to each tensor's std", lo=0, lo_open=True)
    weight_fraction: float = _f(
        0.1, "fraction of actor weights that receive noise", lo=0, hi=1, lo_open=True)
    bounds: HyperparamSpace = _f(
        HyperparamSpace(), "the search space: {min, max, mutate, scale} per hyperparameter")
    arch: ArchSpace = _f(
        ArchSpace(), "bounds and steps of architecture and activation mutations")


@dataclass(frozen=True)
class PopulationConfig:
    size: int = _f(4, "members in the population (per team on games of several teams)", lo=1)
    init: Literal["preset", "sample"] = _f(
        "preset", "preset: every member at algo.*; sample: Latin hypercube over mutation.bounds")
    keep_preset: bool = _f(True, "with init: sample, member 0 starts at the preset")


@dataclass(frozen=True)
class EvolutionConfig:
    evo_steps: int = _f(10_000, "env steps each member collects per evolution window", lo=1)
    strategy: str = _f("truncation", "how members are selected (truncation: PBT)")
    quantile: float = _f(0.25, "truncation: the share of members replaced (and copied from)",
                         lo=0, hi=0.5, lo_open=True)
    resample_probability: float = _f(
        0.25, "truncation: chance a hyperparameter is resampled rather than perturbed", lo=0, hi=1)
    min_gap: float = _f(
        1.0, "truncation: standard errors worse before a member is replaced (0: whenever worse)",
        lo=0)
    ready: int = _f(
        5, "truncation: windows a member trains before it can be replaced or explore", lo=1)
    explore_kept: bool = _f(
        True, "truncation: a ready bottom member that is not replaced explores in place")
    tournament_size: int = _f(2, "members drawn per tournament", lo=1)
    elitism: bool = _f(True, "the best member survives unchanged")
    learning_delay: int = _f(2_000, "population env steps before anyone learns", lo=0)
    target_fitness: float | None = _f(None, "stop early once the best fitness reaches this")


@dataclass(frozen=True)
class EvalConfig:
    episodes: int = _f(8, "complete, noise-free episodes per member per evaluation", lo=1)
    confirm_episodes: int = _f(
        100, "fresh episodes confirming each generation's best before best.pt (0: off)", lo=0)
    fitness_agents: list[str] | None = _f(
        None, "agents whose returns are summed into fitness (null: all)")


@dataclass(frozen=True)
class GamesConfig:
    """Games of several teams (games.*): a population per team, scored by cross-play."""

    teams: Literal["auto", "joint"] = _f(
        "auto", "auto: a population per team of env.teams; joint: one population for every agent")
    scripted_opponents: float = _f(
        0.0, "chance per slot and window that half its envs play the scripted heuristic (0: off)",
        lo=0.0, hi=1.0)
    opponent_actions: Literal["played", "learned"] = _f(
        "played", "other teams' next actions in critic targets: played, or learned by a model")
    fitness: Literal["return", "elo"] = _f(
        "return", "a member's fitness: mean team return in cross-play, or its Elo rating")
    opponents: int = _f(
        0, "opponents each member meets per evaluation (0: round robin)", lo=0)
    elo_k: float = _f(16.0, "Elo K factor (rating points a match can move)", lo=0, lo_open=True)
    reference_episodes: int = _f(
        32, "episodes of each champion against fixed reference opponents (0: off)", lo=0)


@dataclass(frozen=True)
class BufferConfig:
    capacity: int = _f(1_000_000, "most transitions the shared replay memory keeps (at most the "
                       "budget's)", lo=1)


@dataclass(frozen=True)
class CheckpointConfig:
    enabled: bool = _f(
        True, "write checkpoints/latest.pt every generation and checkpoints/best.pt")
    buffer: bool = _f(
        True, "include the replay memory (off for huge buffers: resume then refills it)")


@dataclass(frozen=True)
class WandbConfig:
    """Weights & Biases (logging.wandb.*): off unless asked for, so a run needs no account."""

    mode: Literal["disabled", "offline", "online"] = _f(
        "disabled", "disabled: no W&B; offline: files in <run dir>/wandb; online: stream to W&B")
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
    tensorboard: bool = _f(
        False, "TensorBoard event files in <run dir>/tensorboard (needs evohpo[tensorboard])")
    wandb: WandbConfig = _f(WandbConfig(), "Weights & Biases")


@dataclass(frozen=True)
class DistributedConfig:
    """Where the population runs (distributed.*): this process, or Ray actors.

    See evohpo.runtime.ray.
    """

    backend: str = _f("local", "where members run (ray: Ray actors, evohpo[ray])")
    address: str | None = _f(
        None, "ray: cluster address HOST:PORT or 'auto' (null: start a local Ray instance)")
    num_actors: int = _f(
        0, "ray: actors, dividing population.size (0: as many as the cluster allows)", lo=0)
    cpus_per_actor: float = _f(
        1.0, "ray: CPUs each actor (and each `evohpo sweep` job) asks for", lo=0, lo_open=True)
    gpus_per_actor: float | None = _f(
        None, "ray: GPUs per actor, a fraction shares one (0: CPU; null: the GPUs shared)", lo=0)
    max_actor_restarts: int = _f(
        3, "ray: lost actors recreated before the run stops", lo=0)


@dataclass(frozen=True)
class Config:
    seed: int = _f(0, "one seed for every random stream", lo=0)
    steps: int = _f(2_000_000, "budget: env steps for the whole population (in whole steps of "
                    "env.num_envs)", lo=1)
    device: str = _f(
        "auto", "auto: cuda where large networks gain, else cpu; cpu, cuda or cuda:N: as named")
    torch_threads: int = _f(
        0, "torch intra-op threads (0: auto, one)", lo=0)
    env: EnvConfig = _f(EnvConfig(), "environment and vector pool")
    algo: AlgoConfig = _f(AlgoConfig(), "algorithm and its initial hyperparameters")
    population: PopulationConfig = _f(PopulationConfig(), "population")
    evolution: EvolutionConfig = _f(EvolutionConfig(), "evolution schedule and selection")
    mutation: MutationConfig = _f(MutationConfig(), "mutation operators and their probabilities")
    eval: EvalConfig = _f(EvalConfig(), "fitness evaluation")
    games: GamesConfig = _f(GamesConfig(), "games of several teams")
    buffer: BufferConfig = _f(BufferConfig(), "replay memory")
    checkpoint: CheckpointConfig = _f(CheckpointConfig(), "checkpoints and resume")
    logging: LoggingConfig = _f(LoggingConfig(), "loggers")
    distributed: DistributedConfig = _f(
        DistributedConfig(), "where the population runs: local or Ray")
