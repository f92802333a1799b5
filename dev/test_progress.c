/*
 * dev/test_progress.c — unit tests of the trainers' progress modules, each against a reference
 * written here from its specification (not from the code's output):
 *   format_duration        (llmc/progress.h) vs the rule "rounded seconds -> 42s, 3m07s, 2h05m, 3d04h"
 *   progress_eta           the mean of the last PROGRESS_WINDOW step times x steps left, over 50 steps
 *   logger_json_string     escapes " \ and control characters as JSON requires (checked byte by byte;
 *                          dev/test_ux.py parses whole records with Python's json module)
 *   early_stop_update      vs a naive replay (best = strict minimum of the finite losses so far)
 *   early_stop_resume      the evaluations-since-best count vs enumerating the evaluation steps
 *   profile_print          rows sorted by time, each row's share, the total line
 * Ends with "N passed, M failed".
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include "llmc/early_stop.h"
#include "llmc/profile.h"
#include "llmc/progress.h"

static int passed = 0, failed = 0;
static void check(int ok, const char* what) {
    printf("%s %s\n", ok ? "ok  " : "FAIL", what);
    if (ok) passed++;
    else failed++;
}

static void test_format_duration(void) {
    const struct {
        double s;
        const char* want;
    } cases[] = {{0, "0s"},          {-3, "0s"},          {0.49, "0s"},         {0.5, "1s"},         {59.4, "59s"},
                 {59.5, "1m00s"},    {83, "1m23s"},       {245, "4m05s"},       {3599.4, "59m59s"},  {3599.5, "1h00m"},
                 {7500, "2h05m"},    {86399, "23h59m"},   {86400, "1d00h"},     {3 * 86400 + 4 * 3600 + 59, "3d04h"}};
    int n = (int)(sizeof(cases) / sizeof(cases[0])), bad = 0;
    char got[32], report[256] = "";
    for (int i = 0; i < n; i++) {
        format_duration(got, sizeof(got), cases[i].s);
        if (strcmp(got, cases[i].want) != 0 && !bad++) snprintf(report, sizeof(report), ": %g s gave %s, want %s", cases[i].s, got, cases[i].want);
    }
    char what[400];
    snprintf(what, sizeof(what), "format_duration: %d cases (0 s to 3 days, rounding at .5, carries)%s", n, report);
    check(bad == 0, what);
}

static void test_eta(void) {
    Progress p;
    progress_init(&p);
    double times[50], worst = 0.0;
    int max_steps = 60;
    check(progress_eta(&p, 10) == 0.0, "progress_eta before any step: 0");
    for (int k = 0; k < 50; k++) {
        times[k] = 0.01 * (1 + (k * 37) % 11); /* uneven step times */
        progress_step(&p, times[k]);
        int first = k + 1 > PROGRESS_WINDOW ? k + 1 - PROGRESS_WINDOW : 0;
        double sum = 0.0;
        for (int i = first; i <= k; i++) sum += times[i];
        double want = sum / (k + 1 - first) * (max_steps - (k + 1));
        double err = fabs(progress_eta(&p, max_steps - (k + 1)) - want);
        if (err > worst) worst = err;
    }
    char what[200];
    snprintf(what, sizeof(what), "progress_eta over 50 uneven steps = mean of the last %d x steps left (worst |error| %.1e s)",
             PROGRESS_WINDOW, worst);
    check(worst < 1e-9, what);
    check(progress_elapsed(&p) >= 0.0 && progress_elapsed(&p) < 60.0, "progress_elapsed: non-negative, from progress_init");
}

static void test_json_string(void) {
    char out[64];
    logger_json_string(out, sizeof(out), "a\"b\\c\nd\x01/e");
    check(strcmp(out, "\"a\\\"b\\\\c\\u000ad\\u0001/e\"") == 0, "logger_json_string escapes quote, backslash, newline, 0x01");
    char small[12];
    logger_json_string(small, sizeof(small), "0123456789abcdef");
    size_t n = strlen(small);
    check(n < sizeof(small) && small[0] == '"' && small[n - 1] == '"', "logger_json_string cut short stays a quoted literal");
    /* a path or prompt of any bytes: well-formed UTF-8 kept, each other byte U+FFFD (escaped), never a cut character */
    logger_json_string(out, sizeof(out), "\xe2\x82\xac|\xff|\xe2\x82|\xed\xa0\x80|\xf0\x9f\x98\x80|\xc0\xaf");
    check(strcmp(out, "\"\xe2\x82\xac|\\ufffd|\\ufffd\\ufffd|\\ufffd\\ufffd\\ufffd|\xf0\x9f\x98\x80|\\ufffd\\ufffd\"") == 0,
          "logger_json_string: UTF-8 kept; a stray, cut, surrogate or overlong sequence's bytes each \\ufffd");
    char euros[3 * 40 + 1] = "";
    for (int i = 0; i < 40; i++) strcat(euros, "\xe2\x82\xac");
    int whole = 1;
    for (size_t cap = 10; cap < 40; cap++) {
        char cut[40];
        logger_json_string(cut, cap, euros);
        size_t k = strlen(cut);
        whole &= k < cap && cut[k - 1] == '"' && (k - 2) % 3 == 0 && k + 7 >= cap; /* stopped only for want of room */
    }
    check(whole, "logger_json_string cut short: whole 3-byte characters only, for every buffer size 10..39");
}

