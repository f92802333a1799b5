/*
 * llmc/distributed.cuh — data parallelism over NCCL: bucketed gradient reduction overlapped with the
 * backward pass, ZeRO-1 (sharded optimizer, parameters re-gathered overlapped with the next forward),
 * and the few scalar reductions a step needs (loss, gradient norm). One process per GPU; who is who
 * comes from llmc/process_group.h. Builds: with -DUSE_NCCL (nccl.h, or the simulator's fake NCCL over
 * MPI, dev/cudasim/fake_nccl.h, under -DCUDASIM); without it a Distributed object is single-GPU only
 * and dist_create stops on a world size above 1.
 *
 * Buckets: the trainer lists, for each bucket, the ranges of the flat parameter vector it holds
 * (train_gpt.cu: one bucket per layer, in the order the backward pass completes them, then the
 * embeddings and final layernorm). When the backward pass has finished bucket b (on the last
 * micro-step only: earlier micro-steps just accumulate), dist_reduce_bucket records an event on the
 * compute stream; the communication stream waits for it and reduces the bucket's ranges in one NCCL
 * group, while the compute stream goes on with the layers below. dist_wait_grads makes the compute
 * stream wait for all of it before the optimizer.
 *
 * Averaging: the trainer scales the loss gradient by 1 / (micro-steps × world) before the backward
 * pass, so a plain ncclSum gives the mean over every rank's tokens (no extra pass, exact for any op).
 *
 * Reduction per range:
 *   ZeRO 0: ncclAllReduce in place: every rank gets the whole averaged gradient.
 *   ZeRO 1: the range is cut at shard boundaries (llmc/zero.h) and each piece ncclReduce'd in place to
 *           the rank that owns it: together a reduce-scatter, issued bucket by bucket. Only the owner's
 *           copy of a piece is the sum; the rest of the buffer holds local partial sums.
 *   Type: the gradient type (bf16 in the bf16 build: half the bytes of fp32), or with --grad-comm fp32
 *         in the bf16 build, an fp32 copy of the bucket (grads32), reduced in fp32; the optimizer then
 *         reads those fp32 sums. The fake NCCL reduces bf16 in fp32 and rounds once; real NCCL rounds
 *         bf16 partial sums along its ring, which is what fp32 avoids.
 * Gradient norm: each rank takes Σ g² over its shard's range (ZeRO 0 too), then an fp32 ncclAllReduce;
 *   so, given the same reduced gradients, ZeRO 0 and 1 compute the same norm bit for bit. (Under the fake
 *   NCCL the gradients are too: it sums every collective in rank order. Real NCCL's all-reduce (ZeRO 0) and
 *   reduce (ZeRO 1) may sum in other orders, so with 3 or more ranks their losses can differ in the last
 *   bits; a run repeats its own bits either way.)
 * ZeRO-1 parameters: after the update each rank holds new floatX values for its shard only;
 *   dist_gather_params broadcasts each piece from its owner, bucket by bucket in the order the forward
 *   pass uses them (embeddings first), each bucket closing with an event; dist_wait_params(b) makes the
 *   compute stream wait for bucket b just before the forward pass reads it, so the gather of later
 *   layers overlaps the forward of earlier ones.
 * Determinism: collectives are issued in the same order on every rank, each reduction element-wise
 *   in NCCL's order; the overlap changes when, not what, so losses are the same with or without it.
 * State: all in the Distributed struct the trainer owns.
 */
#ifndef LLMC_DISTRIBUTED_CUH
#define LLMC_DISTRIBUTED_CUH

#include "llmc/cuda_utils.cuh"
#include "llmc/fileio.h"
#include "llmc/process_group.h"
#include "llmc/zero.h"

#if defined(USE_NCCL)
#if defined(CUDASIM)
#include "dev/cudasim/fake_nccl.h"
#else
#include <nccl.h>
#endif
static inline void nccl_check_(ncclResult_t r, const char* call, const char* file, int line) {
    if (r == ncclSuccess) return;
    fprintf(stderr, "error: NCCL: %s failed: %s (%s:%d)\n", call, ncclGetErrorString(r), file, line);
    exit(1);
}
#define ncclCheck(call) nccl_check_((call), #call, __FILE__, __LINE__)
#if defined(PRECISION_FP32)
#define NCCL_FLOATX ncclFloat32
#else
#define NCCL_FLOATX ncclBfloat16
#endif
#endif

