#!/usr/bin/env bash
# One node, one process per GPU, with Open MPI's mpirun (the NCCL id is shared by MPI):
#   scripts/run_single_node.sh [NGPUS] -- TRAINER FLAGS...
#   scripts/run_single_node.sh 8 -- -e d12 -i "data/fineweb_train_*.bin" -j "data/fineweb_val_*.bin" -b 32 -t 1024 -d 524288 -z 1 -o out/d12
# NGPUS defaults to the GPUs CUDA_VISIBLE_DEVICES names, else every GPU nvidia-smi lists. Without MPI (a build without it, or no mpirun), the same
# job runs with torchrun-style variables and a tcp rendezvous on this host: LAUNCH=env; there the first
# rank to fail stops the others (the script exits with its status). Either way SIGTERM / SIGINT / SIGUSR1 to the
# script reach every rank at once (they checkpoint and exit 75, and so does the script). TRAINER (default ./train_gpt) is the binary;
# extra mpirun options go in MPIRUN_ARGS.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
usage="usage: scripts/run_single_node.sh [NGPUS] -- TRAINER_FLAGS...   (env: LAUNCH=mpirun|env, TRAINER, MPIRUN_ARGS)"
case ${1:-} in -h | --help) echo "$usage"; exit 0 ;; esac
ngpus=
if [ $# -gt 0 ] && [[ $1 == -?* ]] && [ "$1" != -- ]; then
    echo "error: the trainer's flags go after --: scripts/run_single_node.sh [NGPUS] -- $*" >&2; exit 2
fi
if [ $# -gt 0 ] && [ "$1" != -- ]; then ngpus=$1; shift; fi
if [ $# -gt 0 ]; then
    [ "$1" = -- ] || { echo "error: expected -- between NGPUS and the trainer's flags, got '$1'" >&2; echo "$usage" >&2; exit 2; }
    shift
fi
if [ -z "$ngpus" ] && [ -n "${CUDA_VISIBLE_DEVICES:-}" ]; then # the GPUs this job may use: indices, GPU-/MIG- UUIDs
    ngpus=$(tr ',' '\n' <<<"$CUDA_VISIBLE_DEVICES" | grep -cE '^([0-9]+|GPU-.+|MIG-.+)$' || true)
    [ "$ngpus" -ge 1 ] || { echo "error: CUDA_VISIBLE_DEVICES=$CUDA_VISIBLE_DEVICES names no GPU" >&2; echo "$usage" >&2; exit 2; }
elif [ -z "$ngpus" ]; then
    ngpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU' || true)
    [ "$ngpus" -ge 1 ] || { echo "error: no NGPUS given and nvidia-smi lists no GPU" >&2; echo "$usage" >&2; exit 2; }
elif ! [[ $ngpus =~ ^[1-9][0-9]*$ ]]; then
    echo "error: NGPUS '$ngpus' is not a positive integer" >&2; echo "$usage" >&2; exit 2
fi
TRAINER=${TRAINER:-./train_gpt}
LAUNCH=${LAUNCH:-mpirun}
case $LAUNCH in mpirun | env) ;; *) echo "error: LAUNCH=$LAUNCH: expected mpirun or env" >&2; exit 2 ;; esac
# shellcheck source=scripts/nccl_env.sh
. "$here/nccl_env.sh"
if [ "$LAUNCH" = mpirun ]; then
    # shellcheck source=scripts/mpirun_signals.sh
    . "$here/mpirun_signals.sh"
    # --bind-to none: each rank's data loader and host work may use several cores
    # shellcheck disable=SC2086
    mpirun_forwarding_signals -np "$ngpus" --bind-to none ${MPIRUN_ARGS:-} "$TRAINER" "$@"
fi
# torchrun-style: RANK / WORLD_SIZE / LOCAL_RANK per process, the id over tcp from rank 0. Each rank runs
# in a subshell that records the trainer's pid and, when it ends, its exit status, in $dir.
# (this host's address: a MASTER_ADDR inherited from a job's environment may name another node)
export MASTER_ADDR=127.0.0.1 MASTER_PORT=${MASTER_PORT:-$((20000 + $$ % 20000))} WORLD_SIZE=$ngpus
# an MPI launcher's variables (this script run under mpirun or srun --mpi) would name another rank
unset OMPI_COMM_WORLD_RANK OMPI_COMM_WORLD_SIZE OMPI_COMM_WORLD_LOCAL_RANK PMI_RANK PMI_SIZE MPI_LOCALRANKID
dir=$(mktemp -d)
signal_ranks() { # SIG: to every rank still running (a finished one's pid may belong to another process by now)
    for ((r = 0; r < ngpus; r++)); do
        # a rank that has just ended (its rc not written yet) is no error: under set -e a failed kill would end the script
        if [ -e "$dir/pid.$r" ] && ! [ -e "$dir/rc.$r" ]; then kill -"$1" "$(cat "$dir/pid.$r")" 2>/dev/null || true; fi
    done
    return 0
}
trap 'rm -rf "$dir"' EXIT
# shellcheck disable=SC2064 # $sig is meant to expand now
for sig in TERM INT USR1; do trap "signal_ranks $sig" "$sig"; done
for ((r = 0; r < ngpus; r++)); do
    (
        RANK=$r LOCAL_RANK=$r "$TRAINER" --dist-init tcp "$@" &
        echo $! >"$dir/tmp.pid.$r" && mv "$dir/tmp.pid.$r" "$dir/pid.$r"
        rc=0
        wait $! || rc=$?
        echo $rc >"$dir/tmp.rc.$r" && mv "$dir/tmp.rc.$r" "$dir/rc.$r"
    ) &
done
# the first rank to fail stops the others (a rank blocked on a dead peer would otherwise wait for --dist-timeout)
status=0
while :; do
    finished=0
    for f in "$dir"/rc.*; do
        [ -e "$f" ] || continue
        finished=$((finished + 1))
        rc=$(cat "$f")
        if [ "$rc" -ne 0 ] && [ $status -eq 0 ]; then status=$rc; signal_ranks TERM; fi
    done
    [ $finished -ge "$ngpus" ] && break
    wait -n 2>/dev/null || sleep 0.2 # a rank's subshell ended, or a signal came (then its trap ran)
done
exit $status
