/*
 * train_gpt.cu — GPT-2 training on one NVIDIA GPU, bf16 (default) or fp32 (-DPRECISION_FP32).
 *
 * The same model, flags, files and step line as the CPU trainer train_gpt.c, which it mirrors top to
 * bottom: parameters and activations, the forward pass, the backward pass, the AdamW update, then the
 * training loop. Each op is a kernel header in llmc/ (forward and backward side by side, its math and
 * parallel decomposition stated there); matmuls go through cuBLASLt (llmc/matmul.cuh). File formats,
 * the data loader, schedules, flags and checkpoints are the shared llmc/ headers; doc/formats.md
 * describes every file.
 *
 * Precision: parameters, gradients and activations are floatX (llmc/cuda_utils.cuh); AdamW keeps fp32
 * moments and, in bf16 with --master-weights 1, fp32 master weights, and writes the bf16 parameters
 * with seeded stochastic rounding. Checkpoints hold fp32 weights (the masters when there are any), and
 * a resume reproduces the exact bf16 rounding, so a resumed run is bit-identical to an uninterrupted one.
 * Recompute (-r 1: GELU outputs, -r 2: also layernorm outputs) keeps one layer's worth of those
 * activations and recomputes them in the backward pass.
 *
 * --profile N times each op with CUDA event pairs (the same table as the CPU trainer's, llmc/profile.h);
 * NVTX ranges name each layer's forward and backward, the classifier, the optimizer update and the
 * gradient communication for Nsight Systems (no-ops in the simulator: dev/cudasim/fake_nvtx.h).
 *
 * Builds: nvcc (make train_gpt) or the CUDA simulator (g++ -DCUDASIM, make train_gpt_sim). test_gpt.cu
 * includes this file with TESTING defined, to reuse the model without main().
 */
#include <math.h>

#include "llmc/cuda_utils.cuh"
#include "llmc/fileio.h"
#include "llmc/rng.h"
#include "llmc/schedule.h"
#include "llmc/checkpoint.h"
#include "llmc/dataloader.h"
#include "llmc/encoder.cuh"
#include "llmc/layernorm.cuh"
#include "llmc/matmul.cuh"
#include "llmc/flash_attention.cuh"
#include "llmc/gelu.cuh"
#include "llmc/classifier.cuh"
#include "llmc/global_norm.cuh"
#include "llmc/adamw.cuh"
#include "llmc/distributed.cuh"
#include "llmc/progress.h" /* MemoryPlan: device bytes by category, for the memory check and the run header */
#include "llmc/profile.h"
#ifdef CUDASIM
#include "dev/cudasim/fake_nvtx.h"
#else
#include <nvtx3/nvToolsExt.h> /* header-only: ranges for Nsight Systems */
#endif

/* ----------------------------------------------------------------------------
 * Parameters: one contiguous floatX buffer in model-file order (doc/formats.md); the gradients mirror it. */

/* ParameterTensors and point_parameters (llmc/checkpoint.h) */
GPT_DEFINE_PARAMETER_TENSORS(floatX)

/* ----------------------------------------------------------------------------
 * Activations kept from the forward pass for the backward pass, for up to B x T tokens. Per-layer
 * tensors are stacked over layers, except those recomputation drops (one layer's worth, reused).
 * floatX unless marked fp32. */

typedef struct {
    floatX* encoded;   /* (B, T, C)          x0 = wte[tok] + wpe[pos] */
    floatX* ln1;       /* (L or 1, B, T, C)  1 layer with -r 2 */
    float* ln1_mean;   /* (L, B, T) fp32 */
    float* ln1_rstd;   /* (L, B, T) fp32 */
    floatX* qkv;       /* (L, B, T, 3C) */
    floatX* atty;      /* (L, B, T, C)       attention output, before its projection */
    float* att_lse;    /* (L, B, NH, T) fp32 logsumexp of each attention row: all attention keeps (flash attention) */
    floatX* residual2; /* (L, B, T, C)       x + attn(ln1(x)) */
    floatX* ln2;       /* (L or 1, B, T, C)  1 layer with -r 2 */
    float* ln2_mean;   /* (L, B, T) fp32 */
    float* ln2_rstd;   /* (L, B, T) fp32 */
    floatX* fch;       /* (L, B, T, 4C)      before GELU */
    floatX* fch_gelu;  /* (L or 1, B, T, 4C) 1 layer with -r >= 1 */
    floatX* residual3; /* (L, B, T, C)       the layer's output */
    floatX* lnf;       /* (B, T, C) */
    float* lnf_mean;   /* (B, T) fp32 */
    float* lnf_rstd;   /* (B, T) fp32 */
    floatX* proj;      /* (B, T, C)          a projection's output before its residual add (any layer) */
    floatX* logits;    /* (B, T, Vp)         overwritten by their gradient in training */
    float* losses;     /* (B, T) fp32 */
} Activations;

/* Gradients of activations: one layer's worth is alive at a time. */
typedef struct {
    floatX* residual; /* (B, T, C)  gradient of the residual stream, carried down the layers */
    floatX* ln;       /* (B, T, C)  gradient of a layernorm output */
    floatX* atty;     /* (B, T, C) */
    floatX* qkv;      /* (B, T, 3C) */
    floatX* fch;      /* (B, T, 4C) gradient of the GELU input; also the attention backward's scratch, being dead from
                         the MLP's backward to the next layer's: that needs 4·BT·(NH + C) bytes
                         (flash_attention_scratch_bytes), at most the 4·BT·C·sizeof(floatX) >= 8·BT·C bytes here, as NH <= C */
} ActivationGrads;

/* ActivationGrads' widths in units of C: residual, ln, atty, qkv, fch */
static const int ACTIVATION_GRAD_WIDTHS[5] = {1, 1, 1, 3, 4};
#define ACTIVATION_GRAD_WIDTH 10

typedef struct {
    GPTConfig config;
    size_t param_sizes[NUM_PARAM_TENSORS];
    size_t num_params;
    int batch_cap, seq_cap, recompute;
    int deterministic; /* 1 (default): attention backward bit-identical run to run; 0: its faster atomic dQ mode */
    uint64_t seed; /* stochastic rounding */
    floatX* params;
    floatX* grads;
    Shard opt;     /* the parameters the optimizer state covers: all, or this rank's ZeRO-1 shard */
    float* master; /* fp32 master weights of opt (bf16 build with --master-weights 1), else NULL */
    float* adam_m; /* opt.size each */
    float* adam_v;
    Distributed* dist; /* multi-GPU communication (llmc/distributed.cuh), or NULL */
    int params_stale;  /* ZeRO-1: updated since the last gather, other ranks' shards not yet here (gpt_gather_params) */
    ParameterTensors w;
    ParameterTensors g;
    void* act_memory;
    Activations a;
    ActivationGrads da;
    float* scratch;     /* column sums or the encoder backward's partial sums, then the norm partials */
    size_t work_floats; /* where the norm partials start in scratch */
    /* The host<->device copies of a step go through pinned host memory (cudaMallocHost): a copy from pageable
     * memory may make the host wait for the stream (CUDA stages it). A pinned buffer is read or written when its
     * copy runs, so the host refills it only after an event recorded after that copy. (The multi-GPU scalars of
     * llmc/distributed.cuh stay pageable: a host wait follows each anyway.) */
    int* inputs_dev;    /* (B, T) */
    int* targets_dev;   /* (B, T) */
    int* inputs_host;   /* (B, T) pinned: the inputs staged for their copy to inputs_dev */
    int* targets_host;  /* (B, T) pinned: the same for the targets */
    cudaEvent_t tokens_copied; /* recorded after both copies */
    int* encoder_plan_dev; /* encoder_plan_max_ints(BT): llmc/encoder.cuh's grouping of positions by token */
    int* encoder_plan[2];  /* its host copies, pinned, alternated backward by backward */
    cudaEvent_t encoder_plan_copied[2]; /* recorded after each one's copy */
    int encoder_plan_next; /* the one the next backward fills */
    int* encoder_counts;   /* vocab_size + 1: encoder_plan's scratch (host only) */
    float* losses_host; /* (B, T) pinned: the per-token losses read back */
    float* norm_host;   /* 1 pinned: the squared gradient norm read back */
    float* logits_host; /* (Vp): the last position's logits, for sampling */
    cudaStream_t stream;
    BlasContext blas;
    struct GpuProfiler* prof; /* per-op event pairs while the trainer profiles; NULL: off */
} GPT;

/* ----------------------------------------------------------------------------
 * --profile (llmc/profile.h) on the device: while m->prof is set, each op bracket records a CUDA event
 * pair on the model's stream (gpu_profile_begin / gpu_profile_end, or GPU_PROFILE(m, op, call)); after
 * the step's final synchronisation gpu_profile_collect adds each pair's elapsed time to its op and
 * reuses the events for the next step. Brackets do not nest. With m->prof NULL a bracket is one pointer
 * test and records nothing. Host-only work (data loading) is timed with the host clock instead. */
typedef struct GpuProfiler {
    Profiler table;
    cudaEvent_t* events; /* 2 per bracket: start, stop */
    ProfileOp* ops;      /* the op of each bracket */
    int used, cap;       /* brackets recorded this step; allocated */
} GpuProfiler;

static void gpu_profile_begin(GPT* m, ProfileOp op) {
    GpuProfiler* p = m->prof;
    if (!p) return;
    if (p->used == p->cap) {
        int cap = p->cap ? 2 * p->cap : 256; /* the brackets of a step double until they fit */
        cudaEvent_t* events = (cudaEvent_t*)malloc_check(2 * (size_t)cap * sizeof(cudaEvent_t));
        ProfileOp* ops = (ProfileOp*)malloc_check((size_t)cap * sizeof(ProfileOp));
        if (p->cap) {
            memcpy(events, p->events, 2 * (size_t)p->cap * sizeof(cudaEvent_t));
            memcpy(ops, p->ops, (size_t)p->cap * sizeof(ProfileOp));
        }
        for (int i = 2 * p->cap; i < 2 * cap; i++) cudaCheck(cudaEventCreate(&events[i]));
        free(p->events);
        free(p->ops);
        p->events = events;
        p->ops = ops;
        p->cap = cap;
    }
    p->ops[p->used] = op;
    cudaCheck(cudaEventRecord(p->events[2 * p->used], m->stream));
}

static void gpu_profile_end(GPT* m) {
    GpuProfiler* p = m->prof;
    if (!p) return;
    cudaCheck(cudaEventRecord(p->events[2 * p->used + 1], m->stream));
    p->used++;
}

#define GPU_PROFILE(m, op, call)      \
    do {                              \
        gpu_profile_begin((m), (op)); \
        call;                         \
        gpu_profile_end(m);           \
    } while (0)

