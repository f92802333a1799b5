/*
 * dev/cudasim/fake_nccl.h — a fake of NCCL over MPI for the CUDA simulator, so that
 * `mpirun -np N` (N = 1..4) runs the simulated multi-GPU trainer on one CPU machine.
 *
 * Same function names, types, enum names and enum values as NCCL 2.28's nccl.h (CUDA 13), for the
 * calls a data-parallel trainer uses: ncclGetUniqueId, ncclCommInitRank, ncclCommDestroy /
 * Finalize / Abort, ncclCommCount, ncclCommUserRank, ncclCommCuDevice, ncclGetVersion,
 * ncclGetErrorString, ncclCommGetAsyncError, ncclAllReduce, ncclReduce, ncclReduceScatter,
 * ncclAllGather, ncclBroadcast, ncclBcast, ncclGroupStart / ncclGroupEnd. Simulated device memory
 * is host memory. With synchronous streams (the simulator's default) an operation is complete when the
 * call (or the ncclGroupEnd closing its group) returns; under CUDASIM_STREAMS=deferred it is queued on
 * its stream and runs with that stream's work (a failure then prints its line and exits with status 1).
 *
 * Communicators: ncclGetUniqueId makes a 128-byte id holding a magic and a random 64-bit key; the
 * caller shares it (MPI_Bcast, as real code does). ncclCommInitRank(comm, nranks, id, rank) is
 * MPI_Comm_split(MPI_COMM_WORLD, color = key's low 31 bits, key = rank), then checks that the
 * processes which met share the key and nranks and hold ranks 0..nranks-1. So EVERY process of
 * MPI_COMM_WORLD must call ncclCommInitRank at the same point (each with its own id), and MPI must be
 * initialised first — except for nranks == 1 without MPI_Init, which makes a local communicator.
 * ncclCommDestroy frees the MPI communicator (call it before MPI_Finalize).
 *
 * Semantics (as nccl.h defines them; counts are elements):
 *   AllReduce(send, recv, count): recv[e] = x_0[e] op x_1[e] op ... op x_{n-1}[e] on every rank
 *   Reduce(send, recv, count, root): the same, on root only (recv may be NULL elsewhere)
 *   ReduceScatter(send, recv, recvcount): recv on rank r = elements [r*recvcount, (r+1)*recvcount)
 *     of the reduction of the ranks' send buffers (nranks*recvcount elements each)
 *   AllGather(send, recv, sendcount): recv[p*sendcount + e] = send of rank p [e]
 *   Broadcast(send, recv, count, root): recv = root's send on every rank; Bcast(buff) is in place
 *   In place: AllReduce/Reduce/Broadcast when send == recv; ReduceScatter when
 *   recv == send + rank*recvcount; AllGather when send == recv + rank*sendcount.
 * Reduction: deterministic, in rank order ((x_0 op x_1) op x_2) ..., identical bits on every rank.
 * Each element is reduced by the rank that owns its chunk (MPI_Alltoallv brings that chunk of every
 * rank's input, the owner reduces, MPI_Allgatherv / MPI_Gatherv spread the result).
 *   float types: bf16 is reduced in fp32 and rounded once to bf16 (nearest even); fp32 in fp32,
 *   fp64 in fp64. Real NCCL reduces along rings/trees, often rounding bf16 partial sums at each
 *   step, so its bits (not its definition) differ from ours.
 *   ncclAvg on float types multiplies each input by 1/nranks and sums (NCCL's pre-multiplied sum);
 *   on integer types it divides the sum by nranks (truncating). Integer sums and products wrap.
 * Types: ncclInt8, ncclUint8, ncclInt32, ncclUint32, ncclInt64, ncclUint64, ncclFloat32,
 * ncclFloat64, ncclBfloat16 (ncclFloat16 and fp8 return ncclInvalidArgument). Ops: ncclSum,
 * ncclProd, ncclMax, ncclMin, ncclAvg. Messages are limited to 2^31-1 bytes per rank and chunk
 * (MPI int counts); larger ones return ncclInvalidArgument.
 * Groups: between ncclGroupStart and ncclGroupEnd, collectives are checked and queued, then run in
 * call order at the outermost ncclGroupEnd ("nothing starts until ncclGroupEnd", as in NCCL).
 * Buffers: every buffer a call touches (send on every rank but a Broadcast's non-roots, recv on every rank
 * but a Reduce's non-roots) must lie inside one cudaMalloc allocation over the bytes the call reads or
 * writes (count elements; nranks * count for ReduceScatter's send and AllGather's recv), else
 * ncclInvalidArgument: NCCL documents its buffers as device memory (its kernels cannot reach pageable host
 * memory); pinned host memory (cudaMallocHost) is refused as well.
 * Errors: bad arguments return ncclInvalidArgument / ncclInvalidUsage, MPI failures ncclSystemError;
 * each prints one line "fake NCCL: <function>: <why>" (MPI: with file:line and the call) to stderr.
 *
 * Global mutable state (thread_local, like NCCL's per-thread group state): the group depth and the
 * queue of collectives waiting for ncclGroupEnd.
 */
