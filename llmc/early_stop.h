/*
 * llmc/early_stop.h — --early-stop N: end a run when the validation loss has not improved for N
 * evaluations, keeping the best model.
 *
 * early_stop_update(e, step, val_loss) after each evaluation: a finite loss below every earlier
 * one (strictly) is the new best (EARLY_STOP_IMPROVED: the trainer writes the best checkpoint);
 * otherwise one more evaluation without improvement, and once there are `patience` of them in a
 * row, EARLY_STOP_STOP (the trainer stops, exit 0). A non-finite loss never improves. So a run
 * whose validation loss cannot improve stops at its (N+1)-th evaluation.
 *
 * The best checkpoint is a complete checkpoint in DIR/best/ (doc/formats.md, "Checkpoint
 * directory"; the trainer keeps only the one best.txt names there) plus DIR/best/best.txt, written after it:
 * "step S\nval_loss L\n" (L with %.9g, which round-trips a float); the previous best is deleted only
 * after that (train_record_best), so best.txt always names a complete checkpoint. On resume,
 * early_stop_resume reads best.txt back and counts the evaluations made since the best step, so a
 * resumed run stops where an uninterrupted one would. No global state.
 */
#ifndef LLMC_EARLY_STOP_H
#define LLMC_EARLY_STOP_H

#include <math.h>
#include "llmc/checkpoint.h"

typedef struct {
    int patience;    /* evaluations without improvement that stop the run (> 0) */
    int best_step;   /* the step of the best evaluation; -1 before the first */
    float best_loss; /* its validation loss */
    int since_best;  /* evaluations since the best one */
} EarlyStop;

typedef enum { EARLY_STOP_IMPROVED, EARLY_STOP_WAIT, EARLY_STOP_STOP } EarlyStopVerdict;

static inline void early_stop_init(EarlyStop* e, int patience) {
    e->patience = patience;
    e->best_step = -1;
    e->best_loss = INFINITY;
    e->since_best = 0;
}

static inline EarlyStopVerdict early_stop_update(EarlyStop* e, int step, float val_loss) {
    if (isfinite(val_loss) && (e->best_step < 0 || val_loss < e->best_loss)) {
        e->best_step = step;
        e->best_loss = val_loss;
        e->since_best = 0;
        return EARLY_STOP_IMPROVED;
    }
    e->since_best++;
    return e->since_best >= e->patience ? EARLY_STOP_STOP : EARLY_STOP_WAIT;
}

/* "<dir>/best" into out */
static inline void early_stop_dir(char* out, size_t cap, const char* dir) {
    if ((size_t)snprintf(out, cap, "%s/best", dir) >= cap) fatalf("%s: path too long for the best checkpoint", dir);
}

/* Writes best_dir/best.txt atomically; returns 0, or -1 with the reason in err. */
static inline int early_stop_try_write(const EarlyStop* e, const char* best_dir, char* err, size_t cap) {
    char path[4200], text[96];
    if ((size_t)snprintf(path, sizeof(path), "%s/best.txt", best_dir) >= sizeof(path)) {
        snprintf(err, cap, "%s: path too long", best_dir);
        return -1;
    }
    const void* data[1] = {text};
    size_t bytes[1] = {(size_t)snprintf(text, sizeof(text), "step %d\nval_loss %.9g\n", e->best_step, (double)e->best_loss)};
    return atomic_try_write(path, 1, data, bytes, NULL, 0, 0, err, cap);
}

/* Reads best_dir/best.txt: 1 with its step and loss, 0 if there is none, -1 if it is malformed (a step below 0, a
 * loss that is not finite); exits if it cannot be read. */
static inline int early_stop_read(const char* best_dir, int* step, float* loss) {
    char path[4200];
    if ((size_t)snprintf(path, sizeof(path), "%s/best.txt", best_dir) >= sizeof(path)) fatalf("%s: path too long", best_dir);
    if (access(path, F_OK) != 0 && errno == ENOENT) return 0;
    FILE* f;
    char err[4600];
    if (fopen_regular_try(&f, path, err, sizeof(err)) != 0) sys_fatalf("%s", err); /* a FIFO: an error, not a wait */
    int fields = fscanf(f, "step %d\nval_loss %f\n", step, loss);
    if (ferror(f)) sys_fatalf("%s: read failed: %s", path, strerror(errno));
    fclose_check(f, path);
    return fields == 2 && *step >= 0 && isfinite(*loss) ? 1 : -1;
}

