/*
 * llmc/checkpoint.h — the model's shape, model files, training-state files and checkpoint
 * directories (formats in doc/formats.md: "Model file", "Training state", "Checkpoint directory").
 *
 * Every reader checks magic, version, length, each header field against the others, the
 * payload CRC (and a training state's header CRC: its header is the run's position) and that every
 * float is finite, and stops with one line naming the file and what is wrong.
 *
 * Writing (doc/reliability.md): every file goes to "<name>.tmp", is flushed and fsynced, then
 * verified — the tmp file is read back and its header, length and payload CRC checked against
 * what was meant to be written — then renamed into place, and the directory fsynced. The
 * *_try_write functions return 0, or −1 with a one-line message and the tmp file removed (disk
 * full, file-size limit, unwritable directory), leaving any earlier file of that name untouched;
 * model_file_write and state_file_write are their fatal forms.
 *
 * A checkpoint is complete once its done marker exists; checkpoint_find_valid walks back from the
 * newest marker and returns the newest checkpoint whose marker, model file and every rank's state
 * file verify, naming each one it skips; checkpoint_retain deletes old checkpoints (keep the last
 * K, plus every M-th step) and debris of interrupted writes. No global state.
 */
#ifndef LLMC_CHECKPOINT_H
#define LLMC_CHECKPOINT_H

#include "llmc/fileio.h"
#include <dirent.h>
#include <math.h>
#include <stdint.h>
#include "llmc/dataloader.h"
#include "llmc/health.h"
#include "llmc/rng.h"
#include "llmc/schedule.h"

#define GPTM_MAGIC 0x4D545047u
#define GPTM_VERSION 1
#define GPTS_MAGIC 0x53545047u
#define GPTS_VERSION 2
#define MODEL_DTYPE_FP32 1
#define MODEL_DTYPE_BF16 2

/* ----------------------------------------------------------------------------
 * model shape and parameter tensors */
typedef struct {
    int max_seq_len, vocab_size, padded_vocab_size, num_layers, num_heads, channels;
} GPTConfig;

#define NUM_PARAM_TENSORS 16
static const char* const GPT_PARAM_NAMES[NUM_PARAM_TENSORS] = {"wte",  "wpe",      "ln1w",     "ln1b", "qkvw", "qkvb",
                                                               "attprojw", "attprojb", "ln2w", "ln2b", "fcw",  "fcb",
                                                               "fcprojw",  "fcprojb",  "lnfw", "lnfb"};

/* GPT_DEFINE_PARAMETER_TENSORS(T) defines, for element type T (the CPU trainer's float, the GPU
 * trainer's floatX), the struct ParameterTensors of the 16 named tensors and point_parameters(p, base,
 * sizes), which points them into one buffer laid out in file order. Shapes: wte (Vp, C), wpe (maxT, C),
 * ln1w ln1b (L, C), qkvw (L, 3C, C), qkvb (L, 3C), attprojw (L, C, C), attprojb (L, C), ln2w ln2b (L, C),
 * fcw (L, 4C, C), fcb (L, 4C), fcprojw (L, C, 4C), fcprojb (L, C), lnfw lnfb (C). */
#define GPT_DEFINE_PARAMETER_TENSORS(T)                                                                                 \
    typedef struct {                                                                                                   \
        T *wte, *wpe, *ln1w, *ln1b, *qkvw, *qkvb, *attprojw, *attprojb, *ln2w, *ln2b, *fcw, *fcb, *fcprojw, *fcprojb, *lnfw, \
            *lnfb;                                                                                                     \
    } ParameterTensors;                                                                                                \
    static void point_parameters(ParameterTensors* p, T* base, const size_t sizes[NUM_PARAM_TENSORS]) {               \
        T** ptrs[NUM_PARAM_TENSORS] = {&p->wte,      &p->wpe,      &p->ln1w, &p->ln1b, &p->qkvw,    &p->qkvb,           \
                                       &p->attprojw, &p->attprojb, &p->ln2w, &p->ln2b, &p->fcw,     &p->fcb,            \
                                       &p->fcprojw,  &p->fcprojb,  &p->lnfw, &p->lnfb};                                  \
        for (int i = 0; i < NUM_PARAM_TENSORS; i++) {                                                                  \
            *ptrs[i] = base;                                                                                           \
            base += sizes[i];                                                                                          \
        }                                                                                                              \
    }

/* element counts of the 16 tensors in file order (shapes in doc/formats.md) */
static inline void gpt_param_sizes(const GPTConfig* c, size_t sizes[NUM_PARAM_TENSORS]) {
    size_t C = (size_t)c->channels, L = (size_t)c->num_layers;
    sizes[0] = (size_t)c->padded_vocab_size * C; /* wte */
    sizes[1] = (size_t)c->max_seq_len * C;       /* wpe */
    sizes[2] = L * C;                            /* ln1w */
    sizes[3] = L * C;                            /* ln1b */
    sizes[4] = L * 3 * C * C;                    /* qkvw */
    sizes[5] = L * 3 * C;                        /* qkvb */
    sizes[6] = L * C * C;                        /* attprojw */
    sizes[7] = L * C;                            /* attprojb */
    sizes[8] = L * C;                            /* ln2w */
    sizes[9] = L * C;                            /* ln2b */
    sizes[10] = L * 4 * C * C;                   /* fcw */
    sizes[11] = L * 4 * C;                       /* fcb */
    sizes[12] = L * C * 4 * C;                   /* fcprojw */
    sizes[13] = L * C;                           /* fcprojb */
    sizes[14] = C;                               /* lnfw */
    sizes[15] = C;                               /* lnfb */
}
static inline size_t gpt_num_params(const GPTConfig* c) {
    size_t sizes[NUM_PARAM_TENSORS], total = 0;
    gpt_param_sizes(c, sizes);
    for (int i = 0; i < NUM_PARAM_TENSORS; i++) total += sizes[i];
    return total;
}
/* Tensor (file order) and element within it of flat parameter index i (i < gpt_num_params). */
static inline void gpt_param_locate(const GPTConfig* c, size_t i, int* tensor, size_t* element) {
    size_t sizes[NUM_PARAM_TENSORS];
    gpt_param_sizes(c, sizes);
    int t = 0;
    while (t < NUM_PARAM_TENSORS - 1 && i >= sizes[t]) i -= sizes[t++];
    *tensor = t;
    *element = i;
}

/* the 2-D weight tensors (matrices and embeddings) get weight decay; biases and LayerNorms don't */
static inline int gpt_param_decays(int t) { return t == 0 || t == 1 || t == 4 || t == 6 || t == 10 || t == 12; }
/* projections into the residual stream: init std scaled by 1/sqrt(2L) */
static inline int gpt_param_is_residual_proj(int t) { return t == 6 || t == 12; }

/* V rounded up to a multiple of 128 */
static inline int padded_vocab(int V) { return (V + 127) / 128 * 128; }

/* GPT-2 family by depth: d6 (C 384, 6 heads), d12 (124M), d24 (350M), d36 (774M), d48 (1558M);
 * V = 50257, Vp = 50304, maxT = 1024. Returns 0 if name is not one of these. */
static inline int gpt_preset(const char* name, GPTConfig* c) {
    static const int presets[5][3] = {{6, 6, 384}, {12, 12, 768}, {24, 16, 1024}, {36, 20, 1280}, {48, 25, 1600}};
    for (int i = 0; i < 5; i++) {
        char preset_name[8];
        snprintf(preset_name, sizeof(preset_name), "d%d", presets[i][0]);
        if (strcmp(name, preset_name) == 0) {
            c->max_seq_len = 1024;
            c->vocab_size = 50257;
            c->padded_vocab_size = padded_vocab(50257);
            c->num_layers = presets[i][0];
            c->num_heads = presets[i][1];
            c->channels = presets[i][2];
            return 1;
        }
    }
    return 0;
}

/* GPT-2 initialisation of params (gpt_num_params floats, file order): weights N(0, 0.02) from an Rng
 * seeded with `seed`, residual projections N(0, 0.02/sqrt(2L)), biases 0, layernorm weights 1,
 * padded vocabulary rows 0. Both trainers start from-scratch runs with it. */
