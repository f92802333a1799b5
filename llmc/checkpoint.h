/*
 * llmc/checkpoint.h — the model's shape, model files, training-state files and checkpoint
 * directories (formats in doc/formats.md: "Model file", "Training state", "Checkpoint directory").
 *
 * Every reader checks magic, version, length, each header field against the others and the
 * payload CRC, and stops with one line naming the file and what is wrong. Every writer goes
 * through AtomicFile (tmp + fsync + rename). No global state.
 */
#ifndef LLMC_CHECKPOINT_H
#define LLMC_CHECKPOINT_H

#include <dirent.h>
#include <math.h>
#include <stdint.h>
#include "llmc/dataloader.h"
#include "llmc/fileio.h"
#include "llmc/rng.h"
#include "llmc/schedule.h"

#define GPTM_MAGIC 0x4D545047u
#define GPTM_VERSION 1
#define GPTS_MAGIC 0x53545047u
#define GPTS_VERSION 1
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
 * model file (GPTM) */
static inline void model_file_write(const char* path, const GPTConfig* c, const float* params) {
    gpt_config_check(c, path);
    size_t n = gpt_num_params(c);
    int32_t h[HEADER_WORDS];
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
    AtomicFile a;
    atomic_open(&a, path);
    fwrite_check(h, 4, HEADER_WORDS, a.f, a.tmp_path);
    fwrite_check(params, sizeof(float), n, a.f, a.tmp_path);
    atomic_commit(&a);
}

/* Reads a GPTM file (fp32, or bf16 widened to fp32); fills *c and *num_params, returns the
 * parameters (malloc'd, caller frees). */
static inline float* model_file_read(const char* path, GPTConfig* c, size_t* num_params) {
    int32_t h[HEADER_WORDS];
    FILE* f = fopen_check(path, "rb");
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
    *num_params = n;
    return params;
}

/* ----------------------------------------------------------------------------
 * training state (GPTS): everything besides the weights that resuming needs */
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
} TrainState;

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
}

/* Writes m, v (and master if st->has_master; it must then be non-NULL), shard_count floats each. */
static inline void state_file_write(const char* path, const TrainState* st, const float* m, const float* v,
                                    const float* master) {
    if (st->has_master && !master) fatalf("%s: state has_master is set but no master weights were given", path);
    size_t n = st->shard_count;
    int32_t h[HEADER_WORDS];
    header_init(h, GPTS_MAGIC, GPTS_VERSION);
    state_header_fill_(h, st);
    const float* arrays[3] = {m, v, master};
    int num_arrays = st->has_master ? 3 : 2;
    uint32_t crc = 0;
    for (int i = 0; i < num_arrays; i++) crc = crc32_update(crc, arrays[i], n * sizeof(float));
    header_set_payload(h, (uint64_t)n * sizeof(float) * num_arrays, crc);
    AtomicFile a;
    atomic_open(&a, path);
    fwrite_check(h, 4, HEADER_WORDS, a.f, a.tmp_path);
    for (int i = 0; i < num_arrays; i++) fwrite_check(arrays[i], sizeof(float), n, a.f, a.tmp_path);
    atomic_commit(&a);
}

/* Reads and checks a state file; *m, *v (and *master, NULL when the file has none) are malloc'd.
 * master may be NULL if the caller does not want master weights (they are still checksummed). */
static inline void state_file_read(const char* path, TrainState* st, float** m, float** v, float** master) {
    int32_t h[HEADER_WORDS];
    FILE* f = fopen_check(path, "rb");
    header_read_check(f, path, "training state file", GPTS_MAGIC, GPTS_VERSION, h);
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
    uint64_t arrays = st->has_master ? 3 : 2;
    if (header_payload_bytes(h) != arrays * count * sizeof(float))
        fatalf("%s: training state payload is %llu bytes, %llu arrays of %llu floats need %llu", path,
               (unsigned long long)header_payload_bytes(h), (unsigned long long)arrays, (unsigned long long)count,
               (unsigned long long)(arrays * count * sizeof(float)));
    st->num_params = (size_t)num_params;
    st->shard_offset = (size_t)offset;
    st->shard_count = (size_t)count;
    size_t bytes = (size_t)count * sizeof(float);
    uint32_t crc = 0;
    *m = (float*)malloc_check(bytes);
    *v = (float*)malloc_check(bytes);
    payload_read(f, path, *m, bytes, &crc);
    payload_read(f, path, *v, bytes, &crc);
    float* mw = NULL;
    if (st->has_master) {
        mw = (float*)malloc_check(bytes);
        payload_read(f, path, mw, bytes, &crc);
    }
    fclose_check(f, path);
    payload_crc_check(h, crc, path, "training state file");
    if (master) *master = mw;
    else free(mw);
}

