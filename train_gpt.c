/*
 * train_gpt.c — GPT-2 training on the CPU in fp32, with OpenMP.
 *
 * The whole model reads top to bottom: parameters and activations, the forward
 * pass, the backward pass, the AdamW update, then the training loop. Each op
 * (layernorm, matmul, attention, ...) lives once in llmc/cpu_ops.h, where its
 * math is stated; file formats, the data loader, schedules, flags and
 * checkpoints live in their own llmc/ headers. doc/formats.md describes every
 * file this program reads or writes.
 *
 * test_gpt.c includes this file with TESTING defined, to reuse the model
 * without main().
 */
#include <float.h>
#include <math.h>
#include <omp.h>

#include "llmc/fileio.h"
#include "llmc/rng.h"
#include "llmc/schedule.h"
#include "llmc/checkpoint.h"
#include "llmc/dataloader.h"
#include "llmc/cpu_ops.h"
#include "llmc/profile.h"

/* ----------------------------------------------------------------------------
 * Parameters: one contiguous fp32 buffer in model-file order (doc/formats.md). */

/* ParameterTensors and point_parameters (llmc/checkpoint.h) */
GPT_DEFINE_PARAMETER_TENSORS(float)

/* ----------------------------------------------------------------------------
 * Activations kept from the forward pass for the backward pass, for a batch of
 * up to B x T tokens. Per-layer tensors are stacked over layers; a layer's slice
 * is taken with the batch's actual B*T, so smaller batches (sampling) reuse them. */

typedef struct {
    float* encoded;   /* (B, T, C)          x0 = wte[tok] + wpe[pos] */
    float* ln1;       /* (L, B, T, C) */
    float* ln1_mean;  /* (L, B, T) */
    float* ln1_rstd;  /* (L, B, T) */
    float* qkv;       /* (L, B, T, 3C) */
    float* atty;      /* (L, B, T, C)       attention output, before its projection */
    float* att;       /* (L, B, NH, T, T)   softmax probabilities */
    float* attproj;   /* (L, B, T, C) */
    float* residual2; /* (L, B, T, C)       x + attn(ln1(x)) */
    float* ln2;       /* (L, B, T, C) */
    float* ln2_mean;  /* (L, B, T) */
    float* ln2_rstd;  /* (L, B, T) */
    float* fch;       /* (L, B, T, 4C)      before GELU */
    float* fch_gelu;  /* (L, B, T, 4C) */
    float* fcproj;    /* (L, B, T, C) */
    float* residual3; /* (L, B, T, C)       the layer's output */
    float* lnf;       /* (B, T, C) */
    float* lnf_mean;  /* (B, T) */
    float* lnf_rstd;  /* (B, T) */
    float* logits;    /* (B, T, Vp)         overwritten by their gradient in the backward pass */
    float* losses;    /* (B, T) */
} Activations;

/* Gradients of activations: only one layer's worth is alive at a time. */
typedef struct {
    float* residual; /* (B, T, C)  gradient of the residual stream, carried down the layers */
    float* ln;       /* (B, T, C)  gradient of a layernorm output */
    float* atty;     /* (B, T, C) */
    float* qkv;      /* (B, T, 3C) */
    float* fch;      /* (B, T, 4C) */
    float* fch_gelu; /* (B, T, 4C) */
    float* losses;   /* (B, T) */
} ActivationGrads;

typedef struct {
    GPTConfig config;
    size_t param_sizes[NUM_PARAM_TENSORS];
    size_t num_params;
    float* params;
    float* grads;
    float* adam_m; /* AdamW moments, allocated at the first update or on resume */
    float* adam_v;
    ParameterTensors w;
    ParameterTensors g;
    int batch_cap, seq_cap; /* activation capacity */
    float* act_memory;
    float* act_grad_memory;
    size_t act_bytes; /* act_memory and act_grad_memory together */
    Activations a;
    ActivationGrads da;
    Profiler* prof; /* per-op times (llmc/profile.h) while the trainer profiles; NULL: off */
} GPT;

static void gpt_setup(GPT* m, const GPTConfig* c) {
    gpt_config_check(c, "model config");
    memset(m, 0, sizeof(*m));
    m->config = *c;
    gpt_param_sizes(c, m->param_sizes);
    m->num_params = gpt_num_params(c);
    m->params = (float*)malloc_check(m->num_params * sizeof(float));
    m->grads = (float*)calloc_check(m->num_params, sizeof(float));
    point_parameters(&m->w, m->params, m->param_sizes);
    point_parameters(&m->g, m->grads, m->param_sizes);
}

/* a from-scratch model: GPT-2 initialisation (llmc/checkpoint.h gpt_init_weights) */
static inline void gpt_init_random(GPT* m, const GPTConfig* c, uint64_t seed) {
    gpt_setup(m, c);
    gpt_init_weights(m->params, c, seed);
}