static inline void gpt_init_weights(float* params, const GPTConfig* c, uint64_t seed) {
    size_t sizes[NUM_PARAM_TENSORS];
    gpt_param_sizes(c, sizes);
    Rng rng;
    rng_seed(&rng, seed);
    float* p = params;
    for (int i = 0; i < NUM_PARAM_TENSORS; i++) {
        size_t n = sizes[i];
        const char* name = GPT_PARAM_NAMES[i];
        if (name[0] == 'l' && name[1] == 'n') {
            float value = name[strlen(name) - 1] == 'w' ? 1.0f : 0.0f;
            for (size_t j = 0; j < n; j++) p[j] = value;
        } else if (!gpt_param_decays(i)) {
            memset(p, 0, n * sizeof(float));
        } else {
            float std = gpt_param_is_residual_proj(i) ? 0.02f / sqrtf(2.0f * (float)c->num_layers) : 0.02f;
            rng_fill_normal(&rng, p, n, 0.0f, std);
        }
        p += n;
    }
    size_t C = (size_t)c->channels;
    memset(params + (size_t)c->vocab_size * C, 0, (size_t)(c->padded_vocab_size - c->vocab_size) * C * sizeof(float));
}

/* Sizes positive and sane, C divisible by NH, Vp = padded_vocab(V); fatalf naming origin. */
static inline void gpt_config_check(const GPTConfig* c, const char* origin) {
    struct { const char* name; int value, max; } fields[6] = {
        {"max_seq_len", c->max_seq_len, 1 << 20}, {"vocab_size", c->vocab_size, 1 << 24},
        {"padded_vocab_size", c->padded_vocab_size, 1 << 24}, {"n_layer", c->num_layers, 1024},
        {"n_head", c->num_heads, 1 << 16}, {"n_embd", c->channels, 1 << 17}};
    for (int i = 0; i < 6; i++)
        if (fields[i].value <= 0 || fields[i].value > fields[i].max)
            fatalf("%s: %s = %d is not in [1, %d]", origin, fields[i].name, fields[i].value, fields[i].max);
    if (c->channels % c->num_heads != 0)
        fatalf("%s: n_embd = %d is not divisible by n_head = %d", origin, c->channels, c->num_heads);
    if (c->padded_vocab_size != padded_vocab(c->vocab_size))
        fatalf("%s: padded_vocab_size = %d, expected %d (vocab_size %d rounded up to a multiple of 128)", origin,
               c->padded_vocab_size, padded_vocab(c->vocab_size), c->vocab_size);
    if (gpt_num_params(c) > ((size_t)1 << 40))
        fatalf("%s: %zu parameters is absurdly many", origin, gpt_num_params(c));
}

/* ----------------------------------------------------------------------------
 * non-fatal verification and atomic writes (for checkpoints, whose failure a run may survive) */

/* Checks, without exiting, a file's common header (magic, version), its length against the
 * header's payload size and, with `payload`, the payload's CRC-32 and that a payload of floats (a state
 * file's, an fp32 model file's) is finite: 0 if good, else −1 with the reason in err. The header's words
 * go to header (HEADER_WORDS of them) unless it is NULL. file_verify checks it all. */
static inline int file_verify_(const char* path, const char* kind, uint32_t magic, int32_t version, int32_t* header, int payload,
                               char* err, size_t cap) {
    FILE* f;
    if (fopen_regular_try(&f, path, err, cap) != 0) return -1;
    struct stat sb;
    int32_t h[HEADER_WORDS];
    int rc = -1;
    if (fstat(fileno(f), &sb) != 0) sys_error(err, cap, "%s: stat failed: %s", path, strerror(errno));
    else if (sb.st_size < HEADER_BYTES) file_error_(err, cap, "%s: %s is truncated: %lld bytes, shorter than the header", path, kind, (long long)sb.st_size);
    else if (fread(h, 4, HEADER_WORDS, f) != HEADER_WORDS) sys_error(err, cap, "%s: header read failed", path);
    else if ((uint32_t)h[0] != magic) file_error_(err, cap, "%s: not a %s: magic 0x%08x", path, kind, (uint32_t)h[0]);
    else if (h[1] != version) file_error_(err, cap, "%s: %s version %d, expected %d", path, kind, h[1], version);
    else if (magic == GPTS_MAGIC && (uint32_t)h[HEADER_WORDS - 1] != header_crc(h))
        file_error_(err, cap, "%s: %s header is corrupt: header CRC-32 0x%08x, word 255 says 0x%08x", path, kind, header_crc(h),
                    (uint32_t)h[HEADER_WORDS - 1]);
    else if ((uint64_t)(sb.st_size - HEADER_BYTES) != header_payload_bytes(h))
        file_error_(err, cap, "%s: %s is %s: header says %llu payload bytes, file has %lld", path, kind,
                    (uint64_t)(sb.st_size - HEADER_BYTES) < header_payload_bytes(h) ? "truncated" : "too long",
                    (unsigned long long)header_payload_bytes(h), (long long)(sb.st_size - HEADER_BYTES));
    else if (!payload) rc = 0;
    else {
        size_t piece = 1u << 20, got, floats = 0, bad = SIZE_MAX;
        int finite_floats = magic == GPTS_MAGIC || (magic == GPTM_MAGIC && h[5] == MODEL_DTYPE_FP32);
        float* buf = (float*)malloc_check(piece);
        uint32_t crc = 0;
        while ((got = fread(buf, 1, piece, f)) > 0) {
            crc = crc32_update(crc, buf, got);
            size_t k = finite_floats && bad == SIZE_MAX ? health_first_nonfinite(buf, got / 4) : got / 4;
            if (k < got / 4) bad = floats + k;
            floats += got / 4;
        }
        free(buf);
        if (ferror(f)) sys_error(err, cap, "%s: read failed: %s", path, strerror(errno));
        else if (crc != (uint32_t)h[2])
            file_error_(err, cap, "%s: %s is corrupt: payload CRC-32 0x%08x, header says 0x%08x", path, kind, crc, (uint32_t)h[2]);
        else if (bad != SIZE_MAX) file_error_(err, cap, "%s: %s holds a non-finite value (payload float %zu)", path, kind, bad);
        else rc = 0;
    }
    if (rc == 0 && header) memcpy(header, h, sizeof(h));
    if (fclose(f) != 0 && rc == 0) rc = sys_error(err, cap, "%s: close failed: %s", path, strerror(errno));
    return rc;
}
static inline int file_verify(const char* path, const char* kind, uint32_t magic, int32_t version, int32_t* header, char* err,
                              size_t cap) {
    return file_verify_(path, kind, magic, version, header, 1, err, cap);
}

/* dir_sync (llmc/fileio.h), without exiting */
static inline int dir_sync_(const char* path, char* err, size_t cap) {
    char dir[4096];
    int e = dir_sync(path, dir, sizeof(dir));
    return e ? sys_error(err, cap, "%s: cannot sync the directory: %s", dir, strerror(e)) : 0;
}

/* Writes `pieces` buffers (data[i], bytes[i] bytes each) to path through "<path>.tmp": write, flush,
 * fsync, close; then, if kind is non-NULL, file_verify of the tmp file as that kind (magic,
 * version); then rename over path and fsync the directory. Returns 0, or −1 with the reason in err
 * and the tmp file removed: an earlier file at path is then untouched. */
static inline int atomic_try_write(const char* path, int pieces, const void* const* data, const size_t* bytes,
                                   const char* kind, uint32_t magic, int32_t version, char* err, size_t cap) {
    char tmp[4200];
    if ((size_t)snprintf(tmp, sizeof(tmp), "%s.tmp", path) >= sizeof(tmp)) return file_error_(err, cap, "%s: path too long", path);
    FILE* f = fopen(tmp, "wb");
    if (!f) return sys_error(err, cap, "%s: cannot open for writing: %s", tmp, strerror(errno));
    int rc = 0;
    for (int i = 0; i < pieces && rc == 0; i++)
        if (fwrite(data[i], 1, bytes[i], f) != bytes[i]) rc = sys_error(err, cap, "%s: write failed: %s", tmp, strerror(errno));
    if (rc == 0 && fflush(f) != 0) rc = sys_error(err, cap, "%s: write failed: %s", tmp, strerror(errno));
    if (rc == 0 && fsync(fileno(f)) != 0) rc = sys_error(err, cap, "%s: fsync failed: %s", tmp, strerror(errno));
    if (fclose(f) != 0 && rc == 0) rc = sys_error(err, cap, "%s: close failed: %s", tmp, strerror(errno));
    if (rc == 0 && kind) rc = file_verify(tmp, kind, magic, version, NULL, err, cap);
    if (rc == 0 && rename(tmp, path) != 0) rc = sys_error(err, cap, "%s: rename from %s failed: %s", path, tmp, strerror(errno));
    if (rc != 0) {
        (void)unlink(tmp); /* best effort: err already says what failed */
        return rc;
    }
    return dir_sync_(path, err, cap);
}

