/*
 * llmc/train_loop.h — the per-step bookkeeping that the training loops of train_gpt.c (CPU) and
 * train_gpt.cu (GPU) share.
 *
 * Each trainer's loop tells its own story: evaluate, sample, forward, backward, health guard, update,
 * checkpoint (the GPU one with its ranks agreeing on every decision, and its own save_checkpoint).
 * What both do alike around that story lives here, once, with the messages of doc/reliability.md:
 *   StepStart               where a step starts: what a dropped step rewinds to
 *   train_eval_due          whether the validation loss is computed before a step
 *   train_state_at          the TrainState a checkpoint of a given step saves
 *   train_checkpoint_due    whether the periodic checkpoint (--checkpoint-every) falls after a step
 *   train_save_failed       --on-save-error after a failed save: its message and the exit status
 *   train_log_failed        a failed metrics.jsonl write, handled by --on-save-error as a failed save
 *   train_log_close         metrics.jsonl closed at the end: a failed close, by --on-save-error when the run would exit 0
 *   train_record_best       DIR/best/best.txt after the best model's checkpoint (llmc/early_stop.h)
 *   train_record_val        the validation line, its metrics record and early stopping's verdict
 *   train_report_early_stop the line of an early stop
 *   train_report_step       the step line (the trainer gives its throughput text), elapsed and ETA
 *   train_flush_stdout      stdout flushed after a step's lines: a failed write, one warning
 *   train_report_health     the health guard's line for a skipped update
 *   train_nonfinite_param   the error when an update made a parameter non-finite
 *   train_health_stop       the error when too many updates in a row were skipped
 *   train_preempted         the lines of a stop signal, and whether the last steps still need saving
 *   train_data_failed       the lines of a data error during the run (the same stop, another cause and status)
 *   train_eval_stopped      the line of a validation left unfinished by a stop signal
 *   TrainProfile            --profile N: which steps are timed, and when the table is printed
 * Exit statuses: 0, SAVE_FAILED_EXIT_STATUS (74), HEALTH_EXIT_STATUS (65, llmc/health.h),
 * PREEMPT_EXIT_STATUS (75, llmc/signals.h), DATA_ERROR_EXIT_STATUS (66). No global state; static inline,
 * valid C11 and C++.
 */
#ifndef LLMC_TRAIN_LOOP_H
#define LLMC_TRAIN_LOOP_H

#include <stdio.h>
#include "llmc/checkpoint.h"
#include "llmc/dataloader.h"
#include "llmc/early_stop.h"
#include "llmc/flags.h"
#include "llmc/health.h"
#include "llmc/logger.h"
#include "llmc/profile.h"
#include "llmc/progress.h"
#include "llmc/rng.h"
#include "llmc/signals.h"

#define SAVE_FAILED_EXIT_STATUS 74 /* EX_IOERR: a checkpoint could not be written (--on-save-error stop) */
/* EX_NOINPUT: a training or validation shard became unreadable during the run (rewritten, truncated, a
 * bad token: dataloader_try_next_slot); the completed steps are checkpointed first, as for a stop signal */
#define DATA_ERROR_EXIT_STATUS 66

/* Where a step starts: the Rng and the training loader's position before it. A stop signal in the
 * middle of the step drops it (train_step_rewind), so a resumed run repeats it exactly; a checkpoint
 * taken before the step's training (the best model's) saves this loader position. */
typedef struct {
    Rng rng;
    DataLoaderState loader;
} StepStart;

static inline StepStart train_step_start(const Rng* rng, const DataLoader* train) {
    StepStart start;
    start.rng = *rng;
    dataloader_get_state(train, &start.loader);
    return start;
}

static inline void train_step_rewind(const StepStart* start, Rng* rng, DataLoader* train) {
    *rng = start->rng;
    dataloader_set_state(train, &start->loader);
}

/* Whether the validation loss is computed after `step` completed steps (before step `step`: the weights
 * its training loss is computed with): every --val-every steps and after the last (step == max_steps:
 * the final weights, as train_gpt.py and llm.c evaluate). */