static void gpt_load(GPT* m, const char* path) {
    GPTConfig c;
    size_t n;
    float* params = model_file_read(path, &c, &n);
    gpt_setup(m, &c);
    if (n != m->num_params) fatalf("%s: holds %zu parameters, its config needs %zu", path, n, m->num_params);
    memcpy(m->params, params, n * sizeof(float));
    free(params);
}

static void gpt_alloc_activations(GPT* m, int B, int T) {
    const GPTConfig* c = &m->config;
    size_t L = c->num_layers, C = c->channels, NH = c->num_heads, Vp = c->padded_vocab_size;
    size_t BT = (size_t)B * T;
    size_t sizes[] = {BT * C,     L * BT * C, L * BT,     L * BT,         L * BT * 3 * C, L * BT * C, L * B * NH * T * T,
                      L * BT * C, L * BT * C, L * BT * C, L * BT,         L * BT,         L * BT * 4 * C, L * BT * 4 * C,
                      L * BT * C, L * BT * C, BT * C,     BT,             BT,             BT * Vp,        BT};
    float** ptrs[] = {&m->a.encoded,  &m->a.ln1,      &m->a.ln1_mean, &m->a.ln1_rstd,  &m->a.qkv,      &m->a.atty,
                      &m->a.att,      &m->a.attproj,  &m->a.residual2, &m->a.ln2,      &m->a.ln2_mean, &m->a.ln2_rstd,
                      &m->a.fch,      &m->a.fch_gelu, &m->a.fcproj,   &m->a.residual3, &m->a.lnf,      &m->a.lnf_mean,
                      &m->a.lnf_rstd, &m->a.logits,   &m->a.losses};
    size_t count = sizeof(sizes) / sizeof(sizes[0]), total = 0;
    for (size_t i = 0; i < count; i++) total += sizes[i];
    m->act_memory = (float*)malloc_check(total * sizeof(float));
    float* p = m->act_memory;
    for (size_t i = 0; i < count; i++) {
        *ptrs[i] = p;
        p += sizes[i];
    }
    size_t gsizes[] = {BT * C, BT * C, BT * C, BT * 3 * C, BT * 4 * C, BT * 4 * C, BT};
    float** gptrs[] = {&m->da.residual, &m->da.ln, &m->da.atty, &m->da.qkv, &m->da.fch, &m->da.fch_gelu, &m->da.losses};
    size_t gtotal = 0;
    for (size_t i = 0; i < 7; i++) gtotal += gsizes[i];
    m->act_grad_memory = (float*)malloc_check(gtotal * sizeof(float));
    p = m->act_grad_memory;
    for (size_t i = 0; i < 7; i++) {
        *gptrs[i] = p;
        p += gsizes[i];
    }
    m->act_bytes = (total + gtotal) * sizeof(float);
    m->batch_cap = B;
    m->seq_cap = T;
}

static void gpt_free(GPT* m) {
    free(m->params);
    free(m->grads);
    free(m->adam_m);
    free(m->adam_v);
    free(m->act_memory);
    free(m->act_grad_memory);
}

/* ----------------------------------------------------------------------------
 * Forward pass: tokens (B, T) -> final layernorm output; then the classifier. */

static void check_batch_shape(const GPT* m, int B, int T) {
    if (T > m->config.max_seq_len)
        fatalf("sequence length %d exceeds the model's maximum %d", T, m->config.max_seq_len);
    if ((size_t)B * T > (size_t)m->batch_cap * m->seq_cap || T > m->seq_cap)
        fatalf("batch %dx%d exceeds the allocated %dx%d", B, T, m->batch_cap, m->seq_cap);
}

