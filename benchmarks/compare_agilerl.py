"""Side by side with AgileRL: its evolutionary MATD3 loop and ours on simple_speaker_listener.

    python benchmarks/compare_agilerl.py [--steps 200000] [--seed 0] [--torch-threads 1]
        [--our-envs 8] [--json out.json]

Installs nothing: run it in an environment where agilerl is installed beside evohpo (see
benchmarks/README.md). In one process, AgileRL trains first for ``--steps`` population env steps;
then ours trains with the same settings for the same wall time. Printed: env steps/s of both,
fitness (best member, return summed over both agents, 8 noise-free episodes) at equal env steps
and at equal wall time, and the ratios.

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
import time
from typing import Any

from _common import machine

POP, NUM_ENVS, EVO_STEPS = 4, 8, 10_000
BATCH, LEARN_STEP, LR_ACTOR, LR_CRITIC = 128, 100, 1e-4, 1e-3
GAMMA, TAU, MEMORY = 0.95, 0.01, 100_000
ENV_KW = {"continuous_actions": True, "max_cycles": 25}


def run_agilerl(steps: int, seed: int) -> list[dict[str, float]]:
    """AgileRL's own loop; one row per generation: population env steps, wall s, fitness."""
    import numpy as np
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

    class Recording(loop.Population):  # type: ignore[misc,name-defined]
        """Records each generation's fitness and step count as AgileRL reports them."""

        def report_metrics(self, clear: bool = True) -> Any:
            report = super().report_metrics(clear)
            m = report.metrics
            fit = [float(f) for f in m.fitnesses]
            rows.append({"env_steps": float(m.global_step),
                         "wall_s": time.perf_counter() - start[0],
                         "best": float(np.max(fit)), "mean": float(np.mean(fit))})
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
    return rows


class _WallClock(Exception):
    pass


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
                      "elitism": True},
        "algo": {"min_updates_per_step": 0,  # one update per learn_step, as AgileRL
                 "batch_size": BATCH, "learn_step": LEARN_STEP, "lr_actor": LR_ACTOR,
                 "lr_critic": LR_CRITIC, "gamma": GAMMA, "tau": TAU, "noise": "ou",
                 "expl_noise": 0.1, "ou_theta": 0.15, "ou_dt": 0.01},
        "mutation": mutation, "eval": {"episodes": 8}, "buffer": {"capacity": MEMORY},
        "logging": {"console": False}})


def run_ours(wall_s: float, seed: int, torch_threads: int,
             num_envs: int = NUM_ENVS) -> list[dict[str, float]]:
    """Our loop, same settings, stopped at the first generation that ends after ``wall_s``."""
    from evohpo.loggers import Logger
    from evohpo.trainer import Trainer

    rows: list[dict[str, float]] = []

    class Rows(Logger):
        def log(self, metrics: dict[str, Any], step: int) -> None:
            rows.append({"env_steps": float(step), "wall_s": float(metrics["time/elapsed_s"]),
                         "best": float(metrics["eval/best_fitness"]),
                         "mean": float(metrics["eval/mean_fitness"])})
            if len(rows) % 5 == 1 or rows[-1]["wall_s"] >= wall_s:
                print(f"evohpo   gen {len(rows) - 1:>3} steps {step:>9,} "
                      f"wall {rows[-1]['wall_s']:>6.0f}s best {rows[-1]['best']:>8.2f}", flush=True)
            if rows[-1]["wall_s"] >= wall_s:
                raise _WallClock

    t = Trainer(our_config(seed, torch_threads, num_envs), Rows())
    try:
        t.train()
    except _WallClock:
        pass
    finally:
        t.close()
    return rows


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


def report(agile: list[dict[str, float]], ours: list[dict[str, float]]) -> None:
    print(f"\nenv steps/s (whole loop, evaluation included): AgileRL {rate(agile):,.0f}, "
          f"evohpo {rate(ours):,.0f}, ratio {rate(ours) / rate(agile):.1f}x")
    same = rate(ours, agile[-1]["env_steps"])
    print(f"over the same {int(agile[-1]['env_steps']):,} env steps: evohpo {same:,.0f}, "
          f"ratio {same / rate(agile):.1f}x")
    print("\nbest fitness so far at equal env steps (population env steps)")
    print(f"{'env steps':>10}{'AgileRL':>10}{'evohpo':>10}")
    for r in agile:
        print(f"{int(r['env_steps']):>10,}{fmt(best_by(agile, 'env_steps', r['env_steps'])):>10}"
              f"{fmt(best_by(ours, 'env_steps', r['env_steps'])):>10}")
    print("\nbest fitness so far at equal wall time")
    print(f"{'wall s':>10}{'AgileRL':>10}{'evohpo':>10}{'evohpo steps':>14}")
    for r in agile:
        steps = max((o["env_steps"] for o in ours if o["wall_s"] <= r["wall_s"]), default=0)
        print(f"{r['wall_s']:>10.0f}{fmt(best_by(agile, 'wall_s', r['wall_s'])):>10}"
              f"{fmt(best_by(ours, 'wall_s', r['wall_s'])):>10}{int(steps):>14,}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--steps", type=int, default=200_000,
                    help="AgileRL's budget in population env steps")
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
    ap.add_argument("--json", help="also write both runs' rows here")
    args = ap.parse_args()
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
    agile = run_agilerl(args.steps, args.seed)
    print(f"load average {os.getloadavg()[0]:.1f} after AgileRL", flush=True)
    torch.set_num_threads(args.torch_threads)
    print(f"evohpo pool: {args.our_envs} envs ({args.our_envs // POP} per member)")
    ours = run_ours(agile[-1]["wall_s"], args.seed, args.torch_threads, args.our_envs)
    print(f"load average {os.getloadavg()[0]:.1f} after evohpo")
    report(agile, ours)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"agilerl": agile, "evohpo": ours, "machine": machine(),
                       "our_envs": args.our_envs,
                       "threads": {"agilerl": agile_threads, "evohpo": args.torch_threads}},
                      f, indent=1)


if __name__ == "__main__":
    main()
