#!/usr/bin/env bash
# Start-up touches the file system once per node, not once per rank: the inputs are checked
# and their identities (device, inode, size, mtime) taken by the node's first rank and shared
# with the others, so thousands of ranks do not stat one file at once on a parallel file
# system's metadata server. Seen with strace: on ranks other than the node's first, no call
# of ours names the input (Open MPI's MPI-IO lstat()s it to find its file system: those are
# AT_SYMLINK_NOFOLLOW and left out). Ranks with another working directory behind one
# relative path still stat for themselves (bad_inputs.sh "same path, other file").
source "$(dirname "$0")/../support/cli_lib.sh"
command -v strace >/dev/null || { echo "SKIP cli.startup_io: strace is not installed (apt-get install strace; tools/setup.sh does)"; exit 0; }
strace -f -qq -e trace=%file -o /dev/null true 2>/dev/null || { echo "SKIP cli.startup_io: strace cannot trace here (ptrace not permitted)"; exit 0; }
cp "$DATA/logreg-small.h5" "$WORK/in.h5"
# traced CMD...: every rank under strace, its calls naming files in $WORK/trace.RANK.
traced() {
  mpirun -np 4 --oversubscribe bash -c 'exec strace -f -qq -e trace=%file -o "$0/trace.$OMPI_COMM_WORLD_RANK" "$@"' "$WORK" "$@"
}
stats_of_input() { # RANK: following stat calls naming the input, in that rank's trace
  grep -E 'stat[a-z0-9]*\(.*"'"$WORK"'/in\.h5"' "$WORK/trace.$1" | grep -v AT_SYMLINK_NOFOLLOW | grep -vc statfs
}
for workload in logreg eval; do
  rm -f "$WORK"/trace.*
  case $workload in
    logreg) run traced_$workload 0 120 traced "$SPMD" logreg --data "$WORK/in.h5" --maxiter 3 --quiet ;;
    eval) run traced_$workload 0 120 traced "$SPMD" eval --data "$WORK/in.h5" --model zero --classes 100 --quiet ;;
  esac
  checks=$((checks + 1))
  first=$(stats_of_input 0)
  others=$(( $(stats_of_input 1) + $(stats_of_input 2) + $(stats_of_input 3) ))
  if [ "$first" -ge 1 ] && [ "$others" -eq 0 ]; then
    echo "ok   $workload: the node's first rank stat()s the input ($first calls), the 3 others never"
  else
    fail "$workload: stat() of the input by rank 0: $first, by ranks 1-3: $others (want >= 1 and 0)"
  fi
done
finish
