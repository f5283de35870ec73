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
        None, "agents per team, {team: [agent names or glob patterns]} (null: derived: mpe2's "
        "adversaries vs good agents; one team otherwise)")
    shaping: dict[str, float] = _f(
        {}, "training rewards only: {team: c} adds c * (gamma * Phi(s') - Phi(s)) to the team's "
        "rewards in the replay memory, Phi the env's potential for that team (simple_tag: "
        "adversaries, minus each one's distance to its nearest good agent; good, its distance "
        "to the adversaries). Potential-based, so the game's best policies stay the same; "
        "fitness, evaluation and logged returns use the env's own rewards. {}: off")
    frames: int = _f(
        1, "observations per agent side by side: the current one and the frames - 1 before it "
        "(1: the env's own). mpe2's simple_adversary tells its agents no velocity; two "
        "frames let a policy see it", lo=1, hi=16)
    num_envs: int = _f(8, "training envs in the shared pool, split evenly between members", lo=1)
    backend: Literal["auto", "pettingzoo", "batched"] = _f(
        "auto", "pettingzoo: mpe2/PettingZoo envs in a pool; batched: every mpe2 env in one numpy "
        "step (same results, many times faster); auto: batched where the env has it")
    pool: Literal["sync", "async"] = _f(
        "async", "pettingzoo backend: sync in process; async: subprocess workers")
    workers: int = _f(
        0, "async pool: worker processes (0 = one per CPU core, at most num_envs)", lo=0)
    worker_timeout: float = _f(
        60.0, "async pool: seconds to wait for a worker before failing", lo=0, lo_open=True)
    max_restarts: int = _f(
        3, "env pool failures (a worker crashed, hung or raised) survived before the run stops",
        lo=0)


@dataclass(frozen=True)
class AlgoConfig:
    name: Literal["maddpg", "matd3"] = _f(
        "matd3", "maddpg, or matd3 (twin critics, delayed and smoothed)")
    hidden: list[int] = _f([64, 64], "hidden layer widths of actors and critics")
    activation: Activation = _f("relu", "hidden activation of actors and critics")
    lr_actor: float = _f(1e-3, "actor learning rate (Adam)", lo=0, lo_open=True)
    lr_critic: float = _f(1e-3, "critic learning rate (Adam)", lo=0, lo_open=True)
    lr_decay: float = _f(
        1.0, "every member's learning rates at the run's end, as a factor of its own: they fall "
        "linearly from lr_decay_start of the run's env steps (1: constant)", lo=0, hi=1,
        lo_open=True)
    lr_decay_start: float = _f(
        0.5, "share of the run's env steps (steps) after which learning rates fall toward "
        "lr_decay", lo=0, hi=1)
    gamma: float = _f(0.95, "discount factor", lo=0, hi=1)
    tau: float = _f(0.01, "polyak factor for target networks", lo=0, hi=1, lo_open=True)
    batch_size: int = _f(256, "transitions per gradient step", lo=1)
    learn_step: int = _f(50, "a member learns once per this many of its own env steps", lo=1)
    gradient_steps: int = _f(
        1, "gradient steps each time a member learns (at least min_updates_per_step x "
        "learn_step)", lo=1)
    team_gradient_steps: dict[str, int] = _f(
        {}, "teams: {team: n} gradient steps each time a member of that team learns, for the "
        "named teams (the others take gradient_steps); {}: every team takes gradient_steps")
    min_updates_per_step: float = _f(
        0.04, "fewest gradient steps per env step of a member's own (0: off): past learn_step "
        "1/this, each learn takes more, so learn_step sets how often a member learns, not how "
        "little (a critic left behind its data steers the actor into drift)", lo=0, hi=1)
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
        1e-3, "weight of a penalty on the actor's raw outputs (pre-squash, or logits) in its "
        "loss: keeps them out of saturation; larger pulls each action to the middle of its "
        "range (on mpe2: towards no force)", lo=0)


@dataclass(frozen=True)
class Bound:
    min: float = _f(0.0, "lower bound")
    max: float = _f(1.0, "upper bound")
    mutate: bool = _f(True, "whether evolution may change it (and population.init: sample draw it)")
    scale: Literal["log", "linear"] = _f(
        "log", "how it is sampled and resampled: log (uniform in its logarithm) or linear")