/* ----------------------------------------------------------------------------
 * model file (GPTM) */

/* CRC-32 of a model file's header words (its payload CRC among them): what a checkpoint's state file
 * records to tie the model file to it */
static inline uint32_t model_header_crc(const int32_t* h) { return crc32_update(0, h, HEADER_BYTES); }

/* Writes a model file atomically; 0, or −1 with the reason in err. *header_crc (unless NULL): its
 * model_header_crc. */
/* the header of an fp32 model file of params (its payload CRC among its words) */
static inline void model_file_header_(int32_t* h, const GPTConfig* c, const float* params) {
    size_t n = gpt_num_params(c);
    header_init(h, GPTM_MAGIC, GPTM_VERSION);
    header_set_payload(h, (uint64_t)n * sizeof(float), crc32_update(0, params, n * sizeof(float)));
    h[5] = MODEL_DTYPE_FP32;
    h[6] = c->max_seq_len;
    h[7] = c->vocab_size;
    h[8] = c->padded_vocab_size;
    h[9] = c->num_layers;
    h[10] = c->num_heads;
    h[11] = c->channels;
    header_set_u64(h, 12, (uint64_t)n);
}

/* model_header_crc of the fp32 model file of params, without writing it (what every rank's state
 * file of a checkpoint records: the files of one checkpoint name one model) */
static inline uint32_t model_file_crc(const GPTConfig* c, const float* params) {
    int32_t h[HEADER_WORDS];
    model_file_header_(h, c, params);
    return model_header_crc(h);
}

static inline int model_file_try_write(const char* path, const GPTConfig* c, const float* params, uint32_t* header_crc, char* err,
                                       size_t cap) {
    gpt_config_check(c, path);
    size_t n = gpt_num_params(c);
    int32_t h[HEADER_WORDS];
    model_file_header_(h, c, params);
    if (header_crc) *header_crc = model_header_crc(h);
    const void* data[2] = {h, params};
    size_t bytes[2] = {HEADER_BYTES, n * sizeof(float)};
    return atomic_try_write(path, 2, data, bytes, "model file", GPTM_MAGIC, GPTM_VERSION, err, cap);
}
static inline void model_file_write(const char* path, const GPTConfig* c, const float* params) {
    char err[4600];
    if (model_file_try_write(path, c, params, NULL, err, sizeof(err)) != 0) fatalf("%s", err);
}

/* Exits naming the tensor and element if values[0..n) (n parameters of config c) holds a NaN or inf. */
static inline void params_finite_check(const float* values, size_t n, const GPTConfig* c, const char* what) {
    size_t bad = health_first_nonfinite(values, n);
    if (bad == n) return;
    int tensor;
    size_t element;
    gpt_param_locate(c, bad, &tensor, &element);
    fatalf("%s holds a non-finite value %g at %s[%zu] (parameter %zu)", what, (double)values[bad], GPT_PARAM_NAMES[tensor],
           element, bad);
}

/* Opens a GPTM file and checks its header (magic, version, length, dtype, config, parameter count);
 * fills *c and h, returns the file positioned at the payload. */
static inline FILE* model_file_open(const char* path, GPTConfig* c, int32_t* h) {
    FILE* f = fopen_regular_check(path);
    header_read_check(f, path, "model file", GPTM_MAGIC, GPTM_VERSION, h);
    int dtype = h[5];
    if (dtype != MODEL_DTYPE_FP32 && dtype != MODEL_DTYPE_BF16)
        fatalf("%s: model file dtype %d is not 1 (fp32) or 2 (bf16)", path, dtype);
    c->max_seq_len = h[6];
    c->vocab_size = h[7];
    c->padded_vocab_size = h[8];
    c->num_layers = h[9];
    c->num_heads = h[10];
    c->channels = h[11];
    gpt_config_check(c, path);
    size_t n = gpt_num_params(c);
    if (header_get_u64(h, 12) != (uint64_t)n)
        fatalf("%s: model file says %llu parameters, its config has %zu", path,
               (unsigned long long)header_get_u64(h, 12), n);
    size_t elem = dtype == MODEL_DTYPE_FP32 ? 4 : 2;
    if (header_payload_bytes(h) != (uint64_t)n * elem)
        fatalf("%s: model file payload is %llu bytes, %zu parameters of %zu bytes need %zu", path,
               (unsigned long long)header_payload_bytes(h), n, elem, n * elem);
    return f;
}

/* Reads a GPTM file (fp32, or bf16 widened to fp32); fills *c and *num_params, returns the
 * parameters (malloc'd, caller frees). */
static inline float* model_file_read(const char* path, GPTConfig* c, size_t* num_params) {
    int32_t h[HEADER_WORDS];
    FILE* f = model_file_open(path, c, h);
    int dtype = h[5];
    size_t n = gpt_num_params(c), elem = dtype == MODEL_DTYPE_FP32 ? 4 : 2;
    float* params = (float*)malloc_check(n * sizeof(float));
    uint32_t crc = 0;
    payload_read(f, path, params, n * elem, &crc);
    fclose_check(f, path);
    payload_crc_check(h, crc, path, "model file");
    if (dtype == MODEL_DTYPE_BF16) {
        /* widen in place from the back: element i's 2 bytes sit at byte 2i, its 4 at byte 4i ≥ 2i */
        const uint16_t* half = (const uint16_t*)params;
        for (size_t i = n; i-- > 0;) {
            uint32_t bits = (uint32_t)half[i] << 16;
            memcpy(&params[i], &bits, 4);
        }
    }
    char what[4200];
    snprintf(what, sizeof(what), "%s: model file", path);
    params_finite_check(params, n, c, what);
    *num_params = n;
    return params;
}

/* ----------------------------------------------------------------------------
 * training state (GPTS): everything besides the weights that resuming needs */

/* AdamW's settings, as both trainers' update takes them (a TrainState records the same five) */
typedef struct {
    float beta1, beta2, eps, weight_decay, grad_clip;
} OptimizerConfig;

typedef struct {
    int step;                   /* completed optimizer steps */
    int rank, world;
    size_t num_params;          /* of the whole model */
    size_t shard_offset, shard_count; /* this rank's slice of the optimizer state */
    Rng rng;                    /* the trainer's generator */
    DataLoaderState train_loader;
    Schedule schedule;
    float weight_decay, beta1, beta2, eps, grad_clip;
    int has_master;             /* payload has fp32 master weights of the shard */
    HealthState health;         /* the health guard's window and skip counts (llmc/health.h) */
    /* what the training loader's position counts in: sequence length, tokens per optimizer step (one
     * loader batch), shuffle, mock data, and the training data's token and shard counts */
    int seq_len;
    uint64_t step_tokens;
    int shuffle, mock;
    uint64_t data_tokens;
    int data_shards;
    uint32_t data_crc; /* the training loader's fingerprint (llmc/dataloader.h): which shards, in which order */
    int seed;          /* --seed of the run (init, data order, sampling); −1: not recorded (an older file); a resume must keep it */
    int val_every;     /* --val-every (its evaluations are what --early-stop counts); −1: not recorded (an older file) */
    int master_weights; /* --master-weights of the run (1: fp32 weights, as the fp32 builds' are); −1: not recorded */
    int precision;     /* bytes of a weight in the trainer's forward: 4 (the CPU trainer, fp32 builds) or 2 (bf16); 0: not recorded */
    uint64_t val_tokens; /* tokens an evaluation averages over (validation batches x B x T x ranks); 0: no evaluation, or not recorded */
    uint32_t val_crc;  /* the validation loader's fingerprint; 0: mock data, no evaluation, or not recorded */
    int has_model_crc; /* model_crc is recorded: every rank's file of a checkpoint (0 in older files) */
    uint32_t model_crc; /* model_header_crc of the checkpoint's model file: a model file of another step, or a state
                         * file of another run or step, is not taken */
} TrainState;

/* header words of the health state: count, bad in a row, skipped, then the loss and norm windows */
#define GPTS_HEALTH_WORD 48
#define GPTS_HEALTH_LOSS_WORD (GPTS_HEALTH_WORD + 3)
#define GPTS_HEALTH_NORM_WORD (GPTS_HEALTH_LOSS_WORD + HEALTH_WINDOW_MAX)
#define GPTS_DATA_WORD (GPTS_HEALTH_NORM_WORD + HEALTH_WINDOW_MAX) /* seq_len, step_tokens, shuffle, mock, data */

