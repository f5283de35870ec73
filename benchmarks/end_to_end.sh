#!/usr/bin/env bash
# The main command end to end, on two checkouts side by side: wall time and the kept member's
# return on 100 fresh episodes, per seed.
#
#   bash benchmarks/end_to_end.sh BEFORE_CHECKOUT OUT_DIR [SEEDS] [extra train args...]
#   bash benchmarks/end_to_end.sh ../before runs/e2e "0 1 2"
#   bash benchmarks/end_to_end.sh ../before runs/e2e-tag 0 --algo matd3 --env simple_tag --steps 400000
#
# Each seed trains the "before" checkout, then this one, one after the other (never at once, so
# the timings share an otherwise idle machine), and appends a line per run to OUT_DIR/results.tsv:
# seed, code, wall seconds, mean return over 100 episodes of the member `evohpo eval` uses.
set -euo pipefail
before=$(cd "$1" && pwd); out=$2; seeds=${3:-"0 1 2"}; shift 3 || shift $#
args=("$@"); [ ${#args[@]} -gt 0 ] || args=(--algo maddpg --env simple_speaker_listener)
here=$(cd "$(dirname "$0")/.." && pwd)
mkdir -p "$out"
for seed in $seeds; do
  for code in before after; do
    src=$here; [ "$code" = before ] && src=$before
    dir=$out/$code-$seed
    t0=$(date +%s.%N)
    (cd "$src" && PYTHONPATH="$src" python -m evohpo train "${args[@]}" --seed "$seed" --quiet \
      --run-dir "$(cd "$here" && realpath -m "$dir")" --overwrite)
    wall=$(echo "$(date +%s.%N) - $t0" | bc)
    ret=$(cd "$here" && python -m evohpo eval "$dir" --episodes 100 --seed 12345 \
      | awk '/^ *fitness/ {print $(NF-2)}')
    printf '%s\t%s\t%.0f\t%s\n' "$seed" "$code" "$wall" "$ret" | tee -a "$out/results.tsv"
  done
done