/* after the stream is synchronised: the recorded pairs' times into the table */
static inline void gpu_profile_collect(GpuProfiler* p) {
    for (int i = 0; i < p->used; i++) {
        float ms = 0.0f;
        cudaCheck(cudaEventElapsedTime(&ms, p->events[2 * i], p->events[2 * i + 1]));
        profile_add(&p->table, p->ops[i], ms * 1e-3);
    }
    p->used = 0;
}

static inline void gpu_profile_free(GpuProfiler* p) {
    for (int i = 0; i < 2 * p->cap; i++) cudaCheck(cudaEventDestroy(p->events[i]));
    free(p->events);
    free(p->ops);
}

/* Activation tensor sizes in elements, in Activations' field order; whether each is fp32. */
#define NUM_ACTIVATIONS 20
static void activation_sizes(const GPTConfig* c, int B, int T, int recompute, size_t sizes[NUM_ACTIVATIONS],
                             int is_fp32[NUM_ACTIVATIONS]) {
    size_t L = c->num_layers, C = c->channels, NH = c->num_heads, Vp = c->padded_vocab_size, BT = (size_t)B * T;
    size_t L_ln = recompute >= 2 ? 1 : L, L_gelu = recompute >= 1 ? 1 : L;
    size_t s[NUM_ACTIVATIONS] = {BT * C,     L_ln * BT * C, L * BT,         L * BT,    L * BT * 3 * C, L * BT * C, L * NH * BT,
                                 L * BT * C, L_ln * BT * C, L * BT,         L * BT,    L * BT * 4 * C, L_gelu * BT * 4 * C,
                                 L * BT * C, BT * C,        BT,             BT,        BT * C,         BT * Vp,    BT};
    int f[NUM_ACTIVATIONS] = {0, 0, 1, 1, 0, 0, 1, 0, 0, 1, 1, 0, 0, 0, 0, 1, 1, 0, 0, 1};
    for (int i = 0; i < NUM_ACTIVATIONS; i++) {
        sizes[i] = (s[i] + 63) / 64 * 64; /* every tensor 128-byte aligned for cuBLASLt */
        is_fp32[i] = f[i];
    }
}

/* whether fp32 master weights exist: only in the bf16 build, and when asked for */
static int gpt_uses_master(int master_weights) {
#if defined(PRECISION_FP32)
    return 0; /* the parameters are fp32 already */
#else
    return master_weights;
#endif
}

/* the floats of scratch that the column sums, the layernorm backward and the encoder backward share */
static size_t gpt_work_floats(size_t BT, size_t C) {
    size_t colsum = colsum_scratch_floats((long)BT, 4 * (long)C), encoder = encoder_partial_floats((long)BT, (long)C);
    size_t layernorm = layernorm_scratch_floats((long)BT, (long)C), most = colsum > encoder ? colsum : encoder;
    return layernorm > most ? layernorm : most;
}

/* opt_elems: elements of each optimizer array (the parameter count, or a ZeRO-1 shard); comm_bytes: what the
 * communication layer allocates (dist_memory_bytes), counted as scratch */
static MemoryPlan gpt_memory_plan(const GPTConfig* c, int B, int T, int recompute, int master_weights, size_t opt_elems, size_t comm_bytes) {
    MemoryPlan p;
    size_t n = gpt_num_params(c), BT = (size_t)B * T, C = c->channels;
    p.params = n * sizeof(floatX);
    p.grads = n * sizeof(floatX);
    p.optimizer = opt_elems * sizeof(float) * (master_weights ? 3 : 2);
    size_t sizes[NUM_ACTIVATIONS];
    int is_fp32[NUM_ACTIVATIONS];
    activation_sizes(c, B, T, recompute, sizes, is_fp32);
    p.activations = 0;
    for (int i = 0; i < NUM_ACTIVATIONS; i++) p.activations += sizes[i] * (is_fp32[i] ? sizeof(float) : sizeof(floatX));
    p.activations += BT * ACTIVATION_GRAD_WIDTH * C * sizeof(floatX);
    p.attention = sizes[6] * sizeof(float);
    p.scratch = (gpt_work_floats(BT, C) + GNORM_BLOCKS + 1) * sizeof(float) + BLAS_WORKSPACE_BYTES + BT * 2 * sizeof(int) +
                encoder_plan_max_ints((long)BT) * sizeof(int) + comm_bytes;
    return p;
}

static double gib(size_t bytes) { return (double)bytes / (1024.0 * 1024.0 * 1024.0); }
static double mib(size_t bytes) { return (double)bytes / (1024.0 * 1024.0); }

/* the memory plan's detail below the run header's "memory:" line (llmc/progress.h, which prints the totals) */
static inline void memory_plan_print(const MemoryPlan* p, const MemoryPlan* without_recompute, int recompute) {
    printf("attention: flash attention keeps %.3f MiB of logsumexps (L x B x NH x T fp32, in activations), no T x T buffers\n",
           mib(p->attention));
    if (recompute > 0)
        printf("recompute %d: activations %.3f MiB instead of %.3f MiB (saves %.3f MiB)\n", recompute, mib(p->activations),
               mib(without_recompute->activations), mib(without_recompute->activations - p->activations));
}

/* bytes as "1.23 GiB" from 1 GiB up, "45.6 MiB" from 1 MiB up, else "512 bytes" (a figure of the memory
 * check's message) */
static const char* mem_text(char out[32], size_t bytes) {
    if (bytes >= ((size_t)1 << 30)) snprintf(out, 32, "%.2f GiB", gib(bytes));
    else if (bytes >= ((size_t)1 << 20)) snprintf(out, 32, "%.1f MiB", mib(bytes));
    else snprintf(out, 32, "%zu bytes", bytes);
    return out;
}

/* What the memory plan cannot count on a real GPU, kept free by the memory check: the CUDA libraries' own
 * device memory (cuBLASLt's kernels, NCCL's buffers, loaded or allocated later) and cudaMalloc's rounding
 * of each allocation. An estimate, so that a run near the limit gets the check's message rather than
 * CUDA's out-of-memory error. The simulator allocates exactly what is asked: none there. */
#if defined(CUDASIM)
#define GPU_MEMORY_RESERVE ((size_t)0)
#else
#define GPU_MEMORY_RESERVE ((size_t)512 << 20)
#endif

/* Stops with the bytes needed when the model and a batch of B x T tokens do not fit in the device's free
 * memory (less GPU_MEMORY_RESERVE), and what would help: a smaller batch or recompute, or, when the
 * model's own state (weights, gradients, optimizer) is already too much, ZeRO-1 over more GPUs (or no fp32
 * master copy). */
static void gpt_check_memory(const GPTConfig* c, int B, int T, int recompute, int master_weights, size_t opt_elems, size_t comm_bytes) {
    MemoryPlan plan = gpt_memory_plan(c, B, T, recompute, master_weights, opt_elems, comm_bytes);
    size_t state = plan.params + plan.grads + plan.optimizer, free_bytes, total_bytes;
    size_t need = state + plan.activations + plan.scratch + GPU_MEMORY_RESERVE;
    cudaCheck(cudaMemGetInfo(&free_bytes, &total_bytes));
    if (need <= free_bytes) return;
    char t[11][32], advice[256], reserve[96] = "";
    if (GPU_MEMORY_RESERVE > 0) snprintf(reserve, sizeof(reserve), ", kept free for the CUDA libraries %s", mem_text(t[10], GPU_MEMORY_RESERVE));
    if (state + GPU_MEMORY_RESERVE >= free_bytes)
        snprintf(advice, sizeof(advice), "the weights, gradients and optimizer state alone need %s: shard the optimizer state over "
                 "more GPUs with -z 1%s", mem_text(t[8], state), master_weights ? ", or drop the fp32 master copy with -w 0" : "");
    else snprintf(advice, sizeof(advice), recompute < 2 ? "try a smaller -b, or -r 2" : "try a smaller -b");
    fatalf("batch %d x %d does not fit in device memory: needs %s (parameters %s, gradients %s, optimizer %s, activations %s, "
           "scratch %s%s), %s more than the %s free of the device's %s (%s)",
           B, T, mem_text(t[0], need), mem_text(t[1], plan.params), mem_text(t[2], plan.grads), mem_text(t[3], plan.optimizer),
           mem_text(t[4], plan.activations), mem_text(t[5], plan.scratch), reserve, mem_text(t[6], need - free_bytes),
           mem_text(t[7], free_bytes), mem_text(t[9], total_bytes), advice);
}

/* exits with a one-line error (`what`: the model's name) unless the GPU kernels take config c: a head size of at
 * most 256 (flash attention; any size below). Any channel count: the kernels use 16-byte packs where the channels
 * are a multiple of 8 and single elements otherwise (pack_width in llmc/cuda_utils.cuh). */
static void gpu_config_check(const GPTConfig* c, const char* what) {
    if (!flash_attention_supported(c->channels, c->num_heads))
        fatalf("%s: head size %d (channels %d / heads %d) is above flash attention's 256", what, c->channels / c->num_heads, c->channels, c->num_heads);
}

/* Allocates the model for batches of up to B x T tokens, after checking that it fits in the device's
 * free memory (the error names how much it needs). The optimizer state covers the parameters of
 * `opt` (NULL: all of them). Weights are set by gpt_set_weights. */