static inline void state_put_rng_(int32_t* h, int at, const Rng* r) {
    for (int i = 0; i < 4; i++) header_set_u64(h, at + 2 * i, r->s[i]);
}
static inline void state_get_rng_(const int32_t* h, int at, Rng* r) {
    for (int i = 0; i < 4; i++) r->s[i] = header_get_u64(h, at + 2 * i);
}

/* header words of the state file (doc/formats.md "Training state") */
static inline void state_header_fill_(int32_t* h, const TrainState* st) {
    h[5] = st->step;
    h[6] = st->rank;
    h[7] = st->world;
    header_set_u64(h, 8, (uint64_t)st->num_params);
    header_set_u64(h, 10, (uint64_t)st->shard_offset);
    header_set_u64(h, 12, (uint64_t)st->shard_count);
    state_put_rng_(h, 14, &st->rng);
    header_set_u64(h, 22, st->train_loader.epoch);
    header_set_u64(h, 24, st->train_loader.shard);
    header_set_u64(h, 26, st->train_loader.batch);
    state_put_rng_(h, 28, &st->train_loader.rng);
    h[36] = (int32_t)st->schedule.kind;
    h[37] = st->schedule.warmup;
    h[38] = st->schedule.total;
    header_set_f32(h, 39, st->schedule.max_lr);
    header_set_f32(h, 40, st->schedule.final_frac);
    header_set_f32(h, 41, st->schedule.wsd_frac);
    header_set_f32(h, 42, st->weight_decay);
    header_set_f32(h, 43, st->beta1);
    header_set_f32(h, 44, st->beta2);
    header_set_f32(h, 45, st->eps);
    header_set_f32(h, 46, st->grad_clip);
    h[47] = st->has_master;
    h[GPTS_HEALTH_WORD] = st->health.count;
    h[GPTS_HEALTH_WORD + 1] = st->health.bad_in_row;
    h[GPTS_HEALTH_WORD + 2] = st->health.skipped;
    for (int i = 0; i < st->health.count; i++) {
        header_set_f32(h, GPTS_HEALTH_LOSS_WORD + i, st->health.loss[i]);
        header_set_f32(h, GPTS_HEALTH_NORM_WORD + i, st->health.norm[i]);
    }
    h[GPTS_DATA_WORD] = st->seq_len;
    header_set_u64(h, GPTS_DATA_WORD + 1, st->step_tokens);
    h[GPTS_DATA_WORD + 3] = st->shuffle;
    h[GPTS_DATA_WORD + 4] = st->mock;
    header_set_u64(h, GPTS_DATA_WORD + 5, st->data_tokens);
    h[GPTS_DATA_WORD + 7] = st->data_shards;
    h[GPTS_DATA_WORD + 8] = (int32_t)st->data_crc;
    h[GPTS_DATA_WORD + 9] = (int32_t)((uint32_t)st->seed + 1u); /* 0 in older files; unsigned: --seed INT_MAX wraps, no UB */
    h[GPTS_DATA_WORD + 10] = (int32_t)((uint32_t)st->val_every + 1u);
    h[GPTS_DATA_WORD + 11] = st->has_model_crc;
    h[GPTS_DATA_WORD + 12] = st->has_model_crc ? (int32_t)st->model_crc : 0;
    h[GPTS_DATA_WORD + 13] = (int32_t)((uint32_t)st->master_weights + 1u);
    h[GPTS_DATA_WORD + 14] = st->precision;
    header_set_u64(h, GPTS_DATA_WORD + 15, st->val_tokens);
    h[GPTS_DATA_WORD + 17] = (int32_t)st->val_crc;
}

/* Writes m, v (and master if st->has_master; it must then be non-NULL), shard_count floats each. */
static inline int state_file_try_write(const char* path, const TrainState* st, const float* m, const float* v,
                                       const float* master, char* err, size_t cap) {
    if (st->has_master && !master) fatalf("%s: state has_master is set but no master weights were given", path);
    if (st->health.count < 0 || st->health.count > HEALTH_WINDOW_MAX)
        fatalf("%s: health window of %d steps is not in [0, %d]", path, st->health.count, HEALTH_WINDOW_MAX);
    size_t n = st->shard_count;
    int32_t h[HEADER_WORDS];
    header_init(h, GPTS_MAGIC, GPTS_VERSION);
    state_header_fill_(h, st);
    const float* arrays[3] = {m, v, master};
    int num_arrays = st->has_master ? 3 : 2;
    uint32_t crc = 0;
    for (int i = 0; i < num_arrays; i++) crc = crc32_update(crc, arrays[i], n * sizeof(float));
    header_set_payload(h, (uint64_t)n * sizeof(float) * num_arrays, crc);
    h[HEADER_WORDS - 1] = (int32_t)header_crc(h);
    const void* data[4] = {h, m, v, master};
    size_t bytes[4] = {HEADER_BYTES, n * sizeof(float), n * sizeof(float), n * sizeof(float)};
    return atomic_try_write(path, 1 + num_arrays, data, bytes, "training state file", GPTS_MAGIC, GPTS_VERSION, err, cap);
}
static inline void state_file_write(const char* path, const TrainState* st, const float* m, const float* v,
                                    const float* master) {
    char err[4600];
    if (state_file_try_write(path, st, m, v, master, err, sizeof(err)) != 0) fatalf("%s", err);
}

/* Opens a state file and checks its header (every field, the payload's length); fills *st and h,
 * returns the file positioned at the payload. */
