"""``evohpo train | envs | config``: argument parsing, and errors turned into one line and an exit code."""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import sys
import time
from pathlib import Path
from typing import Any, NoReturn

import numpy as np

from evohpo import config as C
from evohpo import paths
from evohpo.argtypes import WandbMode, whole
from evohpo.errors import ConfigError, EvohpoError

CONFIG_DIR = Path(__file__).resolve().parent.parent / "configs"
RUN_FILES = ("config.yaml", "metrics.jsonl", "lineage.jsonl", "system.jsonl", "report.html")


class Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:  # one line, exit 2, no usage dump
        self.exit(2, f"evohpo: error: {message} (see '{self.prog} --help')\n")


def preset_path(algo: str, env: str) -> Path:
    """configs/<algo>_<env without 'simple_'>.yaml: the shipped defaults for that pair."""
    return CONFIG_DIR / f"{algo}_{env.removeprefix('simple_')}.yaml"


def resolve_config(args: argparse.Namespace) -> tuple[C.Config, list[str]]:
    """Layers, later wins: defaults < shipped preset < --config < --algo/--env < --set < --steps/--seed."""
    layers: list[dict[str, Any]] = []
    notes = []
    user: dict[str, Any] = C.read_yaml(args.config) if args.config else {}
    algo = args.algo or user.get("algo", {}).get("name") or C.AlgoConfig.name
    env = args.env or user.get("env", {}).get("name") or C.EnvConfig.name
    preset = preset_path(str(algo), str(env))
    if not args.config and preset.is_file():
        layers.append(C.read_yaml(preset))
        notes.append(f"defaults from {preset}")
    layers.append(user)
    if args.algo:
        layers.append({"algo": {"name": args.algo}})
    if args.env:
        layers.append({"env": {"name": args.env}})
    for text in args.set or []:
        layers.append(C.parse_override(text))
    if args.steps is not None:
        layers.append({"steps": args.steps})
    if args.seed is not None:
        layers.append({"seed": args.seed})
    return C.load(layers), notes


def clear_run_files(path: Path) -> None:
    """Remove what a run writes into its directory (and nothing else)."""
    for name in RUN_FILES:
        (path / name).unlink(missing_ok=True)
    for name in ("checkpoints", "wandb"):  # a replaced run's W&B files would sync as its own
        shutil.rmtree(path / name, ignore_errors=True)


def prepare_run_dir(path: Path, overwrite: bool) -> Path:
    if path.exists() and not path.is_dir():
        raise ConfigError(f"run directory {str(path)!r} exists and is not a directory")
    if path.is_dir() and any(path.iterdir()):
        if not overwrite:
            raise ConfigError(f"run directory {str(path)!r} already exists; choose another --run-dir, "
                              "or pass --overwrite to replace it")
        clear_run_files(path)
    try:
        path.mkdir(parents=True, exist_ok=True)
        probe = path / ".write-test"
        probe.write_text("")
        probe.unlink()
    except OSError as e:
        raise ConfigError(f"run directory {str(path)!r} is not writable: {e.strerror or e}") from None
    return path


def default_run_dir(cfg: C.Config) -> Path:
    env = cfg.env.name.replace(":", "_").replace("/", "_").replace(".", "_")
    return Path("runs") / f"{env}-{cfg.algo.name}-{time.strftime('%Y%m%d-%H%M%S')}"


def resume_config(args: argparse.Namespace) -> tuple[Path, C.Config]:
    """The run's own resolved config; only the budget may change on resume."""
    from evohpo.playback import run_config

    fixed = [flag for flag, v in (("--algo", args.algo), ("--env", args.env), ("--config", args.config),
                                  ("--set", args.set), ("--seed", args.seed), ("--run-dir", args.run_dir))
             if v]
    if fixed:
        raise ConfigError(f"--resume continues a run with its own config; {', '.join(fixed)} cannot change "
                          "it (only --steps can, to extend the budget)")
    run_dir = Path(args.resume)
    cfg = run_config(run_dir)
    if args.steps is not None:
        cfg = C.load([C.to_dict(cfg), {"steps": args.steps}])
    return run_dir, cfg


def with_backend(cfg: C.Config, args: argparse.Namespace) -> C.Config:
    """--backend / --ray-address over the config (also on --resume: where a run trains is not its config)."""
    if not (args.backend or args.ray_address):
        return cfg
    d: dict[str, Any] = {"backend": args.backend or "ray"}
    if args.ray_address:
        d["address"] = args.ray_address
    return C.load([C.to_dict(cfg), {"distributed": d}])