static void gpt_create(GPT* m, const GPTConfig* c, int B, int T, int recompute, int master_weights, uint64_t seed, const Shard* opt,
                       size_t comm_bytes) {
    gpt_config_check(c, "model config");
    gpu_config_check(c, "model config");
    int device, smem_optin;
    cudaCheck(cudaGetDevice(&device));
    cudaCheck(cudaDeviceGetAttribute(&smem_optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device));
    size_t smem = flash_attention_smem_bytes(c->channels, c->num_heads, sizeof(floatX) == sizeof(float));
    if (smem > (size_t)smem_optin)
        fatalf("model config: head size %d needs %zu bytes of shared memory a block in flash attention, more than this GPU's %d%s",
               c->channels / c->num_heads, smem, smem_optin,
               sizeof(floatX) == 2 ? " (an H100/H200 takes every head size up to 256, an A100 up to 128, sm_86/89 GPUs up to 64)" : "");
    if (B > 65535) fatalf("batch size %d: flash attention takes at most 65535 sequences a micro-batch", B);
    if (T > c->max_seq_len) fatalf("sequence length %d exceeds the model's maximum %d", T, c->max_seq_len);
    master_weights = gpt_uses_master(master_weights);
    Shard whole = zero_shard(gpt_num_params(c), 1, 0);
    if (!opt) opt = &whole;
    gpt_check_memory(c, B, T, recompute, master_weights, opt->size, comm_bytes);
    memset(m, 0, sizeof(*m));
    m->opt = *opt;
    m->config = *c;
    m->batch_cap = B;
    m->seq_cap = T;
    m->recompute = recompute;
    m->deterministic = 1;
    m->seed = seed;
    gpt_param_sizes(c, m->param_sizes);
    m->num_params = gpt_num_params(c);
    size_t n = m->num_params;
    cudaCheck(cudaStreamCreate(&m->stream));
    blas_create(&m->blas, m->stream);
    cudaCheck(cudaMalloc(&m->params, n * sizeof(floatX)));
    cudaCheck(cudaMalloc(&m->grads, n * sizeof(floatX)));
    cudaCheck(cudaMemset(m->grads, 0, n * sizeof(floatX)));
    size_t so = opt->size;
    if (master_weights) cudaCheck(cudaMalloc(&m->master, so * sizeof(float)));
    cudaCheck(cudaMalloc(&m->adam_m, so * sizeof(float)));
    cudaCheck(cudaMalloc(&m->adam_v, so * sizeof(float)));
    cudaCheck(cudaMemset(m->adam_m, 0, so * sizeof(float)));
    cudaCheck(cudaMemset(m->adam_v, 0, so * sizeof(float)));
    point_parameters(&m->w, m->params, m->param_sizes);
    point_parameters(&m->g, m->grads, m->param_sizes);

    size_t sizes[NUM_ACTIVATIONS];
    int is_fp32[NUM_ACTIVATIONS];
    activation_sizes(c, B, T, recompute, sizes, is_fp32);
    Activations* a = &m->a;
    void** ptrs[NUM_ACTIVATIONS] = {(void**)&a->encoded,  (void**)&a->ln1,      (void**)&a->ln1_mean,  (void**)&a->ln1_rstd,
                                    (void**)&a->qkv,      (void**)&a->atty,     (void**)&a->att_lse,   (void**)&a->residual2,
                                    (void**)&a->ln2,      (void**)&a->ln2_mean, (void**)&a->ln2_rstd,  (void**)&a->fch,
                                    (void**)&a->fch_gelu, (void**)&a->residual3, (void**)&a->lnf,      (void**)&a->lnf_mean,
                                    (void**)&a->lnf_rstd, (void**)&a->proj,     (void**)&a->logits,    (void**)&a->losses};
    size_t BT = (size_t)B * T, C = c->channels;
    cudaCheck(cudaMalloc(&m->act_memory, gpt_memory_plan(c, B, T, recompute, master_weights, so, 0).activations));
    char* p = (char*)m->act_memory;
    for (int i = 0; i < NUM_ACTIVATIONS; i++) {
        *ptrs[i] = p;
        p += sizes[i] * (is_fp32[i] ? sizeof(float) : sizeof(floatX));
    }
    floatX** gptrs[5] = {&m->da.residual, &m->da.ln, &m->da.atty, &m->da.qkv, &m->da.fch};
    for (int i = 0; i < 5; i++) {
        *gptrs[i] = (floatX*)p;
        p += BT * ACTIVATION_GRAD_WIDTHS[i] * C * sizeof(floatX);
    }
    m->work_floats = gpt_work_floats(BT, C);
    cudaCheck(cudaMalloc(&m->scratch, (m->work_floats + GNORM_BLOCKS + 1) * sizeof(float)));
    cudaCheck(cudaMalloc(&m->inputs_dev, BT * sizeof(int)));
    cudaCheck(cudaMalloc(&m->targets_dev, BT * sizeof(int)));
    cudaCheck(cudaMalloc(&m->encoder_plan_dev, encoder_plan_max_ints(BT) * sizeof(int)));
    cudaCheck(cudaMallocHost(&m->inputs_host, BT * sizeof(int)));
    cudaCheck(cudaMallocHost(&m->targets_host, BT * sizeof(int)));
    cudaCheck(cudaEventCreateWithFlags(&m->tokens_copied, cudaEventDisableTiming));
    for (int i = 0; i < 2; i++) {
        cudaCheck(cudaMallocHost(&m->encoder_plan[i], encoder_plan_max_ints(BT) * sizeof(int)));
        cudaCheck(cudaEventCreateWithFlags(&m->encoder_plan_copied[i], cudaEventDisableTiming));
    }
    m->encoder_counts = (int*)malloc_check((size_t)(c->vocab_size + 1) * sizeof(int));
    cudaCheck(cudaMallocHost(&m->losses_host, BT * sizeof(float)));
    cudaCheck(cudaMallocHost(&m->norm_host, sizeof(float)));
    m->logits_host = (float*)malloc_check((size_t)c->padded_vocab_size * sizeof(float));
}

/* Gradient buckets for llmc/distributed.cuh, in the order the backward pass completes them: bucket l
 * (l = L-1 .. 0) is layer l's twelve tensors, bucket L the embeddings and the final layernorm (their
 * gradients are complete only after the encoder's backward). first: L + 2 ints; ranges: 12L + 4. */
#define GPT_LAYER_TENSORS 12 /* ln1w .. fcprojb: tensors 2..13 of the file order */
static inline void gpt_buckets(const GPT* m, int* first, ParamRange* ranges) {
    int L = m->config.num_layers, k = 0;
    size_t offsets[NUM_PARAM_TENSORS], at = 0;
    for (int i = 0; i < NUM_PARAM_TENSORS; i++) {
        offsets[i] = at;
        at += m->param_sizes[i];
    }
    for (int l = 0; l < L; l++) {
        first[l] = k;
        for (int i = 2; i < 2 + GPT_LAYER_TENSORS; i++) {
            size_t per_layer = m->param_sizes[i] / L;
            ranges[k++] = (ParamRange){offsets[i] + l * per_layer, per_layer};
        }
    }
    first[L] = k;
    static const int embedding_tensors[4] = {0, 1, 14, 15};
    for (int j = 0; j < 4; j++) ranges[k++] = (ParamRange){offsets[embedding_tensors[j]], m->param_sizes[embedding_tensors[j]]};
    first[L + 1] = k;
}

static void gpt_free(GPT* m) {
    void* device[] = {m->params, m->grads, m->master, m->adam_m, m->adam_v, m->act_memory, m->scratch, m->inputs_dev,
                      m->targets_dev, m->encoder_plan_dev};
    for (size_t i = 0; i < sizeof(device) / sizeof(device[0]); i++) cudaCheck(cudaFree(device[i]));
    cudaEvent_t events[] = {m->tokens_copied, m->encoder_plan_copied[0], m->encoder_plan_copied[1]};
    for (size_t i = 0; i < sizeof(events) / sizeof(events[0]); i++) cudaCheck(cudaEventDestroy(events[i]));
    void* pinned[] = {m->inputs_host, m->targets_host, m->encoder_plan[0], m->encoder_plan[1], m->losses_host, m->norm_host};
    for (size_t i = 0; i < sizeof(pinned) / sizeof(pinned[0]); i++) cudaCheck(cudaFreeHost(pinned[i]));
    blas_destroy(&m->blas);
    cudaCheck(cudaStreamDestroy(m->stream));
    free(m->encoder_counts);
    free(m->logits_host);
}

/* Sets the weights from fp32 host values (all num_params): the masters of m->opt (if any) and every
 * parameter rounded as AdamW's step t rounded it (t = 0 for a fresh model, the checkpoint's step on
 * resume); the rounding depends on the element's index only, so every rank gets the same bits. */
static void gpt_set_weights(GPT* m, const float* host, int t) {
    size_t n = m->num_params;
    if (m->master) { /* every parameter through the masters' buffer, a piece of its size at a time, then this rank's masters */
        for (size_t at = 0; at < n; at += m->opt.size) {
            size_t k = n - at < m->opt.size ? n - at : m->opt.size;
            cudaCheck(cudaMemcpyAsync(m->master, host + at, k * sizeof(float), cudaMemcpyHostToDevice, m->stream));
            params_from_master(m->params + at, m->master, k, at, t, m->seed, m->stream);
        }
        if (m->opt.count < n) /* a ZeRO-1 shard (else the one piece was all of them) */
            cudaCheck(cudaMemcpyAsync(m->master, host + m->opt.offset, m->opt.count * sizeof(float), cudaMemcpyHostToDevice, m->stream));
        cudaCheck(cudaStreamSynchronize(m->stream));
        return;
    }
    floatX* staged = (floatX*)malloc_check(n * sizeof(floatX));
    floats_to_floatX(staged, host, n);
    cudaCheck(cudaMemcpy(m->params, staged, n * sizeof(floatX), cudaMemcpyHostToDevice));
    free(staged);
}

/* ZeRO-1, after an update: every rank's new shard to all ranks, on the communication stream (no-op when
 * nothing is stale). A forward pass waits for each bucket's parameters when it reaches them
 * (dist_wait_params), so the gather overlaps it; the trainer queues it after the step's last collective
 * with a host wait, which would otherwise wait for the whole gather. */
static void gpt_gather_params(GPT* m) {
    if (!m->params_stale) return;
    m->params_stale = 0;
    GPU_PROFILE(m, PROF_COMM, dist_gather_params(m->dist, m->params, m->stream));
}

/* fp32 host copy of n floatX device values */
static void copy_to_host(float* host, const floatX* dev, size_t n) {
    floatX* staged = (floatX*)malloc_check(n * sizeof(floatX));
    cudaCheck(cudaMemcpy(staged, dev, n * sizeof(floatX), cudaMemcpyDeviceToHost));
    floatX_to_floats(host, staged, n);
    free(staged);
}

/* fp32 host copy of all the weights: the masters if any (gathered from every rank when they are a
 * ZeRO-1 shard; every rank must call it then), else the parameters (gathered first if stale) */
static void gpt_get_weights(GPT* m, float* host) {
    size_t n = m->num_params;
    if (m->master && m->opt.count < n) {
        dist_gather_shards(m->dist, m->master, host, m->stream);
        return;
    }
    if (m->master) {
        cudaCheck(cudaMemcpy(host, m->master, n * sizeof(float), cudaMemcpyDeviceToHost));
        return;
    }
    if (m->dist) {
        gpt_gather_params(m);
        for (int b = 0; b < m->dist->num_buckets; b++) dist_wait_params(m->dist, b, m->stream);
    }
    copy_to_host(host, m->params, n);
}

/* ----------------------------------------------------------------------------
 * Forward pass: tokens (B, T) -> final layernorm output; then the classifier. */

/* a layer's slice of a stacked activation, or the single shared layer when recomputation dropped the stack */
static floatX* layer_slice(floatX* base, int l, size_t layer_elems, int stacked) { return base + (stacked ? l * layer_elems : 0); }

static void check_batch(const GPT* m, const int* tokens, const char* what, int B, int T) {
    if (T > m->config.max_seq_len) fatalf("sequence length %d exceeds the model's maximum %d", T, m->config.max_seq_len);
    if ((size_t)B * T > (size_t)m->batch_cap * m->seq_cap || T > m->seq_cap)
        fatalf("batch %dx%d exceeds the allocated %dx%d", B, T, m->batch_cap, m->seq_cap);
    for (int i = 0; i < B * T; i++)
        if (tokens[i] < 0 || tokens[i] >= m->config.vocab_size)
            fatalf("%s token %d at position %d is outside the vocabulary [0, %d)", what, tokens[i], i, m->config.vocab_size);
}

