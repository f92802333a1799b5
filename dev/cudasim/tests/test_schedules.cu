/*
 * dev/cudasim/tests/test_schedules.cu — the simulator's schedule modes (CUDASIM_SCHEDULE=fifo|reverse|shuffle[:seed])
 * and deferred cp.async (CUDASIM_CP_ASYNC=deferred), described in dev/cudasim/cudasim.h. Each case sets the
 * environment before its launch (it is read once per launch).
 *   - the order itself: every thread takes a ticket from a per-block counter at block start and after a
 *     __syncthreads; fifo, reverse and shuffle give the orders they define, shuffle is a permutation that is
 *     the same for a seed and any OS thread count, and differs between seeds;
 *   - planted bugs that FIFO order hides: thread t reads the shared value thread t-1 wrote, without a barrier
 *     (block level, at block start) and without a __syncwarp (warp level, after a warp operation); both pass
 *     under fifo and are caught under reverse and shuffle, and the fixed kernels pass under every mode;
 *   - deferred cp.async: a read before cp_async_wait sees the NaN poison, wait<N> leaves exactly the newest N
 *     committed groups (and uncommitted copies) pending, and a thread exiting with copies pending, too many
 *     pending copies and a bad mode value are reported.
 *   - the project's kernel tests named on the command line, each run under reverse, shuffle:1 and shuffle:2
 *     with deferred cp.async, must pass.
 * The planted kernels write salt-dependent values (a new salt per launch), so a stale shared value left by an
 * earlier launch never looks right.
 */
#include "llmc/cuda_common.cuh"
#include "llmc/mma.cuh"
#include "dev/cudasim/tests/sim_test_util.h"

#include <math.h>
#include <vector>

#define BLOCK 128
#define GRID 4

/* ticket[b][0][t]: the order in which thread t of block b started; ticket[b][1][t]: its order after a
 * __syncthreads. One thread per element; counters[2b + phase] counts the block's arrivals. */
__global__ void ticket_kernel(int* tickets, int* counters) {
    int b = blockIdx.x, t = threadIdx.x;
    tickets[(b * 2 + 0) * BLOCK + t] = atomicAdd(&counters[2 * b], 1);
    __syncthreads();
    tickets[(b * 2 + 1) * BLOCK + t] = atomicAdd(&counters[2 * b + 1], 1);
}

/* block level: thread t writes s[t] = salt + t, thread t > 0 reads s[t-1] (expected salt + t - 1), with
 * or without the __syncthreads between (the planted bug); thread 0 reads its own value */
__global__ void neighbour_block_kernel(int* out, int salt, int with_barrier) {
    __shared__ int s[BLOCK];
    int t = threadIdx.x;
    s[t] = salt + t;
    if (with_barrier) __syncthreads();
    out[blockIdx.x * BLOCK + t] = t > 0 ? s[t - 1] : s[t];
}

/* warp level: after a warp operation (a broadcast of the salt), lane l writes s[t] = salt + t and lanes
 * 1..30 read their left neighbour's s[t-1], with or without the __syncwarp between (the planted bug); lanes 0
 * and 31 read their own value. (Lane 31, the last to arrive, goes on first under fifo, so the bug passes there.) */
__global__ void neighbour_warp_kernel(int* out, int salt, int with_syncwarp) {
    __shared__ int s[BLOCK];
    int t = threadIdx.x, lane = t % 32;
    int v = __shfl_sync(0xffffffffu, lane == 0 ? salt : 0, 0);
    s[t] = v + t;
    if (with_syncwarp) __syncwarp();
    out[blockIdx.x * BLOCK + t] = lane >= 1 && lane <= 30 ? s[t - 1] : s[t];
}

/* cp.async, one 16-byte chunk (4 floats) per thread and group: groups A and B committed, C not. out holds, per
 * thread, 6 chunks: A after wait<1>, B after wait<1>, C after wait<0>, C after commit + wait<0>, B after wait<0>,
 * and a chunk read right after its issue (read_before_wait) or after its wait. */
