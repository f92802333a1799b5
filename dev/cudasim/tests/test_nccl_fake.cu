/*
 * dev/cudasim/tests/test_nccl_fake.cu — the fake NCCL's collectives against their definitions.
 *
 * Run under `mpirun -np N` (mk/cudasim_libs.mk runs N = 3 and N = 4). Every rank's input is a known
 * function of (rank, element, salt), so each rank computes the expected result of every collective
 * locally, from all ranks' inputs: sums/means/products/max/min in double (float types, within a
 * tolerance stated per check), exact wrapped integer arithmetic (integer types), and the documented
 * determinism contract (fp32 left-to-right sum in rank order; bf16: that fp32 sum rounded once)
 * bit for bit. Tested on the world communicator and, at the same time, on two sub-communicators
 * (rank 0 alone, and ranks 1..N-1) made from their own unique ids; in place and out of place; odd
 * counts (1, 7, 1001, not multiples of N); grouped calls (including that nothing runs before
 * ncclGroupEnd); error cases. Only world rank 0 prints: each check is passed when it passed on every
 * rank; the worst error is the maximum over ranks.
 */
#ifdef CUDASIM
#include "dev/cudasim/fake_nccl.h"
#else /* the same source against the real library (compile check: make test-nvcc-libs) */
#include <cuda_bf16.h>
#include <mpi.h>
#include <nccl.h>
#endif
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int world_rank = 0, passed = 0, failed = 0;

