"""Side by side with AgileRL: its evolutionary MATD3 loop and ours on simple_speaker_listener.

    python benchmarks/compare_agilerl.py [--steps 200000] [--seed 0] [--torch-threads 1]
        [--our-envs 8] [--eval-episodes 100] [--our-run-dir DIR] [--json out.json]

Installs nothing: run it in an environment where agilerl is installed beside evohpo (see
benchmarks/README.md). In one process, AgileRL trains first for ``--steps`` population env steps;
then ours trains with the same settings for at least the same wall time and env steps.

Printed, headline first:

1. Re-evaluated: the member each library would hand its user, each played on the same
   ``--eval-episodes`` fresh episodes (episode k reset with seed 1,000,000 + k: AgileRL seeds
   its envs once from ``--seed``, ours draws wide random seeds) by one evaluator: plain mpe2
   simple_speaker_listener (continuous actions, complete episodes of max_cycles 25),
   deterministic policy (no exploration noise), return summed over both agents; mean and
   standard error, and the paired difference evohpo - AgileRL over the same episodes with a 95%
   interval. AgileRL's member: its population's member with the highest last fitness after its
   final generation (the elite its loop keeps). Ours: the member in the run's
   checkpoints/best.pt as it stood at our first generation that reached AgileRL's final env-step
   count (equal env steps), and at our last generation that ended within AgileRL's wall time
   (equal wall time). Beside them, each side's own figure for that member (AgileRL: its last
   8-episode fitness; ours: best.pt's score on its own 100 fresh episodes).
2. Env steps/s of both loops (evaluation included), and ours over AgileRL's env steps.
3. Per-generation estimates (biased upward; for the curve's shape only): the highest of each
   generation's 8-episode fitness estimates, maximised over the generations so far, at equal
   env steps and at equal wall time. The side that evaluates more often wins that maximum by
   noise alone, so these tables are no comparison of what either side learns.

``--json`` writes the same, in that order: ``reevaluated`` (with every episode's return),
then ``per_generation_estimates`` (both runs' rows).

Shared settings (AgileRL's speaker-listener MATD3 tutorial): population 4, 8 envs, continuous
actions, evo_steps 10,000 per member, learn step 100, batch 128, lr 1e-4 / 1e-3, gamma 0.95,
tau 0.01, buffer 100k, OU noise 0.1 (theta 0.15, dt 0.01), no learning delay, tournament of 2
with elitism, mutations none 0.2 / architecture 0.2 (a fifth of them new layers) / weights 0.2
(sd 0.1) / hyperparameters 0.2 / activation 0, hyperparameter bounds as AgileRL's defaults.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
from _common import machine

POP, NUM_ENVS, EVO_STEPS = 4, 8, 10_000
BATCH, LEARN_STEP, LR_ACTOR, LR_CRITIC = 128, 100, 1e-4, 1e-3
GAMMA, TAU, MEMORY = 0.95, 0.01, 100_000
ENV_KW = {"continuous_actions": True, "max_cycles": 25}
EVAL_SEED = 10**6  # fresh episodes: episode k of the re-evaluation is reset with EVAL_SEED + k

# a deterministic policy: {agent: observations [1, obs_dim]} -> {agent: actions [1, act_dim]}
Policy = Callable[[dict[str, np.ndarray]], dict[str, np.ndarray]]


# ----------------------------------------------------------------------------- re-evaluation

def play_fresh(policy: Policy, episodes: int, first_seed: int = EVAL_SEED) -> np.ndarray:
    """Each episode's return summed over both agents: ``episodes`` complete episodes of plain
    mpe2 simple_speaker_listener, episode k reset with seed ``first_seed + k``, every action
    from ``policy``. The same code plays both libraries' members."""
    import torch
    from mpe2 import simple_speaker_listener_v4

    env = simple_speaker_listener_v4.parallel_env(**ENV_KW)
    totals = np.zeros(episodes)
    try:
        with torch.no_grad():
            for k in range(episodes):
                obs, _ = env.reset(seed=first_seed + k)
                while env.agents:  # the env ends the episode (truncation at max_cycles)
                    batch = {a: np.asarray(o, np.float32)[None] for a, o in obs.items()}
                    actions = policy(batch)
                    obs, rewards, _, _, _ = env.step({a: np.asarray(actions[a])[0]
                                                      for a in env.agents})
                    totals[k] += sum(float(r) for r in rewards.values())
    finally:
        env.close()
    return totals


