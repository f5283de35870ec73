"""Competitive games: does a population per team (cross-play fitness) learn to win, and does it
beat one population scored on the sum of every agent's return?

    python benchmarks/competitive.py --env simple_tag --steps 1000000 --seeds 0,1,2 \\
        --jobs 2 --out runs/competitive

For each seed, two runs of the shipped MATD3 preset at equal env steps, with the scripted
heuristic opponents and reward shaping off whatever the preset ships: ``teams`` (a
population per team) and ``joint`` (``population.teams: joint``: one population, fitness the
sum over all agents). The teams run keeps its champions of generation 0 and of 25% and 50% of
the run (copies of ``checkpoints/best.pt`` taken as it trains, ``champions/atN.pt``), and every
generation's under ``champions/generations/``, so that a longer run extending it (``--extend``)
has the champions of its own 25% and 50%; an extended run also keeps the other champions the
shorter run kept (its marks and its last), each as the one of its share of the budget. Then,
on ``--episodes`` fresh episodes per pairing (seed 10**6 + run seed):

1. *Champions against references.* Each team's final champion (a joint run's champion too,
   seat by seat) plays its own seat against the other team played by a random policy and by
   the scripted heuristic. Beside it, the reference's own return in that seat against the same
   opponents, on the same episodes: the champion beats the reference when the paired
   difference's 95% interval is above zero (below: it loses; across zero: within noise). The
   champions of generation 0, 25% and 50% it meets head to head: in its seat, the final
   champion minus the earlier one against the earlier one's other team and against the final
   champion's own, each episode's mean of the two deciding the same way. (Against the earlier
   one's other team alone, the earlier champion plays the opponents its team was selected
   against, and an early opponent that loses to everyone tells no two policies apart.) An
   earlier champion that is the final one's own snapshot (a joint run keeps one member until
   a better one displaces it) is not played: its rows say "the same snapshot".
2. *Teams against joint.* In each seat, the teams run's policy and the joint run's policy
   each play against both runs' other team; the table gives the teams run's return minus the
   joint run's, averaged over the two opponents (and beside it, against each run's other team
   alone): above zero, the team-evolved policy plays its seat better. Mean over seeds with a
   95% t interval. Every other mode (``--modes``; each is a few config overrides on top of the
   preset, in ``MODES`` below, with what it changes) meets the runs it changes the same way
   (``PAIRS``), and its champions' table against the fixed references (random play, the
   heuristic) is paired with the run it changes (``BASES``).
``--at 50`` plays, instead of each run's last champions, those it kept half-way (against the
earlier ones), training nothing: the runs of twice the budget at half of it. Finished runs are
kept and skipped when run again; a run stopped part way goes on from its last
checkpoint (the same run, as a run resumes exactly).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import os
import shutil
import time
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from pathlib import Path
from typing import Any

import numpy as np

from evohpo.config import parse_dotted
from evohpo.errors import Interrupted
from evohpo.report.compare import t95  # two-sided 95% t quantiles

MARKS = (0.0, 0.25, 0.5)  # the fractions of the run whose champions are kept
# every mode starts from the preset with these off, so that a mode means the same run whatever a
# preset ships (the simple_adversary and simple_tag presets play the heuristic, simple_tag's
# takes five gradient steps per learn, simple_adversary's two, starts 128 wide and takes its
# critics' targets from learned models of the other team; see benchmarks/README.md)
PLAIN: dict[str, Any] = {"population.scripted_opponents": 0.0,
                         "population.scripted_teams": None, "env.shaping": {},
                         "algo.gradient_steps": 1, "env.frames": 1, "algo.hidden": [64, 64],
                         "population.opponent_actions": "played", "algo.team_gradient_steps": {},
                         "population.team_opponent_actions": {}}
# teams, in half of each slot's envs one team's member plays the scripted heuristic
SCRIPTED: dict[str, Any] = {"population.teams": "auto", "population.scripted_opponents": 1.0}
# scripted, each agent seeing its last two observations (env.frames), so its velocity
FRAMED: dict[str, Any] = {**SCRIPTED, "env.frames": 2}
# framed, actors and critics starting 128 wide: the simple_adversary preset before it took
# learned targets and two gradient steps (framed_wide_learned_updates)
WIDE: dict[str, Any] = {**FRAMED, "algo.hidden": [128, 128]}
# framed_wide, each member also learning its own model of the other team (framed_wide_learned)
LEARNED: dict[str, Any] = {**WIDE, "population.opponent_actions": "learned"}
# framed_wide_learned with two gradient steps per learn: the simple_adversary preset
LEARNED_UPDATES: dict[str, Any] = {**LEARNED, "algo.gradient_steps": 2}
# one population driving every agent (the all-agent sum) at framed_wide's two frames and width
WIDE_JOINT: dict[str, Any] = {"population.teams": "joint", "env.frames": 2,
                              "algo.hidden": [128, 128]}
# framed_wide_joint with two gradient steps per learn: the all-agent sum at the
# simple_adversary preset's updates per env step
WIDE_JOINT_UPDATES: dict[str, Any] = {**WIDE_JOINT, "algo.gradient_steps": 2}
# the simple_tag preset (scripted, five gradient steps per learn) with the predators shaped
UPDATES_SHAPED: dict[str, Any] = {**SCRIPTED, "algo.gradient_steps": 5,
                                  "env.shaping": {"adversaries": 1.0}}
# one population driving every agent (the all-agent sum) at the simple_tag preset's settings
UPDATES_SHAPED_JOINT: dict[str, Any] = {"population.teams": "joint", "algo.gradient_steps": 5,
                                        "env.shaping": {"adversaries": 1.0}}
MODES: dict[str, dict[str, Any]] = {
    "teams": {"population.teams": "auto"},                            # a population per team
    "joint": {"population.teams": "joint"},                           # the all-agent sum
    "elo": {"population.teams": "auto", "eval.team_fitness": "elo"},  # teams, rated by Elo
    # teams, half of the training envs against champions of earlier generations
    "past": {"population.teams": "auto", "population.past_opponents": 8},
    # teams, each evolved by PBT (truncation, the cooperative default) instead of the tournament
    "pbt": {"population.teams": "auto", "evolution.strategy": "truncation"},
    # teams whose members also learn their own model of the other team (the critics' targets
    # take its next actions instead of the ones played)
    "learned": {"population.teams": "auto", "population.opponent_actions": "learned"},
    "scripted": SCRIPTED,
    # scripted, and the simple_tag predators' rewards shaped by their potential (env.shaping)
    "shaped": {**SCRIPTED, "env.shaping": {"adversaries": 1.0}},
    # scripted, with five gradient steps where the preset takes one (0.2 per env step, not 0.04)
    "updates": {**SCRIPTED, "algo.gradient_steps": 5},
    # updates, and the predators' rewards shaped as in shaped
    "updates_shaped": UPDATES_SHAPED,
    # updates_shaped, with half of each member's fitness from a match against the heuristic
    "shaped_anchored": {**UPDATES_SHAPED, "eval.heuristic_weight": 0.5},
    # updates_shaped, the heuristic playing the prey only: the predators' members meet it in
    # half of every slot's envs, the prey's members meet learned predators alone
    "shaped_adv": {**UPDATES_SHAPED, "population.scripted_teams": ["adversaries"]},
    # shaped_adv for the first 1M env steps (population.scripted_teams_until), then
    # updates_shaped: the heuristic prey for the predators first, then both teams in turn
    "adv_first": {**UPDATES_SHAPED, "population.scripted_teams": ["adversaries"],
                  "population.scripted_teams_until": 1_000_000},
    # scripted, with half of each member's fitness from a match against the heuristic
    "anchored": {**SCRIPTED, "eval.heuristic_weight": 0.5},
    # scripted, with half the exploration and target-smoothing noise (0.05 where it is 0.1)
    "precise": {**SCRIPTED, "algo.expl_noise": 0.05, "algo.target_noise": 0.05},
    # scripted, with three gradient steps per learn and fitness half from the heuristic match
    "guarded": {**SCRIPTED, "algo.gradient_steps": 3, "eval.heuristic_weight": 0.5},
    # scripted, with 2 members per team where the preset has 4: each gets twice the env steps
    # and updates of the same budget
    "pairs": {**SCRIPTED, "population.size": 2},
    # scripted, with a hundred times the penalty on the actors' raw outputs (algo.action_reg)
    "damped": {**SCRIPTED, "algo.action_reg": 0.1},
    # scripted, each agent seeing its last two observations (env.frames), so its velocity
    "framed": FRAMED,
    # scripted, each agent seeing its last three observations
    "framed3": {**SCRIPTED, "env.frames": 3},
    # joint, each agent seeing its last two observations
    "framed_joint": {"population.teams": "joint", "env.frames": 2},
    # framed, with 2 members per team (as pairs)
    "framed_pairs": {**FRAMED, "population.size": 2},
    # framed, with three gradient steps per learn and fitness half from the heuristic match
    # (guarded with two frames)
    "framed_guarded": {**FRAMED, "algo.gradient_steps": 3, "eval.heuristic_weight": 0.5},
    # framed, the heuristic playing the adversaries' seats only: the good agents' member meets
    # it in half of every slot's envs, not of every other slot's
    "framed_good": {**FRAMED, "population.scripted_teams": ["good"]},
    # framed, each match 32 episodes where the preset plays 8: half the standard error of the
    # fitness that selection reads
    "framed_sure": {**FRAMED, "eval.episodes": 32},
    # framed, the heuristic drawn for half the slots per window where framed draws it for all
    "framed_half": {**FRAMED, "population.scripted_opponents": 0.5},
    # framed, every member's learning rates falling over the second half of the run to a tenth
    "framed_decay": {**FRAMED, "algo.lr_decay": 0.1, "algo.lr_decay_start": 0.5},
    # framed, half of each member's fitness from a match against the heuristic
    "framed_anchored": {**FRAMED, "eval.heuristic_weight": 0.5},
    # framed, actors and critics starting 128 wide where the preset's start 64 wide
    "framed_wide": WIDE,
    # framed, discounting by 0.99 where the preset discounts by 0.95 (a horizon of about 100
    # steps, not 20: the whole 25-step episode counts)
    "framed_far": {**FRAMED, "algo.gamma": 0.99},
    # framed_wide, with half of the slots playing champions of earlier generations instead of
    # the heuristic (fictitious self-play beside it): each team also meets opponents that have
    # not adapted to it
    "framed_wide_past": {**WIDE, "population.scripted_opponents": 0.5,
                         "population.past_opponents": 8},
    # framed_wide, the heuristic playing the good agents' seats only: the adversaries' members
    # meet it, the good agents' train against learned adversaries alone
    "framed_wide_adv": {**WIDE, "population.scripted_teams": ["adversaries"]},
    # framed_wide, each member also learning its own model of the other team, whose next
    # actions the critics' targets take (as a member driving every agent does): targets
    # against an opponent trained to answer the member's own policies
    "framed_wide_learned": LEARNED,
    # framed_wide_learned, with half of each member's fitness from a match against the
    # heuristic: selection that sees the bar the learned targets lost ground on
    "framed_wide_learned_anchored": {**LEARNED, "eval.heuristic_weight": 0.5},
    # framed_wide_learned, except that the critics' targets take the heuristic's next actions
    # as played where it played the other team (population.opponent_actions: mixed): the model
    # of the other team stands in for the learned opponents only
    "framed_wide_mixed": {**WIDE, "population.opponent_actions": "mixed"},
    # framed_wide_learned, with two gradient steps per learn where it takes one: the critics,
    # actors and the model of the other team each get twice the updates per env step (the
    # simple_adversary preset)
    "framed_wide_learned_updates": LEARNED_UPDATES,
    # framed_wide_learned_updates with the adversaries' members back at one gradient step per
    # learn (algo.team_gradient_steps): more updates had cost them against the heuristic
    "framed_wide_learned_split": {**LEARNED_UPDATES,
                                  "algo.team_gradient_steps": {"adversaries": 1}},
    # each team at the settings measured best for it: the good agents as the preset (learned
    # targets, two gradient steps per learn), the adversaries as framed_wide (played targets,
    # one gradient step), which had them ahead of the all-agent sum head to head
    "framed_wide_per_team": {**LEARNED_UPDATES, "algo.team_gradient_steps": {"adversaries": 1},
                             "population.team_opponent_actions": {"adversaries": "played"}},
    # the simple_adversary preset with the adversaries' share of the heuristic going to
    # champions of earlier generations: in half of the slots (drawn) the good agents' member
    # meets the heuristic, as often as in the preset where the teams take turns in every slot;
    # in the other half the adversaries' member meets earlier good agents, not the current ones
    # alone (population.past_teams), which need not have learned to hide the goal from it
    "framed_wide_past_adv": {**LEARNED_UPDATES, "population.scripted_opponents": 0.5,
                             "population.scripted_teams": ["good"],
                             "population.past_opponents": 8,
                             "population.past_teams": ["adversaries"]},
    # the simple_adversary preset with 2 members per team where it has 4: each member collects
    # twice the env steps of the same budget and takes twice the updates (pairs, at the
    # preset's settings)
    "framed_wide_pairs": {**LEARNED_UPDATES, "population.size": 2},
    # the simple_tag preset (updates_shaped) with 2 members per team where it has 4: each
    # member collects twice the env steps of the same budget and takes twice the updates (the
    # predators beat the heuristic in every seed only once the 2M runs went on to 3M)
    "updates_shaped_pairs": {**UPDATES_SHAPED, "population.size": 2},
    # the simple_tag preset with 8 members per team where it has 4 (and 16 envs, so that each
    # slot keeps one env against the heuristic): each member collects half the env steps of the
    # same budget and takes half the updates, among twice as many opponents to select against
    "updates_shaped_eights": {**UPDATES_SHAPED, "population.size": 8, "env.num_envs": 16},
    # the simple_tag preset with actors and critics starting 128 wide where it starts 64 wide
    # (as the simple_adversary preset does): a critic over every agent's observation and action
    # with twice the units per layer
    "updates_shaped_wide": {**UPDATES_SHAPED, "algo.hidden": [128, 128]},
    # joint at the simple_tag preset's settings (five gradient steps per learn, the predators
    # shaped): the all-agent sum beside that preset
    "updates_shaped_joint": UPDATES_SHAPED_JOINT,
    # updates_shaped_joint 128 wide: the all-agent sum beside updates_shaped_wide
    "updates_shaped_wide_joint": {**UPDATES_SHAPED_JOINT, "algo.hidden": [128, 128]},
    # joint at framed_wide's settings (two frames, 128 wide): the all-agent sum beside the
    # former simple_adversary preset
    "framed_wide_joint": WIDE_JOINT,
    # framed_wide_joint with two gradient steps per learn: the all-agent sum beside the
    # simple_adversary preset at its own updates per env step
    "framed_wide_joint_updates": WIDE_JOINT_UPDATES,
    # framed_wide_joint_updates with 2 members where it has 4: the all-agent sum beside
    # framed_wide_pairs
    "framed_wide_joint_pairs": {**WIDE_JOINT_UPDATES, "population.size": 2},
}
# the variants of scripted: each meets the scripted and joint runs (the first two the teams run
# too) and pairs its reference table with the scripted run
VARIANTS = ("shaped", "updates", "anchored", "precise", "guarded", "pairs", "damped", "framed",
            "framed_pairs", "framed3")
# the variants of framed: each meets the framed run and pairs its reference table with it
FRAMED_VARIANTS = ("framed3", "framed_guarded", "framed_good", "framed_sure", "framed_half",
                   "framed_decay", "framed_anchored", "framed_wide", "framed_far")
# the variants of framed_wide: each meets the framed_wide and framed_wide_joint runs and pairs
# its reference table with the framed_wide run
WIDE_VARIANTS = ("framed_wide_past", "framed_wide_adv", "framed_wide_learned",
                 "framed_wide_learned_anchored", "framed_wide_mixed",
                 "framed_wide_learned_updates", "framed_wide_learned_split",
                 "framed_wide_per_team")
# the variants of the simple_adversary preset (framed_wide_learned_updates): each also meets
# the preset's run and the two-step sum's
PRESET_VARIANTS = ("framed_wide_learned_split", "framed_wide_per_team", "framed_wide_past_adv",
                   "framed_wide_pairs")
PAIRS = (("teams", "joint"), ("elo", "teams"), ("past", "teams"), ("pbt", "teams"),
         ("teams", "learned"), ("scripted", "teams"), ("scripted", "joint"),
         *((v, b) for v in VARIANTS
           for b in (("scripted", "teams", "joint") if v in ("shaped", "updates")
                     else ("scripted", "joint"))),
         ("framed_pairs", "pairs"), ("framed", "framed_joint"),
         ("framed_wide", "framed_wide_joint"),
         ("framed_wide_learned_updates", "framed_wide_learned"),
         ("framed_wide_learned_updates", "framed_wide_joint_updates"),
         ("framed_wide_pairs", "framed_wide_joint_pairs"),
         *((v, b) for v in PRESET_VARIANTS
           for b in ("framed_wide_learned_updates", "framed_wide_joint_updates")),
         *((v, b) for v in WIDE_VARIANTS for b in ("framed_wide", "framed_wide_joint")),
         ("updates_shaped", "updates"), ("shaped_anchored", "updates_shaped"),
         ("shaped_adv", "updates_shaped"), ("shaped_adv", "updates_shaped_joint"),
         ("adv_first", "updates_shaped"), ("adv_first", "updates_shaped_joint"),
         ("adv_first", "shaped_adv"),
         ("updates_shaped", "updates_shaped_joint"),
         ("updates_shaped_pairs", "updates_shaped"),
         ("updates_shaped_pairs", "updates_shaped_joint"),
         ("updates_shaped_eights", "updates_shaped"),
         ("updates_shaped_eights", "updates_shaped_joint"),
         ("updates_shaped_wide", "updates_shaped"), ("updates_shaped_wide", "updates_shaped_joint"),
         ("updates_shaped_wide", "updates_shaped_wide_joint"),
         *((v, "framed") for v in FRAMED_VARIANTS))  # head to head
# each variant's champions against the references, paired with the run it changes
BASES = {"past": "teams", "pbt": "teams", "learned": "teams", "scripted": "teams",
         **{v: "scripted" for v in VARIANTS}, "framed_pairs": "pairs",
         "updates_shaped": "updates", "shaped_anchored": "updates_shaped",
         "shaped_adv": "updates_shaped", "adv_first": "updates_shaped",
         "updates_shaped_pairs": "updates_shaped", "updates_shaped_eights": "updates_shaped",
         "updates_shaped_wide": "updates_shaped",
         **{v: "framed" for v in FRAMED_VARIANTS}, **{v: "framed_wide" for v in WIDE_VARIANTS},
         "framed_joint": "framed", "framed_wide_joint": "framed_wide",
         "framed_wide_joint_updates": "framed_wide_learned_updates",
         "framed_wide_past_adv": "framed_wide_learned_updates",
         "framed_wide_pairs": "framed_wide_learned_updates",
         "framed_wide_joint_pairs": "framed_wide_pairs",
         "updates_shaped_joint": "updates_shaped",
         "updates_shaped_wide_joint": "updates_shaped_wide"}


def run_dir(out: Path, env: str, mode: str, seed: int) -> Path:
    return out / f"{env}-{mode}-s{seed}"


def generation(d: Path, g: int) -> Path:
    """Where run ``d`` keeps the champion of its generation ``g``."""
    return d / "champions" / "generations" / f"g{g}.pt"


def kept_at(d: Path, pct: int) -> Path:
    """Where run ``d`` keeps its champion of ``pct``% into the run."""
    return d / "champions" / f"at{pct}.pt"


def windows_of(cfg: Any, steps: int) -> int:
    """Generations in a run of ``steps`` env steps."""
    return max(1, math.ceil(steps / (cfg.evolution.evo_steps * cfg.population.size)))


def marks_of(cfg: Any, steps: int) -> dict[int, float]:
    """The generations whose champions a run of ``steps`` env steps keeps: {generation: f}."""
    return {round(f * (windows_of(cfg, steps) - 1)): f for f in MARKS}


def checkpointed(d: Path, cfg: Any) -> int | None:
    """The env steps of the last checkpoint in ``d`` if ``d`` holds this very run (config
    ``cfg``), else None."""
    from evohpo import checkpoint
    from evohpo.playback import run_config

    if not (d / "checkpoints" / "latest.pt").is_file() or run_config(d) != cfg:
        return None
    return int(checkpoint.load_latest(d)[0]["env_steps"])


def train(env: str, mode: str, seed: int, steps: int, out: Path,
          extra: dict[str, Any], extend: Path | None = None,
          until: int | None = None) -> dict[str, Any]:
    """One run; with ``extend``, the same run of fewer steps there is copied and resumed up to
    ``steps`` (a run resumes exactly, so this is the run of ``steps`` from the start), keeping
    the champions it already holds of this run's marks. A run stopped part way goes on from its
    own last checkpoint. With ``until``, the run of ``steps`` stops (checkpointed) after the
    first generation that reaches ``until`` env steps: the result has ``stopped_at``."""
    from evohpo import api
    from evohpo.playback import run_config

    d = run_dir(out, env, mode, seed)
    overrides = {"env.pool": "sync", **PLAIN, **MODES[mode], **extra}
    src = None if extend is None else run_dir(extend, env, mode, seed)
    cfg = (api.resolve(algo="matd3", env=env, steps=steps, seed=seed, overrides=overrides)[0]
           if src is None else run_config(src))  # extended: the run's own config
    marks = marks_of(cfg, steps)
    keep = d / "champions"

    def snapshot(info: Any) -> None:
        # every generation's champion (so that a longer run extending this one has its own
        # marks), and under atN.pt the ones of this run's marks
        generation(d, info.generation).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(d / "checkpoints" / "best.pt", generation(d, info.generation))
        if (f := marks.get(info.generation)) is not None:
            shutil.copy(d / "checkpoints" / "best.pt", kept_at(d, int(100 * f)))

    def far_enough(info: Any) -> bool:
        return until is not None and info.env_steps >= until

    callbacks = [snapshot, far_enough]  # joint runs too: --at plays them against their earlier
    t0 = time.perf_counter()            # champions
    # this run, fresh or extended, stopped part way (or finished unlogged): it goes on from
    # its own last checkpoint
    reached = checkpointed(d, cfg if src is None else dataclasses.replace(cfg, steps=steps))
    if reached is not None:
        if reached < (steps if until is None else min(steps, until)):  # not yet as far as asked
            reached = api.resume(d, callbacks=callbacks).summary["env_steps"]
    elif src is None:
        reached = api.train(algo="matd3", env=env, steps=steps, seed=seed, overrides=overrides,
                            run_dir=d, overwrite=True, callbacks=callbacks).summary["env_steps"]
    else:
        shorter = cfg.steps
        if d.exists():
            shutil.rmtree(d)
        shutil.copytree(src, d, ignore=shutil.ignore_patterns("at*.pt"))  # its own marks
        # the champions it kept: its marks', its last generation's, and from its archive
        # those of our marks
        last = windows_of(cfg, shorter) - 1
        have = {g: kept_at(src, int(100 * f)) for g, f in marks_of(cfg, shorter).items()}
        have[last] = src / "checkpoints" / "best.pt"
        have.update({g: generation(src, g) for g in marks if generation(src, g).exists()})
        keep.mkdir(exist_ok=True)
        windows = windows_of(cfg, steps)
        for g, path in have.items():
            # ours at a mark; else an earlier champion of this run at its share of the budget
            # (generation g ends (g + 1) / windows into it)
            to = kept_at(d, int(100 * marks[g]) if g in marks else round(100 * (g + 1) / windows))
            if path.exists() and (g in marks or not to.exists()):  # a mark's name is its own
                shutil.copy(path, to)
        lost = [g for g in marks if g <= last and (g not in have or not have[g].exists())]
        if lost:
            print(f"{d.name}: {src} kept no champions of generations {lost}", flush=True)
        reached = api.resume(d, steps=steps, callbacks=callbacks).summary["env_steps"]
    return {"env": env, "mode": mode, "seed": seed, "steps": steps,
            "wall_s": time.perf_counter() - t0, **({"extended": str(extend)} if extend else {}),
            **({"stopped_at": reached} if reached < steps else {})}


def load(path: Path, d: Path) -> Any:
    """The algorithm in a best.pt-like file of run ``d``."""
    from evohpo import checkpoint
    from evohpo.algos import restore_algo
    from evohpo.envs import spec_for
    from evohpo.playback import run_config

    cfg = run_config(d)
    _, tensors = checkpoint.load(path)
    return restore_algo(cfg, spec_for(cfg.env), tensors["algo"], "cpu")


class Arena:
    """Matches on one env: each team's mean return per episode, on the same episodes."""

    def __init__(self, d: Path, episodes: int, seed: int):
        from evohpo.envs import spec_for
        from evohpo.play import eval_pool
        from evohpo.playback import run_config

        self.cfg = run_config(d)
        self.spec = spec_for(self.cfg.env)
        self.teams = self.spec.team_list()
        self.pool = eval_pool(self.cfg, self.spec, episodes)
        self.seed = seed

    def play(self, seats: list[Any]) -> list[np.ndarray]:
        """Each team's per-episode return, team ``t`` played by ``seats[t]``."""
        from evohpo.play import team_returns

        return team_returns(seats, self.teams, self.pool, self.seed)

    def seat(self, policy: Any, t: int, opponent: Any) -> np.ndarray:
        """Team ``t``'s per-episode return, played by ``policy``, every other team by
        ``opponent``."""
        seats = [opponent] * len(self.teams)
        seats[t] = policy
        return self.play(seats)[t]

    def against(self, final: list[Any], lineup: list[Any]) -> list[tuple[np.ndarray, np.ndarray]]:
        """Per seat ``t``: ``final[t]``'s per-episode return in seat ``t`` against ``lineup``'s
        other seats, and beside it ``lineup[t]``'s own there (the bar), on the same episodes."""
        bars = self.play(lineup)  # the lineup as it is: every seat's bar at once
        out = []
        for t in range(len(self.teams)):
            seats = list(lineup)
            seats[t] = final[t]
            out.append((self.play(seats)[t], bars[t]))
        return out

    def meet(self, a: list[Any], b: list[Any],
             played: list[np.ndarray] | None = None) -> list[tuple[np.ndarray, np.ndarray]]:
        """Per seat ``t``: ``a[t]``'s per-episode return minus ``b[t]``'s, each in seat ``t``
        against ``a``'s other seats and then against ``b``'s (two paired differences, on the
        same episodes). ``played``: ``self.play(a)``, where the caller has it already."""
        home = played or self.play(a), self.play(b)  # each lineup as it is: every seat at once
        out = []
        for t in range(len(self.teams)):
            a_there, b_here = list(b), list(a)  # a[t] against b's others, b[t] against a's
            a_there[t], b_here[t] = a[t], b[t]
            out.append((home[0][t] - self.play(b_here)[t], self.play(a_there)[t] - home[1][t]))
        return out

    def reference(self, kind: str) -> Any:
        from evohpo.references import reference_policy

        e = self.cfg.env
        return reference_policy(kind, self.spec, e.name, e.kwargs, self.seed)


