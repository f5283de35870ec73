"""The Python API: train a population, continue a run, load a finished run and act with it.

    import evohpo

    result = evohpo.train("matd3_speaker_listener", steps=200_000, seed=1,
                          overrides={"population.size": 6})
    run = evohpo.load_run(result.run_dir)
    actions = run.member("best").act(observations)

``evohpo train`` and ``evohpo sweep`` are thin layers over :func:`train` and :func:`resume`.
Run directories are made ready in :mod:`evohpo.paths`; a finished run is read through
:mod:`evohpo.playback.run`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from evohpo import config as C
from evohpo.config.presets import PRESETS_DIR, preset_path
from evohpo.errors import ConfigError, EvohpoError
from evohpo.logs.loggers import Logger
from evohpo.loop.budget import whole_steps
from evohpo.paths import default_run_dir, prepare_run_dir, remove_unstarted
from evohpo.playback.load import run_config
from evohpo.playback.run import Agent, Run, load_run

__all__ = ["Agent", "Callback", "GenerationInfo", "Run", "TrainResult", "load_run", "resolve",
           "resume", "train", "with_settings"]

# ----------------------------------------------------------------------------- configs

def as_layer(config: C.Config | Mapping[str, Any] | str | Path | None) -> dict[str, Any]:
    """A config layer from a Config, a mapping, a YAML file or a shipped preset's name."""
    if config is None:
        return {}
    if isinstance(config, C.Config):
        return C.to_dict(config)
    if isinstance(config, Mapping):
        return dict(config)
    return C.read_yaml(preset_named(config) or Path(config))


def preset_named(config: object) -> Path | None:
    """The shipped preset ``config`` names (e.g. ``"matd3_speaker_listener"``), if it names one."""
    if not isinstance(config, (str, Path)):
        return None
    path = Path(config)
    if path.suffix or path.exists() or not (PRESETS_DIR / f"{path}.yaml").is_file():
        return None
    return PRESETS_DIR / f"{path}.yaml"


def env_name(env: str | Callable[..., Any]) -> str:
    """The config's ``env.name`` for an env given as a name, 'module:factory' or a callable."""
    if isinstance(env, str):
        return env
    from evohpo.envs.registry import register_env

    return register_env(env)


def resolve(config: C.Config | Mapping[str, Any] | str | Path | None = None, *,
            algo: str | None = None, env: str | Callable[..., Any] | None = None,
            steps: int | None = None, seed: int | None = None,
            overrides: Mapping[str, Any] | Sequence[str] = (),
            preset: bool = True) -> tuple[C.Config, list[str]]:
    """Layers, later wins: defaults < shipped preset < ``config`` < algo/env < overrides <
    steps/seed.

    The shipped preset for the algo x env pair is the base only when no ``config`` is given.
    ``overrides`` are ``{"algo.lr_actor": 3e-4}`` or ``["algo.lr_actor=3e-4"]``.
    """
    user = as_layer(config)
    name = env_name(env) if env is not None else None
    a = algo or user.get("algo", {}).get("name") or C.AlgoConfig.name
    e = name or user.get("env", {}).get("name") or C.EnvConfig.name
    layers: list[dict[str, Any]] = []
    notes = []
    base = preset_path(str(a), str(e))
    if config is None and preset and base.is_file():
        layers.append(C.read_yaml(base))
        notes.append(f"defaults from {base}")
    # a shipped preset's num_envs (or the default) is fitted to a population.size given here
    inherited = len(layers) + (preset_named(config) is not None)
    layers.append(user)
    if algo:
        layers.append({"algo": {"name": algo}})
    if name:
        layers.append({"env": {"name": name}})
    if isinstance(overrides, Mapping):
        layers += [dotted(k, v) for k, v in overrides.items()]
    else:
        layers += [C.parse_override(text) for text in overrides]
    if steps is not None:
        layers.append({"steps": steps})
    if seed is not None:
        layers.append({"seed": seed})
    return C.load(layers, inherited=inherited, notes=notes), notes


def dotted(key: str, value: Any) -> dict[str, Any]:
    out: Any = value
    for part in reversed(key.split(".")):
        out = {part: out}
    return out


def with_settings(cfg: C.Config, backend: str | None = None, address: str | None = None,
                  wandb: str | None = None) -> C.Config:
    """Where a run trains and logs (not what it is): also allowed on resume."""
    over: dict[str, Any] = {}
    if backend or address:
        over["distributed"] = {"backend": backend or "ray",
                               **({"address": address} if address else {})}
    if wandb:
        over["logging"] = {"wandb": {"mode": wandb}}
    return C.load([C.to_dict(cfg), over]) if over else cfg