typedef struct {
    size_t offset, count; /* elements of the flat parameter vector */
} ParamRange;

typedef enum { DIST_ALLREDUCE, DIST_REDUCE_TO_OWNER, DIST_BROADCAST_FROM_OWNER } DistCollective;

typedef struct {
    int rank, world, zero;
    int communicate; /* a communicator exists (world > 1, or a 1-rank run with --dist-init given) */
    int staged;      /* gradients go through the fp32 buffer grads32 (bf16 build, --grad-comm fp32) */
    size_t num_params;
    Shard shard;     /* this rank's range: the optimizer's with ZeRO 1, the norm's always */
    int num_buckets;
    int* bucket_first; /* num_buckets + 1: bucket b is ranges[bucket_first[b] .. bucket_first[b+1]) */
    ParamRange* ranges;
    cudaStream_t stream; /* communication */
    cudaEvent_t* grads_ready;  /* per bucket: recorded on the compute stream */
    cudaEvent_t* params_ready; /* per bucket: recorded on the communication stream after its gather */
    int* params_pending;       /* host: bucket b's gather has not been waited for yet */
    cudaEvent_t comm_done, update_done, compute_done;
    float* grads32;            /* num_params fp32 when staged, else NULL */
    float* scalar;             /* device: two floats for the scalar reductions (dist_mean, dist_mean_any) */
    void* bounce;              /* device: DIST_BOUNCE_BYTES for dist_broadcast_bytes (communicating ranks only) */
    float* gather;             /* device: shard.size floats for dist_gather_shards, allocated on first use */
    ProcessGroup* pg;          /* its watchdog hears of every collective the host waits for (process_group_progress) */
#if defined(USE_NCCL)
    ncclComm_t comm;
#endif
} Distributed;

/* floatX gradients of one range, widened into the fp32 communication buffer; one thread per element */
__global__ void widen_kernel(float* out, const floatX* in, size_t n) {
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = (float)in[i];
}

/* the device buffer host data is broadcast through, in pieces of this size */
#define DIST_BOUNCE_BYTES ((size_t)8 << 20)

/* whether ranks communicate (several, or one with force) and whether gradients go through grads32 */
static inline int dist_communicates(int world, int force) { return world > 1 || force; }
static inline int dist_staged(int world, int comm_fp32, int force) { return dist_communicates(world, force) && comm_fp32 && sizeof(floatX) == 2; }

/* Device bytes the communication layer allocates beside the model, for the memory check: the scalar,
 * the broadcast buffer when communicating, grads32 when staged and, when the masters are sharded
 * (gather_masters: ZeRO-1 with master weights) over several ranks, the checkpoint's gather buffer (one
 * shard). */
static inline size_t dist_memory_bytes(int world, int comm_fp32, int force, int gather_masters, size_t num_params) {
    size_t bytes = 2 * sizeof(float) + (dist_communicates(world, force) ? DIST_BOUNCE_BYTES : 0) +
                   (dist_staged(world, comm_fp32, force) ? num_params * sizeof(float) : 0);
    if (world > 1 && gather_masters) bytes += zero_shard(num_params, world, 0).size * sizeof(float);
    return bytes;
}

/* Sets up communication for `world` ranks of `pg` over buckets (num_buckets lists of ranges, see the
 * top comment). zero: 0 or 1. comm_fp32: reduce gradients in fp32 (bf16 build). force: make a
 * communicator even for one rank (to measure the distributed path's cost). */