/* Evaluations at steps a..b (inclusive): every val_every-th step and the last one (max_steps: after
 * the last update), as the trainers evaluate (train_eval_due). */
static inline int early_stop_evals(int a, int b, int val_every, int max_steps) {
    if (a < 0) a = 0;
    if (b < a) return 0;
    int n = b / val_every - (a > 0 ? (a - 1) / val_every : -1);
    int last = max_steps;
    return n + (last >= a && last <= b && last % val_every != 0);
}

/* On resume at start_step of a max_steps run: restores the best step S and loss L from
 * best_dir/best.txt and counts the evaluations since S. S may lie ahead of start_step (the best was
 * written after the last regular checkpoint: a kill or a failed save in between): the resumed run
 * then repeats the evaluations up to S, none of which improves on L (the one at S equals it), so the
 * count starts that many below zero and reaches 0 at S, as in the uninterrupted run (a run whose
 * --max-steps now ends before S does not stop early). With `writer` (rank 0, which alone writes
 * best_dir), the checkpoint of S is verified in full (checkpoint_verify: a flipped byte is caught here,
 * not left as the best a finished run names), and once it verifies every other checkpoint of best_dir
 * is deleted (checkpoint_keep_only: a run killed after best.txt named a new best but before the
 * previous one was deleted left two); without it (other ranks: rank 0's verdict is broadcast) only its
 * marker is looked for. Returns 1 if restored; 0 if there is no best.txt, if best_dir holds no complete
 * checkpoint of S (a write cut short), if it does not verify ("resume: skipping best checkpoint of step
 * S: why"; this run's first evaluation then becomes the best, and best_dir's checkpoint is written again,
 * from the weights in memory when that evaluation is of step S), or if the saved run's evaluations are not
 * comparable with this run's (comparable 0: other validation data, tokens, sequence length or precision;
 * this run's first evaluation then becomes the best), with the reason printed to report. */
static inline int early_stop_resume(EarlyStop* e, const char* best_dir, int start_step, int max_steps, int val_every, int saved_val_every,
                                    int comparable, int writer, FILE* report) {
    int step;
    float loss;
    int found = early_stop_read(best_dir, &step, &loss);
    if (found == 0) return 0;
    if (found < 0) fatalf("%s/best.txt: malformed: expected \"step S\\nval_loss L\\n\" with S >= 0 and L finite", best_dir);
    char path[4200], model[4200], state[4200], done[4200];
    snprintf(path, sizeof(path), "%s/best.txt", best_dir);
    checkpoint_paths(model, state, done, sizeof(model), best_dir, step, 0);
    if (access(done, F_OK) != 0) {
        fprintf(report, "resume: early stop: %s names step %d but %s has no complete checkpoint of it; the best restarts\n", path,
                step, best_dir);
        return 0;
    }
    if (writer) {
        char err[4600];
        if (checkpoint_verify(best_dir, step, err, sizeof(err)) != 0) {
            fprintf(report, "resume: skipping best checkpoint of step %d: %s\n", step, err);
            fprintf(report, "resume: early stop: the best restarts: this run's first evaluation replaces it\n");
            return 0;
        }
        checkpoint_keep_only(best_dir, step, report);
    }
    if (!comparable) {
        fprintf(report, "resume: early stop: the best so far (val loss %.6f at step %d) was measured otherwise (validation data, "
                        "tokens, sequence length or precision): this run's first evaluation replaces it\n", (double)loss, step);
        return 0;
    }
    e->best_step = step;
    e->best_loss = loss;
    int past_every = saved_val_every >= 0 ? saved_val_every : val_every; /* the evaluations before start_step were the saved run's */
    e->since_best = (past_every > 0 ? early_stop_evals(step + 1, start_step - 1, past_every, max_steps) : 0) -
                    early_stop_evals(start_step, step, val_every, max_steps);
    fprintf(report, "resume: early stop: best val loss %.6f at step %d, ", (double)loss, step);
    if (e->since_best >= 0) fprintf(report, "%d evaluation(s) since\n", e->since_best);
    else fprintf(report, "not before this checkpoint: the evaluations up to it are repeated\n");
    return 1;
}

#endif
