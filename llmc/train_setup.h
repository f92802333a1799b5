/*
 * llmc/train_setup.h — the parts of main()'s setup that train_gpt.c (CPU) and train_gpt.cu (GPU) share.
 *
 * Both trainers read the same flags (llmc/flags.h) and write the same checkpoints (llmc/checkpoint.h);
 * what they do identically between the two lives here, once:
 *   train_check_run_flags     the checks the flag table's ranges cannot make (exit status 2, as the flag parser)
 *   train_model_source        which model the flags give: from scratch, a preset or a model file, with
 *                             the config of the first two (and the checks and messages of all three)
 *   train_check_file_config   a model file's config against --vocab-size / --max-seq-len
 *   train_open_data           the training and validation loaders of a rank (mock data or shards)
 *   train_val_batches         --val-batches, capped at what the validation data holds
 *   train_max_steps           --max-steps, or the steps of one epoch of the training data
 *   train_scaled_lr           --lr, scaled with the global batch by --lr-scale (and the line that says so)
 *   train_schedule            the learning-rate Schedule
 *   train_run_state           the run-defining part of a checkpoint's TrainState
 *   train_rng_init            the run's Rng (sampling), seeded alike in both trainers
 *   train_lock_output_dir     --output-dir for this run alone: a second trainer there stops at once
 *   train_check_shared_dir    another rank sees the lock rank 0 holds (the directory is on a shared disk)
 *   train_resume_find         the newest valid checkpoint of --output-dir, for --resume 1 (it verifies
 *                             every file of it: one reader, rank 0, suffices; the others read no CRC)
 *   train_resume_check_model  a checkpoint's model config (its header) against this run's
 *   train_check_batch_shape   -t against the model's max_seq_len
 *   train_note_no_checkpoints the note of a run with --output-dir that saves no model
 *   train_resume_read_state   a rank's range of a checkpoint's optimizer state (any saved world size),
 *                             and its settings compared with this run's
 *   train_resume_say          the resume line (step, re-sharding, --init not read for weights)
 *   train_resume_restore      health, Rng and training loader from a checkpoint's TrainState (the
 *                             data position converted when the tokens per step changed)
 * What differs (ranks, ZeRO shards, how weights reach the device) stays in each trainer.
 * Static inline, valid C11 and C++; include after llmc/flags.h, llmc/health.h and llmc/checkpoint.h.
 */
#ifndef LLMC_TRAIN_SETUP_H
#define LLMC_TRAIN_SETUP_H

#include "llmc/fileio.h"
#include "llmc/rng.h"
#include "llmc/schedule.h"
#include "llmc/checkpoint.h"
#include "llmc/dataloader.h"
#include "llmc/early_stop.h"
#include "llmc/flags.h"
#include "llmc/health.h"
#include "llmc/zero.h"
#include <limits.h>
#include <sys/file.h>
#include <time.h>

/* What the flag table's ranges and choices cannot say: AdamW's betas below 1 (the bias
 * correction divides by 1 - beta^t) and ε above 0 (a zero gradient's update is 0/0), --total-batch not
 * 0, B x T tokens indexable by an int, and the flags that contradict or need others (the model's, the data's,
 * the output directory's). A problem: usagef (exit status 2, as the flag parser). Returns 1 for
 * --on-save-error continue, 0 for stop. */
