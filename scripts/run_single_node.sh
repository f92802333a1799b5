#!/usr/bin/env bash
# One node, one process per GPU, with Open MPI's mpirun (the NCCL id is shared by MPI):
#   scripts/run_single_node.sh [NGPUS] -- TRAINER FLAGS...
#   scripts/run_single_node.sh 8 -- -e d12 -i "data/fineweb_train_*.bin" -j "data/fineweb_val_*.bin" -b 32 -t 1024 -d 524288 -z 1 -o out/d12
# NGPUS defaults to every GPU nvidia-smi lists. Without MPI (a build without it, or no mpirun), the same
# job runs with torchrun-style variables and a tcp rendezvous on this host: LAUNCH=env. TRAINER
# (default ./train_gpt) is the binary; extra mpirun options go in MPIRUN_ARGS.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
ngpus=${1:-}
if [ -z "$ngpus" ] || [ "$ngpus" = -- ]; then ngpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU' || true); fi
[ "${1:-}" != -- ] && [ $# -gt 0 ] && shift
[ "${1:-}" = -- ] && shift
[ "$ngpus" -ge 1 ] 2>/dev/null || { echo "error: no GPU found and no count given: scripts/run_single_node.sh NGPUS -- FLAGS" >&2; exit 2; }
TRAINER=${TRAINER:-./train_gpt}
LAUNCH=${LAUNCH:-mpirun}
# shellcheck source=scripts/nccl_env.sh
. "$here/nccl_env.sh"
if [ "$LAUNCH" = mpirun ]; then
    # --bind-to none: each rank's data loader and host work may use several cores
    # shellcheck disable=SC2086
    exec mpirun -np "$ngpus" --bind-to none ${MPIRUN_ARGS:-} "$TRAINER" "$@"
fi
# torchrun-style: RANK / WORLD_SIZE / LOCAL_RANK per process, the id over tcp from rank 0
export MASTER_ADDR=${MASTER_ADDR:-127.0.0.1} MASTER_PORT=${MASTER_PORT:-$((20000 + $$ % 20000))} WORLD_SIZE=$ngpus
pids=()
for ((r = 0; r < ngpus; r++)); do
    RANK=$r LOCAL_RANK=$r "$TRAINER" --dist-init tcp "$@" &
    pids+=($!)
done
# the first rank to fail stops the others (a rank blocked on a dead peer would otherwise wait for --dist-timeout)
status=0
while [ ${#pids[@]} -gt 0 ]; do
    if wait -n; then continue; else status=$?; fi
    if [ $status -ne 0 ]; then kill "${pids[@]}" 2>/dev/null || true; wait || true; exit $status; fi
    alive=(); for p in "${pids[@]}"; do kill -0 "$p" 2>/dev/null && alive+=("$p"); done; pids=("${alive[@]+"${alive[@]}"}")
done
exit $status