static inline int train_eval_due(const TrainArgs* args, int have_val, int step, int max_steps) {
    return have_val && args->val_every > 0 && (step % args->val_every == 0 || step == max_steps);
}

/* The training state a checkpoint of `step` completed steps saves: the run-defining part (train_run_state),
 * the Rng, the health guard's history and the training loader's position `at`, or train's current one
 * when at is NULL. */
static inline TrainState train_state_at(const TrainState* run, int step, const Rng* rng, const HealthState* health,
                                        const DataLoader* train, const DataLoaderState* at) {
    TrainState st = *run;
    st.step = step;
    st.rng = *rng;
    st.health = *health;
    if (at) st.train_loader = *at;
    else dataloader_get_state(train, &st.train_loader);
    return st;
}

/* Whether a checkpoint is due after `completed` steps: with --output-dir, every --checkpoint-every steps
 * and after the last. */
static inline int train_checkpoint_due(const TrainArgs* args, int completed, int max_steps) {
    return args->output_dir[0] && args->checkpoint_every > 0 && (completed % args->checkpoint_every == 0 || completed == max_steps);
}

/* "the last checkpoint is step S", or that there is none (saved_step < 0), for the stop messages */
static inline const char* train_last_checkpoint_text(int saved_step, char* buf, size_t cap) {
    if (saved_step < 0) snprintf(buf, cap, "no checkpoint has been written");
    else snprintf(buf, cap, "the last checkpoint is step %d", saved_step);
    return buf;
}

/* After a save failed (its error already printed): with --on-save-error continue, says the run goes on
 * without `what` and returns 0, unless it was the run's last step (nothing is left to continue, and the
 * final model would be lost behind exit 0); otherwise prints the error naming the last checkpoint and
 * returns SAVE_FAILED_EXIT_STATUS (the loop then ends). */
static inline int train_save_failed(int save_error_continue, int last_step, const char* what, int saved_step) {
    if (save_error_continue && !last_step) {
        printf("warning: continuing without %s (--on-save-error continue)\n", what);
        return 0;
    }
    char last[64];
    fprintf(stderr, "error: stopping (%s); %s\n", save_error_continue ? "it was the run's last step" : "--on-save-error stop",
            train_last_checkpoint_text(saved_step, last, sizeof(last)));
    return SAVE_FAILED_EXIT_STATUS;
}

/* The checkpoint of the completed steps, written before an exit (a stop signal, a data error), failed (its error
 * printed): says which checkpoint is the last one; returns SAVE_FAILED_EXIT_STATUS. */
static inline int train_exit_save_failed(int saved_step) {
    char last[64];
    fprintf(stderr, "error: the completed steps are not saved; %s\n", train_last_checkpoint_text(saved_step, last, sizeof(last)));
    return SAVE_FAILED_EXIT_STATUS;
}

/* After a metrics.jsonl record: a failed write (the logger printed it and stopped logging) is handled
 * as a failed save, by --on-save-error. Returns the exit status (0: go on). */
static inline int train_log_failed(Logger* logger, int save_error_continue, int saved_step) {
    if (!logger->failed) return 0;
    logger->failed = 0;
    return train_save_failed(save_error_continue, 0, logger->path, saved_step);
}

/* At the end of the run: closes metrics.jsonl (logger_free). A failed close (printed) is a failed save when the
 * run would exit 0 and --on-save-error is stop (exit 74); otherwise a warning, and the run's own status stands (a
 * preempted run's 75 stays 75, so the job is requeued; 65, 66, 74 keep their meaning). Returns the exit status. */
static inline int train_log_close(Logger* logger, int save_error_continue, int exit_status) {
    if (logger_free(logger) == 0) return exit_status;
    if (exit_status == 0 && !save_error_continue) {
        fprintf(stderr, "error: stopping (--on-save-error stop): %s may have lost its last records\n", logger->path);
        return SAVE_FAILED_EXIT_STATUS;
    }
    printf("warning: %s may have lost its last records (%s)\n", logger->path,
           exit_status == 0 ? "--on-save-error continue" : "the exit status stays the run's own");
    return exit_status;
}