/* Compares the run-defining fields of a saved state with the current run's; prints one line
 * per difference to `report` (prefixed by path) and returns how many differ. The trainer
 * decides whether a difference is fatal. Floats are compared exactly (both went through float). */
static inline int state_compare(const char* path, const TrainState* saved, const TrainState* now, FILE* report) {
    int diffs = 0;
#define STATE_CMP_INT_(field)                                                                                        \
    if ((long long)saved->field != (long long)now->field) {                                                          \
        fprintf(report, "%s: " #field " was %lld, now %lld\n", path, (long long)saved->field, (long long)now->field); \
        diffs++;                                                                                                     \
    }
#define STATE_CMP_F32_(field)                                                                                     \
    if (saved->field != now->field) {                                                                             \
        fprintf(report, "%s: " #field " was %.9g, now %.9g\n", path, (double)saved->field, (double)now->field); \
        diffs++;                                                                                                  \
    }
    STATE_CMP_INT_(world)
    STATE_CMP_INT_(num_params)
    STATE_CMP_INT_(shard_offset)
    STATE_CMP_INT_(shard_count)
    STATE_CMP_INT_(schedule.kind)
    STATE_CMP_INT_(schedule.warmup)
    STATE_CMP_INT_(schedule.total)
    STATE_CMP_F32_(schedule.max_lr)
    STATE_CMP_F32_(schedule.final_frac)
    STATE_CMP_F32_(schedule.wsd_frac)
    STATE_CMP_F32_(weight_decay)
    STATE_CMP_F32_(beta1)
    STATE_CMP_F32_(beta2)
    STATE_CMP_F32_(eps)
    STATE_CMP_F32_(grad_clip)
    STATE_CMP_INT_(has_master)
#undef STATE_CMP_INT_
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
static inline void checkpoint_mark_done(const char* dir, int step, int world) {
    char model[4096], state[4096], done[4096];
    checkpoint_paths(model, state, done, sizeof(done), dir, step, 0);
    AtomicFile a;
    atomic_open(&a, done);
    if (fprintf(a.f, "step %d\nworld %d\n", step, world) < 0) fatalf("%s: write failed: %s", a.tmp_path, strerror(errno));
    atomic_commit(&a);
}

/* Newest step S with a marker done_S.txt (exactly 8 digits) in dir; −1 if none or no such dir. */
static inline int checkpoint_latest(const char* dir) {
    DIR* d = opendir(dir);
    if (!d) {
        if (errno == ENOENT) return -1;
        fatalf("%s: cannot list directory: %s", dir, strerror(errno));
    }
    int latest = -1;
    struct dirent* e;
    while ((e = readdir(d)) != NULL) {
        const char* name = e->d_name;
        if (strlen(name) != 17 || strncmp(name, "done_", 5) != 0 || strcmp(name + 13, ".txt") != 0) continue;
        int step = 0, digits = 1;
        for (int i = 5; i < 13; i++) {
            if (name[i] < '0' || name[i] > '9') digits = 0;
            else step = step * 10 + (name[i] - '0');
        }
        if (digits && step > latest) latest = step;
    }
    closedir(d);
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
            if (mkdir(path, 0755) != 0 && errno != EEXIST) fatalf("%s: cannot create directory: %s", path, strerror(errno));
            if (stat(path, &sb) != 0 || !S_ISDIR(sb.st_mode)) fatalf("%s: exists and is not a directory", path);
            *p = saved;
            if (saved == '\0') break;
        }
    }
}

#endif