__global__ void cp_async_kernel(float* out, const float* in, int read_before_wait) {
    __shared__ __align__(16) float s[4][BLOCK * 4];
    int t = threadIdx.x;
    float* o = out + (size_t)t * 24;
    auto take = [&](int slot, int buf) { for (int i = 0; i < 4; i++) o[slot * 4 + i] = s[buf][t * 4 + i]; };
    cp_async_16(&s[0][t * 4], in + (0 * BLOCK + t) * 4);
    cp_async_commit();
    cp_async_16(&s[1][t * 4], in + (1 * BLOCK + t) * 4);
    cp_async_commit();
    cp_async_16(&s[2][t * 4], in + (2 * BLOCK + t) * 4);
    cp_async_wait<1>();
    take(0, 0);
    take(1, 1);
    cp_async_wait<0>();
    take(2, 2);
    cp_async_commit();
    cp_async_wait<0>();
    take(3, 2);
    take(4, 1);
    cp_async_16(&s[3][t * 4], in + (3 * BLOCK + t) * 4);
    cp_async_commit();
    if (!read_before_wait) cp_async_wait<0>();
    take(5, 3);
    cp_async_wait<0>();
}

/* a thread leaves with its copy pending (no wait) */
__global__ void cp_async_no_wait_kernel(const float* in) {
    __shared__ __align__(16) float s[4];
    cp_async_16(s, in);
    cp_async_commit();
}

/* a thread issues more copies than the simulator keeps pending */
__global__ void cp_async_too_many_kernel(const float* in) {
    __shared__ __align__(16) float s[4];
    for (int i = 0; i < 300; i++) cp_async_16(s, in);
    cp_async_wait<0>();
}

static void set_mode(const char* schedule, const char* cp_async) {
    if (schedule) setenv("CUDASIM_SCHEDULE", schedule, 1);
    else unsetenv("CUDASIM_SCHEDULE");
    if (cp_async) setenv("CUDASIM_CP_ASYNC", cp_async, 1);
    else unsetenv("CUDASIM_CP_ASYNC");
}

/* the tickets of ticket_kernel under `schedule` with `threads` OS threads */
static std::vector<int> tickets_under(const char* schedule, const char* threads) {
    int *tickets, *counters;
    cudaCheck(cudaMalloc(&tickets, GRID * 2 * BLOCK * sizeof(int)));
    cudaCheck(cudaMalloc(&counters, GRID * 2 * sizeof(int)));
    cudaCheck(cudaMemset(counters, 0, GRID * 2 * sizeof(int)));
    set_mode(schedule, nullptr);
    setenv("CUDASIM_THREADS", threads, 1);
    launch_kernel(ticket_kernel, GRID, BLOCK, 0, 0, tickets, counters);
    cudaCheck(cudaGetLastError());
    unsetenv("CUDASIM_THREADS");
    std::vector<int> h(GRID * 2 * BLOCK);
    cudaCheck(cudaMemcpy(h.data(), tickets, h.size() * sizeof(int), cudaMemcpyDeviceToHost));
    cudaCheck(cudaFree(tickets));
    cudaCheck(cudaFree(counters));
    return h;
}

/* the tickets in the order `expect(t, phase)` in every block: number of mismatches */
template <typename F>
static int order_mismatches(const std::vector<int>& h, F expect) {
    int bad = 0;
    for (int b = 0; b < GRID; b++)
        for (int phase = 0; phase < 2; phase++)
            for (int t = 0; t < BLOCK; t++) bad += h[(b * 2 + phase) * BLOCK + t] != expect(t, phase);
    return bad;
}

static bool is_permutation_per_phase(const std::vector<int>& h) {
    for (int bp = 0; bp < GRID * 2; bp++) {
        std::vector<int> seen(BLOCK, 0);
        for (int t = 0; t < BLOCK; t++) {
            int k = h[bp * BLOCK + t];
            if (k < 0 || k >= BLOCK || seen[k]++) return false;
        }
    }
    return true;
}