static void gpt_forward_body(GPT* m, const int* inputs, int B, int T) {
    check_batch_shape(m, B, T);
    const GPTConfig* c = &m->config;
    int L = c->num_layers, C = c->channels, NH = c->num_heads;
    int V = c->vocab_size;
    size_t BT = (size_t)B * T;
    for (size_t i = 0; i < BT; i++)
        if (inputs[i] < 0 || inputs[i] >= V) fatalf("input token %d at position %zu is outside the vocabulary [0, %d)", inputs[i], i, V);
    ParameterTensors* w = &m->w;
    Activations* a = &m->a;

    Profiler* p = m->prof;

    PROFILE(p, PROF_ENCODER_FWD, encoder_forward(a->encoded, inputs, w->wte, w->wpe, B, T, C));
    for (int l = 0; l < L; l++) {
        const float* residual = l == 0 ? a->encoded : a->residual3 + (size_t)(l - 1) * BT * C;
        size_t o = (size_t)l * BT * C, o3 = 3 * o, o4 = 4 * o, ot = (size_t)l * BT;
        PROFILE(p, PROF_LAYERNORM_FWD,
                layernorm_forward(a->ln1 + o, a->ln1_mean + ot, a->ln1_rstd + ot, residual, w->ln1w + l * C, w->ln1b + l * C, (int)BT, C));
        PROFILE(p, PROF_MATMUL_QKV_FWD,
                matmul_forward(a->qkv + o3, a->ln1 + o, w->qkvw + (size_t)l * 3 * C * C, w->qkvb + l * 3 * C, (int)BT, C, 3 * C));
        PROFILE(p, PROF_ATTENTION_FWD, attention_forward(a->atty + o, a->att + (size_t)l * B * NH * T * T, a->qkv + o3, B, T, C, NH));
        PROFILE(p, PROF_MATMUL_ATTPROJ_FWD,
                matmul_forward(a->attproj + o, a->atty + o, w->attprojw + (size_t)l * C * C, w->attprojb + l * C, (int)BT, C, C));
        PROFILE(p, PROF_RESIDUAL_FWD, residual_forward(a->residual2 + o, residual, a->attproj + o, BT * C));
        PROFILE(p, PROF_LAYERNORM_FWD,
                layernorm_forward(a->ln2 + o, a->ln2_mean + ot, a->ln2_rstd + ot, a->residual2 + o, w->ln2w + l * C, w->ln2b + l * C,
                                  (int)BT, C));
        PROFILE(p, PROF_MATMUL_FC_FWD,
                matmul_forward(a->fch + o4, a->ln2 + o, w->fcw + (size_t)l * 4 * C * C, w->fcb + l * 4 * C, (int)BT, C, 4 * C));
        PROFILE(p, PROF_GELU_FWD, gelu_forward(a->fch_gelu + o4, a->fch + o4, BT * 4 * C));
        PROFILE(p, PROF_MATMUL_FCPROJ_FWD,
                matmul_forward(a->fcproj + o, a->fch_gelu + o4, w->fcprojw + (size_t)l * 4 * C * C, w->fcprojb + l * C, (int)BT, 4 * C,
                               C));
        PROFILE(p, PROF_RESIDUAL_FWD, residual_forward(a->residual3 + o, a->residual2 + o, a->fcproj + o, BT * C));
    }
    PROFILE(p, PROF_LAYERNORM_FWD,
            layernorm_forward(a->lnf, a->lnf_mean, a->lnf_rstd, a->residual3 + (size_t)(L - 1) * BT * C, w->lnfw, w->lnfb, (int)BT, C));
}

/* Full forward: logits (B, T, Vp) and, given targets, the per-token losses;
 * returns the mean loss, or -1 without targets. */
static float gpt_forward(GPT* m, const int* inputs, const int* targets, int B, int T) {
    const GPTConfig* c = &m->config;
    int BT = B * T, V = c->vocab_size, Vp = c->padded_vocab_size;
    gpt_forward_body(m, inputs, B, T);
    profile_begin(m->prof, PROF_CLASSIFIER_FWD); /* logits, then the loss */
    matmul_forward(m->a.logits, m->a.lnf, m->w.wte, NULL, BT, c->channels, Vp);
    if (!targets) {
        profile_end(m->prof, PROF_CLASSIFIER_FWD);
        return -1.0f;
    }
    for (int i = 0; i < BT; i++)
        if (targets[i] < 0 || targets[i] >= V) fatalf("target token %d at position %d is outside the vocabulary [0, %d)", targets[i], i, V);
    crossentropy_forward(m->a.losses, m->a.logits, targets, BT, V, Vp);
    double sum = 0.0;
    for (int i = 0; i < BT; i++) sum += m->a.losses[i];
    profile_end(m->prof, PROF_CLASSIFIER_FWD);
    return (float)(sum / BT);
}

/* Logits of the last position only (for sampling): (Vp). */
static inline const float* gpt_forward_last(GPT* m, const int* inputs, int T) {
    const GPTConfig* c = &m->config;
    gpt_forward_body(m, inputs, 1, T);
    matmul_forward(m->a.logits, m->a.lnf + (size_t)(T - 1) * c->channels, m->w.wte, NULL, 1, c->channels, c->padded_vocab_size);
    return m->a.logits;
}

static void gpt_zero_grad(GPT* m) { memset(m->grads, 0, m->num_params * sizeof(float)); }

/* ----------------------------------------------------------------------------
 * Backward pass: accumulates d(loss_scale * mean loss)/d(params) into m->grads.
 * Must follow gpt_forward with the same batch and targets. The logits buffer is
 * overwritten by its gradient. */
