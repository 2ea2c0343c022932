#!/usr/bin/env bash
# Local launcher: one workload with spmdrun (mpirun) on this machine, the counterpart of
# jobs/slurm/<workload>.sbatch. Root-safe; more ranks than cores are allowed.
#
#   jobs/local/run.sh eval|logreg|ensemble|info [--np N] [--config FILE] [-- extra spmd options]
#
# The config defaults to inputs/<workload>.ini; its data files are made on first use
# (Fashion-MNIST from Debian's package, classification-<N>x<F>-c<C>-i<K>-s<seed>.h5 with
# spmd data make-classification). Outputs go to runs/<workload>-<date>/ (or $RUN_DIR):
# the summary JSON, metrics CSV, weights or checkpoint, a copy of the config, the log.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
workload=${1:-}
case "$workload" in
  eval|logreg|ensemble|info) shift ;;
  *) echo "usage: jobs/local/run.sh eval|logreg|ensemble|info [--np N] [--config FILE] [-- spmd options]" >&2; exit 2 ;;
esac
np=${NP:-2}
config="$root/inputs/$workload.ini"
extra=()
while [ $# -gt 0 ]; do
  case "$1" in
    --np) np=$2; shift 2 ;;
    --config) config=$2; shift 2 ;;
    --) shift; extra=("$@"); break ;;
    *) extra+=("$1"); shift ;;
  esac
done
[ -f "$config" ] || { echo "error: input config '$config' not found (see inputs/)" >&2; exit 2; }
[[ "$np" =~ ^[1-9][0-9]*$ ]] || { echo "error: --np must be a positive integer (got '$np')" >&2; exit 2; }
out=${RUN_DIR:-$root/runs/$workload-$(date +%Y%m%d-%H%M%S)}
mkdir -p "$out"
cp "$config" "$out/config.ini"

# Data named by the config, made on first use. Paths in the configs are relative to the
# repository root.
cd "$root"
for key in data train test; do
  file=$(sed -n "s/^[[:space:]]*$key[[:space:]]*=[[:space:]]*//p" "$config" | tail -n 1)
  [ -n "$file" ] || continue
  [ -f "$file" ] && continue
  case "$(basename "$file")" in
    train.h5|test.h5) "$SPMD" data fashion-mnist --out "$(dirname "$file")" ;;
    classification-*x*-c*-i*-s*.h5)
      spec=$(basename "$file" .h5); spec=${spec#classification-}
      IFS='x' read -r n rest <<<"$spec"; f=${rest%%-*}
      c=$(sed 's/.*-c\([0-9]*\)-.*/\1/' <<<"$spec"); i=$(sed 's/.*-i\([0-9]*\)-.*/\1/' <<<"$spec"); s=${spec##*-s}
      mkdir -p "$(dirname "$file")"
      "$SPMD" data make-classification --samples "$n" --features "$f" --classes "$c" --informative "$i" --seed "$s" --out "$file" ;;
    *) echo "error: input '$file' named by $config does not exist" >&2; exit 2 ;;
  esac
done

outputs=(--json "$out/$workload.json")
case "$workload" in
  logreg) outputs+=(--metrics-csv "$out/metrics.csv" --weights-out "$out/weights.h5") ;;
  ensemble) outputs+=(--metrics-csv "$out/metrics.csv" --checkpoint "$out/checkpoint.h5")
            [ -f "$out/checkpoint.h5" ] && outputs+=(--resume) ;;
esac
echo "# $workload: spmdrun -np $np, config $config, outputs in $out"
"$SPMDRUN" -np "$np" "$SPMD" "$workload" --config "$config" "${outputs[@]}" "${extra[@]}" 2>&1 | tee "$out/log.txt"
exit "${PIPESTATUS[0]}"
