/*
 * dev/test_infra.c — tests of the shared trainer infrastructure: llmc/rng.h, schedule.h,
 * dataloader.h, checkpoint.h, flags.h, sampler.h, logger.h.
 *
 * References are independent of the code under test: published test vectors (splitmix64,
 * xoshiro256**, CRC-32 check value), closed-form statistics, the schedule formulas written
 * out again here, files written by this test's own writer (test_write_file: header laid out
 * by hand from doc/formats.md, bitwise CRC-32), and exhaustive enumeration of the token
 * windows. Failure paths run in a forked child; the test checks its exit status and stderr.
 * Last line: "N passed, M failed"; exit status 1 on any failure.
 */
#include <float.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "llmc/checkpoint.h"
#include "llmc/dataloader.h"
#include "llmc/fileio.h"
#include "llmc/flags.h"
#include "llmc/logger.h"
#include "llmc/rng.h"
#include "llmc/sampler.h"
#include "llmc/schedule.h"

#include "dev/testlib.h"
#include "dev/run_child.h"

static char tmp_dir[256];

static void tmp_path(char* out, size_t cap, const char* name) { snprintf(out, cap, "%s/%s", tmp_dir, name); }

/* ----------------------------------------------------------------------------
 * failure paths: run fn(ctx) in a child with stderr captured; expect exit status `status`
 * and `needle` in stderr */
typedef void (*ChildFn)(void* ctx);

static void expect_failure(const char* what, ChildFn fn, void* ctx, int status, const char* needle) {
    char err[4096];
    int code = run_child(fn, ctx, err, sizeof(err));
    size_t len = strlen(err);
    char* nl = strchr(err, '\n');
    int one_line = needle[0] ? nl != NULL && nl[1] == '\0' : len == 0; /* no needle: expect silence */
    if (nl) *nl = '\0';
    check(code == status && strstr(err, needle) != NULL && one_line,
          "%s: exit %d (want %d), one-line stderr \"%s\" contains \"%s\"", what, code, status, err, needle);
}

/* ----------------------------------------------------------------------------
 * independent file writer: CRC-32 bit by bit, header words laid out by hand */
static uint32_t ref_crc32(uint32_t crc, const void* data, size_t n) {
    const uint8_t* p = (const uint8_t*)data;
    crc = ~crc;
    for (size_t i = 0; i < n; i++) {
        crc ^= p[i];
        for (int k = 0; k < 8; k++) crc = (crc >> 1) ^ (0xEDB88320u & (0u - (crc & 1u)));
    }
    return ~crc;
}

/* writes header (words[5..] from `fields`, nfields of them) + payload; crc_xor corrupts the CRC;
 * cut removes that many bytes from the end */
static void test_write_file(const char* path, uint32_t magic, int version, const int32_t* fields, int nfields,
                            const void* payload, size_t bytes, uint32_t crc_xor, size_t cut) {
    uint8_t* buf = (uint8_t*)calloc_check(1024 + bytes, 1);
    uint32_t w[256] = {0};
    w[0] = magic;
    w[1] = (uint32_t)version;
    w[2] = ref_crc32(0, payload, bytes) ^ crc_xor;
    w[3] = (uint32_t)(bytes & 0xFFFFFFFFu);
    w[4] = (uint32_t)((uint64_t)bytes >> 32);
    for (int i = 0; i < nfields; i++) w[5 + i] = (uint32_t)fields[i];
    for (int i = 0; i < 256; i++)
        for (int b = 0; b < 4; b++) buf[4 * i + b] = (uint8_t)(w[i] >> (8 * b)); /* little-endian by hand */
    memcpy(buf + 1024, payload, bytes);
    FILE* f = fopen_check(path, "wb");
    fwrite_check(buf, 1, 1024 + bytes - cut, f, path);
    fclose_check(f, path);
    free(buf);
}

/* token shard k: token j = k·10000 + j, so a token names its shard and position */
static void write_shard(const char* path, int k, int ntok, int vocab, uint32_t crc_xor, size_t cut) {
    uint16_t* t = (uint16_t*)malloc_check((size_t)ntok * 2);
    for (int j = 0; j < ntok; j++) t[j] = (uint16_t)(k * 10000 + j);
    int32_t fields[4] = {ntok, 0, vocab, 2};
    test_write_file(path, 0x4B4F5447u, 1, fields, 4, t, (size_t)ntok * 2, crc_xor, cut);
    free(t);
}

/* an llm.c token shard as its dev/data/data_common.py writes one: 256 int32 (magic, version, count), then
 * uint16 tokens; token j = k·10000 + j (mod 2^16) as write_shard's, token `at` (if >= 0) plus `bump`; cut
 * removes that many bytes from the end */
static void write_llmc_shard(const char* path, int32_t magic, int32_t version, int32_t count, int k, int ntok, int at, int bump,
                             size_t cut) {
    size_t bytes = 1024 + (size_t)ntok * 2;
    uint8_t* buf = (uint8_t*)calloc_check(bytes, 1);
    int32_t w[3] = {magic, version, count};
    for (int i = 0; i < 3; i++)
        for (int b = 0; b < 4; b++) buf[4 * i + b] = (uint8_t)((uint32_t)w[i] >> (8 * b));
    for (int j = 0; j < ntok; j++) {
        uint16_t t = (uint16_t)(k * 10000 + j + (j == at ? bump : 0));
        buf[1024 + 2 * j] = (uint8_t)(t & 0xFF);
        buf[1024 + 2 * j + 1] = (uint8_t)(t >> 8);
    }
    FILE* f = fopen_check(path, "wb");
    fwrite_check(buf, 1, bytes - cut, f, path);
    fclose_check(f, path);
    free(buf);
}

static void test_crc_reference(void) {
    check(ref_crc32(0, "123456789", 9) == 0xCBF43926u && crc32_update(0, "123456789", 9) == 0xCBF43926u,
          "crc32: check value of \"123456789\" is 0xCBF43926 (test's bitwise CRC and fileio's)");
}

/* ----------------------------------------------------------------------------
 * schedule: the formulas of the brief, written out again */
static double ref_lr(int kind, double lr, double frac, int W, int N, double wsd, int s) {
    double lo = lr * frac;
    if (s < W) return lr * (s + 1) / W;
    double r = (double)(s - W) / (N - W > 1 ? N - W : 1);
    if (kind == 0) return lo + (lr - lo) * (1 + cos(M_PI * r)) / 2;
    if (kind == 1) return lr - r * (lr - lo);
    if (kind == 2) return lr;
    int D = (int)floor(wsd * N + N * 0x1p-24);
    if (D == 0 || s < N - D) return lr;
    return lo + (lr - lo) * (double)(N - s) / D;
}

static void test_schedule(void) {
    struct { int kind, W, N; float lr, frac, wsd; } cases[] = {
        {SCHED_COSINE, 10, 100, 6e-4f, 0.1f, 0.2f}, {SCHED_LINEAR, 10, 100, 6e-4f, 0.0f, 0.2f},
        {SCHED_CONSTANT, 5, 50, 1e-3f, 0.1f, 0.2f}, {SCHED_WSD, 10, 100, 6e-4f, 0.05f, 0.3f},
        {SCHED_COSINE, 0, 100, 3e-4f, 0.0f, 0.2f},  {SCHED_LINEAR, 20, 20, 3e-4f, 0.1f, 0.2f},
        {SCHED_WSD, 0, 40, 3e-4f, 0.1f, 0.0f},      {SCHED_WSD, 3, 7, 1.0f, 0.25f, 0.5f},
        {SCHED_COSINE, 1, 1, 1.0f, 0.5f, 0.2f}};
    for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
        Schedule s = {(ScheduleKind)cases[c].kind, cases[c].lr, cases[c].frac, cases[c].W, cases[c].N, cases[c].wsd};
        double worst = 0;
        for (int step = 0; step <= s.total; step++) {
            double want = ref_lr(cases[c].kind, s.max_lr, s.final_frac, s.warmup, s.total, s.wsd_frac, step);
            double err = fabs(schedule_lr(&s, step) - want) / fmax(fabs(want), 1e-7 * s.max_lr);
            if (err > worst) worst = err;
        }
        int hold = schedule_lr(&s, s.total + 1) == schedule_lr(&s, s.total) &&
                   schedule_lr(&s, s.total + 50) == schedule_lr(&s, s.total);
        check(worst < 1e-6 && hold,
              "schedule %s W=%d N=%d frac=%g wsd=%g: steps 0..N vs formula, worst rel err %.2e; steps > N hold step N's",
              schedule_name(s.kind), s.warmup, s.total, s.final_frac, s.wsd_frac, worst);
    }
    /* closed-form landmarks */
    Schedule cos_s = {SCHED_COSINE, 1.0f, 0.1f, 10, 110, 0.2f};
    check(schedule_lr(&cos_s, 9) == 1.0f && schedule_lr(&cos_s, 10) == 1.0f && fabsf(schedule_lr(&cos_s, 60) - 0.55f) < 1e-6f &&
              fabsf(schedule_lr(&cos_s, 110) - 0.1f) < 1e-6f && fabsf(schedule_lr(&cos_s, 0) - 0.1f) < 1e-7f,
          "schedule cosine landmarks: warmup ends at max, mid-decay (max+min)/2 = 0.55 (%.7f), end at min (%.7f)",
          schedule_lr(&cos_s, 60), schedule_lr(&cos_s, 110));
    Schedule wsd_s = {SCHED_WSD, 1.0f, 0.0f, 0, 100, 0.25f};
    check(schedule_lr(&wsd_s, 74) == 1.0f && schedule_lr(&wsd_s, 75) == 1.0f && fabsf(schedule_lr(&wsd_s, 95) - 0.2f) < 1e-6f,
          "schedule wsd landmarks: stable until N-D=75, then 1-(s-75)/25 (s=95: %.7f, want 0.2)", schedule_lr(&wsd_s, 95));
    /* the flag's float, not the decimal the user typed: 0.7f is 0.69999999, yet 0.7 x 10 steps decay over 7 */
    struct { float frac; int N, D; } fracs[] = {{0.7f, 10, 7}, {0.35f, 20, 7}, {0.95f, 100, 95}, {0.7f, 1000, 700}, {0.9f, 10, 9}, {0.33f, 29203, 9636},
                                         {0.9f, 2000000, 1800000}, {1.0f, 2000000, 2000000}};
    int decay_ok = 1;
    for (size_t i = 0; i < sizeof(fracs) / sizeof(fracs[0]); i++) {
        Schedule w = {SCHED_WSD, 1.0f, 0.0f, 0, fracs[i].N, fracs[i].frac};
        int first = fracs[i].N - fracs[i].D; /* the first decay step runs at 1 - 0/D = 1, the next below */
        decay_ok &= schedule_lr(&w, first) == 1.0f && schedule_lr(&w, first + 1) < 1.0f &&
                    fabsf(schedule_lr(&w, first + 1) - (1.0f - 1.0f / fracs[i].D)) < 1e-6f;
    }
    check(decay_ok, "schedule wsd: --wsd-frac 0.7 of 10 steps (and 0.35 x 20, 0.95 x 100, 0.7 x 1000, 0.9 x 10, 0.33 x 29203, 0.9 x 2M, 1 x 2M) "
          "decays over 7 (7, 95, 700, 9, 9636: train_gpt.py's too, 1.8M, 2M) steps, the float flag notwithstanding");
    ScheduleKind k;
    int ok = 1;
    for (int i = 0; i < 4; i++) ok &= schedule_parse(schedule_name((ScheduleKind)i), &k) && (int)k == i;
    check(ok && !schedule_parse("cosin", &k) && !schedule_parse("", &k),
          "schedule_parse: the 4 names round-trip with ids 0..3 (doc/formats.md), unknown names rejected");
}

/* ----------------------------------------------------------------------------
 * rng */
