"""Cost of one member's hot-path calls: acting on its slice of the pool and one learning update.

    python benchmarks/learner.py                       # speaker-listener and spread, both algos
    python benchmarks/learner.py --env simple_spread --batch 256 --hidden 128,128

Prints microseconds per ``act`` call (exploring, on ``--act-envs`` envs) and per ``learn`` call
(one update: critics every call, actors every policy delay) with a full replay memory of random
transitions. These two calls are what the training loop spends most of its time in once the envs
are batched; run this before and after changing either.
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import torch

from evohpo import config as C
from evohpo.algos import initial_hyperparams
from evohpo.algos.buffer import ReplayBuffer
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


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--env", default="simple_speaker_listener,simple_spread")
    p.add_argument("--algos", default="maddpg,matd3")
    p.add_argument("--act-envs", type=int, default=2,
                   help="envs per act call (8 envs / population 4 = 2)")
    p.add_argument("--batch", type=int, default=128)
    p.add_argument("--hidden", default="64,64")
    p.add_argument("-n", type=int, default=300, help="learn calls per timing (act calls: 10x)")
    p.add_argument("--torch-threads", type=int, default=1)
    p.add_argument("--device", default="cpu",
                   help="cpu, cuda or cuda:N (networks and replay memory)")
    args = p.parse_args()
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
