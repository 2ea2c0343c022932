#!/usr/bin/env bash
# Scaling study: runs one workload at several rank counts (and devices per rank), collects
# each run's --json summary into a folder, then writes the report (tools/scaling_report.py).
#
#   tools/scaling_study.sh                                   # logreg, ranks 1 2 4, strong + weak
#   tools/scaling_study.sh --workload eval --ranks "1 2 4 8" --devices "1 2"
#   tools/scaling_study.sh --mode weak --per-rank 10000 -- --linesearch backtracking
#   sbatch jobs/slurm/scaling.sbatch                         # the same inside a Slurm allocation
#
# Options:
#   --workload logreg|eval|ensemble   (default logreg)
#   --ranks "R1 R2 ..."               rank counts (default "1 2 4"; in a Slurm job: 1, 2, 4, ...
#                                     up to the job's tasks)
#   --devices "D1 D2 ..."             devices per rank (default "1")
#   --mode strong|weak|both           (default both; the ensemble is weak only, see below)
#   --repeats R                       runs of every layout (default 3), interleaved: all layouts
#                                     once, then again, R times (1, 2, 1, 2, ...), so a slow
#                                     spell of the host hits every layout alike; the report
#                                     gives the median step time with its min..max range
#   --config FILE                     input config (default inputs/<workload>-small.ini)
#   --per-rank N                      weak scaling: examples per rank (default: the strong
#                                     data's size / the largest rank count)
#   --out DIR                         (default runs/scaling-<workload>-<date>)
#   --nodes N                         run across N emulated nodes on this machine (root; see
#                                     tools/cluster/): ranks go round-robin over the nodes
#                                     (--map-by node), so R ranks use min(R, N) nodes and talk
#                                     over the emulated interconnect as on a cluster
#   --profile P                       that interconnect: native (veth + bridge), fast (10 us,
#                                     10 Gbit/s), slow (1 ms, 1 Gbit/s) or DELAY_US:RATE_MBIT
#                                     (default native); the report states it, with the round
#                                     trip and bandwidth measured between node1 and node2
#   -- ARGS...                        passed to every spmd run
# Environment: SPMD (default build/spmd), LAUNCH (srun inside a Slurm job, else mpirun),
# SPMD_DATA_DIR (where generated weak-scaling data goes; default inputs/data).
#
# Strong scaling: the same data in every run (the config's). Weak scaling: each rank keeps
# the same number of examples: logreg and eval run on make_classification data with
# samples = per_rank x ranks (the features, classes, informative features and seed come
# from the strong data's file name, classification-<N>x<F>-c<C>-i<K>-s<seed>.h5; eval
# weak data is 784 x 10 classes, 50 informative, read with --features-key X --labels-key y).
# The ensemble trains one member per device on the same data, so more ranks means more
# members at a constant work per device: weak scaling by construction.
# Layout of --out: strong/ and weak/, each with <workload>-r<R>-d<D>-k<repeat>.{json,log}
# (logreg also .csv), study.json, and the report (report.md, report.csv, *.png).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# launcher, config_value, ensure_inputs: job_lib.sh only defines functions when sourced.
source "$root/jobs/slurm/job_lib.sh"

die() {
  echo "scaling_study: error: $*" >&2
  exit 2
}

workload=logreg ranks_list="" devices_list=1 mode=both config="" per_rank="" out="" extra=() nodes=0 profile="" repeats=3
while [ $# -gt 0 ]; do
  case "$1" in
    --workload) workload=$2; shift 2 ;;
    --ranks) ranks_list=$2; shift 2 ;;
    --devices) devices_list=$2; shift 2 ;;
    --mode) mode=$2; shift 2 ;;
    --config) config=$2; shift 2 ;;
    --per-rank) per_rank=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --nodes) nodes=$2; shift 2 ;;
    --profile) profile=$2; shift 2 ;;
    --repeats) repeats=$2; shift 2 ;;
    --) shift; extra=("$@"); break ;;
    -h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) die "unknown option '$1' (see --help)" ;;
  esac
done
case "$workload" in logreg | eval | ensemble) ;; *) die "--workload $workload: use logreg, eval or ensemble" ;; esac
case "$mode" in strong | weak | both) ;; *) die "--mode $mode: use strong, weak or both" ;; esac
if [ "$workload" = ensemble ] && [ "$mode" != weak ]; then
  echo "scaling_study: the ensemble grows with the devices (one member each): running weak scaling only"
  mode=weak
fi

