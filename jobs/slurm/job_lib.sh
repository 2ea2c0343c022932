# Shared by the batch scripts in jobs/slurm/ (sourced, not run): where things are, the run
# folder, the input config, how ranks are launched, and how devices follow the allocation.
#
# Environment a submission may set (sbatch exports the submitting shell's environment):
#   SPMD_ROOT      the checkout holding inputs/, jobs/ and build/ (default: $SLURM_SUBMIT_DIR,
#                  i.e. submit from the repository root). Jobs run with this as working folder,
#                  so relative paths in configs and arguments are relative to it.
#   SPMD_KIT_ROOT  an installed prefix (set by `module load spmd-kit`): when the working folder
#                  is no checkout, the scripts, spmd and inputs/*.ini come from there
#   SPMD           the spmd binary (default: $SPMD_ROOT/build/spmd, else $SPMD_KIT_ROOT/bin/spmd,
#                  else spmd on PATH)
#   LAUNCH         srun (default): `srun --mpi=pmix`, Slurm starts the ranks itself;
#                  mpirun: Open MPI's mpirun inside the allocation (it starts its daemons
#                  through Slurm and takes the slots from the allocation)
#   CONFIG         the input config (default: the workload's file in inputs/)
#   DEVICES        devices per rank (default: GPUs per task if the job asked for GPUs,
#                  otherwise CPUs per task: one CPU worker thread per allocated CPU)
#   SPMD_RUNS_DIR  parent of the run folders (default: $SPMD_ROOT/runs)
# Arguments after the script name (`sbatch jobs/slurm/eval.sbatch --strategy pad`) go to
# spmd after the config, so they win over it.

# The spmdrun beside this file: tools/spmdrun of a checkout, or bin/spmdrun of an installed
# prefix (share/spmd-kit/jobs/slurm/ here). sbatch runs a copy of the batch script, but
# sources this file where it lies.
JOB_LIB_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
if [ -x "$JOB_LIB_DIR/../../tools/spmdrun" ]; then JOB_SPMDRUN=$(cd "$JOB_LIB_DIR/../../tools" && pwd)/spmdrun
else JOB_SPMDRUN=$(cd "$JOB_LIB_DIR/../../../.." && pwd)/bin/spmdrun; fi

job_fail() {
  echo "job: error: $*" >&2
  exit 2
}

# job_start: checks the environment, enters $SPMD_ROOT, makes the run folder and sets
# SPMD, LAUNCH, RUN_DIR and DEVICE_ARGS. Prints a header for the job log.
job_start() {
  [ -n "${SLURM_JOB_ID:-}" ] || job_fail "not inside a Slurm job: submit this script with sbatch"
  SPMD_ROOT=${SPMD_ROOT:-$SLURM_SUBMIT_DIR}
  cd "$SPMD_ROOT" || job_fail "cannot enter SPMD_ROOT=$SPMD_ROOT"
  if [ -z "${SPMD:-}" ]; then
    # A checkout's build, else the installed one (the module's SPMD_KIT_ROOT, or PATH).
    if [ -x "$SPMD_ROOT/build/spmd" ]; then SPMD=$SPMD_ROOT/build/spmd
    elif [ -n "${SPMD_KIT_ROOT:-}" ]; then SPMD=$SPMD_KIT_ROOT/bin/spmd
    else SPMD=$(command -v spmd || echo "$SPMD_ROOT/build/spmd"); fi
  fi
  [ -x "$SPMD" ] || job_fail "spmd binary '$SPMD' is missing or not executable: build it (tools/setup.sh), module load spmd-kit, or set SPMD=/path/to/spmd"
  [ -x "$JOB_SPMDRUN" ] || job_fail "spmdrun not found beside $JOB_LIB_DIR (tools/spmdrun of a checkout, bin/spmdrun of a prefix)"
  LAUNCH=${LAUNCH:-srun}
  case "$LAUNCH" in
    srun | mpirun) ;;
    *) job_fail "LAUNCH=$LAUNCH: use LAUNCH=srun or LAUNCH=mpirun" ;;
  esac
  # A requeued job keeps its id, so it finds its own run folder (and checkpoint) again.
  RUN_DIR=${SPMD_RUNS_DIR:-$SPMD_ROOT/runs}/$SLURM_JOB_NAME-$SLURM_JOB_ID
  mkdir -p "$RUN_DIR" || job_fail "cannot create the run folder $RUN_DIR"
  # The Slurm log (#SBATCH --output) stays where Slurm can always open it; link it here.
  local stdout_file
  stdout_file=$(scontrol show job "$SLURM_JOB_ID" 2>/dev/null | sed -n 's/^ *StdOut=//p')
  if [ -n "$stdout_file" ]; then ln -sfn "$stdout_file" "$RUN_DIR/job.log"; fi

  local gpus=${SLURM_GPUS_PER_TASK:-0}
  gpus=${gpus##*:} # --gpus-per-task=h100:1 arrives as "h100:1"
  local backend=cpu count=${SLURM_CPUS_PER_TASK:-1}
  if [ "$gpus" -gt 0 ]; then backend=cuda count=$gpus; fi
  DEVICE_ARGS=(--devices "${DEVICES:-$count}" --backend "$backend")
  # The device threads are the parallelism inside a rank; a multi-threaded BLAS under each
  # of them would oversubscribe the allocated CPUs.
  export OPENBLAS_NUM_THREADS=${OPENBLAS_NUM_THREADS:-1}

  echo "# job $SLURM_JOB_ID ($SLURM_JOB_NAME) restart ${SLURM_RESTART_COUNT:-0} on ${SLURM_JOB_NODELIST:-?}: $SLURM_NTASKS task(s) x ${SLURM_CPUS_PER_TASK:-1} CPU(s), GPUs/task ${gpus}"
  echo "# launch $LAUNCH, binary $SPMD, devices: ${DEVICE_ARGS[*]}"
  echo "# run folder $RUN_DIR"
}