@dataclass(frozen=True)
class HyperparamSpace:
    lr_actor: Bound = _f(Bound(1e-5, 1e-2), "range of lr_actor")
    lr_critic: Bound = _f(Bound(1e-5, 1e-2), "range of lr_critic")
    batch_size: Bound = _f(
        Bound(32, 1024), "range of batch_size (the max is clipped at buffer.capacity)")
    learn_step: Bound = _f(Bound(10, 400), "range of learn_step")
    tau: Bound = _f(Bound(1e-3, 0.1), "range of tau")
    expl_noise: Bound = _f(Bound(0.0, 0.5, scale="linear"), "range of expl_noise")
    min_updates_per_step: Bound = _f(
        Bound(0.01, 0.25, mutate=False),
        "range of min_updates_per_step, gradient steps per env step (within [0, 1]); off by "
        "default: more updates cost wall time at the same env steps, so turn it on "
        "(mutate: true) where the budget is env steps")


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
        0.2, "share of architecture mutations that add/remove a layer (the rest add/remove "
        "nodes)", lo=0, hi=1)
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
        0.15, "relative probability of an architecture mutation (add/remove a layer or "
        "nodes in one agent's actor or critics; function-preserving growth)", lo=0)
    activation: float = _f(
        0.05, "relative probability of switching one agent's activation (actor and critics)",
        lo=0)
    factors: list[float] = _f(
        [0.8, 1.2], "multiplicative perturbation factors for hyperparameters")
    weight_noise_std: float = _f(
        0.05, "std of weight noise, relative to each tensor's std", lo=0, lo_open=True)
    weight_fraction: float = _f(
        0.1, "fraction of actor weights that receive noise", lo=0, hi=1, lo_open=True)
    bounds: HyperparamSpace = _f(
        HyperparamSpace(), "the search space: range and scale of each mutable hyperparameter")
    arch: ArchSpace = _f(
        ArchSpace(), "bounds and steps of architecture and activation mutations")


@dataclass(frozen=True)
class PopulationConfig:
    size: int = _f(4, "members in the population", lo=1)
    init: Literal["preset", "sample"] = _f(
        "preset", "how members start: preset (every member at the algo.* values) or sample (a "
        "Latin hypercube over mutation.bounds and the mutation.arch layers and widths)")
    keep_preset: bool = _f(True, "with init: sample, member 0 starts at the preset")
    teams: Literal["auto", "joint"] = _f(
        "auto", "auto: on a game of several teams (env.teams), a population of size members per "
        "team, each with its own selection and mutation, scored by cross-play; joint: one "
        "population whose members drive every agent, fitness summed over eval.fitness_agents")
    past_opponents: int = _f(
        0, "teams: champions of earlier generations kept as training opponents (0: off); with "
        "N > 0, half of each slot's envs pit one team's member (alternating by slot and window) "
        "against past champions drawn from the N kept (every generation's champions join; when "
        "full, a random earlier one leaves), so that no team trains only against the other "
        "team's current members (fictitious self-play)", lo=0)
    scripted_opponents: float = _f(
        0.0, "teams: the chance, per slot and window, that the half of the slot's envs where one "
        "team's member meets opponents other than the current members (see past_opponents) is "
        "played against the env's scripted heuristic (evohpo/games/references.py) instead; 0: off. "
        "Without past_opponents the slots that do not draw it play the current members "
        "throughout", lo=0.0, hi=1.0)
    scripted_teams: list[str] | None = _f(
        None, "teams: the teams whose members play the scripted heuristic where "
        "scripted_opponents draws it (the heuristic takes every other team's seats); null: "
        "every team, alternating by slot and window")
    past_teams: list[str] | None = _f(
        None, "teams: the teams whose members play the past champions where past_opponents "
        "draws them (the champions take every other team's seats); null: every team, "
        "alternating by slot and window")
    scripted_teams_until: int | None = _f(
        None, "teams: the env steps for which scripted_teams holds; the windows that start at "
        "or past them draw the heuristic against every team, as with scripted_teams null "
        "(null: the whole run). A curriculum: the heuristic as some teams' one other opponent "
        "first, the current members of every team later", lo=0)
    opponent_actions: Literal["played", "learned", "mixed"] = _f(
        "played", "teams: the other teams' next actions in a member's critic targets: played "
        "(what the policies that played each env do at its next observation, kept in the replay "
        "memory; a member trains only its own team's networks), learned (each member also "
        "trains its own model of the other teams, as MADDPG approximates unknown policies, and "
        "takes their next actions from it) or mixed (learned, except in transitions where the "
        "scripted heuristic of population.scripted_opponents played the other team: there its "
        "next actions as played)")
    team_opponent_actions: dict[str, Literal["played", "learned", "mixed"]] = _f(
        {}, "teams: {team: mode} opponent_actions for the members of the named teams (the "
        "others take opponent_actions); {}: every team takes opponent_actions")