cd "$root"
SPMD=${SPMD:-$root/build/spmd}
[ -x "$SPMD" ] || die "spmd binary '$SPMD' not found: build it (tools/setup.sh) or set SPMD"
if [ -n "${SLURM_JOB_ID:-}" ]; then LAUNCH=${LAUNCH:-srun}; else LAUNCH=${LAUNCH:-mpirun}; fi
case "$LAUNCH" in srun | mpirun) ;; *) die "LAUNCH=$LAUNCH: use srun or mpirun" ;; esac
# Outside Slurm: allow more ranks than cores (the timings then share cores: say so).
[ -n "${SLURM_JOB_ID:-}" ] || export OMPI_MCA_rmaps_base_oversubscribe=1
export OPENBLAS_NUM_THREADS=${OPENBLAS_NUM_THREADS:-1}
if [ -z "$ranks_list" ]; then
  if [ -n "${SLURM_NTASKS:-}" ]; then
    ranks_list="" r=1
    while [ $r -le "$SLURM_NTASKS" ]; do ranks_list="$ranks_list $r"; r=$((r * 2)); done
  else
    ranks_list="1 2 4"
  fi
fi
read -r -a words <<<"$ranks_list" && ranks_list="${words[*]}"
read -r -a words <<<"$devices_list" && devices_list="${words[*]}"
[[ $nodes =~ ^[0-9]+$ ]] || die "--nodes $nodes: give a whole number of emulated nodes"
if [ "$nodes" -eq 0 ] && [ -n "$profile" ]; then die "--profile needs --nodes N (the emulated nodes it joins)"; fi
if [ "$nodes" -gt 0 ] && [ "$LAUNCH" = srun ]; then die "--nodes emulates nodes on this machine; inside a Slurm job the allocation's nodes are used instead"; fi
for n in $ranks_list $devices_list ${per_rank:-1} $repeats; do
  [[ $n =~ ^[1-9][0-9]*$ ]] || die "'$n' is not a positive integer (--ranks, --devices, --per-rank, --repeats)"
done
max_ranks=$(tr ' ' '\n' <<<"$ranks_list" | sort -n | tail -n 1)
config=${config:-inputs/$workload-small.ini}
[ -f "$config" ] || die "config '$config' not found"
CONFIG=$config # config_value reads it
out=${out:-runs/scaling-$workload-$(date +%Y%m%d-%H%M%S)}
mkdir -p "$out"
data_dir=${SPMD_DATA_DIR:-inputs/data}
cores=$(nproc)

# The strong data (made on first use when it is Fashion-MNIST or named like generated data).
if [ "$workload" = ensemble ]; then
  data_key=train
  ensure_inputs train test -- "${extra[@]}"
else
  data_key=data
  ensure_inputs data -- "${extra[@]}"
fi
strong_data=$(config_value "$data_key" "${extra[@]}")

# Generation parameters for weak-scaling data, from the strong data's file name.
gen_n=0 gen_f=0 gen_c=0 gen_k=0 gen_s=0
gen_re='classification-([0-9]+)x([0-9]+)-c([0-9]+)-i([0-9]+)-s([0-9]+)\.h5$'
if [ "$workload" = logreg ]; then
  [[ $(basename "$strong_data") =~ $gen_re ]] ||
    { [ "$mode" = strong ] || die "weak scaling needs generated data named classification-<N>x<F>-c<C>-i<K>-s<seed>.h5 in $config (got $strong_data)"; }
  gen_n=${BASH_REMATCH[1]:-0} gen_f=${BASH_REMATCH[2]:-0} gen_c=${BASH_REMATCH[3]:-0} gen_k=${BASH_REMATCH[4]:-0} gen_s=${BASH_REMATCH[5]:-0}
elif [ "$workload" = eval ]; then
  gen_n=10000 gen_f=784 gen_c=10 gen_k=50 gen_s=0
fi
per_rank=${per_rank:-$((gen_n / max_ranks))}
if [ "$workload" != ensemble ] && [ "$mode" != strong ] && [ "$per_rank" -lt 1 ]; then
  die "weak scaling: give --per-rank N (examples per rank)"
fi

# Weak runs name their own data: drop any --data from the pass-through arguments.
weak_extra=() skip=0
for arg in "${extra[@]}"; do
  if [ $skip = 1 ]; then skip=0; continue; fi
  case "$arg" in
    --data) skip=1 ;;
    --data=*) ;;
    *) weak_extra+=("$arg") ;;
  esac
done

# run_one MODE RANKS DEVICES REPEAT ARGS...: one run, its summary in $out/MODE/.
run_one() {
  local mode=$1 ranks=$2 devices=$3 name pass=("${extra[@]}")
  name=$workload-r$ranks-d$devices-k$4
  shift 4
  [ "$mode" = weak ] && pass=("${weak_extra[@]}")
  local args=(--config "$config" --devices "$devices" --json "$out/$mode/$name.json")
  [ "$workload" = logreg ] && args+=(--metrics-csv "$out/$mode/$name.csv")
  study_launcher "$ranks"
  local start=$SECONDS
  if ! "${LAUNCHER[@]}" "$SPMD" "$workload" "${args[@]}" "$@" "${pass[@]}" >"$out/$mode/$name.log" 2>&1; then
    echo "scaling_study: run $mode $name failed; its output:" >&2
    tail -n 30 "$out/$mode/$name.log" >&2
    exit 1
  fi
  printf '  %-6s %-22s %4d s\n' "$mode" "$name" $((SECONDS - start))
}