/* an MPI or CUDA call of the test's own (not one under test): a failure stops every rank, naming the call and file:line */
#define MPI_CHECK(call)                                                                                        \
    do {                                                                                                       \
        int e_ = (call);                                                                                       \
        if (e_ != MPI_SUCCESS) {                                                                               \
            fprintf(stderr, "error: %s failed: MPI error %d (%s:%d)\n", #call, e_, __FILE__, __LINE__);         \
            MPI_Abort(MPI_COMM_WORLD, 1);                                                                      \
        }                                                                                                      \
    } while (0)
#define CUDA_CHECK(call)                                                                                       \
    do {                                                                                                       \
        cudaError_t e_ = (call);                                                                               \
        if (e_ != cudaSuccess) {                                                                               \
            fprintf(stderr, "error: %s failed: %s (%s:%d)\n", #call, cudaGetErrorString(e_), __FILE__, __LINE__); \
            MPI_Abort(MPI_COMM_WORLD, 1);                                                                      \
        }                                                                                                      \
    } while (0)

/* Combines a check over all world ranks and prints it on rank 0. Every rank must call it in the
 * same order. worst is an error/tolerance ratio (<= 1 passes) or 0 for exact checks. */
static void check(int ok, double worst, const char* what) {
    int all_ok = 0;
    double all_worst = 0.0;
    MPI_CHECK(MPI_Allreduce(&ok, &all_ok, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD));
    MPI_CHECK(MPI_Allreduce(&worst, &all_worst, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD));
    if (all_ok) passed++;
    else failed++;
    if (world_rank == 0) printf("%s %s (worst error/tolerance over ranks %.3g)\n", all_ok ? "PASS" : "FAIL", what, all_worst);
}

/* NCCL's buffers are device memory (the fake checks it); in simulation the host reads and writes them directly */
static void* dev_malloc(size_t bytes) {
    void* p = NULL;
    CUDA_CHECK(cudaMalloc(&p, bytes ? bytes : 1));
    return p;
}
static void dev_free(void* p) { CUDA_CHECK(cudaFree(p)); }

/* the input of rank p, element e: a float with a fractional part, spread over signs and magnitudes */
static double input_value(int p, size_t e, int salt) {
    long v = (long)((p * 7919 + e * 104729 + salt * 131) % 2003) - 1001;
    return v / 64.0 + (double)p / 3.0;
}
static uint32_t input_int(int p, size_t e, int salt) { /* large, so that sums and products wrap */
    return (uint32_t)(p * 2654435761u + e * 40503u + salt * 977u + 0x7ffffff0u);
}

static size_t elem_size(ncclDataType_t t) { return t == ncclUint8 ? 1 : t == ncclBfloat16 ? 2 : 4; }
/* writes rank p's input for elements [first, first+count) into buf */
static void fill(void* buf, ncclDataType_t t, int p, size_t first, size_t count, int salt) {
    for (size_t i = 0; i < count; i++) {
        size_t e = first + i;
        switch (t) {
        case ncclFloat32: ((float*)buf)[i] = (float)input_value(p, e, salt); break;
        case ncclBfloat16: ((__nv_bfloat16*)buf)[i] = __float2bfloat16((float)input_value(p, e, salt)); break;
        case ncclInt32: ((int32_t*)buf)[i] = (int32_t)input_int(p, e, salt); break;
        case ncclUint8: ((uint8_t*)buf)[i] = (uint8_t)input_int(p, e, salt); break;
        default: break;
        }
    }
}
static double as_double(const void* buf, ncclDataType_t t, size_t i) {
    switch (t) {
    case ncclFloat32: return ((const float*)buf)[i];
    case ncclBfloat16: return __bfloat162float(((const __nv_bfloat16*)buf)[i]);
    case ncclInt32: return ((const int32_t*)buf)[i];
    case ncclUint8: return ((const uint8_t*)buf)[i];
    default: return 0.0;
    }
}

/* Checks got[i] (element first+i of the reduction of all n ranks' inputs) against the definition;
 * returns the worst error/tolerance (exact types: 0 or 1e30). */
static double check_reduction(const void* got, ncclDataType_t t, ncclRedOp_t op, int n, size_t first, size_t count, int salt) {
    double worst = 0.0;
    unsigned char one[4];
    for (size_t i = 0; i < count; i++) {
        size_t e = first + i;
        if (t == ncclInt32 || t == ncclUint8) { /* exact, wrapped */
            uint32_t acc = 0;
            int32_t smax = INT32_MIN, smin = INT32_MAX;
            uint32_t umax = 0, umin = UINT32_MAX, prod = 1;
            for (int p = 0; p < n; p++) {
                fill(one, t, p, e, 1, salt);
                uint32_t v = t == ncclInt32 ? (uint32_t) * (int32_t*)one : *(uint8_t*)one;
                acc += v;
                prod *= v;
                if ((int32_t)v > smax) smax = (int32_t)v;
                if ((int32_t)v < smin) smin = (int32_t)v;
                if (v > umax) umax = v;
                if (v < umin) umin = v;
            }
            double want;
            if (t == ncclInt32) {
                want = op == ncclSum ? (int32_t)acc : op == ncclProd ? (int32_t)prod : op == ncclMax ? smax : op == ncclMin ? smin
                                                                                                          : (int32_t)acc / n;
            } else {
                uint8_t s = (uint8_t)acc, pr = (uint8_t)prod;
                want = op == ncclSum ? s : op == ncclProd ? pr : op == ncclMax ? umax : op == ncclMin ? umin : s / n;
            }
            if (as_double(got, t, i) != want) worst = 1e30;
            continue;
        }
        /* float types: the definition in double, and the fp32 rank-order sum for the bit-exact check */
        double sum = 0.0, mag = 0.0, prod = 1.0, mx = -1e300, mn = 1e300;
        float rank_order = 0.0f;
        for (int p = 0; p < n; p++) {
            fill(one, t, p, e, 1, salt);
            double v = as_double(one, t, 0);
            sum += v;
            mag += fabs(v);
            prod *= v;
            mx = fmax(mx, v);
            mn = fmin(mn, v);
            rank_order = p == 0 ? (float)v : rank_order + (float)v;
        }
        double g = as_double(got, t, i);
        double out_rel = t == ncclBfloat16 ? 1.0 / 256 : 1e-7;
        double e_abs, tol;
        switch (op) {
        case ncclSum: e_abs = fabs(g - sum); tol = 1e-6 * mag + out_rel * fabs(sum); break;
        case ncclAvg: e_abs = fabs(g - sum / n); tol = (1e-6 * mag + out_rel * fabs(sum)) / n; break;
        case ncclProd: e_abs = fabs(g - prod); tol = (1e-6 * n + out_rel) * fabs(prod); break;
        case ncclMax: e_abs = fabs(g - mx); tol = 0.0; break;
        default: e_abs = fabs(g - mn); tol = 0.0; break;
        }
        double r = e_abs == 0.0 ? 0.0 : tol == 0.0 ? 1e30 : e_abs / tol;
        if (op == ncclSum) { /* the determinism contract, bit for bit */
            double want = t == ncclBfloat16 ? (double)__bfloat162float(__float2bfloat16(rank_order)) : (double)rank_order;
            if (g != want) r = 1e30;
        }
        if (r > worst) worst = r;
    }
    return worst;
}

static const char* type_name(ncclDataType_t t) {
    return t == ncclFloat32 ? "fp32" : t == ncclBfloat16 ? "bf16" : t == ncclInt32 ? "int32" : "uint8";
}
static const char* op_name(ncclRedOp_t op) {
    static const char* names[] = {"sum", "prod", "max", "min", "avg"};
    return names[op];
}

/* runs every collective on comm (n ranks, this one is r) and checks it; label names the communicator */
static void test_collectives(ncclComm_t comm, const char* label) {
    int n = 0, r = 0;
    ncclCommCount(comm, &n);
    ncclCommUserRank(comm, &r);
    const size_t counts[] = {1, 7, 1001};
    const ncclDataType_t types[] = {ncclFloat32, ncclBfloat16, ncclInt32, ncclUint8};
    const ncclRedOp_t ops[] = {ncclSum, ncclAvg, ncclProd, ncclMax, ncclMin};
    char what[256];
    int salt = 0;
    /* AllReduce and Reduce: every type x op, in place and out of place, all counts */
    for (int reduce_to_root = 0; reduce_to_root < 2; reduce_to_root++) {
        for (size_t ti = 0; ti < 4; ti++) {
            for (size_t oi = 0; oi < 5; oi++) {
                double worst = 0.0;
                int ok = 1;
                for (int in_place = 0; in_place < 2; in_place++) {
                    for (size_t ci = 0; ci < 3; ci++) {
                        ncclDataType_t t = types[ti];
                        size_t count = counts[ci], es = elem_size(t);
                        int root = n - 1;
                        char* send = (char*)dev_malloc(count * es);
                        char* recv = in_place ? send : (char*)dev_malloc(count * es);
                        fill(send, t, r, 0, count, ++salt);
                        ncclResult_t res = reduce_to_root
                                               ? ncclReduce(send, recv, count, t, ops[oi], root, comm, (cudaStream_t)0)
                                               : ncclAllReduce(send, recv, count, t, ops[oi], comm, (cudaStream_t)0);
                        ok &= res == ncclSuccess;
                        if (!reduce_to_root || r == root) worst = fmax(worst, check_reduction(recv, t, ops[oi], n, 0, count, salt));
                        dev_free(send);
                        if (!in_place) dev_free(recv);
                    }
                }
                snprintf(what, sizeof(what), "[%s] %s %s %s, in place and not, counts 1/7/1001", label,
                         reduce_to_root ? "ncclReduce(root=last)" : "ncclAllReduce", type_name(types[ti]), op_name(ops[oi]));
                check(ok && worst <= 1.0, worst, what);
            }
        }
    }
    /* ReduceScatter: fp32 and bf16 sums, in place (recv = send + r*recvcount) and not */
    for (size_t ti = 0; ti < 2; ti++) {
        double worst = 0.0;
        int ok = 1;
        for (int in_place = 0; in_place < 2; in_place++) {
            for (size_t ci = 0; ci < 3; ci++) {
                ncclDataType_t t = types[ti];
                size_t rc = counts[ci], es = elem_size(t);
                char* send = (char*)dev_malloc(rc * n * es);
                char* recv = in_place ? send + r * rc * es : (char*)dev_malloc(rc * es);
                fill(send, t, r, 0, rc * n, ++salt);
                ok &= ncclReduceScatter(send, recv, rc, t, ncclSum, comm, (cudaStream_t)0) == ncclSuccess;
                worst = fmax(worst, check_reduction(recv, t, ncclSum, n, r * rc, rc, salt));
                dev_free(send);
                if (!in_place) dev_free(recv);
            }
        }
        snprintf(what, sizeof(what), "[%s] ncclReduceScatter %s sum, in place and not, recvcounts 1/7/1001", label, type_name(types[ti]));
        check(ok && worst <= 1.0, worst, what);
    }
    /* AllGather and Broadcast: bit-exact copies, every type */
    for (size_t ti = 0; ti < 4; ti++) {
        int ok = 1;
        for (int in_place = 0; in_place < 2; in_place++) {
            for (size_t ci = 0; ci < 3; ci++) {
                ncclDataType_t t = types[ti];
                size_t sc = counts[ci], es = elem_size(t);
                char* recv = (char*)dev_malloc(sc * n * es);
                char* send = in_place ? recv + r * sc * es : (char*)dev_malloc(sc * es);
                memset(recv, 0xAB, sc * n * es);
                fill(send, t, r, 0, sc, ++salt);
                ok &= ncclAllGather(send, recv, sc, t, comm, (cudaStream_t)0) == ncclSuccess;
                char* want = (char*)malloc(sc * es);
                for (int p = 0; p < n; p++) {
                    fill(want, t, p, 0, sc, salt);
                    ok &= memcmp(recv + p * sc * es, want, sc * es) == 0;
                }
                free(want);
                dev_free(recv);
                if (!in_place) dev_free(send);
            }
        }
        snprintf(what, sizeof(what), "[%s] ncclAllGather %s bit-exact, in place and not, sendcounts 1/7/1001", label, type_name(types[ti]));
        check(ok, 0.0, what);
    }
    for (size_t ti = 0; ti < 4; ti++) {
        int ok = 1;
        for (int variant = 0; variant < 3; variant++) { /* out of place, in place, ncclBcast */
            for (size_t ci = 0; ci < 3; ci++) {
                ncclDataType_t t = types[ti];
                size_t count = counts[ci], es = elem_size(t);
                int root = (1 + ci) % n;
                char* recv = (char*)dev_malloc(count * es);
                char* send = variant == 0 ? (char*)dev_malloc(count * es) : recv;
                memset(recv, 0xCD, count * es);
                fill(send, t, r, 0, count, ++salt);
                ncclResult_t res = variant == 2 ? ncclBcast(recv, count, t, root, comm, (cudaStream_t)0)
                                                : ncclBroadcast(send, recv, count, t, root, comm, (cudaStream_t)0);
                ok &= res == ncclSuccess;
                char* want = (char*)malloc(count * es);
                fill(want, t, root, 0, count, salt);
                ok &= memcmp(recv, want, count * es) == 0;
                free(want);
                dev_free(recv);
                if (variant == 0) dev_free(send);
            }
        }
        snprintf(what, sizeof(what), "[%s] ncclBroadcast/ncclBcast %s bit-exact from roots 1%%n, 2%%n, 3%%n, in place and not", label,
                 type_name(types[ti]));
        check(ok, 0.0, what);
    }
    /* a group: nothing runs before ncclGroupEnd, then every queued call has run, in order
     * (the AllGather reads the AllReduce's result, so order matters) */
    {
        size_t count = 7 * n;
        float* a = (float*)dev_malloc(count * sizeof(float));
        float* a_sum = (float*)dev_malloc(count * sizeof(float));
        float* gathered = (float*)dev_malloc(count * n * sizeof(float));
        float* scattered = (float*)dev_malloc(7 * sizeof(float));
        fill(a, ncclFloat32, r, 0, count, ++salt);
        memset(a_sum, 0, count * sizeof(float));
        memset(gathered, 0, count * n * sizeof(float));
        int ok = ncclGroupStart() == ncclSuccess;
        ok &= ncclGroupStart() == ncclSuccess; /* nested */
        ok &= ncclAllReduce(a, a_sum, count, ncclFloat32, ncclSum, comm, (cudaStream_t)0) == ncclSuccess;
        ok &= ncclGroupEnd() == ncclSuccess;
        ok &= ncclAllGather(a_sum, gathered, count, ncclFloat32, comm, (cudaStream_t)0) == ncclSuccess;
        ok &= ncclReduceScatter(a, scattered, 7, ncclFloat32, ncclSum, comm, (cudaStream_t)0) == ncclSuccess;
        int untouched = 1;
        for (size_t i = 0; i < count; i++) untouched &= a_sum[i] == 0.0f;
        ok &= ncclGroupEnd() == ncclSuccess;
        double worst = check_reduction(a_sum, ncclFloat32, ncclSum, n, 0, count, salt);
        for (int p = 0; p < n; p++) ok &= memcmp(gathered + p * count, a_sum, count * sizeof(float)) == 0;
        worst = fmax(worst, check_reduction(scattered, ncclFloat32, ncclSum, n, r * 7, 7, salt));
        snprintf(what, sizeof(what), "[%s] group (nested) of AllReduce, AllGather of its result, ReduceScatter: nothing ran before "
                 "ncclGroupEnd, all ran in order after", label);
        check(ok && untouched && worst <= 1.0, worst, what);
        dev_free(a); dev_free(a_sum); dev_free(gathered); dev_free(scattered);
    }
}

int main(int argc, char** argv) {
    MPI_CHECK(MPI_Init(&argc, &argv));
    int world_size = 0;
    MPI_CHECK(MPI_Comm_rank(MPI_COMM_WORLD, &world_rank));
    MPI_CHECK(MPI_Comm_size(MPI_COMM_WORLD, &world_size));
    if (world_rank == 0) printf("fake NCCL under MPI with %d processes\n", world_size);

    /* the world communicator, from an id made on rank 0 and broadcast */
    ncclUniqueId ids[2];
    if (world_rank == 0) {
        ncclGetUniqueId(&ids[0]);
        ncclGetUniqueId(&ids[1]);
    }
    MPI_CHECK(MPI_Bcast(ids, sizeof(ids), MPI_BYTE, 0, MPI_COMM_WORLD));
    ncclComm_t world;
    check(ncclCommInitRank(&world, world_size, ids[0], world_rank) == ncclSuccess, 0.0, "ncclCommInitRank world from a broadcast id");
    int n = -1, r = -1, device = -1, version = 0;
    ncclCommCount(world, &n);
    ncclCommUserRank(world, &r);
    ncclCommCuDevice(world, &device);
    ncclGetVersion(&version);
    check(n == world_size && r == world_rank && device == 0 && version == NCCL_VERSION_CODE, 0.0,
          "ncclCommCount / ncclCommUserRank / ncclCommCuDevice / ncclGetVersion");
    test_collectives(world, "world");

    /* two sub-communicators at once: {0} and {1..N-1}, each from its own id, ranks renumbered */
    int group = world_rank == 0 ? 0 : 1;
    int sub_size = group == 0 ? 1 : world_size - 1, sub_rank = group == 0 ? 0 : world_rank - 1;
    ncclComm_t sub = NULL;
    if (world_size > 1) {
        check(ncclCommInitRank(&sub, sub_size, ids[group], sub_rank) == ncclSuccess, 0.0, "ncclCommInitRank sub-communicators {0} and {1..N-1}");
        char label[64];
        snprintf(label, sizeof(label), "sub-communicators of 1 and %d ranks", world_size - 1);
        test_collectives(sub, label);
        ncclCommDestroy(sub);
    }

    /* errors */
    /* the fake's one-line reasons go to stderr: rank 0's are captured and echoed on stdout after the
     * checks (mpirun forwards the two streams out of order), the other ranks' are dropped */
    fflush(stdout);
    fflush(stderr);
    FILE* captured = world_rank == 0 ? tmpfile() : fopen("/dev/null", "w+");
    int saved_stderr = dup(2);
    if (!captured || saved_stderr < 0 || dup2(fileno(captured), 2) < 0) {
        fprintf(stderr, "test_nccl_fake: cannot redirect stderr\n");
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    float* buf = (float*)dev_malloc(8 * sizeof(float)); /* device memory: the cases fail for their own reasons */
    CUDA_CHECK(cudaMemset(buf, 0, 8 * sizeof(float)));
    check(ncclAllReduce(buf, buf, 8, ncclFloat32, ncclSum, NULL, (cudaStream_t)0) == ncclInvalidArgument, 0.0, "NULL comm -> ncclInvalidArgument");
    check(ncclAllReduce(buf, buf, 4, ncclFloat16, ncclSum, world, (cudaStream_t)0) == ncclInvalidArgument, 0.0, "ncclFloat16 -> ncclInvalidArgument");
    check(ncclAllReduce(buf, buf, 4, ncclFloat32, (ncclRedOp_t)9, world, (cudaStream_t)0) == ncclInvalidArgument, 0.0,
          "reduction op 9 -> ncclInvalidArgument");
    check(ncclBroadcast(buf, buf, 4, ncclFloat32, world_size, world, (cudaStream_t)0) == ncclInvalidArgument, 0.0,
          "broadcast root = nranks -> ncclInvalidArgument");
    check(ncclAllReduce(NULL, buf, 4, ncclFloat32, ncclSum, world, (cudaStream_t)0) == ncclInvalidArgument, 0.0, "NULL sendbuff -> ncclInvalidArgument");
    check(ncclAllReduce(buf, buf, 0, ncclFloat32, ncclSum, world, (cudaStream_t)0) == ncclSuccess, 0.0, "count 0 -> ncclSuccess, no-op");
    check(ncclGroupEnd() == ncclInvalidUsage, 0.0, "ncclGroupEnd without ncclGroupStart -> ncclInvalidUsage");
    {   /* the host/device memory checks: every buffer a call touches is device memory over the bytes it touches */
        float host[64] = {0};
        float* pinned = NULL;
        CUDA_CHECK(cudaMallocHost((void**)&pinned, 64 * sizeof(float)));
        float* dev = (float*)dev_malloc(8 * world_size * sizeof(float));
        int last = world_size - 1;
        check(ncclAllReduce(host, buf, 8, ncclFloat32, ncclSum, world, (cudaStream_t)0) == ncclInvalidArgument, 0.0,
              "memory: ncclAllReduce sendbuff in pageable host memory -> ncclInvalidArgument");
        check(ncclAllReduce(buf, pinned, 8, ncclFloat32, ncclSum, world, (cudaStream_t)0) == ncclInvalidArgument, 0.0,
              "memory: ncclAllReduce recvbuff in pinned host memory -> ncclInvalidArgument");
        check(ncclAllReduce(buf, buf, 9, ncclFloat32, ncclSum, world, (cudaStream_t)0) == ncclInvalidArgument, 0.0,
              "memory: ncclAllReduce of 9 floats in an 8-float allocation -> ncclInvalidArgument");
        check(ncclReduce(host, buf, 8, ncclFloat32, ncclSum, last, world, (cudaStream_t)0) == ncclInvalidArgument, 0.0,
              "memory: ncclReduce sendbuff in host memory -> ncclInvalidArgument");
        check(ncclReduce(buf, world_rank == last ? dev : (float*)host, 8, ncclFloat32, ncclSum, last, world, (cudaStream_t)0) == ncclSuccess,
              0.0, "memory: ncclReduce with a host recvbuff on non-roots (unused) accepted");
        check(ncclReduceScatter(buf, dev, 8, ncclFloat32, ncclSum, world, (cudaStream_t)0) ==
                  (world_size > 1 ? ncclInvalidArgument : ncclSuccess),
              0.0, "memory: ncclReduceScatter sendbuff of recvcount, not nranks*recvcount, elements -> ncclInvalidArgument");
        check(ncclReduceScatter(dev, host, 8, ncclFloat32, ncclSum, world, (cudaStream_t)0) == ncclInvalidArgument, 0.0,
              "memory: ncclReduceScatter recvbuff in host memory -> ncclInvalidArgument");
        check(ncclAllGather(buf, buf, 8, ncclFloat32, world, (cudaStream_t)0) == (world_size > 1 ? ncclInvalidArgument : ncclSuccess),
              0.0, "memory: ncclAllGather recvbuff of sendcount, not nranks*sendcount, elements -> ncclInvalidArgument");
        check(ncclAllGather(pinned, dev, 8, ncclFloat32, world, (cudaStream_t)0) == ncclInvalidArgument, 0.0,
              "memory: ncclAllGather sendbuff in pinned host memory -> ncclInvalidArgument");
        check(ncclAllGather(buf, dev, 8, ncclFloat32, world, (cudaStream_t)0) == ncclSuccess, 0.0,
              "memory: ncclAllGather with device buffers of the right sizes accepted");
        check(ncclBroadcast(world_rank == 0 ? buf : (float*)host, dev, 8, ncclFloat32, 0, world, (cudaStream_t)0) == ncclSuccess, 0.0,
              "memory: ncclBroadcast with a host sendbuff on non-roots (unused) accepted");
        check(ncclBroadcast(buf, host, 8, ncclFloat32, 0, world, (cudaStream_t)0) == ncclInvalidArgument, 0.0,
              "memory: ncclBroadcast recvbuff in host memory -> ncclInvalidArgument");
        check(ncclBcast(pinned, 8, ncclFloat32, 0, world, (cudaStream_t)0) == ncclInvalidArgument, 0.0,
              "memory: ncclBcast buff in pinned host memory -> ncclInvalidArgument");
        int group_ok = ncclGroupStart() == ncclSuccess;
        group_ok &= ncclAllReduce(host, host, 8, ncclFloat32, ncclSum, world, (cudaStream_t)0) == ncclInvalidArgument;
        group_ok &= ncclGroupEnd() == ncclSuccess;
        check(group_ok, 0.0, "memory: a grouped ncclAllReduce of host memory -> ncclInvalidArgument at the call, nothing queued");
        dev_free(dev);
        CUDA_CHECK(cudaFreeHost(pinned));
    }
    ncclUniqueId garbage;
    memset(&garbage, 7, sizeof(garbage));
    ncclComm_t bad = NULL;
    check(ncclCommInitRank(&bad, world_size, garbage, world_rank) == ncclInvalidArgument && bad == NULL, 0.0,
          "ncclCommInitRank with an id not from ncclGetUniqueId -> ncclInvalidArgument");
    check(ncclCommInitRank(&bad, world_size + 1, ids[1], world_rank) == ncclInvalidArgument && bad == NULL, 0.0,
          "ncclCommInitRank claiming nranks = N+1 with N processes -> ncclInvalidArgument on every rank");
    check(strcmp(ncclGetErrorString(ncclSuccess), "no error") == 0 && ncclGetErrorString(ncclInvalidArgument)[0] != '\0', 0.0,
          "ncclGetErrorString");
    check(ncclCommDestroy(world) == ncclSuccess, 0.0, "ncclCommDestroy");
    dev_free(buf);
    if (fflush(stderr) != 0 || dup2(saved_stderr, 2) < 0 || close(saved_stderr) != 0) {
        fprintf(stderr, "error: restoring stderr failed: %s (%s:%d)\n", strerror(errno), __FILE__, __LINE__);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    if (world_rank == 0) {
        char line[512];
        rewind(captured);
        while (fgets(line, sizeof(line), captured)) printf("  stderr of the error cases (rank 0): %s", line);
    }
    if (fclose(captured) != 0) {
        fprintf(stderr, "error: closing the captured stderr failed: %s (%s:%d)\n", strerror(errno), __FILE__, __LINE__);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }

    if (world_rank == 0) printf("%d passed, %d failed\n", passed, failed);
    MPI_CHECK(MPI_Finalize());
    return failed != 0;
}