static void gpt_backward(GPT* m, const int* inputs, const int* targets, int B, int T, float loss_scale) {
    const GPTConfig* c = &m->config;
    int L = c->num_layers, C = c->channels, NH = c->num_heads, V = c->vocab_size, Vp = c->padded_vocab_size;
    size_t BT = (size_t)B * T;
    ParameterTensors* w = &m->w;
    ParameterTensors* g = &m->g;
    Activations* a = &m->a;
    ActivationGrads* d = &m->da;

    Profiler* p = m->prof;

    profile_begin(p, PROF_CLASSIFIER_BWD); /* the loss, the logits and the tied classifier matmul */
    float dloss = loss_scale / (float)BT;
    for (size_t i = 0; i < BT; i++) d->losses[i] = dloss;
    crossentropy_backward(a->logits, a->logits, targets, d->losses, (int)BT, V, Vp);
    memset(d->ln, 0, BT * C * sizeof(float));
    matmul_backward(d->ln, g->wte, NULL, a->logits, a->lnf, w->wte, (int)BT, C, Vp);
    profile_end(p, PROF_CLASSIFIER_BWD);
    profile_begin(p, PROF_LAYERNORM_BWD);
    memset(d->residual, 0, BT * C * sizeof(float));
    layernorm_backward(d->residual, g->lnfw, g->lnfb, d->ln, a->residual3 + (size_t)(L - 1) * BT * C, w->lnfw, a->lnf_mean,
                       a->lnf_rstd, (int)BT, C);
    profile_end(p, PROF_LAYERNORM_BWD);

    /* each op's time includes zeroing the gradient buffer it accumulates into */
    for (int l = L - 1; l >= 0; l--) {
        const float* residual = l == 0 ? a->encoded : a->residual3 + (size_t)(l - 1) * BT * C;
        size_t o = (size_t)l * BT * C, o3 = 3 * o, o4 = 4 * o, ot = (size_t)l * BT;
        /* MLP: residual3 = residual2 + fcproj(gelu(fc(ln2(residual2)))); d->residual flows through unchanged */
        profile_begin(p, PROF_MATMUL_FCPROJ_BWD);
        memset(d->fch_gelu, 0, BT * 4 * C * sizeof(float));
        matmul_backward(d->fch_gelu, g->fcprojw + (size_t)l * 4 * C * C, g->fcprojb + l * C, d->residual, a->fch_gelu + o4,
                        w->fcprojw + (size_t)l * 4 * C * C, (int)BT, 4 * C, C);
        profile_end(p, PROF_MATMUL_FCPROJ_BWD);
        profile_begin(p, PROF_GELU_BWD);
        memset(d->fch, 0, BT * 4 * C * sizeof(float));
        gelu_backward(d->fch, a->fch + o4, d->fch_gelu, BT * 4 * C);
        profile_end(p, PROF_GELU_BWD);
        profile_begin(p, PROF_MATMUL_FC_BWD);
        memset(d->ln, 0, BT * C * sizeof(float));
        matmul_backward(d->ln, g->fcw + (size_t)l * 4 * C * C, g->fcb + l * 4 * C, d->fch, a->ln2 + o, w->fcw + (size_t)l * 4 * C * C,
                        (int)BT, C, 4 * C);
        profile_end(p, PROF_MATMUL_FC_BWD);
        PROFILE(p, PROF_LAYERNORM_BWD,
                layernorm_backward(d->residual, g->ln2w + l * C, g->ln2b + l * C, d->ln, a->residual2 + o, w->ln2w + l * C,
                                   a->ln2_mean + ot, a->ln2_rstd + ot, (int)BT, C));
        /* attention: residual2 = residual + attproj(attention(qkv(ln1(residual)))) */
        profile_begin(p, PROF_MATMUL_ATTPROJ_BWD);
        memset(d->atty, 0, BT * C * sizeof(float));
        matmul_backward(d->atty, g->attprojw + (size_t)l * C * C, g->attprojb + l * C, d->residual, a->atty + o,
                        w->attprojw + (size_t)l * C * C, (int)BT, C, C);
        profile_end(p, PROF_MATMUL_ATTPROJ_BWD);
        profile_begin(p, PROF_ATTENTION_BWD);
        memset(d->qkv, 0, BT * 3 * C * sizeof(float));
        attention_backward(d->qkv, d->atty, a->qkv + o3, a->att + (size_t)l * B * NH * T * T, B, T, C, NH);
        profile_end(p, PROF_ATTENTION_BWD);
        profile_begin(p, PROF_MATMUL_QKV_BWD);
        memset(d->ln, 0, BT * C * sizeof(float));
        matmul_backward(d->ln, g->qkvw + (size_t)l * 3 * C * C, g->qkvb + l * 3 * C, d->qkv, a->ln1 + o,
                        w->qkvw + (size_t)l * 3 * C * C, (int)BT, C, 3 * C);
        profile_end(p, PROF_MATMUL_QKV_BWD);
        PROFILE(p, PROF_LAYERNORM_BWD,
                layernorm_backward(d->residual, g->ln1w + l * C, g->ln1b + l * C, d->ln, residual, w->ln1w + l * C, a->ln1_mean + ot,
                                   a->ln1_rstd + ot, (int)BT, C));
    }
    PROFILE(p, PROF_ENCODER_BWD, encoder_backward(g->wte, g->wpe, d->residual, inputs, B, T, C));
}