# weak_data RANKS: the make_classification file with per_rank x RANKS samples (made once).
weak_data() {
  local samples=$((per_rank * $1))
  local path=$data_dir/classification-${samples}x${gen_f}-c${gen_c}-i${gen_k}-s${gen_s}.h5
  if [ ! -f "$path" ]; then
    mkdir -p "$data_dir"
    launcher 1
    "${LAUNCHER[@]}" "$SPMD" data make-classification --samples "$samples" --features "$gen_f" --classes "$gen_c" \
      --informative "$gen_k" --seed "$gen_s" --out "$path" >/dev/null
  fi
  printf '%s' "$path"
}

# study_launcher RANKS: sets LAUNCHER, across the emulated nodes when there are any.
study_launcher() {
  if [ "$nodes" -gt 0 ]; then
    LAUNCHER=("$root/tools/cluster/mpirun.sh" "$cluster" -np "$1" --map-by node)
  else
    launcher "$1"
  fi
}

# The emulated nodes, for the whole study; removed at exit whatever happens.
cluster="" interconnect=""
if [ "$nodes" -gt 0 ]; then
  cluster=sc$$
  trap '"$root/tools/cluster/down.sh" "$cluster" 2>/dev/null' EXIT
  "$root/tools/cluster/up.sh" "$cluster" "$nodes" "${profile:-native}"
  interconnect="\"nodes\": $nodes, \"interconnect\": \"${profile:-native}\""
  if [ "$nodes" -ge 2 ]; then
    # What the links deliver here (the emulator's own cost included), next to what they model.
    "$root/tools/cluster/on.sh" "$cluster" node2 /usr/bin/python3 "$root/tools/cluster/link_probe.py" server --port 5201 2>/dev/null &
    probe_server=$!
    measured=$("$root/tools/cluster/on.sh" "$cluster" node1 /usr/bin/python3 "$root/tools/cluster/link_probe.py" \
      client node2 5201 --mib 32) ||
      die "the link probe between node1 and node2 failed"
    kill "$probe_server" 2>/dev/null || true
    wait "$probe_server" 2>/dev/null || true
    interconnect="$interconnect, \"link_measured\": $measured"
    echo "scaling_study: interconnect ${profile:-native} between node1 and node2: $measured"
  fi
fi

# The host's 1- and 2-thread read bandwidth, for the report's bandwidth model of logreg.
read_gbps=""
if [ "$workload" = logreg ]; then
  read_gbps=$(/usr/bin/python3 "$root/tools/scaling_bandwidth.py") ||
    { echo "scaling_study: the read-bandwidth probe failed: the report goes without its bandwidth model" >&2; read_gbps=""; }
fi

study_json() { # MODE: what the report shows about the study
  local max_devices total oversubscribed=false per=""
  max_devices=$(tr ' ' '\n' <<<"$devices_list" | sort -n | tail -n 1)
  total=$((max_ranks * max_devices))
  if [ -z "${SLURM_JOB_ID:-}" ] && [ "$total" -gt "$cores" ]; then oversubscribed=true; fi
  if [ "$1" = weak ] && [ "$workload" != ensemble ]; then per=", \"per_rank\": $per_rank"; fi
  printf '{"workload": "%s", "mode": "%s", "config": "%s", "ranks": "%s", "devices": "%s", "repeats": %d, "launch": "%s", "host": "%s", "host_cores": %d, "oversubscribed": %s%s%s}\n' \
    "$workload" "$1" "$config" "$ranks_list" "$devices_list" "$repeats" "$LAUNCH" "$(hostname)" "$cores" "$oversubscribed" "$per" "${interconnect:+, $interconnect}${read_gbps:+, \"read_gbps\": $read_gbps}" >"$out/$1/study.json"
}

echo "scaling_study: $workload, ranks [$ranks_list], devices per rank [$devices_list], $repeats repeats (interleaved), mode $mode, $LAUNCH${cluster:+ across $nodes emulated nodes (${profile:-native})}, output $out"
for m in strong weak; do
  [ "$mode" = both ] || [ "$mode" = "$m" ] || continue
  mkdir -p "$out/$m"
  study_json "$m"
  for ((k = 1; k <= repeats; k++)); do
    for devices in $devices_list; do
      for ranks in $ranks_list; do
        if [ "$m" = strong ] || [ "$workload" = ensemble ]; then
          run_one "$m" "$ranks" "$devices" $k
        elif [ "$workload" = logreg ]; then
          run_one "$m" "$ranks" "$devices" $k --data "$(weak_data "$ranks")"
        else
          run_one "$m" "$ranks" "$devices" $k --data "$(weak_data "$ranks")" --features-key X --labels-key y --classes "$gen_c"
        fi
      done
    done
  done
  /usr/bin/python3 "$root/tools/scaling_report.py" "$out/$m" --mode "$m"
done