/* Records the best model (its checkpoint of `step` just written to best_dir, beside the previous best)
 * in best_dir/best.txt, then deletes the previous best, so that best.txt names a complete checkpoint
 * at every moment. Returns 0, or −1 after printing why (the previous best is then kept). */
static inline int train_record_best(const EarlyStop* early, const char* best_dir, int step) {
    char err[4600];
    if (early_stop_try_write(early, best_dir, err, sizeof(err)) != 0) {
        fprintf(stderr, "error: best checkpoint of step %d not recorded: %s\n", step, err);
        return -1;
    }
    checkpoint_keep_only(best_dir, step, stdout);
    return 0;
}

/* The validation loss after `step` completed steps: its line on stdout, its record in metrics.jsonl,
 * and early stopping's verdict on it (always EARLY_STOP_WAIT without --early-stop). */
static inline EarlyStopVerdict train_record_val(const TrainArgs* args, Logger* logger, EarlyStop* early, int step, int max_steps,
                                                float val_loss) {
    printf("step %5d/%d | val loss %.6f\n", step, max_steps, val_loss);
    logger_val(logger, step, val_loss);
    return args->early_stop > 0 ? early_stop_update(early, step, val_loss) : EARLY_STOP_WAIT;
}

/* The line of an early stop; best_dir: where the best checkpoint is, "" when none is kept. With
 * --on-save-error continue the best's save may have failed: the line then says what best_dir holds. */
static inline void train_report_early_stop(const EarlyStop* early, const char* best_dir) {
    char where[4400] = "";
    int saved_step;
    float saved_loss;
    if (best_dir[0]) {
        int found = early_stop_read(best_dir, &saved_step, &saved_loss);
        if (found == 1 && saved_step == early->best_step) snprintf(where, sizeof(where), ", checkpoint in %s", best_dir);
        else if (found == 1)
            snprintf(where, sizeof(where), " (its checkpoint could not be saved; %s holds step %d's, val loss %.6f)", best_dir, saved_step,
                     (double)saved_loss);
        else snprintf(where, sizeof(where), " (its checkpoint could not be saved; %s holds none)", best_dir);
    }
    printf("early stop: val loss has not improved for %d evaluations; best %.6f at step %d%s\n", early->since_best,
           (double)early->best_loss, early->best_step, where);
}

/* Whether best_dir holds this run's weights of `step` already: a run resumed at start_step = step from
 * output_dir, whose first evaluation, of the step its best was saved at, becomes the best again (other
 * validation data or tokens: not comparable), when best_dir's complete checkpoint of the step has the model
 * file header (config, payload CRC) of the one resumed, and it verifies in full (a corrupt one is said, "resume:
 * skipping best checkpoint ...", and written again from the weights in memory). Then only best.txt is rewritten:
 * saving the checkpoint again would first delete it. Reads every byte of best_dir's checkpoint: rank 0's call. */
static inline int train_best_saved(const char* best_dir, const char* output_dir, int step, int start_step) {
    if (step != start_step || step == 0) return 0;
    char err[4600];
    int32_t h[HEADER_WORDS], best_h[HEADER_WORDS];
    if (checkpoint_verify_(output_dir, step, 0, h, err, sizeof(err)) != 0 || checkpoint_verify_(best_dir, step, 0, best_h, err, sizeof(err)) != 0 ||
        memcmp(h, best_h, sizeof(h)) != 0)
        return 0;
    if (checkpoint_verify_(best_dir, step, 1, best_h, err, sizeof(err)) != 0) {
        printf("resume: skipping best checkpoint of step %d: %s: writing it again from the weights in memory\n", step, err);
        return 0;
    }
    return 1;
}

/* What a step line tells: the step that completed `step` steps, its mean loss, learning rate, gradient
 * norm, time and tokens per second, and the validation loss computed before it when `evaluated`. */
typedef struct {
    int step;
    float loss, lr, norm;
    double ms, tok_s;
    int evaluated;
    float val_loss;
} StepLine;