/* Stages the batch in the pinned buffers and queues their copies to the device: the inputs, and the
 * targets unless NULL (sampling). The host first waits for the previous batch's copies to have read them. */
static void gpt_upload_batch(GPT* m, const int* inputs, const int* targets, int B, int T) {
    size_t bytes = (size_t)B * T * sizeof(int);
    if (targets) check_batch(m, targets, "target", B, T);
    check_batch(m, inputs, "input", B, T);
    cudaCheck(cudaEventSynchronize(m->tokens_copied));
    memcpy(m->inputs_host, inputs, bytes);
    cudaCheck(cudaMemcpyAsync(m->inputs_dev, m->inputs_host, bytes, cudaMemcpyHostToDevice, m->stream));
    if (targets) {
        memcpy(m->targets_host, targets, bytes);
        cudaCheck(cudaMemcpyAsync(m->targets_dev, m->targets_host, bytes, cudaMemcpyHostToDevice, m->stream));
    }
    cudaCheck(cudaEventRecord(m->tokens_copied, m->stream));
}

/* The forward pass up to lnf, after copying the batch (gpt_upload_batch; targets may be NULL) */
static void gpt_forward_body(GPT* m, const int* inputs, const int* targets, int B, int T) {
    gpt_upload_batch(m, inputs, targets, B, T);
    const GPTConfig* c = &m->config;
    int L = c->num_layers, C = c->channels, NH = c->num_heads, BT = B * T;
    size_t lc = (size_t)BT * C;
    int ln_stacked = m->recompute < 2, gelu_stacked = m->recompute < 1;
    ParameterTensors* w = &m->w;
    Activations* a = &m->a;
    cudaStream_t s = m->stream;

    /* ZeRO-1: a bucket's parameters are used once gathered: the embeddings' and lnf's (bucket L) and layer
     * 0's here, layer l + 1's before the layernorm fused into the end of layer l reads its ln1 */
    if (m->dist) {
        dist_wait_params(m->dist, L, s);
        dist_wait_params(m->dist, 0, s);
    }
    GPU_PROFILE(m, PROF_ENCODER_FWD, encoder_forward(a->encoded, m->inputs_dev, w->wte, w->wpe, B, T, C, s));
    GPU_PROFILE(m, PROF_LAYERNORM_FWD,
                residual_layernorm_forward(NULL, a->ln1, a->ln1_mean, a->ln1_rstd, a->encoded, NULL, w->ln1w, w->ln1b, BT, C, s));
    char range[48];
    for (int l = 0; l < L; l++) {
        snprintf(range, sizeof(range), "layer %d forward", l);
        nvtxRangePushA(range);
        const floatX* residual = l == 0 ? a->encoded : a->residual3 + (l - 1) * lc;
        floatX* ln1 = layer_slice(a->ln1, l, lc, ln_stacked);
        floatX* ln2 = layer_slice(a->ln2, l, lc, ln_stacked);
        floatX* fch_gelu = layer_slice(a->fch_gelu, l, 4 * lc, gelu_stacked);
        floatX *qkv = a->qkv + 3 * l * lc, *atty = a->atty + l * lc, *residual2 = a->residual2 + l * lc, *fch = a->fch + 4 * l * lc;
        GPU_PROFILE(m, PROF_MATMUL_QKV_FWD,
                    matmul_forward(&m->blas, qkv, NULL, ln1, w->qkvw + (size_t)l * 3 * C * C, w->qkvb + l * 3 * C, BT, C, 3 * C));
        GPU_PROFILE(m, PROF_ATTENTION_FWD, flash_attention_forward(atty, a->att_lse + (size_t)l * NH * BT, qkv, B, T, C, NH, s));
        GPU_PROFILE(m, PROF_MATMUL_ATTPROJ_FWD,
                    matmul_forward(&m->blas, a->proj, NULL, atty, w->attprojw + (size_t)l * C * C, w->attprojb + l * C, BT, C, C));
        GPU_PROFILE(m, PROF_LAYERNORM_FWD,
                    residual_layernorm_forward(residual2, ln2, a->ln2_mean + l * BT, a->ln2_rstd + l * BT, residual, a->proj,
                                               w->ln2w + l * C, w->ln2b + l * C, BT, C, s));
        /* the GELU is fused into the fc matmul's epilogue: its time is the matmul's */
        GPU_PROFILE(m, PROF_MATMUL_FC_FWD,
                    matmul_forward(&m->blas, fch_gelu, fch, ln2, w->fcw + (size_t)l * 4 * C * C, w->fcb + l * 4 * C, BT, C, 4 * C));
        GPU_PROFILE(m, PROF_MATMUL_FCPROJ_FWD,
                    matmul_forward(&m->blas, a->proj, NULL, fch_gelu, w->fcprojw + (size_t)l * 4 * C * C, w->fcprojb + l * C, BT,
                                   4 * C, C));
        /* residual3 = residual2 + fcproj, fused with the next layernorm: the next layer's ln1, or lnf */
        if (m->dist && l + 1 < L) dist_wait_params(m->dist, l + 1, s);
        gpu_profile_begin(m, PROF_LAYERNORM_FWD);
        if (l + 1 < L)
            residual_layernorm_forward(a->residual3 + l * lc, layer_slice(a->ln1, l + 1, lc, ln_stacked), a->ln1_mean + (l + 1) * BT,
                                       a->ln1_rstd + (l + 1) * BT, residual2, a->proj, w->ln1w + (l + 1) * C, w->ln1b + (l + 1) * C,
                                       BT, C, s);
        else
            residual_layernorm_forward(a->residual3 + l * lc, a->lnf, a->lnf_mean, a->lnf_rstd, residual2, a->proj, w->lnfw, w->lnfb,
                                       BT, C, s);
        gpu_profile_end(m);
        nvtxRangePop();
    }
}

/* Full forward: logits (B, T, Vp) and the per-token losses; returns the mean loss. With grad_scale != 0
 * (training) the classifier also writes d(grad_scale · mean loss)/d(logits) over the logits, for
 * gpt_backward; with grad_scale == 0 the logits stay. */
static float gpt_forward(GPT* m, const int* inputs, const int* targets, int B, int T, float grad_scale) {
    const GPTConfig* c = &m->config;
    int BT = B * T;
    gpt_forward_body(m, inputs, targets, B, T);
    nvtxRangePushA("classifier forward");
    gpu_profile_begin(m, PROF_CLASSIFIER_FWD); /* the logits matmul, the softmax, the loss and its gradient */
    matmul_forward(&m->blas, m->a.logits, NULL, m->a.lnf, m->w.wte, NULL, BT, c->channels, c->padded_vocab_size);
    fused_classifier(m->a.logits, m->a.losses, m->targets_dev, grad_scale / BT, BT, c->vocab_size, c->padded_vocab_size, m->stream);
    cudaCheck(cudaMemcpyAsync(m->losses_host, m->a.losses, (size_t)BT * sizeof(float), cudaMemcpyDeviceToHost, m->stream));
    gpu_profile_end(m);
    nvtxRangePop();
    cudaCheck(cudaStreamSynchronize(m->stream));
    double sum = 0.0;
    for (int i = 0; i < BT; i++) sum += m->losses_host[i];
    return (float)(sum / BT);
}

/* Logits of the last position only (for sampling): (Vp) fp32 on the host. */
static inline const float* gpt_forward_last(GPT* m, const int* inputs, int T) {
    const GPTConfig* c = &m->config;
    gpt_forward_body(m, inputs, NULL, 1, T);
    matmul_forward(&m->blas, m->a.logits, NULL, m->a.lnf + (size_t)(T - 1) * c->channels, m->w.wte, NULL, 1, c->channels,
                   c->padded_vocab_size);
    copy_to_host(m->logits_host, m->a.logits, (size_t)c->padded_vocab_size);
    return m->logits_host;
}

static void gpt_zero_grad(GPT* m) { cudaCheck(cudaMemsetAsync(m->grads, 0, m->num_params * sizeof(floatX), m->stream)); }

/* Hands bucket b's complete gradients to the communication stream (llmc/distributed.cuh), when there is
 * communication. The profile's "communication" is its time on the compute stream: this hand-off (the
 * whole reduction in the simulator, whose collectives are synchronous) and, in gpt_grad_norm, the wait
 * for what did not overlap the backward pass. */
static void gpt_reduce_bucket(GPT* m, int b) {
    if (!m->dist || !m->dist->communicate) return;
    nvtxRangePushA("gradient communication");
    GPU_PROFILE(m, PROF_COMM, dist_reduce_bucket(m->dist, b, m->grads, m->stream));
    nvtxRangePop();
}

/* The backward of a layer's input side, x -> layernorm -> matmul: the attention's ln1 -> qkv (mlp = 0,
 * x the layer's input) or the MLP's ln2 -> fc (mlp = 1, x = residual2). From dout, the matmul output's
 * gradient: recomputes the layernorm output first when -r 2 dropped it (counted as forward), then
 * d->ln = dout·W with the matmul's weight and bias gradients, then the layernorm's backward, which adds
 * its input gradient into d->residual and its weight and bias gradients into m->g, and sums the new d->residual
 * into the bias gradient of the matmul whose output the residual stream adds just below: the attention
 * projection's (mlp = 1) or the layer below's MLP projection (mlp = 0, l > 0). */
static void layernorm_matmul_backward(GPT* m, int l, int mlp, const floatX* x, const floatX* dout, int B, int T) {
    int C = m->config.channels, BT = B * T, OC = mlp ? 4 * C : 3 * C;
    size_t lc = (size_t)BT * C;
    const ParameterTensors* w = &m->w;
    ParameterTensors* g = &m->g;
    Activations* a = &m->a;
    ActivationGrads* d = &m->da;
    floatX* ln = layer_slice(mlp ? a->ln2 : a->ln1, l, lc, m->recompute < 2);
    float* mean = (mlp ? a->ln2_mean : a->ln1_mean) + l * BT;
    float* rstd = (mlp ? a->ln2_rstd : a->ln1_rstd) + l * BT;
    const floatX* lnw = (mlp ? w->ln2w : w->ln1w) + l * C;
    const floatX* lnb = (mlp ? w->ln2b : w->ln1b) + l * C;
    size_t W_at = (size_t)l * OC * C, b_at = (size_t)l * OC;
    if (m->recompute >= 2)
        GPU_PROFILE(m, PROF_LAYERNORM_FWD, residual_layernorm_forward(NULL, ln, mean, rstd, x, NULL, lnw, lnb, BT, C, m->stream));
    GPU_PROFILE(m, mlp ? PROF_MATMUL_FC_BWD : PROF_MATMUL_QKV_BWD,
                matmul_backward(&m->blas, d->ln, (mlp ? g->fcw : g->qkvw) + W_at, (mlp ? g->fcb : g->qkvb) + b_at, m->scratch, dout, ln,
                                (mlp ? w->fcw : w->qkvw) + W_at, NULL, BT, C, OC));
    floatX* dres_bias = mlp ? g->attprojb + l * C : l > 0 ? g->fcprojb + (l - 1) * C : NULL;
    GPU_PROFILE(m, PROF_LAYERNORM_BWD,
                layernorm_backward(d->residual, (mlp ? g->ln2w : g->ln1w) + l * C, (mlp ? g->ln2b : g->ln1b) + l * C, dres_bias, m->scratch,
                                   d->ln, x, lnw, mean, rstd, BT, C, m->stream));
}

