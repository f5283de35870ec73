"""``evohpo train | envs | config``: argument parsing, and errors turned into one line and an
exit code."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any, NoReturn

from evohpo import config as C
from evohpo import paths
from evohpo.config.argtypes import WandbMode, whole
from evohpo.errors import ConfigError, EvohpoError
from evohpo.version import __version__


class Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:  # one line, exit 2, no usage dump
        self.exit(2, f"evohpo: error: {message} (see '{self.prog} --help')\n")


def cmd_train(args: argparse.Namespace) -> int:
    from evohpo import api

    if args.resume:
        fixed = [flag for flag, v in (("--algo", args.algo), ("--env", args.env),
                                      ("--config", args.config), ("--set", args.set),
                                      ("--seed", args.seed), ("--run-dir", args.run_dir)) if v]
        if fixed:
            raise ConfigError(f"--resume continues a run with its own config; {', '.join(fixed)} "
                              "cannot change it (only --steps can, to extend the budget)")
        result = api.resume(args.resume, steps=args.steps, quiet=args.quiet, wandb=args.wandb,
                            backend=args.backend, address=args.ray_address)
    else:
        cfg, notes = api.resolve(args.config, algo=args.algo, env=args.env, steps=args.steps,
                                 seed=args.seed, overrides=args.set or [])
        cfg = api.with_settings(cfg, args.backend, args.ray_address)
        result = api.train(cfg, run_dir=args.run_dir, overwrite=args.overwrite, quiet=args.quiet,
                           wandb=args.wandb, notes=notes)
    from evohpo.logs.loggers import counted, seconds

    s = result.summary
    if "teams" in s:
        best = "champions: " + ", ".join(f"{team} {c['fitness']:.2f} (member {c['champion']})"
                                         for team, c in s["teams"].items())
    else:
        from evohpo.report.data import best_checkpoint_meta

        meta = best_checkpoint_meta(result.run_dir) if result.run_dir else None
        kept = (meta or {}).get("member") or {}
        best = (f"last generation's best {s['best_fitness']:.2f} (member {s['best_member']})"
                + (f"; kept member {kept['id']} (what eval and export use), fitness "
                   f"{kept['fitness']:.2f}" if kept.get("fitness") is not None else
                   f"; best ever {s['best_ever']:.2f}"))
    from evohpo.loop.budget import rounding

    print(f"done: {counted(s['generations'], 'generation')}, {s['env_steps']:,} env steps"
          f"{rounding(result.config, s['env_steps'])} in {seconds(s['wall_s'])}; {best}; "
          f"run in {result.run_dir}")
    if result.run_dir is not None:
        print(next_commands(result.run_dir))
    return 0


def next_commands(run_dir: Path) -> str:
    """The run's last line: the commands that use it (evaluating and exporting need best.pt)."""
    import shlex

    run = shlex.quote(str(run_dir))
    if not (run_dir / "checkpoints" / "best.pt").is_file():
        return f"next: evohpo report {run}"
    policies = shlex.quote(str(run_dir / "policies"))
    return f"next: evohpo eval {run}; evohpo report {run}; evohpo export {run} --out {policies}"


def cmd_eval(args: argparse.Namespace) -> int:
    from evohpo.config import checks
    from evohpo.logs.loggers import counted
    from evohpo.playback import load
    from evohpo.runtime import evaluate

    run_dir = Path(args.run)
    if args.against:
        return eval_against(args)
    cfg, spec, algo, info = load.load_member(run_dir, args.member)
    if args.render and args.render != "human":  # said before the episode plays, not after
        paths.output_file(Path(args.render), "--render", make_parent=True)
    # by default the episodes best.pt's score was measured on, so that eval reproduces it
    episodes = args.episodes if args.episodes is not None else (
        info.get("episodes") or cfg.eval.episodes)
    seed = args.seed if args.seed is not None else int(info.get("eval_seed", 0))
    if args.render:
        frames = load.render(cfg, algo, args.render, seed)
        if frames:
            print(f"wrote {args.render} ({frames} frames)")
        return 0
    returns = evaluate.play(cfg, algo, spec, episodes, seed)
    agents = checks.fitness_agents(cfg.eval.fitness_agents, spec)
    total = evaluate.episode_totals(returns, agents)
    teams = checks.playing_teams(cfg, spec)
    who = ("the champions" if teams and "teams" in info else f"member {info.get('id')}"
           + (f" (team {info['team']}; {info['others']} play the others)"
              if "others" in info else ""))
    print(f"{who} of {run_dir} on {cfg.env.name}: {counted(episodes, 'episode')}, seed {seed}"
          + stored_score(info, episodes, seed))
    rows = [(a, returns[a]) for a in spec.agents]
    if teams:  # each team's own return: there is no one fitness
        rows += [(f"team {name}", evaluate.episode_totals(returns, team_agents))
                 for name, team_agents in teams]
    else:
        rows.append((f"fitness ({'+'.join(agents)})" if len(agents) < 4 else "fitness (sum)",
                     total))
    width = max(20, *(len(label) for label, _ in rows))  # the widest label fits its column
    for label, r in rows:
        print(f"    {label:<{width}} return {r.mean():9.3f} +- {r.std():.3f}")
    return 0