static inline int train_check_run_flags(const TrainArgs* args) {
    if (args->beta1 >= 1.0f || args->beta2 >= 1.0f)
        usagef("--beta1 and --beta2 must be below 1 (AdamW's bias correction divides by 1 - beta^step; they are floats, and one "
               "within 3e-8 of 1 rounds to 1)");
    if (args->eps <= 0.0f)
        usagef("--eps must be above 0 (a parameter with a zero gradient would be updated by 0/0; it is a float, and one below "
               "about 1e-45 rounds to 0)");
    if (args->lr_ref_batch > 0 && strcmp(args->lr_scale, "none") == 0)
        usagef("--lr-ref-batch %d is the batch --lr-scale scales from, but --lr-scale is none", args->lr_ref_batch);
    if (args->total_batch == 0) usagef("--total-batch 0: give the tokens per step, or -1 for B*T*world");
    if ((long long)args->batch_size * args->seq_len > INT_MAX)
        usagef("-b %d x -t %d = %lld tokens a micro-batch: at most %d (use gradient accumulation, --total-batch, for more a step)",
               args->batch_size, args->seq_len, (long long)args->batch_size * args->seq_len, INT_MAX);
    if (args->n_layer > 0 || args->n_head > 0 || args->n_embd > 0) {
        if (args->init[0]) usagef("--init %s and --n-layer/--n-head/--n-embd both give the model: choose one", args->init);
        if (args->n_layer <= 0 || args->n_head <= 0 || args->n_embd <= 0)
            usagef("a model from scratch needs all of --n-layer, --n-head and --n-embd");
    }
    if (!args->mock_data && !args->train_data[0]) usagef("no training data: give --train-data GLOB (or --mock-data)");
    if (args->resume && !args->output_dir[0]) usagef("--resume 1 needs --output-dir, where the checkpoints are");
    if (!args->output_dir[0] && (args->checkpoint_every > 0 || args->keep_last > 0 || args->keep_every > 0))
        usagef("--checkpoint-every, --keep-last and --keep-every need --output-dir (the directory of the checkpoints)");
    if (!args->output_dir[0] && strcmp(args->on_save_error, "stop") != 0)
        usagef("--on-save-error %s: without --output-dir nothing is saved", args->on_save_error);
    if (args->mock_data && (args->train_data[0] || args->val_data[0]))
        usagef("--mock-data trains and validates on synthetic tokens: it cannot be given with --train-data or --val-data");
    if (args->prompt[0] && args->sample_every == 0) usagef("--prompt is the start of the samples, but --sample-every 0 turns sampling off");
    if (args->early_stop > 0 && ((!args->val_data[0] && !args->mock_data) || args->val_every == 0))
        usagef("--early-stop %d needs validation: give --val-data and --val-every > 0", args->early_stop);
    if (strcmp(args->tokenizer, TRAIN_DEFAULT_TOKENIZER) != 0 && access(args->tokenizer, R_OK) != 0)
        usagef("--tokenizer %s: cannot read it: %s", args->tokenizer, strerror(errno));
    return strcmp(args->on_save_error, "continue") == 0;
}

/* The note of a run that saves no model: --output-dir without --checkpoint-every (or --early-stop). */
static inline void train_note_no_checkpoints(const TrainArgs* args) {
    if (args->output_dir[0] && args->checkpoint_every == 0 && args->early_stop == 0)
        printf("note: --checkpoint-every 0: %s gets metrics.jsonl but no model (give -n N for checkpoints, the last step's included)\n",
               args->output_dir);
}

/* The micro-steps of an optimizer step: --total-batch tokens (-1: one micro-batch of every rank) over the
 * B·T·world tokens of a micro-step; unless they divide, usagef naming the nearest totals that would work. */
static inline int train_micro_steps(int total_batch_flag, int B, int T, int world) {
    long long per_micro = (long long)B * T * world, total = total_batch_flag > 0 ? total_batch_flag : per_micro;
    if (total % per_micro == 0) return (int)(total / per_micro);
    long long below = total / per_micro;
    char product[96], lower[64] = "";
    if (world > 1) snprintf(product, sizeof(product), "micro-batch x sequence length x ranks = %d x %d x %d", B, T, world);
    else snprintf(product, sizeof(product), "micro-batch x sequence length = %d x %d", B, T);
    if (below > 0) snprintf(lower, sizeof(lower), "%lld (%lld micro-step%s) or ", below * per_micro, below, below > 1 ? "s" : "");
    if ((below + 1) * per_micro > INT_MAX) /* above the flag's range: only the total below is one */
        usagef("--total-batch %lld is not a multiple of %s = %lld tokens: %lld (%lld micro-steps) would be", total, product, per_micro,
               below * per_micro, below);
    usagef("--total-batch %lld is not a multiple of %s = %lld tokens: %s%lld (%lld micro-step%s) would be", total, product, per_micro,
           lower, (below + 1) * per_micro, below + 1, below > 0 ? "s" : "");
}

typedef enum { MODEL_FROM_SCRATCH, MODEL_FROM_PRESET, MODEL_FROM_FILE } ModelSource;

/* Which model the flags give. From scratch (--n-layer/--n-head/--n-embd, all three) or a preset
 * (--init d12, ...; --max-seq-len and --vocab-size override): *config is set, the caller initialises
 * the weights. A model file (--init FILE): *config is untouched, the caller reads the file and then
 * calls train_check_file_config. No model flags with -y 1 and a checkpoint in --output-dir: the config of
 * the newest one whose marker and model file header read (checkpoint_newest_model), as a preset (the resume
 * then verifies a checkpoint in full and loads its weights). No model at all: usagef without -y 1, else fatalf
 * (the checkpoints hold none). */