static inline FILE* state_file_open(const char* path, TrainState* st, int32_t* h) {
    FILE* f = fopen_regular_check(path);
    header_read_check(f, path, "training state file", GPTS_MAGIC, GPTS_VERSION, h);
    if ((uint32_t)h[HEADER_WORDS - 1] != header_crc(h))
        fatalf("%s: training state header is corrupt: header CRC-32 0x%08x, word 255 says 0x%08x", path, header_crc(h),
               (uint32_t)h[HEADER_WORDS - 1]);
    memset(st, 0, sizeof(*st));
    st->step = h[5];
    st->rank = h[6];
    st->world = h[7];
    uint64_t num_params = header_get_u64(h, 8), offset = header_get_u64(h, 10), count = header_get_u64(h, 12);
    state_get_rng_(h, 14, &st->rng);
    st->train_loader.epoch = header_get_u64(h, 22);
    st->train_loader.shard = header_get_u64(h, 24);
    st->train_loader.batch = header_get_u64(h, 26);
    state_get_rng_(h, 28, &st->train_loader.rng);
    st->schedule.warmup = h[37];
    st->schedule.total = h[38];
    st->schedule.max_lr = header_get_f32(h, 39);
    st->schedule.final_frac = header_get_f32(h, 40);
    st->schedule.wsd_frac = header_get_f32(h, 41);
    st->weight_decay = header_get_f32(h, 42);
    st->beta1 = header_get_f32(h, 43);
    st->beta2 = header_get_f32(h, 44);
    st->eps = header_get_f32(h, 45);
    st->grad_clip = header_get_f32(h, 46);
    st->has_master = h[47];
    if (st->step < 0) fatalf("%s: training state step %d is negative", path, st->step);
    if (st->world < 1 || st->rank < 0 || st->rank >= st->world)
        fatalf("%s: training state rank %d is not in [0, world=%d)", path, st->rank, st->world);
    if (num_params == 0 || num_params > ((uint64_t)1 << 40))
        fatalf("%s: training state has %llu parameters", path, (unsigned long long)num_params);
    if (offset > num_params || count > num_params - offset)
        fatalf("%s: training state shard [%llu, %llu) is outside the %llu parameters", path,
               (unsigned long long)offset, (unsigned long long)(offset + count), (unsigned long long)num_params);
    if (h[36] < 0 || h[36] >= SCHED_NUM_KINDS) fatalf("%s: training state schedule kind %d is unknown", path, h[36]);
    st->schedule.kind = (ScheduleKind)h[36];
    if (st->schedule.warmup < 0 || st->schedule.total < 0)
        fatalf("%s: training state warmup %d / total %d is negative", path, st->schedule.warmup, st->schedule.total);
    for (int w = 39; w <= 46; w++)
        if (!isfinite(header_get_f32(h, w))) fatalf("%s: training state header word %d is not a finite float", path, w);
    if (st->has_master != 0 && st->has_master != 1)
        fatalf("%s: training state master-weights flag is %d, not 0 or 1", path, st->has_master);
    HealthState* hs = &st->health;
    hs->count = h[GPTS_HEALTH_WORD];
    hs->bad_in_row = h[GPTS_HEALTH_WORD + 1];
    hs->skipped = h[GPTS_HEALTH_WORD + 2];
    if (hs->count < 0 || hs->count > HEALTH_WINDOW_MAX || hs->bad_in_row < 0 || hs->skipped < hs->bad_in_row)
        fatalf("%s: training state health counts (window %d, bad in a row %d, skipped %d) are inconsistent", path,
               hs->count, hs->bad_in_row, hs->skipped);
    for (int i = 0; i < hs->count; i++) {
        hs->loss[i] = header_get_f32(h, GPTS_HEALTH_LOSS_WORD + i);
        hs->norm[i] = header_get_f32(h, GPTS_HEALTH_NORM_WORD + i);
        if (!isfinite(hs->loss[i]) || !isfinite(hs->norm[i]))
            fatalf("%s: training state health window entry %d is not finite", path, i);
    }
    st->seq_len = h[GPTS_DATA_WORD];
    st->step_tokens = header_get_u64(h, GPTS_DATA_WORD + 1);
    st->shuffle = h[GPTS_DATA_WORD + 3];
    st->mock = h[GPTS_DATA_WORD + 4];
    st->data_tokens = header_get_u64(h, GPTS_DATA_WORD + 5);
    st->data_shards = h[GPTS_DATA_WORD + 7];
    st->data_crc = (uint32_t)h[GPTS_DATA_WORD + 8];
    st->seed = (int)((uint32_t)h[GPTS_DATA_WORD + 9] - 1u);
    st->val_every = (int)((uint32_t)h[GPTS_DATA_WORD + 10] - 1u);
    st->has_model_crc = h[GPTS_DATA_WORD + 11];
    st->model_crc = (uint32_t)h[GPTS_DATA_WORD + 12];
    st->master_weights = (int)((uint32_t)h[GPTS_DATA_WORD + 13] - 1u);
    st->precision = h[GPTS_DATA_WORD + 14];
    st->val_tokens = header_get_u64(h, GPTS_DATA_WORD + 15);
    st->val_crc = (uint32_t)h[GPTS_DATA_WORD + 17];
    if (st->precision != 0 && st->precision != 2 && st->precision != 4)
        fatalf("%s: training state precision word is %d, not 0, 2 or 4", path, st->precision);
    if (st->has_model_crc != 0 && st->has_model_crc != 1)
        fatalf("%s: training state model-file flag is %d, not 0 or 1", path, st->has_model_crc);
    if (st->seq_len < 1 || st->step_tokens < (uint64_t)st->seq_len || (st->shuffle != 0 && st->shuffle != 1) ||
        (st->mock != 0 && st->mock != 1) || st->data_shards < 0)
        fatalf("%s: training state data fields (seq_len %d, tokens per step %llu, shuffle %d, mock %d, %d shards) are inconsistent",
               path, st->seq_len, (unsigned long long)st->step_tokens, st->shuffle, st->mock, st->data_shards);
    uint64_t arrays = st->has_master ? 3 : 2;
    if (header_payload_bytes(h) != arrays * count * sizeof(float))
        fatalf("%s: training state payload is %llu bytes, %llu arrays of %llu floats need %llu", path,
               (unsigned long long)header_payload_bytes(h), (unsigned long long)arrays, (unsigned long long)count,
               (unsigned long long)(arrays * count * sizeof(float)));
    st->num_params = (size_t)num_params;
    st->shard_offset = (size_t)offset;
    st->shard_count = (size_t)count;
    return f;
}

/* exits naming the first non-finite value of a state file's array `a` (0 m, 1 v, 2 master weights),
 * whose first element is parameter `first` */
static inline void state_finite_check_(const char* path, int a, const float* x, size_t n, size_t first) {
    static const char* const names[3] = {"AdamW m", "AdamW v", "master weights"};
    size_t bad = health_first_nonfinite(x, n);
    if (bad < n)
        fatalf("%s: training state %s holds a non-finite value at parameter %llu", path, names[a], (unsigned long long)(first + bad));
}

/* AdamW m and v of parameters [lo, hi), a range inside the file's shard, into m and v (hi − lo
 * floats each), from f, opened by state_file_open (its header in *st). Reads those bytes only: no
 * payload CRC (a resume verified the whole checkpoint first, llmc/train_setup.h). */
static inline void state_file_read_range(FILE* f, const char* path, const TrainState* st, size_t lo, size_t hi, float* m, float* v) {
    if (lo > hi || lo < st->shard_offset || hi > st->shard_offset + st->shard_count)
        fatalf("%s: parameters [%zu, %zu) are not in the file's shard [%zu, %zu)", path, lo, hi, st->shard_offset,
               st->shard_offset + st->shard_count);
    float* dst[2] = {m, v};
    for (int a = 0; a < 2 && hi > lo; a++) {
        fseek_check(f, (long long)HEADER_BYTES + (long long)((a * st->shard_count + lo - st->shard_offset) * sizeof(float)), SEEK_SET, path);
        payload_read(f, path, dst[a], (hi - lo) * sizeof(float), NULL);
        state_finite_check_(path, a, dst[a], hi - lo, lo);
    }
}

/* Compares the run-defining fields of a saved state with the current run's; prints one line per
 * difference to `report` ("<path>: <setting> was X, now Y", the setting as its flag where it has one)
 * and returns how many differ. The trainer decides whether a difference is fatal. Floats are
 * compared exactly (both went through float). */
static inline int state_compare(const char* path, const TrainState* saved, const TrainState* now, FILE* report) {
    int diffs = 0;
#define STATE_CMP_INT_(field, label)                                                                                \
    if ((long long)saved->field != (long long)now->field) {                                                         \
        fprintf(report, "%s: %s was %lld, now %lld\n", path, label, (long long)saved->field, (long long)now->field); \
        diffs++;                                                                                                    \
    }
#define STATE_CMP_HEX_(field, label)                                                                                      \
    if (saved->field != now->field) {                                                                                     \
        fprintf(report, "%s: %s was 0x%08x, now 0x%08x\n", path, label, (unsigned)saved->field, (unsigned)now->field); \
        diffs++;                                                                                                          \
    }
#define STATE_CMP_F32_(field, label)                                                                             \
    if (saved->field != now->field) {                                                                            \
        fprintf(report, "%s: %s was %.9g, now %.9g\n", path, label, (double)saved->field, (double)now->field); \
        diffs++;                                                                                                 \
    }
    STATE_CMP_INT_(world, "ranks")
    STATE_CMP_INT_(num_params, "model parameters")
    STATE_CMP_INT_(shard_offset, "optimizer shard offset")
    STATE_CMP_INT_(shard_count, "optimizer shard size")
    if (saved->schedule.kind != now->schedule.kind) {
        fprintf(report, "%s: --lr-schedule was %s, now %s\n", path, schedule_name(saved->schedule.kind), schedule_name(now->schedule.kind));
        diffs++;
    }
    STATE_CMP_INT_(schedule.warmup, "--warmup")
    STATE_CMP_INT_(schedule.total, "the schedule's steps (--max-steps)")
    STATE_CMP_F32_(schedule.max_lr, "--lr (after --lr-scale)")
    STATE_CMP_F32_(schedule.final_frac, "--final-lr-frac")
    STATE_CMP_F32_(schedule.wsd_frac, "--wsd-frac")
    STATE_CMP_F32_(weight_decay, "--weight-decay")
    STATE_CMP_F32_(beta1, "--beta1")
    STATE_CMP_F32_(beta2, "--beta2")
    STATE_CMP_F32_(eps, "--eps")
    STATE_CMP_F32_(grad_clip, "--grad-clip")
    STATE_CMP_INT_(has_master, "fp32 master weights in the state")
    STATE_CMP_INT_(seq_len, "--seq-len")
    STATE_CMP_INT_(step_tokens, "tokens per step (--total-batch)")
    STATE_CMP_INT_(shuffle, "--shuffle")
    STATE_CMP_INT_(mock, "--mock-data")
    if (!(saved->mock && now->mock)) STATE_CMP_INT_(data_tokens, "training data tokens") /* mock: follows the window */
    STATE_CMP_INT_(data_shards, "training data shards")
    if (saved->data_crc != 0) /* 0: mock data, or a checkpoint older than the field */
        STATE_CMP_HEX_(data_crc, "training data fingerprint (the shards' contents and order)")
    if (saved->val_every >= 0) STATE_CMP_INT_(val_every, "--val-every")
    if (saved->master_weights >= 0) STATE_CMP_INT_(master_weights, "--master-weights")
    if (saved->precision != 0 && saved->precision != now->precision) {
        fprintf(report, "%s: precision was %s, now %s\n", path, saved->precision == 2 ? "bf16" : "fp32", now->precision == 2 ? "bf16" : "fp32");
        diffs++;
    }
    if (saved->val_tokens != 0 && now->val_tokens != 0) { /* both evaluate: are their losses comparable? */
        STATE_CMP_INT_(val_tokens, "tokens an evaluation averages (--val-batches x B x T x ranks)")
        if (saved->val_crc != 0) STATE_CMP_HEX_(val_crc, "validation data fingerprint (--val-data)")
    }
#undef STATE_CMP_INT_
#undef STATE_CMP_HEX_
#undef STATE_CMP_F32_
    return diffs;
}