# ----------------------------------------------------------------------------- training

@dataclass(frozen=True)
class GenerationInfo:
    """What a callback sees after each generation: its metrics and lineage records."""

    generation: int
    env_steps: int
    metrics: dict[str, Any]
    records: list[dict[str, Any]]


Callback = Callable[[GenerationInfo], Any]  # return True to stop after this generation


@dataclass
class TrainResult:
    run_dir: Path | None
    config: C.Config
    summary: dict[str, Any]
    metrics: list[dict[str, Any]] = field(default_factory=list)  # one row per generation

    @property
    def best_fitness(self) -> float:
        return float(self.summary["best_fitness"])

    def load(self) -> Run:
        """The finished run, to evaluate or act with its members."""
        if self.run_dir is None:
            raise ConfigError("this run kept no run directory (run_dir=None): nothing to load")
        return load_run(self.run_dir)


class _Callbacks(Logger):
    """Collects each generation's metrics and lineage, and hands them to the callbacks."""

    def __init__(self, callbacks: Sequence[Callback]):
        self.callbacks = list(callbacks)
        self.rows: list[dict[str, Any]] = []
        self.records: list[dict[str, Any]] = []
        self.stop = False

    def log(self, metrics: dict[str, Any], step: int) -> None:
        self.rows.append({"env_steps": step, **metrics})

    def lineage(self, records: list[dict[str, Any]]) -> None:
        self.records = records
        if not self.rows:  # lineage without a generation (e.g. a restored Ray actor's records)
            return
        row = self.rows[-1]
        info = GenerationInfo(row["generation"], row["env_steps"], row, records)
        for cb in self.callbacks:
            if cb(info) is True:
                self.stop = True


def train(config: C.Config | Mapping[str, Any] | str | Path | None = None, *,
          algo: str | None = None, env: str | Callable[..., Any] | None = None,
          steps: int | None = None, seed: int | None = None,
          overrides: Mapping[str, Any] | Sequence[str] = (), run_dir: str | Path | None = None,
          overwrite: bool = False, callbacks: Sequence[Callback] = (), quiet: bool = True,
          wandb: str | None = None, backend: str | None = None,
          loggers: Sequence[Logger] = (), notes: Sequence[str] = ()) -> TrainResult:
    """Train a population and return what it gave.

    ``config``: a :class:`~evohpo.config.Config`, a mapping, a YAML file or a shipped preset's
    name (``"matd3_speaker_listener"``); without it, the preset for ``algo`` x ``env`` is used
    when one exists. ``env``: an mpe2 name, ``"module:factory"`` or a callable returning a
    PettingZoo ParallelEnv (``env.kwargs`` are passed to it). ``run_dir``: where the run goes
    (default ``runs/<env>-<algo>-<time>``). Each callback gets a :class:`GenerationInfo` after
    every generation; one returning True stops the run there (checkpointed: it can be resumed).
    """
    cfg, found = resolve(config, algo=algo, env=env, steps=steps, seed=seed, overrides=overrides)
    cfg = with_settings(cfg, backend, wandb=wandb)
    from evohpo.algos.registry import on_policy
    from evohpo.devices import resolve_device
    from evohpo.runtime.backends import runtime_class
    from evohpo.runtime.memory import check_memory, replay_capacity

    runtime_class(cfg)  # Ray asked for but missing: said before a run directory appears
    resolve_device(cfg)  # and a GPU
    from evohpo.config.checks import check, keeps_next_actions, playing_teams
    from evohpo.envs import spec_for

    # a bad env, games keys the game cannot take or an impossible buffer (with the optional
    # field the runtime will add) are refused before a run directory appears
    spec = spec_for(cfg.env)
    check(cfg, spec)
    if not on_policy(cfg):  # on-policy learners keep no replay memory
        check_memory(spec, replay_capacity(cfg),
                     keeps_next_actions(cfg, playing_teams(cfg, spec)))
    path = prepare_run_dir(Path(run_dir) if run_dir else default_run_dir(cfg), overwrite)
    return _run(cfg, path, None, [*notes, *found], callbacks, quiet, loggers)