static inline void dist_create(Distributed* d, ProcessGroup* pg, int zero, int comm_fp32, int force, size_t num_params,
                               int num_buckets, const int* bucket_first, const ParamRange* ranges) {
    memset(d, 0, sizeof(*d));
    d->pg = pg;
    d->rank = pg->rank;
    d->world = pg->world;
    d->zero = zero;
    d->num_params = num_params;
    d->shard = zero_shard(num_params, pg->world, pg->rank);
    d->communicate = dist_communicates(pg->world, force);
    d->staged = dist_staged(pg->world, comm_fp32, force);
    d->num_buckets = num_buckets;
    d->bucket_first = (int*)malloc_check((size_t)(num_buckets + 1) * sizeof(int));
    memcpy(d->bucket_first, bucket_first, (size_t)(num_buckets + 1) * sizeof(int));
    d->ranges = (ParamRange*)malloc_check((size_t)bucket_first[num_buckets] * sizeof(ParamRange));
    memcpy(d->ranges, ranges, (size_t)bucket_first[num_buckets] * sizeof(ParamRange));
    d->grads_ready = (cudaEvent_t*)malloc_check((size_t)num_buckets * sizeof(cudaEvent_t));
    d->params_ready = (cudaEvent_t*)malloc_check((size_t)num_buckets * sizeof(cudaEvent_t));
    d->params_pending = (int*)calloc_check((size_t)num_buckets, sizeof(int));
    for (int b = 0; b < num_buckets; b++) {
        cudaCheck(cudaEventCreateWithFlags(&d->grads_ready[b], cudaEventDisableTiming));
        cudaCheck(cudaEventCreateWithFlags(&d->params_ready[b], cudaEventDisableTiming));
    }
    cudaCheck(cudaEventCreateWithFlags(&d->comm_done, cudaEventDisableTiming));
    cudaCheck(cudaEventCreateWithFlags(&d->update_done, cudaEventDisableTiming));
    cudaCheck(cudaEventCreateWithFlags(&d->compute_done, cudaEventDisableTiming));
    cudaCheck(cudaStreamCreateWithFlags(&d->stream, cudaStreamNonBlocking));
    cudaCheck(cudaMalloc(&d->scalar, 2 * sizeof(float)));
    if (d->staged) cudaCheck(cudaMalloc(&d->grads32, num_params * sizeof(float)));
    if (!d->communicate) return;
    cudaCheck(cudaMalloc(&d->bounce, DIST_BOUNCE_BYTES));
#if defined(USE_NCCL)
    ncclUniqueId id;
    if (pg->rank == 0) ncclCheck(ncclGetUniqueId(&id));
    process_group_share_id(pg, (unsigned char*)id.internal);
    /* every rank must arrive with the same id: a peer that died, or another job's stale --dist-file id, would hang it */
    process_group_watchdog_start(pg, "ncclCommInitRank (a peer died, or read another job's id: a stale --dist-file?)", 1);
    ncclResult_t init = ncclCommInitRank(&d->comm, pg->world, id, pg->rank);
    process_group_watchdog_stop(pg);
    if (init == ncclInvalidUsage) { /* what NCCL says when two ranks share a GPU */
        int device = -1, count = 0;
        cudaCheck(cudaGetDevice(&device));
        cudaCheck(cudaGetDeviceCount(&count));
        fatalf("rank %d: ncclCommInitRank: invalid usage, most often two ranks on one GPU (this rank uses GPU %d of the %d it "
               "sees, local rank %d): start one process per GPU (NCCL_DEBUG=WARN says more)",
               pg->rank, device, count, pg->local_rank);
    }
    ncclCheck(init);
    process_group_id_used(pg);
#else
    fatalf("%d ranks: this binary was built without NCCL (make train_gpt finds NCCL by a test link: in NCCL_HOME, the CUDA toolkit or a pip wheel; install it, or run on one GPU)",
           pg->world);
#endif
}