@dataclass(frozen=True)
class EvolutionConfig:
    evo_steps: int = _f(10_000, "env steps each member collects per evolution window", lo=1)
    strategy: Literal["tournament", "truncation", "independent"] = _f(
        "truncation", "truncation: PBT, the bottom quantile copies the top quantile and "
        "perturbs or resamples every mutable hyperparameter; tournament: tournament selection "
        "with elitism, every other member a mutated clone (as AgileRL); independent: no "
        "selection (from population.init: sample, random search)")
    quantile: float = _f(0.25, "truncation: the share of members replaced (and copied from)",
                         lo=0, hi=0.5, lo_open=True)
    resample_probability: float = _f(
        0.25, "truncation: the chance that a hyperparameter is resampled from its range rather "
        "than perturbed by a mutation.factors factor", lo=0, hi=1)
    min_gap: float = _f(
        1.0, "truncation: a member is replaced only when worse than its replacement's parent by "
        "more than this many standard errors of the fitness difference (0: whenever worse)",
        lo=0)
    ready: int = _f(
        5, "truncation: evolution windows a member must have trained since it was born (or "
        "last copied into, or explored in place) before it can be replaced or explore again; a "
        "diverged member is replaced at any age",
        lo=1)
    explore_kept: bool = _f(
        True, "truncation: a ready bottom-quantile member that is not replaced (within min_gap "
        "of the member it would copy) keeps its weights and explores its own hyperparameters, "
        "then waits `ready` windows again; off: it goes on unchanged, so a population started "
        "identical (population.init: preset) rarely explores")
    tournament_size: int = _f(2, "members drawn per tournament", lo=1)
    elitism: bool = _f(True, "the best member survives unchanged")
    learning_delay: int = _f(2_000, "population env steps before anyone learns", lo=0)
    target_fitness: float | None = _f(None, "stop early once the best fitness reaches this")


@dataclass(frozen=True)
class EvalConfig:
    episodes: int = _f(8, "complete, noise-free episodes per member per evaluation", lo=1)
    confirm_episodes: int = _f(
        100, "fresh episodes on which each generation's best member is re-evaluated before it "
        "can become checkpoints/best.pt and eval/best_ever (0: no confirmation)", lo=0)
    fitness_agents: list[str] | None = _f(
        None, "agents whose returns are summed into fitness (null: all)")
    team_fitness: Literal["return", "elo"] = _f(
        "return", "teams: fitness is the member's mean team return against the opponents it "
        "met (return), or its Elo rating from the match results of every window (elo)")
    opponents: int = _f(
        0, "teams: opponents each member meets per evaluation, each match eval.episodes "
        "episodes (0: every member of the other team, round robin)", lo=0)
    heuristic_weight: float = _f(
        0.0, "teams: the share of a member's fitness that comes from a match against the env's "
        "scripted heuristic on the same eval.episodes episodes, the rest "
        "from cross-play (eval.team_fitness: return only); 0: cross-play alone", lo=0.0, hi=1.0)
    elo_k: float = _f(16.0, "teams: Elo K factor (rating points a match can move)",
                      lo=0, lo_open=True)
    reference_episodes: int = _f(
        32, "teams: episodes each team's champion plays each generation against fixed "
        "opponents (random, scripted heuristic, the first generation's champion); 0: off", lo=0)
    champion: Literal["current", "hill"] = _f(
        "current", "teams: the champion each team hands over (checkpoints/best.pt): current "
        "(the last generation's highest cross-play fitness) or hill (a kept champion, replaced "
        "by a generation's champion only when that does at least as well against the same "
        "bench: the other teams' generation champions and the scripted heuristic; see "
        "evohpo/games/hill.py)")
    champion_episodes: int = _f(
        64, "teams, champion: hill: episodes per bench match", lo=1)