static inline ModelSource train_model_source(const TrainArgs* args, GPTConfig* config) {
    int from_scratch = args->n_layer > 0 || args->n_head > 0 || args->n_embd > 0;
    if (from_scratch) { /* all three, no --init: train_check_run_flags */
        config->num_layers = args->n_layer;
        config->num_heads = args->n_head;
        config->channels = args->n_embd;
        config->vocab_size = args->vocab_size > 0 ? args->vocab_size : 50257;
        config->padded_vocab_size = padded_vocab(config->vocab_size);
        config->max_seq_len = args->max_seq_len > 0 ? args->max_seq_len : args->seq_len;
        return MODEL_FROM_SCRATCH;
    }
    if (args->init[0] && gpt_preset(args->init, config)) {
        if (args->max_seq_len > 0) config->max_seq_len = args->max_seq_len;
        if (args->vocab_size > 0) {
            config->vocab_size = args->vocab_size;
            config->padded_vocab_size = padded_vocab(args->vocab_size);
        }
        return MODEL_FROM_PRESET;
    }
    if (args->init[0]) {
        if (strchr(args->init, '/') == NULL && access(args->init, F_OK) != 0 && errno == ENOENT)
            fatalf("--init %s: neither a model file nor a preset (d6|d12|d24|d36|d48)", args->init);
        return MODEL_FROM_FILE;
    }
    /* a newer checkpoint whose model file is missing or cut short (a copy of the directory cut short) is passed
     * over: train_resume_find, later, says why */
    int32_t h[HEADER_WORDS];
    int markers = 0, latest = args->resume ? checkpoint_newest_model(args->output_dir, NULL, &markers, h) : -1;
    if (latest < 0 && markers == 0 && args->resume) /* files without markers: train_resume_find adopts */
        latest = checkpoint_newest_unmarked_model(args->output_dir, h);
    if (latest >= 0) {
        char model[4200], state[4200], done[4200];
        checkpoint_paths(model, state, done, sizeof(model), args->output_dir, latest, 0);
        fclose_check(model_file_open(model, config, h), model);
        if (args->vocab_size > 0 && args->vocab_size != config->vocab_size)
            fatalf("%s: the checkpoint's model has vocabulary %d, but --vocab-size %d was given", model, config->vocab_size, args->vocab_size);
        if (args->max_seq_len > 0 && args->max_seq_len != config->max_seq_len)
            fatalf("%s: the checkpoint's model has max_seq_len %d, but --max-seq-len %d was given", model, config->max_seq_len,
                   args->max_seq_len);
        printf("resume: no model flags: the model's config is that of the newest valid checkpoint, %s\n", model);
        return MODEL_FROM_PRESET;
    }
    if (!args->resume) usagef("no model: give --init FILE, --init d12 (or another preset), or --n-layer/--n-head/--n-embd");
    if (markers > 0) checkpoint_newest_model(args->output_dir, stdout, &markers, h); /* why each was passed over */
    fatalf("no model: give --init FILE, --init d12 (or another preset), or --n-layer/--n-head/--n-embd (with -y 1 they come from "
           "the newest valid checkpoint of --output-dir: %s)", markers > 0 ? "no checkpoint has a readable model file" : "it has none");
    return MODEL_FROM_FILE; /* not reached */
}

/* The micro-batch against the model: -t at most its max_seq_len. */
static inline void train_check_batch_shape(const TrainArgs* args, const GPTConfig* config) {
    TrainArgs defaults;
    flags_set_defaults_(&defaults);
    if (args->seq_len > config->max_seq_len)
        fatalf("--seq-len %d is longer than the model's maximum sequence length %d: give -t %d or less%s", args->seq_len, config->max_seq_len,
               config->max_seq_len, args->seq_len == defaults.seq_len ? " (-t's default is that long)" : "");
}

/* A model file's config (read from --init) must agree with --vocab-size and --max-seq-len where given. */
static inline void train_check_file_config(const TrainArgs* args, const GPTConfig* config) {
    if (args->vocab_size > 0 && args->vocab_size != config->vocab_size)
        fatalf("%s: the model's vocabulary is %d tokens but --vocab-size is %d", args->init, config->vocab_size, args->vocab_size);
    if (args->max_seq_len > 0 && args->max_seq_len != config->max_seq_len)
        fatalf("%s: the model's maximum sequence length is %d but --max-seq-len is %d", args->init, config->max_seq_len,
               args->max_seq_len);
}

/* The training and validation loaders of `rank` of `world` (the CPU trainer: 0 of 1), B x T tokens a
 * micro-batch: a training window is one optimizer step of `accum` micro-steps of every rank (rank r's
 * micro-step j reads slot j x world + r), a validation window one micro-batch of every rank. With
 * --mock-data both are synthetic; else the shards of --train-data (whose tokens must fit the model's
 * vocabulary) and, if given and -v is not 0, --val-data, unshuffled. Returns whether there is
 * validation data. */