static inline void dist_free(Distributed* d) {
#if defined(USE_NCCL)
    if (d->communicate) ncclCheck(ncclCommDestroy(d->comm));
#endif
    for (int b = 0; b < d->num_buckets; b++) {
        cudaCheck(cudaEventDestroy(d->grads_ready[b]));
        cudaCheck(cudaEventDestroy(d->params_ready[b]));
    }
    cudaCheck(cudaEventDestroy(d->comm_done));
    cudaCheck(cudaEventDestroy(d->update_done));
    cudaCheck(cudaEventDestroy(d->compute_done));
    cudaCheck(cudaStreamDestroy(d->stream));
    cudaCheck(cudaFree(d->scalar));
    cudaCheck(cudaFree(d->bounce));
    cudaCheck(cudaFree(d->grads32));
    cudaCheck(cudaFree(d->gather));
    free(d->bucket_first);
    free(d->ranges);
    free(d->grads_ready);
    free(d->params_ready);
    free(d->params_pending);
}

/* One NCCL group over bucket b's ranges of buf (elements of elem_bytes, NCCL type `type`), on the
 * communication stream: all-reduce each range, or cut it at shard boundaries and reduce each piece
 * to / broadcast each piece from the rank that owns it. */
static inline void dist_bucket_collective(Distributed* d, int b, void* buf, size_t elem_bytes, int type, DistCollective op) {
#if defined(USE_NCCL)
    ncclCheck(ncclGroupStart());
    for (int k = d->bucket_first[b]; k < d->bucket_first[b + 1]; k++) {
        size_t at = d->ranges[k].offset, end = at + d->ranges[k].count;
        while (at < end) {
            int owner = (int)(at / d->shard.size);
            size_t piece_end = op == DIST_ALLREDUCE ? end : (size_t)(owner + 1) * d->shard.size;
            size_t count = (piece_end < end ? piece_end : end) - at;
            void* p = (char*)buf + at * elem_bytes;
            ncclDataType_t t = (ncclDataType_t)type;
            if (op == DIST_ALLREDUCE) ncclCheck(ncclAllReduce(p, p, count, t, ncclSum, d->comm, d->stream));
            else if (op == DIST_REDUCE_TO_OWNER) ncclCheck(ncclReduce(p, p, count, t, ncclSum, owner, d->comm, d->stream));
            else ncclCheck(ncclBroadcast(p, p, count, t, owner, d->comm, d->stream));
            at += count;
        }
    }
    ncclCheck(ncclGroupEnd());
#endif
}

/* Bucket b's gradients are complete on `compute`: reduce them across ranks on the communication
 * stream (ZeRO 0: all-reduce; ZeRO 1: to their owners), through grads32 when staged. */
static inline void dist_reduce_bucket(Distributed* d, int b, floatX* grads, cudaStream_t compute) {
    if (!d->communicate) return;
    cudaCheck(cudaEventRecord(d->grads_ready[b], compute));
    cudaCheck(cudaStreamWaitEvent(d->stream, d->grads_ready[b], 0));
#if defined(USE_NCCL)
    DistCollective op = d->zero ? DIST_REDUCE_TO_OWNER : DIST_ALLREDUCE;
    if (d->staged) {
        for (int k = d->bucket_first[b]; k < d->bucket_first[b + 1]; k++) {
            size_t at = d->ranges[k].offset, count = d->ranges[k].count;
            launch_kernel(widen_kernel, dim3(ceil_div((long)count, 512)), dim3(512), 0, d->stream, d->grads32 + at, grads + at, count);
        }
        dist_bucket_collective(d, b, d->grads32, sizeof(float), ncclFloat32, op);
    } else {
        dist_bucket_collective(d, b, grads, sizeof(floatX), NCCL_FLOATX, op);
    }
#endif
}

/* The compute stream waits for every gradient reduction issued so far. */
static inline void dist_wait_grads(Distributed* d, cudaStream_t compute) {
    if (!d->communicate) return;
    cudaCheck(cudaEventRecord(d->comm_done, d->stream));
    cudaCheck(cudaStreamWaitEvent(compute, d->comm_done, 0));
}

/* Σ over ranks of the n floats at dev (device memory, written on `compute`), to the host's out
 * (synchronises). Like every collective here it runs on the communication stream, after what is
 * already queued there: NCCL kernels of one communicator on two streams could interleave differently
 * on different ranks and deadlock. */