/* ----------------------------------------------------------------------------
 * Backward pass: accumulates d(grad_scale * mean loss)/d(params) into m->grads. Must follow
 * gpt_forward(..., grad_scale) with grad_scale != 0 on the same batch (the logits hold their gradient).
 * With reduce (the last micro-step of a multi-GPU step), each layer's gradients are handed to the
 * communication stream as soon as they are complete (gpt_buckets), overlapping the layers below. */
static void gpt_backward(GPT* m, const int* inputs, int B, int T, int reduce) {
    const GPTConfig* c = &m->config;
    int L = c->num_layers, C = c->channels, NH = c->num_heads, Vp = c->padded_vocab_size, BT = B * T;
    size_t lc = (size_t)BT * C;
    int gelu_stacked = m->recompute < 1;
    ParameterTensors* w = &m->w;
    ParameterTensors* g = &m->g;
    Activations* a = &m->a;
    ActivationGrads* d = &m->da;
    cudaStream_t s = m->stream;
    float* colsum = m->scratch;

    nvtxRangePushA("classifier backward");
    GPU_PROFILE(m, PROF_CLASSIFIER_BWD, matmul_backward(&m->blas, d->ln, g->wte, NULL, colsum, a->logits, a->lnf, w->wte, NULL, BT, C, Vp));
    nvtxRangePop();
    gpu_profile_begin(m, PROF_LAYERNORM_BWD);
    cudaCheck(cudaMemsetAsync(d->residual, 0, lc * sizeof(floatX), s));
    layernorm_backward(d->residual, g->lnfw, g->lnfb, g->fcprojb + (L - 1) * C, colsum, d->ln, a->residual3 + (L - 1) * lc, w->lnfw,
                       a->lnf_mean, a->lnf_rstd, BT, C, s);
    gpu_profile_end(m);
    char range[48];

    for (int l = L - 1; l >= 0; l--) {
        const floatX* residual = l == 0 ? a->encoded : a->residual3 + (l - 1) * lc;
        floatX* fch_gelu = layer_slice(a->fch_gelu, l, 4 * lc, gelu_stacked);
        floatX *qkv = a->qkv + 3 * l * lc, *atty = a->atty + l * lc, *residual2 = a->residual2 + l * lc, *fch = a->fch + 4 * l * lc;
        snprintf(range, sizeof(range), "layer %d backward", l);
        nvtxRangePushA(range);
        /* MLP: residual3 = residual2 + fcproj(gelu(fc(ln2(residual2)))); d->residual flows through unchanged; the GELU's
         * backward is fused into the fc proj matmul's backward (its time is that matmul's), recomputations count as forward.
         * The two projections' bias gradients are sums of d->residual, taken by the layernorm backward that writes it. */
        if (!gelu_stacked) GPU_PROFILE(m, PROF_GELU_FWD, gelu_forward(fch_gelu, fch, 4 * lc, s));
        GPU_PROFILE(m, PROF_MATMUL_FCPROJ_BWD,
                    matmul_backward(&m->blas, d->fch, g->fcprojw + (size_t)l * 4 * C * C, NULL, colsum, d->residual,
                                    fch_gelu, w->fcprojw + (size_t)l * 4 * C * C, fch, BT, 4 * C, C));
        layernorm_matmul_backward(m, l, 1, residual2, d->fch, B, T);
        /* attention: residual2 = residual + attproj(attention(qkv(ln1(residual)))) */
        GPU_PROFILE(m, PROF_MATMUL_ATTPROJ_BWD,
                    matmul_backward(&m->blas, d->atty, g->attprojw + (size_t)l * C * C, NULL, colsum, d->residual,
                                    atty, w->attprojw + (size_t)l * C * C, NULL, BT, C, C));
        GPU_PROFILE(m, PROF_ATTENTION_BWD,
                    flash_attention_backward(d->qkv, (float*)d->fch, d->atty, atty, qkv, a->att_lse + (size_t)l * NH * BT, B, T, C,
                                             NH, m->deterministic, s));
        layernorm_matmul_backward(m, l, 0, residual, d->qkv, B, T);
        nvtxRangePop();
        if (reduce) gpt_reduce_bucket(m, l);
    }
    /* the host's grouping by token, built while the device runs the layers' backward, into the pinned
     * plan buffer the backward before last filled (once its copy has run: the event recorded after it);
     * its copy; the kernels */
    gpu_profile_begin(m, PROF_ENCODER_BWD);
    int k = m->encoder_plan_next;
    m->encoder_plan_next = 1 - k;
    cudaCheck(cudaEventSynchronize(m->encoder_plan_copied[k]));
    EncoderPlan plan = encoder_plan(m->encoder_plan[k], m->encoder_counts, inputs, BT, m->config.vocab_size);
    cudaCheck(cudaMemcpyAsync(m->encoder_plan_dev, m->encoder_plan[k], (size_t)plan.ints * sizeof(int), cudaMemcpyHostToDevice, s));
    cudaCheck(cudaEventRecord(m->encoder_plan_copied[k], s));
    encoder_backward(g->wte, g->wpe, m->scratch, d->residual, m->encoder_plan_dev, plan, B, T, C, s);
    gpu_profile_end(m);
    if (reduce) gpt_reduce_bucket(m, L);
}

/* ----------------------------------------------------------------------------
 * AdamW update with global-norm clipping, on the parameters the optimizer state covers (m->opt: all,
 * or this rank's ZeRO-1 shard, whose new values gpt_gather_params then sends to every rank). With several
 * GPUs the norm first waits for the gradient reduction, and is the sum over ranks of each rank's shard's
 * Σ g² (llmc/distributed.cuh). gpt_grad_norm, then gpt_update_with_norm (the trainer's health guard sits
 * between them), then gpt_gather_params (the trainer queues it after the step's collectives with a host
 * wait, see gpt_gather_params); test_gpt.cu's gpt_update does all three.
 * t is the 1-based step count (bias correction and the stochastic-rounding seed). G: the gradient type
 * (fp32 after an fp32 reduction). */
template <typename G>
static float gpt_grad_norm_from(GPT* m, const G* grads) {
    float* norm_scratch = m->scratch + m->work_floats;
    Shard norm_range = m->dist ? m->dist->shard : m->opt;
    global_norm_squared_launch(grads + norm_range.offset, norm_range.count, norm_scratch, m->stream);
    float norm_squared;
    if (m->dist) norm_squared = dist_sum_device_float(m->dist, norm_scratch + GNORM_BLOCKS, m->stream);
    else {
        cudaCheck(cudaMemcpyAsync(m->norm_host, norm_scratch + GNORM_BLOCKS, sizeof(float), cudaMemcpyDeviceToHost, m->stream));
        cudaCheck(cudaStreamSynchronize(m->stream));
        norm_squared = *m->norm_host;
    }
    return sqrtf(norm_squared);
}

template <typename G>
static void gpt_update_from(GPT* m, const G* grads, const OptimizerConfig* oc, float lr, int t, float norm) {
    float scale = 1.0f;
    if (oc->grad_clip > 0.0f && norm > oc->grad_clip) scale = oc->grad_clip / (norm + 1e-6f);
    size_t offset = 0, opt_end = m->opt.offset + m->opt.count;
    for (int i = 0; i < NUM_PARAM_TENSORS; i++) { /* each tensor's part inside the optimizer's range */
        size_t lo = offset > m->opt.offset ? offset : m->opt.offset;
        size_t hi = offset + m->param_sizes[i] < opt_end ? offset + m->param_sizes[i] : opt_end;
        float wd = gpt_param_decays(i) ? oc->weight_decay : 0.0f;
        size_t at = lo - m->opt.offset; /* index into the optimizer's arrays */
        if (lo < hi)
            adamw_update(m->params + lo, m->master ? m->master + at : NULL, grads + lo, m->adam_m + at, m->adam_v + at, hi - lo, lo, lr,
                         oc->beta1, oc->beta2, oc->eps, wd, scale, t, m->seed, m->stream);
        offset += m->param_sizes[i];
    }
}

/* the gradients' global L2 norm (every rank gets the same value) */
static float gpt_grad_norm(GPT* m) {
    if (m->dist && m->dist->communicate) {
        nvtxRangePushA("gradient communication");
        GPU_PROFILE(m, PROF_COMM, dist_wait_grads(m->dist, m->stream));
        nvtxRangePop();
    }
    float norm;
    GPU_PROFILE(m, PROF_GRAD_NORM,
                norm = m->dist && m->dist->staged ? gpt_grad_norm_from(m, (const float*)m->dist->grads32)
                                                   : gpt_grad_norm_from(m, (const floatX*)m->grads));
    return norm;
}

static void gpt_update_with_norm(GPT* m, const OptimizerConfig* oc, float lr, int t, float norm) {
    nvtxRangePushA("optimizer update");
    gpu_profile_begin(m, PROF_ADAMW);
    if (m->dist && m->dist->staged) gpt_update_from(m, (const float*)m->dist->grads32, oc, lr, t, norm);
    else gpt_update_from(m, (const floatX*)m->grads, oc, lr, t, norm);
    gpu_profile_end(m);
    nvtxRangePop();
    m->params_stale = m->dist && m->dist->communicate && m->dist->zero;
}



#ifndef TESTING
#include "llmc/early_stop.h"
#include "llmc/flags.h"
#include "llmc/health.h"
#include "llmc/logger.h"
#include "llmc/sampler.h"
#include "llmc/signals.h"
#include "llmc/generate.h"
#include "llmc/train_setup.h"
#include "llmc/train_loop.h"

/* Dense bf16 tensor-core peak of the device in FLOP/s, by name (0 when unknown: MFU is then not shown). */
static double device_bf16_peak(const char* name) {
    static const struct {
        const char* name_part;
        double tflops;
    } table[] = {{"H200 NVL", 835.0}, {"H200", 989.0}, {"H100 PCIe", 756.0}, {"H100 NVL", 835.0}, {"H100", 989.0}, {"GH200", 989.0},
                 {"A100", 312.0}, {"A10G", 70.0},       {"L40S", 362.0},     {"L4", 121.0},   {"cudasim H100", 989.0}};
    for (size_t i = 0; i < sizeof(table) / sizeof(table[0]); i++)
        if (strstr(name, table[i].name_part)) return table[i].tflops * 1e12;
    return 0.0;
}

