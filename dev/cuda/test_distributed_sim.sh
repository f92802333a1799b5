#!/usr/bin/env bash
# Multi-process tests of the simulated GPU trainer (train_gpt_sim_dist[_fp32]: mpicxx, fake NCCL over MPI),
# run under mpirun on the CPU. Model L=2, C=64, T=32, V=256 on mock data; every run has the same global
# batch of 384 tokens (12 sequences), 10 steps:
#   - N = 1, 2, 3, 4 ranks (micro-batch 12/N), ZeRO 0 and 1, fp32 and bf16: each step's loss vs the plain
#     single-process trainer (train_gpt_sim[_fp32], no NCCL) — fp32 within 1e-5 relative, bf16 within 2e-2;
#     ZeRO-1 prints the same step lines as ZeRO-0; N = 1 through NCCL prints the same lines as the plain run;
#   - N = 2, ZeRO 0 and 1, fp32, under the simulator's deferred stream orders (deferred, deferred:others-first,
#     deferred:shuffle:1): the same step lines as with synchronous streams, bit for bit;
#   - gradient accumulation (2 ranks x 3 micro-steps) and --grad-comm fp32 against the same reference;
#   - optimizer bytes per rank = ceil(parameters / N) x 4 bytes x arrays (ZeRO-1), all parameters (ZeRO-0);
#   - a ZeRO-1 checkpoint written by 4 ranks resumes on 2 ranks, whose checkpoint resumes on 1 (the plain
#     trainer), each continuing with the uninterrupted 4-rank run's losses (fp32: 1e-5 relative);
#   - the NCCL id shared by file and by tcp rendezvous gives the same run as by MPI; so do the launch scripts
#     (scripts/run_single_node.sh with mpirun and with torchrun-style variables, run_multi_node_mpirun.sh);
#   - a rank killed with SIGKILL mid-run makes mpirun exit non-zero within 30 s; a peer that never calls MPI_Init
#     ends the job after --dist-timeout (rank 0's watchdog in MPI_Init), not a hang;
#   - bad input: -z 2, a rank given other flags (named), a rank reading other shards (named), an --output-dir
#     the ranks do not share, a batch that
#     fits only without the communication buffers (CUDASIM_MEM_BYTES), a total
#     batch the ranks cannot split (the message names what would work), and the
#     learning-rate scaling rule printed in the run header.
# Ends with "N passed, M failed".
set -u
. "$(dirname "$0")/../testlib.sh"
test_begin
mpi_begin

model="--n-layer 2 --n-head 2 --n-embd 64 --vocab-size 256 -t 32 --mock-data -s 0 -v 0 -l 3e-3 -u 2 -d 384"

# ---------------------------------------------------------------- N ranks vs one process
./train_gpt_sim_fp32 $model -b 12 -x 10 >"$tmp/ref_fp32.log" 2>&1
./train_gpt_sim $model -b 12 -x 10 >"$tmp/ref_bf16.log" 2>&1
for prec in fp32 bf16; do
    if [ $prec = fp32 ]; then bin=./train_gpt_sim_dist_fp32; bound=1e-5; kind=rel
    else bin=./train_gpt_sim_dist; bound=2e-2; kind=abs; fi
    for n in 1 2 3 4; do
        for z in 0 1; do
            mpi $n "$tmp/${prec}_n${n}_z${z}.log" $bin $model -b $((12 / n)) -x 10 -z $z --dist-init mpi
            compare_losses "$prec N=$n ZeRO-$z vs one process" "$tmp/${prec}_n${n}_z${z}.log" "$tmp/ref_$prec.log" $bound $kind
        done
        same_steplines "$prec N=$n: ZeRO-1 vs ZeRO-0" "$tmp/${prec}_n${n}_z0.log" "$tmp/${prec}_n${n}_z1.log"
    done
    same_steplines "$prec N=1 through NCCL vs the plain trainer" "$tmp/ref_$prec.log" "$tmp/${prec}_n1_z0.log"