/* Counts the step's time into progress, then prints its line, with `throughput` (the trainer's
 * "<FLOP rate> (<share> of peak)") and the elapsed time and ETA. Returns the elapsed seconds. */
static inline double train_report_step(Progress* progress, const StepLine* s, int max_steps, const char* throughput) {
    progress_step(progress, s->ms / 1000.0);
    double elapsed = progress_elapsed(progress);
    char val_text[48] = "", elapsed_text[32], eta_text[32];
    if (s->evaluated) snprintf(val_text, sizeof(val_text), " | val loss %.6f", s->val_loss);
    format_duration(elapsed_text, sizeof(elapsed_text), elapsed);
    format_duration(eta_text, sizeof(eta_text), progress_eta(progress, max_steps - s->step));
    printf("step %5d/%d | loss %.6f | lr %.3e | norm %.4f | %.1f ms | %.0f tok/s | %s%s | elapsed %s | ETA %s\n", s->step, max_steps,
           s->loss, s->lr, s->norm, s->ms, s->tok_s, throughput, val_text, elapsed_text, eta_text);
    return elapsed;
}

/* Flushes stdout, the run's log, after a step's lines. A failed write (a full disk under a redirected log) does not
 * stop training, whose record is metrics.jsonl and the checkpoints: one warning on stderr, the first time (*warned,
 * the caller's, 0 at the start, is set then). */
static inline void train_flush_stdout(int* warned) {
    if ((fflush(stdout) != 0 || ferror(stdout)) && !*warned) {
        *warned = 1;
        fprintf(stderr, "warning: stdout: write failed: %s (%s:%d); training goes on (metrics.jsonl and the checkpoints are its record)\n",
                strerror(errno), __FILE__, __LINE__);
    }
}

/* The health guard's line when it skipped the update of the step that would have completed `step` steps. */
static inline void train_report_health(const HealthResult* verdict, const HealthState* health, const HealthConfig* config, int step,
                                       int max_steps) {
    if (verdict->verdict == HEALTH_SKIP_NONFINITE)
        printf("step %5d/%d | update skipped: non-finite loss or gradient norm (%d in a row, %d in the run)\n", step, max_steps,
               health->bad_in_row, health->skipped);
    if (verdict->verdict == HEALTH_SKIP_SPIKE)
        printf("step %5d/%d | update skipped: spike, z-score loss %.2f norm %.2f > %g (%d in a row, %d in the run)\n", step, max_steps,
               verdict->z_loss, verdict->z_norm, (double)config->spike_zscore, health->bad_in_row, health->skipped);
}

/* The error when the update of step `step` made parameter `bad` (an index into all parameters)
 * non-finite; value: that parameter where the trainer holds it on the host, else NULL. Returns
 * HEALTH_EXIT_STATUS. */
static inline int train_nonfinite_param(const GPTConfig* c, size_t bad, const float* value, int step, int saved_step) {
    int tensor;
    size_t element;
    gpt_param_locate(c, bad, &tensor, &element);
    char value_text[48] = "";
    if (value) snprintf(value_text, sizeof(value_text), " (%g)", (double)*value);
    char last[64];
    fprintf(stderr, "error: step %d: the update made parameter %s[%zu] non-finite%s; stopping, %s\n", step, GPT_PARAM_NAMES[tensor],
            element, value_text, train_last_checkpoint_text(saved_step, last, sizeof(last)));
    return HEALTH_EXIT_STATUS;
}

/* After step `step`: 0 while the run may go on, else HEALTH_EXIT_STATUS after the error (more than
 * --max-bad-steps updates skipped in a row). */
static inline int train_health_stop(const HealthState* health, const HealthConfig* config, int step, int saved_step) {
    if (!health_should_stop(health, config)) return 0;
    char last[64];
    fprintf(stderr, "error: step %d: %d updates skipped in a row (--max-bad-steps %d); stopping, %s\n", step, health->bad_in_row,
            config->max_bad_steps, train_last_checkpoint_text(saved_step, last, sizeof(last)));
    return HEALTH_EXIT_STATUS;
}