def cmd_train(args: argparse.Namespace) -> int:
    from evohpo import checkpoint
    from evohpo.distributed import trainer_class
    from evohpo.loggers import ConsoleLogger, JsonlLogger, Logger, Loggers, atomic_write_text

    notes: list[str] = []
    state = None
    if args.resume:
        run_dir, cfg = resume_config(args)
        paths.run_dir_writable(run_dir, "--resume")
        cfg = with_backend(cfg, args)
        trainer_cls = trainer_class(cfg)
        state = checkpoint.load_latest(run_dir)
        meta = state[0]
        if cfg.steps <= meta["env_steps"]:
            given = (f"--steps {cfg.steps:,} is not above it" if args.steps is not None
                     else f"its budget is {cfg.steps:,}")
            raise ConfigError(f"the run already has {meta['env_steps']:,} env steps ({given}); "
                              "pass --steps N with N above that to extend its budget")
        checkpoint.truncate_run_files(run_dir, meta["files"])
        notes.append(f"resuming at generation {meta['generation']}, {meta['env_steps']:,} env steps")
    else:
        from evohpo.envs import probe

        cfg, notes = resolve_config(args)
        cfg = with_backend(cfg, args)
        trainer_cls = trainer_class(cfg)  # Ray asked for but missing: said before a run directory appears
        from evohpo.trainer import check_memory

        # a bad env or an impossible buffer is refused before a run directory appears
        check_memory(probe(cfg.env.name, cfg.env.kwargs), cfg.buffer.capacity)
        run_dir = prepare_run_dir(Path(args.run_dir) if args.run_dir else default_run_dir(cfg), args.overwrite)
    if args.wandb:
        cfg = C.load([C.to_dict(cfg), {"logging": {"wandb": {"mode": args.wandb}}}])
    atomic_write_text(run_dir / "config.yaml", C.dump(cfg))
    loggers: list[Logger] = []
    if cfg.logging.jsonl:
        loggers.append(JsonlLogger(run_dir))
    if cfg.logging.console and not args.quiet:
        loggers.append(ConsoleLogger(cfg.steps, initial=state[0]["env_steps"] if state else 0))
    if cfg.logging.wandb.mode != "disabled":
        from evohpo.wandb_logger import WandbLogger

        try:
            loggers.append(WandbLogger(cfg, run_dir, resume=state is not None))
        except EvohpoError:
            if state is None:  # a new run that never started leaves no run directory behind
                for logger in loggers:
                    logger.close()
                clear_run_files(run_dir)
                with contextlib.suppress(OSError):
                    run_dir.rmdir()
            raise
    log = Loggers(loggers)
    for n in notes:
        log.message(n)
    log.message(f"run directory: {run_dir}")
    trainer = None
    try:
        trainer = trainer_cls(cfg, log, run_dir)
        if state:
            checkpoint.restore_trainer(trainer, *state)
        summary = trainer.train()
    finally:
        if trainer is not None:
            trainer.close()
        log.close()
    print(f"done: {summary['generations']} generations, {summary['env_steps']:,} env steps in "
          f"{summary['wall_s']:.0f}s; final best fitness {summary['best_fitness']:.2f} "
          f"(member {summary['best_member']}), best ever {summary['best_ever']:.2f}; run in {run_dir}")
    return 0


def cmd_eval(args: argparse.Namespace) -> int:
    from evohpo import playback

    run_dir = Path(args.run)
    cfg, spec, algo, info = playback.load_member(run_dir, args.member)
    if args.render and args.render != "human":  # said before the episode plays, not after
        paths.output_file(Path(args.render), "--render", make_parent=True)
    episodes = cfg.eval.episodes if args.episodes is None else args.episodes
    if args.render:
        frames = playback.render(cfg, algo, args.render, args.seed)
        if frames:
            print(f"wrote {args.render} ({frames} frames)")
        return 0
    returns = playback.evaluate(cfg, algo, episodes, args.seed)
    agents = cfg.eval.fitness_agents or list(spec.agents)
    total = np.sum([returns[a] for a in agents], axis=0)
    print(f"member {info.get('id')} of {run_dir} on {cfg.env.name}: {episodes} episodes, seed {args.seed}")
    for a in spec.agents:
        print(f"    {a:<20} return {returns[a].mean():9.3f} +- {returns[a].std():.3f}")
    print(f"    {'fitness (' + '+'.join(agents) + ')' if len(agents) < 4 else 'fitness (sum)':<20} "
          f"return {total.mean():9.3f} +- {total.std():.3f}")
    return 0


