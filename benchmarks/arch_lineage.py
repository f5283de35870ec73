"""How a run's architectures evolved, from its lineage.jsonl (and metrics.jsonl when present).

    python benchmarks/arch_lineage.py RUN_DIR [--member ID]

RUN_DIR holds lineage.jsonl (a file path to it works too), as written by `evohpo train --run-dir`
or `benchmarks/learn_speaker_listener.py --run-dir`. Prints: how often each operator ran (and
how often one fell back); per generation, the best member's architecture (from metrics.jsonl);
the final population's architectures; and the ancestry of the final best member (or --member),
mutation by mutation, back to the initial population.
"""

from __future__ import annotations

import argparse
import json
from collections import Counter
from pathlib import Path
from typing import Any


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def arch_of(row: dict[str, Any], member: int) -> str:
    """'speaker_0 a:64-64 c:64-64 relu | listener_0 ...' from one metrics row (empty if not
    logged)."""
    pre = f"member/{member}/"
    agents = sorted({k.split("/")[3] for k in row if k.startswith(pre + "hidden/")})
    return " | ".join(f"{a} a:{row[f'{pre}hidden/{a}/actor']} c:{row[f'{pre}hidden/{a}/critic']} "
                      f"{row.get(f'{pre}activation/{a}', '?')}" for a in agents)


def describe(r: dict[str, Any]) -> str:
    if r["kind"] in ("architecture", "activation", "hyperparameters"):
        text = f"{r['kind']:<15} {r['target']}: {r['before']} -> {r['after']}  [{r['op']}]"
    elif r["kind"] == "weights":
        text = f"{'weights':<15} {r['target']} [{r['op']}]"
    else:
        text = f"{r['kind']:<15}"
    return text + (f"  ({r['note']})" if r.get("note") else "")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("run", type=Path, help="run directory (or its lineage.jsonl)")
    ap.add_argument("--member", type=int,
                    help="trace this member's ancestry (default: the final best)")
    args = ap.parse_args()
    run = args.run.parent if args.run.suffix == ".jsonl" else args.run
    lineage = read_jsonl(run / "lineage.jsonl")
    metrics = read_jsonl(run / "metrics.jsonl") if (run / "metrics.jsonl").is_file() else []

    kinds = Counter(r["kind"] for r in lineage)
    ops = Counter(r["op"].split(" ")[0] for r in lineage
                  if r["kind"] in ("architecture", "activation"))
    fallbacks = sum("became" in r.get("note", "") or "no operator applies" in r.get("note", "")
                    for r in lineage)
    print(f"{len(lineage)} records over {len({r['generation'] for r in lineage})} generations")
    print("kinds:     " + ", ".join(f"{k} {n}" for k, n in kinds.most_common()))
    print("operators: " + (", ".join(f"{k} {n}" for k, n in ops.most_common()) or "none"))
    print(f"fell back (at a bound, or no exact identity layer): {fallbacks}")

    if metrics and any(k.startswith("member/") and "/hidden/" in k for k in metrics[0]):
        print("\nbest member per generation")
        print(f"{'gen':>4} {'env steps':>10} {'fitness':>8} {'member':>6}  architecture")
        for row in metrics:
            best = row["eval/best_member"]
            print(f"{row['generation']:>4} {row['env_steps']:>10,} "
                  f"{row['eval/best_fitness']:>8.2f} {best:>6}  "
                  f"{arch_of(row, best)}")
        last = metrics[-1]
        members = sorted({int(k.split("/")[1]) for k in last
                          if k.startswith("member/") and k.endswith("/fitness")})
        print("\nfinal population")
        for mid in members:
            print(f"  member {mid:>4} fitness {last[f'member/{mid}/fitness']:>8.2f}  "
                  f"{arch_of(last, mid)}")
    elif metrics:
        print("\n(metrics.jsonl has no member/<id>/hidden/... keys: an older run; lineage only)")

    born = {r["member_id"]: r for r in lineage if r["kind"] != "elite"}
    target = args.member
    if target is None:
        target = metrics[-1]["eval/best_member"] if metrics else max(born, default=0)
    print(f"\nancestry of member {target} (oldest first)")
    chain = []
    m: int | None = target
    while m is not None and m in born:
        chain.append(born[m])
        m = born[m]["parent_id"]
    print(f"  member {m}: initial population")
    for r in reversed(chain):
        print(f"  gen {r['generation']:>3} member {r['parent_id']:>4} -> {r['member_id']:>4}  "
              f"{describe(r)}")
    changes = [r for r in chain if r["kind"] in ("architecture", "activation")]
    print(f"  {len(changes)} architecture/activation changes along this line of "
          f"{len(chain)} mutations")


if __name__ == "__main__":
    main()
