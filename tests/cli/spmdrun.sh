#!/usr/bin/env bash
# spmdrun (tools/spmdrun, issue 30 section 4): the launcher with the options a job needs. Outside
# Slurm it is mpirun with TCP keepalive on its daemons' connections (a lost node ends the job in
# ~15 s), --bind-to none (device threads are not pinned to one core) and, as root, Open MPI's
# allow-run-as-root variables; under Slurm it is srun --mpi=pmix with the allocation's CPUs per
# task. Options it does not know go to the launcher unchanged, values included; --dry-run
# prints the command. A real 2-rank run goes through it.
source "$(dirname "$0")/../support/cli_lib.sh"
SPMDRUN=${SPMD_SOURCE_DIR:?}/tools/spmdrun
unset SLURM_JOB_ID SLURM_CPUS_PER_TASK

run mpirun_form 0 10 "$SPMDRUN" -np 3 --dry-run "$SPMD" info
expect_in "mpirun: ranks, no binding, keepalive" "mpirun -np 3 --bind-to none --mca oob_tcp_keepalive_time 5 --mca oob_tcp_keepalive_intvl 2 --mca oob_tcp_keepalive_probes 5 .*spmd info$"
if [ "$(id -u)" -eq 0 ]; then
  expect_in "mpirun as root: allowed" "^env OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 mpirun"
fi
run passthrough 0 10 "$SPMDRUN" --dry-run -np 4 --hosts n1,n2 --mca btl self,vader --map-by node -x FOO --oversubscribe \
  "$SPMD" eval --data x.h5 --json r.json
expect_in "passthrough: hosts, two-value --mca, --map-by's value, flags, then the program and its options" \
  "mpirun -np 4 --host n1\\\\?,n2 .*--mca btl self\\\\?,vader --map-by node -x FOO --oversubscribe .*spmd eval --data x.h5 --json r.json$"
run slurm_form 0 10 env SLURM_JOB_ID=42 SLURM_CPUS_PER_TASK=4 "$SPMDRUN" --dry-run -np 8 "$SPMD" info
expect_in "srun under Slurm, the allocation's CPUs per task" "^srun --mpi=pmix --cpus-per-task=4 --ntasks=8 .*spmd info$"
expect_not_in "srun: no mpirun options" "keepalive|bind-to"
run slurm_whole_allocation 0 10 env SLURM_JOB_ID=42 "$SPMDRUN" --dry-run "$SPMD" info
expect_in "srun without -np: the allocation's tasks" "^srun --mpi=pmix --cpus-per-task=1 .*spmd info$"
run slurm_hosts nonzero 10 env SLURM_JOB_ID=42 "$SPMDRUN" --hosts a,b "$SPMD" info
expect_in "--hosts under Slurm refused" "--hosts: under Slurm \(job 42\) the allocation decides"
run slurm_mpirun 0 10 env SLURM_JOB_ID=42 "$SPMDRUN" --dry-run --launcher mpirun -np 4 "$SPMD" info
expect_in "--launcher mpirun inside an allocation: mpirun with its options" "mpirun -np 4 --bind-to none --mca oob_tcp_keepalive_time 5 .*spmd info$"
expect_in "--launcher mpirun inside an allocation: the job's own session directories" "--mca orte_tmpdir_base /[^ ]*/spmdrun-job42 "
run srun_chosen 0 10 "$SPMDRUN" --dry-run --launcher srun -np 2 "$SPMD" info
expect_in "--launcher srun outside Slurm: srun" "^srun --mpi=pmix --cpus-per-task=1 --ntasks=2 .*spmd info$"
run bad_launcher nonzero 10 "$SPMDRUN" --launcher aprun "$SPMD" info
expect_in "an unknown launcher is refused" "--launcher 'aprun': use srun or mpirun"
run no_program nonzero 10 "$SPMDRUN" -np 2
expect_in "no program: said" "no program to run"
run unknown_word nonzero 10 "$SPMDRUN" -np 2 nosuchprogram-xyz info
expect_in "a word that is no program: said" "'nosuchprogram-xyz' is neither an option nor a program"
run bad_np nonzero 10 "$SPMDRUN" -np two "$SPMD" info
expect_in "-np checked" "-np 'two' is not a positive number of ranks"
# A real job through it: two ranks, one start-up table.
run real_job 0 60 "$SPMDRUN" -np 2 --oversubscribe "$SPMD" info --json "$WORK/info.json"
expect_in "real job: 2 ranks" "^# ranks 2 "
run real_job_json 0 10 /usr/bin/python3 -c "import json; assert json.load(open('$WORK/info.json'))['ranks'] == 2"
finish