def champion(d: Path, at: int | None) -> Path:
    """Run ``d``'s last champion, or with ``at`` the one it kept ``at``% into the run."""
    return d / "checkpoints" / "best.pt" if at is None else kept_at(d, at)


def verdict(d: np.ndarray) -> tuple[float, str]:
    """The 95% half-width of paired per-episode differences ``d``, and whether their mean is
    above zero ("yes"), below ("no") or neither ("within noise")."""
    half = paired_half(d)
    return half, ("yes" if d.mean() - half > 0 else "no" if d.mean() + half < 0
                  else "within noise")


def evaluate(out: Path, env: str, seed: int, episodes: int, mode: str,
             at: int | None) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The run's champion (with ``at``, the one it kept ``at``% into the run) on the seed's
    evaluation episodes: its rows against the references and against its earlier champions."""
    d = run_dir(out, env, mode, seed)
    path = champion(d, at)
    arena, champ = Arena(d, episodes, 10**6 + seed), load(path, d)
    key = {"env": env, "seed": seed, "mode": mode}
    return (against_references(arena, champ, env, key),
            against_earlier(arena, champ, path, d, at, key))


def against_references(arena: Arena, champ: Any, env: str,
                       key: dict[str, Any]) -> list[dict[str, Any]]:
    """Each seat of ``champ`` against a random policy and the scripted heuristic, beside the
    reference's own return in the seat against the same other team."""
    refs: dict[str, Any] = {"random": arena.reference("random")}
    from evohpo.references import heuristic_available

    if heuristic_available(env):
        refs["heuristic"] = arena.reference("heuristic")
    rows = []
    T = len(arena.teams)
    for name, ref in refs.items():
        for (team, _), (got, bar) in zip(arena.teams, arena.against([champ] * T, [ref] * T),
                                          strict=True):
            diff = got - bar  # the same episodes (one seed): a paired difference
            half, beats = verdict(diff)
            rows.append({**key, "team": team, "reference": name,
                         "champion": float(got.mean()), "champion_sd": float(got.std()),
                         "bar": float(bar.mean()), "bar_sd": float(bar.std()),
                         "diff": float(diff.mean()), "diff_half": half, "beats": beats})
    return rows