static void test_rng(void) {
    /* splitmix64 from seed 1234567: the published sequence (Java SplittableRandom / Vigna's C code) */
    const uint64_t sm_want[5] = {6457827717110365317ull, 3203168211198807973ull, 9817491932198370423ull,
                                 4593380528125082431ull, 16408922859458223821ull};
    uint64_t x = 1234567;
    int ok = 1;
    for (int i = 0; i < 5; i++) ok &= rng_splitmix64(&x) == sm_want[i];
    check(ok, "rng: splitmix64(1234567) matches the 5 published outputs");
    /* xoshiro256** from state {1,2,3,4}: the reference implementation's first 10 outputs */
    const uint64_t xo_want[10] = {11520ull, 0ull, 1509978240ull, 1215971899390074240ull, 1216172134540287360ull,
                                  607988272756665600ull, 16172922978634559625ull, 8476171486693032832ull,
                                  10595114339597558777ull, 2904607092377533576ull};
    Rng r = {{1, 2, 3, 4}};
    ok = 1;
    for (int i = 0; i < 10; i++) ok &= rng_u64(&r) == xo_want[i];
    check(ok, "rng: xoshiro256** from state {1,2,3,4} matches the reference's first 10 outputs");
    Rng a, b, c;
    rng_seed(&a, 42);
    rng_seed(&b, 42);
    rng_seed(&c, 43);
    int same = 1, differ = 0;
    for (int i = 0; i < 1000; i++) {
        uint64_t va = rng_u64(&a), vb = rng_u64(&b), vc = rng_u64(&c);
        same &= va == vb;
        differ += va != vc;
    }
    check(same && differ == 1000, "rng: seed 42 twice gives the same 1000 draws; seed 43 differs in %d/1000", differ);
    /* a saved state continues identically */
    Rng saved = a;
    uint64_t next_a = rng_u64(&a);
    check(rng_u64(&saved) == next_a, "rng: a copied state (the checkpointed 32 bytes) continues the stream");

    const int n = 1000000;
    double sum = 0, sum2 = 0, minv = 1, maxv = 0;
    rng_seed(&a, 1);
    for (int i = 0; i < n; i++) {
        double u = rng_uniform(&a);
        sum += u;
        sum2 += u * u;
        if (u < minv) minv = u;
        if (u > maxv) maxv = u;
    }
    double mean = sum / n, var = sum2 / n - mean * mean;
    /* 5 sigma: sd(mean) = sqrt(1/12/n) = 2.9e-4, sd(var) = sqrt((1/80 - 1/144)/n) = 7.5e-5 */
    check(fabs(mean - 0.5) < 1.5e-3 && fabs(var - 1.0 / 12) < 3.8e-4 && minv >= 0 && maxv < 1,
          "rng_uniform: 1e6 draws in [0,1), mean %.5f (want 0.5 +- 1.5e-3), var %.5f (want %.5f +- 3.8e-4)", mean, var,
          1.0 / 12);
    sum = sum2 = 0;
    int within1 = 0;
    for (int i = 0; i < n; i++) {
        double z = rng_normal(&a);
        sum += z;
        sum2 += z * z;
        within1 += fabs(z) < 1;
    }
    mean = sum / n;
    double sd = sqrt(sum2 / n - mean * mean), frac1 = (double)within1 / n;
    /* 5 sigma: mean 5e-3, sd 3.5e-3, P(|z|<1) = 0.682689 with sd 4.7e-4 */
    check(fabs(mean) < 5e-3 && fabs(sd - 1) < 3.5e-3 && fabs(frac1 - 0.682689) < 2.3e-3,
          "rng_normal: 1e6 draws, mean %.5f, std %.5f, P(|z|<1) %.5f (want 0, 1, 0.68269)", mean, sd, frac1);
    float* buf = (float*)malloc_check((size_t)n * sizeof(float));
    rng_fill_normal(&a, buf, (size_t)n - 1, 2.0f, 3.0f); /* odd count: the last element uses a fresh pair */
    sum = sum2 = 0;
    double corr = 0;
    for (int i = 0; i < n - 1; i++) {
        sum += buf[i];
        sum2 += (double)buf[i] * buf[i];
        if (i + 1 < n - 1) corr += (buf[i] - 2.0) * (buf[i + 1] - 2.0);
    }
    mean = sum / (n - 1);
    sd = sqrt(sum2 / (n - 1) - mean * mean);
    corr /= 9.0 * (n - 2);
    check(fabs(mean - 2) < 1.5e-2 && fabs(sd - 3) < 1.1e-2 && fabs(corr) < 5e-3,
          "rng_fill_normal(mean 2, std 3): 999999 values, mean %.4f, std %.4f, lag-1 correlation %.4f", mean, sd, corr);
    free(buf);

    /* rng_below: n = 3·2^62, where 2^64 mod n = 2^62: plain modulo would give P(x < 2^62) = 1/2, unbiased 1/3 */
    const uint64_t big = 3ull << 62;
    int low = 0, draws = 100000, in_range = 1;
    for (int i = 0; i < draws; i++) {
        uint64_t v = rng_below(&a, big);
        in_range &= v < big;
        low += v < (1ull << 62);
    }
    double p_low = (double)low / draws;
    check(in_range && fabs(p_low - 1.0 / 3) < 7.5e-3,
          "rng_below(3*2^62): P(x < 2^62) = %.4f over 1e5 draws (unbiased 1/3; plain modulo would give 1/2)", p_low);
    int counts[7] = {0};
    for (int i = 0; i < 70000; i++) counts[rng_below(&a, 7)]++;
    double chi2 = 0;
    for (int i = 0; i < 7; i++) chi2 += (counts[i] - 10000.0) * (counts[i] - 10000.0) / 10000.0;
    check(chi2 < 22.46, "rng_below(7): chi-square %.2f over 70000 draws (6 dof, p=0.001 cut 22.46)", chi2);

    uint32_t perm[1000];
    for (uint32_t i = 0; i < 1000; i++) perm[i] = i * 7 + 3;
    rng_shuffle_u32(&a, perm, 1000);
    int seen[1000] = {0}, is_perm = 1, moved = 0;
    for (int i = 0; i < 1000; i++) {
        uint32_t v = perm[i];
        if (v < 3 || (v - 3) % 7 || (v - 3) / 7 >= 1000 || seen[(v - 3) / 7]++) is_perm = 0;
        moved += v != (uint32_t)i * 7 + 3;
    }
    check(is_perm && moved > 900, "rng_shuffle_u32: 1000 elements stay a permutation, %d moved", moved);
    /* all 6 orders of 3 elements equally likely */
    int orders[6] = {0};
    for (int t = 0; t < 60000; t++) {
        uint32_t s3[3] = {0, 1, 2};
        rng_shuffle_u32(&a, s3, 3);
        orders[s3[0] * 2 + (s3[1] > s3[2])]++;
    }
    chi2 = 0;
    for (int i = 0; i < 6; i++) chi2 += (orders[i] - 10000.0) * (orders[i] - 10000.0) / 10000.0;
    uint32_t one = 5;
    rng_shuffle_u32(&a, &one, 1);
    rng_shuffle_u32(&a, NULL, 0);
    check(chi2 < 20.52 && one == 5, "rng_shuffle_u32: 6 orders of 3 elements, chi-square %.2f (5 dof, p=0.001 cut 20.52)", chi2);
}

/* ----------------------------------------------------------------------------
 * dataloader */
static const int shard_tokens_[3] = {1001, 700, 1500};

static void make_shards(void) {
    char path[512];
    for (int k = 0; k < 3; k++) {
        snprintf(path, sizeof(path), "%s/train_%03d.bin", tmp_dir, k);
        write_shard(path, k, shard_tokens_[k], 30000, 0, 0);
    }
}

static void shards_glob(char* out, size_t cap) { snprintf(out, cap, "%s/train_*.bin", tmp_dir); }

/* Runs `world` loaders for `epochs` epochs: checks every window against the data (targets =
 * inputs + 1 in these shards), that ranks share the global batch, and that each window of the
 * enumeration appears exactly once per epoch. Returns the sequence of (shard, global batch) seen
 * by rank 0 in epoch 0 and 1, packed as shard·1000 + batch, in order_out. */
static void check_epochs(int world, int shuffle, int B, int T, int* order_out) {
    char glob_pattern[512];
    shards_glob(glob_pattern, sizeof(glob_pattern));
    DataLoader* dls = (DataLoader*)malloc_check(sizeof(DataLoader) * (size_t)world);
    for (int r = 0; r < world; r++) dataloader_init(&dls[r], glob_pattern, B, T, r, world, shuffle, 7);
    int BT = B * T, BTW = BT * world;
    int expected_batches = 0, nb[3];
    for (int k = 0; k < 3; k++) expected_batches += nb[k] = (shard_tokens_[k] - 1) / BTW;
    int ok_count = (int)dataloader_batches_per_epoch(&dls[0]) == expected_batches &&
                   dls[0].num_tokens == (size_t)(1001 + 700 + 1500) && dls[0].vocab_size == 30000;
    int ok_data = 1, ok_ranks = 1, ok_once = 1;
    for (int epoch = 0; epoch < 2; epoch++) {
        int seen[3][128] = {{0}};
        for (int step = 0; step < expected_batches; step++) {
            int shard0 = -1, batch0 = -1;
            for (int r = 0; r < world; r++) {
                DataLoader* dl = &dls[r];
                dataloader_next(dl);
                int first = dl->inputs[0], shard = first / 10000, pos = first % 10000;
                for (int i = 0; i < BT; i++)
                    ok_data &= dl->inputs[i] == first + i && dl->targets[i] == first + i + 1;
                int off = pos - r * BT;
                if (off < 0 || off % BTW != 0) {
                    ok_ranks = 0;
                    continue;
                }
                int batch = off / BTW;
                if (r == 0) {
                    shard0 = shard;
                    batch0 = batch;
                    if (batch < nb[shard]) seen[shard][batch]++;
                    else ok_once = 0;
                    order_out[epoch * expected_batches + step] = shard * 1000 + batch;
                } else ok_ranks &= shard == shard0 && batch == batch0;
            }
        }
        for (int k = 0; k < 3; k++)
            for (int b = 0; b < nb[k]; b++) ok_once &= seen[k][b] == 1;
    }
    check(ok_count && ok_data && ok_ranks && ok_once,
          "dataloader world=%d shuffle=%d B=%d T=%d: %d batches/epoch, 2 epochs: every window once per epoch "
          "(%s), targets = inputs shifted by one (%s), ranks share each global batch (%s)",
          world, shuffle, B, T, expected_batches, ok_once ? "yes" : "NO", ok_data ? "yes" : "NO", ok_ranks ? "yes" : "NO");
    for (int r = 0; r < world; r++) dataloader_free(&dls[r]);
    free(dls);
}

static void test_dataloader_epochs(void) {
    make_shards();
    int order[2 * 200];
    for (int world = 1; world <= 3; world++) {
        check_epochs(world, 0, 2, 8, order);
        if (world == 1) {
            /* without shuffle: shard 0's batches in order, then shard 1, then shard 2; epoch 1 repeats */
            int ok = 1, i = 0, per_epoch = 0;
            for (int k = 0; k < 3; k++) per_epoch += (shard_tokens_[k] - 1) / 16;
            for (int k = 0; k < 3; k++)
                for (int b = 0; b < (shard_tokens_[k] - 1) / 16; b++, i++)
                    ok &= order[i] == k * 1000 + b && order[per_epoch + i] == k * 1000 + b;
            check(ok, "dataloader no shuffle: shards in glob order, batches in file order, both epochs (%d batches)",
                  per_epoch);
        }
        check_epochs(world, 1, 2, 8, order);
        if (world == 1) {
            int per_epoch = 0;
            for (int k = 0; k < 3; k++) per_epoch += (shard_tokens_[k] - 1) / 16;
            int in_order = 0, same_as_next_epoch = 0, shard_runs = 1;
            for (int i = 0; i < per_epoch; i++) {
                in_order += i > 0 && order[i] == order[i - 1] + 1;
                same_as_next_epoch += order[i] == order[per_epoch + i];
                shard_runs += i > 0 && order[i] / 1000 != order[i - 1] / 1000;
            }
            check(in_order < per_epoch / 4 && same_as_next_epoch < per_epoch / 4 && shard_runs == 3,
                  "dataloader shuffle: %d/%d consecutive in file order, %d/%d equal to next epoch's, shards visited whole "
                  "(%d runs)", in_order, per_epoch, same_as_next_epoch, per_epoch, shard_runs);
        }
    }
}