static inline void dist_sum_device_floats(Distributed* d, float* dev, int n, float* out, cudaStream_t compute) {
    cudaStream_t s = d->communicate ? d->stream : compute;
    if (d->communicate) {
        cudaCheck(cudaEventRecord(d->compute_done, compute));
        cudaCheck(cudaStreamWaitEvent(d->stream, d->compute_done, 0));
#if defined(USE_NCCL)
        ncclCheck(ncclAllReduce(dev, dev, (size_t)n, ncclFloat32, ncclSum, d->comm, d->stream));
#endif
    }
    cudaCheck(cudaMemcpyAsync(out, dev, (size_t)n * sizeof(float), cudaMemcpyDeviceToHost, s));
    cudaCheck(cudaStreamSynchronize(s));
    if (d->communicate) process_group_progress(d->pg);
}
static inline float dist_sum_device_float(Distributed* d, float* dev, cudaStream_t compute) {
    float result;
    dist_sum_device_floats(d, dev, 1, &result, compute);
    return result;
}

/* rank 0's n bytes at the host buffer buf, on every rank, through the device buffer d->bounce (a model's
 * weights go in pieces of DIST_BOUNCE_BYTES); also a barrier */
static inline void dist_broadcast_bytes(Distributed* d, void* buf, size_t n, cudaStream_t compute) {
    if (!d->communicate || n == 0) return;
    void* dev = d->bounce;
    cudaCheck(cudaEventRecord(d->compute_done, compute));
    cudaCheck(cudaStreamWaitEvent(d->stream, d->compute_done, 0));
    for (size_t at = 0; at < n; at += DIST_BOUNCE_BYTES) {
        size_t len = n - at < DIST_BOUNCE_BYTES ? n - at : DIST_BOUNCE_BYTES;
        cudaCheck(cudaMemcpyAsync(dev, (char*)buf + at, len, cudaMemcpyHostToDevice, d->stream));
#if defined(USE_NCCL)
        ncclCheck(ncclBroadcast(dev, dev, len, ncclUint8, 0, d->comm, d->stream));
#endif
        cudaCheck(cudaMemcpyAsync((char*)buf + at, dev, len, cudaMemcpyDeviceToHost, d->stream));
        cudaCheck(cudaStreamSynchronize(d->stream));
        process_group_progress(d->pg);
    }
}

/* mean over ranks of a host value (a loss); also a barrier */
static inline float dist_mean(Distributed* d, float value, cudaStream_t compute) {
    if (!d->communicate) return value;
    cudaCheck(cudaMemcpyAsync(d->scalar, &value, sizeof(float), cudaMemcpyHostToDevice, d->stream));
    return dist_sum_device_float(d, d->scalar, compute) / (float)d->world;
}

/* dist_mean of value, and to *any whether `flag` is set on any rank, in one all-reduce (a step's loss
 * carries whether a rank's data failed: no collective more per step); also a barrier */
static inline float dist_mean_any(Distributed* d, float value, int flag, int* any, cudaStream_t compute) {
    if (!d->communicate) {
        *any = flag != 0;
        return value;
    }
    float v[2] = {value, flag ? 1.0f : 0.0f};
    cudaCheck(cudaMemcpyAsync(d->scalar, v, sizeof(v), cudaMemcpyHostToDevice, d->stream));
    dist_sum_device_floats(d, d->scalar, 2, v, compute);
    *any = v[1] > 0.0f;
    return v[0] / (float)d->world;
}

/* ZeRO 1, after the optimizer updated this rank's shard of params on `compute`: broadcast every
 * shard's values to all ranks, bucket by bucket in the forward pass's order — the last bucket (the
 * embeddings) first, then 0, 1, ... — each marked by an event. */
static inline void dist_gather_params(Distributed* d, floatX* params, cudaStream_t compute) {
    if (!d->communicate || !d->zero) return;
    cudaCheck(cudaEventRecord(d->update_done, compute));
    cudaCheck(cudaStreamWaitEvent(d->stream, d->update_done, 0));
    for (int i = 0; i < d->num_buckets; i++) {
        int b = (i + d->num_buckets - 1) % d->num_buckets;
#if defined(USE_NCCL)
        dist_bucket_collective(d, b, params, sizeof(floatX), NCCL_FLOATX, DIST_BROADCAST_FROM_OWNER);
#endif
        cudaCheck(cudaEventRecord(d->params_ready[b], d->stream));
        d->params_pending[b] = 1;
    }
}