def resume(run_dir: str | Path, *, steps: int | None = None, callbacks: Sequence[Callback] = (),
           quiet: bool = True, wandb: str | None = None, backend: str | None = None,
           address: str | None = None, loggers: Sequence[Logger] = ()) -> TrainResult:
    """Continue a run from its last checkpoint, up to ``steps`` (a new total budget) if given."""
    from evohpo import checkpoint, paths

    path = Path(run_dir)
    try:
        cfg = run_config(path)
    except ConfigError:
        paths.cut_short(path)  # a clearer line when the file lost sections its checkpoint has
        raise
    paths.run_dir_writable(path, "--resume")
    if steps is not None:
        cfg = C.load([C.to_dict(cfg), {"steps": steps}])
    cfg = with_settings(cfg, backend, address, wandb)
    from evohpo.devices import resolve_device
    from evohpo.envs import spec_for
    from evohpo.runtime.backends import runtime_class

    runtime_class(cfg)
    state = checkpoint.load_latest(path)
    meta = state[0]
    paths.same_config(path, run_config(path), meta.get("config"))
    room = meta["env_steps"] + cfg.env.num_envs  # a run moves in whole steps of its envs
    if cfg.steps < room:  # a resume that would train nothing changes nothing
        given = (f"its budget is {cfg.steps:,}" if steps is None else f"--steps {cfg.steps:,} is "
                 + ("not above it" if cfg.steps <= meta["env_steps"]
                    else f"less than a step of its {cfg.env.num_envs} envs above it"))
        raise ConfigError(f"the run {'is already finished: it' if steps is None else 'already'} "
                          f"has {meta['env_steps']:,} env steps ({given}); pass --steps N with N "
                          f"at least {room:,} to train it further")
    resolve_device(cfg)  # a device this machine lacks, an env this process cannot build (a
    spec_for(cfg.env)  # script's callable): one line, before anything is printed or written
    files = paths.ResumedFiles(path, meta["files"])  # the logs cut back to the checkpoint
    notes = [f"resuming from {checkpoint.moment(meta)}"]
    from evohpo.logs.loggers import machine_kind
    from evohpo.report.data import read_jsonl

    here = machine_kind()  # lines written before the kind was recorded say nothing
    if others := list(dict.fromkeys(k for ln in read_jsonl(path / "system.jsonl")
                                    if isinstance(k := ln.get("machine"), str) and k != here)):
        notes.append(f"note: this run trained before on {'; '.join(others)}, and goes on here on "
                     f"{here}: the same seed repeats a run exactly only on one kind of machine, "
                     "so from here on it need not match the run trained in one go")
    try:
        return _run(cfg, path, state, notes, callbacks, quiet, loggers)
    except BaseException:
        files.put_back()  # if it trained nothing (e.g. W&B could not start): every record kept
        raise


def _run(cfg: C.Config, run_dir: Path, state: tuple[dict[str, Any], dict[str, Any]] | None,
         notes: list[str],
         callbacks: Sequence[Callback], quiet: bool, extra: Sequence[Logger]) -> TrainResult:
    from evohpo.logs.loggers import ConsoleLogger, JsonlLogger, Loggers, atomic_write_text
    from evohpo.logs.optional import optional_loggers
    from evohpo.loop.trainer import Trainer

    atomic_write_text(run_dir / "config.yaml", C.dump(cfg))
    loggers: list[Logger] = list(extra)
    if cfg.logging.jsonl:
        loggers.append(JsonlLogger(run_dir))
    if cfg.logging.console and not quiet:
        loggers.append(ConsoleLogger(whole_steps(cfg), state[0] if state else None))
    try:
        loggers += optional_loggers(cfg, run_dir, resume=state is not None, quiet=quiet)
    except EvohpoError:
        if state is None:  # a new run that never started leaves no run directory behind
            for logger in loggers:
                logger.close()
            remove_unstarted(run_dir)
        raise
    watcher = _Callbacks(callbacks)
    log = Loggers([*loggers, watcher])
    for n in notes:
        log.message(n)
    log.message(f"run directory: {run_dir}")
    trainer = None
    try:
        trainer = Trainer(cfg, log, run_dir)
        trainer.stop_requested = lambda: watcher.stop
        if state:
            trainer.restore(*state)
        summary = trainer.train()
    finally:
        if trainer is not None:
            trainer.close()
        log.close()
        if trainer is None and state is None:  # an error found as it was built, e.g. the device
            remove_unstarted(run_dir)
    return TrainResult(run_dir, cfg, summary, watcher.rows)
