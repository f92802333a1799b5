#!/usr/bin/env bash
# mpirun_forwarding_signals ARGS...: runs `mpirun ARGS...` and exits with its status; a SIGTERM, SIGINT or SIGUSR1
# to the calling script reaches every rank at once as SIGUSR1 (mpirun forwards it), so the ranks checkpoint and
# exit 75, and so does mpirun. Sourced by the mpirun launch scripts. Open MPI 4 handles a SIGTERM or SIGINT to
# mpirun itself otherwise: it forwards SIGTERM only after odls_base_sigkill_timeout (1 s by default) and SIGKILLs
# the ranks one timeout later, so a step longer than that lost its checkpoint, and mpirun exited 1.
mpirun_forwarding_signals() {
    mpirun "$@" &
    local pid=$! status=0
    # shellcheck disable=SC2064 # $pid is meant to expand now
    trap "kill -USR1 $pid 2>/dev/null || true" TERM INT USR1
    wait $pid || status=$?
    while [ $status -gt 128 ] && kill -0 $pid 2>/dev/null; do # the wait was cut short by the trap: mpirun goes on
        status=0
        wait $pid || status=$?
    done
    exit $status
}