def snapshot(path: Path) -> list[Any]:
    """The tensors of the algorithm state in a best.pt-like file, in order."""
    import torch

    from evohpo import checkpoint

    def leaves(x: Any) -> list[Any]:
        if isinstance(x, torch.Tensor):
            return [x]
        items = x.values() if isinstance(x, dict) else x if isinstance(x, list | tuple) else []
        return [t for v in items for t in leaves(v)]

    return leaves(checkpoint.load(path)[1]["algo"])


def same_snapshot(a: list[Any], b: list[Any]) -> bool:
    """Whether two ``snapshot``s are equal tensor for tensor: the same member's snapshot (a run
    whose selection keeps one member keeps it at every mark)."""
    import torch

    return len(a) == len(b) and all(x.shape == y.shape and torch.equal(x, y)
                                    for x, y in zip(a, b, strict=True))


def against_earlier(arena: Arena, champ: Any, path: Path, d: Path, at: int | None,
                    key: dict[str, Any]) -> list[dict[str, Any]]:
    """``champ`` (from ``path``) head to head with the earlier champions run ``d`` kept
    (``atN.pt``: of the generation N% into the run; with ``at``, only those before it), seat by
    seat: the champion minus the earlier one, each against the earlier champion's other team
    and against the champion's own (as runs meet in ``head_to_head``), and the mean of the
    two. An earlier champion that is the champion itself (the same snapshot) is not played:
    its rows say so, where a match would give a difference of exactly zero."""
    kept = sorted((p for p in (d / "champions").glob("at*.pt")
                   if at is None or int(p.stem[2:]) < at), key=lambda p: int(p.stem[2:]))
    rows = []
    T = len(arena.teams)
    own = arena.play([champ] * T)  # the champion against itself: the same in every meeting
    mine = snapshot(path)
    for p in kept:
        if same_snapshot(mine, snapshot(p)):
            rows += [{**key, "team": team, "earlier": f"gen {p.stem[2:]}%", "same": True,
                      "beats": "the same snapshot"} for team, _ in arena.teams]
            continue
        earlier = load(p, d)
        for (team, _), (home, away) in zip(arena.teams,
                                           arena.meet([champ] * T, [earlier] * T, own),
                                           strict=True):
            both = (home + away) / 2  # per episode: the two opponents weigh the same
            half, beats = verdict(both)
            rows.append({**key, "team": team, "earlier": f"gen {p.stem[2:]}%",
                         "theirs": float(away.mean()), "theirs_half": paired_half(away),
                         "ours": float(home.mean()), "ours_half": paired_half(home),
                         "diff": float(both.mean()), "diff_half": half, "beats": beats})
    return rows


