"""How the whole training loop's throughput scales with the number of Ray actors.

    python benchmarks/ray_scaling.py [--actors 0,1,2] [--steps 40000] [--cpus 2] [--weak]

Starts a local Ray instance with ``--cpus`` CPUs and trains MATD3 on speaker-listener (learn
step 100, batch 128, evolution every ``--evo-steps`` env steps per member) with the local trainer
(``0``) and with 1, 2, ... actors of one CPU each. Strong scaling (default): the same population
(4) and envs (8) split over more actors. ``--weak``: every actor holds the same share (2 members,
4 envs), so the population grows with the actors, as on a cluster.

Prints env steps/s of the whole loop (collection, learning, experience sharing, evaluation,
selection, mutation, logging; actor start-up excluded), the driver's seconds per window in each
part, and the bytes moved per window: experience rows between actors, and member state dicts
between the driver and the actors.
"""

from __future__ import annotations

import argparse
import logging
import pickle
import time
from typing import Any

from _common import Collect, machine, preset_config

from evohpo import config as C
from evohpo.algos.buffer import ReplayBuffer, human_bytes
from evohpo.envs import probe


def config(args: argparse.Namespace, actors: int) -> C.Config:
    pop, envs = ((2 * max(actors, 1), 4 * max(actors, 1)) if args.weak
                 else (args.population, args.num_envs))
    return preset_config("matd3", args.env, {
        "steps": args.steps * (max(actors, 1) if args.weak else 1), "device": "cpu",
        "torch_threads": 1,
        "env": {"num_envs": envs, "pool": "sync"},
        "population": {"size": pop},
        "evolution": {"evo_steps": args.evo_steps, "learning_delay": 1_000},
        "algo": {"learn_step": args.learn_step, "batch_size": 128,
                 "min_updates_per_step": 0},
        "buffer": {"capacity": 200_000},
        "logging": {"console": False},
        "distributed": {"backend": "ray" if actors else "local", "num_actors": actors,
                        "cpus_per_actor": 1},
    })


def measure(cfg: C.Config, actors: int) -> dict[str, Any]:
    from evohpo.loop.trainer import Trainer
    from evohpo.runtime.local import LocalRuntime
    from evohpo.runtime.ray.driver import RayRuntime
    from evohpo.runtime.ray.group import member_state

    t0 = time.perf_counter()
    t = Trainer(cfg, Collect(echo=False), runtime=RayRuntime if actors else LocalRuntime)
    startup = time.perf_counter() - t0
    try:
        s = t.train()
        state_bytes = len(pickle.dumps(member_state(t.members[0]), protocol=5))
    finally:
        t.close()
    s.update(startup_s=startup, state_bytes=state_bytes)
    return s


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--env", default="simple_speaker_listener")
    ap.add_argument("--actors", default="0,1,2",
                    help="comma-separated actor counts (0 = the local trainer)")
    ap.add_argument("--steps", type=int, default=40_000,
                    help="env steps per run (--weak: per actor)")
    ap.add_argument("--population", type=int, default=4)
    ap.add_argument("--num-envs", type=int, default=8)
    ap.add_argument("--evo-steps", type=int, default=2_500, help="env steps per member per window")
    ap.add_argument("--learn-step", type=int, default=100,
                    help="a member learns once per this many of its steps")
    ap.add_argument("--weak", action="store_true",
                    help="2 members and 4 envs per actor (population grows)")
    ap.add_argument("--cpus", type=int, default=2, help="CPUs of the local Ray instance")
    args = ap.parse_args()
    import ray

    ray.init(num_cpus=args.cpus, include_dashboard=False, logging_level=logging.ERROR,
             log_to_driver=False)
    print(f"machine: {machine()}; local Ray instance with {args.cpus} CPUs")
    row = ReplayBuffer.bytes_for(probe(args.env, config(args, 0).env.kwargs), 1)
    mode = ("weak scaling: 2 members, 4 envs per actor" if args.weak else
            f"strong scaling: population {args.population}, {args.num_envs} envs")
    print(f"matd3 {args.env}, {mode}; {args.evo_steps:,} env steps per member per window; "
          f"{row} B per transition\n")
    print(f"{'actors':>6} {'members':>7} {'env steps/s':>12} {'speed-up':>9} {'wall s':>7} "
          f"{'start s':>8} {'collect':>8} {'share':>6} {'sync':>6} {'eval':>6} {'other':>6} "
          f"{'rows/window':>12} {'states/window':>14}")
    base = None
    for n in [int(x) for x in args.actors.split(",")]:
        cfg = config(args, n)
        s = measure(cfg, n)
        rate = s["env_steps"] / s["wall_s"]
        base = base or rate
        gens = max(s["generations"], 1)
        tm = s.get("timing", {})
        per = {k: tm.get(k, 0.0) / gens for k in ("collect", "share", "sync", "evaluate")}
        other = s["wall_s"] / gens - sum(per.values()) if n else 0.0
        window = args.evo_steps * cfg.population.size
        rows = window * row * max(n - 1, 0)
        # pulled every window; pushed if changed
        states = s["state_bytes"] * cfg.population.size * 2 if n else 0
        print(f"{n if n else 'local':>6} {cfg.population.size:>7} {rate:>12,.0f} "
              f"{rate / base:>8.2f}x {s['wall_s']:>7.1f} {s['startup_s']:>8.1f} "
              f"{per['collect']:>7.2f}s {per['share']:>5.2f}s {per['sync']:>5.2f}s "
              f"{per['evaluate']:>5.2f}s {other:>5.2f}s {human_bytes(rows):>12} "
              f"{human_bytes(states):>14}", flush=True)
    print("\ncollect .. other: the driver's seconds per window (collect: every actor's window, "
          "in parallel, learning included;\nshare: experience between actors; "
          "sync: state dicts to the actors; other: "
          "selection, mutation, logs, checkpoints, Ray calls)")
    ray.shutdown()


if __name__ == "__main__":
    main()