/* with shuffle the shard order changes between epochs: record each epoch's shard sequence */
static void test_dataloader_shard_order(void) {
    char glob_pattern[512];
    shards_glob(glob_pattern, sizeof(glob_pattern));
    DataLoader dl;
    dataloader_init(&dl, glob_pattern, 2, 8, 0, 1, 1, 3);
    int per_epoch = (int)dataloader_batches_per_epoch(&dl), orders[8], distinct = 0;
    for (int e = 0; e < 8; e++) {
        int order = 0, last = -1;
        for (int i = 0; i < per_epoch; i++) {
            dataloader_next(&dl);
            int shard = dl.inputs[0] / 10000;
            if (shard != last) order = order * 10 + shard;
            last = shard;
        }
        orders[e] = order;
        int seen_before = 0;
        for (int p = 0; p < e; p++) seen_before |= orders[p] == order;
        distinct += !seen_before;
    }
    check(distinct >= 3, "dataloader shuffle: shard order over 8 epochs takes %d distinct permutations of 3 shards "
                         "(first epochs: %03d %03d %03d %03d)", distinct, orders[0], orders[1], orders[2], orders[3]);
    dataloader_free(&dl);
}

static int same_batch(const DataLoader* a, const DataLoader* b) {
    size_t bt = (size_t)a->B * a->T;
    return memcmp(a->inputs, b->inputs, bt * sizeof(int)) == 0 && memcmp(a->targets, b->targets, bt * sizeof(int)) == 0;
}

static void test_dataloader_resume(void) {
    char glob_pattern[512];
    shards_glob(glob_pattern, sizeof(glob_pattern));
    for (int shuffle = 0; shuffle <= 1; shuffle++) {
        DataLoader probe;
        dataloader_init(&probe, glob_pattern, 2, 8, 1, 2, shuffle, 99);
        int per_epoch = (int)dataloader_batches_per_epoch(&probe);
        dataloader_free(&probe);
        /* save points: start, mid-shard, end of the first shard visited, end of epoch, inside epoch 2 */
        int first_shard_batches = 0;
        {
            DataLoader d;
            dataloader_init(&d, glob_pattern, 2, 8, 1, 2, shuffle, 99);
            first_shard_batches = (int)d.shard_batches[d.shard_order[0]];
            dataloader_free(&d);
        }
        int points[5] = {0, 5, first_shard_batches, per_epoch, per_epoch + per_epoch / 2 + 1};
        for (int p = 0; p < 5; p++) {
            DataLoader a, b;
            dataloader_init(&a, glob_pattern, 2, 8, 1, 2, shuffle, 99);
            for (int i = 0; i < points[p]; i++) dataloader_next(&a);
            DataLoaderState st;
            dataloader_get_state(&a, &st);
            dataloader_init(&b, glob_pattern, 2, 8, 1, 2, shuffle, 99);
            dataloader_next(&b); /* b is elsewhere before the restore */
            dataloader_set_state(&b, &st);
            int ok = 1, n = per_epoch + 3; /* crosses an epoch boundary from every save point */
            for (int i = 0; i < n; i++) {
                dataloader_next(&a);
                dataloader_next(&b);
                ok &= same_batch(&a, &b);
            }
            check(ok, "dataloader resume shuffle=%d: state saved after %d batches (epoch %llu, shard pos %llu, batch %llu), "
                      "restored loader matches for the next %d batches",
                  shuffle, points[p], (unsigned long long)st.epoch, (unsigned long long)st.shard,
                  (unsigned long long)st.batch, n);
            dataloader_free(&a);
            dataloader_free(&b);
        }
    }
    /* reset returns to the first batch of epoch 0 */
    DataLoader a, b;
    dataloader_init(&a, glob_pattern, 2, 8, 0, 1, 1, 5);
    dataloader_init(&b, glob_pattern, 2, 8, 0, 1, 1, 5);
    dataloader_next(&b);
    int first = b.inputs[0];
    for (int i = 0; i < 200; i++) dataloader_next(&a);
    dataloader_reset(&a);
    dataloader_next(&a);
    check(a.inputs[0] == first && a.pos.epoch == 0, "dataloader_reset after 200 batches (2+ epochs): first batch again");
    dataloader_free(&a);
    dataloader_free(&b);
}

static void test_dataloader_mock(void) {
    DataLoader w1, r0, r1, again, other;
    int B = 2, T = 16, V = 50257;
    dataloader_init_mock(&w1, 2 * B, T, V, 0, 1, 11);
    dataloader_init_mock(&r0, B, T, V, 0, 2, 11);
    dataloader_init_mock(&r1, B, T, V, 1, 2, 11);
    dataloader_init_mock(&again, B, T, V, 1, 2, 11);
    dataloader_init_mock(&other, B, T, V, 1, 2, 12);
    int ok_split = 1, ok_shift = 1, ok_range = 1, ok_repeat = 1, differs = 0;
    for (int step = 0; step < 5; step++) {
        dataloader_next(&w1);
        dataloader_next(&r0);
        dataloader_next(&r1);
        dataloader_next(&again);
        dataloader_next(&other);
        for (int i = 0; i < B * T; i++) {
            ok_split &= r0.inputs[i] == w1.inputs[i] && r1.inputs[i] == w1.inputs[B * T + i] &&
                        r1.targets[i] == w1.targets[B * T + i];
            ok_range &= r1.inputs[i] >= 0 && r1.inputs[i] < V;
            ok_repeat &= again.inputs[i] == r1.inputs[i];
            differs += other.inputs[i] != r1.inputs[i];
            if (i + 1 < B * T) ok_shift &= r1.targets[i] == r1.inputs[i + 1];
        }
    }
    check(ok_split && ok_shift && ok_range && ok_repeat && differs > 5 * B * T * 9 / 10 && w1.vocab_size == V &&
              dataloader_batches_per_epoch(&w1) == DL_MOCK_BATCHES,
          "dataloader mock: deterministic per seed, tokens < V, targets shifted, ranks slice the world=1 batch, "
          "another seed differs in %d/%d tokens",
          differs, 5 * B * T);
    dataloader_free(&w1);
    dataloader_free(&r0);
    dataloader_free(&r1);
    dataloader_free(&again);
    dataloader_free(&other);
}

typedef struct { const char* pattern; int B, T, world; } LoaderArgs;
static void child_load_one(void* ctx) {
    LoaderArgs* a = (LoaderArgs*)ctx;
    DataLoader dl;
    dataloader_init(&dl, a->pattern, a->B, a->T, 0, a->world, 0, 1);
    dataloader_next(&dl);
}
static void child_bad_state(void* ctx) {
    LoaderArgs* a = (LoaderArgs*)ctx;
    DataLoader dl;
    dataloader_init(&dl, a->pattern, a->B, a->T, 0, a->world, 0, 1);
    DataLoaderState st;
    dataloader_get_state(&dl, &st);
    st.batch = 1000000;
    dataloader_set_state(&dl, &st);
}

static void child_rewritten(void* ctx) {
    LoaderArgs* a = (LoaderArgs*)ctx;
    DataLoader dl;
    dataloader_init(&dl, a->pattern, a->B, a->T, 0, a->world, 0, 1);
    dataloader_next(&dl); /* swap_0.bin loaded */
    char path[512];
    snprintf(path, sizeof(path), "%.*s1.bin", (int)(strlen(a->pattern) - 5), a->pattern);
    write_shard(path, 2, 500, 30000, 0, 0);
    for (int i = 0; i < 100; i++) dataloader_next(&dl);
}

static void test_dataloader_errors(void) {
    char path[512], pattern[512];
    LoaderArgs args = {pattern, 2, 8, 1};
    tmp_path(pattern, sizeof(pattern), "nothing_*.bin");
    expect_failure("dataloader empty glob", child_load_one, &args, 1, "no files match");

    tmp_path(path, sizeof(path), "bad_magic.bin");
    int32_t fields[4] = {100, 0, 30000, 2};
    uint16_t toks[100] = {0};
    test_write_file(path, 0x4D545047u, 1, fields, 4, toks, sizeof(toks), 0, 0);
    snprintf(pattern, sizeof(pattern), "%s", path);
    expect_failure("dataloader wrong magic", child_load_one, &args, 1, "not a token shard");

    tmp_path(path, sizeof(path), "truncated.bin");
    write_shard(path, 0, 500, 30000, 0, 7);
    snprintf(pattern, sizeof(pattern), "%s", path);
    expect_failure("dataloader truncated shard", child_load_one, &args, 1, "truncated");

    tmp_path(path, sizeof(path), "crc.bin");
    write_shard(path, 0, 500, 30000, 0x10, 0);
    snprintf(pattern, sizeof(pattern), "%s", path);
    expect_failure("dataloader CRC mismatch", child_load_one, &args, 1, "CRC");

    tmp_path(path, sizeof(path), "short.bin");
    write_shard(path, 0, 16, 30000, 0, 0);
    snprintf(pattern, sizeof(pattern), "%s", path);
    expect_failure("dataloader shard shorter than one batch", child_load_one, &args, 1, "has 16 tokens, one batch needs B x T x slots + 1");

    tmp_path(path, sizeof(path), "vocab.bin");
    write_shard(path, 1, 100, 10050, 0, 0); /* tokens 10000..10099, some >= 10050 */
    snprintf(pattern, sizeof(pattern), "%s", path);
    expect_failure("dataloader token >= shard vocab size", child_load_one, &args, 1, "not below the shard's vocab size 10050");

    tmp_path(path, sizeof(path), "width.bin");
    int32_t wide[4] = {50, 0, 30000, 4};
    test_write_file(path, 0x4B4F5447u, 1, wide, 4, toks, sizeof(toks), 0, 0);
    snprintf(pattern, sizeof(pattern), "%s", path);
    expect_failure("dataloader 4 bytes per token", child_load_one, &args, 1, "bytes per token");

    shards_glob(pattern, sizeof(pattern));
    expect_failure("dataloader restore a position that does not exist", child_bad_state, &args, 1, "saved position");

    /* a shard rewritten during the run with the same length and vocab (a new prepare_data run into the directory) */
    tmp_path(path, sizeof(path), "swap_0.bin");
    write_shard(path, 0, 500, 30000, 0, 0);
    tmp_path(path, sizeof(path), "swap_1.bin");
    write_shard(path, 1, 500, 30000, 0, 0);
    tmp_path(pattern, sizeof(pattern), "swap_*.bin");
    expect_failure("dataloader shard rewritten since init (same length and vocab, other tokens)", child_rewritten, &args, 1,
                   "swap_1.bin: token shard changed since it was opened");
}

/* A shard that breaks during the run (rewritten, truncated, deleted) is reported by dataloader_try_next_slot
 * instead of exiting: −1, the line in dl->error, the position unchanged, the batch all token 0; it fails
 * again while the shard is broken, and once the shard is restored the same call reads the batch an
 * undisturbed loader reads (a trainer that checkpointed the position resumes exactly). */