/* Warns (rank 0) when the training pattern also matches validation shards (a pattern over a directory of both
 * prepare_data's train_ and val_ shards): the validation loss would be measured on data the model trains on.
 * Same file: device and inode; each shard is stat'ed once. */
static inline void train_warn_shared_shards(const DataLoader* train, const DataLoader* val, int rank) {
    if (rank != 0) return;
    struct stat* vs = (struct stat*)calloc_check((size_t)val->num_shards, sizeof(struct stat));
    char* found = (char*)calloc_check((size_t)val->num_shards, 1);
    for (int j = 0; j < val->num_shards; j++)
        if (stat(val->shard_paths[j], &vs[j]) != 0) vs[j].st_ino = 0;
    for (int i = 0; i < train->num_shards; i++) {
        struct stat ts;
        if (stat(train->shard_paths[i], &ts) != 0) continue;
        for (int j = 0; j < val->num_shards; j++) found[j] |= vs[j].st_ino != 0 && ts.st_dev == vs[j].st_dev && ts.st_ino == vs[j].st_ino;
    }
    int shared = 0, first = -1;
    for (int j = 0; j < val->num_shards; j++)
        if (found[j]) {
            shared++;
            if (first < 0) first = j;
        }
    if (shared)
        printf("warning: %d of the %d validation shards are training shards too (first: %s): the validation loss is measured on "
               "data the model trains on; give --train-data a pattern that matches the training shards alone\n",
               shared, val->num_shards, val->shard_paths[first]);
    free(vs);
    free(found);
}

static inline int train_open_data(const TrainArgs* args, int B, int T, int vocab_size, int rank, int world, int accum, DataLoader* train,
                                  DataLoader* val) {
    if (args->mock_data) {
        dataloader_init_mock(train, B, T, vocab_size, rank, world * accum, args->seed);
        dataloader_init_mock(val, B, T, vocab_size, rank, world, (uint64_t)args->seed + 1);
        return 1;
    }
    dataloader_init(train, args->train_data, B, T, rank, world * accum, args->shuffle, args->seed);
    dataloader_limit_tokens(train, vocab_size);
    if (args->val_data[0] && args->val_every <= 0 && rank == 0)
        printf("validation: --val-every 0: --val-data %s is not read (no evaluation)\n", args->val_data);
    if (!args->val_data[0] || args->val_every <= 0) return 0; /* -v 0: no evaluation, the validation data is not read */
    dataloader_init(val, args->val_data, B, T, rank, world, 0, args->seed);
    dataloader_limit_tokens(val, vocab_size);
    train_warn_shared_shards(train, val, rank);
    return 1;
}

/* Batches an evaluation averages: --val-batches, or all the validation data holds if that is fewer
 * (read again from the start, the same batches would count twice), saying so once. */
static inline int train_val_batches(const TrainArgs* args, const DataLoader* val) {
    size_t available = dataloader_batches_per_epoch(val);
    if ((size_t)args->val_batches <= available) return args->val_batches;
    printf("validation: --val-batches %d, but the validation data holds %zu batches of %d x %d tokens: using %zu\n",
           args->val_batches, available, val->B * val->world, val->T, available);
    return (int)available;
}

/* --max-steps, or for -1 the steps of one epoch of the training data (at least one); an epoch of more
 * steps than an int counts is refused. */
static inline int train_max_steps(const TrainArgs* args, const DataLoader* train) {
    if (args->max_steps >= 0) return args->max_steps;
    size_t epoch = dataloader_batches_per_epoch(train);
    if (epoch > (size_t)INT_MAX)
        fatalf("--max-steps -1: one epoch of the training data is %zu steps, more than %d: give --max-steps", epoch, INT_MAX);
    return epoch < 1 ? 1 : (int)epoch;
}

/* --lr, times --lr-scale's factor of the global batch (total_batch tokens per step) over the batch
 * --lr was tuned for (--lr-ref-batch, or one micro-batch B*T): linear, sqrt, or 1 for none. line gets
 * the run header's "learning rate: ..." line ("" for none). */