def mean_se(x: np.ndarray) -> tuple[float, float]:
    return float(np.mean(x)), float(np.std(x, ddof=1) / np.sqrt(len(x)))


def paired(ours: np.ndarray, theirs: np.ndarray) -> dict[str, Any]:
    """evohpo - AgileRL over the same episodes: mean, standard error and a 95% interval
    (normal approximation, fine from ~100 episodes on)."""
    m, se = mean_se(ours - theirs)
    return {"mean": m, "se": se, "ci95": [m - 1.96 * se, m + 1.96 * se]}


def agilerl_policy(agent: Any) -> Policy:
    """AgileRL's deterministic actions. Its ``get_action`` has no ``training`` argument (extra
    keywords are swallowed): exploration noise is off only in evaluation mode, as its own
    ``test`` sets it. The first of its two returns is scaled to the action space ([0, 1])."""
    agent.set_training_mode(False)
    return lambda obs: agent.get_action(obs)[0]


def our_policy(run_dir: Path) -> tuple[Policy, dict[str, Any]]:
    """The member in ``run_dir``'s checkpoints/best.pt, acting without noise, and its record."""
    from evohpo import load_run

    member = load_run(run_dir).member("best")
    return member.act, member.info


# ----------------------------------------------------------------------------- AgileRL

def run_agilerl(steps: int, seed: int) -> tuple[list[dict[str, float]], Any]:
    """AgileRL's own loop: one row per generation (population env steps, wall s, fitness), and
    a copy of the member with the highest last fitness after the final generation (what its
    tournament keeps as the elite)."""
    from agilerl.algorithms import MATD3
    from agilerl.components.replay_buffer import ReplayBuffer
    from agilerl.hpo.mutation import Mutations
    from agilerl.hpo.tournament import TournamentSelection
    from agilerl.training import train_multi_agent_off_policy as loop
    from agilerl.utils.utils import make_multi_agent_vect_envs
    from mpe2 import simple_speaker_listener_v4

    env = make_multi_agent_vect_envs(env=simple_speaker_listener_v4.parallel_env,
                                     num_envs=NUM_ENVS, **ENV_KW)
    env.reset(seed=seed)
    agents = list(env.agents)
    pop = MATD3.population(
        size=POP, observation_space=[env.single_observation_space(a) for a in agents],
        action_space=[env.single_action_space(a) for a in agents], agent_ids=agents,
        net_config={"encoder_config": {"hidden_size": [64, 64]}}, batch_size=BATCH,
        lr_actor=LR_ACTOR, lr_critic=LR_CRITIC, learn_step=LEARN_STEP, gamma=GAMMA, tau=TAU,
        O_U_noise=True, expl_noise=0.1, theta=0.15, dt=0.01, policy_freq=2,
        vect_noise_dim=NUM_ENVS, device="cpu")
    rows: list[dict[str, float]] = []
    start = [0.0]
    elite: list[Any] = [None]

    class Recording(loop.Population):
        """Records each generation's fitness and step count as AgileRL reports them, and keeps
        a copy of the generation's best member (the loop goes on to select and mutate)."""

        def report_metrics(self, clear: bool = True) -> Any:
            report = super().report_metrics(clear)
            m = report.metrics
            fit = [float(f) for f in m.fitnesses]
            rows.append({"env_steps": float(m.global_step),
                         "wall_s": time.perf_counter() - start[0],
                         "best": float(np.max(fit)), "mean": float(np.mean(fit))})
            # as its tournament's elitism: the highest last fitness (the last one on ties)
            last = [float(a.fitness[-1]) for a in self.agents]
            best = self.agents[len(last) - 1 - int(np.argmax(last[::-1]))]
            elite[0] = {"agent": best.clone(wrap=False), "generation": len(rows) - 1,
                        "env_steps": rows[-1]["env_steps"], "wall_s": rows[-1]["wall_s"],
                        "own_fitness": float(best.fitness[-1])}
            print(f"agilerl  gen {len(rows) - 1:>3} steps {int(m.global_step):>9,} "
                  f"wall {rows[-1]['wall_s']:>6.0f}s best {rows[-1]['best']:>8.2f}", flush=True)
            return report

    loop.Population = Recording
    start[0] = time.perf_counter()
    loop.train_multi_agent_off_policy(
        env, "simple_speaker_listener_v4", "MATD3", pop, ReplayBuffer(max_size=MEMORY),
        max_steps=steps // POP, evo_steps=EVO_STEPS, eval_loop=1, learning_delay=0,
        tournament=TournamentSelection(tournament_size=2, elitism=True, population_size=POP),
        mutation=Mutations(no_mutation=0.2, architecture=0.2, new_layer_prob=0.2, parameters=0.2,
                           activation=0, rl_hp=0.2, mutation_sd=0.1, rand_seed=seed, device="cpu"),
        verbose=False, sum_scores=True)
    env.close()
    return rows, elite[0]