/* sampling callback (llmc/generate.h): logits of the next position, copied to the host */
static const float* next_logits_gpu(void* model, const int* tokens, int n) { return gpt_forward_last((GPT*)model, tokens, n); }

/* Whether `flag` is set on any rank: the all-reduced sum of 0/1 (exact in fp32); also a barrier. Every
 * decision that ends or changes the run (a stop signal, a failed write) goes through it, so all ranks
 * take the same branch and issue the same collectives. */
static int dist_any(GPT* m, int flag) { return dist_mean(m->dist, flag ? 1.0f : 0.0f, m->stream) > 0.0f; }

/* The mean loss over the first `batches` batches of the validation loader (every rank its slice of each;
 * the mean over ranks), into *loss; returns 0; a heartbeat of pg's watchdog after each batch and check. The
 * ranks agree before each batch but the first (one collective a batch keeps them in step: apart, they could
 * drift apart by up to the whole validation, and the first one done would wait in the loss's all-reduce past
 * --dist-timeout). With `stoppable`, a stop signal on any rank before a batch leaves it unfinished: returns 1
 * (a resumed run computes it). A rank whose validation shard cannot be read (*data_error = val->error) goes
 * on with a batch of token 0 and flags it in the next batch's check or the loss's all-reduce: it is left
 * unfinished on every rank, returns 1. */
static int evaluate(GPT* m, DataLoader* val, int batches, ProcessGroup* pg, int stoppable, float* loss, const char** data_error) {
    dataloader_reset(val);
    double sum = 0.0;
    int failed = 0;
    for (int i = 0; i < batches; i++) {
        if (i > 0) {
            int stop = dist_any(m, (stoppable && preempt_requested()) || failed);
            process_group_heartbeat(pg); /* the peers got here too */
            if (stop) return 1;
        }
        if (!failed && dataloader_try_next_slot(val, val->rank, 1) != 0) {
            failed = 1;
            *data_error = val->error;
        }
        sum += gpt_forward(m, val->inputs, val->targets, val->B, val->T, 0.0f);
        process_group_heartbeat(pg);
    }
    int any_failed;
    *loss = dist_mean_any(m->dist, (float)(sum / batches), failed, &any_failed, m->stream);
    return any_failed;
}

/* Every rank's check at once: a rank whose `problem` is non-empty exits with it; the others, if any rank
 * has one, exit too, saying so (instead of waiting in the next collective until --dist-timeout). A
 * single process just exits with it. */
static void dist_fail_together(GPT* m, const char* problem, int rank) {
    if (m->dist->world == 1 && problem[0]) fatalf("%s", problem);
    if (!dist_any(m, problem[0] != '\0')) return;
    if (problem[0]) fprintf(stderr, "error: rank %d: %s\n", rank, problem);
    else fprintf(stderr, "error: rank %d: stopping: another rank's check failed (its error says why)\n", rank);
    (void)fflush(stderr); /* unbuffered already; a failure of stderr has nowhere to be told */
    dist_any(m, 0); /* a barrier: every message is out before a rank exits (and mpirun stops the rest) */
    fatal_exit(1);
}

/* Every rank must run with rank 0's flags: one given others would train another model, or wait in a
 * collective the others never make (a wrapper script, a per-node command line). Rank 0's flag values,
 * broadcast, against this rank's; the first that differs is named. */
static void check_same_flags(GPT* m, const TrainArgs* args, int rank) {
    char* mine = (char*)malloc_check(FLAGS_TEXT_CAP);
    flags_text(mine, FLAGS_TEXT_CAP, args);
    uint64_t len = strlen(mine) + 1;
    dist_broadcast_bytes(m->dist, &len, sizeof(len), m->stream);
    char* theirs = (char*)malloc_check(len);
    if (rank == 0) memcpy(theirs, mine, len);
    dist_broadcast_bytes(m->dist, theirs, len, m->stream);
    char problem[9000] = "";
    for (const char *a = mine, *b = theirs; *a || *b;) {
        size_t la = strcspn(a, "\n"), lb = strcspn(b, "\n");
        if (la != lb || strncmp(a, b, la) != 0) {
            snprintf(problem, sizeof(problem), "this rank has %.*s but rank 0 has %.*s: every rank must be given the same flags",
                     (int)la, a, (int)lb, b);
            break;
        }
        a += la + (a[la] != '\0');
        b += lb + (b[lb] != '\0');
    }
    free(mine);
    free(theirs);
    dist_fail_together(m, problem, rank);
}

/* Every rank must read the same shards: node-local copies that differ would make the ranks train on
 * unrelated windows, or count different epoch lengths and hang. Rank 0's loaders' fingerprints
 * (llmc/dataloader.h) and token counts are broadcast; a rank that differs names it, then all stop together. */
static void check_same_data(GPT* m, const DataLoader* train, const DataLoader* val, int have_val, int rank) {
    uint64_t mine[4] = {train->fingerprint, train->num_tokens, have_val ? val->fingerprint : 0, have_val ? val->num_tokens : 0}, theirs[4];
    memcpy(theirs, mine, sizeof(mine));
    dist_broadcast_bytes(m->dist, theirs, sizeof(theirs), m->stream);
    char problem[512] = "";
    for (int i = 0; i < 2 && !problem[0]; i++)
        if (mine[2 * i] != theirs[2 * i] || mine[2 * i + 1] != theirs[2 * i + 1])
            snprintf(problem, sizeof(problem),
                     "this rank's %s data (%llu tokens, fingerprint %08llx) differs from rank 0's (%llu tokens, %08llx): every rank must "
                     "read the same shards (one shared disk, or identical copies)",
                     i ? "validation" : "training", (unsigned long long)mine[2 * i + 1], (unsigned long long)mine[2 * i],
                     (unsigned long long)theirs[2 * i + 1], (unsigned long long)theirs[2 * i]);
    dist_fail_together(m, problem, rank);
}

/* Checkpoint st->step into dir (llmc/checkpoint.h, doc/reliability.md): rank 0 removes a stale marker
 * and writes the model file (fp32 weights, gathered when sharded), every rank the optimizer state of
 * its shard's range (llmc/zero.h; with ZeRO 0 a slice of its full copy), each file verified before
 * its rename; once all ranks' files are written (an all-reduce of the failure flags, also the
 * barrier), rank 0 writes the done marker with the world size and applies retention. Returns 0 on
 * every rank, or −1 on every rank after the failing rank printed why (the files written are deleted,
 * earlier checkpoints untouched). */
static int save_checkpoint(GPT* m, const char* dir, const TrainState* st, int keep_last, int keep_every) {
    Distributed* d = m->dist;
    char model_path[4200], state_path[4200], done_path[4200], err[4600];
    checkpoint_paths(model_path, state_path, done_path, sizeof(model_path), dir, st->step, d->rank);
    size_t n = m->num_params, count = d->shard.count, at = d->shard.offset - m->opt.offset;
    float* host = (float*)malloc_check((n + 2 * count + 1) * sizeof(float));
    gpt_get_weights(m, host);
    cudaCheck(cudaMemcpy(host + n, m->adam_m + at, count * sizeof(float), cudaMemcpyDeviceToHost));
    cudaCheck(cudaMemcpy(host + n + count, m->adam_v + at, count * sizeof(float), cudaMemcpyDeviceToHost));
    TrainState mine = *st;
    mine.rank = d->rank;
    mine.world = d->world;
    mine.shard_offset = d->shard.offset;
    mine.shard_count = count;
    int failed = 0, begun = 1; /* begun: rank 0's checkpoint_begin removed the step's marker */
    mine.has_model_crc = 1; /* every rank's state file records the model file's header CRC (checkpoint_verify) */
    if (d->rank == 0) {
        begun = checkpoint_begin(dir, st->step, err, sizeof(err)) == 0;
        failed = !begun || model_file_try_write(model_path, &m->config, host, &mine.model_crc, err, sizeof(err)) != 0;
    } else mine.model_crc = model_file_crc(&m->config, host); /* every rank holds the same weights */
    failed = failed || state_file_try_write(state_path, &mine, host + n, host + n + count, NULL, err, sizeof(err)) != 0;
    free(host);
    if (failed) fprintf(stderr, "error: rank %d: checkpoint of step %d not written: %s\n", d->rank, st->step, err);
    int agreed_failed = dist_any(m, failed); /* every rank's files are written, or none is marked */
    if (!agreed_failed && d->rank == 0 && checkpoint_try_mark_done(dir, st->step, d->world, err, sizeof(err)) != 0) {
        fprintf(stderr, "error: checkpoint of step %d not written: %s\n", st->step, err);
        failed = 1;
    }
    if (agreed_failed || dist_any(m, failed)) { /* the files written are deleted (llmc/checkpoint.h) */
        if (begun) checkpoint_abandon(dir, st->step, d->rank, st->step == st->schedule.total);
        return -1;
    }
    printf("checkpoint: step %d written to %s\n", st->step, dir);
    if (d->rank == 0) checkpoint_retain(dir, st->step, keep_last, keep_every, stdout);
    return 0;
}

/* The index of the first non-finite parameter, or num_params if all are finite: Σ p² over this rank's
 * shard (ZeRO 1: the part it updated), summed over ranks (profiled as "health"; before the gather, which
 * the sum's host wait would otherwise wait for); only when that is not finite (a non-finite value, or an
 * overflow of the sum) are the shards gathered and a host copy searched for the element. Every rank must
 * call it. */
static size_t gpt_first_nonfinite_param(GPT* m) {
    Shard range = m->dist->shard;
    float* scratch = m->scratch + m->work_floats;
    float sum;
    GPU_PROFILE(m, PROF_HEALTH, global_norm_squared_launch(m->params + range.offset, range.count, scratch, m->stream);
                sum = dist_sum_device_float(m->dist, scratch + GNORM_BLOCKS, m->stream));
    if (isfinite(sum)) return m->num_params;
    float* host = (float*)malloc_check(m->num_params * sizeof(float));
    gpt_gather_params(m);
    for (int b = 0; b < m->dist->num_buckets; b++) dist_wait_params(m->dist, b, m->stream);
    copy_to_host(host, m->params, m->num_params);
    size_t bad = health_first_nonfinite(host, m->num_params);
    free(host);
    return bad;
}

