/*
 * Tests of llmc/health.h against a naive reference written here: the reference keeps every
 * accepted (loss, norm) in an unbounded list and computes the z-scores of the last W of them in
 * long double with the formula of the header comment. Over long random sequences with spikes,
 * NaNs and infinities, verdicts, counters and z-scores must agree; the health state must survive
 * a round trip through a training-state file exactly; health_resize keeps the newest entries.
 * Ends with "N passed, M failed".
 */
#include "llmc/checkpoint.h"
#include "llmc/health.h"
#include "llmc/rng.h"

#include "dev/testlib.h"

/* z-score of x against xs[0..n) in long double: (x - mean) / max(sd, 1e-6 |mean| + 1e-30) */
static long double ref_z(const float* xs, int n, float x) {
    long double mean = 0, var = 0;
    for (int i = 0; i < n; i++) mean += xs[i];
    mean /= n;
    for (int i = 0; i < n; i++) var += (xs[i] - mean) * (xs[i] - mean);
    long double sd = sqrtl(var / n), fl = 1e-6L * fabsl(mean) + 1e-30L;
    return ((long double)x - mean) / (sd > fl ? sd : fl);
}

static void test_against_reference(float zscore, int window, int steps, uint64_t seed) {
    HealthConfig c = {0, zscore, window};
    HealthState s;
    memset(&s, 0, sizeof(s));
    float* acc_loss = (float*)malloc_check((size_t)steps * sizeof(float));
    float* acc_norm = (float*)malloc_check((size_t)steps * sizeof(float));
    int accepted = 0, ref_bad = 0, ref_skipped = 0, mismatches = 0, spikes = 0, nonfinite = 0;
    double worst_z = 0.0;
    Rng r;
    rng_seed(&r, seed);
    for (int t = 0; t < steps; t++) {
        float loss = 3.0f - 1e-4f * (float)t + 0.05f * (rng_uniform(&r) - 0.5f);
        float norm = 1.0f + 0.2f * rng_uniform(&r);
        float u = rng_uniform(&r);
        if (u < 0.03f) loss *= 1.0f + 3.0f * rng_uniform(&r);       /* loss spike */
        else if (u < 0.06f) norm *= 2.0f + 50.0f * rng_uniform(&r); /* norm spike */
        else if (u < 0.07f) loss = NAN;
        else if (u < 0.08f) norm = INFINITY;
        /* reference */
        int want;
        long double zl = 0, zn = 0;
        if (!isfinite(loss) || !isfinite(norm)) want = HEALTH_SKIP_NONFINITE;
        else {
            want = HEALTH_OK;
            if (zscore > 0 && accepted >= window) {
                zl = ref_z(acc_loss + accepted - window, window, loss);
                zn = ref_z(acc_norm + accepted - window, window, norm);
                if (zl > zscore || zn > zscore) want = HEALTH_SKIP_SPIKE;
            }
        }
        if (want == HEALTH_OK) {
            acc_loss[accepted] = loss;
            acc_norm[accepted++] = norm;
            ref_bad = 0;
        } else {
            ref_bad++;
            ref_skipped++;
        }
        spikes += want == HEALTH_SKIP_SPIKE;
        nonfinite += want == HEALTH_SKIP_NONFINITE;
        HealthResult got = health_check(&s, &c, loss, norm);
        double dz = fabs((double)(got.z_loss - zl)) + fabs((double)(got.z_norm - zn));
        if (dz > worst_z) worst_z = dz;
        if ((int)got.verdict != want || s.bad_in_row != ref_bad || s.skipped != ref_skipped || dz > 1e-6) mismatches++;
    }
    int window_ok = s.count == (accepted < window ? accepted : window) &&
                    memcmp(s.loss, acc_loss + accepted - s.count, (size_t)s.count * sizeof(float)) == 0 &&
                    memcmp(s.norm, acc_norm + accepted - s.count, (size_t)s.count * sizeof(float)) == 0;
    check(mismatches == 0 && window_ok,
          "health_check vs long-double reference, Z=%g W=%d, %d steps (%d spikes, %d non-finite skipped): %d mismatches, "
          "worst |dz| %.2e, final window %s",
          (double)zscore, window, steps, spikes, nonfinite, mismatches, worst_z, window_ok ? "identical" : "DIFFERS");
    free(acc_loss);
    free(acc_norm);
}

static void test_stop_and_resize(void) {
    HealthConfig c = {3, 0.0f, 8};
    HealthState s;
    memset(&s, 0, sizeof(s));
    int stops[6];
    float inputs[6] = {2.0f, NAN, NAN, 2.0f, NAN, NAN};
    for (int i = 0; i < 6; i++) {
        health_check(&s, &c, inputs[i], 1.0f);
        stops[i] = health_should_stop(&s, &c);
    }
    health_check(&s, &c, NAN, 1.0f);
    int stop_now = health_should_stop(&s, &c);
    check(!stops[0] && !stops[2] && !stops[5] && stop_now && s.skipped == 5 && s.bad_in_row == 3,
          "max_bad_steps 3: an accepted step resets the run of skips; the 3rd NaN in a row stops (skipped %d)", s.skipped);
    HealthState w;
    memset(&w, 0, sizeof(w));
    HealthConfig big = {0, 0.0f, 10};
    for (int i = 0; i < 10; i++) health_check(&w, &big, (float)i, (float)(100 + i));
    health_resize(&w, 4);
    check(w.count == 4 && w.loss[0] == 6.0f && w.loss[3] == 9.0f && w.norm[0] == 106.0f && w.loss[4] == 0.0f,
          "health_resize 10 -> 4 keeps the newest: losses %g..%g", (double)w.loss[0], (double)w.loss[3]);
}

static void test_state_round_trip(void) {
    TrainState st;
    memset(&st, 0, sizeof(st));
    st.step = 77;
    st.world = 1;
    st.num_params = st.shard_count = 10;
    st.beta1 = 0.9f;
    st.seq_len = 4;
    st.step_tokens = 16;
    HealthConfig c = {0, 0.0f, HEALTH_WINDOW_MAX};
    for (int i = 0; i < 70; i++) health_check(&st.health, &c, 1.0f / (float)(i + 1), 3.0f + (float)i);
    health_check(&st.health, &c, NAN, 1.0f);
    float m[10] = {0}, v[10] = {0};
    char path[] = "/tmp/test_health_XXXXXX";
    int fd = mkstemp(path);
    if (fd < 0) fatalf("mkstemp failed: %s", strerror(errno));
    close(fd);
    state_file_write(path, &st, m, v, NULL);
    TrainState back;
    int32_t h[HEADER_WORDS];
    fclose_check(state_file_open(path, &back, h), path);
    unlink(path);
    check(memcmp(&back.health, &st.health, sizeof(HealthState)) == 0 && back.health.count == HEALTH_WINDOW_MAX &&
              back.health.skipped == 1,
          "health state (window of %d, %d skipped) round-trips exactly through a training-state file", back.health.count,
          back.health.skipped);
}

int main(void) {
    test_against_reference(3.0f, 16, 4000, 1);
    test_against_reference(2.0f, 64, 4000, 2);
    test_against_reference(0.0f, 8, 1000, 3);
    test_stop_and_resize();
    test_state_round_trip();
    printf("%d passed, %d failed\n", passed, failed);
    return failed != 0;
}