#ifndef CUDASIM_FAKE_NCCL_H
#define CUDASIM_FAKE_NCCL_H

#include "cudasim.h"
#ifndef OMPI_SKIP_MPICXX
#define OMPI_SKIP_MPICXX 1 /* the C API only: Open MPI's C++ bindings warn under -Wextra */
#endif
#include <mpi.h>
#include <limits.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <type_traits>
#include <unistd.h>

#define NCCL_MAJOR 2
#define NCCL_MINOR 28
#define NCCL_PATCH 9
#define NCCL_SUFFIX ""
#define NCCL_VERSION_CODE 22809
#define NCCL_VERSION(X, Y, Z) (((X) <= 2 && (Y) <= 8) ? (X) * 1000 + (Y) * 100 + (Z) : (X) * 10000 + (Y) * 100 + (Z))

#define NCCL_UNIQUE_ID_BYTES 128
typedef struct { char internal[NCCL_UNIQUE_ID_BYTES]; } ncclUniqueId;

typedef enum { ncclSuccess = 0,
               ncclUnhandledCudaError = 1,
               ncclSystemError = 2,
               ncclInternalError = 3,
               ncclInvalidArgument = 4,
               ncclInvalidUsage = 5,
               ncclRemoteError = 6,
               ncclInProgress = 7,
               ncclNumResults = 8 } ncclResult_t;

typedef enum { ncclNumOps_dummy = 5 } ncclRedOp_dummy_t;
typedef enum { ncclSum = 0,
               ncclProd = 1,
               ncclMax = 2,
               ncclMin = 3,
               ncclAvg = 4,
               ncclNumOps = 5,
               ncclMaxRedOp = 0x7fffffff >> (32 - 8 * sizeof(ncclRedOp_dummy_t)) } ncclRedOp_t;

typedef enum { ncclInt8 = 0, ncclChar = 0,
               ncclUint8 = 1,
               ncclInt32 = 2, ncclInt = 2,
               ncclUint32 = 3,
               ncclInt64 = 4,
               ncclUint64 = 5,
               ncclFloat16 = 6, ncclHalf = 6,
               ncclFloat32 = 7, ncclFloat = 7,
               ncclFloat64 = 8, ncclDouble = 8,
               ncclBfloat16 = 9,
               ncclFloat8e4m3 = 10,
               ncclFloat8e5m2 = 11,
               ncclNumTypes = 12 } ncclDataType_t;

struct ncclComm {
    MPI_Comm mpi; /* MPI_COMM_NULL for a local single-rank communicator */
    int nranks, rank;
};
typedef struct ncclComm* ncclComm_t;

/* ----------------------------------------------------------------------------
 * internals */

/* prints "fake NCCL: <function>: <why>" to stderr and returns result */
static inline ncclResult_t fakenccl_fail(ncclResult_t result, const char* function, const char* fmt, ...)
    __attribute__((format(printf, 3, 4)));
static inline ncclResult_t fakenccl_fail(ncclResult_t result, const char* function, const char* fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "fake NCCL: %s: ", function);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    return result;
}