/* ----------------------------------------------------------------------------
 * checkpoint directory: model_%08d.bin, state_%08d_%05d.bin (per rank), done_%08d.txt */
static inline void checkpoint_paths(char* model, char* state, char* done, size_t cap, const char* dir, int step,
                                    int rank) {
    if ((size_t)snprintf(model, cap, "%s/model_%08d.bin", dir, step) >= cap ||
        (size_t)snprintf(state, cap, "%s/state_%08d_%05d.bin", dir, step, rank) >= cap ||
        (size_t)snprintf(done, cap, "%s/done_%08d.txt", dir, step) >= cap)
        fatalf("%s: checkpoint path longer than %zu bytes", dir, cap);
}

/* The step's completion marker, written (atomically) after every rank's files of the step are
 * complete. Its text: "step S\nworld W\n". */
static inline int checkpoint_try_mark_done(const char* dir, int step, int world, char* err, size_t cap) {
    char model[4096], state[4096], done[4096], text[64];
    checkpoint_paths(model, state, done, sizeof(done), dir, step, 0);
    const void* data[1] = {text};
    size_t bytes[1] = {(size_t)snprintf(text, sizeof(text), "step %d\nworld %d\n", step, world)};
    return atomic_try_write(done, 1, data, bytes, NULL, 0, 0, err, cap);
}
static inline void checkpoint_mark_done(const char* dir, int step, int world) {
    char err[4600];
    if (checkpoint_try_mark_done(dir, step, world, err, sizeof(err)) != 0) fatalf("%s", err);
}

/* Called before writing checkpoint `step`: removes its marker if one is left from an earlier run
 * (a checkpoint skipped as invalid on resume), so the step is incomplete until rewritten. */
static inline int checkpoint_begin(const char* dir, int step, char* err, size_t cap) {
    char model[4200], state[4200], done[4200];
    checkpoint_paths(model, state, done, sizeof(model), dir, step, 0);
    if (unlink(done) != 0 && errno != ENOENT) return sys_error(err, cap, "%s: cannot delete: %s", done, strerror(errno));
    return 0;
}

/* After a failed write of checkpoint `step` whose checkpoint_begin succeeded: deletes this rank's files
 * of it, its state file and on rank 0 the marker (first: one renamed into place whose directory sync then
 * failed) and the model file, so that a failed save leaves nothing behind to take the room (a disk that was
 * full) the next save needs. A failed deletion is reported. With `final` (the run's last step: no save
 * follows) a model file written whole is kept, said on stderr: the trained weights. */
static inline void checkpoint_abandon(const char* dir, int step, int rank, int final) {
    char model[4200], state[4200], done[4200];
    checkpoint_paths(model, state, done, sizeof(model), dir, step, rank);
    int keep_model = rank == 0 && final && access(model, F_OK) == 0;
    const char* paths[3] = {done, state, model};
    for (int i = rank == 0 ? 0 : 1; i < (rank == 0 && !keep_model ? 3 : 2); i++)
        if (unlink(paths[i]) != 0 && errno != ENOENT) fprintf(stderr, "warning: cannot delete %s: %s\n", paths[i], strerror(errno));
    if (keep_model)
        fprintf(stderr, "note: %s is kept: the final weights (for --init or sampling; not a checkpoint: a resumed run deletes it)\n",
                model);
}

/* Parses a done marker: 0 and *world if its text is exactly "step S\nworld W\n" with W in
 * [1, 65536], else −1 with the reason in err. */
static inline int checkpoint_read_marker(const char* path, int step, int* world, char* err, size_t cap) {
    FILE* f;
    if (fopen_regular_try(&f, path, err, cap) != 0) return -1; /* a FIFO there: an error, not a wait for ever */
    char text[65], expected[64];
    size_t n = fread(text, 1, 64, f);
    int failed = ferror(f);
    if (fclose(f) != 0) failed = 1;
    if (failed) return sys_error(err, cap, "%s: read failed: %s", path, strerror(errno));
    text[n] = '\0';
    int s = -1, w = 0;
    if (sscanf(text, "step %d\nworld %d\n", &s, &w) != 2 || w < 1 || w > 65536)
        return file_error_(err, cap, "%s: done marker is malformed", path);
    snprintf(expected, sizeof(expected), "step %d\nworld %d\n", step, w);
    if (strlen(text) != n || strcmp(text, expected) != 0)
        return file_error_(err, cap, "%s: done marker is not \"step %d, world %d\"", path, step, w);
    *world = w;
    return 0;
}

/* Step of a checkpoint file name "model_S.bin", "state_S_R.bin", "done_S.txt" (or any of them
 * with ".tmp" appended); −1 for other names. *is_tmp tells whether it ends in ".tmp". */
static inline int checkpoint_file_step_(const char* name, int* is_tmp) {
    static const char* const prefixes[3] = {"model_", "state_", "done_"};
    static const char* const suffixes[3] = {".bin", "_#####.bin", ".txt"}; /* after the step's 8 digits; '#': a digit */
    size_t len = strlen(name);
    *is_tmp = len > 4 && strcmp(name + len - 4, ".tmp") == 0;
    if (*is_tmp) len -= 4;
    for (int p = 0; p < 3; p++) {
        size_t pl = strlen(prefixes[p]), sl = strlen(suffixes[p]);
        if (strncmp(name, prefixes[p], pl) != 0 || len != pl + 8 + sl) continue;
        int step = 0;
        for (size_t i = pl; i < pl + 8 + sl; i++) {
            char want = i < pl + 8 ? '#' : suffixes[p][i - pl - 8];
            if (want == '#' ? name[i] < '0' || name[i] > '9' : name[i] != want) return -1;
            if (i < pl + 8) step = step * 10 + (name[i] - '0');
        }
        return step;
    }
    return -1;
}

/* The steps S of dir's files named "<prefix>S..." as checkpoint_file_step_ reads them (no ".tmp" ones), newest
 * first, malloc'd into *steps (caller frees); returns how many, 0 if none or no such directory. */
static inline int checkpoint_steps_(const char* dir, const char* prefix, int** steps) {
    *steps = NULL;
    DIR* d = opendir(dir);
    if (!d) {
        if (errno == ENOENT) return 0;
        sys_fatalf("%s: cannot list directory: %s", dir, strerror(errno));
    }
    int n = 0, cap = 0;
    struct dirent* e;
    while ((errno = 0, e = readdir(d)) != NULL) {
        int is_tmp, step = checkpoint_file_step_(e->d_name, &is_tmp);
        if (step < 0 || is_tmp || strncmp(e->d_name, prefix, strlen(prefix)) != 0) continue;
        if (n == cap) {
            cap = cap ? 2 * cap : 16;
            *steps = (int*)realloc_check(*steps, (size_t)cap * sizeof(int));
        }
        int i = n++; /* insertion, newest first */
        for (; i > 0 && (*steps)[i - 1] < step; i--) (*steps)[i] = (*steps)[i - 1];
        (*steps)[i] = step;
    }
    if (errno != 0) sys_fatalf("%s: cannot list directory: %s", dir, strerror(errno));
    if (closedir(d) != 0) sys_fatalf("%s: cannot close directory: %s", dir, strerror(errno));
    return n;
}
/* How many steps have checkpoint files (not ".tmp" ones) in dir */
static inline int checkpoint_steps_with_files(const char* dir) {
    int* steps;
    int n = checkpoint_steps_(dir, "", &steps), distinct = 0;
    for (int i = 0; i < n; i++) distinct += i == 0 || steps[i] != steps[i - 1];
    free(steps);
    return distinct;
}
/* The steps S of every done_S.txt marker (exactly 8 digits) in dir, newest first (checkpoint_steps_). */
static inline int checkpoint_list(const char* dir, int** steps) { return checkpoint_steps_(dir, "done_", steps); }

