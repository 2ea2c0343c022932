#!/usr/bin/env bash
# spmd eval streams its shard from the file (workloads/file_row_blocks.hpp):
#  - memory: the peak RSS of a rank does not grow with the data. The same run on N and 4N
#    uint8 images peaks within 10% (a shard loaded whole, as float32, would grow ~4x), and
#    stays below 0.25 x the rank's float32 shard + 100 MiB;
#  - a read that fails in the middle of a pass, on one rank (a damaged gzip chunk in the
#    third block of the last rank's rows), ends every rank within seconds, whatever the
#    strategy (count barrier, in-step psum, none), with that rank's message naming the file
#    and the rows; no --json or --predictions file appears;
#  - the same rows undamaged give the same counts on 1 and 3 ranks, with --drop-label too.
source "$(dirname "$0")/../support/cli_lib.sh"
PY=/usr/bin/python3
S=$WORK/stream
mkdir -p "$S"

make_inputs() {
  $PY - "$DATA/fashion/train.h5" "$S" <<'EOF'
import sys, h5py, numpy as np
src, out = sys.argv[1], sys.argv[2]
with h5py.File(src) as f:
    x, y = f["images"][:], f["labels"][:]
def tiled(n):
    i = np.arange(n) % len(x)
    return x[i], y[i]
for name, n in (("n", 24000), ("4n", 96000)):
    xi, yi = tiled(n)
    with h5py.File(f"{out}/{name}.h5", "w") as g:
        g["images"] = xi
        g["labels"] = yi
# 3 ranks x 12000 rows, chunks of 1000 rows; with the default batch the first block is one
# step (512 rows), the others 5120, so rows 30000..30999 (damaged) lie in the third block of
# rank 2 (rows 24000..35999): [29632, 34752).
xi, yi = tiled(36000)
for name in ("good", "damaged"):
    with h5py.File(f"{out}/{name}.h5", "w") as g:
        g.create_dataset("images", data=xi, chunks=(1000, 28, 28, 1), compression="gzip", fletcher32=True)
        g["labels"] = yi
        info = g["images"].id.get_chunk_info(30)
    if name == "damaged":
        with open(f"{out}/{name}.h5", "r+b") as fh:
            fh.seek(info.byte_offset + info.size // 2)
            fh.write(b"\xff" * 64)
EOF
}
run inputs 0 120 make_inputs

# peak RSS in KiB of each rank of `spmd eval ARGS` on NP ranks, the largest printed.
peak_rss() {
  local np=$1; shift
  rm -f "$S"/rss.*
  mpirun -np "$np" --oversubscribe bash -c '/usr/bin/time -f %M -o "$0/rss.$OMPI_COMM_WORLD_RANK" "$@"' "$S" \
    "$SPMD" eval "$@" >"$S/rss.out" 2>&1 || { cat "$S/rss.out"; return 1; }
  cat "$S"/rss.* | sort -n | tail -1
}
memory_bounded() {
  local n4 n1 shard_mib bound_kib
  n1=$(peak_rss 1 --data "$S/n.h5") || return 1
  n4=$(peak_rss 1 --data "$S/4n.h5") || return 1
  shard_mib=$((96000 * 784 * 4 / 1048576))
  bound_kib=$(((shard_mib / 4 + 100) * 1024))
  echo "peak RSS: N = 24000 rows $((n1 / 1024)) MiB, 4N $((n4 / 1024)) MiB; bound at 4N $((bound_kib / 1024)) MiB"
  [ "$n4" -le $((n1 * 110 / 100)) ] || { echo "4N peaks more than 10% above N"; return 1; }
  [ "$n4" -le "$bound_kib" ] || { echo "4N peaks above 0.25 x shard + 100 MiB"; return 1; }
}
run memory_independent_of_rows 0 120 memory_bounded

# Counts on the undamaged file: every example once, on 1 and 3 ranks, with --drop-label.
jq_py() { $PY -c "import json, h5py; j=json.load(open('$1')); y=h5py.File('$S/good.h5')['labels'][:]; $2"; }
for np in 1 3; do
  run "good_np$np" 0 120 mpi $np "$SPMD" eval --data "$S/good.h5" --strategy infinite-pad --json "$WORK/good$np.json"
  run "good_np${np}_total" 0 10 jq_py "$WORK/good$np.json" \
    "assert (j['correct'], j['total']) == ((y == 0).sum(), 36000), (j['correct'], j['total'])"
  run "good_np${np}_drop" 0 120 mpi $np "$SPMD" eval --data "$S/good.h5" --strategy infinite-pad --drop-label 0 \
    --json "$WORK/drop$np.json"
  run "good_np${np}_drop_total" 0 10 jq_py "$WORK/drop$np.json" \
    "assert (j['correct'], j['total']) == (0, (y != 0).sum()), (j['correct'], j['total'])"
done

# The damaged chunk: every rank exits non-zero by itself (mpirun is told to leave them to:
# a rank left waiting in a collective shows as a timeout), within 30 s.
cat >"$S/rank_rc.sh" <<'SH'
#!/usr/bin/env bash
dir=$1; shift
"$@"; rc=$?
echo $rc >"$dir/rank${OMPI_COMM_WORLD_RANK:-x}"
exit $rc
SH
damaged_job() {  # damaged_job STRATEGY: returns the largest exit status of the 3 ranks
  local worst=0 r rc
  rm -rf "$S/rc" "$S/out.json" "$S/pred.h5"; mkdir -p "$S/rc"
  timeout -k 5 30 mpirun -np 3 --oversubscribe --mca orte_abort_on_non_zero_status 0 bash "$S/rank_rc.sh" "$S/rc" \
    "$SPMD" eval --data "$S/damaged.h5" --strategy "$1" --json "$S/out.json" --predictions "$S/pred.h5"
  rc=$?
  [ $rc -eq 124 ] || [ $rc -eq 137 ] && return $rc
  for r in 0 1 2; do
    [ -f "$S/rc/rank$r" ] || { echo "rank $r left no status"; return 1; }
    [ "$(cat "$S/rc/rank$r")" != 0 ] || { echo "rank $r exited 0"; return 0; }
    [ "$(cat "$S/rc/rank$r")" -gt $worst ] && worst=$(cat "$S/rc/rank$r")
  done
  return $worst
}
no_outputs() { [ ! -e "$S/out.json" ] && [ ! -e "$S/pred.h5" ] || { echo "an output file was left"; return 1; }; }
for strategy in pad pad-metrics infinite-pad drop-remainder; do
  run "damaged_$strategy" nonzero 40 damaged_job $strategy
  expect_in "damaged_$strategy: the failing rank and read are named" "rank 2: HDF5 call failed: H5Dread"
  expect_in "damaged_$strategy: the file and rows are named" \
    "reading rows \[29632, 34752\) of features dataset 'images' from '.*damaged\.h5'"
  expect_not_in "damaged_$strategy: no abort needed" "MPI_ABORT"
  run "damaged_${strategy}_no_outputs" 0 10 no_outputs
done
finish