# ----------------------------------------------------------------------------- ours

def our_config(seed: int, torch_threads: int, num_envs: int = NUM_ENVS) -> Any:
    from _common import preset_config

    from evohpo import config as C

    known = {k for k, _, _ in C.describe_keys()}
    mutation: dict[str, Any] = {
        "none": 0.2, "hyperparameters": 0.2, "weights": 0.2, "weight_noise_std": 0.1,
        "bounds": {"lr_actor": {"min": LR_ACTOR / 10, "max": LR_ACTOR * 10},
                   "lr_critic": {"min": LR_CRITIC / 10, "max": LR_CRITIC * 10},
                   "batch_size": {"min": BATCH // 4, "max": BATCH * 4},
                   "learn_step": {"min": LEARN_STEP // 4, "max": LEARN_STEP * 4},
                   "tau": {"mutate": False}, "expl_noise": {"mutate": False}}}
    if "mutation.architecture" in known:  # architecture mutations, where this evohpo has them
        mutation.update({"architecture": 0.2, "activation": 0.0})
        if "mutation.arch.layer_prob" in known:
            mutation["arch"] = {"layer_prob": 0.2}
    return preset_config("matd3", "simple_speaker_listener", {
        "seed": seed, "steps": 10**9, "device": "cpu", "torch_threads": torch_threads,
        "env": {"kwargs": ENV_KW, "num_envs": num_envs, "backend": "batched", "pool": "sync"},
        "population": {"size": POP},
        "evolution": {"evo_steps": EVO_STEPS, "learning_delay": 0, "tournament_size": 2,
                      "elitism": True,
                      # AgileRL's evolution (the default before truncation, kept for both sides)
                      **({"strategy": "tournament"} if "evolution.strategy" in known else {})},
        "algo": {"min_updates_per_step": 0,  # one update per learn_step, as AgileRL
                 "batch_size": BATCH, "learn_step": LEARN_STEP, "lr_actor": LR_ACTOR,
                 "lr_critic": LR_CRITIC, "gamma": GAMMA, "tau": TAU, "noise": "ou",
                 "expl_noise": 0.1, "ou_theta": 0.15, "ou_dt": 0.01},
        "mutation": mutation, "eval": {"episodes": 8}, "buffer": {"capacity": MEMORY},
        # best.pt is what we re-evaluate; the replay memory stays out of the checkpoints
        "checkpoint": {"enabled": True, "buffer": False},
        "logging": {"console": False}})


def snapshot(run_dir: Path, to: Path) -> bool:
    """A run directory of its own at ``to`` holding ``run_dir``'s config and best.pt as they
    are now (False: no best.pt yet)."""
    best = run_dir / "checkpoints" / "best.pt"
    if not best.is_file():
        return False
    (to / "checkpoints").mkdir(parents=True, exist_ok=True)
    shutil.copy2(run_dir / "config.yaml", to / "config.yaml")
    shutil.copy2(best, to / "checkpoints" / "best.pt")
    return True


def run_ours(wall_s: float, env_steps: float, seed: int, torch_threads: int, num_envs: int,
             run_dir: Path) -> tuple[list[dict[str, float]], dict[str, dict[str, Any]]]:
    """Our loop, same settings, in ``run_dir``, stopped at the first generation that ends after
    ``wall_s`` with at least ``env_steps``. Returns one row per generation and where the
    snapshots of checkpoints/best.pt lie: ``equal_env_steps`` taken at the first generation
    with ``env_steps``, ``equal_wall_time`` at the last generation that ended by ``wall_s``
    (each with that generation's number, env steps and wall s)."""
    import evohpo

    rows: list[dict[str, float]] = []
    snaps: dict[str, dict[str, Any]] = {}

    def at(name: str, row: dict[str, float]) -> None:
        to = run_dir.parent / f"{run_dir.name}-{name}"
        if snapshot(run_dir, to):
            snaps[name] = {"dir": to, "generation": len(rows) - 1,
                           "env_steps": row["env_steps"], "wall_s": row["wall_s"]}

    def each(g: evohpo.GenerationInfo) -> bool:
        m = g.metrics
        rows.append({"env_steps": float(g.env_steps), "wall_s": float(m["time/elapsed_s"]),
                     "best": float(m["eval/best_fitness"]),
                     "mean": float(m["eval/mean_fitness"])})
        row = rows[-1]
        if row["env_steps"] >= env_steps * 0.9999 and "equal_env_steps" not in snaps:
            at("equal_env_steps", row)
        if row["wall_s"] <= wall_s:
            at("equal_wall_time", row)
        done = row["wall_s"] >= wall_s and row["env_steps"] >= env_steps * 0.9999
        if len(rows) % 5 == 1 or done:
            print(f"evohpo   gen {len(rows) - 1:>3} steps {g.env_steps:>9,} "
                  f"wall {row['wall_s']:>6.0f}s best {row['best']:>8.2f}", flush=True)
        return done

    evohpo.train(our_config(seed, torch_threads, num_envs), run_dir=run_dir, callbacks=[each])
    return rows, snaps


# ----------------------------------------------------------------------------- the report

def best_by(rows: list[dict[str, float]], key: str, limit: float) -> float | None:
    """The best member's best fitness over the generations that ended by ``limit``."""
    got = [r["best"] for r in rows if r[key] <= limit * 1.0001]
    return max(got) if got else None


def rate(rows: list[dict[str, float]], upto: float | None = None) -> float:
    """Env steps/s over the whole run, or up to the first generation that reaches ``upto`` env
    steps."""
    row = rows[-1] if upto is None else next((r for r in rows if r["env_steps"] >= upto), rows[-1])
    return row["env_steps"] / row["wall_s"]


def fmt(x: float | None) -> str:
    return "-" if x is None else f"{x:.2f}"


def reevaluate(elite: dict[str, Any], snaps: dict[str, dict[str, Any]],
               episodes: int) -> dict[str, Any]:
    """Both sides' members on the same fresh episodes; the headline of the report."""
    out: dict[str, Any] = {
        "episodes": episodes, "episode_seeds": [EVAL_SEED, EVAL_SEED + episodes - 1],
        "how": "plain mpe2 simple_speaker_listener_v4 (continuous actions, max_cycles 25), "
               "complete episodes, deterministic policy, return summed over both agents"}
    t = time.perf_counter()
    returns = play_fresh(agilerl_policy(elite["agent"]), episodes)
    m, se = mean_se(returns)
    out["agilerl"] = {"member": "population's highest last fitness (its elite)",
                      **{k: elite[k] for k in ("generation", "env_steps", "wall_s")},
                      "own_fitness": elite["own_fitness"], "mean": m, "se": se,
                      "returns": returns.tolist()}
    played: dict[int, np.ndarray] = {}  # both snapshots may hold the same generation
    for name in ("equal_env_steps", "equal_wall_time"):
        s = snaps.get(name)
        if s is None:
            out[f"evohpo_{name}"] = None
            continue
        act, info = our_policy(s["dir"])
        if s["generation"] not in played:
            played[s["generation"]] = play_fresh(act, episodes)
        ours = played[s["generation"]]
        m, se = mean_se(ours)
        out[f"evohpo_{name}"] = {
            "member": f"checkpoints/best.pt (member {info.get('id')}, kept since generation "
                      f"{info.get('generation')})",
            **{k: s[k] for k in ("generation", "env_steps", "wall_s")},
            "own_fitness": info.get("fitness"), "mean": m, "se": se,
            "difference": paired(ours, returns), "returns": ours.tolist()}
    out["eval_wall_s"] = time.perf_counter() - t
    return out


def print_reevaluated(r: dict[str, Any]) -> None:
    print(f"\nRE-EVALUATED: the member each library hands its user, on the same {r['episodes']} "
          f"fresh episodes\n(seeds {r['episode_seeds'][0]:,}..{r['episode_seeds'][1]:,}; "
          f"{r['how']})")
    print(f"{'':<26}{'gen':>5}{'env steps':>11}{'wall s':>8}{'mean':>9}{'s.e.':>7}"
          f"{'own figure':>12}")
    lines = [("AgileRL (elite)", r["agilerl"]),
             ("evohpo, equal env steps", r["evohpo_equal_env_steps"]),
             ("evohpo, equal wall time", r["evohpo_equal_wall_time"])]
    for label, x in lines:
        if x is None:
            print(f"{label:<26}{'(no member kept)':>40}")
            continue
        print(f"{label:<26}{x['generation']:>5}{int(x['env_steps']):>11,}{x['wall_s']:>8.0f}"
              f"{x['mean']:>9.2f}{x['se']:>7.2f}{fmt(x['own_fitness']):>12}")
    print("(own figure: AgileRL's 8-episode fitness of its elite; ours: best.pt's score on its "
          "own 100 fresh episodes)")
    print(f"\npaired difference evohpo - AgileRL over the same {r['episodes']} episodes "
          "(95% interval):")
    for name, label in (("equal_env_steps", "at equal env steps"),
                        ("equal_wall_time", "at equal wall time")):
        x = r[f"evohpo_{name}"]
        if x is not None:
            d = x["difference"]
            print(f"  {label}: {d['mean']:+.2f} (s.e. {d['se']:.2f}; "
                  f"{d['ci95'][0]:+.2f} .. {d['ci95'][1]:+.2f})")


def report(agile: list[dict[str, float]], ours: list[dict[str, float]],
           reeval: dict[str, Any]) -> None:
    print_reevaluated(reeval)
    print(f"\nenv steps/s (whole loop, evaluation included): AgileRL {rate(agile):,.0f}, "
          f"evohpo {rate(ours):,.0f}, ratio {rate(ours) / rate(agile):.1f}x")
    same = rate(ours, agile[-1]["env_steps"])
    print(f"over the same {int(agile[-1]['env_steps']):,} env steps: evohpo {same:,.0f}, "
          f"ratio {same / rate(agile):.1f}x")
    print("\nper-generation estimates (biased upward; for the curve's shape only): highest "
          "8-episode fitness so far,\nat equal env steps (population env steps)")
    print(f"{'env steps':>10}{'AgileRL':>10}{'evohpo':>10}")
    for r in agile:
        print(f"{int(r['env_steps']):>10,}{fmt(best_by(agile, 'env_steps', r['env_steps'])):>10}"
              f"{fmt(best_by(ours, 'env_steps', r['env_steps'])):>10}")
    print("\nper-generation estimates (biased upward; for the curve's shape only): highest "
          "8-episode fitness so far,\nat equal wall time")
    print(f"{'wall s':>10}{'AgileRL':>10}{'evohpo':>10}{'evohpo steps':>14}")
    for r in agile:
        steps = max((o["env_steps"] for o in ours if o["wall_s"] <= r["wall_s"]), default=0)
        print(f"{r['wall_s']:>10.0f}{fmt(best_by(agile, 'wall_s', r['wall_s'])):>10}"
              f"{fmt(best_by(ours, 'wall_s', r['wall_s'])):>10}{int(steps):>14,}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--steps", type=int, default=200_000,
                    help="AgileRL's budget in population env steps (a generation is 40,000)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--torch-threads", type=int, default=1,
                    help="torch threads for both (small nets: 1 is fastest)")
    ap.add_argument("--agilerl-threads", type=int, default=None,
                    help="torch threads while AgileRL runs (default: --torch-threads; "
                         "0: torch's default, one per core, AgileRL's own set-up)")
    ap.add_argument("--our-envs", type=int, default=NUM_ENVS,
                    help="evohpo's pool size (AgileRL's members take turns on its 8 envs, "
                         "ours share one pool: 32 gives each of our members 8 envs at a time, "
                         "as each of AgileRL's has)")
    ap.add_argument("--eval-episodes", type=int, default=100,
                    help="fresh episodes of the re-evaluation (the same ones for both sides)")
    ap.add_argument("--our-run-dir", type=Path, default=None,
                    help="keep our run (and its best.pt snapshots, DIR-equal_*) here "
                         "(default: a temporary directory, removed at the end)")
    ap.add_argument("--json", help="also write the re-evaluation and both runs' rows here")
    args = ap.parse_args()
    if args.eval_episodes < 2:
        ap.error("--eval-episodes: at least 2 (for a standard error); 100 or more to compare")
    try:
        import agilerl  # noqa: F401
    except ImportError:
        raise SystemExit("agilerl is not installed here; "
                         "see benchmarks/README.md for an environment") from None
    import torch

    agile_threads = args.torch_threads if args.agilerl_threads is None else args.agilerl_threads
    torch.set_num_threads(agile_threads or os.cpu_count() or 1)
    print(f"machine: {machine()}; load average {os.getloadavg()[0]:.1f} at start")
    print(f"torch threads: AgileRL {torch.get_num_threads()}, evohpo {args.torch_threads}")
    agile, elite = run_agilerl(args.steps, args.seed)
    print(f"load average {os.getloadavg()[0]:.1f} after AgileRL", flush=True)
    torch.set_num_threads(args.torch_threads)
    print(f"evohpo pool: {args.our_envs} envs ({args.our_envs // POP} per member)")
    tmp = None if args.our_run_dir else Path(tempfile.mkdtemp(prefix="compare_agilerl-"))
    run_dir = args.our_run_dir if tmp is None else tmp / "run"
    try:
        ours, snaps = run_ours(agile[-1]["wall_s"], agile[-1]["env_steps"], args.seed,
                               args.torch_threads, args.our_envs, run_dir)
        print(f"load average {os.getloadavg()[0]:.1f} after evohpo; re-evaluating on "
              f"{args.eval_episodes} fresh episodes", flush=True)
        reeval = reevaluate(elite, snaps, args.eval_episodes)
    finally:
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)
    report(agile, ours, reeval)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"reevaluated": reeval,
                       "per_generation_estimates": {
                           "note": "highest of each generation's 8-episode fitness estimates: "
                                   "biased upward; for the curve's shape only",
                           "agilerl": agile, "evohpo": ours},
                       "machine": machine(), "our_envs": args.our_envs,
                       "threads": {"agilerl": agile_threads, "evohpo": args.torch_threads}},
                      f, indent=1)


if __name__ == "__main__":
    main()