/* The files of checkpoint `step` of `world` ranks, its marker aside, as checkpoint_verify_ checks them. */
static inline int checkpoint_verify_files_(const char* dir, int step, int world, int full, int32_t* mh, char* err, size_t cap) {
    char model[4200], state[4200], done[4200];
    checkpoint_paths(model, state, done, sizeof(model), dir, step, 0);
    int32_t sh[HEADER_WORDS] = {0};
    if (file_verify_(model, "model file", GPTM_MAGIC, GPTM_VERSION, mh, full, err, cap) != 0) return -1;
    for (int r = 0; r < (full ? world : 0); r++) {
        checkpoint_paths(model, state, done, sizeof(model), dir, step, r);
        if (file_verify(state, "training state file", GPTS_MAGIC, GPTS_VERSION, sh, err, cap) != 0) return -1;
        if (sh[5] != step || sh[6] != r || sh[7] != world)
            return file_error_(err, cap, "%s: training state file of step %d, rank %d of %d, expected step %d, rank %d of %d", state,
                               sh[5], sh[6], sh[7], step, r, world);
        if (sh[GPTS_DATA_WORD + 11] == 1 && (uint32_t)sh[GPTS_DATA_WORD + 12] != model_header_crc(mh))
            return file_error_(err, cap,
                               "%s and %s are not of one checkpoint (a file of another run or step): the model file's header CRC-32 is "
                               "0x%08x, the state file recorded 0x%08x",
                               model, state, model_header_crc(mh), (uint32_t)sh[GPTS_DATA_WORD + 12]);
    }
    return 0;
}
/* Checks checkpoint `step` of dir without exiting: its marker, the model file and the state file of
 * every rank verify (header, length, CRC), each state file names this step, its rank and the marker's
 * world, and the model file is the one every state file recorded (a model file of another step or a
 * changed header is not; nor is a state file of another run, whose weights differ). 0 if good, else −1
 * with the first problem in err. full = 0: only the marker and the model file's header and length (no
 * payload pass: cheap enough for every rank), that header into mh. */
static inline int checkpoint_verify_(const char* dir, int step, int full, int32_t* mh, char* err, size_t cap) {
    char model[4200], state[4200], done[4200];
    checkpoint_paths(model, state, done, sizeof(model), dir, step, 0);
    int world = 0;
    if (checkpoint_read_marker(done, step, &world, err, cap) != 0) return -1;
    return checkpoint_verify_files_(dir, step, world, full, mh, err, cap);
}
static inline int checkpoint_verify(const char* dir, int step, char* err, size_t cap) {
    int32_t mh[HEADER_WORDS];
    return checkpoint_verify_(dir, step, 1, mh, err, cap);
}

/* The newest checkpoint of dir that passes checkpoint_verify_ (full or not; the model header into mh), walking
 * back from the newest marker and printing one line to report (unless NULL) for each one skipped and why; −1 if
 * none. *markers: how many checkpoints (markers) there are, valid or not. */
static inline int checkpoint_find_(const char* dir, int full, FILE* report, int* markers, int32_t* mh) {
    int* steps;
    int n = checkpoint_list(dir, &steps), found = -1;
    *markers = n;
    for (int i = 0; i < n && found < 0; i++) {
        char err[4600];
        if (checkpoint_verify_(dir, steps[i], full, mh, err, sizeof(err)) == 0) found = steps[i];
        else if (report) fprintf(report, "resume: skipping checkpoint of step %d: %s\n", steps[i], err);
    }
    free(steps);
    return found;
}
/* the newest checkpoint that verifies in full */
static inline int checkpoint_find_valid(const char* dir, FILE* report, int* markers) {
    int32_t mh[HEADER_WORDS];
    return checkpoint_find_(dir, 1, report, markers, mh);
}
/* the newest checkpoint whose marker reads and whose model file's header and length are right, its model header
 * in h (no payload pass: cheap on every rank; the resume then verifies a checkpoint in full) */
static inline int checkpoint_newest_model(const char* dir, FILE* report, int* markers, int32_t* h) {
    return checkpoint_find_(dir, 0, report, markers, h);
}

/* Deletes the debris of dir: every ".tmp" file, and the files of the steps without a marker, but those
 * of `newest` and, unless `only`, of the steps after it. Returns how many files it deleted. */
static inline int checkpoint_sweep_(const char* dir, int newest, int only, FILE* report) {
    DIR* d = opendir(dir);
    if (!d) sys_fatalf("%s: cannot list directory: %s", dir, strerror(errno));
    struct dirent* e;
    int deleted = 0;
    while ((errno = 0, e = readdir(d)) != NULL) {
        int is_tmp, step = checkpoint_file_step_(e->d_name, &is_tmp);
        if (step < 0 || (!is_tmp && (step == newest || (!only && step > newest)))) continue;
        char model[4200], state[4200], done[4200], path[4400];
        checkpoint_paths(model, state, done, sizeof(model), dir, step, 0);
        if (!is_tmp && access(done, F_OK) == 0) continue; /* a kept checkpoint */
        snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
        if (unlink(path) == 0) deleted++;
        else if (errno != ENOENT) fprintf(report, "checkpoint: cannot delete %s: %s\n", path, strerror(errno));
    }
    if (errno != 0) sys_fatalf("%s: cannot list directory: %s", dir, strerror(errno));
    if (closedir(d) != 0) sys_fatalf("%s: cannot close directory: %s", dir, strerror(errno));
    return deleted;
}

/* Present in a checkpoint directory while checkpoint_adopt writes its markers: a run that finds it resumes the adoption */
#define CHECKPOINT_ADOPTING ".adopting"

/* The steps of dir's model files without a marker, newest first, malloc'd into *steps (caller frees), if dir has no
 * marker at all or an adoption was cut short there (CHECKPOINT_ADOPTING); else none; returns how many. Where markers
 * exist, a step without one is an unfinished write, a retention's leftover (its marker goes first) or a checkpoint the
 * user discarded by deleting its marker: the sweep's. Without any, the files are a copy without its markers, or the
 * first checkpoint of a run stopped just before its marker. */
static inline int checkpoint_unmarked_models_(const char* dir, int** steps) {
    int* marked;
    int n_marked = checkpoint_list(dir, &marked), n = 0;
    char sentinel[4200];
    snprintf(sentinel, sizeof(sentinel), "%s/%s", dir, CHECKPOINT_ADOPTING);
    *steps = NULL;
    if (n_marked == 0 || access(sentinel, F_OK) == 0) {
        int all = checkpoint_steps_(dir, "model_", steps);
        for (int i = 0; i < all; i++) {
            int has_marker = 0;
            for (int j = 0; j < n_marked; j++) has_marker |= marked[j] == (*steps)[i];
            if (!has_marker) (*steps)[n++] = (*steps)[i];
        }
    }
    free(marked);
    return n;
}

/* What the headers alone say of unmarked step `step` of dir: its model file's header and length are right (the header
 * into mh), and its rank-0 state file's header (into sh) names a world of 1 to 65536 ranks and records the model file's
 * header CRC (a state file of another step, run or an older version cannot be told to go with this model file). 0, or
 * −1 with the reason in err. */
static inline int checkpoint_unmarked_headers_(const char* dir, int step, int32_t* mh, int32_t* sh, char* err, size_t cap) {
    char model[4200], state[4200], done[4200];
    checkpoint_paths(model, state, done, sizeof(model), dir, step, 0);
    if (file_verify_(model, "model file", GPTM_MAGIC, GPTM_VERSION, mh, 0, err, cap) != 0 ||
        file_verify_(state, "training state file", GPTS_MAGIC, GPTS_VERSION, sh, 0, err, cap) != 0)
        return -1;
    if (sh[7] < 1 || sh[7] > 65536) return file_error_(err, cap, "%s: world size %d (1 to 65536)", state, sh[7]);
    if (sh[GPTS_DATA_WORD + 11] != 1)
        return file_error_(err, cap, "%s records no model file CRC (an older version's): without a marker, nothing ties %s to it",
                           state, model);
    if ((uint32_t)sh[GPTS_DATA_WORD + 12] != model_header_crc(mh))
        return file_error_(err, cap, "%s and %s are not of one checkpoint: the model file's header CRC-32 is 0x%08x, the state file "
                           "recorded 0x%08x", model, state, model_header_crc(mh), (uint32_t)sh[GPTS_DATA_WORD + 12]);
    return 0;
}

