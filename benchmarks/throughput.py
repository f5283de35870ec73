"""Env steps per second: each pool alone (mpe2 pools and the batched backend), and the loop.

    python benchmarks/throughput.py [--env simple_speaker_listener[,simple_spread,...]]
        [--loop-steps 100000] [--batched-envs 8,64,256,1024] [--no-loop]

The pools table gives each pool's rate and its ratio to one mpe2 env in one process (sync, 1 env).

The loop uses the settings of AgileRL's speaker-listener MATD3 tutorial (population 4, 8 envs,
learn step 100, batch 128, evo_steps 10k) so the figure compares with its ~580 env steps/s.
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from _common import Collect, machine, preset_config, run

from evohpo.envs import make_pool, probe


def pool_rate(env: str, pool: str, num_envs: int, steps: int, continuous: bool,
              backend: str = "pettingzoo") -> float:
    kw = {"continuous_actions": continuous}
    spec = probe(env, kw)
    p = make_pool(env, kw, num_envs, pool, spec, backend=backend)
    rng = np.random.default_rng(0)
    acts = [{a: (rng.integers(0, spec[a].act_dim, (num_envs, 1)).astype(np.float32)
                 if spec[a].discrete
                 else rng.random((num_envs, spec[a].act_dim)).astype(np.float32))
             for a in spec.agents}
            for _ in range(64)]
    p.reset(seed=0)
    for i in range(20):
        p.step(acts[i % 64])
    t = time.perf_counter()
    n = max(steps // num_envs, 50)
    for i in range(n):
        p.step(acts[i % 64])
    rate = n * num_envs / (time.perf_counter() - t)
    p.close()
    return rate


def pools_table(env: str, steps: int, batched_envs: list[int]) -> None:
    print(f"\npools alone ({env}, continuous actions, random actions; "
          "the batched pool's time includes its resets, drawn per env as mpe2 draws them)")
    print(f"{'backend':<12}{'pool':<8}{'envs':>6}{'env steps/s':>14}{'x mpe2':>9}")
    base = 0.0
    rows = [("pettingzoo", "sync", 1), ("pettingzoo", "sync", 8), ("pettingzoo", "async", 8),
            ("pettingzoo", "async", 32), *(("batched", "-", n) for n in batched_envs)]
    for backend, pool, n in rows:
        budget = steps if backend == "pettingzoo" else 20 * steps
        rate = pool_rate(env, "sync" if pool == "-" else pool, n, budget, True, backend)
        base = base or rate
        print(f"{backend:<12}{pool:<8}{n:>6}{rate:>14,.0f}{rate / base:>9.1f}", flush=True)


def loop_table(env: str, algos: list[str], steps: int, threads: int) -> None:
    print(f"\nwhole training loop (population 4, 8 envs, learn step 100, batch 128, learning on, "
          f"{steps:,} env steps, {threads} torch thread(s))")
    print(f"{'algo':<8}{'backend':<12}{'pool':<8}{'env steps/s':>14}{'wall s':>9}")
    for algo in algos:
        for backend, pool in (("pettingzoo", "sync"), ("pettingzoo", "async"), ("batched", "sync")):
            cfg = preset_config(algo, env, {
                "steps": steps, "torch_threads": threads,
                "env": {"num_envs": 8, "pool": pool, "backend": backend},
                "population": {"size": 4},
                "evolution": {"evo_steps": 10_000, "learning_delay": 1_000},
                "algo": {"learn_step": 100, "batch_size": 128, "min_updates_per_step": 0},
                "logging": {"console": False}})
            log = Collect(echo=False)
            summary = run(cfg, log)
            print(f"{algo:<8}{backend:<12}{pool:<8}"
                  f"{summary['env_steps'] / summary['wall_s']:>14,.0f}"
                  f"{summary['wall_s']:>9.1f}", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--env", default="simple_speaker_listener",
                    help="one env, or several joined by commas")
    ap.add_argument("--pool-steps", type=int, default=20_000)
    ap.add_argument("--batched-envs", default="8,64,256,1024")
    ap.add_argument("--loop-steps", type=int, default=100_000)
    ap.add_argument("--no-loop", action="store_true", help="pools only")
    ap.add_argument("--algos", default="matd3,maddpg")
    ap.add_argument("--torch-threads", type=int, default=1,
                    help="loop: torch threads "
                         "(on 2 busy cores, 2 threads spin and crawl; 1 is fastest)")
    args = ap.parse_args()
    print(f"machine: {machine()}")
    envs = args.env.split(",")
    for env in envs:
        pools_table(env, args.pool_steps, [int(n) for n in args.batched_envs.split(",")])
    if not args.no_loop:
        loop_table(envs[0], args.algos.split(","), args.loop_steps, args.torch_threads)


if __name__ == "__main__":
    main()