/* The forward pass is about to read bucket b's parameters: wait for their gather, if one is pending. */
static inline void dist_wait_params(Distributed* d, int b, cudaStream_t compute) {
    if (!d->params_pending[b]) return;
    cudaCheck(cudaStreamWaitEvent(compute, d->params_ready[b], 0));
    d->params_pending[b] = 0;
}

/* The whole of a sharded fp32 array (each rank holds shard.count values at dev) on the host of every
 * rank: each rank's shard broadcast in turn through a shard-sized device buffer. host: num_params. */
static inline void dist_gather_shards(Distributed* d, const float* dev, float* host, cudaStream_t compute) {
    if (!d->gather) cudaCheck(cudaMalloc(&d->gather, d->shard.size * sizeof(float)));
    cudaCheck(cudaEventRecord(d->compute_done, compute));
    cudaCheck(cudaStreamWaitEvent(d->stream, d->compute_done, 0));
    for (int q = 0; q < d->world; q++) {
        Shard s = zero_shard(d->num_params, d->world, q);
        if (q == d->rank) cudaCheck(cudaMemcpyAsync(d->gather, dev, s.count * sizeof(float), cudaMemcpyDeviceToDevice, d->stream));
#if defined(USE_NCCL)
        if (d->communicate) ncclCheck(ncclBroadcast(d->gather, d->gather, s.count, ncclFloat32, q, d->comm, d->stream));
#endif
        cudaCheck(cudaMemcpyAsync(host + s.offset, d->gather, s.count * sizeof(float), cudaMemcpyDeviceToHost, d->stream));
        cudaCheck(cudaStreamSynchronize(d->stream));
    }
}

/* The run header's multi-GPU lines: who is who, the optimizer state per rank (ZeRO 1: S = ceil(n/N)
 * elements of each array), the buckets, and the bytes a ring algorithm sends per rank and step:
 * all-reduce 2(N-1)/N x G, reduce-scatter + all-gather (N-1)/N x (G + P), with G the gradient bytes in
 * the communication type and P the floatX parameter bytes. */
static inline void dist_print_plan(const Distributed* d, const ProcessGroup* pg, int has_master) {
    if (!d->communicate) return;
    int arrays = has_master ? 3 : 2;
    size_t opt_elems = d->zero ? d->shard.size : d->num_params, largest = 0;
    for (int b = 0; b < d->num_buckets; b++) {
        size_t elems = 0;
        for (int k = d->bucket_first[b]; k < d->bucket_first[b + 1]; k++) elems += d->ranges[k].count;
        if (elems > largest) largest = elems;
    }
    size_t grad_elem = d->staged ? 4 : sizeof(floatX);
    double N = d->world, G = (double)d->num_params * grad_elem, P = (double)d->num_params * sizeof(floatX);
    double ring = d->zero ? (N - 1) / N * (G + P) : 2 * (N - 1) / N * G;
    printf("distributed: rank %d of %d (launcher %s, NCCL id by %s), local rank %d | ZeRO-%d\n", pg->rank, pg->world, pg->launcher,
           pg->method, pg->local_rank, d->zero);
    printf("optimizer state per rank: %zu bytes = %zu elements x %d arrays x 4 bytes (%s)\n", opt_elems * arrays * sizeof(float),
           opt_elems, arrays, d->zero ? "ZeRO-1 shard: ceil(parameters / ranks)" : "every parameter");
    printf("communication per step: gradients in %s, %d buckets (largest %.1f MiB), %s; ring estimate %.1f MiB sent per rank\n",
           grad_elem == 4 ? "fp32" : "bf16", d->num_buckets, (double)largest * grad_elem / (1024.0 * 1024.0),
           d->zero ? "reduced to shard owners, parameters re-gathered" : "all-reduced", ring / (1024.0 * 1024.0));
}

#endif /* LLMC_DISTRIBUTED_CUH */