static inline float train_scaled_lr(const TrainArgs* args, long long total_batch, int B, int T, char* line, size_t cap) {
    long long ref_batch = args->lr_ref_batch > 0 ? args->lr_ref_batch : (long long)B * T;
    double ratio = (double)total_batch / (double)ref_batch, factor = 1.0;
    if (strcmp(args->lr_scale, "linear") == 0) factor = ratio;
    else if (strcmp(args->lr_scale, "sqrt") == 0) factor = sqrt(ratio);
    float lr = (float)(args->lr * factor);
    line[0] = '\0';
    if (strcmp(args->lr_scale, "none") != 0)
        snprintf(line, cap, "learning rate: %g x %s(%lld / %lld tokens) = %g", (double)args->lr, args->lr_scale, total_batch, ref_batch,
                 (double)lr);
    return lr;
}

/* The learning-rate schedule of --lr-schedule over max_steps steps, peaking at max_lr. */
static inline Schedule train_schedule(const TrainArgs* args, float max_lr, int max_steps) {
    Schedule sched;
    if (!schedule_parse(args->lr_schedule, &sched.kind)) fatalf("--lr-schedule %s: unknown schedule", args->lr_schedule);
    sched.max_lr = max_lr;
    sched.final_frac = args->final_lr_frac;
    sched.warmup = args->warmup;
    sched.total = max_steps;
    sched.wsd_frac = args->wsd_frac;
    return sched;
}

/* The run-defining part of a checkpoint's training state: one rank holding all num_params parameters'
 * optimizer state, the schedule, AdamW's settings, what the training loader's position counts in
 * (T, total_batch tokens a step, shuffle, mock, the data's size), the evaluations (their period, 0
 * without validation data; val_batches of the val loader's windows on its data) and the trainer's
 * precision (bytes of a weight in its forward); step, rng and loader are set when saving. The model file
 * holds the fp32 (master) weights, so the state file holds none. */
static inline TrainState train_run_state(const TrainArgs* args, size_t num_params, const Schedule* sched, int T, long long total_batch,
                                         const DataLoader* train, int have_val, const DataLoader* val, int val_batches, int precision) {
    TrainState run;
    memset(&run, 0, sizeof(run));
    run.rank = 0;
    run.world = 1;
    run.num_params = num_params;
    run.shard_offset = 0;
    run.shard_count = num_params;
    run.schedule = *sched;
    run.weight_decay = args->weight_decay;
    run.beta1 = args->beta1;
    run.beta2 = args->beta2;
    run.eps = args->eps;
    run.grad_clip = args->grad_clip;
    run.has_master = 0;
    run.seq_len = T;
    run.step_tokens = (uint64_t)total_batch;
    run.shuffle = args->shuffle;
    run.mock = args->mock_data;
    run.data_tokens = train->num_tokens;
    run.data_shards = train->num_shards;
    run.data_crc = train->fingerprint;
    run.seed = args->seed;
    run.val_every = have_val ? args->val_every : 0;
    run.master_weights = args->master_weights; /* 1 in the fp32 builds, which refuse -w 0: their weights are fp32 */
    run.precision = precision;
    run.val_tokens = have_val ? (uint64_t)val_batches * dataloader_window_(val) : 0;
    run.val_crc = have_val ? val->fingerprint : 0;
    return run;
}

/* The run's Rng (it draws the samples, and a checkpoint carries it): --seed XOR a fixed salt, so it
 * differs from the weights' and the loader's streams; sample_gpt seeds alike (llmc/sample_cli.h). */
static inline void train_rng_init(Rng* rng, const TrainArgs* args) { rng_seed(rng, args->seed ^ RNG_RUN_SALT); }

/* Creates dir (mkdir -p) and takes an exclusive lock on dir/.lock for the life of the process (the kernel
 * drops it when the process ends, however it ends), so that two trainers never write one directory's
 * checkpoints and metrics.jsonl (a requeued job while the old one still runs; a copy-pasted command).
 * Held: fatalf naming the directory. A file system without locks: a warning, and the run goes on.
 * The file then holds one line naming this run (host, pid, time), also put in token (cap bytes; NULL:
 * not wanted), which other ranks look for in their view of the directory (train_check_shared_dir). */
static inline void train_lock_output_dir(const char* dir, char* token, size_t cap) {
    make_dir_check(dir);
    char path[4200], host[256] = "?", own[512];
    if (!token) token = own, cap = sizeof(own);
    snprintf(path, sizeof(path), "%s/.lock", dir);
    int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0) sys_fatalf("%s: cannot create the lock file: %s", path, strerror(errno));
    if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
        if (errno == EWOULDBLOCK)
            fatalf("%s: another trainer is writing to this output directory (it holds %s); give each run its own --output-dir", dir,
                   path);
        printf("warning: %s: cannot lock it (%s): nothing stops a second trainer from writing here too\n", path, strerror(errno));
    }
    if (gethostname(host, sizeof(host) - 1) != 0) snprintf(host, sizeof(host), "?");
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    snprintf(token, cap, "%s %d %lld.%09ld\n", host, (int)getpid(), (long long)now.tv_sec, now.tv_nsec);
    if (ftruncate(fd, 0) != 0 || pwrite(fd, token, strlen(token), 0) != (ssize_t)strlen(token) || fsync(fd) != 0)
        sys_fatalf("%s: cannot write: %s", path, strerror(errno));
    /* fd stays open: the lock lasts until exit */
}