static void test_early_stop(void) {
    /* losses of 40 evaluations: falling, then flat, a NaN, a new best, then rising */
    float losses[40];
    for (int i = 0; i < 40; i++) losses[i] = i < 10 ? 5.0f - 0.1f * i : i < 20 ? 4.1f : 4.2f + 0.01f * i;
    losses[12] = NAN;
    losses[21] = 3.0f;
    int mismatches = 0, stops_checked = 0;
    for (int patience = 1; patience <= 12; patience++) {
        EarlyStop e;
        early_stop_init(&e, patience);
        int stop_at = -1;
        for (int i = 0; i < 40 && stop_at < 0; i++) {
            EarlyStopVerdict v = early_stop_update(&e, i * 5, losses[i]);
            /* naive reference: the best is the strict minimum of the finite losses before and at i */
            int best = -1;
            for (int j = 0; j <= i; j++)
                if (isfinite(losses[j]) && (best < 0 || losses[j] < losses[best])) best = j;
            int since = i - best;
            EarlyStopVerdict want = best == i ? EARLY_STOP_IMPROVED : since >= patience ? EARLY_STOP_STOP : EARLY_STOP_WAIT;
            if (v != want || e.best_step != best * 5 || e.best_loss != losses[best] || e.since_best != since) mismatches++;
            if (v == EARLY_STOP_STOP) stop_at = i;
        }
        stops_checked += stop_at >= 0;
    }
    char what[200];
    snprintf(what, sizeof(what), "early_stop_update vs a naive replay, patience 1..12 over 40 evaluations: %d mismatches, %d runs stopped",
             mismatches, stops_checked);
    check(mismatches == 0 && stops_checked == 12, what);
    EarlyStop flat;
    early_stop_init(&flat, 3);
    int evals = 0;
    EarlyStopVerdict v;
    do v = early_stop_update(&flat, evals * 10, 2.5f);
    while (++evals < 100 && v != EARLY_STOP_STOP);
    check(evals == 4 && flat.best_step == 0, "a constant val loss with --early-stop 3 stops at the 4th evaluation, best step 0");
}

