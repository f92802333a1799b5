#!/usr/bin/env bash
# Several nodes with Open MPI: one process per GPU on every host, the NCCL id shared by MPI.
#   HOSTS=node1:8,node2:8 scripts/run_multi_node_mpirun.sh -- TRAINER FLAGS...
#   NET=eth NCCL_SOCKET_IFNAME=<if> OMPI_MCA_btl_tcp_if_include=<if> HOSTS=a:8,b:8 scripts/run_multi_node_mpirun.sh -- -e d48 ...
# HOSTS lists host:slots (slots = GPUs of that host); every host needs the same binary, data and
# output paths (a shared file system), and password-less ssh from this one. The network variables of
# scripts/nccl_env.sh are exported to every rank with mpirun -x. TRAINER defaults to ./train_gpt.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
usage="usage: HOSTS=host1:gpus,host2:gpus scripts/run_multi_node_mpirun.sh -- TRAINER_FLAGS...   (env: TRAINER, MPIRUN_ARGS, NET)"
case ${1:-} in -h | --help) echo "$usage"; exit 0 ;; esac
[ "${1:-}" = -- ] && shift
[ -n "${HOSTS:-}" ] || { echo "error: HOSTS is not set: set HOSTS=host1:gpus,host2:gpus" >&2; echo "$usage" >&2; exit 2; }
TRAINER=${TRAINER:-./train_gpt}
# shellcheck source=scripts/nccl_env.sh
. "$here/nccl_env.sh"
np=0
IFS=, read -ra entries <<<"$HOSTS"
for e in "${entries[@]}"; do
    [[ $e =~ ^[A-Za-z0-9._-]+:[1-9][0-9]*$ ]] || { echo "error: HOSTS entry '$e' is not host:gpus (gpus a positive integer)" >&2; exit 2; }
    np=$((np + 10#${e##*:}))
done
forward=()
for v in $(env | sed -n 's/^\(NCCL_[A-Za-z0-9_]*\)=.*/\1/p'); do forward+=(-x "$v"); done
# the search paths too: NCCL, CUDA or MPI from a module or a virtual environment are found on every node
for v in PATH LD_LIBRARY_PATH; do [ -n "${!v:-}" ] && forward+=(-x "$v"); done
# shellcheck source=scripts/mpirun_signals.sh
. "$here/mpirun_signals.sh"
# ranks are placed host by host, so OMPI_COMM_WORLD_LOCAL_RANK picks the GPU on each host; SIGTERM, SIGINT or SIGUSR1 to
# this script: every rank checkpoints and exits 75
# shellcheck disable=SC2086
mpirun_forwarding_signals -np "$np" --host "$HOSTS" --map-by slot --bind-to none "${forward[@]}" ${MPIRUN_ARGS:-} "$TRAINER" "$@"