/* MPI call checked: on failure prints file:line, the call and MPI's reason, returns ncclSystemError */
#define FAKENCCL_MPI(call)                                                                              \
    do {                                                                                                \
        int mpi_err_ = (call);                                                                          \
        if (mpi_err_ != MPI_SUCCESS) {                                                                  \
            char mpi_msg_[MPI_MAX_ERROR_STRING];                                                        \
            int mpi_len_ = 0;                                                                           \
            MPI_Error_string(mpi_err_, mpi_msg_, &mpi_len_);                                            \
            fprintf(stderr, "fake NCCL: %s:%d: %s failed: %s\n", __FILE__, __LINE__, #call, mpi_msg_); \
            return ncclSystemError;                                                                     \
        }                                                                                               \
    } while (0)

static const char fakenccl_id_magic[8] = {'f', 'a', 'k', 'e', 'n', 'c', 'c', 'l'};

/* bytes per element of a supported type, 0 for an unsupported one */
static inline size_t fakenccl_type_size(ncclDataType_t type) {
    switch (type) {
    case ncclInt8: case ncclUint8: return 1;
    case ncclBfloat16: return 2;
    case ncclInt32: case ncclUint32: case ncclFloat32: return 4;
    case ncclInt64: case ncclUint64: case ncclFloat64: return 8;
    default: return 0;
    }
}

/* the value an element is reduced in: fp32 for bf16, 64-bit for integers, itself otherwise */
static inline float fakenccl_widen(__nv_bfloat16 x) { return __bfloat162float(x); }
static inline float fakenccl_widen(float x) { return x; }
static inline double fakenccl_widen(double x) { return x; }
static inline int64_t fakenccl_widen(int8_t x) { return x; }
static inline int64_t fakenccl_widen(int32_t x) { return x; }
static inline int64_t fakenccl_widen(int64_t x) { return x; }
static inline uint64_t fakenccl_widen(uint8_t x) { return x; }
static inline uint64_t fakenccl_widen(uint32_t x) { return x; }
static inline uint64_t fakenccl_widen(uint64_t x) { return x; }
/* back to the element type: bf16 rounded to nearest even, integers modulo 2^bits */
template <typename T, typename Acc> static inline T fakenccl_narrow(Acc v) { return (T)v; }
template <> inline __nv_bfloat16 fakenccl_narrow<__nv_bfloat16, float>(float v) { return __float2bfloat16(v); }

/* out[e] = in_0[e] op in_1[e] op ... op in_{n-1}[e], left to right (rank order), where
 * in_p = in + p*count elements; one element at a time in the widened type, rounded once. */
template <typename T>
static void fakenccl_reduce_typed(const void* in, int nranks, size_t count, ncclRedOp_t op, void* out) {
    typedef decltype(fakenccl_widen(T())) Acc;
    const T* x = (const T*)in;
    T* y = (T*)out;
    const Acc scale = (Acc)1 / (Acc)nranks; /* ncclAvg on float types (0 for integers, unused) */
    for (size_t e = 0; e < count; e++) {
        Acc acc = fakenccl_widen(x[e]);
        if (op == ncclAvg && !std::is_integral<Acc>::value) acc *= scale;
        for (int p = 1; p < nranks; p++) {
            Acc v = fakenccl_widen(x[(size_t)p * count + e]);
            switch (op) {
            case ncclSum:
            case ncclAvg:
                if (std::is_integral<Acc>::value) acc = (Acc)((uint64_t)acc + (uint64_t)v); /* wraps */
                else acc += op == ncclAvg ? v * scale : v;
                break;
            case ncclProd:
                if (std::is_integral<Acc>::value) acc = (Acc)((uint64_t)acc * (uint64_t)v);
                else acc *= v;
                break;
            case ncclMax: acc = v > acc ? v : acc; break;
            case ncclMin: acc = v < acc ? v : acc; break;
            default: break;
            }
        }
        if (op == ncclAvg && std::is_integral<Acc>::value) /* wrapped sum in T, then divided */
            acc = fakenccl_widen(fakenccl_narrow<T>(acc)) / (Acc)nranks;
        y[e] = fakenccl_narrow<T>(acc);
    }
}

static inline void fakenccl_reduce(const void* in, int nranks, size_t count, ncclDataType_t type, ncclRedOp_t op, void* out) {
    switch (type) {
    case ncclInt8: fakenccl_reduce_typed<int8_t>(in, nranks, count, op, out); break;
    case ncclUint8: fakenccl_reduce_typed<uint8_t>(in, nranks, count, op, out); break;
    case ncclInt32: fakenccl_reduce_typed<int32_t>(in, nranks, count, op, out); break;
    case ncclUint32: fakenccl_reduce_typed<uint32_t>(in, nranks, count, op, out); break;
    case ncclInt64: fakenccl_reduce_typed<int64_t>(in, nranks, count, op, out); break;
    case ncclUint64: fakenccl_reduce_typed<uint64_t>(in, nranks, count, op, out); break;
    case ncclFloat32: fakenccl_reduce_typed<float>(in, nranks, count, op, out); break;
    case ncclFloat64: fakenccl_reduce_typed<double>(in, nranks, count, op, out); break;
    case ncclBfloat16: fakenccl_reduce_typed<__nv_bfloat16>(in, nranks, count, op, out); break;
    default: break; /* rejected by fakenccl_check */
    }
}

typedef enum { FAKENCCL_ALLREDUCE, FAKENCCL_REDUCE, FAKENCCL_REDUCESCATTER, FAKENCCL_ALLGATHER, FAKENCCL_BROADCAST } fakenccl_kind;
static const char* const fakenccl_kind_names[] = {"ncclAllReduce", "ncclReduce", "ncclReduceScatter", "ncclAllGather", "ncclBroadcast"};

/* one collective; count is the per-rank element count of the call (recvcount for ReduceScatter,
 * sendcount for AllGather) */
typedef struct {
    fakenccl_kind kind;
    const void* send;
    void* recv;
    size_t count;
    ncclDataType_t type;
    ncclRedOp_t op;
    int root;
    ncclComm_t comm;
    cudaStream_t stream;
} fakenccl_op;

/* the group state (see the top comment) */
typedef struct {
    int depth;
    fakenccl_op* ops;
    size_t n, cap;
} fakenccl_group_state;
inline thread_local fakenccl_group_state fakenccl_group = {0, NULL, 0, 0};

/* Reduction of the chunks this rank owns. The element range [0, total) is split into nranks chunks,
 * chunk q = [offset[q], offset[q] + len[q]); every rank's chunk `rank` is brought here by
 * MPI_Alltoallv, reduced in rank order and written to out (len[rank] elements). */
static inline ncclResult_t fakenccl_reduce_own_chunk(const fakenccl_op* o, const size_t* offset, const size_t* len, void* out) {
    ncclComm_t c = o->comm;
    size_t es = fakenccl_type_size(o->type);
    int n = c->nranks;
    if (c->mpi == MPI_COMM_NULL) {
        fakenccl_reduce((const char*)o->send + offset[0] * es, 1, len[0], o->type, o->op, out);
        return ncclSuccess;
    }
    size_t mine = len[c->rank] * es;
    char* gathered = (char*)malloc(mine * n + 1);
    int* counts = (int*)malloc(sizeof(int) * 4 * n);
    if (!gathered || !counts) {
        free(gathered);
        free(counts);
        return fakenccl_fail(ncclSystemError, fakenccl_kind_names[o->kind], "out of memory for %zu bytes", mine * n);
    }
    int *sendcounts = counts, *sdispls = counts + n, *recvcounts = counts + 2 * n, *rdispls = counts + 3 * n;
    for (int q = 0; q < n; q++) {
        sendcounts[q] = (int)(len[q] * es);
        sdispls[q] = (int)(offset[q] * es);
        recvcounts[q] = (int)mine;
        rdispls[q] = (int)(mine * q);
    }
    int err = MPI_Alltoallv(o->send, sendcounts, sdispls, MPI_BYTE, gathered, recvcounts, rdispls, MPI_BYTE, c->mpi);
    if (err == MPI_SUCCESS) fakenccl_reduce(gathered, n, len[c->rank], o->type, o->op, out);
    free(gathered);
    free(counts);
    FAKENCCL_MPI(err);
    return ncclSuccess;
}

/* Runs one checked collective. */
static inline ncclResult_t fakenccl_execute(const fakenccl_op* o) {
    ncclComm_t c = o->comm;
    int n = c->nranks, r = c->rank;
    size_t es = fakenccl_type_size(o->type);
    size_t bytes = o->count * es;
    if (o->kind == FAKENCCL_BROADCAST) {
        if (r == o->root && o->send != o->recv) memmove(o->recv, o->send, bytes);
        if (c->mpi != MPI_COMM_NULL) FAKENCCL_MPI(MPI_Bcast(o->recv, (int)bytes, MPI_BYTE, o->root, c->mpi));
        return ncclSuccess;
    }
    if (o->kind == FAKENCCL_ALLGATHER) {
        char* own = (char*)o->recv + (size_t)r * bytes;
        if (o->send != own) memmove(own, o->send, bytes);
        if (c->mpi != MPI_COMM_NULL)
            FAKENCCL_MPI(MPI_Allgather(MPI_IN_PLACE, 0, MPI_BYTE, o->recv, (int)bytes, MPI_BYTE, c->mpi));
        return ncclSuccess;
    }
    /* reductions: chunk q of the reduced range belongs to rank q */
    size_t total = o->kind == FAKENCCL_REDUCESCATTER ? o->count * n : o->count;
    size_t* chunks = (size_t*)malloc(sizeof(size_t) * 2 * n);
    if (!chunks) return fakenccl_fail(ncclSystemError, fakenccl_kind_names[o->kind], "out of memory");
    size_t *offset = chunks, *len = chunks + n;
    for (int q = 0; q < n; q++) {
        offset[q] = total * q / n;
        len[q] = total * (q + 1) / n - offset[q];
    }
    ncclResult_t result = ncclSuccess;
    if (o->kind == FAKENCCL_REDUCESCATTER) { /* the own chunk is the result: reduce straight into recv */
        result = fakenccl_reduce_own_chunk(o, offset, len, o->recv);
    } else {
        char* part = (char*)malloc(len[r] * es + 1);
        int* counts = (int*)malloc(sizeof(int) * 2 * n);
        if (!part || !counts) result = fakenccl_fail(ncclSystemError, fakenccl_kind_names[o->kind], "out of memory");
        if (result == ncclSuccess) result = fakenccl_reduce_own_chunk(o, offset, len, part);
        if (result == ncclSuccess && c->mpi == MPI_COMM_NULL) {
            memcpy(o->recv, part, bytes);
        } else if (result == ncclSuccess) {
            for (int q = 0; q < n; q++) {
                counts[q] = (int)(len[q] * es);
                counts[n + q] = (int)(offset[q] * es);
            }
            int err = o->kind == FAKENCCL_ALLREDUCE
                          ? MPI_Allgatherv(part, counts[r], MPI_BYTE, o->recv, counts, counts + n, MPI_BYTE, c->mpi)
                          : MPI_Gatherv(part, counts[r], MPI_BYTE, o->recv, counts, counts + n, MPI_BYTE, o->root, c->mpi);
            if (err != MPI_SUCCESS) {
                char msg[MPI_MAX_ERROR_STRING];
                int msg_len = 0;
                MPI_Error_string(err, msg, &msg_len);
                result = fakenccl_fail(ncclSystemError, fakenccl_kind_names[o->kind], "%s:%d: MPI gather failed: %s", __FILE__, __LINE__, msg);
            }
        }
        free(part);
        free(counts);
    }
    free(chunks);
    return result;
}

/* runs o now, returning its result, or queues it on its stream (CUDASIM_STREAMS=deferred), where a failure
 * exits; the work holds its own copy of o, and a result comes back untracked (as fakeblas_submit) */
static inline ncclResult_t fakenccl_run(const fakenccl_op* o) {
    ncclResult_t status = ncclSuccess;
    ncclResult_t* result = cudasim::deferred_streams() ? NULL : &status;
    fakenccl_op copy = *o;
    cudasim::enqueue(o->stream, [copy, result] {
        ncclResult_t r = fakenccl_execute(&copy);
        if (!result && r != ncclSuccess) exit(1);
        cudasim::Untracked untracked;
        if (result) *result = r;
    });
    return status;
}

/* Checks a collective's arguments; runs it, or queues it inside a group. */
static inline ncclResult_t fakenccl_submit(fakenccl_kind kind, const void* send, void* recv, size_t count, ncclDataType_t type,
                                           ncclRedOp_t op, int root, ncclComm_t comm, cudaStream_t stream) {
    const char* fn = fakenccl_kind_names[kind];
    if (!comm) return fakenccl_fail(ncclInvalidArgument, fn, "comm is NULL");
    size_t es = fakenccl_type_size(type);
    if (es == 0) return fakenccl_fail(ncclInvalidArgument, fn, "datatype %d is not supported (fp16 and fp8 are not faked)", (int)type);
    int reduces = kind == FAKENCCL_ALLREDUCE || kind == FAKENCCL_REDUCE || kind == FAKENCCL_REDUCESCATTER;
    if (reduces && (op < ncclSum || op > ncclAvg)) return fakenccl_fail(ncclInvalidArgument, fn, "reduction op %d is not supported", (int)op);
    if ((kind == FAKENCCL_REDUCE || kind == FAKENCCL_BROADCAST) && (root < 0 || root >= comm->nranks))
        return fakenccl_fail(ncclInvalidArgument, fn, "root %d is not a rank of this %d-rank communicator", root, comm->nranks);
    size_t per_rank_bytes = count * es;
    size_t whole = kind == FAKENCCL_REDUCESCATTER || kind == FAKENCCL_ALLGATHER ? per_rank_bytes * comm->nranks : per_rank_bytes;
    if (count > (size_t)INT_MAX || whole > (size_t)INT_MAX)
        return fakenccl_fail(ncclInvalidArgument, fn, "%zu bytes exceed the fake's 2^31-1 byte message limit", whole);
    if (count > 0) {
        int root_only = kind == FAKENCCL_REDUCE || kind == FAKENCCL_BROADCAST;
        int is_root = comm->rank == root;
        if (!send && (kind != FAKENCCL_BROADCAST || is_root)) return fakenccl_fail(ncclInvalidArgument, fn, "sendbuff is NULL");
        if (!recv && (!root_only || is_root || kind == FAKENCCL_BROADCAST)) return fakenccl_fail(ncclInvalidArgument, fn, "recvbuff is NULL");
    }
    if (count > 0) { /* device memory of the bytes the call touches (NCCL cannot use pageable or pinned host memory) */
        int is_root = comm->rank == root;
        size_t send_bytes = kind == FAKENCCL_REDUCESCATTER ? whole : per_rank_bytes;
        size_t recv_bytes = kind == FAKENCCL_ALLGATHER ? whole : per_rank_bytes;
        int uses_send = kind != FAKENCCL_BROADCAST || is_root;
        int uses_recv = kind != FAKENCCL_REDUCE || is_root;
        const char* bad = NULL;
        const void* ptr = NULL;
        size_t bytes = 0;
        if (uses_send && !cudasim::device_range(send, send_bytes)) bad = "sendbuff", ptr = send, bytes = send_bytes;
        else if (uses_recv && !cudasim::device_range(recv, recv_bytes)) bad = "recvbuff", ptr = recv, bytes = recv_bytes;
        if (bad) {
            char why[200];
            return fakenccl_fail(ncclInvalidArgument, fn, "%s %p (%zu bytes) %s", bad, ptr, bytes,
                                 cudasim::device_range_problem(ptr, bytes, why, sizeof why));
        }
    }
    fakenccl_op o = {kind, send, recv, count, type, op, root, comm, stream};
    if (fakenccl_group.depth == 0) return count == 0 ? ncclSuccess : fakenccl_run(&o);
    if (fakenccl_group.n == fakenccl_group.cap) {
        size_t cap = fakenccl_group.cap ? 2 * fakenccl_group.cap : 16;
        fakenccl_op* ops = (fakenccl_op*)realloc(fakenccl_group.ops, cap * sizeof(fakenccl_op));
        if (!ops) return fakenccl_fail(ncclSystemError, fn, "out of memory queueing a grouped call");
        fakenccl_group.ops = ops;
        fakenccl_group.cap = cap;
    }
    fakenccl_group.ops[fakenccl_group.n++] = o;
    return ncclSuccess;
}

/* ----------------------------------------------------------------------------
 * the NCCL API */
inline const char* ncclGetErrorString(ncclResult_t result) {
    switch (result) {
    case ncclSuccess: return "no error";
    case ncclUnhandledCudaError: return "unhandled cuda error (run with NCCL_DEBUG=INFO for details)";
    case ncclSystemError: return "unhandled system error (run with NCCL_DEBUG=INFO for details)";
    case ncclInternalError: return "internal error - please report this issue to the NCCL developers";
    case ncclInvalidArgument: return "invalid argument (run with NCCL_DEBUG=WARN for details)";
    case ncclInvalidUsage: return "invalid usage (run with NCCL_DEBUG=WARN for details)";
    case ncclRemoteError: return "remote process exited or there was a network error";
    case ncclInProgress: return "NCCL operation in progress";
    default: return "unknown result code";
    }
}

inline ncclResult_t ncclGetVersion(int* version) {
    if (!version) return fakenccl_fail(ncclInvalidArgument, "ncclGetVersion", "version is NULL");
    *version = NCCL_VERSION_CODE;
    return ncclSuccess;
}

/* a magic and a 64-bit key from the clock, the pid and the id's address */
inline ncclResult_t ncclGetUniqueId(ncclUniqueId* uniqueId) {
    if (!uniqueId) return fakenccl_fail(ncclInvalidArgument, "ncclGetUniqueId", "uniqueId is NULL");
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    uint64_t key = (uint64_t)ts.tv_sec * 1000000007ull ^ (uint64_t)ts.tv_nsec ^ ((uint64_t)getpid() << 32) ^ (uint64_t)(uintptr_t)uniqueId;
    key ^= key >> 33;
    key *= 0xff51afd7ed558ccdull; /* mix (murmur3 finaliser) */
    key ^= key >> 33;
    memset(uniqueId, 0, sizeof(*uniqueId));
    memcpy(uniqueId->internal, fakenccl_id_magic, sizeof(fakenccl_id_magic));
    memcpy(uniqueId->internal + 8, &key, sizeof(key));
    return ncclSuccess;
}

inline ncclResult_t ncclCommInitRank(ncclComm_t* comm, int nranks, ncclUniqueId commId, int rank) {
    const char* fn = "ncclCommInitRank";
    if (!comm) return fakenccl_fail(ncclInvalidArgument, fn, "comm is NULL");
    *comm = NULL;
    if (memcmp(commId.internal, fakenccl_id_magic, sizeof(fakenccl_id_magic)) != 0)
        return fakenccl_fail(ncclInvalidArgument, fn, "commId was not made by ncclGetUniqueId");
    if (nranks < 1 || rank < 0 || rank >= nranks)
        return fakenccl_fail(ncclInvalidArgument, fn, "rank %d of nranks %d is out of range", rank, nranks);
    int mpi_up = 0;
    FAKENCCL_MPI(MPI_Initialized(&mpi_up));
    ncclComm_t c = (ncclComm_t)calloc(1, sizeof(struct ncclComm));
    if (!c) return fakenccl_fail(ncclSystemError, fn, "out of memory");
    c->mpi = MPI_COMM_NULL;
    c->nranks = nranks;
    c->rank = rank;
    if (!mpi_up) {
        if (nranks == 1) {
            *comm = c;
            return ncclSuccess;
        }
        free(c);
        return fakenccl_fail(ncclInvalidUsage, fn, "MPI is not initialised: call MPI_Init before a %d-rank ncclCommInitRank", nranks);
    }
    uint64_t key;
    memcpy(&key, commId.internal + 8, sizeof(key));
    MPI_Comm split;
    int err = MPI_Comm_split(MPI_COMM_WORLD, (int)(key & 0x7fffffff), rank, &split);
    if (err != MPI_SUCCESS) free(c);
    FAKENCCL_MPI(err);
    FAKENCCL_MPI(MPI_Comm_set_errhandler(split, MPI_ERRORS_RETURN));
    /* every process that met here must agree on the key and nranks, and hold ranks 0..nranks-1 */
    int size = 0, my_rank = -1;
    long long mine[3] = {(long long)(key >> 1), nranks, rank}, lo[3], hi[3];
    FAKENCCL_MPI(MPI_Comm_size(split, &size));
    FAKENCCL_MPI(MPI_Comm_rank(split, &my_rank));
    FAKENCCL_MPI(MPI_Allreduce(mine, lo, 3, MPI_LONG_LONG, MPI_MIN, split));
    FAKENCCL_MPI(MPI_Allreduce(mine, hi, 3, MPI_LONG_LONG, MPI_MAX, split));
    long long distinct = 0;
    long long seen_here = my_rank == rank ? 1 : 0; /* ranks are keys: rank r lands at position r iff they are 0..n-1 */
    FAKENCCL_MPI(MPI_Allreduce(&seen_here, &distinct, 1, MPI_LONG_LONG, MPI_SUM, split));
    if (lo[0] != hi[0] || lo[1] != hi[1] || size != nranks || distinct != nranks) {
        MPI_Comm_free(&split);
        free(c);
        return fakenccl_fail(ncclInvalidArgument, fn,
                             "the %d processes sharing this id disagree: nranks %lld..%lld, ranks must be 0..%d exactly once (this one: rank %d)",
                             size, lo[1], hi[1], nranks - 1, rank);
    }
    c->mpi = split;
    *comm = c;
    return ncclSuccess;
}

inline ncclResult_t ncclCommFinalize(ncclComm_t comm) {
    if (!comm) return fakenccl_fail(ncclInvalidArgument, "ncclCommFinalize", "comm is NULL");
    return ncclSuccess;
}
inline ncclResult_t ncclCommDestroy(ncclComm_t comm) {
    if (!comm) return ncclSuccess; /* as NCCL: destroying NULL is a no-op */
    cudasim::device_sync(); /* its queued operations first */
    if (comm->mpi != MPI_COMM_NULL) FAKENCCL_MPI(MPI_Comm_free(&comm->mpi));
    free(comm);
    return ncclSuccess;
}
inline ncclResult_t ncclCommAbort(ncclComm_t comm) { return ncclCommDestroy(comm); }
inline ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t* asyncError) {
    if (!comm || !asyncError) return fakenccl_fail(ncclInvalidArgument, "ncclCommGetAsyncError", "comm or asyncError is NULL");
    *asyncError = ncclSuccess;
    return ncclSuccess;
}
inline ncclResult_t ncclCommCount(const ncclComm_t comm, int* count) {
    if (!comm || !count) return fakenccl_fail(ncclInvalidArgument, "ncclCommCount", "comm or count is NULL");
    *count = comm->nranks;
    return ncclSuccess;
}
inline ncclResult_t ncclCommUserRank(const ncclComm_t comm, int* rank) {
    if (!comm || !rank) return fakenccl_fail(ncclInvalidArgument, "ncclCommUserRank", "comm or rank is NULL");
    *rank = comm->rank;
    return ncclSuccess;
}
/* the simulator has one device per process */
inline ncclResult_t ncclCommCuDevice(const ncclComm_t comm, int* device) {
    if (!comm || !device) return fakenccl_fail(ncclInvalidArgument, "ncclCommCuDevice", "comm or device is NULL");
    *device = 0;
    return ncclSuccess;
}