static void test_early_stop_resume(void) {
    char dir[256];
    snprintf(dir, sizeof(dir), "/tmp/test_progress_%d", (int)getpid());
    make_dir_check(dir);
    int mismatches = 0, cases = 0;
    const int max_steps = 40; /* evaluations at s = 0, every, 2 every, ... and after the last step, 40 */
    const int saved_periods[4] = {-1, 0, 2, 5}; /* the checkpoint's run's --val-every: not recorded, no validation, ... */
    for (int every = 1; every <= 7; every++)
        for (int k = 0; k < 4; k++)
        for (int best = 0; best <= max_steps; best++) {
            int past = saved_periods[k] >= 0 ? saved_periods[k] : every; /* the period of the evaluations before start */
            if (past > 0 && best % past != 0 && best != max_steps) continue; /* the best is one of them */
            for (int start = 1; start <= max_steps; start++) {
                if (past == 0 && best < start) continue; /* no evaluation before start: a best only after it */
                /* reference, by enumeration: the evaluations after the best one and before start (the saved run's);
                 * or, when the best is not before start (a resume from an older checkpoint), minus those the
                 * resumed run repeats up to and including it (each adds one, reaching 0 at the best) */
                int want = 0;
                for (int s = 0; s <= max_steps; s++) {
                    if (s < start && past > 0 && (s % past == 0 || s == max_steps) && best < s) want++;
                    if (s >= start && (s % every == 0 || s == max_steps) && s <= best) want--;
                }
                EarlyStop e;
                early_stop_init(&e, 3);
                e.best_step = best;
                e.best_loss = 1.5f;
                char err[4600];
                /* the best step's marker makes the checkpoint "complete" for early_stop_resume */
                char model[4200], state[4200], done[4200];
                checkpoint_paths(model, state, done, sizeof(model), dir, best, 0);
                FILE* f = fopen_check(done, "wb");
                fclose_check(f, done);
                int rc = early_stop_try_write(&e, dir, err, sizeof(err));
                EarlyStop r;
                early_stop_init(&r, 3);
                FILE* sink = fopen_check("/dev/null", "w");
                int restored = rc == 0 && early_stop_resume(&r, dir, start, max_steps, every, saved_periods[k], 1, 0, sink);
                fclose_check(sink, "/dev/null");
                remove(done);
                cases++;
                if (!restored || r.best_step != best || r.best_loss != 1.5f || r.since_best != want) mismatches++;
            }
        }
    char path[300];
    snprintf(path, sizeof(path), "%s/best.txt", dir);
    EarlyStop r;
    early_stop_init(&r, 3);
    FILE* sink = fopen_check("/dev/null", "w");
    int without_checkpoint = early_stop_resume(&r, dir, 40, max_steps, 5, -1, 1, 0, sink); /* best.txt names a step with no marker */
    /* a complete best of step 7: restored when the saved run's evaluations are comparable with this run's, not otherwise */
    EarlyStop seven, same, other;
    early_stop_init(&seven, 3);
    early_stop_init(&same, 3);
    early_stop_init(&other, 3);
    seven.best_step = 7;
    seven.best_loss = 2.0f;
    char model[4200], state[4200], done[4200], err[4600];
    checkpoint_paths(model, state, done, sizeof(model), dir, 7, 0);
    FILE* marker = fopen_check(done, "wb");
    fclose_check(marker, done);
    int written = early_stop_try_write(&seven, dir, err, sizeof(err)) == 0;
    int restored_same = early_stop_resume(&same, dir, 10, max_steps, 5, 5, 1, 0, sink);
    int restored_other = early_stop_resume(&other, dir, 10, max_steps, 5, 5, 0, 0, sink);
    remove(done);
    fclose_check(sink, "/dev/null");
    remove(path);
    rmdir(dir);
    char what[200];
    snprintf(what, sizeof(what), "early_stop_resume: best step, loss and evaluations since, vs enumeration: %d cases, %d mismatches",
             cases, mismatches);
    check(mismatches == 0, what);
    check(without_checkpoint == 0 && r.best_step == -1, "early_stop_resume ignores best.txt when its checkpoint is not complete");
    snprintf(what, sizeof(what), "early_stop_resume: a best measured on the same validation is restored (step %d), one on other "
             "validation data or tokens is not (step %d: this run's first evaluation becomes the best)", same.best_step, other.best_step);
    check(written && restored_same && same.best_step == 7 && same.best_loss == 2.0f && !restored_other && other.best_step == -1, what);
}

static void test_profile_print(void) {
    Profiler p;
    profile_reset(&p);
    profile_add(&p, PROF_ADAMW, 0.010);
    profile_add(&p, PROF_MATMUL_FC_FWD, 0.030);
    profile_add(&p, PROF_MATMUL_FC_FWD, 0.030);
    profile_add(&p, PROF_GELU_FWD, 0.020);
    profile_add(NULL, PROF_GELU_FWD, 1.0); /* off: no effect, no crash */
    profile_begin(NULL, PROF_DATA);
    profile_end(NULL, PROF_DATA);
    char* text = NULL;
    size_t bytes = 0;
    FILE* f = open_memstream(&text, &bytes);
    if (!f) sys_fatalf("open_memstream failed: %s", strerror(errno));
    profile_print(f, &p, 2, 0.100);
    fclose_check(f, "the memory stream");
    const char* fc = strstr(text, "matmul fc forward");
    const char* gelu = strstr(text, "gelu forward");
    const char* adamw = strstr(text, "adamw");
    int rows = 0;
    for (const char* s = text; (s = strstr(s, "\n| ")) != NULL; s++) rows++;
    int ok = fc && gelu && adamw && fc < gelu && gelu < adamw && rows == 4 && strstr(fc, "60.00") && strstr(fc, "30.000") &&
             strstr(fc, "1.0") && strstr(fc, "60.0%") && strstr(text, "the ops sum to 90.00 ms of the 2 step(s)' 100.00 ms (90.0%)");
    check(ok, "profile_print: 3 rows (+ heading) longest first, ms, ms/step, calls/step, share, total line; NULL profiler a no-op");
    if (!ok) fputs(text, stdout);
    free(text);
    check(fabs(profile_total(&p) - 0.090) < 1e-12, "profile_total sums the ops");
}

int main(void) {
    test_format_duration();
    test_eta();
    test_json_string();
    test_early_stop();
    test_early_stop_resume();
    test_profile_print();
    printf("%d passed, %d failed\n", passed, failed);
    return failed ? 1 : 0;
}