def stored_score(info: dict[str, Any], episodes: int, seed: int) -> str:
    """What these episodes are to the score best.pt stores: the same ones, or not."""
    from evohpo.runtime.evaluate import SEEDING

    fitness = info.get("fitness")
    if ((fitness is None and "teams" not in info)
            or (info.get("eval_seed"), info.get("episodes")) != (seed, episodes)):
        return ""
    if "teams" in info:  # cross-play: the champions' match in the generation best.pt kept
        return " (the episodes of best.pt's matches)"
    if info.get("seeding") != SEEDING:
        return (f" (best.pt's seed; its fitness {fitness:.3f} was measured by an older evohpo, "
                "on other episodes)")
    return f" (the episodes of best.pt's fitness {fitness:.3f})"


def eval_against(args: argparse.Namespace) -> int:
    from evohpo.logs.loggers import counted
    from evohpo.playback import load
    from evohpo.runtime import evaluate

    if args.render:
        raise ConfigError("--render and --against: render a run's own champions (leave out "
                          "--against)")
    seed = args.seed or 0
    cfg, teams, what, games = load.against(
        Path(args.run), args.member, args.against, args.team, args.episodes, seed)
    for team, returns in games:  # without --team, the champions play each team in turn
        n = len(next(iter(returns.values())))
        print(f"member {args.member} of {args.run} plays {team}; {what} plays "
              f"{', '.join(name for name, _ in teams if name != team)} on {cfg.env.name}: "
              f"{counted(n, 'episode')}, seed {seed}")
        for name, agents in teams:
            total = evaluate.episode_totals(returns, agents)
            who = "member" if name == team else "opponent"
            print(f"    {name + ' (' + who + ')':<28} return {total.mean():9.3f} +- "
                  f"{total.std():.3f}")
    return 0


def cmd_export(args: argparse.Namespace) -> int:
    from evohpo.playback import load

    paths.output_dir(Path(args.out), "--out")
    for p in load.export(Path(args.run), Path(args.out), args.member):
        print(f"wrote {p}")
    return 0


def cmd_envs(args: argparse.Namespace) -> int:
    from evohpo.envs import MPE2_ENVS, probe
    from evohpo.envs.teams import describe_teams

    for name in MPE2_ENVS:
        specs = {mode: probe(name, {"continuous_actions": mode == "continuous"})
                 for mode in ("discrete", "continuous")}
        d = specs["discrete"]
        print(f"{name}  ({MPE2_ENVS[name]}, {len(d.agents)} agents, "
              "action modes: discrete, continuous)")
        print(f"    teams: {describe_teams(d)}")
        for a in d.agents:
            s, c = d[a], specs["continuous"][a]
            print(f"    {a:<18} obs {s.obs_dim:>3}   discrete {s.act_dim}   "
                  f"continuous Box[0,1]^{c.act_dim}")
    print("any PettingZoo ParallelEnv: --env package.module:factory (env.kwargs go to the factory)")
    return 0


def cmd_config(args: argparse.Namespace) -> int:
    for key, doc, default in C.describe_keys():
        print(f"{key:<40} {C.show(default):<24} {doc}")
    return 0


def build_parser() -> Parser:
    p = Parser(prog="evohpo",
               description="Evolve populations of MADDPG, MATD3, IPPO or MAPPO agents on "
                           "PettingZoo envs.")
    p.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    sub = p.add_subparsers(dest="command", required=True, parser_class=Parser)
    t = sub.add_parser("train", help="train a population")
    t.add_argument("--algo", help="maddpg, matd3, ippo or mappo (default from config: matd3)")
    t.add_argument("--env", help="env short name (see 'evohpo envs') or module:factory")
    t.add_argument("--config", help="YAML config file")
    t.add_argument("--steps", type=whole("steps"),
                   help="budget: env steps for the whole population")
    t.add_argument("--seed", type=whole("seed"), help="random seed")
    t.add_argument("--set", action="append", metavar="KEY=VALUE",
                   help="override a config key (repeatable)")
    t.add_argument("--run-dir", help="run directory (default runs/<env>-<algo>-<timestamp>)")
    t.add_argument("--overwrite", action="store_true", help="replace an existing run directory")
    t.add_argument("--quiet", action="store_true",
                   help="no progress bar or per-generation lines, and nothing printed by W&B")
    t.add_argument("--resume", metavar="RUN_DIR",
                   help="continue the run in RUN_DIR from its last checkpoint")
    t.add_argument("--backend", choices=["local", "ray"],
                   help="local: this process; ray: members in Ray actors "
                        "(sets distributed.backend; needs pip install 'evohpo[ray]')")
    t.add_argument("--ray-address", metavar="HOST:PORT",
                   help="run on this Ray cluster (`ray start --head` prints it); "
                        "implies --backend ray; sets distributed.address")
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
                    help="episodes (default: as many as best.pt's score, else the run's "
                         "eval.episodes)")
    ev.add_argument("--seed", type=whole("seed"),
                    help="seed of the evaluation episodes (default: the one best.pt's score was "
                         "measured on, so that eval reproduces it; else 0)")
    ev.add_argument("--render", metavar="OUT.gif|human",
                    help="write an animation of one episode, or show it")
    ev.add_argument("--against", metavar="OPPONENT",
                    help="games of several teams: play the member's team against random, "
                         "heuristic, a member id of this run (of another team), or another run "
                         "directory's champions; prints both teams' returns")
    ev.add_argument("--team", help="with --against: the team the member plays (default: a "
                                   "member's own; the champions play each team in turn, or, "
                                   "against a member, the first team it did not train)")
    ev.set_defaults(func=cmd_eval)
    ex = sub.add_parser("export",
                        help="export a member's actors to run without evohpo (torch.export)")
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
