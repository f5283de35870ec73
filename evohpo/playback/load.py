"""Using a finished (or running) run: load a member, evaluate it, render it, export its actors."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from evohpo import checkpoint
from evohpo import config as C
from evohpo.algos import Algorithm, restore_algo
from evohpo.envs import make_env, spec_for
from evohpo.envs.factory import parameters
from evohpo.envs.frames import Stacker
from evohpo.envs.registry import MPE2_ENVS, factory_of
from evohpo.envs.spec import AgentSpec, EnvSpec, Policy
from evohpo.errors import ConfigError
from evohpo.runtime.evaluate import Teams, scoring_seeds


def run_config(run_dir: Path) -> C.Config:
    p = run_dir / "config.yaml"
    if not p.is_file():
        raise ConfigError(f"{str(run_dir)!r} is not a run directory (no config.yaml in it)")
    return C.load([C.read_yaml(p)])


def load_member(run_dir: Path, which: str = "best", flag: str = "--member",
                ) -> tuple[C.Config, EnvSpec, Algorithm, dict[str, Any]]:
    """The config, env spec, algorithm and record of member ``which`` ('best' or an id; errors
    name it as given to ``flag``).

    On a game of several teams, a member that trains only its own team
    (``games.opponent_actions: played``) comes with the run's champions playing the other
    teams."""
    cfg = run_config(run_dir)
    spec = spec_for(cfg.env)
    ckpts = run_dir / "checkpoints"
    best_path, latest_path = ckpts / "best.pt", ckpts / "latest.pt"
    if which == "best":
        meta, tensors = checkpoint.load(best_path)
        state, info = tensors["algo"], meta["member"]
    else:
        if not which.isdigit():
            raise ConfigError(f"{flag} {which!r}: expected 'best' or a member id (a number)")
        wanted = int(which)
        found = None
        known: list[int] = []
        if latest_path.is_file():
            meta, tensors = checkpoint.load(latest_path)
            for m, st in zip(meta["members"], tensors["members"], strict=True):
                known.append(m["id"])
                if m["id"] == wanted and found is None:
                    found = st, {"id": m["id"], "parent_id": m["parent_id"],
                                 "fitness": (m["fitness"] or [None])[-1], "team": m.get("team")}
        if found is None and best_path.is_file():
            meta, tensors = checkpoint.load(best_path)
            known.append(meta["member"]["id"])
            if meta["member"]["id"] == wanted:
                found = tensors["algo"], meta["member"]
        if found is None:
            raise ConfigError(f"{flag} {wanted}: no such member in {str(ckpts)!r}; "
                              f"known: best, {', '.join(str(k) for k in sorted(set(known)))}")
        state, info = found
    algo = restore_algo(cfg, spec, state, "cpu")
    if which != "best" and algo.learners != spec.agents:
        # a member that trains only its own team has no policy for the others: the run's
        # champions (best.pt) play them
        if not best_path.is_file():
            raise ConfigError(f"{flag} {which}: it plays only team {info.get('team')!r}, and "
                              f"{str(best_path)!r}, whose champions would play the others, "
                              "does not exist yet")
        full = restore_algo(cfg, spec, checkpoint.load(best_path)[1]["algo"], "cpu")
        full.take_agents(algo, algo.learners)
        algo, info = full, {**info, "others": "the run's champions"}
    return cfg, spec, algo, info


def against(run_dir: Path, which: str, opponent: str, team: str | None, episodes: int | None,
            seed: int) -> tuple[C.Config, Teams, str, list[tuple[str, dict[str, np.ndarray]]]]:
    """Member ``which`` of a run on a game of several teams, playing ``team`` against
    ``opponent`` in every other team's seats: ``random``, ``heuristic``, a member id of the same
    run (of another team), or another run directory (its checkpoints/best.pt champions).
    Without ``team``: a member of one team plays its own; an opponent member leaves the first
    team it did not train; otherwise (the run's champions, or a joint member) each team plays
    in turn, on the same episodes.
    Returns (config, teams, the opponent's description, [(team played, per-agent returns)])."""
    from evohpo.envs.heuristics import reference_policy
    from evohpo.runtime.evaluate import play

    cfg, spec, algo, info = load_member(run_dir, which)
    teams: Teams = [(name, tuple(a)) for name, a in (getattr(spec, "teams", None) or {}).items()]
    if len(teams) < 2:
        raise ConfigError(f"--against: {cfg.env.name} is a game of one team; there is no "
                          "opponent to play")
    names = [name for name, _ in teams]
    if team is not None and team not in names:
        raise ConfigError(f"--team {team!r}: {cfg.env.name} has teams {', '.join(names)}")
    other: Policy
    arena = cfg, spec
    oteam = None  # the team an opponent member of this run trained
    if opponent in ("random", "heuristic"):
        other = reference_policy(opponent, spec, cfg.env.name, cfg.env.kwargs, seed)
        what = opponent
    elif opponent.isdigit():
        _, _, other, oinfo = load_member(run_dir, opponent, flag="--against")
        oteam = oinfo.get("team")
        what = f"member {opponent}"
    elif (Path(opponent) / "checkpoints").is_dir():
        ocfg, ospec, other, _ = load_member(Path(opponent), "best")
        if ospec.agents != spec.agents or ocfg.env.name != cfg.env.name:
            raise ConfigError(f"--against {opponent!r}: a run on {ocfg.env.name}, not "
                              f"{cfg.env.name}")
        what = f"the champions of {opponent}"
        if ospec.frames > spec.frames:  # the env as the policy of more stacked observations
            arena = ocfg, ospec         # (env.frames) sees it; the other reads the newest
    else:
        raise ConfigError(f"--against {opponent!r}: expected random, heuristic, a member id or "
                          "a run directory (a folder with checkpoints/ in it)")
    # the member's own team; else (the run's champions) a team the opponent member does not
    # play; else every team in turn
    played = ([team] if team else [info["team"]] if info.get("team")
              else [n for n in names if n != oteam][:1] if oteam is not None else names)
    for t in played:
        if info.get("others") and t != info.get("team"):  # a member that trained one team only
            raise ConfigError(f"--team {t}: member {which} trained team {info.get('team')!r} "
                              f"only (the run's champions play its other seats); play it as "
                              f"{info.get('team')}, or pick a member of {t}")
        if oteam is not None and oteam == t:
            raise ConfigError(f"--against {opponent}: member {opponent} trained team {oteam!r}, "
                              f"the team the member plays; an opponent member plays "
                              f"{' or '.join(n for n in names if n != t)}")
    games = []
    for t in played:
        lineup = [(algo if name == t else other, agents) for name, agents in teams]
        games.append((t, play(arena[0], lineup, arena[1], episodes or cfg.eval.episodes, seed)))
    return cfg, teams, what, games


def cannot_render(env: str, why: str) -> ConfigError:
    return ConfigError(
        f"env {env!r} cannot render: {why}; --render needs an env that takes "
        "render_mode ('rgb_array' for a GIF, 'human' for a window)"
    )


def make_render_env(env: str, kwargs: dict[str, Any], mode: str) -> Any:
    """The env built with ``render_mode=mode``, or a ConfigError saying that it cannot render."""
    if env not in MPE2_ENVS:
        params = parameters(factory_of(env))
        if params is not None and "render_mode" not in params[0] and not params[1]:
            raise cannot_render(env, "its factory takes no render_mode argument")
    try:
        made = make_env(env, {**kwargs, "render_mode": mode})
    except ConfigError as e:
        if "render_mode" in str(e):
            raise cannot_render(env, "its factory refused render_mode") from None
        raise
    if getattr(made, "render_mode", mode) != mode:
        made.close()
        raise cannot_render(env, f"it ignored render_mode={mode!r}")
    return made


def render(cfg: C.Config, algo: Algorithm, target: str, seed: int) -> int:
    """Play the first episode of ``seed`` (the first that ``evohpo eval`` scores); write an
    animated GIF to ``target`` or show it ('human'). Returns frames."""
    human = target == "human"
    if human and not (os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY")):
        raise ConfigError("--render human needs a display and none is available here; "
                          "write a file instead, e.g. --render episode.gif")
    if not human and not target.lower().endswith(".gif"):
        raise ConfigError(f"--render {target!r}: give a .gif file name, or 'human'")
    env = make_render_env(cfg.env.name, cfg.env.kwargs, "human" if human else "rgb_array")
    frames: list[np.ndarray] = []
    try:
        spec = algo.spec
        stack = Stacker(spec, 1)  # env.frames: the last observations side by side

        def observed(obs: dict[str, Any]) -> dict[str, np.ndarray]:
            return {a: np.asarray(obs.get(a, np.zeros(spec.frame_dim(a))), np.float32)[None]
                    for a in spec.agents}

        obs, _ = env.reset(seed=scoring_seeds(seed, 1)[0])
        stack.start(observed(obs))
        frames.append(env.render()) if not human else env.render()
        for _ in range(100_000):
            if not env.agents:
                break
            actions, _ = algo.act(stack.view(), None)
            act = {a: int(actions[a][0, 0]) if algo.spec[a].discrete else actions[a][0]
                   for a in env.agents}
            obs, *_ = env.step(act)
            stack.push(observed(obs))
            frames.append(env.render()) if not human else env.render()
    finally:
        env.close()
    if human:
        return 0
    from evohpo.playback.animation import write_gif

    return write_gif(frames, target)  # a step counter shows where the episode is


class ExportedActor(nn.Module):
    """obs [B, obs_dim], float32 or float64 -> action: [B, act_dim] float32 in [low, high], or [B]
    int64 indices (discrete). One observation is a batch of one: ``obs[None]``."""

    def __init__(self, actor: nn.Module, spec: AgentSpec):
        super().__init__()
        self.actor = actor
        self.discrete = spec.discrete
        self.low, self.high = spec.low, spec.high

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        # an explicit copy stays in the exported program (a same-dtype .to() would be traced away),
        # so float64 observations (numpy's default) are cast, not refused
        out = self.actor(torch.ops.aten._to_copy.default(obs, dtype=torch.float32))
        if self.discrete:
            return out.argmax(dim=1)
        return self.low + (self.high - self.low) * torch.sigmoid(out)


def export(run_dir: Path, out: Path, which: str = "best") -> list[Path]:
    """The member's actors as torch.export programs (load with torch alone) plus spaces.json."""
    import copy

    cfg, spec, algo, info = load_member(run_dir, which)
    out.mkdir(parents=True, exist_ok=True)
    written, spaces = [], {}
    batch = torch.export.Dim("batch", min=1, max=1 << 20)
    for a in spec.agents:
        s = spec[a]
        module = ExportedActor(copy.deepcopy(algo.actors[a]).eval(), s)
        module.requires_grad_(False)  # inference only: outputs need no autograd history
        example = torch.zeros(2, s.obs_dim)
        program = torch.export.export(module, (example,), dynamic_shapes={"obs": {0: batch}})
        path = out / f"{a}.pt2"
        torch.export.save(program, path)
        written.append(path)
        spaces[a] = {"file": path.name,
                     "observation": {"shape": ["B", s.obs_dim], "dtype": "float32 or float64"},
                     "action": ({"type": "discrete", "n": s.act_dim, "output": "int64 index [B]"}
                                if s.discrete
                                else {"type": "box", "shape": [s.act_dim], "low": s.low,
                                      "high": s.high, "output": "float32 [B, dim]"})}
    factory = (f"{MPE2_ENVS[cfg.env.name]}:parallel_env" if cfg.env.name in MPE2_ENVS
               else cfg.env.name if not cfg.env.name.startswith("callable:") else None)
    note = {"env": cfg.env.name, "env_factory": factory, "env_kwargs": cfg.env.kwargs,
            "member": info.get("id"),
            "fitness": info.get("fitness"), "agents": spaces,
            "usage": "import torch; policy = torch.export.load('<agent>.pt2').module(); "
                     "actions = policy(batch)  # batch [B, obs_dim]; one observation: "
                     "policy(torch.as_tensor(obs)[None])[0]"}
    if spec.frames > 1:
        note["frames"] = spec.frames
        note["observation"] = (f"each agent's last {spec.frames} observations side by side, the "
                               "newest first (env.frames); at an episode's start the first one "
                               "repeated; evohpo.playback.exported.Team stacks them")
    (out / "spaces.json").write_text(json.dumps(note, indent=2))
    written.append(out / "spaces.json")
    return written