static void test_dataloader_try(void) {
    char path[512], pattern[512];
    tmp_path(path, sizeof(path), "try_0.bin");
    write_shard(path, 0, 161, 30000, 0, 0); /* 10 batches of 16 tokens */
    tmp_path(path, sizeof(path), "try_1.bin");
    write_shard(path, 1, 161, 30000, 0, 0);
    tmp_path(pattern, sizeof(pattern), "try_*.bin");
    struct { const char* what; int how; const char* needle; } cases[] = {
        {"rewritten (the same length and vocab)", 0, "try_1.bin: token shard changed since it was opened"},
        {"truncated", 1, "try_1.bin: token shard is truncated: header says 322 payload bytes, file has 320"},
        {"deleted", 2, "try_1.bin: cannot open for reading: No such file or directory"},
    };
    for (int c = 0; c < 3; c++) {
        DataLoader dl, ref;
        dataloader_init(&dl, pattern, 2, 8, 0, 1, 0, 1);
        dataloader_init(&ref, pattern, 2, 8, 0, 1, 0, 1);
        int ok = 1;
        for (int i = 0; i < 10; i++) ok = ok && dataloader_try_next_slot(&dl, 0, 1) == 0 && dataloader_try_next_slot(&ref, 0, 1) == 0;
        DataLoaderState before, after;
        dataloader_get_state(&dl, &before);
        if (cases[c].how == 0) write_shard(path, 2, 161, 30000, 0, 0); /* the same length and vocab, other tokens */
        if (cases[c].how == 1) write_shard(path, 1, 161, 30000, 0, 2);
        if (cases[c].how == 2) remove(path);
        int first = dataloader_try_next_slot(&dl, 0, 1), again = dataloader_try_next_slot(&dl, 0, 1);
        dataloader_get_state(&dl, &after);
        int zeros = 1;
        for (int i = 0; i < 16; i++) zeros = zeros && dl.inputs[i] == 0 && dl.targets[i] == 0;
        char error[4600];
        snprintf(error, sizeof(error), "%s", dl.error);
        write_shard(path, 1, 161, 30000, 0, 0); /* restored */
        int restored = dataloader_try_next_slot(&dl, 0, 1) == 0 && dataloader_try_next_slot(&ref, 0, 1) == 0;
        check(ok && first == -1 && again == -1 && strstr(error, cases[c].needle) != NULL && memcmp(&before, &after, sizeof(before)) == 0 &&
                  zeros && restored && dl.inputs[0] == 10000 && memcmp(dl.inputs, ref.inputs, 16 * sizeof(int)) == 0 &&
                  memcmp(dl.targets, ref.targets, 16 * sizeof(int)) == 0,
              "dataloader_try_next_slot, shard 1 %s when reached: -1 twice (\"%s\"), position unchanged, batch all 0 (%d); restored: "
              "its first batch (token %d), as an undisturbed loader's",
              cases[c].what, error, zeros, dl.inputs[0]);
        dataloader_free(&dl);
        dataloader_free(&ref);
    }
}

/* a position saved with windows of 48 tokens, restored on a loader of 64-token windows (shards of
 * make_shards: token j of shard k is k·10000 + j, so a token names its place) */
static void test_dataloader_rewindow(void) {
    char pattern[512];
    shards_glob(pattern, sizeof(pattern));
    for (int shuffle = 0; shuffle < 2; shuffle++) {
        DataLoader a, b;
        dataloader_init(&a, pattern, 3, 16, 0, 1, shuffle, 9);
        for (int i = 0; i < 5; i++) dataloader_next(&a);
        DataLoaderState st;
        dataloader_get_state(&a, &st);
        int shard = (int)a.shard_order[st.shard], saved_batches = (shard_tokens_[shard] - 1) / 48;
        dataloader_init(&b, pattern, 4, 16, 0, 1, shuffle, 9);
        uint64_t skipped = dataloader_set_state_window(&b, &st, 48);
        dataloader_next(&b);
        if (!shuffle) {
            /* 5 x 48 = 240 tokens of shard 0 read: the next 64-token window starts at 256 */
            check(shard == 0 && b.inputs[0] == 256 && b.targets[63] == 320 && skipped == 16,
                  "dataloader: an unshuffled position of 5 windows of 48 tokens, restored with windows of 64: reading goes on at "
                  "token %d of shard 0 (want 256), %llu tokens skipped (want 16)", b.inputs[0], (unsigned long long)skipped);
        } else {
            int next = (int)b.shard_order[st.shard + 1];
            check(b.inputs[0] / 10000 == next && next != shard && skipped == (uint64_t)(saved_batches - 5) * 48,
                  "dataloader: a shuffled position (5 windows of 48 tokens in shard %d) restored with windows of 64: reading goes on "
                  "in the epoch's next shard (%d, read %d), %llu tokens of shard %d not read (want %d)", shard, next, b.inputs[0] / 10000,
                  (unsigned long long)skipped, shard, (saved_batches - 5) * 48);
        }
        dataloader_free(&a);
        dataloader_free(&b);
    }
    /* mock data (DL_MOCK_BATCHES windows of any size): 900 windows of 48 tokens read, restored with windows of 32 (its
     * virtual shard is then 32000 tokens long, fewer than the 43200 read) and of 64 */
    DataLoader m, w;
    dataloader_init_mock(&m, 3, 16, 100, 0, 1, 4);
    for (int i = 0; i < 900; i++) dataloader_next(&m);
    DataLoaderState st;
    dataloader_get_state(&m, &st);
    dataloader_init_mock(&w, 2, 16, 100, 0, 1, 4);
    uint64_t skipped_small = dataloader_set_state_window(&w, &st, 48);
    uint64_t small_batch = w.pos.batch;
    dataloader_free(&w);
    dataloader_init_mock(&w, 4, 16, 100, 0, 1, 4);
    uint64_t skipped_large = dataloader_set_state_window(&w, &st, 48);
    check(small_batch == DL_MOCK_BATCHES && skipped_small == 100 * 48 && w.pos.batch == 675 && skipped_large == 0,
          "dataloader: mock data, 900 windows of 48 read: with windows of 32 the epoch goes on past its end (%llu; %llu tokens "
          "skipped, want 4800), with 64 at window 675 (%llu; %llu skipped, want 0)", (unsigned long long)small_batch,
          (unsigned long long)skipped_small, (unsigned long long)w.pos.batch, (unsigned long long)skipped_large);
    dataloader_free(&m);
    dataloader_free(&w);
}

/* llm.c's shards hold the same tokens as GTOK ones: the same batches, in any mix of the formats */
static void test_dataloader_llmc(void) {
    static const int sizes[3] = {70001, 700, 1500}; /* the first: beyond the two 32768-token samples */
    char path[512], gtok[512], llmc[512], mixed[512];
    for (int k = 0; k < 3; k++) {
        snprintf(path, sizeof(path), "%s/fmt_gtok_%d.bin", tmp_dir, k);
        write_shard(path, k, sizes[k], 65536, 0, 0);
        snprintf(path, sizeof(path), "%s/fmt_llmc_%d.bin", tmp_dir, k);
        write_llmc_shard(path, LLMC_SHARD_MAGIC, 1, sizes[k], k, sizes[k], -1, 0, 0);
        snprintf(path, sizeof(path), "%s/fmt_mixed_%d.bin", tmp_dir, k);
        if (k == 1)
            write_shard(path, k, sizes[k], 65536, 0, 0);
        else
            write_llmc_shard(path, LLMC_SHARD_MAGIC, 1, sizes[k], k, sizes[k], -1, 0, 0);
    }
    snprintf(gtok, sizeof(gtok), "%s/fmt_gtok_*.bin", tmp_dir);
    snprintf(llmc, sizeof(llmc), "%s/fmt_llmc_*.bin", tmp_dir);
    snprintf(mixed, sizeof(mixed), "%s/fmt_mixed_*.bin", tmp_dir);
    DataLoader a, b, c;
    dataloader_init(&a, gtok, 3, 16, 1, 2, 1, 5);
    dataloader_init(&b, llmc, 3, 16, 1, 2, 1, 5);
    dataloader_init(&c, mixed, 3, 16, 1, 2, 1, 5);
    dataloader_limit_tokens(&b, 65536);
    int batches = (int)dataloader_batches_per_epoch(&a), same = 0;
    for (int i = 0; i < 2 * batches; i++) {
        dataloader_next(&a);
        dataloader_next(&b);
        dataloader_next(&c);
        same += !memcmp(a.inputs, b.inputs, 48 * sizeof(int)) && !memcmp(a.targets, b.targets, 48 * sizeof(int)) &&
                !memcmp(a.inputs, c.inputs, 48 * sizeof(int)) && !memcmp(a.targets, c.targets, 48 * sizeof(int));
    }
    check(same == 2 * batches && b.num_tokens == a.num_tokens && b.vocab_size == 0 && c.vocab_size == 65536,
          "dataloader llm.c shards: %d of %d batches (2 shuffled epochs, rank 1 of 2) equal to the same tokens in GTOK shards, "
          "and in a glob mixing both formats", same, 2 * batches);
    dataloader_free(&a);
    dataloader_free(&b);
    dataloader_free(&c);
}

typedef struct { const char* pattern; int limit, at; } LlmcArgs;
/* loads the shards of a->pattern with tokens limited to a->limit (if > 0); with a->at >= 0, then
 * rewrites llmc_rw_0.bin with token a->at changed (same length) and reads two epochs */
static void child_llmc(void* ctx) {
    LlmcArgs* a = (LlmcArgs*)ctx;
    DataLoader dl;
    dataloader_init(&dl, a->pattern, 2, 8, 0, 1, 0, 1);
    if (a->limit > 0) dataloader_limit_tokens(&dl, a->limit);
    dataloader_next(&dl);
    if (a->at < 0) return;
    char path[512];
    snprintf(path, sizeof(path), "%.*s0.bin", (int)(strlen(a->pattern) - 5), a->pattern);
    write_llmc_shard(path, LLMC_SHARD_MAGIC, 1, 70001, 0, 70001, a->at, 1, 0);
    for (int i = 0; i < 20000; i++) dataloader_next(&dl);
}

static void test_dataloader_llmc_errors(void) {
    char path[512], pattern[512];
    LlmcArgs args = {pattern, 0, -1};
    struct { const char* what; int32_t magic, version, count; int ntok; size_t cut; const char* needle; } bad[] = {
        {"truncated", LLMC_SHARD_MAGIC, 1, 500, 500, 3, "llm.c token shard is truncated: header says 500 tokens (1000 bytes), file has 997"},
        {"too long", LLMC_SHARD_MAGIC, 1, 499, 500, 0, "llm.c token shard is too long: header says 499 tokens"},
        {"negative count", LLMC_SHARD_MAGIC, 1, -2, 500, 0, "llm.c token shard header says -2 tokens"},
        {"version 2", LLMC_SHARD_MAGIC, 2, 500, 500, 0, "llm.c token shard version 2 is not supported"},
        {"LLaMA-3 shard", 20240801, 7, 250, 500, 0, "an llm.c LLaMA-3 token shard (uint32 tokens)"},
        {"other magic", 20240326, 3, 500, 500, 0, "not a token shard: magic 0x0134d7c6, expected 0x4b4f5447 (GTOK) or 20240520 (llm.c's)"},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        tmp_path(path, sizeof(path), "llmc_bad.bin");
        write_llmc_shard(path, bad[i].magic, bad[i].version, bad[i].count, 0, bad[i].ntok, -1, 0, bad[i].cut);
        snprintf(pattern, sizeof(pattern), "%s", path);
        char what[128];
        snprintf(what, sizeof(what), "dataloader llm.c shard: %s", bad[i].what);
        expect_failure(what, child_llmc, &args, 1, bad[i].needle);
    }
    tmp_path(path, sizeof(path), "llmc_vocab.bin");
    write_llmc_shard(path, LLMC_SHARD_MAGIC, 1, 500, 1, 500, -1, 0, 0); /* tokens 10000..10499 */
    snprintf(pattern, sizeof(pattern), "%s", path);
    args.limit = 10300;
    expect_failure("dataloader llm.c shard: a token above the model's vocabulary", child_llmc, &args, 1,
                   "token 10300 at position 300 is not below the model's vocabulary (an llm.c shard states none) of 10300");
    tmp_path(path, sizeof(path), "gtok_vocab.bin");
    write_shard(path, 0, 500, 30000, 0, 0);
    snprintf(pattern, sizeof(pattern), "%s", path);
    args.limit = 20000;
    expect_failure("dataloader: a GTOK shard's vocab field above the model's", child_llmc, &args, 1,
                   "token shard has vocab size 30000 (its header), above the model's vocabulary of 20000");
    args.limit = 0;
    /* rewritten during the run, the same length: a token among the first or the last 32768 is seen */
    int changed[2] = {5, 70001 - 100};
    for (int i = 0; i < 2; i++) {
        tmp_path(path, sizeof(path), "llmc_rw_0.bin");
        write_llmc_shard(path, LLMC_SHARD_MAGIC, 1, 70001, 0, 70001, -1, 0, 0);
        tmp_path(path, sizeof(path), "llmc_rw_1.bin");
        write_llmc_shard(path, LLMC_SHARD_MAGIC, 1, 700, 1, 700, -1, 0, 0);
        tmp_path(pattern, sizeof(pattern), "llmc_rw_*.bin");
        args.at = changed[i];
        char what[128];
        snprintf(what, sizeof(what), "dataloader llm.c shard rewritten since init (token %d of 70001 changed)", changed[i]);
        expect_failure(what, child_llmc, &args, 1, "llmc_rw_0.bin: token shard changed since it was opened");
    }
}