static void test_orders(TestCounts& tc) {
    std::vector<int> fifo = tickets_under("fifo", "2");
    /* fifo: thread order at start; after the barrier the last arrival goes on, then the others in order */
    check(tc, order_mismatches(fifo, [](int t, int phase) { return phase == 0 ? t : (t == BLOCK - 1 ? 0 : t + 1); }) == 0,
          "fifo: thread order at start, last arrival first after __syncthreads", 0.0);
    std::vector<int> rev = tickets_under("reverse", "2");
    check(tc, order_mismatches(rev, [](int t, int) { return BLOCK - 1 - t; }) == 0,
          "reverse: reversed thread order at start and after __syncthreads", 0.0);
    std::vector<int> s5 = tickets_under("shuffle:5", "2"), s5_one = tickets_under("shuffle:5", "1");
    std::vector<int> s6 = tickets_under("shuffle:6", "2"), s_default = tickets_under("shuffle", "2");
    check(tc, is_permutation_per_phase(s5) && is_permutation_per_phase(s6), "shuffle: each block and phase is a permutation", 0.0);
    check(tc, s5 == s5_one, "shuffle:5 is the same with 1 and 2 OS threads", 0.0);
    check(tc, s5 != s6 && s5 != s_default, "shuffle:5, shuffle:6 and shuffle (seed 1) differ", 0.0);
    check(tc, order_mismatches(s5, [](int t, int) { return t; }) > BLOCK, "shuffle:5 is not thread order", 0.0);
}

/* runs a neighbour kernel under `schedule`: number of threads whose value is wrong */
static int neighbour_errors(bool warp_level, const char* schedule, int fixed) {
    static int salt = 0;
    salt += 1000;
    int* out;
    cudaCheck(cudaMalloc(&out, GRID * BLOCK * sizeof(int)));
    set_mode(schedule, nullptr);
    if (warp_level) launch_kernel(neighbour_warp_kernel, GRID, BLOCK, 0, 0, out, salt, fixed);
    else launch_kernel(neighbour_block_kernel, GRID, BLOCK, 0, 0, out, salt, fixed);
    cudaCheck(cudaGetLastError());
    std::vector<int> h(GRID * BLOCK);
    cudaCheck(cudaMemcpy(h.data(), out, h.size() * sizeof(int), cudaMemcpyDeviceToHost));
    cudaCheck(cudaFree(out));
    int errors = 0;
    for (int i = 0; i < GRID * BLOCK; i++) {
        int t = i % BLOCK, lane = t % 32;
        bool reads_left = warp_level ? lane >= 1 && lane <= 30 : t > 0;
        errors += h[i] != salt + t - (reads_left ? 1 : 0);
    }
    return errors;
}

static void test_planted_races(TestCounts& tc) {
    const char* catching[] = {"reverse", "shuffle:1", "shuffle:2"};
    for (int warp_level = 0; warp_level < 2; warp_level++) {
        const char* level = warp_level ? "warp (no __syncwarp after a warp op)" : "block (no __syncthreads)";
        char what[128];
        int e = neighbour_errors(warp_level, "fifo", 0);
        snprintf(what, sizeof what, "%s race passes under fifo", level);
        check(tc, e == 0, what, e);
        for (const char* schedule : catching) {
            e = neighbour_errors(warp_level, schedule, 0);
            snprintf(what, sizeof what, "%s race caught under %s (%d wrong)", level, schedule, e);
            check(tc, e > 0, what, e);
            e = neighbour_errors(warp_level, schedule, 1);
            snprintf(what, sizeof what, "%s fixed kernel passes under %s", level, schedule);
            check(tc, e == 0, what, e);
        }
    }
}

/* cp_async_kernel with the given mode; returns the 24 floats per thread */
static std::vector<float> cp_async_run(const char* schedule, const char* cp_async, int read_before_wait, const std::vector<float>& in) {
    float *d_in, *d_out;
    cudaCheck(cudaMalloc(&d_in, in.size() * sizeof(float)));
    cudaCheck(cudaMalloc(&d_out, BLOCK * 24 * sizeof(float)));
    cudaCheck(cudaMemcpy(d_in, in.data(), in.size() * sizeof(float), cudaMemcpyHostToDevice));
    set_mode(schedule, cp_async);
    launch_kernel(cp_async_kernel, 1, BLOCK, 0, 0, d_out, d_in, read_before_wait);
    cudaCheck(cudaGetLastError());
    std::vector<float> h(BLOCK * 24);
    cudaCheck(cudaMemcpy(h.data(), d_out, h.size() * sizeof(float), cudaMemcpyDeviceToHost));
    cudaCheck(cudaFree(d_in));
    cudaCheck(cudaFree(d_out));
    return h;
}