def head_to_head(out: Path, env: str, seed: int, episodes: int, mode: str,
                 other: str, at: int | None = None) -> list[dict[str, Any]]:
    """Per seat: run ``mode``'s policy minus run ``other``'s, each against both runs' other
    team(s), on the same episodes."""
    da, db = run_dir(out, env, mode, seed), run_dir(out, env, other, seed)
    arena = Arena(da, episodes, 10**6 + seed)
    a, b = load(champion(da, at), da), load(champion(db, at), db)
    rows = []
    T = len(arena.teams)
    for (team, _), deltas in zip(arena.teams, arena.meet([a] * T, [b] * T), strict=True):
        mine, theirs = (float(d.mean()) for d in deltas)
        rows.append({"env": env, "seed": seed, "team": team, "delta": (mine + theirs) / 2,
                     f"vs_{mode}_opponent": mine, f"vs_{other}_opponent": theirs})
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--env", default="simple_tag", help="comma-separated envs")
    ap.add_argument("--steps", type=int, default=1_000_000)
    ap.add_argument("--seeds", default="0,1,2")
    ap.add_argument("--modes", default="teams,joint",
                    help=f"comma-separated, of {', '.join(MODES)} (each a few config "
                         "overrides, in MODES at the top of this file); head to head: "
                         + ", ".join(f"{x} vs {y}" for x, y in PAIRS))
    ap.add_argument("--episodes", type=int, default=200, help="fresh episodes per pairing")
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                    help="an override for every run (repeatable)")
    ap.add_argument("--out", default="runs/competitive")
    ap.add_argument("--extend", metavar="DIR",
                    help="a --out of shorter runs: each run is that run copied and resumed up "
                         "to --steps (the same run, as it resumes exactly), not trained anew")
    ap.add_argument("--until", type=int, metavar="STEPS",
                    help="train the runs of --steps only as far as STEPS env steps (each stops, "
                         "checkpointed, after the first generation that reaches it, keeping the "
                         "champions of --steps' marks it passed) and evaluate nothing; the same "
                         "command without --until goes on to --steps")
    ap.add_argument("--at", type=int, choices=[int(100 * m) for m in MARKS if m],
                    help="train nothing; play each run's champion kept this %% into the run "
                         "(against the earlier ones) instead of its last: the runs of 2M env "
                         "steps at 50 are the runs of 1M")
    args = ap.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    extra = dict(parse_dotted(text) for text in args.set)  # read as YAML, as `evohpo --set`
    envs, seeds = args.env.split(","), [int(s) for s in args.seeds.split(",")]
    log = out / "runs.jsonl"
    done = [json.loads(x) for x in log.read_text().splitlines()] if log.exists() else []
    have = {(r["env"], r["mode"], r["seed"]) for r in done if r["steps"] == args.steps}
    modes = args.modes.split(",")
    todo = [(e, m, s) for e in envs for s in seeds for m in modes
            if (e, m, s) not in have and args.at is None]
    if todo:
        print(f"{len(todo)} runs of {args.steps:,} env steps, {args.jobs} at a time", flush=True)
        os.environ.setdefault("WANDB_MODE", "disabled")
        failed: list[str] = []
        queue = iter(todo)
        with ProcessPoolExecutor(args.jobs) as pool:
            extend = Path(args.extend) if args.extend else None
            running: dict[Future[dict[str, Any]], str] = {}

            def start_next() -> None:  # one at a time, so that a stop leaves none queued
                for e, m, s in queue:
                    running[pool.submit(train, e, m, s, args.steps, out, extra, extend,
                                        args.until)] = f"{e} {m} s{s}"
                    break

            for _ in range(args.jobs):
                start_next()
            stop = False
            while running:
                try:
                    finished = wait(running, return_when=FIRST_COMPLETED).done
                except KeyboardInterrupt:  # the runs had it too: they checkpoint and stop
                    stop = True
                    continue
                for fut in finished:
                    name = running.pop(fut)
                    try:
                        r = fut.result()
                    except (Exception, KeyboardInterrupt) as e:  # the other runs go on
                        failed.append(f"{name}: {str(e) or repr(e)}")
                        print(failed[-1], flush=True)
                        # stopped from outside: start no more
                        stop = stop or isinstance(e, (Interrupted, KeyboardInterrupt))
                    else:
                        if "stopped_at" in r:  # at --until: not finished, not logged
                            print(f"{name}: at {r['stopped_at']:,} env steps "
                                  f"({r['wall_s']:.0f}s)", flush=True)
                        else:
                            with open(log, "a") as f:
                                f.write(json.dumps(r) + "\n")
                            print(f"{name}: {r['wall_s']:.0f}s", flush=True)
                    if not stop:
                        start_next()
        if failed:
            raise SystemExit(f"{len(failed)} of {len(todo)} runs did not finish; the same "
                             "command goes on from each one's last checkpoint")
    if args.until is not None and args.until < args.steps:
        return  # the runs are not finished: nothing to evaluate
    for env in envs:
        reached = "" if args.at is None else f", their champions at {args.at}%"
        print(f"\n{env}, MATD3, runs of {args.steps:,} env steps{reached}, {args.episodes} "
              "episodes per pairing")
        refs: dict[str, list[dict[str, Any]]] = {}
        for mode in modes:  # a joint run's champion plays each seat too
            print(f"\n{mode} runs\n\n| seed | team | reference | champion (mean +- sd) | "
                  "reference in its seat | champion minus reference [95% CI] | beats |\n"
                  "|---|---|---|---|---|---|---|")
            tables = [evaluate(out, env, seed, args.episodes, mode, args.at) for seed in seeds]
            refs[mode] = [r for ours, _ in tables for r in ours]
            earlier = [r for _, theirs in tables for r in theirs]
            for r in refs[mode]:
                print(f"| {r['seed']} | {r['team']} | {r['reference']} | {r['champion']:.2f} +- "
                      f"{r['champion_sd']:.2f} | {r['bar']:.2f} +- {r['bar_sd']:.2f} | "
                      f"{span(r['diff'], r['diff_half'])} | {r['beats']} |")
            if earlier:
                print(f"\n{mode} runs head to head with their earlier champions: champion minus "
                      "earlier champion in its seat [95% CI]\n\n| seed | team | earlier "
                      "champion | against the earlier one's other team | against the "
                      "champion's own | both (head to head) | beats |\n"
                      "|---|---|---|---|---|---|---|")
            for r in earlier:
                if r.get("same"):
                    print(f"| {r['seed']} | {r['team']} | {r['earlier']} | - | - | - | "
                          f"{r['beats']} |")
                    continue
                print(f"| {r['seed']} | {r['team']} | {r['earlier']} | "
                      f"{span(r['theirs'], r['theirs_half'])} | {span(r['ours'], r['ours_half'])}"
                      f" | {span(r['diff'], r['diff_half'])} | {r['beats']} |")
        for alt, base in ((a, b) for a, b in BASES.items() if a in refs and b in refs):
            # the same opponents and episodes: paired
            print(f"\n| team | reference | per seed: {alt} champion minus {base} champion | "
                  "mean [95% CI] |\n|---|---|---|---|")
            teams = {(r["seed"], r["team"], r["reference"]): r["champion"] for r in refs[base]}
            diffs: dict[tuple[str, str], list[float]] = {}
            for r in refs[alt]:
                if (key := (r["seed"], r["team"], r["reference"])) in teams:
                    diffs.setdefault(key[1:], []).append(r["champion"] - teams[key])
            for (team, ref), d in diffs.items():
                print(f"| {team} | {ref} | {', '.join(f'{x:+.2f}' for x in d)} | "
                      f"{interval(np.array(d))} |")
        for a, b in PAIRS:
            if a not in modes or b not in modes:
                continue
            rows = [r for seed in seeds for r in head_to_head(out, env, seed, args.episodes, a, b,
                                                               args.at)]
            print(f"\n| team | per seed: {a} run minus {b} run | mean [95% CI] | against {a}'s "
                  f"other team | against {b}'s |\n|---|---|---|---|---|")
            for team in dict.fromkeys(r["team"] for r in rows):
                mine = [r for r in rows if r["team"] == team]
                delta = np.array([r["delta"] for r in mine])
                print(f"| {team} | {', '.join(f'{x:+.2f}' for x in delta)} | {interval(delta)} | "
                      + " | ".join(interval(np.array([r[f"vs_{m}_opponent"] for r in mine]))
                                   for m in (a, b)) + " |")


def paired_half(d: np.ndarray) -> float:
    """Half-width of the 95% interval of a mean over many episodes' paired differences."""
    return 1.96 * float(d.std(ddof=1)) / math.sqrt(len(d))


def span(mean: float, half: float) -> str:
    return f"{mean:+.2f} [{mean - half:+.2f}, {mean + half:+.2f}]"


def interval(d: np.ndarray) -> str:
    """'mean [95% t interval]' of per-seed differences."""
    half = (t95(len(d) - 1) * d.std(ddof=1) / math.sqrt(len(d))) if len(d) > 1 else 0.0
    return f"{d.mean():+.2f} [{d.mean() - half:+.2f}, {d.mean() + half:+.2f}]"


if __name__ == "__main__":
    main()