/* shards shorter than one window are skipped; the fingerprint follows content and order */
static void test_dataloader_short_and_fingerprint(void) {
    char path[512], pattern[512];
    tmp_path(path, sizeof(path), "mixed_0.bin");
    write_shard(path, 0, 500, 30000, 0, 0);
    tmp_path(path, sizeof(path), "mixed_1.bin");
    write_shard(path, 1, 16, 30000, 0, 0);
    tmp_path(path, sizeof(path), "mixed_2.bin");
    write_shard(path, 2, 300, 30000, 0, 0);
    tmp_path(pattern, sizeof(pattern), "mixed_*.bin");
    DataLoader dl;
    dataloader_init(&dl, pattern, 2, 8, 0, 1, 0, 1); /* windows of 16 + 1 tokens: 31 + 0 + 18 batches */
    int ok = dataloader_batches_per_epoch(&dl) == 31 + 18, from_short = 0;
    for (int i = 0; i < 2 * (31 + 18); i++) {
        dataloader_next(&dl);
        from_short += dl.inputs[0] >= 10000 && dl.inputs[0] < 20000;
    }
    check(ok && !from_short, "dataloader: a shard shorter than one window (16 tokens, window 17) is skipped, the others read: %zu batches an "
          "epoch, %d from the short one", dataloader_batches_per_epoch(&dl), from_short);
    uint32_t fp = dl.fingerprint;
    dataloader_free(&dl);
    DataLoader again, swapped;
    dataloader_init(&again, pattern, 2, 8, 0, 1, 0, 1);
    tmp_path(path, sizeof(path), "mixed_0.bin");
    write_shard(path, 2, 300, 30000, 0, 0);
    tmp_path(path, sizeof(path), "mixed_2.bin");
    write_shard(path, 0, 500, 30000, 0, 0);
    dataloader_init(&swapped, pattern, 2, 8, 0, 1, 0, 1);
    check(fp == again.fingerprint && fp != swapped.fingerprint && fp != 0,
          "dataloader fingerprint: the same shards give the same (0x%08x), two shards' contents swapped another (0x%08x)", fp,
          swapped.fingerprint);
    dataloader_free(&again);
    dataloader_free(&swapped);
}

/* ----------------------------------------------------------------------------
 * model files */
static GPTConfig small_config(void) {
    GPTConfig c = {16, 100, 128, 2, 2, 8};
    return c;
}

static float* random_params(const GPTConfig* c, uint64_t seed) {
    size_t n = gpt_num_params(c);
    float* p = (float*)malloc_check(n * sizeof(float));
    Rng r;
    rng_seed(&r, seed);
    rng_fill_normal(&r, p, n, 0.0f, 0.02f);
    return p;
}

static void child_read_model(void* ctx) {
    GPTConfig c;
    size_t n;
    free(model_file_read((const char*)ctx, &c, &n));
}

/* rewrites header word `word` of a file in place */
static void patch_word(const char* path, int word, int32_t value) {
    FILE* f = fopen_check(path, "r+b");
    fseek_check(f, 4LL * word, SEEK_SET, path);
    fwrite_check(&value, 4, 1, f, path);
    fclose_check(f, path);
}

static void copy_file(const char* from, const char* to, long long cut, long long flip_at) {
    FILE* f = fopen_check(from, "rb");
    long long n = file_size_check(f, from);
    uint8_t* buf = (uint8_t*)malloc_check((size_t)n);
    fread_check(buf, 1, (size_t)n, f, from);
    fclose_check(f, from);
    if (flip_at >= 0) buf[flip_at] ^= 0x40;
    FILE* g = fopen_check(to, "wb");
    fwrite_check(buf, 1, (size_t)(n - cut), g, to);
    fclose_check(g, to);
    free(buf);
}

static void test_model_file(void) {
    /* parameter counts against the closed form Vp·C + maxT·C + L(12C² + 13C) + 2C and GPT-2 124M */
    GPTConfig d12;
    int found = gpt_preset("d12", &d12);
    check(found && gpt_num_params(&d12) == 124475904u && d12.padded_vocab_size == 50304,
          "gpt_preset d12: %zu parameters (GPT-2 124M with Vp=50304: 124475904)", gpt_num_params(&d12));
    int ok = 1;
    const char* names[5] = {"d6", "d12", "d24", "d36", "d48"};
    const int heads[5] = {6, 12, 16, 20, 25};
    for (int i = 0; i < 5; i++) {
        GPTConfig c;
        ok &= gpt_preset(names[i], &c) && c.num_heads == heads[i] && c.channels % c.num_heads == 0 && c.channels / c.num_heads == 64;
        size_t C = (size_t)c.channels, L = (size_t)c.num_layers;
        ok &= gpt_num_params(&c) == (size_t)c.padded_vocab_size * C + 1024 * C + L * (12 * C * C + 13 * C) + 2 * C;
    }
    GPTConfig dummy;
    check(ok && !gpt_preset("d13", &dummy) && !gpt_preset("gpt2", &dummy),
          "gpt_preset d6..d48: head dim 64, counts equal Vp*C + maxT*C + L(12C^2+13C) + 2C; unknown names rejected");
    check(padded_vocab(50257) == 50304 && padded_vocab(128) == 128 && padded_vocab(129) == 256 && padded_vocab(1) == 128,
          "padded_vocab: 50257->50304, 128->128, 129->256, 1->128");
    int decays = 0, resid = 0;
    for (int t = 0; t < NUM_PARAM_TENSORS; t++) {
        decays += gpt_param_decays(t);
        resid += gpt_param_is_residual_proj(t);
    }
    check(decays == 6 && gpt_param_decays(0) && gpt_param_decays(4) && !gpt_param_decays(5) && resid == 2 &&
              gpt_param_is_residual_proj(6) && gpt_param_is_residual_proj(12) && strcmp(GPT_PARAM_NAMES[12], "fcprojw") == 0,
          "tensor roles: 6 decayed 2-D tensors, 2 residual projections (attprojw, fcprojw)");

    GPTConfig c = small_config();
    float* params = random_params(&c, 3);
    size_t n = gpt_num_params(&c);
    char path[512], bad[512];
    tmp_path(path, sizeof(path), "model.bin");
    model_file_write(path, &c, params);
    GPTConfig c2;
    size_t n2;
    float* back = model_file_read(path, &c2, &n2);
    check(n2 == n && memcmp(&c, &c2, sizeof(c)) == 0 && memcmp(params, back, n * sizeof(float)) == 0,
          "model file: write -> read round trip of %zu parameters is bit-exact, config equal", n);
    free(back);
    /* the file as the format says: header words by hand, CRC by the test's own CRC */
    FILE* f = fopen_check(path, "rb");
    uint32_t w[256];
    fread_check(w, 4, 256, f, path);
    fclose_check(f, path);
    check(w[0] == 0x4D545047u && w[1] == 1 && w[2] == ref_crc32(0, params, n * 4) && w[3] == n * 4 && w[4] == 0 &&
              w[5] == 1 && w[6] == 16 && w[7] == 100 && w[8] == 128 && w[9] == 2 && w[10] == 2 && w[11] == 8 && w[12] == n &&
              w[13] == 0 && w[14] == 0 && w[255] == 0,
          "model file: header words match doc/formats.md (magic, version, CRC, length, dtype 1, config, count)");

    /* bf16 file made by hand: values truncated to bf16 read back exactly */
    uint16_t* half = (uint16_t*)malloc_check(n * 2);
    float* want = (float*)malloc_check(n * 4);
    for (size_t i = 0; i < n; i++) {
        uint32_t bits;
        memcpy(&bits, &params[i], 4);
        half[i] = (uint16_t)(bits >> 16);
        bits &= 0xFFFF0000u;
        memcpy(&want[i], &bits, 4);
    }
    int32_t fields[9] = {2, 16, 100, 128, 2, 2, 8, (int32_t)n, 0};
    tmp_path(bad, sizeof(bad), "model_bf16.bin");
    test_write_file(bad, 0x4D545047u, 1, fields, 9, half, n * 2, 0, 0);
    back = model_file_read(bad, &c2, &n2);
    check(n2 == n && memcmp(back, want, n * 4) == 0, "model file bf16 (hand-written): widened to fp32 exactly");
    free(back);
    free(half);
    free(want);

    tmp_path(bad, sizeof(bad), "model_cut.bin");
    copy_file(path, bad, 4, -1);
    expect_failure("model file truncated", child_read_model, bad, 1, "truncated");
    tmp_path(bad, sizeof(bad), "model_flip.bin");
    copy_file(path, bad, 0, 1024 + 100);
    expect_failure("model file corrupted payload", child_read_model, bad, 1, "corrupt");
    char shard[512];
    tmp_path(shard, sizeof(shard), "train_000.bin");
    expect_failure("model file foreign (a token shard)", child_read_model, shard, 1, "not a model file");
    struct { int word; int32_t value; const char* needle; } patches[] = {
        {10, 3, "not divisible by n_head"}, {8, 256, "padded_vocab_size = 256"}, {12, 5, "says 5 parameters"},
        {5, 7, "dtype 7"}, {1, 2, "version 2"}, {9, 0, "n_layer = 0"}};
    for (size_t i = 0; i < sizeof(patches) / sizeof(patches[0]); i++) {
        tmp_path(bad, sizeof(bad), "model_patch.bin");
        copy_file(path, bad, 0, -1);
        patch_word(bad, patches[i].word, patches[i].value);
        char what[128];
        snprintf(what, sizeof(what), "model file header word %d = %d", patches[i].word, patches[i].value);
        expect_failure(what, child_read_model, bad, 1, patches[i].needle);
    }
    free(params);
}

/* ----------------------------------------------------------------------------
 * training state files and checkpoint directories */
static TrainState sample_state(int has_master) {
    TrainState st;
    memset(&st, 0, sizeof(st));
    st.step = 123;
    st.rank = 1;
    st.world = 3;
    st.num_params = 5000;
    st.shard_offset = 1700;
    st.shard_count = 1650;
    rng_seed(&st.rng, 77);
    st.train_loader.epoch = 2;
    st.train_loader.shard = 1;
    st.train_loader.batch = 0x1234567890ull;
    rng_seed(&st.train_loader.rng, 78);
    Schedule s = {SCHED_WSD, 6e-4f, 0.1f, 700, 19000, 0.2f};
    st.schedule = s;
    st.weight_decay = 0.1f;
    st.beta1 = 0.9f;
    st.beta2 = 0.95f;
    st.eps = 1e-8f;
    st.grad_clip = 1.0f;
    st.has_master = has_master;
    st.seq_len = 1024;
    st.step_tokens = 524288;
    st.shuffle = 1;
    st.data_tokens = 0x987654321ull;
    st.data_shards = 103;
    st.val_every = 250;
    st.master_weights = 0;
    st.has_model_crc = 1;
    st.model_crc = 0xDEADBEEFu;
    st.precision = 2;
    st.val_tokens = 0x100000003ull;
    st.val_crc = 0xCAFEF00Du;
    return st;
}

/* patch_word, then the state file's header CRC (word 255) made to match again */
static void patch_state_word(const char* path, int word, int32_t value) {
    patch_word(path, word, value);
    int32_t h[HEADER_WORDS];
    FILE* f = fopen_check(path, "rb");
    fread_check(h, 4, HEADER_WORDS, f, path);
    fclose_check(f, path);
    patch_word(path, HEADER_WORDS - 1, (int32_t)crc32_update(0, h, (HEADER_WORDS - 1) * 4));
}

/* a state file read as a resume reads it (llmc/zero.h): its header, then m and v of its whole shard */
static void child_read_state(void* ctx) {
    const char* path = (const char*)ctx;
    TrainState st;
    int32_t h[HEADER_WORDS];
    FILE* f = state_file_open(path, &st, h);
    float* m = (float*)malloc_check(st.shard_count * sizeof(float));
    float* v = (float*)malloc_check(st.shard_count * sizeof(float));
    state_file_read_range(f, path, &st, st.shard_offset, st.shard_offset + st.shard_count, m, v);
    fclose_check(f, path);
}