done
# the overlapped communication under the simulator's deferred stream orders (CUDASIM_STREAMS): every kernel and
# collective is deterministic, so any order CUDA allows gives the synchronous run's step lines bit for bit; a
# missing event wait between the compute and communication streams reads unreduced gradients or stale
# parameters (seen: layer l+1's ln1 weights read before their ZeRO-1 gather, 5e-6 off in the loss)
for streams in deferred deferred:others-first deferred:shuffle:1; do
    for z in 0 1; do
        CUDASIM_STREAMS=$streams mpi 2 "$tmp/streams_z$z.log" ./train_gpt_sim_dist_fp32 $model -b 6 -x 10 -z $z --dist-init mpi
        same_steplines "fp32 N=2 ZeRO-$z, CUDASIM_STREAMS=$streams vs synchronous streams" "$tmp/fp32_n2_z$z.log" "$tmp/streams_z$z.log"
    done
done
mpi 2 "$tmp/accum.log" ./train_gpt_sim_dist_fp32 $model -b 2 -x 10 -z 1
if grep -q '3 micro-steps per step' "$tmp/accum.log"; then
    compare_losses "fp32 N=2 x 3 micro-steps ZeRO-1 vs one process" "$tmp/accum.log" "$tmp/ref_fp32.log" 1e-5 rel
else bad "accumulation: no '3 micro-steps per step' line: $(grep -E 'error|parameters' "$tmp/accum.log" | head -2)"; fi
mpi 3 "$tmp/comm32.log" ./train_gpt_sim_dist $model -b 4 -x 10 -z 1 --grad-comm fp32
if grep -q 'gradients in fp32' "$tmp/comm32.log"; then
    compare_losses "bf16 N=3 --grad-comm fp32 vs one process" "$tmp/comm32.log" "$tmp/ref_bf16.log" 2e-2 abs
else bad "--grad-comm fp32: no 'gradients in fp32' line: $(grep error "$tmp/comm32.log" | head -2)"; fi

# ---------------------------------------------------------------- optimizer memory per rank
for n in 2 3 4; do
    for z in 0 1; do
        log="$tmp/bf16_n${n}_z${z}.log"
        P=$(sed -nE 's/^parameters: ([0-9]+) .*/\1/p' "$log")
        line=$(grep '^optimizer state per rank' "$log")
        read -r bytes elems arrays <<<"$(sed -nE 's/^optimizer state per rank: ([0-9]+) bytes = ([0-9]+) elements x ([0-9]+) arrays.*/\1 \2 \3/p' "$log")"
        if [ $z = 1 ]; then want=$(((P + n - 1) / n)); else want=$P; fi
        if [ -n "$P" ] && [ "${elems:-x}" = "$want" ] && [ "$bytes" = $((want * 4 * arrays)) ] && [ "$arrays" = 3 ]; then
            ok "N=$n ZeRO-$z: $line (P=$P: expected $want elements)"
        else bad "N=$n ZeRO-$z: '$line' with P=$P, expected $want elements"; fi
    done
done

