"""Cost of one member's hot-path calls: acting on its slice of the pool and one learning update;
with ``--population``, one update of a whole population, fused against member by member.

    python benchmarks/learner.py                       # speaker-listener and spread, both algos
    python benchmarks/learner.py --env simple_spread --batch 256 --hidden 128,128
    python benchmarks/learner.py --population 1,4,8,16 --threads 1,2 --json out.json

Prints microseconds per ``act`` call (exploring, on ``--act-envs`` envs) and per ``learn`` call
(one update: critics every call, actors every policy delay) with a full replay memory of random
transitions. These two calls are what the training loop spends most of its time in once the envs
are batched; run this before and after changing either.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np
import torch
from _common import machine

from evohpo import config as C
from evohpo.algos import initial_hyperparams
from evohpo.algos.buffer import ReplayBuffer
from evohpo.algos.fused import PopulationLearner
from evohpo.algos.switches import ALGOS
from evohpo.envs.registry import probe
from evohpo.evolve.population import make_population


def per_call_us(fn, n: int) -> float:
    for _ in range(max(3, n // 20)):  # warm up
        fn()
    best = float("inf")
    for _ in range(3):
        t0 = time.perf_counter()
        for _ in range(n):
            fn()
        if torch.cuda.is_available():
            torch.cuda.synchronize()  # a GPU's work is asynchronous: count it all
        best = min(best, (time.perf_counter() - t0) / n)
    return best * 1e6


def bench(algo: str, env: str, act_envs: int, batch: int, hidden: list[int],
          n: int, device: str = "cpu") -> dict[str, float]:
    cfg = C.load([{"algo": {"name": algo, "hidden": hidden, "batch_size": batch},
                   "env": {"name": env}}])
    spec = probe(cfg.env.name, cfg.env.kwargs)
    m = make_population(cfg, spec, np.random.default_rng(0), torch.device(device))[0][0]
    assert m.hp.batch_size == initial_hyperparams(cfg).batch_size
    rng = np.random.default_rng(1)
    buf = ReplayBuffer(spec, 10_000, device=device)
    rows = 10_000
    obs = {a: rng.normal(size=(rows, spec[a].obs_dim)).astype(np.float32) for a in spec.agents}
    nxt = {a: rng.normal(size=(rows, spec[a].obs_dim)).astype(np.float32) for a in spec.agents}
    _, acts = m.algo.act(obs, rng)
    rew = {a: rng.normal(size=rows).astype(np.float32) for a in spec.agents}
    term = {a: (rng.random(rows) < 0.01).astype(np.float32) for a in spec.agents}
    buf.add(obs, acts, rew, nxt, term)
    small = {a: o[:act_envs] for a, o in obs.items()}
    done = np.zeros(act_envs, bool)
    act_us = per_call_us(lambda: m.algo.act(small, m.rng, done), n * 10)
    sample_us = per_call_us(lambda: buf.sample(batch, m.rng), n)
    learn_us = per_call_us(lambda: m.algo.learn(buf.sample(batch, m.rng)), n) - sample_us
    return {"act_us": act_us, "sample_us": sample_us, "learn_us": learn_us}


def population(env: str, algo: str, hidden: list[int], size: int, batch: int, n: int,
               device: str) -> dict[str, float]:
    """Milliseconds per update of ``size`` members (each with its own learning rates): one after
    another (``MATD3.learn``), and together (``PopulationLearner.learn``); each samples its own
    batch."""
    cfg = C.load([{"algo": {"name": algo, "hidden": hidden, "batch_size": batch},
                   "env": {"name": env, "num_envs": 16}, "population": {"size": size}}])
    spec = probe(cfg.env.name, cfg.env.kwargs)
    members = make_population(cfg, spec, np.random.default_rng(0), torch.device(device))[0]
    for j, m in enumerate(members):
        m.algo.set_hyperparams(lr_actor=1e-3 * (1 + 0.1 * j), lr_critic=1e-3 * (1 + 0.05 * j))
    rng = np.random.default_rng(1)
    rows = 20_000
    buf = ReplayBuffer(spec, rows, device=device)
    obs = {a: rng.normal(size=(rows, spec[a].obs_dim)).astype(np.float32) for a in spec.agents}
    nxt = {a: rng.normal(size=(rows, spec[a].obs_dim)).astype(np.float32) for a in spec.agents}
    _, acts = members[0].algo.act(obs, rng)
    buf.add(obs, acts, {a: rng.normal(size=rows).astype(np.float32) for a in spec.agents}, nxt,
            {a: (rng.random(rows) < 0.01).astype(np.float32) for a in spec.agents})

    def one_by_one() -> None:
        for m in members:
            m.algo.learn(buf.sample(batch, m.rng))

    learner = PopulationLearner()  # as a runtime holds one: the stacks stay between updates

    def fused() -> None:
        learner.learn([m.algo for m in members], buf, [m.rng for m in members])

    # interleaved, so a change in the machine's load hits both alike
    times: dict[str, float] = {"one_by_one_ms": float("inf"), "fused_ms": float("inf")}
    for _ in range(3):
        times["one_by_one_ms"] = min(times["one_by_one_ms"], per_call_us(one_by_one, n) / 1e3)
        times["fused_ms"] = min(times["fused_ms"], per_call_us(fused, n) / 1e3)
    times["speedup"] = times["one_by_one_ms"] / times["fused_ms"]
    return times


SHAPES = {"simple_speaker_listener": [64, 64], "simple_tag": [128, 128]}  # the presets'


def populations(args: argparse.Namespace) -> None:
    sizes = [int(x) for x in args.population.split(",")]
    envs = args.env.split(",") if args.env != "simple_speaker_listener,simple_spread" else list(
        SHAPES)
    rows = []
    print(f"batch 256, algo {args.algos.split(',')[-1]}, torch {torch.__version__}, {args.device}; "
          "ms per update of the whole population")
    print(f"{'env':<26}{'hidden':<10}{'threads':>8}{'members':>8}{'one by one':>12}"
          f"{'fused':>9}{'speed-up':>10}")
    for env in envs:
        hidden = SHAPES.get(env, [int(h) for h in args.hidden.split(",")])
        for threads in [int(t) for t in args.threads.split(",")]:
            torch.set_num_threads(threads)
            for size in sizes:
                r = population(env, args.algos.split(",")[-1], hidden, size, 256,
                               max(3, args.n // size), args.device)
                rows.append({"env": env, "hidden": hidden, "threads": threads, "members": size,
                             **r})
                print(f"{env:<26}{hidden!s:<10}{threads:>8}{size:>8}"
                      f"{r['one_by_one_ms']:>12.2f}{r['fused_ms']:>9.2f}{r['speedup']:>9.2f}x",
                      flush=True)
    if args.json:
        args.json.write_text(json.dumps({
            "command": "python benchmarks/learner.py " + " ".join(sys.argv[1:]),
            "machine": machine(), "date": time.strftime("%Y-%m-%d"),
            "unit": "ms per update of the whole population (best of 3 interleaved timings)",
            "rows": rows}, indent=1) + "\n")


def off_policy_names(text: str) -> str:
    """``--algos``: off-policy algorithms only; on-policy ones learn from rollouts of their own,
    not from the replay memory this benchmark times."""
    bad = [a for a in text.split(",") if a not in ALGOS]
    if bad:
        raise argparse.ArgumentTypeError(
            f"{','.join(bad)} is not an off-policy algorithm; choose from {', '.join(ALGOS)}")
    return text


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--env", default="simple_speaker_listener,simple_spread")
    p.add_argument("--algos", default="maddpg,matd3", type=off_policy_names,
                   help="off-policy algorithms, comma-separated (the replay memory's learners)")
    p.add_argument("--act-envs", type=int, default=2,
                   help="envs per act call (8 envs / population 4 = 2)")
    p.add_argument("--batch", type=int, default=128)
    p.add_argument("--hidden", default="64,64")
    p.add_argument("-n", type=int, default=300, help="learn calls per timing (act calls: 10x)")
    p.add_argument("--torch-threads", type=int, default=1)
    p.add_argument("--device", default="cpu",
                   help="cpu, cuda or cuda:N (networks and replay memory)")
    p.add_argument("--population", default="",
                   help="population sizes: time whole-population updates, fused against one "
                        "by one, at the presets' shapes (batch 256)")
    p.add_argument("--threads", default="1,2", help="torch threads to time (with --population)")
    p.add_argument("--json", type=Path, help="write the --population table here")
    args = p.parse_args()
    if args.population:
        populations(args)
        return
    torch.set_num_threads(args.torch_threads)
    hidden = [int(h) for h in args.hidden.split(",")]
    print(f"batch {args.batch}, hidden {hidden}, act on {args.act_envs} envs, "
          f"torch {torch.__version__}, {torch.get_num_threads()} thread(s), {args.device}")
    print(f"{'env':<26}{'algo':<8}{'act us':>10}{'sample us':>11}{'learn us':>10}")
    for env in args.env.split(","):
        for algo in args.algos.split(","):
            r = bench(algo, env, args.act_envs, args.batch, hidden, args.n, args.device)
            print(f"{env:<26}{algo:<8}{r['act_us']:>10.1f}{r['sample_us']:>11.1f}{r['learn_us']:>10.1f}",
                  flush=True)


if __name__ == "__main__":
    main()
