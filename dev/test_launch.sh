#!/usr/bin/env bash
# The launch scripts (scripts/run_single_node.sh, run_multi_node_mpirun.sh, slurm_train.sbatch) with stub
# trainers, mpirun, srun and scontrol that print what they were given or exit as told, so what is checked is
# the scripts' own logic: the command lines they build, exit statuses (success, the first failing rank's
# status, preemption's 75), SIGTERM reaching every rank, and bad arguments refused with exit 2 before
# anything is launched. Ends with "N passed, M failed".
set -u
. "$(dirname "$0")/testlib.sh"
test_begin
mkdir -p "$tmp/bin"
for c in mpirun srun scontrol; do printf '#!/bin/bash\necho "%s $*"\n' "$c" >"$tmp/bin/$c"; done
printf '#!/bin/bash\necho "rank $RANK of $WORLD_SIZE: $*"\n' >"$tmp/bin/ok_trainer"
printf '#!/bin/bash\n[ "$RANK" = 1 ] && exit 5\nexec sleep 60\n' >"$tmp/bin/fail_trainer"
# ranks 0 and 1 fail together (a kill of a rank that has just ended must not end the script), 2 and 3 run on
printf '#!/bin/bash\n[ "$RANK" -lt 2 ] && exit 7\nexec sleep 60\n' >"$tmp/bin/fail2_trainer"
# prints the MASTER_ADDR it was given
printf '#!/bin/bash\necho "rank $RANK: $MASTER_ADDR"\n' >"$tmp/bin/addr_trainer"
# a trainer that, like train_gpt, ends with 75 on SIGTERM; it records that it got the signal
printf '#!/bin/bash\ntrap "touch %s/term.\\$RANK; exit 75" TERM\ntouch %s/started.$RANK\nwhile :; do sleep 0.05; done\n' "$tmp" "$tmp" \
    >"$tmp/bin/pre_trainer"