# ---------------------------------------------------------------- checkpoints across world sizes
mpi 4 "$tmp/r4.log" ./train_gpt_sim_dist_fp32 $model -b 3 -x 10 -z 1 -n 4 -o "$tmp/ck4"
mkdir -p "$tmp/ck2" "$tmp/ck1"
cp "$tmp/ck4"/*00000004* "$tmp/ck2/"
mpi 2 "$tmp/r2.log" ./train_gpt_sim_dist_fp32 $model -b 6 -x 10 -z 1 -n 4 -o "$tmp/ck2" -y 1
if grep -q 're-sharded from 4 to 2 ranks' "$tmp/r2.log"; then
    compare_losses "resume a 4-rank checkpoint (step 4) on 2 ranks" "$tmp/r2.log" "$tmp/r4.log" 1e-5 rel 5
else bad "resume 4 -> 2: no re-sharding line: $(grep -E 'error|resume' "$tmp/r2.log" | head -3)"; fi
cp "$tmp/ck2"/*00000008* "$tmp/ck1/"
./train_gpt_sim_fp32 $model -b 12 -x 10 -n 4 -o "$tmp/ck1" -y 1 >"$tmp/r1.log" 2>&1
if grep -q 're-sharded from 2 to 1 ranks' "$tmp/r1.log"; then
    compare_losses "resume that 2-rank checkpoint (step 8) on 1 rank" "$tmp/r1.log" "$tmp/r4.log" 1e-5 rel 9
else bad "resume 2 -> 1: no re-sharding line: $(grep -E 'error|resume' "$tmp/r1.log" | head -3)"; fi
mpi 4 "$tmp/r4b.log" ./train_gpt_sim_dist $model -b 3 -x 10 -z 1 -n 4 -o "$tmp/ck4b"
mkdir -p "$tmp/ck1c"
cp "$tmp/ck4b"/*00000004* "$tmp/ck1c/"
./train_gpt_sim $model -b 12 -x 10 -o "$tmp/ck1c" -y 1 >"$tmp/r1c.log" 2>&1
compare_losses "bf16: a 4-rank ZeRO-1 checkpoint resumed on 1 rank" "$tmp/r1c.log" "$tmp/r4b.log" 2e-2 abs 5

# ---------------------------------------------------------------- rendezvous by file and by tcp
mpi 2 "$tmp/file.log" ./train_gpt_sim_dist $model -b 6 -x 3 --dist-init file --dist-file "$tmp/nccl_id"
mpi 2 "$tmp/mpi3.log" ./train_gpt_sim_dist $model -b 6 -x 3 --dist-init mpi
if grep -q 'NCCL id by file' "$tmp/file.log"; then same_steplines "NCCL id by file vs by MPI" "$tmp/mpi3.log" "$tmp/file.log"
else bad "file rendezvous: $(grep -E 'error|distributed' "$tmp/file.log" | head -2)"; fi
# below Linux's ephemeral range (32768-60999), where a client socket of any process could hold the port
port=$((20000 + RANDOM % 12000))
mpi 2 "$tmp/tcp.log" -x MASTER_ADDR=127.0.0.1 -x MASTER_PORT=$port ./train_gpt_sim_dist $model -b 6 -x 3 --dist-init tcp
if grep -q 'NCCL id by tcp' "$tmp/tcp.log"; then same_steplines "NCCL id by tcp vs by MPI" "$tmp/mpi3.log" "$tmp/tcp.log"
else bad "tcp rendezvous: $(grep -E 'error|distributed' "$tmp/tcp.log" | head -2)"; fi

# ---------------------------------------------------------------- the launch scripts
TRAINER=./train_gpt_sim_dist MPIRUN_ARGS="$MPIRUN_FLAGS" bash scripts/run_single_node.sh 2 -- $model -b 6 -x 3 --dist-init mpi \
    >"$tmp/single.log" 2>&1
same_steplines "scripts/run_single_node.sh 2 (mpirun) vs mpirun -np 2" "$tmp/mpi3.log" "$tmp/single.log"
TRAINER=./train_gpt_sim_dist MPIRUN_ARGS="$MPIRUN_FLAGS" HOSTS=localhost:2 bash scripts/run_multi_node_mpirun.sh -- $model -b 6 -x 3 \
    --dist-init mpi >"$tmp/multi.log" 2>&1
same_steplines "scripts/run_multi_node_mpirun.sh with HOSTS=localhost:2 vs mpirun -np 2" "$tmp/mpi3.log" "$tmp/multi.log"
./train_gpt_sim $model -b 12 -x 3 >"$tmp/plain3.log" 2>&1
TRAINER=./train_gpt_sim_dist LAUNCH=env bash scripts/run_single_node.sh 1 -- $model -b 12 -x 3 >"$tmp/env.log" 2>&1
if grep -q 'NCCL id by tcp' "$tmp/env.log"; then same_steplines "LAUNCH=env run_single_node.sh 1 (RANK/WORLD_SIZE, tcp) vs plain" "$tmp/plain3.log" "$tmp/env.log"
else bad "LAUNCH=env: $(grep -E 'error|distributed' "$tmp/env.log" | head -2)"; fi

# ---------------------------------------------------------------- a rank dies
$MPIRUN $MPIRUN_FLAGS -np 3 ./train_gpt_sim_dist $model -b 4 -x 1000 >"$tmp/kill.log" 2>&1 &
mpirun_pid=$!
for _ in $(seq 1 300); do grep -q '^step     1/' "$tmp/kill.log" && break; sleep 0.1; done
victim=$(pgrep -P $mpirun_pid -f train_gpt_sim_dist | sed -n 2p)
start=$(date +%s.%N)
if [ -n "$victim" ]; then kill -KILL "$victim"; fi
for _ in $(seq 1 300); do kill -0 $mpirun_pid 2>/dev/null || break; sleep 0.1; done
if kill -0 $mpirun_pid 2>/dev/null; then
    kill -KILL $mpirun_pid
    bad "killed rank: mpirun still running after 30 s"
else
    wait $mpirun_pid
    rc=$?
    secs=$(awk -v s="$start" -v e="$(date +%s.%N)" 'BEGIN { printf "%.1f", e - s }')
    if [ -n "$victim" ] && [ $rc -ne 0 ]; then ok "SIGKILL of one of 3 ranks (pid $victim): mpirun exited with status $rc after $secs s (bound 30 s)"
    else bad "killed rank: victim '$victim', mpirun status $rc"; fi
fi

# a peer that never reaches MPI_Init (here a process that only sleeps): rank 0's wait in MPI_Init is bounded by
# --dist-timeout (its watchdog exits 3, naming MPI_Init), and mpirun stops the job
start=$SECONDS
timeout 120 $MPIRUN $MPIRUN_FLAGS -np 1 ./train_gpt_sim_dist $model -b 12 -x 2 --dist-init mpi --dist-timeout 3 : -np 1 sleep 300 \
    >"$tmp/init_hang.log" 2>&1
rc=$?
if [ $rc -ne 0 ] && [ $rc -ne 124 ] && grep -q 'no progress for [0-9]* s (--dist-timeout) in MPI_Init' "$tmp/init_hang.log"; then
    ok "a peer that never calls MPI_Init: exit $rc after $((SECONDS - start)) s: $(grep -m1 'MPI_Init' "$tmp/init_hang.log")"
else
    bad "a peer that never calls MPI_Init: exit $rc after $((SECONDS - start)) s (124: hung): $(grep -m2 error "$tmp/init_hang.log")"
fi

# ---------------------------------------------------------------- bad input and the run header
expect_error_log() { # NAME PATTERN LOG: non-zero exit recorded in LOG's last line "rc N", an error line matching PATTERN
    if grep -qE "$2" "$3" && ! grep -q '^rc 0$' "$3"; then ok "$1: $(grep -E "$2" "$3" | head -1)"
    else bad "$1: $(tail -3 "$3")"; fi
}
./train_gpt_sim_dist $model -b 12 -x 1 -z 2 >"$tmp/z2.log" 2>&1; echo "rc $?" >>"$tmp/z2.log"
expect_error_log "-z 2 is rejected" "error: --zero: bad value '2': expected an integer in \\[0, 1\\]" "$tmp/z2.log"
# rank 1 started differently through a wrapper: other flags, or the same relative -o seen from another directory
printf '#!/bin/bash\nif [ "$OMPI_COMM_WORLD_RANK" = 1 ]; then mkdir -p "%s/elsewhere" && cd "%s/elsewhere"; [ -n "$R1" ] && set -- "$@" $R1; fi\nexec "%s/train_gpt_sim_dist" "$@"\n' \
    "$tmp" "$tmp" "$here" >"$tmp/rank1.sh"
chmod +x "$tmp/rank1.sh"
mkdir -p "$tmp/here"
(cd "$tmp/here" && $MPIRUN $MPIRUN_FLAGS -x R1="--seed 7" -np 2 "$tmp/rank1.sh" $model -b 6 -x 2 >"$tmp/flags.log" 2>&1; echo "rc $?" >>"$tmp/flags.log")
expect_error_log "rank 1 given another --seed: both stop at once, naming it" \
    "error: rank 1: this rank has --seed 7 but rank 0 has --seed 1337: every rank must be given the same flags" "$tmp/flags.log"
(cd "$tmp/here" && $MPIRUN $MPIRUN_FLAGS -x R1= -np 2 "$tmp/rank1.sh" $model -b 6 -x 2 -o run >"$tmp/local.log" 2>&1; echo "rc $?" >>"$tmp/local.log")
expect_error_log "an --output-dir the ranks do not share (a node-local path): stopped before training" \
    "error: rank 1: run/.lock: this rank does not see the lock file rank 0 wrote" "$tmp/local.log"
if grep -q "^step " "$tmp/local.log"; then bad "an --output-dir the ranks do not share: a step was trained"; fi
# rank 1 reads other shards behind the same relative glob (a node-local copy that differs)
mkdir -p "$tmp/here/d" "$tmp/elsewhere/d"
write_shard "$tmp/here/d/train_000.bin" 256 5000 periodic
write_shard "$tmp/elsewhere/d/train_000.bin" 256 5000 random
(cd "$tmp/here" && $MPIRUN $MPIRUN_FLAGS -x R1= -np 2 "$tmp/rank1.sh" ${model/--mock-data/} -i 'd/train_*.bin' -b 6 -x 2 >"$tmp/data.log" 2>&1
    echo "rc $?" >>"$tmp/data.log")
expect_error_log "rank 1 reads other shards: both stop before training, naming it" \
    "error: rank 1: this rank's training data \(5000 tokens, fingerprint [0-9a-f]+\) differs from rank 0's \(5000 tokens, [0-9a-f]+\)" "$tmp/data.log"
if grep -q "^step " "$tmp/data.log"; then bad "ranks with different shards: a step was trained"; fi
# a 70 MiB device: the model and batch need 64 MiB, --grad-comm fp32's gradient copy, the checkpoint gather and the
# broadcast buffer 27 more
CUDASIM_MEM_BYTES=$((70 << 20)) mpi 2 "$tmp/mem.log" -x CUDASIM_MEM_BYTES ./train_gpt_sim_dist --n-layer 1 --n-head 1 --n-embd 64 \
    --vocab-size 50257 -t 8 -b 1 --mock-data -s 0 -v 0 -x 1 -z 1 --grad-comm fp32
echo "rc $?" >>"$tmp/mem.log"
expect_error_log "the memory check counts the communication buffers (2 ranks, --grad-comm fp32, a 70 MiB device)" \
    "error: batch 1 x 8 does not fit in device memory: needs 90.7 MiB .*scratch 58.7 MiB" "$tmp/mem.log"
# a communicator's broadcast buffer is counted too: with one (--dist-init on one rank) a device of exactly the bytes
# the check asks for trains (its first broadcast was a raw cudaMalloc failure)
fit=(--mock-data 1 --n-layer 1 --n-head 2 --n-embd 32 --vocab-size 64 -b 2 -t 16 -x 1 -s 0 -v 0 --dist-init file)
short=$(CUDASIM_MEM_BYTES=42000000 ./train_gpt_sim_dist "${fit[@]}" --dist-file "$tmp/fit_id1" 2>&1 | sed -nE 's/.*\), ([0-9]+) bytes more than .*/\1/p')
if [ -n "$short" ] && CUDASIM_MEM_BYTES=$((42000000 + short)) ./train_gpt_sim_dist "${fit[@]}" --dist-file "$tmp/fit_id2" >"$tmp/fit.log" 2>&1 &&
    grep -qE '^step +1/1 ' "$tmp/fit.log"; then
    ok "with a communicator, a device of exactly the bytes the memory check asks for (42000000 + $short) trains"
else
    bad "with a communicator, a device of the bytes the memory check asks for (42000000 + ${short:-?}): $(grep -m1 '^error' "$tmp/fit.log")"
fi
mpi 2 "$tmp/split.log" ./train_gpt_sim_dist $model -b 4 -x 1; echo "rc $?" >>"$tmp/split.log"
expect_error_log "a total batch 2 ranks cannot split" "error: --total-batch 384 is not a multiple of .* 4 x 32 x 2 = 256 tokens: 256 \(1 micro-step\) or 512 \(2 micro-steps\) would be" "$tmp/split.log"
mpi 2 "$tmp/lr.log" ./train_gpt_sim_dist $model -b 6 -x 3 --lr-scale linear --lr-ref-batch 192
if grep -q '^learning rate: 0.003 x linear(384 / 192 tokens) = 0.006$' "$tmp/lr.log" && grep -q '^step     3/3 .*lr 6.000e-03' "$tmp/lr.log"; then
    ok "linear learning-rate scaling: $(grep '^learning rate' "$tmp/lr.log")"
else bad "lr scaling: $(grep -E 'learning rate|^step     3|error' "$tmp/lr.log")"; fi

test_end