/* The run stops after `completed` steps (a stop signal, a data error): says why, and that nothing is saved
 * without --output-dir. Returns whether the completed steps still need a checkpoint (the newest one,
 * saved_step, is older). */
static inline int train_stopping_(const TrainArgs* args, const char* why, int completed, int saved_step) {
    printf("%s: stopping after %d completed steps\n", why, completed);
    if (!args->output_dir[0]) {
        printf("no --output-dir: nothing saved\n");
        return 0;
    }
    return saved_step != completed;
}

/* A stop signal ended the run after `completed` steps: says so (sig: the signal this process received,
 * 0 when another rank received it), and that nothing is saved without --output-dir. Returns whether
 * the completed steps still need a checkpoint (the newest one, saved_step, is older). */
static inline int train_preempted(const TrainArgs* args, int sig, int completed, int saved_step) {
    char why[128];
    snprintf(why, sizeof(why), "%s received", sig ? preempt_signal_name(sig) : "a stop signal (on another rank)");
    return train_stopping_(args, why, completed, saved_step);
}

/* A shard could not be read after `completed` steps (the training data's, in the step then dropped; or the
 * validation data's, whose loss is then left unfinished): the loader's error on stderr (error: dl->error
 * of this rank, prefixed with the rank when world > 1; NULL when only another rank's failed, which prints
 * it), then the stop line, as for a stop signal, and what to do. Returns whether the completed steps still
 * need a checkpoint (not when a fresh run trained none: its initial weights would only make the same
 * command refuse the directory); the trainer then exits DATA_ERROR_EXIT_STATUS. */
static inline int train_data_failed(const TrainArgs* args, const char* error, int rank, int world, int completed, int max_steps,
                                    int saved_step) {
    if (error && world > 1) error_print("rank %d: %s", rank, error);
    else if (error) error_print("%s", error);
    const char* why = error ? "data error" : "data error on another rank";
    if (completed == 0 && saved_step < 0) {
        printf("%s: stopping before the first step: nothing trained, nothing saved; fix the data and run again\n", why);
        return 0;
    }
    int save = train_stopping_(args, why, completed, saved_step);
    if (args->output_dir[0] && completed < max_steps) printf("once the data is restored, resume with -y 1\n");
    else if (args->output_dir[0]) printf("the final validation was left unfinished; the trained weights are saved\n");
    return save;
}

/* A stop signal came during the validation of the weights after `step` completed steps: it is left
 * unfinished, so its loss counts nowhere (metrics, early stopping); a run resumed from that step computes it. */
static inline void train_eval_stopped(int step) {
    printf("stop signal during the validation after step %d: left unfinished (a run resumed from step %d computes it)\n", step, step);
}

/* --profile N (llmc/profile.h): the trainer times the ops of N steps from the run's second (the first
 * warms caches), each step's table entries added by the trainer; train_profile_step counts a timed
 * step and prints the table after the N-th, train_profile_finish prints it for a run that ended sooner. */
typedef struct {
    int steps, from, done; /* N; the first timed step; steps timed so far */
    double seconds;        /* their measured step times */
} TrainProfile;

static inline void train_profile_init(TrainProfile* p, int steps, int start_step, int max_steps) {
    p->steps = steps;
    p->from = start_step + (max_steps - start_step > 1);
    p->done = 0;
    p->seconds = 0.0;
}

/* whether step `step` is timed */
static inline int train_profile_on(const TrainProfile* p, int step) { return p->steps > 0 && step >= p->from && p->done < p->steps; }

static inline void train_profile_step(TrainProfile* p, const Profiler* table, double seconds) {
    p->done++;
    p->seconds += seconds;
    if (p->done == p->steps) profile_print(stdout, table, p->done, p->seconds);
}

static inline void train_profile_finish(const TrainProfile* p, const Profiler* table) {
    if (p->done > 0 && p->done < p->steps) profile_print(stdout, table, p->done, p->seconds);
}

#endif /* LLMC_TRAIN_LOOP_H */