def cmd_export(args: argparse.Namespace) -> int:
    from evohpo import playback

    paths.output_dir(Path(args.out), "--out")
    for p in playback.export(Path(args.run), Path(args.out), args.member):
        print(f"wrote {p}")
    return 0


def cmd_envs(args: argparse.Namespace) -> int:
    from evohpo.envs import ENVS, probe

    for name in ENVS:
        specs = {mode: probe(name, {"continuous_actions": mode == "continuous"})
                 for mode in ("discrete", "continuous")}
        d = specs["discrete"]
        print(f"{name}  ({ENVS[name]}, {len(d.agents)} agents, action modes: discrete, continuous)")
        for a in d.agents:
            s, c = d[a], specs["continuous"][a]
            print(f"    {a:<18} obs {s.obs_dim:>3}   discrete {s.act_dim}   continuous Box[0,1]^{c.act_dim}")
    print("any PettingZoo ParallelEnv: --env package.module:factory (env.kwargs go to the factory)")
    return 0


def cmd_config(args: argparse.Namespace) -> int:
    for key, doc, default in C.describe_keys():
        print(f"{key:<40} {default!r:<24} {doc}")
    return 0


def build_parser() -> Parser:
    p = Parser(prog="evohpo", description="Evolve populations of MADDPG / MATD3 agents on PettingZoo envs.")
    sub = p.add_subparsers(dest="command", required=True, parser_class=Parser)
    t = sub.add_parser("train", help="train a population")
    t.add_argument("--algo", help="maddpg or matd3 (default from config: matd3)")
    t.add_argument("--env", help="env short name (see 'evohpo envs') or module:factory")
    t.add_argument("--config", help="YAML config file")
    t.add_argument("--steps", type=whole("steps"),
                   help="budget: env steps for the whole population")
    t.add_argument("--seed", type=whole("seed"), help="random seed")
    t.add_argument("--set", action="append", metavar="KEY=VALUE", help="override a config key (repeatable)")
    t.add_argument("--run-dir", help="run directory (default runs/<env>-<algo>-<timestamp>)")
    t.add_argument("--overwrite", action="store_true", help="replace an existing run directory")
    t.add_argument("--quiet", action="store_true", help="no progress bar or per-generation lines")
    t.add_argument("--resume", metavar="RUN_DIR", help="continue the run in RUN_DIR from its last checkpoint")
    t.add_argument("--backend", choices=["local", "ray"], help="local: this process; ray: members in Ray actors "
                   "(sets distributed.backend; needs pip install 'evohpo[ray]')")
    t.add_argument("--ray-address", metavar="HOST:PORT", help="run on this Ray cluster (`ray start --head` "
                   "prints it); implies --backend ray; sets distributed.address")
    t.add_argument("--wandb", nargs="?", action=WandbMode,
                   choices=["online", "offline", "disabled"],
                   help="log to W&B: online (needs `wandb login`) or offline (files in "
                        "RUN_DIR/wandb, no account); a bare --wandb is online unless WANDB_MODE "
                        "says offline or disabled; sets logging.wandb.mode")
    t.set_defaults(func=cmd_train)
    ev = sub.add_parser("eval", help="evaluate (or render) a trained member of a run")
    ev.add_argument("run", help="run directory")
    ev.add_argument("--member", default="best", help="'best' (best ever) or a member id")
    ev.add_argument("--episodes", type=whole("eval.episodes"),
                    help="episodes (default: the run's eval.episodes)")
    ev.add_argument("--seed", type=whole("seed"), default=0, help="seed of the evaluation episodes")
    ev.add_argument("--render", metavar="OUT.gif|human", help="write an animation of one episode, or show it")
    ev.set_defaults(func=cmd_eval)
    ex = sub.add_parser("export", help="export a member's actors to run without evohpo (torch.export)")
    ex.add_argument("run", help="run directory")
    ex.add_argument("--out", required=True, help="output directory")
    ex.add_argument("--member", default="best", help="'best' (best ever) or a member id")
    ex.set_defaults(func=cmd_export)
    e = sub.add_parser("envs", help="list the known environments")
    e.set_defaults(func=cmd_envs)
    c = sub.add_parser("config", help="list every config key with its default and meaning")
    c.set_defaults(func=cmd_config)
    from evohpo import report, sweep

    report.add_parser(sub)
    sweep.add_parser(sub)
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return int(args.func(args))
    except EvohpoError as e:
        print(f"evohpo: error: {e}", file=sys.stderr)
        return e.exit_code
    except KeyboardInterrupt:
        print("evohpo: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        os._exit(1)


if __name__ == "__main__":
    sys.exit(main())