# use_config FILE: the input config must exist before anything starts; a copy goes into the
# run folder so the run can be repeated. Sets CONFIG.
use_config() {
  CONFIG=$1
  # Outside a checkout, inputs/NAME.ini is the installed copy (share/spmd-kit/inputs/).
  if [ ! -f "$CONFIG" ] && [[ $CONFIG != /* ]] && [ -n "${SPMD_KIT_ROOT:-}" ] &&
    [ -f "$SPMD_KIT_ROOT/share/spmd-kit/$CONFIG" ]; then
    CONFIG=$SPMD_KIT_ROOT/share/spmd-kit/$CONFIG
  fi
  [ -f "$CONFIG" ] || job_fail "input config '$CONFIG' not found (relative to $PWD); set CONFIG=FILE or use one from inputs/"
  cp "$CONFIG" "$RUN_DIR/config.ini"
  echo "# config $CONFIG"
}

# launcher NTASKS: sets LAUNCHER, the command line that starts NTASKS ranks of what follows
# it with the chosen launcher. (An array rather than a function, so that a script can start
# it in the background and get the launcher's own pid from $!.)
launcher() {
  # spmdrun brings the options a job needs (tools/spmdrun): for mpirun, --bind-to none (by
  # default each rank would be pinned to one core, and its device threads would share it),
  # TCP keepalive on the daemons' connections (a lost node ends the job in 5 + 5 x 2 = 15 s,
  # naming it; without it mpirun notices only after 300 + 9 x 20 s, and once an abort is under
  # way waits for good on the lost daemon, so spmd's watchdog gives the launcher 30 s before
  # aborting when a whole node is silent) and, as root, allow-run-as-root; for srun,
  # --mpi=pmix and the allocation's CPUs per task.
  LAUNCHER=("$JOB_SPMDRUN" --launcher "$LAUNCH" -np "$1")
}

# launch NTASKS CMD...: runs NTASKS ranks of CMD in the foreground.
launch() {
  launcher "$1"
  shift
  echo "# $(date +%T) ${LAUNCHER[*]} $*"
  "${LAUNCHER[@]}" "$@"
}

# config_value KEY ARGS...: the value KEY takes for spmd: the last --KEY on the command line,
# else `KEY = value` in $CONFIG (Boost's INI format: # comments, spaces around =).
config_value() {
  local key=$1 value="" next=0 arg
  shift
  for arg in "$@"; do
    if [ $next = 1 ]; then value=$arg; next=0; fi
    case "$arg" in
      --"$key") next=1 ;;
      --"$key"=*) value=${arg#*=} ;;
    esac
  done
  if [ -z "$value" ] && [ -f "${CONFIG:-}" ]; then
    value=$(sed -n "s/^[[:space:]]*${key}[[:space:]]*=[[:space:]]*\([^#]*\).*/\1/p" "$CONFIG" | tail -n 1 | sed 's/[[:space:]]*$//')
  fi
  printf '%s' "$value"
}

# ensure_inputs KEY... -- ARGS...: every input file named by KEY (in the config or ARGS) must
# exist. The two kinds of data the project makes itself are made on first use, on one rank:
#   .../fashion-mnist/{train,test}.h5   from Debian's dataset-fashion-mnist (spmd data fashion-mnist)
#   .../classification-<N>x<F>-c<C>-i<K>-s<SEED>.h5   spmd data make-classification with those
#                                       samples, features, classes, informative features, seed
# Anything else that is missing stops the job before any rank starts.
ensure_inputs() {
  local keys=() key path name re='^classification-([0-9]+)x([0-9]+)-c([0-9]+)-i([0-9]+)-s([0-9]+)\.h5$'
  while [ $# -gt 0 ] && [ "$1" != -- ]; do
    keys+=("$1")
    shift
  done
  if [ $# -gt 0 ]; then shift; fi
  for key in "${keys[@]}"; do
    path=$(config_value "$key" "$@")
    [ -n "$path" ] || job_fail "no --$key given, neither in $CONFIG nor on the command line"
    [ -f "$path" ] && continue
    name=$(basename "$path")
    mkdir -p "$(dirname "$path")"
    if [ "$(basename "$(dirname "$path")")" = fashion-mnist ] && [[ $name =~ ^(train|test)\.h5$ ]]; then
      launch 1 "$SPMD" data fashion-mnist --out "$(dirname "$path")"
    elif [[ $name =~ $re ]]; then
      launch 1 "$SPMD" data make-classification --samples "${BASH_REMATCH[1]}" --features "${BASH_REMATCH[2]}" \
        --classes "${BASH_REMATCH[3]}" --informative "${BASH_REMATCH[4]}" --seed "${BASH_REMATCH[5]}" --out "$path"
    else
      job_fail "input '$path' (--$key) does not exist, and it is not data this job knows how to make"
    fi
    [ -f "$path" ] || job_fail "making '$path' (--$key) did not produce the file"
  done
}