/* ----------------------------------------------------------------------------
 * AdamW update with global-norm clipping, given the gradient's global L2 norm
 * (gpt_grad_norm). t is the 1-based step count for bias correction. */
/* A squared norm above FLT_MAX is inf, as the GPU trainer's float sum makes it (llmc/global_norm.cuh), although the
 * double sum here is finite: AdamW squares each gradient in float (llmc/cpu_ops.h), so a gradient of such a norm
 * (|g| up to 1.8e19 and past) would make the second moment inf; the health guard skips the update instead. */
static float gpt_grad_norm(const GPT* m) {
    double squared = global_norm_squared(m->grads, m->num_params);
    return squared > (double)FLT_MAX ? INFINITY : (float)sqrt(squared);
}

static void gpt_update_with_norm(GPT* m, const OptimizerConfig* oc, float lr, int t, float norm) {
    if (!m->adam_m) {
        m->adam_m = (float*)calloc_check(m->num_params, sizeof(float));
        m->adam_v = (float*)calloc_check(m->num_params, sizeof(float));
    }
    float scale = 1.0f;
    if (oc->grad_clip > 0.0f && norm > oc->grad_clip) scale = oc->grad_clip / (norm + 1e-6f);
    size_t offset = 0;
    for (int i = 0; i < NUM_PARAM_TENSORS; i++) {
        size_t n = m->param_sizes[i];
        float wd = gpt_param_decays(i) ? oc->weight_decay : 0.0f;
        adamw_update(m->params + offset, m->grads + offset, m->adam_m + offset, m->adam_v + offset, n, lr, oc->beta1, oc->beta2,
                     oc->eps, wd, scale, t);
        offset += n;
    }
}

/* the update from the current gradients; returns the gradient norm before clipping */
static inline float gpt_update(GPT* m, const OptimizerConfig* oc, float lr, int t) {
    float norm = gpt_grad_norm(m);
    gpt_update_with_norm(m, oc, lr, t, norm);
    return norm;
}

#ifndef TESTING
#include "llmc/cpu_peak.h"
#include "llmc/early_stop.h"
#include "llmc/flags.h"
#include "llmc/health.h"
#include "llmc/logger.h"
#include "llmc/progress.h"
#include "llmc/sampler.h"
#include "llmc/signals.h"
#include "llmc/generate.h"
#include "llmc/train_setup.h"
#include "llmc/train_loop.h"

/* The mean loss over the first `batches` batches of the validation loader, into *loss; returns 0. With
 * `stoppable`, a stop signal before a batch leaves it unfinished: returns 1 (a resumed run computes it).
 * A validation shard that cannot be read leaves it unfinished too: returns 2 (why: val->error). */
static int evaluate(GPT* m, DataLoader* val, int batches, int stoppable, float* loss) {
    dataloader_reset(val);
    double sum = 0.0;
    for (int i = 0; i < batches; i++) {
        if (stoppable && preempt_requested()) return 1;
        if (dataloader_try_next_slot(val, val->rank, 1) != 0) return 2;
        sum += gpt_forward(m, val->inputs, val->targets, val->B, val->T);
    }
    *loss = (float)(sum / batches);
    return 0;
}

/* sampling callback (llmc/generate.h): logits of the next position, on the host */
static const float* next_logits_cpu(void* model, const int* tokens, int n) { return gpt_forward_last((GPT*)model, tokens, n); }

/* Checkpoint st->step into dir (llmc/checkpoint.h): stale marker removed, model file, state file,
 * done marker, then retention. Returns 0, or −1 after printing why it failed (the files it wrote are
 * deleted; earlier checkpoints are untouched). Before the first update there are no AdamW moments: they are saved as zeros. */
static int save_checkpoint(GPT* m, const char* dir, const TrainState* st, int keep_last, int keep_every) {
    char model_path[4200], state_path[4200], done_path[4200], err[4600];
    checkpoint_paths(model_path, state_path, done_path, sizeof(model_path), dir, st->step, 0);
    if (!m->adam_m) {
        m->adam_m = (float*)calloc_check(m->num_params, sizeof(float));
        m->adam_v = (float*)calloc_check(m->num_params, sizeof(float));
    }
    TrainState mine = *st;
    mine.has_model_crc = 1;
    int begun = checkpoint_begin(dir, st->step, err, sizeof(err)) == 0;
    if (!begun || model_file_try_write(model_path, &m->config, m->params, &mine.model_crc, err, sizeof(err)) != 0 ||
        state_file_try_write(state_path, &mine, m->adam_m, m->adam_v, NULL, err, sizeof(err)) != 0 ||
        checkpoint_try_mark_done(dir, st->step, 1, err, sizeof(err)) != 0) {
        fprintf(stderr, "error: checkpoint of step %d not written: %s\n", st->step, err);
        if (begun) checkpoint_abandon(dir, st->step, 0, st->step == st->schedule.total);
        return -1;
    }
    printf("checkpoint: step %d written to %s\n", st->step, dir);
    checkpoint_retain(dir, st->step, keep_last, keep_every, stdout);
    return 0;
}