/* On a rank other than 0: "" if dir/.lock holds rank 0's token, as it does when the ranks share the
 * directory; else why not, in why (cap bytes). */
static inline const char* train_check_shared_dir(const char* dir, const char* token, char* why, size_t cap) {
    char path[4200], seen[256] = "";
    snprintf(path, sizeof(path), "%s/.lock", dir);
    FILE* f = fopen(path, "rb");
    why[0] = '\0';
    if (!f && errno != ENOENT) {
        sys_error(why, cap, "%s: cannot open: %s", path, strerror(errno));
        return why;
    }
    size_t n = f ? fread(seen, 1, sizeof(seen) - 1, f) : 0;
    int failed = f && ferror(f);
    if (f && fclose(f) != 0) failed = 1;
    seen[n] = '\0';
    if (failed) sys_error(why, cap, "%s: read failed: %s", path, strerror(errno));
    else if (strcmp(seen, token) != 0)
        snprintf(why, cap, "%s: this rank does not see the lock file rank 0 wrote (%.*s): --output-dir must be one directory every "
                 "rank shares (a shared disk, not a node-local path)", path, (int)strcspn(token, "\n"), token);
    return why;
}

/* Where the run starts: with --resume 1, the step of the newest complete checkpoint of --output-dir
 * that verifies (reporting the ones passed over on stdout); −1 to start from scratch. −2, with the
 * reason in why, for checkpoints of which none verifies, and for
 * a new run (no -y) in a directory that holds an earlier run's checkpoints (DIR's or DIR/best's,
 * --early-stop): the new run's would mix with them (retention keeps the newer ones, -y 1 would resume
 * the old run). */
static inline int train_resume_find(const TrainArgs* args, char* why, size_t cap) {
    if (!args->output_dir[0]) return -1; /* -y 1 needs -o: train_check_run_flags */
    int resuming_here = args->resume && access(args->output_dir, F_OK) == 0; /* -y 1 and the directory exists */
    if (resuming_here) checkpoint_adopt(args->output_dir, stdout);
    int markers = 0, found = args->resume ? checkpoint_find_valid(args->output_dir, stdout, &markers) : -1;
    /* without markers, an interrupted first save leaves the files of one step; more are no such debris (a copy
     * missing files, files of several runs): the run stops, and deletes nothing */
    int unmarked = resuming_here && found < 0 && markers == 0 ? checkpoint_steps_with_files(args->output_dir) : 0;
    if (unmarked > 1) {
        file_error_(why, cap,
                    "%s: files of %d steps without done markers, none a complete checkpoint (why: the 'resume: step' lines on "
                    "stdout): more than one interrupted first save leaves, so neither deleted as its debris nor trained over "
                    "from scratch: complete them or move them away",
                    args->output_dir, unmarked);
        return -2;
    }
    /* the debris of unfinished writes goes when there is a checkpoint to resume, or none at all; not when every
     * checkpoint fails (the run stops: its files may be all that is left of the weights) */
    if (resuming_here && (found >= 0 || markers == 0)) checkpoint_sweep(args->output_dir, stdout);
    if (found >= 0) return found;
    if (markers > 0) {
        file_error_(why, cap,
                    "%s: none of its %d checkpoints is valid (why: the 'resume: skipping' lines on stdout); not starting from "
                    "scratch over them: move them away to do that",
                    args->output_dir, markers);
        return -2;
    }
    if (args->resume) return -1; /* -y 1 with no checkpoint yet (a run killed before its first): this run starts it */
    char best[4200], best_txt[4300];
    early_stop_dir(best, sizeof(best), args->output_dir);
    snprintf(best_txt, sizeof(best_txt), "%s/best.txt", best);
    int newest = checkpoint_latest(args->output_dir), newest_best = checkpoint_latest(best);
    if (newest >= 0 || newest_best >= 0 || access(best_txt, F_OK) == 0) {
        file_error_(why, cap,
                    "%s holds the checkpoints of an earlier run (%s %d): resume that run with -y 1, or move them away (or choose "
                    "another --output-dir) to start a new one",
                    newest >= 0 ? args->output_dir : best, newest >= 0 ? "newest: step" : "best model of step",
                    newest >= 0 ? newest : newest_best);
        return -2;
    }
    return -1;
}