static void test_state_file(void) {
    char path[512], bad[512];
    for (int has_master = 0; has_master <= 1; has_master++) {
        TrainState st = sample_state(has_master);
        size_t n = st.shard_count;
        float* arrays = (float*)malloc_check(3 * n * sizeof(float));
        Rng fill;
        rng_seed(&fill, 9);
        rng_fill_normal(&fill, arrays, 3 * n, 0.0f, 1.0f);
        float *m = arrays, *v = arrays + n, *master = arrays + 2 * n;
        tmp_path(path, sizeof(path), "state.bin");
        state_file_write(path, &st, m, v, has_master ? master : NULL);
        TrainState back;
        int32_t h[HEADER_WORDS];
        float* back_arrays = (float*)malloc_check(3 * n * sizeof(float));
        float *m2 = back_arrays, *v2 = back_arrays + n, *master2 = back_arrays + 2 * n;
        FILE* f = state_file_open(path, &back, h);
        state_file_read_range(f, path, &back, back.shard_offset, back.shard_offset + n, m2, v2);
        if (has_master) payload_read(f, path, master2, n * sizeof(float), NULL); /* after v: the file's third array */
        fclose_check(f, path);
        int ok = memcmp(&st, &back, sizeof(st)) == 0 && memcmp(m, m2, n * 4) == 0 && memcmp(v, v2, n * 4) == 0 &&
                 (!has_master || memcmp(master, master2, n * 4) == 0);
        f = fopen_check(path, "rb");
        long long size = file_size_check(f, path);
        uint32_t w[256];
        fread_check(w, 4, 256, f, path);
        fclose_check(f, path);
        ok &= size == 1024 + (long long)n * 4 * (2 + has_master) && w[0] == 0x53545047u && w[1] == 2 && w[5] == 123 && w[6] == 1 &&
              w[7] == 3 && w[47] == (uint32_t)has_master && w[179] == 1024 && w[180] == 524288 && w[181] == 0 && w[182] == 1 &&
              w[183] == 0 && w[184] == 0x87654321u && w[185] == 9 && w[186] == 103 && w[189] == 251 && w[190] == 1 &&
              w[191] == 0xDEADBEEFu && w[192] == 1 && w[193] == 2 && w[194] == 3 && w[195] == 1 && w[196] == 0xCAFEF00Du &&
              w[255] == crc32_update(0, w, 255 * 4);
        check(ok, "state file has_master=%d: round trip of every field and %zu-float arrays is exact, %lld bytes", has_master,
              n, size);
        free(back_arrays);
        TrainState now = st;
        now.schedule.max_lr = 3e-4f;
        now.world = 2;
        now.seq_len = 512;
        now.step_tokens = 1 << 18;
        now.data_tokens++;
        now.val_every = 100;
        now.master_weights = 1;
        now.precision = 4;
        now.val_tokens++;
        now.val_crc++;
        TrainState unrecorded = st, no_eval = now;
        unrecorded.precision = 0;
        unrecorded.val_tokens = 0;
        no_eval.val_tokens = 0;
        FILE* devnull = fopen_check("/dev/null", "w");
        int same = state_compare(path, &st, &st, devnull), diffs = state_compare(path, &st, &now, devnull);
        int older = state_compare(path, &unrecorded, &now, devnull), without = state_compare(path, &st, &no_eval, devnull);
        fclose_check(devnull, "/dev/null");
        check(same == 0 && diffs == 10 && older == 7 && without == 8,
              "state_compare: identical runs 0 differences, changed lr, world, T, tokens per step, data, --val-every, "
              "--master-weights, precision, tokens an evaluation, validation data -> %d (want 10); not recorded (an older "
              "file): precision and validation not compared -> %d (want 7); this run without evaluations -> %d (want 8)", diffs,
              older, without);
        free(arrays);
    }
    tmp_path(bad, sizeof(bad), "state_cut.bin");
    copy_file(path, bad, 8, -1);
    expect_failure("state file truncated", child_read_state, bad, 1, "truncated");
    tmp_path(bad, sizeof(bad), "state_flip.bin");
    copy_file(path, bad, 0, 1024 + 4 * 1650 + 3);
    char err[4600];
    check(file_verify(bad, "training state file", GPTS_MAGIC, GPTS_VERSION, NULL, err, sizeof(err)) != 0 && strstr(err, "is corrupt"),
          "file_verify (the resume's check) of a state file with a flipped byte in v: %s", err);
    struct { int word; int32_t value; const char* needle; } patches[] = {
        {6, 3, "rank 3 is not in [0, world=3)"}, {12, 4000, "outside the 5000 parameters"}, {36, 9, "schedule kind 9"},
        {47, 2, "master-weights flag is 2"}, {44, 0x7FC00000, "not a finite float"}, {5, -1, "step -1"},
        {179, 0, "seq_len 0"}, {182, 2, "shuffle 2"}, {193, 3, "precision word is 3, not 0, 2 or 4"}};
    for (size_t i = 0; i < sizeof(patches) / sizeof(patches[0]); i++) {
        copy_file(path, bad, 0, -1);
        patch_state_word(bad, patches[i].word, patches[i].value);
        char what[128];
        snprintf(what, sizeof(what), "state file header word %d = %d", patches[i].word, patches[i].value);
        expect_failure(what, child_read_state, bad, 1, patches[i].needle);
    }
    char model_path[512];
    tmp_path(model_path, sizeof(model_path), "model.bin");
    expect_failure("state file foreign (a model file)", child_read_state, model_path, 1, "not a training state file");
    copy_file(path, bad, 0, -1);
    patch_word(bad, 26, 7); /* the loader's batch: the position a flipped bit would silently move */
    expect_failure("state file header word 26 changed (header CRC)", child_read_state, bad, 1, "header is corrupt");
    check(file_verify(bad, "training state file", GPTS_MAGIC, GPTS_VERSION, NULL, err, sizeof(err)) != 0 && strstr(err, "header is corrupt"),
          "file_verify (checkpoint scan) of that state file: %s", err);
    /* a non-finite moment fails the write's verification (as a resume's checkpoint scan): nothing is left */
    TrainState st = sample_state(0);
    size_t n = st.shard_count;
    float* moments = (float*)calloc(2 * n, sizeof(float));
    if (!moments) fatalf("out of memory");
    moments[n + 7] = INFINITY; /* v[7]: payload float n + 7 */
    char inf_path[512], want[64];
    tmp_path(inf_path, sizeof(inf_path), "inf_state.bin");
    snprintf(want, sizeof(want), "non-finite value (payload float %zu)", n + 7);
    int rc = state_file_try_write(inf_path, &st, moments, moments + n, NULL, err, sizeof(err));
    check(rc != 0 && strstr(err, want) && access(inf_path, F_OK) != 0, "a state file with v[7] = inf is not written: %s", err);
    free(moments);
}

/* Writes a marker for each step s with present[s] != 0 in dir, runs checkpoint_retain, and sets kept[s]
 * from the markers left (then removes them) */
static void retention_case(const char* dir, const int* present, int newest, int keep_last, int keep_every, int* kept) {
    char model[4200], state[4200], done[4200];
    for (int s = 0; s < 24; s++)
        if (present[s]) {
            checkpoint_paths(model, state, done, sizeof(model), dir, s, 0);
            FILE* f = fopen_check(done, "w");
            fclose_check(f, done);
        }
    FILE* sink = fopen_check("/dev/null", "w");
    checkpoint_retain(dir, newest, keep_last, keep_every, sink);
    fclose_check(sink, "/dev/null");
    for (int s = 0; s < 24; s++) {
        checkpoint_paths(model, state, done, sizeof(model), dir, s, 0);
        kept[s] = access(done, F_OK) == 0;
        if (kept[s]) remove(done);
    }
}

/* checkpoint_retain on two hand-made cases and against a rule built from sets on random marker sets:
 * kept are the steps above `newest` (an earlier run's, skipped as invalid: they take none of the keep_last
 * places), the first keep_last of the steps at or below it, newest first (all for 0), and the positive
 * multiples of keep_every */
static void test_checkpoint_retention(const char* parent) {
    char dir[600];
    snprintf(dir, sizeof(dir), "%s/retention", parent);
    make_dir_check(dir);
    int kept[24];
    int newer_invalid[24] = {0}; /* resumed from 5 past an invalid 10, wrote 8, --keep-last 1 */
    newer_invalid[5] = newer_invalid[8] = newer_invalid[10] = 1;
    retention_case(dir, newer_invalid, 8, 1, 0, kept);
    check(!kept[5] && kept[8] && kept[10], "retention: --keep-last 1 after writing 8 keeps 8 and the newer (invalid) 10, deletes 5");
    int step0[24] = {0}; /* a step-0 checkpoint (a stop before the first step), --keep-last 1 --keep-every 3 */
    step0[0] = step0[3] = step0[5] = step0[6] = 1;
    retention_case(dir, step0, 6, 1, 3, kept);
    check(!kept[0] && kept[3] && !kept[5] && kept[6], "retention: --keep-last 1 --keep-every 3 keeps 3 and 6, not step 0 or 5");
    Rng rng;
    rng_seed(&rng, 7);
    int mismatches = 0, cases = 0;
    for (int c = 0; c < 400; c++) {
        int present[24] = {0}, any = 0, newest = -1;
        for (int s = 0; s < 24; s++) any += present[s] = rng_below(&rng, 3) == 0;
        if (!any) continue;
        for (int pick = (int)rng_below(&rng, (uint64_t)any), s = 0; s < 24; s++)
            if (present[s] && pick-- == 0) newest = s;
        int keep_last = (int)rng_below(&rng, 4), keep_every = (int)rng_below(&rng, 5);
        int want[24] = {0}, at_or_below[24], n = 0;
        for (int s = newest; s >= 0; s--)
            if (present[s]) at_or_below[n++] = s;
        for (int k = 0; k < n && (keep_last == 0 || k < keep_last); k++) want[at_or_below[k]] = 1;
        for (int s = 0; s < 24; s++)
            if (present[s] && (s > newest || (keep_every > 0 && s > 0 && s % keep_every == 0))) want[s] = 1;
        retention_case(dir, present, newest, keep_last, keep_every, kept);
        for (int s = 0; s < 24; s++) mismatches += kept[s] != want[s];
        cases++;
    }
    check(mismatches == 0 && cases > 300, "checkpoint_retain vs the rule built from sets on %d random marker sets: %d mismatches", cases,
          mismatches);
}

static void test_checkpoint_dir(void) {
    char dir[512], model[4096], state[4096], done[4096];
    tmp_path(dir, sizeof(dir), "run/ckpt");
    check(checkpoint_latest(dir) == -1, "checkpoint_latest: missing directory -> -1");
    make_dir_check(dir);
    make_dir_check(dir); /* exists already: fine */
    check(checkpoint_latest(dir) == -1, "checkpoint_latest: empty directory -> -1");
    checkpoint_paths(model, state, done, sizeof(model), dir, 42, 3);
    char want_model[4096], want_state[4096], want_done[4096];
    snprintf(want_model, sizeof(want_model), "%s/model_00000042.bin", dir);
    snprintf(want_state, sizeof(want_state), "%s/state_00000042_00003.bin", dir);
    snprintf(want_done, sizeof(want_done), "%s/done_00000042.txt", dir);
    check(strcmp(model, want_model) == 0 && strcmp(state, want_state) == 0 && strcmp(done, want_done) == 0,
          "checkpoint_paths: %s, %s, %s", strrchr(model, '/') + 1, strrchr(state, '/') + 1, strrchr(done, '/') + 1);
    const char* names[] = {"done_00000005.txt", "done_00000012.txt", "done_0000099.txt", "done_0000009x.txt",
                           "model_00000020.bin", "state_00000020_00000.bin", "done_00000030.txt.tmp"};
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
        char p[4096];
        snprintf(p, sizeof(p), "%s/%s", dir, names[i]);
        FILE* f = fopen_check(p, "w");
        fclose_check(f, p);
    }
    int latest = checkpoint_latest(dir);
    checkpoint_mark_done(dir, 13, 2);
    int after = checkpoint_latest(dir);
    snprintf(done, sizeof(done), "%s/done_00000013.txt", dir);
    FILE* f = fopen_check(done, "r");
    char text[64] = {0};
    size_t got = fread(text, 1, sizeof(text) - 1, f);
    fclose_check(f, done);
    check(latest == 12 && after == 13 && got > 0 && strcmp(text, "step 13\nworld 2\n") == 0,
          "checkpoint_latest: %d among markers 5, 12 (ignoring malformed names, .tmp and unmarked step 20); "
          "after checkpoint_mark_done(13): %d", latest, after);
    /* the best model's directory keeps one checkpoint, even an older one than others there (a resumed run's best) */
    FILE* sink = fopen_check("/dev/null", "w");
    int deleted = checkpoint_keep_only(dir, 12, sink);
    fclose_check(sink, "/dev/null");
    int* steps;
    int n = checkpoint_list(dir, &steps);
    char unmarked[4200];
    snprintf(unmarked, sizeof(unmarked), "%s/model_00000020.bin", dir);
    check(deleted == 2 && n == 1 && steps[0] == 12 && access(unmarked, F_OK) != 0,
          "checkpoint_keep_only(12) among 5, 12, 13: deleted %d, left %d (step %d), unmarked step 20's files gone", deleted, n,
          n > 0 ? steps[0] : -1);
    free(steps);
    test_checkpoint_retention(dir);
}