/* slots of cp_async_kernel's output: which hold the data (1), which the poison (0) */
static int cp_async_mismatches(const std::vector<float>& h, const std::vector<float>& in, const int data_slots[6]) {
    static const int group_of_slot[6] = {0, 1, 2, 2, 1, 3};
    int bad = 0;
    for (int t = 0; t < BLOCK; t++)
        for (int slot = 0; slot < 6; slot++)
            for (int i = 0; i < 4; i++) {
                float got = h[t * 24 + slot * 4 + i], want = in[(group_of_slot[slot] * BLOCK + t) * 4 + i];
                bad += data_slots[slot] ? got != want : !isnan(got);
            }
    return bad;
}

static void test_cp_async(TestCounts& tc) {
    std::vector<float> in(4 * BLOCK * 4);
    for (size_t i = 0; i < in.size(); i++) in[i] = (float)i * 0.5f + 1.0f;
    const int all_data[6] = {1, 1, 1, 1, 1, 1};
    const int deferred_ok[6] = {1, 0, 0, 1, 1, 1};   /* B pending after wait<1>, C uncommitted at wait<0> */
    const int deferred_bug[6] = {1, 0, 0, 1, 1, 0};  /* and the read before the wait sees poison */
    int e = cp_async_mismatches(cp_async_run("fifo", nullptr, 1, in), in, all_data);
    check(tc, e == 0, "cp.async read before wait passes with copies at issue (fifo default)", e);
    e = cp_async_mismatches(cp_async_run("fifo", "deferred", 0, in), in, deferred_ok);
    check(tc, e == 0, "deferred: wait<1> leaves the newest group, wait<0> not uncommitted", e);
    e = cp_async_mismatches(cp_async_run("fifo", "deferred", 1, in), in, deferred_bug);
    check(tc, e == 0, "deferred: a read before cp_async_wait sees NaN (bug caught)", e);
    e = cp_async_mismatches(cp_async_run("reverse", nullptr, 1, in), in, deferred_bug);
    check(tc, e == 0, "reverse defers cp.async by default (bug caught)", e);
    e = cp_async_mismatches(cp_async_run("shuffle:3", "issue", 1, in), in, all_data);
    check(tc, e == 0, "shuffle with CUDASIM_CP_ASYNC=issue copies at issue", e);

    float* d_in;
    cudaCheck(cudaMalloc(&d_in, 16));
    cudaCheck(cudaMemset(d_in, 0, 16));
    check_child_fails(tc, "deferred: a thread exiting with copies pending is reported", "cp.async copies not waited for", [&] {
        set_mode("fifo", "deferred");
        launch_kernel(cp_async_no_wait_kernel, 1, 32, 0, 0, d_in);
    });
    check_child_fails(tc, "deferred: more than 256 pending copies are reported", "copies already pending", [&] {
        set_mode("fifo", "deferred");
        launch_kernel(cp_async_too_many_kernel, 1, 1, 0, 0, d_in);
    });
    check_child_fails(tc, "a bad CUDASIM_SCHEDULE value is reported", "CUDASIM_SCHEDULE=shuffle:x", [&] {
        set_mode("shuffle:x", nullptr);
        launch_kernel(cp_async_no_wait_kernel, 1, 1, 0, 0, d_in);
    });
    check_child_fails(tc, "a bad CUDASIM_CP_ASYNC value is reported", "CUDASIM_CP_ASYNC=later", [&] {
        set_mode("fifo", "later");
        launch_kernel(cp_async_no_wait_kernel, 1, 1, 0, 0, d_in);
    });
    cudaCheck(cudaFree(d_in));
}

/* usage: test_schedules [test program...]: the programs also run under reverse and two shuffle seeds */
int main(int argc, char** argv) {
    TestCounts tc;
    test_orders(tc);
    test_planted_races(tc);
    test_cp_async(tc);
    set_mode(nullptr, nullptr);
    const char* schedules[] = {"reverse", "shuffle:1", "shuffle:2"};
    for (const char* schedule : schedules)
        for (int i = 1; i < argc; i++) {
            char env[128];
            snprintf(env, sizeof env, "CUDASIM_SCHEDULE=%s CUDASIM_CP_ASYNC=deferred", schedule);
            check_program_under(tc, argv[i], env);
        }
    return finish(tc);
}