inline ncclResult_t ncclAllReduce(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, ncclRedOp_t op,
                                  ncclComm_t comm, cudaStream_t stream) {
    return fakenccl_submit(FAKENCCL_ALLREDUCE, sendbuff, recvbuff, count, datatype, op, 0, comm, stream);
}
inline ncclResult_t ncclReduce(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, ncclRedOp_t op, int root,
                               ncclComm_t comm, cudaStream_t stream) {
    return fakenccl_submit(FAKENCCL_REDUCE, sendbuff, recvbuff, count, datatype, op, root, comm, stream);
}
inline ncclResult_t ncclReduceScatter(const void* sendbuff, void* recvbuff, size_t recvcount, ncclDataType_t datatype,
                                      ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream) {
    return fakenccl_submit(FAKENCCL_REDUCESCATTER, sendbuff, recvbuff, recvcount, datatype, op, 0, comm, stream);
}
inline ncclResult_t ncclAllGather(const void* sendbuff, void* recvbuff, size_t sendcount, ncclDataType_t datatype, ncclComm_t comm,
                                  cudaStream_t stream) {
    return fakenccl_submit(FAKENCCL_ALLGATHER, sendbuff, recvbuff, sendcount, datatype, ncclSum, 0, comm, stream);
}
inline ncclResult_t ncclBroadcast(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, int root,
                                  ncclComm_t comm, cudaStream_t stream) {
    return fakenccl_submit(FAKENCCL_BROADCAST, sendbuff, recvbuff, count, datatype, ncclSum, root, comm, stream);
}
inline ncclResult_t ncclBcast(void* buff, size_t count, ncclDataType_t datatype, int root, ncclComm_t comm, cudaStream_t stream) {
    return fakenccl_submit(FAKENCCL_BROADCAST, buff, buff, count, datatype, ncclSum, root, comm, stream);
}

inline ncclResult_t ncclGroupStart() {
    fakenccl_group.depth++;
    return ncclSuccess;
}
/* at the outermost end, runs the queued collectives in call order; returns the first failure */
inline ncclResult_t ncclGroupEnd() {
    if (fakenccl_group.depth == 0) return fakenccl_fail(ncclInvalidUsage, "ncclGroupEnd", "no matching ncclGroupStart");
    if (--fakenccl_group.depth > 0) return ncclSuccess;
    ncclResult_t result = ncclSuccess;
    for (size_t i = 0; i < fakenccl_group.n && result == ncclSuccess; i++)
        if (fakenccl_group.ops[i].count > 0) result = fakenccl_run(&fakenccl_group.ops[i]);
    free(fakenccl_group.ops);
    fakenccl_group.ops = NULL;
    fakenccl_group.n = fakenccl_group.cap = 0;
    return result;
}

#endif /* CUDASIM_FAKE_NCCL_H */