/* ----------------------------------------------------------------------------
 * flags */
static TrainArgs parse(int argc, const char** argv) {
    TrainArgs a;
    flags_parse(&a, argc, (char**)argv, "train_gpt");
    return a;
}
typedef struct { int argc; const char* argv[14]; } Argv;
static void child_parse(void* ctx) {
    Argv* v = (Argv*)ctx;
    parse(v->argc, v->argv);
}
static void child_reject_zero(void* ctx) {
    Argv* v = (Argv*)ctx;
    TrainArgs a = parse(v->argc, v->argv);
    flags_reject(&a, "--zero", "the CPU trainer has one rank");
}
static void child_reject_dist(void* ctx) {
    Argv* v = (Argv*)ctx;
    TrainArgs a = parse(v->argc, v->argv);
    flags_reject(&a, "--dist-timeout", "one rank");
    flags_reject(&a, "--dist-file", "one rank");
}

/* llmc/cli.h with the types the trainers' table lacks: repeatable strings, long, double, a string not given */
typedef struct {
    CliList in;
    long n;
    double f;
    const char *s, *w;
} CliOpts;
static const CliFlag CLI_TEST_FLAGS[] = {
    {NULL, "--in", CLI_STRS, offsetof(CliOpts, in), NULL, 0, 0, NULL, "repeatable"},
    {"-n", "--count", CLI_LONG, offsetof(CliOpts, n), "5000000000", 1, 1e15, NULL, "a long"},
    {NULL, "--frac", CLI_DOUBLE, offsetof(CliOpts, f), "0.25", 0, 1, NULL, "a double"},
    {NULL, "--name", CLI_STR, offsetof(CliOpts, s), NULL, 0, 0, NULL, "not given: NULL"},
    {NULL, "--word", CLI_STR, offsetof(CliOpts, w), "bb", 0, 0, "a|bb|c", "one of three words"},
};
static const CliSpec CLI_TEST_SPEC = {CLI_TEST_FLAGS, 5, "t [flags]", NULL, NULL};
static void child_cli(void* ctx) {
    Argv* v = (Argv*)ctx;
    CliOpts o;
    cli_parse(&CLI_TEST_SPEC, &o, v->argc, (char**)v->argv);
    free(o.in.items);
}

static void test_cli(void) {
    const char* none[] = {"t"};
    CliOpts d;
    cli_parse(&CLI_TEST_SPEC, &d, 1, (char**)none);
    check(d.in.count == 0 && d.n == 5000000000L && d.f == 0.25 && d.s == NULL && strcmp(d.w, "bb") == 0,
          "cli: defaults (no --in, a long above 2^32, a double, a string not given is NULL, a word)");
    const char* argv[] = {"t", "--in", "x", "--in=y", "-n", "7", "--frac=0.1", "--name=--name", "--word", "c", "--in", "-"};
    CliOpts o;
    cli_parse(&CLI_TEST_SPEC, &o, 12, (char**)argv);
    check(o.in.count == 3 && strcmp(o.in.items[0], "x") == 0 && strcmp(o.in.items[1], "y") == 0 && strcmp(o.in.items[2], "-") == 0 &&
              o.n == 7 && o.f == 0.1 && o.s && strcmp(o.s, "--name") == 0 && strcmp(o.w, "c") == 0,
          "cli: --in three times in order (one of them -), -n, --frac=0.1 as a double, --name=--name, a word");
    free(o.in.items);
    char text[64];
    cli_format(text, sizeof(text), &CLI_TEST_FLAGS[0], &d);
    check(strcmp(text, "none") == 0, "cli: an empty repeatable flag formats as none");
    char near[64], round[64];
    o.f = 0.1 + 1e-12;
    cli_format(near, sizeof(near), &CLI_TEST_FLAGS[2], &o);
    o.f = 0.25;
    cli_format(round, sizeof(round), &CLI_TEST_FLAGS[2], &o);
    check(strtod(near, NULL) == 0.1 + 1e-12 && strcmp(round, "0.25") == 0,
          "cli: a double formats with the digits it needs to read back the same (%s), no more (%s)", near, round);
    Argv word = {3, {"t", "--word", "b"}};
    expect_failure("cli: a word not among the choices (a prefix of one)", child_cli, &word, 2, "--word: bad value 'b': expected a|bb|c");
    Argv frac = {2, {"t", "--frac=1.5"}};
    expect_failure("cli: a double out of range", child_cli, &frac, 2, "--frac: bad value '1.5': expected a finite number in [0, 1]");
    Argv count = {3, {"t", "-n", "0"}};
    expect_failure("cli: a long out of range", child_cli, &count, 2, "--count: bad value '0': expected an integer in [1, 1000000000000000]");
    Argv in = {2, {"t", "--in"}};
    expect_failure("cli: a repeatable flag without a value", child_cli, &in, 2, "--in: missing value");
    Argv flag_value = {4, {"t", "--name", "--in", "x"}};
    expect_failure("cli: a string flag followed by a flag (an unset variable in --name $X --in x)", child_cli, &flag_value, 2,
                   "--name: missing value: the next argument, '--in', is a flag (write --name=--in if it is the value)");
    Argv empty = {3, {"t", "--in", ""}};
    expect_failure("cli: an empty string value", child_cli, &empty, 2, "--in: empty value (an unset variable?)");
    Argv empty_eq = {2, {"t", "--name="}};
    expect_failure("cli: an empty string value after =", child_cli, &empty_eq, 2, "--name: empty value");
    Argv save = {3, {"train_gpt", "--on-save-error", "maybe"}};
    expect_failure("flags: a word flag's value is checked by the parser", child_parse, &save, 2,
                   "--on-save-error: bad value 'maybe': expected stop|continue");
}

static void test_flags(void) {
    const char* defaults_argv[] = {"train_gpt"};
    TrainArgs d = parse(1, defaults_argv);
    check(strcmp(d.train_data, "") == 0 && strcmp(d.init, "") == 0 && d.n_layer == 0 && d.vocab_size == 0 &&
              d.batch_size == 4 && d.seq_len == 64 && d.total_batch == -1 &&
              d.max_steps == -1 && d.lr == 3e-4f && d.final_lr_frac == 1.0f && strcmp(d.lr_schedule, "cosine") == 0 &&
              d.wsd_frac == 0.2f && d.beta2 == 0.95f && d.eps == 1e-8f && d.val_every == 20 && d.master_weights == 1 &&
              d.seed == 1337 && d.mock_data == 0 && strcmp(d.tokenizer, "data/gpt2_tokenizer.bin") == 0 && d.threads == 0,
          "flags: defaults as specified (strings \"\" = none, sizes 0 = not set, B 4, T 64, lr 3e-4, cosine, -w 1, ...)");
    const char* argv[] = {"train_gpt", "-i", "data/train_*.bin", "--val-data", "v.bin", "-b", "8", "--seq-len=128",
                          "-x", "5", "-l", "6e-4", "-k", "wsd", "--mock-data", "-d", "-1", "--top-k", "40",
                          "--max-steps=7", "-e", "d12", "--beta2", "0.99"};
    TrainArgs a = parse((int)(sizeof(argv) / sizeof(argv[0])), argv);
    check(strcmp(a.train_data, "data/train_*.bin") == 0 && strcmp(a.val_data, "v.bin") == 0 && a.batch_size == 8 &&
              a.seq_len == 128 && a.max_steps == 7 && a.lr == 6e-4f && strcmp(a.lr_schedule, "wsd") == 0 &&
              a.mock_data == 1 && a.total_batch == -1 && a.top_k == 40 && strcmp(a.init, "d12") == 0 && a.beta2 == 0.99f,
          "flags: short, long, --name=value forms, bare --mock-data, negative value, later flag wins (-x 5 then --max-steps=7)");
    const char* argv_bool[] = {"train_gpt", "--mock-data", "0", "-b", "2"};
    TrainArgs b = parse(5, argv_bool);
    const char* argv_bool2[] = {"train_gpt", "--mock-data=1"};
    TrainArgs b2 = parse(2, argv_bool2);
    check(b.mock_data == 0 && b.batch_size == 2 && b2.mock_data == 1, "flags: --mock-data 0 and --mock-data=1");
    const char* argv_y[] = {"train_gpt", "-y", "--shuffle", "-w", "0", "--deterministic"};
    TrainArgs y = parse(6, argv_y);
    check(y.resume == 1 && y.shuffle == 1 && y.master_weights == 0 && y.deterministic == 1,
          "flags: the 0|1 flags -y, --shuffle, --deterministic alone mean 1 (-w 0 still 0)");

    Argv bad_int = {3, {"train_gpt", "-b", "abc"}};
    expect_failure("flags bad int", child_parse, &bad_int, 2, "--batch-size: bad value 'abc'");
    Argv trailing = {3, {"train_gpt", "--max-steps", "5x"}};
    expect_failure("flags int with trailing junk", child_parse, &trailing, 2, "--max-steps: bad value '5x'");
    Argv zero_b = {3, {"train_gpt", "-b", "0"}};
    expect_failure("flags int out of range", child_parse, &zero_b, 2, "expected an integer in [1, 2147483647]");
    Argv huge = {3, {"train_gpt", "-t", "99999999999999999999"}};
    expect_failure("flags int overflow", child_parse, &huge, 2, "--seq-len: bad value");
    Argv nan_lr = {3, {"train_gpt", "--lr", "nan"}};
    expect_failure("flags float not finite", child_parse, &nan_lr, 2, "--lr: bad value 'nan'");
    Argv hex_lr = {3, {"train_gpt", "--lr", "0x10"}};
    expect_failure("flags float in hex (strtod reads it, argparse's float does not)", child_parse, &hex_lr, 2, "--lr: bad value '0x10'");
    Argv space_b = {3, {"train_gpt", "-b", " 3"}};
    expect_failure("flags int with leading white space (as trailing: refused)", child_parse, &space_b, 2, "--batch-size: bad value ' 3'");
    Argv tiny_lr = {3, {"train_gpt", "--lr", "1e-50"}};
    expect_failure("flags float that would be 0 in a float", child_parse, &tiny_lr, 2, "--lr: bad value '1e-50': too close to 0");
    Argv frac = {3, {"train_gpt", "-q", "1.5"}};
    expect_failure("flags float out of range", child_parse, &frac, 2, "--final-lr-frac: bad value '1.5'");
    Argv sched = {3, {"train_gpt", "-k", "cosin"}};
    expect_failure("flags unknown schedule", child_parse, &sched, 2, "expected cosine|linear|constant|wsd");
    Argv unknown = {3, {"train_gpt", "--max-step", "5"}};
    expect_failure("flags unknown flag", child_parse, &unknown, 2, "unknown flag '--max-step', did you mean --max-steps?");
    Argv unknown_eq = {2, {"train_gpt", "--lr-schedul=wsd"}};
    expect_failure("flags unknown flag with =", child_parse, &unknown_eq, 2, "did you mean --lr-schedule?");
    Argv far = {2, {"train_gpt", "--frobnicate"}};
    expect_failure("flags unknown flag, nothing close", child_parse, &far, 2, "unknown flag '--frobnicate' (see");
    Argv missing = {2, {"train_gpt", "-b"}};
    expect_failure("flags missing value", child_parse, &missing, 2, "--batch-size: missing value");
    Argv positional = {2, {"train_gpt", "data.bin"}};
    expect_failure("flags positional argument", child_parse, &positional, 2, "unexpected argument 'data.bin'");
    Argv attached = {2, {"train_gpt", "-b4"}};
    expect_failure("flags: a short flag with its value attached", child_parse, &attached, 2,
                   "unknown flag '-b4': a short flag takes its value as the next argument (-b 4)");
    Argv bool_value = {3, {"train_gpt", "--mock-data", "2"}};
    expect_failure("flags: a 0|1 flag given another number", child_parse, &bool_value, 2, "--mock-data: bad value '2': expected 0 or 1");
    Argv one_dash = {3, {"train_gpt", "-lr", "0.1"}};
    expect_failure("flags: a long name with one dash", child_parse, &one_dash, 2, "unknown flag '-lr', did you mean --lr?");
    Argv stray = {4, {"train_gpt", "-x", "2", "extra"}};
    expect_failure("flags: a stray word after a number names no glob", child_parse, &stray, 2,
                   "unexpected argument 'extra' (flags start with -) (see --help)");
    Argv upper = {3, {"train_gpt", "--MAX-STEPS", "5"}};
    expect_failure("flags: an unknown flag in capitals suggests its lower-case name", child_parse, &upper, 2,
                   "unknown flag '--MAX-STEPS', did you mean --max-steps?");
    Argv short_far = {2, {"train_gpt", "--foo"}};
    expect_failure("flags: a short unknown name suggests nothing far from it", child_parse, &short_far, 2, "unknown flag '--foo' (see --help)");
    Argv expanded = {4, {"train_gpt", "-i", "d/train_000.bin", "d/train_001.bin"}};
    expect_failure("flags: a glob the shell expanded", child_parse, &expanded, 2,
                   "unexpected argument 'd/train_001.bin' (flags start with -; an unquoted glob? quote it: -i 'DIR/train_*.bin')");
    Argv zero_ok = {3, {"train_gpt", "-z", "0"}};
    expect_failure("flags_reject at the default value passes", child_reject_zero, &zero_ok, 0, "");
    Argv timeout = {3, {"train_gpt", "--dist-timeout", "600.0001"}};
    expect_failure("flags_reject compares the value and names it exactly (600.0001, not %g's 600)", child_reject_dist, &timeout, 2,
                   "--dist-timeout 600.0001 is not supported");
    Argv none_word = {3, {"train_gpt", "--dist-file", "none"}};
    expect_failure("flags_reject: a string given as 'none' is not the default ''", child_reject_dist, &none_word, 2,
                   "--dist-file none is not supported");
    Argv bool01 = {3, {"train_gpt", "--mock-data", "01"}};
    expect_failure("flags: a 0|1 flag given 01", child_parse, &bool01, 2, "--mock-data: bad value '01': expected 0 or 1");
    Argv zero1 = {3, {"train_gpt", "-z", "1"}};
    expect_failure("flags_reject non-default", child_reject_zero, &zero1, 2, "--zero 1 is not supported: the CPU trainer");

    char md[512];
    tmp_path(md, sizeof(md), "flags.md");
    FILE* f = fopen_check(md, "w");
    flags_print_markdown(f);
    fclose_check(f, md);
    f = fopen_check(md, "r");
    char line[1024];
    int rows = 0, listed = 0;
    while (fgets(line, sizeof(line), f)) {
        rows++;
        for (int i = 0; i < FLAG_COUNT; i++) {
            char cell[64];
            snprintf(cell, sizeof(cell), "`%s`", FLAG_SPECS[i].long_name);
            listed += strstr(line, cell) != NULL;
        }
    }
    fclose_check(f, md);
    check(rows == FLAG_COUNT + 3 && listed == FLAG_COUNT,
          "flags --help-markdown: header + %d flag rows + --help, every long name listed once", FLAG_COUNT);
}