int main(int argc, char** argv) {
    std_fds_open();
    TrainArgs args;
    flags_parse(&args, argc, argv, "train_gpt");
    flags_reject(&args, "threads", "--threads sets the CPU trainer's OpenMP threads; the GPU trainer's host side does not use them");
#if defined(PRECISION_FP32)
    flags_reject(&args, "master-weights", "the fp32 build's parameters are the fp32 weights (no separate master copy)");
#endif
    int save_error_continue = train_check_run_flags(&args);
    HealthConfig health_config = {args.max_bad_steps, args.spike_zscore, args.spike_window};
    HealthState health;
    memset(&health, 0, sizeof(health));
    preempt_install();
    /* one process per GPU (llmc/process_group.h); ranks above 0 print nothing on stdout */
    ProcessGroup pg;
    process_group_find(&pg, args.dist_init, args.dist_file, args.dist_timeout);
    int device_count = cuda_device_count("train_gpt_cpu");
    /* GPU = local rank; a process that sees one GPU (srun --gpus-per-task, the simulator) uses that one; chosen
     * before MPI starts (a CUDA-aware MPI would otherwise make its context on GPU 0 in every rank) */
    int device = device_count == 1 ? 0 : pg.local_rank;
    if (device >= device_count)
        fatalf("rank %d: local rank %d but this node shows %d GPU(s): start at most one process per GPU", pg.rank, device, device_count);
    cudaCheck(cudaSetDevice(device));
    process_group_start_mpi(&pg, &argc, &argv);
    int rank = pg.rank, world = pg.world;
    if (rank > 0 && !freopen("/dev/null", "w", stdout)) sys_fatalf("rank %d: cannot silence stdout: %s", rank, strerror(errno));
    cudaDeviceProp prop;
    cudaCheck(cudaGetDeviceProperties(&prop, device));

    /* model: the config and fp32 initial weights on the host, checked against the flags before any kernel runs */
    GPTConfig config;
    float* init = NULL;
    if (train_model_source(&args, &config) == MODEL_FROM_FILE) {
        size_t n;
        init = model_file_read(args.init, &config, &n);
        train_check_file_config(&args, &config);
    }
    gpt_config_check(&config, args.init[0] ? args.init : "model flags");
    int B = args.batch_size, T = args.seq_len;
    train_check_batch_shape(&args, &config);

    /* ZeRO-1: this rank's optimizer state covers its shard only */
    Shard opt_shard = zero_shard(gpt_num_params(&config), args.zero == 1 ? world : 1, args.zero == 1 ? rank : 0);
    /* communication: fp32 gradients (--grad-comm fp32), a communicator even for one rank (--dist-init given) */
    int comm_fp32 = strcmp(args.grad_comm, "fp32") == 0, comm_force = strcmp(args.dist_init, "auto") != 0;
    size_t comm_bytes = dist_memory_bytes(world, comm_fp32, comm_force, args.zero == 1 && gpt_uses_master(args.master_weights),
                                          gpt_num_params(&config));
    gpt_check_memory(&config, B, T, args.recompute, gpt_uses_master(args.master_weights), opt_shard.size, comm_bytes); /* fail fast */

    /* the global batch: micro-batch x sequence length x ranks x micro-steps = --total-batch tokens */
    int accum = train_micro_steps(args.total_batch, B, T, world);
    long long total_batch = (long long)accum * B * T * world;

    /* data: a global batch of the training loader is one optimizer step; micro-step j of rank r reads
     * its slot j x world + r, so the data order does not depend on how the step is split over ranks */
    DataLoader train, val;
    int have_val = train_open_data(&args, B, T, config.vocab_size, rank, world, accum, &train, &val);
    int val_batches = have_val && args.val_every > 0 ? train_val_batches(&args, &val) : 0;
    int max_steps = train_max_steps(&args, &train);

    /* the model on the device: the memory check comes first */
    GPT model;
    gpt_create(&model, &config, B, T, args.recompute, args.master_weights, args.seed, &opt_shard, comm_bytes);
    model.deterministic = args.deterministic;
    model.blas.gelu_fusion = args.gelu_fusion;
    const GPTConfig* c = &model.config;
    /* communication (llmc/distributed.cuh): a communicator for several ranks, or for one with --dist-init given */
    Distributed dist;
    {
        int L = c->num_layers;
        int* first = (int*)malloc_check((size_t)(L + 2) * sizeof(int));
        ParamRange* ranges = (ParamRange*)malloc_check((size_t)(GPT_LAYER_TENSORS * L + 4) * sizeof(ParamRange));
        gpt_buckets(&model, first, ranges);
        dist_create(&dist, &pg, args.zero, comm_fp32, comm_force, model.num_params,
                    L + 1, first, ranges);
        free(first);
        free(ranges);
    }
    model.dist = &dist;
    /* the setup's collectives (flag, data and directory checks, the resume) are watched too, with 10x
     * --dist-timeout from each completed collective: its local work (the initial weights, rank 0's
     * verification of a checkpoint) is of no known length */
    if (world > 1) {
        process_group_watchdog_start(&pg, "the setup (checks across ranks, the resume)", 1);
        process_group_watchdog_hold(&pg);
    }
    check_same_flags(&model, &args, rank);
    check_same_data(&model, &train, &val, have_val, rank);
    if (!init) {
        init = (float*)malloc_check(model.num_params * sizeof(float));
        gpt_init_weights(init, c, args.seed);
    }

    char lr_line[256]; /* --lr-scale: with the global batch, relative to the batch --lr was tuned for */
    Schedule sched = train_schedule(&args, train_scaled_lr(&args, total_batch, B, T, lr_line, sizeof(lr_line)), max_steps);
    OptimizerConfig oc = {args.beta1, args.beta2, args.eps, args.weight_decay, args.grad_clip};
    TrainState run = train_run_state(&args, model.num_params, &sched, T, total_batch, &train, have_val, &val, val_batches,
                                     (int)sizeof(floatX));
    if (args.output_dir[0]) { /* rank 0 holds the directory's lock; the others must see it */
        char token[512] = "", why[4600] = "";
        if (rank == 0) train_lock_output_dir(args.output_dir, token, sizeof(token));
        train_note_no_checkpoints(&args);
        dist_broadcast_bytes(&dist, token, sizeof(token), model.stream);
        dist_fail_together(&model, rank > 0 ? train_check_shared_dir(args.output_dir, token, why, sizeof(why)) : "", rank);
    }

    SampleSetup samples;
    sample_setup(&samples, args.sample_every > 0, args.tokenizer, args.prompt, c->vocab_size);

    Rng rng;
    train_rng_init(&rng, &args);
    /* where the run starts (llmc/train_setup.h): rank 0 alone verifies the checkpoints (every byte) and
     * picks the step; every rank checks the model config from the model file's header; rank 0 reads the
     * weights and broadcasts them; each rank reads the slices of the saved optimizer shards that overlap
     * its own range (llmc/zero.h) */
    int start_step = 0, last = -1, saved_val_every = -1, same_validation = 1;
    {
        char why[4600] = "";
        if (rank == 0) last = train_resume_find(&args, why, sizeof(why));
        dist_fail_together(&model, why, rank);
        dist_broadcast_bytes(&dist, &last, sizeof(last), model.stream);
    }
    if (args.resume) {
        if (last < 0) {
            printf("resume: no complete checkpoint in %s, starting from scratch\n", args.output_dir);
        } else {
            char model_path[4200], state_path[4200], done_path[4200];
            checkpoint_paths(model_path, state_path, done_path, sizeof(model_path), args.output_dir, last, 0);
            train_resume_check_model(&args, model_path, c, model.num_params);
            if (rank == 0) {
                GPTConfig saved;
                size_t n;
                free(init);
                init = model_file_read(model_path, &saved, &n);
            }
            dist_broadcast_bytes(&dist, init, model.num_params * sizeof(float), model.stream);
            /* this rank's optimizer range, from the saved shards of any world size (llmc/zero.h) */
            float* mm = (float*)malloc_check((model.opt.count + 1) * sizeof(float));
            float* vv = (float*)malloc_check((model.opt.count + 1) * sizeof(float));
            int saved_world;
            TrainState st = train_resume_read_state(args.output_dir, last, &run, model.opt.offset, model.opt.count, mm, vv, &saved_world);
            cudaCheck(cudaMemcpy(model.adam_m, mm, model.opt.count * sizeof(float), cudaMemcpyHostToDevice));
            cudaCheck(cudaMemcpy(model.adam_v, vv, model.opt.count * sizeof(float), cudaMemcpyHostToDevice));
            free(mm);
            free(vv);
            start_step = train_resume_restore(state_path, &st, &health, &health_config, &rng, &train, max_steps);
            saved_val_every = st.val_every;
            same_validation = train_same_validation(&st, &run);
            train_resume_say(&args, start_step, saved_world, world);
            if (rank == 0) train_resume_retain(&args, last);
        }
    }
    gpt_set_weights(&model, init, start_step - health.skipped); /* the bf16 rounding of the last update applied */
    free(init);

    /* early stopping (llmc/early_stop.h): the val loss is the mean over ranks, so every rank reaches the
     * same verdict; the best checkpoint (all ranks' files) goes to DIR/best, rank 0 records it */
    EarlyStop early;
    early_stop_init(&early, args.early_stop);
    char best_dir[4200] = "";
    if (args.early_stop > 0 && args.output_dir[0]) {
        early_stop_dir(best_dir, sizeof(best_dir), args.output_dir);
        if (rank == 0) make_dir_check(best_dir);
        dist_mean(&dist, 0.0f, model.stream); /* barrier: the directory exists */
        if (start_step > 0) {
            /* rank 0 verifies best_dir's checkpoint (every byte) and keeps only it; its verdict is every rank's */
            early_stop_resume(&early, best_dir, start_step, max_steps, args.val_every, saved_val_every, same_validation, rank == 0,
                              stdout);
            dist_broadcast_bytes(&dist, &early, sizeof(early), model.stream);
        }
    }

    /* the run header (llmc/progress.h), on stdout and as the first record of this run in metrics.jsonl (rank 0 logs) */
    Logger logger;
    logger_init(&logger, args.output_dir[0] && rank == 0 ? args.output_dir : NULL, args.resume);
    double flops_per_token = 6.0 * (double)model.num_params + 6.0 * c->num_layers * (double)c->channels * T;
    double peak = device_bf16_peak(prop.name) * world; /* of all ranks together */
    char device_text[512], precision[64];
    snprintf(device_text, sizeof(device_text), "GPU %s x %d, bf16 peak %s", prop.name, world, peak > 0 ? "" : "unknown (no MFU)");
    if (peak > 0) snprintf(device_text + strlen(device_text), sizeof(device_text) - strlen(device_text), "%.0f TFLOP/s", peak * 1e-12);
    snprintf(precision, sizeof(precision), "%s%s", FLOATX_NAME, model.master ? " + fp32 master weights" : "");
    MemoryPlan plan = gpt_memory_plan(c, B, T, args.recompute, model.master != NULL, model.opt.size, comm_bytes);
    MemoryPlan plan_full = gpt_memory_plan(c, B, T, 0, model.master != NULL, model.opt.size, comm_bytes);
    RunInfo info = {"train_gpt", precision, device_text, world, *c, model.num_params, B, T, accum, total_batch, start_step, max_steps,
                    plan, flops_per_token, peak};
    run_header_print(stdout, &info, &args);
    run_header_log(&logger, &info, &args);
    if (lr_line[0]) printf("%s\n", lr_line);
    memory_plan_print(&plan, &plan_full, args.recompute);
    dist_print_plan(&dist, &pg, model.master != NULL);

    /* Reliability (doc/reliability.md), as in train_gpt.c, with the ranks in agreement: a stop signal
     * (llmc/signals.h) may reach the ranks at different moments, so before each step (the previous step's
     * ZeRO-1 gather is queued after it: a flag all-reduce queued after the gather would wait for it, and
     * the gather would not overlap the next step) and each later micro-step they all-reduce the flag
     * (dist_any) and act on it together: an unfinished step is
     * dropped (loader and Rng back to its start), the completed steps are checkpointed, exit 75. A rank
     * whose training shard cannot be read (changed, truncated, a bad token) computes that micro-step on a
     * batch of token 0 (on the last one its backward's gradient reduction stays in step with the others')
     * and flags it: the flag joins the stop flag of the next micro-step, or after the last the loss's
     * all-reduce, so no rank applies the update; the step is dropped as for a stop signal, checkpoint,
     * exit 66 (a validation shard likewise: evaluate). The
     * health guard (llmc/health.h) sees the loss and norm every rank shares, so all skip alike. The
     * bookkeeping around each step (checkpoints, messages, exit statuses) is llmc/train_loop.h's. */
    int completed = start_step, saved_step = start_step > 0 ? start_step : -1, exit_status = 0, stop = 0, log_stop = 0;
    const char* data_error = NULL; /* this rank's shard could not be read: train.error or val.error; the run stops */
    Progress progress;
    progress_init(&progress);
    int stdout_warned = 0; /* train_flush_stdout's one warning given */
    /* --profile N: the first timed step is the run's second (the first one warms up cuBLASLt and caches) */
    GpuProfiler profiler;
    memset(&profiler, 0, sizeof(profiler));
    TrainProfile profiling;
    train_profile_init(&profiling, args.profile, start_step, max_steps);
    stop = dist_any(&model, preempt_requested());
    /* the training loop's collectives: a dead peer must not hang them; a heartbeat after each validation
     * batch and micro-step; checkpoint writes and rank 0's samples (of no known length) get 10x
     * --dist-timeout (process_group_watchdog_hold) */
    process_group_watchdog_stop(&pg);
    if (world > 1) process_group_watchdog_start(&pg, "the training loop", 0);
    /* step == max_steps evaluates the final weights (and trains no more); a stop signal skips no evaluation of them */
    for (int step = start_step; step <= max_steps && (step == max_steps || !stop); step++) {
        StepStart start = train_step_start(&rng, &train);
        int evaluated = train_eval_due(&args, have_val, step, max_steps);
        float val_loss = 0.0f;
        if (evaluated) {
            if ((stop = evaluate(&model, &val, val_batches, &pg, step < max_steps, &val_loss, &data_error)) != 0) {
                if (!dist_any(&model, data_error != NULL)) train_eval_stopped(step); /* else a rank's data: said below */
                break;
            }
            EarlyStopVerdict verdict = train_record_val(&args, &logger, &early, step, max_steps, val_loss);
            if (verdict == EARLY_STOP_IMPROVED && best_dir[0]) {
                TrainState st = train_state_at(&run, step, &rng, &health, &train, &start.loader);
                process_group_watchdog_hold(&pg);
                int best_saved = rank == 0 && train_best_saved(best_dir, args.output_dir, step, start_step); /* rank 0 reads it */
                dist_broadcast_bytes(&dist, &best_saved, sizeof(best_saved), model.stream);
                int failed = !best_saved && save_checkpoint(&model, best_dir, &st, 0, 0) != 0;
                if (!failed && rank == 0) failed = train_record_best(&early, best_dir, step) != 0;
                int agreed_failed = dist_any(&model, failed); /* every rank takes the same branch */
                process_group_heartbeat(&pg);
                if (agreed_failed && (exit_status = train_save_failed(save_error_continue, 0, "the best checkpoint", saved_step)) != 0) break;
            }
            if (verdict == EARLY_STOP_STOP && step < max_steps) {
                train_report_early_stop(&early, best_dir);
                break;
            }
        }
        if (step == max_steps) break;
        if (args.sample_every > 0 && step > 0 && step % args.sample_every == 0) { /* rank 0 samples; a stop signal cuts it short */
            process_group_watchdog_hold(&pg);
            if (rank == 0) sample_generate(&samples, next_logits_gpu, &model, args.sample_tokens, T, args.temperature, args.top_k, &rng);
            stop = dist_any(&model, preempt_requested()); /* then the step is dropped below, Rng included */
            process_group_heartbeat(&pg);
        }

        model.prof = train_profile_on(&profiling, step) ? &profiler : NULL;
        double t0 = profile_clock();
        GPU_PROFILE(&model, PROF_ZERO_GRAD, gpt_zero_grad(&model));
        double loss_sum = 0.0;
        for (int micro = 0; micro < accum && !stop; micro++) { /* gradients cross ranks only on the last micro-step */
            if (micro > 0 && (stop = dist_any(&model, preempt_requested() || data_error))) break;
            int failed = 0; /* then the batch is all token 0, and the step ends at the next micro-step's check */
            PROFILE(model.prof ? &profiler.table : NULL, PROF_DATA, failed = dataloader_try_next_slot(&train, micro * world + rank, micro == accum - 1));
            if (failed) data_error = train.error;
            loss_sum += gpt_forward(&model, train.inputs, train.targets, B, T, 1.0f / (float)(accum * world));
            gpt_backward(&model, train.inputs, B, T, micro == accum - 1);
            process_group_heartbeat(&pg);
        }
        int data_stop = 0; /* a rank's data failed in this step (its flag rides on the loss's all-reduce) */
        float loss = 0.0f;
        if (!stop) /* after the gradients' reduction */
            loss = dist_mean_any(&dist, (float)(loss_sum / accum), data_error != NULL, &data_stop, model.stream);
        if (stop || data_stop) { /* the unfinished step is dropped */
            stop = 1;
            model.prof = NULL;
            train_step_rewind(&start, &rng, &train);
            break;
        }
        float lr = schedule_lr(&sched, step);
        float norm = gpt_grad_norm(&model);
        HealthResult verdict = health_check(&health, &health_config, loss, norm);
        if (verdict.verdict == HEALTH_OK) {
            gpt_update_with_norm(&model, &oc, lr, step + 1 - health.skipped, norm); /* t: the updates applied, this one included */
            size_t bad = gpt_first_nonfinite_param(&model);
            if (bad < model.num_params) {
                exit_status = train_nonfinite_param(c, bad, NULL, step + 1, saved_step);
                break;
            }
        }
        cudaCheck(cudaStreamSynchronize(model.stream));
        completed = step + 1;
        double ms = (profile_clock() - t0) * 1000.0;
        if (model.prof) gpu_profile_collect(&profiler);
        double tok_s = (double)total_batch / (ms / 1000.0);
        double tflops = tok_s * flops_per_token * 1e-12;
        char throughput[64], mfu_text[48] = "peak unknown";
        if (peak > 0) snprintf(mfu_text, sizeof(mfu_text), "%.1f%% of peak", 100.0 * tflops * 1e12 / peak);
        snprintf(throughput, sizeof(throughput), "%.2f TFLOP/s (%s)", tflops, mfu_text);
        StepLine line = {completed, loss, lr, norm, ms, tok_s, evaluated, val_loss};
        double elapsed = train_report_step(&progress, &line, max_steps, throughput);
        train_report_health(&verdict, &health, &health_config, completed, max_steps);
        if (model.prof) {
            model.prof = NULL;
            train_profile_step(&profiling, &profiler.table, ms / 1000.0);
        }
        train_flush_stdout(&stdout_warned);
        StepRecord record = {completed, loss, lr, norm, (float)ms, (float)tok_s, (long long)completed * total_batch, elapsed,
                             peak > 0 ? tflops * 1e12 / peak : 0.0};
        logger_step_record(&logger, &record);
        if ((exit_status = train_health_stop(&health, &health_config, completed, saved_step)) != 0) break;

        if (train_checkpoint_due(&args, completed, max_steps)) {
            TrainState st = train_state_at(&run, completed, &rng, &health, &train, NULL);
            process_group_watchdog_hold(&pg);
            int saved = save_checkpoint(&model, args.output_dir, &st, args.keep_last, args.keep_every) == 0;
            process_group_heartbeat(&pg);
            if (saved) saved_step = completed;
            else if ((exit_status = train_save_failed(save_error_continue, completed == max_steps, "it", saved_step)) != 0) break;
        }
        log_stop = log_stop || train_log_failed(&logger, save_error_continue, saved_step) != 0; /* rank 0's; the ranks agree below */
        process_group_heartbeat(&pg);
        stop = dist_any(&model, preempt_requested() || log_stop);
        gpt_gather_params(&model); /* after the flag's all-reduce, which would wait for it */
    }
    /* a metrics.jsonl write failed on rank 0 (--on-save-error stop): every rank exits as for a failed save
     * (exit statuses agree across ranks, so all of them take part in this all-reduce) */
    log_stop = log_stop || train_log_failed(&logger, save_error_continue, saved_step) != 0;
    if (exit_status == 0 && dist_any(&model, log_stop)) exit_status = SAVE_FAILED_EXIT_STATUS;
    /* why the ranks stopped: a stop signal, or a rank's data (a stop signal may have ended the step in which it failed) */
    int data_stop = 0;
    if (exit_status == 0 && stop) data_stop = dist_any(&model, data_error != NULL);
    if (exit_status == 0 && stop && (completed < max_steps || data_stop)) { /* checkpoint the completed steps */
        exit_status = data_stop ? DATA_ERROR_EXIT_STATUS : PREEMPT_EXIT_STATUS;
        if (data_stop ? train_data_failed(&args, data_error, rank, world, completed, max_steps, saved_step)
                      : train_preempted(&args, preempt_requested(), completed, saved_step)) {
            TrainState st = train_state_at(&run, completed, &rng, &health, &train, NULL);
            process_group_watchdog_hold(&pg);
            if (save_checkpoint(&model, args.output_dir, &st, args.keep_last, args.keep_every) != 0) exit_status = train_exit_save_failed(saved_step);
        }
    } else if (exit_status == 0 && args.sample_every > 0 && rank == 0) {
        process_group_watchdog_stop(&pg); /* the end-of-run sample has no heartbeat (the other ranks are done) */
        sample_generate(&samples, next_logits_gpu, &model, args.sample_tokens, T, args.temperature, args.top_k, &rng);
    }

    train_profile_finish(&profiling, &profiler.table);
    gpu_profile_free(&profiler);
    exit_status = train_log_close(&logger, save_error_continue, exit_status);
    sample_setup_free(&samples);
    dataloader_free(&train);
    if (have_val) dataloader_free(&val);
    dist_free(&dist);
    gpt_free(&model);
    process_group_finish(&pg);
    return exit_status;
}
#endif