/* The newest of those steps whose headers go together (checkpoint_unmarked_headers_), its model header in h; −1 if none
 * (or dir has markers). For a resume without model flags in a directory without markers: the config; checkpoint_adopt
 * verifies the rest. */
static inline int checkpoint_newest_unmarked_model(const char* dir, int32_t* h) {
    int* steps;
    int n = checkpoint_unmarked_models_(dir, &steps), found = -1;
    for (int i = 0; i < n && found < 0; i++) {
        char err[4600];
        int32_t sh[HEADER_WORDS];
        if (checkpoint_unmarked_headers_(dir, steps[i], h, sh, err, sizeof(err)) == 0) found = steps[i];
    }
    free(steps);
    return found;
}

/* In a dir without markers (or with an adoption cut short), marks done each unmarked step whose files are complete and
 * verify in full (checkpoint_unmarked_headers_, then checkpoint_verify_files_ with the world size its rank-0 state file
 * names): a run stopped between its last file and the marker, or a directory copied without its markers, which the
 * sweep below would otherwise delete as debris. Every step is verified before the first marker is written, and the
 * markers are written under CHECKPOINT_ADOPTING, so a run stopped among them adopts the rest when resumed (else the
 * first marker would make the others debris). Called where the sweep is (a resuming run, holding the directory's
 * lock); one line to report for each step, adopted or not and why. */
static inline void checkpoint_adopt(const char* dir, FILE* report) {
    int* steps;
    int n = checkpoint_unmarked_models_(dir, &steps), adopted = 0;
    int* worlds = (int*)malloc_check((size_t)(n > 0 ? n : 1) * sizeof(int));
    for (int i = 0; i < n; i++) {
        char model[4200], state[4200], done[4200], err[4600];
        int32_t sh[HEADER_WORDS], mh[HEADER_WORDS];
        int ok = checkpoint_unmarked_headers_(dir, steps[i], mh, sh, err, sizeof(err)) == 0;
        for (int r = 1; ok && r < sh[7]; r++) { /* all there before the full pass */
            checkpoint_paths(model, state, done, sizeof(model), dir, steps[i], r);
            if (access(state, F_OK) != 0) {
                sys_error(err, sizeof(err), "%s (rank %d of %d): %s", state, r, sh[7], strerror(errno));
                ok = 0;
            }
        }
        if (ok) ok = checkpoint_verify_files_(dir, steps[i], sh[7], 1, mh, err, sizeof(err)) == 0;
        if (!ok) {
            fprintf(report, "resume: step %d of %s has no done marker and is not a complete checkpoint: %s\n", steps[i], dir, err);
            continue;
        }
        worlds[adopted] = sh[7];
        steps[adopted++] = steps[i];
    }
    char sentinel[4200], err[4600];
    snprintf(sentinel, sizeof(sentinel), "%s/%s", dir, CHECKPOINT_ADOPTING);
    if (adopted > 0 && access(sentinel, F_OK) != 0 && atomic_try_write(sentinel, 0, NULL, NULL, NULL, 0, 0, err, sizeof(err)) != 0)
        sys_fatalf("%s", err);
    for (int i = 0; i < adopted; i++) {
        if (checkpoint_try_mark_done(dir, steps[i], worlds[i], err, sizeof(err)) != 0) sys_fatalf("%s", err);
        fprintf(report, "resume: step %d of %s: its files are complete and verify but had no done marker (a run stopped before "
                "writing it, or a copy without the markers): marked done\n", steps[i], dir);
    }
    if (access(sentinel, F_OK) == 0) {
        if (unlink(sentinel) != 0) sys_fatalf("%s: cannot delete: %s", sentinel, strerror(errno));
        if (dir_sync_(sentinel, err, sizeof(err)) != 0) sys_fatalf("%s", err);
    }
    free(worlds);
    free(steps);
}

/* The debris of interrupted checkpoint writes in dir (".tmp" files, files of a step without a marker),
 * deleted when a run resumes there (holding its lock: no write is in progress); says how many. */
static inline void checkpoint_sweep(const char* dir, FILE* report) {
    int deleted = checkpoint_sweep_(dir, -1, 1, report);
    if (deleted > 0) fprintf(report, "resume: deleted %d file(s) of unfinished checkpoint writes in %s\n", deleted, dir);
}

/* Retention, run by the writer of the markers after checkpoint `newest` is complete: keeps `newest`
 * and the keep_last − 1 before it (0: all), every one whose step is a positive multiple of keep_every
 * (0: none extra; a step-0 checkpoint, written by a run stopped before its first step, is no milestone)
 * and every one newer than `newest` (an earlier run's, skipped as invalid on resume: it counts for none
 * of the keep_last while it is newer) — or, with `only`, `newest` alone; deletes the others
 * (marker first, so none is ever seen half-deleted), any ".tmp" file (an interrupted write) and the
 * files without a marker of the steps not kept. Prints one line per deleted checkpoint to report; a
 * failed deletion is reported, not fatal. Returns the number of checkpoints deleted. */
static inline int checkpoint_prune_(const char* dir, int newest, int keep_last, int keep_every, int only, FILE* report) {
    int* steps;
    int n = checkpoint_list(dir, &steps), deleted = 0, recent = 0; /* recent: kept so far of keep_last (newest first) */
    for (int i = 0; i < n; i++) {
        int keep = only ? steps[i] == newest
                        : steps[i] > newest || keep_last == 0 || recent++ < keep_last ||
                              (keep_every > 0 && steps[i] > 0 && steps[i] % keep_every == 0);
        if (keep) continue;
        char model[4200], state[4200], done[4200];
        checkpoint_paths(model, state, done, sizeof(model), dir, steps[i], 0);
        if (unlink(done) != 0) fprintf(report, "checkpoint: cannot delete %s: %s\n", done, strerror(errno));
        else {
            if (only) fprintf(report, "checkpoint: deleted step %d of %s (keeping step %d alone)\n", steps[i], dir, newest);
            else if (keep_every > 0) fprintf(report, "checkpoint: deleted step %d (keeping the last %d and every %d-th)\n", steps[i], keep_last, keep_every);
            else fprintf(report, "checkpoint: deleted step %d (keeping the last %d)\n", steps[i], keep_last);
            deleted++;
        }
    }
    checkpoint_sweep_(dir, newest, only, report);
    free(steps);
    return deleted;
}

static inline int checkpoint_retain(const char* dir, int newest, int keep_last, int keep_every, FILE* report) {
    return checkpoint_prune_(dir, newest, keep_last, keep_every, 0, report);
}

/* Deletes every checkpoint of dir but `step` (and their debris), whatever their steps: the best
 * model's directory keeps one. */
static inline int checkpoint_keep_only(const char* dir, int step, FILE* report) { return checkpoint_prune_(dir, step, 0, 0, 1, report); }

/* Newest step S with a marker done_S.txt (exactly 8 digits) in dir; −1 if none or no such dir. */
static inline int checkpoint_latest(const char* dir) {
    int* steps;
    int latest = checkpoint_list(dir, &steps) > 0 ? steps[0] : -1;
    free(steps);
    return latest;
}

/* mkdir -p: creates dir and its missing parents; fails if a component exists and is not a directory */
static inline void make_dir_check(const char* dir) {
    char path[4096];
    if (dir[0] == '\0') fatalf("cannot create a directory with an empty name");
    if (strlen(dir) >= sizeof(path)) fatalf("%s: path too long", dir);
    strcpy(path, dir);
    for (char* p = path + 1;; p++) {
        if (*p == '/' || *p == '\0') {
            char saved = *p;
            *p = '\0';
            struct stat sb;
            if (mkdir(path, 0755) != 0 && errno != EEXIST) sys_fatalf("%s: cannot create directory: %s", path, strerror(errno));
            if (stat(path, &sb) != 0 || !S_ISDIR(sb.st_mode)) fatalf("%s: exists and is not a directory", path);
            *p = saved;
            if (saved == '\0') break;
        }
    }
}

#endif