@dataclass(frozen=True)
class BufferConfig:
    capacity: int = _f(1_000_000, "transitions kept in the shared replay memory", lo=1)


@dataclass(frozen=True)
class CheckpointConfig:
    enabled: bool = _f(
        True, "write checkpoints/latest.pt every generation and checkpoints/best.pt")
    buffer: bool = _f(
        True, "include the replay memory (turn off for huge buffers: resume then refills it)")


@dataclass(frozen=True)
class WandbConfig:
    """Weights & Biases (logging.wandb.*): off unless asked for, so a run needs no account."""

    mode: Literal["disabled", "offline", "online"] = _f(
        "disabled", "disabled: no W&B; offline: W&B run files in <run dir>/wandb, no account or "
        "network (upload later with `wandb sync`); online: stream to W&B (needs `wandb login` "
        "or WANDB_API_KEY)")
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
    """Where the population runs (distributed.*): this process, or Ray actors.

    See evohpo.runtime.ray.
    """

    backend: Literal["local", "ray"] = _f(
        "local", "local: one process; ray: groups of members in Ray actors, each with its own "
        "envs, learning and replay copy; the driver selects, mutates, logs and checkpoints "
        "(pip install 'evohpo[ray]')")
    address: str | None = _f(
        None, "ray: cluster address HOST:PORT (or 'auto'); null: start a local Ray instance")
    num_actors: int = _f(
        0, "ray: actors (member groups); population.size must be a multiple; 0 = auto: as many "
        "as the cluster's CPUs (GPUs) allow, at most population.size", lo=0)
    cpus_per_actor: float = _f(
        1.0, "ray: CPUs each actor asks for (also each job's CPUs in `evohpo sweep`)",
        lo=0, lo_open=True)
    gpus_per_actor: float | None = _f(
        None, "ray: GPUs each actor asks for; a fraction shares a GPU (0.25: four actors per "
        "GPU); 0: the CPU; null: the cluster's GPUs shared evenly (at most one per actor), none "
        "if it has none or device is cpu", lo=0)
    max_actor_restarts: int = _f(
        3, "ray: lost actors (a crash, a lost node) recreated before the run stops", lo=0)


@dataclass(frozen=True)
class Config:
    seed: int = _f(0, "one seed for every random stream", lo=0)
    steps: int = _f(2_000_000, "budget: env steps for the whole population", lo=1)
    device: str = _f(
        "auto", "auto: cuda where there is a GPU and the networks are large enough to gain "
        "(widest hidden layer squared x batch_size >= 256^3), else the CPU, faster at the "
        "presets' sizes (benchmarks/README.md); cpu, cuda or cuda:N: as named")
    torch_threads: int = _f(
        0, "torch intra-op threads (0 = auto: one; raise it for large networks)", lo=0)
    env: EnvConfig = _f(EnvConfig(), "environment and vector pool")
    algo: AlgoConfig = _f(AlgoConfig(), "algorithm and its initial hyperparameters")
    population: PopulationConfig = _f(PopulationConfig(), "population")
    evolution: EvolutionConfig = _f(EvolutionConfig(), "evolution schedule and selection")
    mutation: MutationConfig = _f(MutationConfig(), "mutation operators and their probabilities")
    eval: EvalConfig = _f(EvalConfig(), "fitness evaluation")
    buffer: BufferConfig = _f(BufferConfig(), "replay memory")
    checkpoint: CheckpointConfig = _f(CheckpointConfig(), "checkpoints and resume")
    logging: LoggingConfig = _f(LoggingConfig(), "loggers")
    distributed: DistributedConfig = _f(
        DistributedConfig(), "where the population runs: local or Ray")