/* After a resume from checkpoint `step` of --output-dir (found, verified and read): retention as a save of that
 * step applies it (checkpoint_retain: --keep-last, --keep-every; newer checkpoints, skipped as invalid, are kept).
 * A run killed between a checkpoint's marker and its retention left more checkpoints than it keeps; a resumed run
 * that saves nothing more (nothing left to train, a stop before its next save) would leave them for good. Called
 * by the writer of the markers (rank 0) once the resume has succeeded, so a resume that fails deletes nothing. */
static inline void train_resume_retain(const TrainArgs* args, int step) {
    checkpoint_retain(args->output_dir, step, args->keep_last, args->keep_every, stdout);
}

/* Exits unless the model config in a checkpoint's model file (its header only) is this run's. */
static inline void train_resume_check_model(const TrainArgs* args, const char* model_path, const GPTConfig* config, size_t num_params) {
    GPTConfig saved;
    int32_t h[HEADER_WORDS];
    fclose_check(model_file_open(model_path, &saved, h), model_path);
    size_t n = gpt_num_params(&saved);
    const char* names[6] = {"max_seq_len", "vocab_size", "padded_vocab_size", "num_layers", "num_heads", "channels"};
    const int saved_fields[6] = {saved.max_seq_len, saved.vocab_size, saved.padded_vocab_size, saved.num_layers, saved.num_heads, saved.channels};
    const int run_fields[6] = {config->max_seq_len, config->vocab_size, config->padded_vocab_size, config->num_layers, config->num_heads,
                               config->channels};
    char diffs[512] = "";
    for (int i = 0; i < 6; i++)
        if (saved_fields[i] != run_fields[i])
            snprintf(diffs + strlen(diffs), sizeof(diffs) - strlen(diffs), "%s%s %d, this run's %d", diffs[0] ? "; " : "", names[i],
                     saved_fields[i], run_fields[i]);
    if (diffs[0] || n != num_params)
    {
        int defaulted = (args->n_layer > 0 || args->n_head > 0 || args->n_embd > 0) && args->max_seq_len == 0; /* from scratch */
        fatalf("%s: the checkpoint's model config differs from this run's: %s%s", model_path, diffs,
               saved.max_seq_len != config->max_seq_len && defaulted
                   ? " (from scratch, --max-seq-len defaults to --seq-len: give --max-seq-len as the checkpoint's run had it)"
                   : "");
    }
}

/* --resume 1's optimizer state of this rank: AdamW m and v of parameters [offset, offset + count) from
 * checkpoint `step` of dir, whatever number of ranks wrote it (*saved_world; llmc/zero.h). Prints, as a
 * warning, each run-defining setting that differs from `run` (the shard layout may: re-sharding is
 * supported); another --seed is an error. Returns the saved rank 0's TrainState (step, Rng, data position). */
static inline TrainState train_resume_read_state(const char* dir, int step, const TrainState* run, size_t offset, size_t count,
                                                 float* m, float* v, int* saved_world) {
    char model_path[4200], state_path[4200], done_path[4200], err[4600];
    checkpoint_paths(model_path, state_path, done_path, sizeof(model_path), dir, step, 0);
    if (checkpoint_read_marker(done_path, step, saved_world, err, sizeof(err)) != 0) fatalf("%s", err);
    TrainState st;
    zero_read_optimizer(dir, step, *saved_world, run->num_params, offset, count, m, v, &st);
    if (st.seed >= 0 && st.seed != run->seed) /* it seeds the mock data and the GPU trainer's bf16 rounding too */
        fatalf("%s: the checkpoint's run has --seed %d, this one %d: a resumed run keeps its seed (give --seed %d)", state_path, st.seed,
               run->seed, st.seed);
    TrainState expected = *run;
    expected.world = st.world;
    expected.shard_offset = st.shard_offset;
    expected.shard_count = st.shard_count;
    int data_differs = st.mock != expected.mock || (!st.mock && (st.data_tokens != expected.data_tokens ||
                       st.data_shards != expected.data_shards || (st.data_crc != 0 && st.data_crc != expected.data_crc)));
    if (state_compare(state_path, &st, &expected, stdout) > 0)
        printf("resume: warning: the settings above differ from the checkpoint's run; continuing with this run's%s\n",
               data_differs ? " (the saved data position refers to the checkpoint's training data)" : "");
    float saved_lr = schedule_lr(&st.schedule, st.step), lr = schedule_lr(&run->schedule, st.step);
    if (saved_lr != lr) /* the step index st.step is step st.step + 1 of the step lines */
        printf("resume: the learning rate of step %d is %.4g on this run's schedule, %.4g on the checkpoint's\n", st.step + 1, (double)lr,
               (double)saved_lr);
    return st;
}