chmod +x "$tmp/bin"/*
export PATH="$tmp/bin:$PATH"

# run_single_node.sh, LAUNCH=env (torchrun-style variables)
out=$(LAUNCH=env TRAINER=ok_trainer bash scripts/run_single_node.sh 3 -- -x 1 2>&1)
rc=$?
if [ $rc -eq 0 ] && [ "$(grep -c '^rank [0-2] of 3: --dist-init tcp -x 1$' <<<"$out")" -eq 3 ]; then
    ok "LAUNCH=env, 3 ranks that succeed: exit 0, each rank got RANK, WORLD_SIZE and the flags"
else
    bad "LAUNCH=env, 3 ranks that succeed: exit $rc: $out"
fi
start=$SECONDS
LAUNCH=env TRAINER=fail_trainer bash scripts/run_single_node.sh 3 -- >/dev/null 2>&1
rc=$?
if [ $rc -eq 5 ] && [ $((SECONDS - start)) -lt 30 ]; then ok "LAUNCH=env, rank 1 exits 5: the others are stopped, exit 5 in $((SECONDS - start)) s"
else bad "LAUNCH=env, rank 1 exits 5: exit $rc after $((SECONDS - start)) s"; fi
for i in 1 2 3 4 5 6; do
    start=$SECONDS
    err=$(LAUNCH=env TRAINER=fail2_trainer bash scripts/run_single_node.sh 4 -- 2>&1 >/dev/null)
    rc=$?
    if [ $rc -ne 7 ] || [ -n "$err" ]; then break; fi
done
if [ $rc -eq 7 ] && [ -z "$err" ]; then ok "LAUNCH=env, ranks 0 and 1 exit 7 together (6 runs): exit 7 each time, no stray errors"
else bad "LAUNCH=env, ranks 0 and 1 exit 7 together: run $i exit $rc after $((SECONDS - start)) s: $err"; fi
out=$(MASTER_ADDR=10.1.2.3 LAUNCH=env TRAINER=addr_trainer bash scripts/run_single_node.sh 2 -- 2>&1)
if [ "$(grep -c ': 127.0.0.1$' <<<"$out")" -eq 2 ]; then ok "LAUNCH=env with MASTER_ADDR=10.1.2.3 inherited: the ranks meet on 127.0.0.1"
else bad "LAUNCH=env, inherited MASTER_ADDR: $out"; fi
for cvd in -1 NoDevFiles; do
    err=$(CUDA_VISIBLE_DEVICES=$cvd TRAINER=ok_trainer bash scripts/run_single_node.sh -- 2>&1 >/dev/null)
    rc=$?
    if [ $rc -eq 2 ] && grep -q "CUDA_VISIBLE_DEVICES=$cvd names no GPU" <<<"$err"; then ok "CUDA_VISIBLE_DEVICES=$cvd: exit 2: $(head -1 <<<"$err")"
    else bad "CUDA_VISIBLE_DEVICES=$cvd: exit $rc: $err"; fi
done
LAUNCH=env TRAINER=pre_trainer bash scripts/run_single_node.sh 2 -- >/dev/null 2>&1 &
launcher=$!
# the signal once both ranks have set their trap (at most 30 s)
for _ in $(seq 600); do [ -e "$tmp/started.0" ] && [ -e "$tmp/started.1" ] && break; sleep 0.05; done
kill -TERM $launcher
wait $launcher
rc=$?
if [ $rc -eq 75 ] && [ -e "$tmp/term.0" ] && [ -e "$tmp/term.1" ]; then ok "LAUNCH=env, SIGTERM to the script: both ranks get it, exit 75"
else bad "LAUNCH=env, SIGTERM to the script: exit $rc, ranks signalled: $(find "$tmp" -name "term.*" | wc -l)"; fi
pkill -f "$tmp/bin/pre_trainer" 2>/dev/null

# run_single_node.sh, mpirun
out=$(TRAINER=ok_trainer bash scripts/run_single_node.sh 4 -- -e d12 -o "out dir" 2>&1)
if [ "$out" = "mpirun -np 4 --bind-to none ok_trainer -e d12 -o out dir" ]; then ok "mpirun launch line: $out"
else bad "mpirun launch line: $out"; fi
for args in "abc --" "0 --" "-1 --" "-e d12" "2 -x 1"; do
    # shellcheck disable=SC2086
    err=$(TRAINER=ok_trainer bash scripts/run_single_node.sh $args 2>&1 >/dev/null)
    rc=$?
    if [ $rc -eq 2 ] && [[ $err == error:* ]]; then ok "run_single_node.sh $args: exit 2: $(head -1 <<<"$err")"
    else bad "run_single_node.sh $args: exit $rc: $err"; fi
done
err=$(LAUNCH=MPI bash scripts/run_single_node.sh 2 -- 2>&1)
rc=$?
if [ $rc -eq 2 ] && grep -q 'LAUNCH=MPI: expected mpirun or env' <<<"$err"; then ok "LAUNCH=MPI (a typo): exit 2"
else bad "LAUNCH=MPI: exit $rc: $err"; fi

# SIGTERM to an mpirun launch script: a SIGUSR1 to mpirun at once (Open MPI forwards it; a SIGTERM to mpirun would reach
# the ranks only after odls_base_sigkill_timeout, then SIGKILL them), and the script exits with mpirun's 75
mkdir -p "$tmp/bin_sig"
printf '#!/bin/bash\ntrap "touch %s/usr1.mpirun; exit 75" USR1\ntouch %s/started.mpirun\nwhile :; do sleep 0.05; done\n' "$tmp" "$tmp" \
    >"$tmp/bin_sig/mpirun"
chmod +x "$tmp/bin_sig/mpirun"
for script in run_single_node.sh run_multi_node_mpirun.sh; do
    rm -f "$tmp/usr1.mpirun" "$tmp/started.mpirun"
    ngpus=2
    [ $script = run_single_node.sh ] || ngpus=
    # shellcheck disable=SC2086 # no NGPUS argument for the multi-node script (HOSTS gives it)
    PATH="$tmp/bin_sig:$PATH" HOSTS=a:2 TRAINER=ok_trainer bash "scripts/$script" $ngpus -- -x 1 >/dev/null 2>&1 &
    launcher=$!
    for _ in $(seq 1 200); do [ -e "$tmp/started.mpirun" ] && break; sleep 0.05; done
    kill -TERM $launcher
    wait $launcher
    rc=$?
    if [ $rc -eq 75 ] && [ -e "$tmp/usr1.mpirun" ]; then ok "$script: SIGTERM to the script reaches mpirun as SIGUSR1, exit 75"
    else bad "$script: SIGTERM to the script: exit $rc, mpirun got SIGUSR1: $([ -e "$tmp/usr1.mpirun" ] && echo yes || echo no)"; fi
done
pkill -f "$tmp/bin_sig/mpirun" 2>/dev/null

# run_multi_node_mpirun.sh
err=$(env -u HOSTS bash scripts/run_multi_node_mpirun.sh -- -x 1 2>&1)
rc=$?
if [ $rc -eq 2 ] && [[ $err == "error: HOSTS is not set"* ]]; then ok "run_multi_node_mpirun.sh without HOSTS: exit 2: $(head -1 <<<"$err")"
else bad "run_multi_node_mpirun.sh without HOSTS: exit $rc: $err"; fi
out=$(NCCL_P2P_DISABLE=1 NCCL_NET_GDR_LEVEL=PHB HOSTS=a:8,b-2.c:2 TRAINER=ok_trainer bash scripts/run_multi_node_mpirun.sh -- -x 1 2>&1)
if grep -q '^mpirun -np 10 --host a:8,b-2.c:2 --map-by slot --bind-to none .*ok_trainer -x 1$' <<<"$out" &&
    grep -q -- '-x NCCL_P2P_DISABLE' <<<"$out" && grep -q -- '-x NCCL_NET_GDR_LEVEL' <<<"$out" && grep -q -- '-x PATH' <<<"$out"; then
    ok "multi-node launch line, NCCL variables (digits too) and PATH forwarded: $out"
else
    bad "multi-node launch line: $out"
fi
for hosts in "a:08" "a:8, b:8" ":8" "a:8:9" "a" "a:0"; do
    err=$(HOSTS=$hosts bash scripts/run_multi_node_mpirun.sh -- -x 1 2>&1)
    rc=$?
    if [ $rc -eq 2 ] && [[ $err == error:* ]]; then ok "HOSTS='$hosts': exit 2: $err"; else bad "HOSTS='$hosts': exit $rc: $err"; fi
done

# slurm_train.sbatch
out=$(SLURM_JOB_NODELIST=n1 SLURM_JOB_ID=7 TRAINER=ok_trainer bash scripts/slurm_train.sbatch -x 1 2>&1)
if [ "$out" = "srun --kill-on-bad-exit=1 ok_trainer -o out/gpt2 -y 1 -n 100 --keep-last 3 --keep-every 1000 --dist-init tcp -x 1" ]; then
    ok "slurm launch line (the NCCL id over tcp, as MASTER_ADDR says): $out"
else
    bad "slurm launch line: $out"
fi
for case in "NET=bogus SLURM_JOB_NODELIST=n1" "NET=ib"; do
    # shellcheck disable=SC2086
    out=$(env $case TRAINER=ok_trainer bash scripts/slurm_train.sbatch -x 1 2>&1)
    rc=$?
    if [ $rc -eq 2 ] && ! grep -q '^srun' <<<"$out"; then ok "slurm_train.sbatch with $case: exit 2, nothing launched: $(head -1 <<<"$out")"
    else bad "slurm_train.sbatch with $case: exit $rc: $out"; fi
done
test_end