/* ----------------------------------------------------------------------------
 * sampler */
static void child_sample_nan(void* ctx) {
    (void)ctx;
    Rng r;
    rng_seed(&r, 5);
    float logits[4] = {1.0f, NAN, 2.0f, 0.5f}; /* a NaN below the max: every cumulative sum would be NaN */
    sample_token(logits, 4, 1.0f, 0, &r);
}

static void test_sampler(void) {
    Rng r;
    rng_seed(&r, 5);
    float logits[6] = {0.5f, 2.0f, -1.0f, 1.0f, 2.0f, 0.0f};
    int ok = sample_token(logits, 6, 0.0f, 0, &r) == 1 && sample_token(logits, 3, 0.0f, 0, &r) == 1 &&
             sample_token(logits, 1, 1.0f, 0, &r) == 0;
    for (int i = 0; i < 100; i++) ok &= sample_token(logits, 6, 1.0f, 1, &r) == 1;
    check(ok, "sample_token: temperature 0 and top_k=1 give the argmax (lowest index among ties); V=1 gives 0");
    /* empirical frequencies against softmax(l/T) computed here */
    const int draws = 200000;
    float temps[2] = {1.0f, 0.5f};
    for (int t = 0; t < 2; t++) {
        for (int top_k = 0; top_k <= 3; top_k += 3) {
            int counts[6] = {0};
            for (int i = 0; i < draws; i++) counts[sample_token(logits, 6, temps[t], top_k, &r)]++;
            /* top 3: logits 2.0 (idx 1), 2.0 (idx 4), 1.0 (idx 3) */
            double p[6], z = 0;
            for (int i = 0; i < 6; i++) {
                int kept = top_k == 0 || i == 1 || i == 4 || i == 3;
                p[i] = kept ? exp(logits[i] / temps[t]) : 0;
                z += p[i];
            }
            double worst = 0;
            int outside = 0;
            for (int i = 0; i < 6; i++) {
                p[i] /= z;
                double sd = sqrt(p[i] * (1 - p[i]) / draws) + 1e-12;
                double dev = fabs((double)counts[i] / draws - p[i]) / sd;
                if (p[i] == 0) outside += counts[i];
                else if (dev > worst) worst = dev;
            }
            check(worst < 5 && outside == 0,
                  "sample_token T=%.1f top_k=%d: frequencies of 2e5 draws vs softmax, worst deviation %.2f sigma, %d outside top-k",
                  temps[t], top_k, worst, outside);
        }
    }
    /* ties at the k-th value: exactly k kept, lower index first */
    float tied[5] = {1.0f, 3.0f, 1.0f, 1.0f, 0.0f};
    int seen[5] = {0};
    for (int i = 0; i < 20000; i++) seen[sample_token(tied, 5, 1.0f, 2, &r)]++;
    check(seen[1] > 0 && seen[0] > 0 && seen[2] == 0 && seen[3] == 0 && seen[4] == 0,
          "sample_token top_k=2 with ties at the 2nd value: keeps index 1 and the first tie (index 0) only");
    float masked[3] = {0.0f, -INFINITY, 1.0f}; /* -inf: probability 0, never drawn, not an error */
    int drawn_masked = 0;
    for (int i = 0; i < 2000; i++) drawn_masked += sample_token(masked, 3, 1.0f, 0, &r) == 1 || sample_token(masked, 3, 1.0f, 2, &r) == 1;
    check(drawn_masked == 0, "sample_token: a -inf logit is never drawn (top_k 0 and 2), %d times drawn", drawn_masked);
    expect_failure("sample_token with a NaN logit below the max", child_sample_nan, NULL, 1, "logit 1 of 4 is nan");
}

/* ----------------------------------------------------------------------------
 * logger */
static void test_logger(void) {
    char dir[512], path[600];
    tmp_path(dir, sizeof(dir), "logs");
    make_dir_check(dir);
    Logger L;
    logger_init(&L, dir, 0);
    logger_step(&L, 1, 10.5f, 3e-4f, 1.25f, 12.0f, 1000.0f);
    logger_val(&L, 1, 9.75f);
    logger_free(&L);
    logger_init(&L, dir, 1);
    logger_step(&L, 2, NAN, 3e-4f, INFINITY, 11.0f, 1100.0f);
    logger_free(&L);
    Logger none;
    logger_init(&none, NULL, 0);
    logger_step(&none, 1, 1, 1, 1, 1, 1);
    logger_free(&none);
    snprintf(path, sizeof(path), "%s/metrics.jsonl", dir);
    FILE* f = fopen_check(path, "r");
    char lines[3][256];
    int n = 0;
    while (n < 3 && fgets(lines[n], sizeof(lines[n]), f)) n++;
    int extra = fgetc(f) != EOF;
    fclose_check(f, path);
    int step;
    float loss, lr, norm, ms, toks, val;
    int ok = n == 3 && !extra &&
             sscanf(lines[0], "{\"step\":%d,\"loss\":%f,\"lr\":%f,\"norm\":%f,\"ms\":%f,\"tok_s\":%f}", &step, &loss, &lr,
                    &norm, &ms, &toks) == 6 &&
             step == 1 && loss == 10.5f && lr == 3e-4f && norm == 1.25f && ms == 12.0f && toks == 1000.0f;
    ok = ok && sscanf(lines[1], "{\"step\":%d,\"val_loss\":%f}", &step, &val) == 2 && val == 9.75f;
    ok = ok && strcmp(lines[2], "{\"step\":2,\"loss\":null,\"lr\":0.000300000014,\"norm\":null,\"ms\":11,\"tok_s\":1100}\n") == 0;
    check(ok, "logger: 3 JSON lines (step, val, appended step with NaN/inf as null), values read back exactly");
    logger_init(&L, dir, 0);
    logger_free(&L);
    f = fopen_check(path, "r");
    int empty = fgetc(f) == EOF;
    fclose_check(f, path);
    check(empty, "logger: a fresh (non-resume) run truncates metrics.jsonl");
    /* a close that fails (here the flush of a buffered record to /dev/full: ENOSPC) is reported, not fatal: logger_free
     * returns -1 and the trainer keeps its exit status (train_log_close); a good close returns 0 */
    logger_init(&L, dir, 1);
    int good = logger_free(&L);
    Logger full;
    logger_init(&full, NULL, 0);
    snprintf(full.path, sizeof(full.path), "/dev/full");
    full.f = fopen("/dev/full", "w");
    if (!full.f) {
        printf("skip: logger close failure: /dev/full: %s\n", strerror(errno));
        return;
    }
    fputs("{\"step\":1}\n", full.f); /* buffered: the write fails at the close */
    int failed = logger_free(&full);
    check(good == 0 && failed == -1 && full.f == NULL, "logger: a failed close of metrics.jsonl returns -1 (printed, not fatal), a good one 0");
}

int main(void) {
    snprintf(tmp_dir, sizeof(tmp_dir), "/tmp/test_infra_XXXXXX");
    if (!mkdtemp(tmp_dir)) fatalf("mkdtemp: %s", strerror(errno));
    test_crc_reference();
    test_schedule();
    test_rng();
    test_dataloader_epochs();
    test_dataloader_shard_order();
    test_dataloader_resume();
    test_dataloader_mock();
    test_dataloader_errors();
    test_dataloader_try();
    test_dataloader_llmc();
    test_dataloader_rewindow();
    test_dataloader_llmc_errors();
    test_dataloader_short_and_fingerprint();
    test_model_file();
    test_state_file();
    test_checkpoint_dir();
    test_flags();
    test_cli();
    test_sampler();
    test_logger();
    char cmd[512];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmp_dir);
    if (system(cmd) != 0) fprintf(stderr, "warning: could not remove %s\n", tmp_dir);
    printf("%d passed, %d failed\n", passed, failed);
    return failed ? 1 : 0;
}