/* Whether a checkpoint's evaluations are comparable with this run's (--early-stop compares their
 * losses): the same validation data, tokens an evaluation, sequence length and precision; unknown (an
 * older checkpoint, or a run without evaluations): taken as comparable. */
static inline int train_same_validation(const TrainState* saved, const TrainState* run) {
    if (saved->val_tokens == 0 || run->val_tokens == 0) return 1;
    return saved->val_tokens == run->val_tokens && (saved->val_crc == 0 || saved->val_crc == run->val_crc) &&
           saved->seq_len == run->seq_len && saved->precision == run->precision;
}

/* The resume line: the step, the directory, a re-sharding of the optimizer state, and that the weights
 * come from the checkpoint, not from a model file given by --init (read only for its config). */
static inline void train_resume_say(const TrainArgs* args, int step, int saved_world, int world) {
    printf("resume: step %d from %s", step, args->output_dir);
    if (saved_world != world) printf(" (optimizer state re-sharded from %d to %d ranks)", saved_world, world);
    printf("\n");
    GPTConfig preset;
    if (args->init[0] && !gpt_preset(args->init, &preset))
        printf("resume: the weights are the checkpoint's: --init %s gave only the model's config\n", args->init);
}

/* Restores what a checkpoint's training state carries besides the optimizer moments: the health
 * guard's history (resized to this run's window), the Rng and the training loader's position — the
 * same one, or with other tokens per step the nearest that reads no token twice (dataloader.h,
 * dataloader_set_state_window; said, with the tokens it skips). A changed --shuffle or --mock-data
 * has no equivalent position once data was read: an error (state_path names the file). Returns the step
 * to resume from (saying so if it leaves nothing of the max_steps to train). */
static inline int train_resume_restore(const char* state_path, const TrainState* st, HealthState* health,
                                       const HealthConfig* health_config, Rng* rng, DataLoader* train, int max_steps) {
    const DataLoaderState* at = &st->train_loader;
    int mock_differs = st->mock != train->mock, saved = mock_differs ? st->mock : st->shuffle;
    const char* flag = mock_differs ? "--mock-data" : "--shuffle";
    int shuffle_differs = !st->mock && !train->mock && st->shuffle != train->shuffle; /* mock data is never shuffled */
    if ((mock_differs || shuffle_differs) && (at->shard != 0 || at->batch != 0))
        fatalf("%s: the checkpoint's run read its data with %s %d, this one with %d: its position (epoch %llu, shard %llu of the "
               "epoch's order, batch %llu) has no equivalent in this order: resume with %s %d", state_path, flag, saved,
               mock_differs ? train->mock : train->shuffle, (unsigned long long)at->epoch, (unsigned long long)at->shard,
               (unsigned long long)at->batch, flag, saved);
    if (st->step >= max_steps)
        printf("resume: the checkpoint is at step %d and the run ends at step %d (--max-steps): nothing left to train%s\n", st->step,
               max_steps, st->step == max_steps ? " (the final weights are evaluated, if the run validates)" : "");
    *health = st->health;
    health_resize(health, health_config->window);
    *rng = st->rng;
    uint64_t skipped = dataloader_set_state_window(train, at, (size_t)st->step_tokens);
    size_t window = dataloader_window_(train);
    if (st->step_tokens != window && at->batch > 0) {
        size_t k = train->shard_order[at->shard];
        char where[128];
        if (train->pos.batch < train->shard_batches[k])
            snprintf(where, sizeof(where), "reading goes on at its token %llu, the next window of the new size",
                     (unsigned long long)(train->pos.batch * window));
        else
            snprintf(where, sizeof(where), "reading goes on at the epoch's next shard%s",
                     train->shuffle ? " (the shuffled order of this one's windows has no equivalent)" : "");
        printf("resume: tokens per step were %llu, now %zu: the checkpoint's run had read %llu windows of %s; %s; %llu of its "
               "tokens skipped\n", (unsigned long long)st->step_tokens, window, (unsigned long long)at->batch,
               train->shard_paths ? train->shard_paths[k] : "the mock data", where, (unsigned long long)skipped);
    }
    return st->step;
}

#endif /* LLMC_TRAIN_SETUP_H */
