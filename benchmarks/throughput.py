"""Env steps per second: each mpe2 pool alone, and the whole evolutionary training loop.

    python benchmarks/throughput.py [--env simple_speaker_listener] [--loop-steps 100000]

The loop uses the settings of AgileRL's speaker-listener MATD3 tutorial (population 4, 8 envs,
learn step 100, batch 128, evo_steps 10k) so the figure compares with its ~580 env steps/s.
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from _common import Collect, machine, preset_config, run

from evohpo.envs import make_pool, probe


def pool_rate(env: str, pool: str, num_envs: int, steps: int, continuous: bool) -> float:
    kw = {"continuous_actions": continuous}
    spec = probe(env, kw)
    p = make_pool(env, kw, num_envs, pool, spec)
    rng = np.random.default_rng(0)
    acts = [{a: (rng.integers(0, spec[a].act_dim, (num_envs, 1)).astype(np.float32) if spec[a].discrete
                 else rng.random((num_envs, spec[a].act_dim)).astype(np.float32)) for a in spec.agents}
            for _ in range(64)]
    p.reset(seed=0)
    for i in range(20):
        p.step(acts[i % 64])
    t = time.perf_counter()
    n = steps // num_envs
    for i in range(n):
        p.step(acts[i % 64])
    rate = n * num_envs / (time.perf_counter() - t)
    p.close()
    return rate


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--env", default="simple_speaker_listener")
    ap.add_argument("--pool-steps", type=int, default=20_000)
    ap.add_argument("--loop-steps", type=int, default=100_000)
    ap.add_argument("--algos", default="matd3,maddpg")
    args = ap.parse_args()
    print(f"machine: {machine()}")
    print(f"\npools alone ({args.env}, continuous actions, random actions)")
    print(f"{'pool':<8}{'envs':>6}{'env steps/s':>14}")
    for pool, n in (("sync", 1), ("sync", 8), ("async", 8), ("async", 32)):
        print(f"{pool:<8}{n:>6}{pool_rate(args.env, pool, n, args.pool_steps, True):>14,.0f}", flush=True)
    print(f"\nwhole training loop (population 4, 8 envs, learn step 100, batch 128, learning on, "
          f"{args.loop_steps:,} env steps)")
    print(f"{'algo':<8}{'pool':<8}{'env steps/s':>14}{'wall s':>9}")
    for algo in args.algos.split(","):
        for pool in ("sync", "async"):
            cfg = preset_config(algo, args.env, {
                "steps": args.loop_steps, "env": {"num_envs": 8, "pool": pool},
                "population": {"size": 4}, "evolution": {"evo_steps": 10_000, "learning_delay": 1_000},
                "algo": {"learn_step": 100, "batch_size": 128}, "logging": {"console": False}})
            log = Collect(echo=False)
            summary = run(cfg, log)
            print(f"{algo:<8}{pool:<8}{summary['env_steps'] / summary['wall_s']:>14,.0f}"
                  f"{summary['wall_s']:>9.1f}", flush=True)


if __name__ == "__main__":
    main()