int main(int argc, char** argv) {
    std_fds_open();
    TrainArgs args;
    flags_parse(&args, argc, argv, "train_gpt_cpu");
    flags_reject(&args, "zero", "the CPU trainer has no ZeRO sharding (it runs as one process)");
    flags_reject(&args, "recompute", "the CPU trainer keeps all activations; recompute is a GPU-trainer option");
    flags_reject(&args, "master-weights", "the CPU trainer always trains in fp32");
    flags_reject(&args, "deterministic", "the CPU trainer is always deterministic");
    flags_reject(&args, "gelu-fusion", "the CPU trainer has no cuBLASLt epilogues");
    const char* one_process = "the CPU trainer runs as one process (multi-GPU is train_gpt's)";
    flags_reject(&args, "dist-init", one_process);
    flags_reject(&args, "dist-file", one_process);
    flags_reject(&args, "dist-timeout", one_process);
    flags_reject(&args, "grad-comm", one_process);
    if (args.threads > 0) omp_set_num_threads(args.threads);
    int save_error_continue = train_check_run_flags(&args);
    HealthConfig health_config = {args.max_bad_steps, args.spike_zscore, args.spike_window};
    HealthState health;
    memset(&health, 0, sizeof(health));
    preempt_install();

    /* model (llmc/train_setup.h): from scratch, a preset or a model file */
    GPT model;
    GPTConfig config;
    if (train_model_source(&args, &config) == MODEL_FROM_FILE) {
        gpt_load(&model, args.init);
        train_check_file_config(&args, &model.config);
    } else {
        gpt_init_random(&model, &config, args.seed);
    }
    const GPTConfig* c = &model.config;
    int B = args.batch_size, T = args.seq_len;
    train_check_batch_shape(&args, c);

    /* data: a training window is one optimizer step of `accum` micro-batches; micro-step j reads
     * slot j (as the GPU trainer's rank r reads slot j*world + r), so the data order does not
     * depend on how a step is split */
    int accum = train_micro_steps(args.total_batch, B, T, 1);
    long long total_batch = (long long)accum * B * T;
    DataLoader train, val;
    int have_val = train_open_data(&args, B, T, c->vocab_size, 0, 1, accum, &train, &val);
    int val_batches = have_val && args.val_every > 0 ? train_val_batches(&args, &val) : 0;
    int max_steps = train_max_steps(&args, &train);
    gpt_alloc_activations(&model, B, T);

    char lr_line[256]; /* --lr-scale: with the tokens per step, relative to the batch --lr was tuned for */
    Schedule sched = train_schedule(&args, train_scaled_lr(&args, total_batch, B, T, lr_line, sizeof(lr_line)), max_steps);
    OptimizerConfig oc = {args.beta1, args.beta2, args.eps, args.weight_decay, args.grad_clip};
    TrainState run = train_run_state(&args, model.num_params, &sched, T, total_batch, &train, have_val, &val, val_batches, 4);
    if (args.output_dir[0]) train_lock_output_dir(args.output_dir, NULL, 0);
    train_note_no_checkpoints(&args);

    SampleSetup samples;
    sample_setup(&samples, args.sample_every > 0, args.tokenizer, args.prompt, c->vocab_size);

    Rng rng;
    train_rng_init(&rng, &args);
    char why[4600] = "";
    int start_step = 0, last = train_resume_find(&args, why, sizeof(why)), saved_val_every = -1, same_validation = 1;
    if (last == -2) fatalf("%s", why);
    if (args.resume) {
        if (last < 0) {
            printf("resume: no complete checkpoint in %s, starting from scratch\n", args.output_dir);
        } else {
            char model_path[4200], state_path[4200], done_path[4200];
            checkpoint_paths(model_path, state_path, done_path, sizeof(model_path), args.output_dir, last, 0);
            train_resume_check_model(&args, model_path, c, model.num_params);
            GPTConfig saved;
            size_t n;
            float* params = model_file_read(model_path, &saved, &n);
            memcpy(model.params, params, model.num_params * sizeof(float));
            free(params);
            model.adam_m = (float*)malloc_check(model.num_params * sizeof(float));
            model.adam_v = (float*)malloc_check(model.num_params * sizeof(float));
            int saved_world;
            TrainState st = train_resume_read_state(args.output_dir, last, &run, 0, model.num_params, model.adam_m, model.adam_v, &saved_world);
            start_step = train_resume_restore(state_path, &st, &health, &health_config, &rng, &train, max_steps);
            saved_val_every = st.val_every;
            same_validation = train_same_validation(&st, &run);
            train_resume_say(&args, start_step, saved_world, 1);
            train_resume_retain(&args, last);
        }
    }

    /* early stopping (llmc/early_stop.h): the best checkpoint goes to DIR/best */
    EarlyStop early;
    early_stop_init(&early, args.early_stop);
    char best_dir[4200] = "";
    if (args.early_stop > 0 && args.output_dir[0]) {
        early_stop_dir(best_dir, sizeof(best_dir), args.output_dir);
        make_dir_check(best_dir);
        if (start_step > 0) early_stop_resume(&early, best_dir, start_step, max_steps, args.val_every, saved_val_every, same_validation, 1,
                                               stdout);
    }

    /* the run header (llmc/progress.h), on stdout and as the first record of this run in metrics.jsonl */
    Logger logger;
    logger_init(&logger, args.output_dir[0] ? args.output_dir : NULL, args.resume);
    double flops_per_token = 6.0 * (double)model.num_params + 6.0 * c->num_layers * (double)c->channels * T;
    double peak_gflops = cpu_fma_peak_best(5L * 1000 * 1000, 3);
    char device[128];
    snprintf(device, sizeof(device), "CPU %s, %d threads", cpu_isa_name(cpu_matmul_isa()), omp_get_max_threads());
    RunInfo info = {"train_gpt_cpu", "fp32", device, 1, *c, model.num_params, B, T, accum, total_batch, start_step, max_steps,
                    {model.num_params * sizeof(float), model.num_params * sizeof(float), 2 * model.num_params * sizeof(float),
                     model.act_bytes, 0, 0},
                    flops_per_token, peak_gflops * 1e9};
    run_header_print(stdout, &info, &args);
    run_header_log(&logger, &info, &args);
    if (lr_line[0]) printf("%s\n", lr_line);
    printf("FP32 FMA peak of this machine, measured now: %.1f GFLOP/s (%s, %d threads); flops per token %.4g\n", peak_gflops,
           cpu_isa_name(cpu_matmul_isa()), omp_get_max_threads(), flops_per_token);

    /* Reliability (doc/reliability.md). A stop signal (llmc/signals.h) is honoured before each step and
     * between micro-steps: an unfinished step is dropped (loader and Rng back to its start) and the
     * state after `completed` steps is checkpointed, then exit 75. A shard that cannot be read (changed,
     * truncated, a bad token) drops the step (or leaves the validation unfinished) the same way:
     * checkpoint, then exit 66. Every update first passes the
     * health guard (llmc/health.h): a non-finite or spiking loss or norm skips it. The bookkeeping
     * around each step (checkpoints, messages, exit statuses) is llmc/train_loop.h's. */
    int completed = start_step, saved_step = start_step > 0 ? start_step : -1, exit_status = 0;
    const char* data_error = NULL; /* a shard could not be read: train.error or val.error */
    Profiler profiler;
    profile_reset(&profiler);
    TrainProfile profiling;
    train_profile_init(&profiling, args.profile, start_step, max_steps);
    Progress progress;
    progress_init(&progress);
    int stdout_warned = 0; /* train_flush_stdout's one warning given */
    /* step == max_steps evaluates the final weights (and trains no more); a stop signal skips no evaluation of them */
    for (int step = start_step; step <= max_steps && (step == max_steps || !preempt_requested()); step++) {
        StepStart start = train_step_start(&rng, &train);
        int evaluated = train_eval_due(&args, have_val, step, max_steps);
        float val_loss = 0.0f;
        if (evaluated) {
            int unfinished = evaluate(&model, &val, val_batches, step < max_steps, &val_loss);
            if (unfinished == 1) train_eval_stopped(step);
            if (unfinished == 2) data_error = val.error;
            if (unfinished) break;
            EarlyStopVerdict verdict = train_record_val(&args, &logger, &early, step, max_steps, val_loss);
            if (verdict == EARLY_STOP_IMPROVED && best_dir[0]) {
                TrainState st = train_state_at(&run, step, &rng, &health, &train, &start.loader);
                int failed = (!train_best_saved(best_dir, args.output_dir, step, start_step) && save_checkpoint(&model, best_dir, &st, 0, 0) != 0) ||
                             train_record_best(&early, best_dir, step) != 0;
                if (failed && (exit_status = train_save_failed(save_error_continue, 0, "the best checkpoint", saved_step)) != 0) break;
            }
            if (verdict == EARLY_STOP_STOP && step < max_steps) {
                train_report_early_stop(&early, best_dir);
                break;
            }
        }
        if (step == max_steps) break;
        if (args.sample_every > 0 && step > 0 && step % args.sample_every == 0)
            sample_generate(&samples, next_logits_cpu, &model, args.sample_tokens, T, args.temperature, args.top_k, &rng);

        model.prof = train_profile_on(&profiling, step) ? &profiler : NULL;
        double t0 = profile_clock();
        PROFILE(model.prof, PROF_ZERO_GRAD, gpt_zero_grad(&model));
        double loss_sum = 0.0;
        int dropped = 0;
        for (int micro = 0; micro < accum; micro++) {
            int failed = 0;
            if (!preempt_requested()) PROFILE(model.prof, PROF_DATA, failed = dataloader_try_next_slot(&train, micro, micro == accum - 1));
            if (failed) data_error = train.error;
            if (preempt_requested() || failed) { /* dropped: a stop signal, or its data could not be read */
                train_step_rewind(&start, &rng, &train);
                dropped = 1;
                break;
            }
            loss_sum += gpt_forward(&model, train.inputs, train.targets, B, T);
            gpt_backward(&model, train.inputs, train.targets, B, T, 1.0f / accum);
        }
        if (dropped) break;
        float lr = schedule_lr(&sched, step);
        float loss = (float)(loss_sum / accum);
        float norm;
        PROFILE(model.prof, PROF_GRAD_NORM, norm = gpt_grad_norm(&model));
        HealthResult verdict;
        PROFILE(model.prof, PROF_HEALTH, verdict = health_check(&health, &health_config, loss, norm));
        if (verdict.verdict == HEALTH_OK) {
            PROFILE(model.prof, PROF_ADAMW, gpt_update_with_norm(&model, &oc, lr, step + 1 - health.skipped, norm));
            size_t bad;
            PROFILE(model.prof, PROF_HEALTH, bad = health_first_nonfinite(model.params, model.num_params));
            if (bad < model.num_params) {
                exit_status = train_nonfinite_param(c, bad, &model.params[bad], step + 1, saved_step);
                break;
            }
        }
        completed = step + 1;
        double ms = (profile_clock() - t0) * 1000.0;
        double tok_s = (double)total_batch / (ms / 1000.0);
        double gflops = tok_s * flops_per_token * 1e-9;
        if (gflops > peak_gflops) { /* the machine was busy while the peak was measured: this step's rate is the better bound */
            printf("note: step %d ran at %.1f GFLOP/s, above the FMA peak measured at the start (%.1f: the machine was busy then?); "
                   "the peak is now that\n", completed, gflops, peak_gflops);
            peak_gflops = gflops;
        }
        char throughput[64];
        snprintf(throughput, sizeof(throughput), "%.1f GFLOP/s (%.1f%% of peak)", gflops, 100.0 * gflops / peak_gflops);
        StepLine line = {completed, loss, lr, norm, ms, tok_s, evaluated, val_loss};
        double elapsed = train_report_step(&progress, &line, max_steps, throughput);
        train_report_health(&verdict, &health, &health_config, completed, max_steps);
        if (model.prof) {
            model.prof = NULL;
            train_profile_step(&profiling, &profiler, ms / 1000.0);
        }
        train_flush_stdout(&stdout_warned);
        StepRecord record = {completed, loss, lr, norm, (float)ms, (float)tok_s, (long long)completed * total_batch, elapsed,
                             gflops / peak_gflops};
        logger_step_record(&logger, &record);
        if ((exit_status = train_health_stop(&health, &health_config, completed, saved_step)) != 0) break;

        if (train_checkpoint_due(&args, completed, max_steps)) {
            TrainState st = train_state_at(&run, completed, &rng, &health, &train, NULL);
            if (save_checkpoint(&model, args.output_dir, &st, args.keep_last, args.keep_every) == 0) saved_step = completed;
            else if ((exit_status = train_save_failed(save_error_continue, completed == max_steps, "it", saved_step)) != 0) break;
        }
        if ((exit_status = train_log_failed(&logger, save_error_continue, saved_step)) != 0) break;
    }
    train_profile_finish(&profiling, &profiler);
    if (exit_status == 0) exit_status = train_log_failed(&logger, save_error_continue, saved_step); /* a val record's, before an early stop */
    int sig = preempt_requested();
    if (exit_status == 0 && (data_error || (sig && completed < max_steps))) { /* checkpoint the completed steps */
        exit_status = data_error ? DATA_ERROR_EXIT_STATUS : PREEMPT_EXIT_STATUS;
        if (data_error ? train_data_failed(&args, data_error, 0, 1, completed, max_steps, saved_step)
                       : train_preempted(&args, sig, completed, saved_step)) {
            TrainState st = train_state_at(&run, completed, &rng, &health, &train, NULL);
            if (save_checkpoint(&model, args.output_dir, &st, args.keep_last, args.keep_every) != 0) exit_status = train_exit_save_failed(saved_step);
        }
    } else if (exit_status == 0 && args.sample_every > 0) {
        sample_generate(&samples, next_logits_cpu, &model, args.sample_tokens, T, args.temperature, args.top_k, &rng);
    }

    exit_status = train_log_close(&logger, save_error_continue, exit_status);
    sample_setup_free(&samples);
    dataloader_free(&train);
    if (have_val) dataloader_free(&val);
    gpt_free(&model);
    return exit_status;
}
#endif
