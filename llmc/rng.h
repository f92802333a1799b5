/*
 * llmc/rng.h — the project's random number generator.
 *
 * xoshiro256** (Blackman & Vigna, 2018): 256 bits of state, period 2^256 − 1, passes
 * BigCrush. The whole state is the four words of Rng, so saving those 32 bytes in a
 * checkpoint and restoring them continues the stream exactly. Seeding expands one
 * 64-bit seed into the four words with splitmix64 (as its authors recommend), so
 * nearby seeds give unrelated streams and the state is never all zero.
 *
 * Nothing here caches values between calls (rng_normal draws a fresh pair each time),
 * so the state is only s[4]. No global state; each caller owns its Rng.
 * Valid C11 and C++ (nvcc/g++ include it too).
 */
#ifndef LLMC_RNG_H
#define LLMC_RNG_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include "llmc/fileio.h"

typedef struct {
    uint64_t s[4];
} Rng;

/* splitmix64: advances *x by the golden-ratio increment and returns a mixed copy of it.
 * Also usable as a stateless 64-bit hash: rng_splitmix64 of (a counter) is well mixed. */
static inline uint64_t rng_splitmix64(uint64_t* x) {
    uint64_t z = (*x += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* the run's Rng (sampling during training, sample_gpt) is seeded with --seed XOR this, so that it
 * differs from the streams seeded with --seed itself */
#define RNG_RUN_SALT 0x5A4D504C45ULL

static inline void rng_seed(Rng* r, uint64_t seed) {
    uint64_t x = seed;
    for (int i = 0; i < 4; i++) r->s[i] = rng_splitmix64(&x);
}

static inline uint64_t rng_rotl_(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

/* xoshiro256**: output = rotl(s1·5, 7)·9, then the linear state transition */
static inline uint64_t rng_u64(Rng* r) {
    uint64_t* s = r->s;
    uint64_t out = rng_rotl_(s[1] * 5, 7) * 9;
    uint64_t t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rng_rotl_(s[3], 45);
    return out;
}

/* uniform in [0,1): the top 24 bits of one draw, times 2^-24 (every value exact in float) */
static inline float rng_uniform(Rng* r) { return (float)(rng_u64(r) >> 40) * (1.0f / 16777216.0f); }

/* Box–Muller from two draws: u1 in (0,1] (53 bits, never 0 so the log is finite), u2 in [0,1).
 * Returns sqrt(−2 ln u1)·cos(2π u2) and drops the sine partner (the caller-visible state
 * stays s[4]; rng_fill_normal uses both halves inside one call). */
static inline void rng_normal_pair_(Rng* r, double* z0, double* z1) {
    double u1 = (double)((rng_u64(r) >> 11) + 1) * (1.0 / 9007199254740992.0);
    double u2 = (double)(rng_u64(r) >> 11) * (1.0 / 9007199254740992.0);
    double radius = sqrt(-2.0 * log(u1));
    double angle = 6.283185307179586476925 * u2;
    *z0 = radius * cos(angle);
    *z1 = radius * sin(angle);
}
static inline float rng_normal(Rng* r) {
    double z0, z1;
    rng_normal_pair_(r, &z0, &z1);
    return (float)z0;
}

/* out[i] = mean + std·N(0,1), i < n. Pairs of outputs share one Box–Muller draw (cosine then
 * sine); an odd last element uses the cosine of a fresh pair. Sequential: one Rng, one stream. */
static inline void rng_fill_normal(Rng* r, float* out, size_t n, float mean, float std) {
    size_t i = 0;
    for (; i + 1 < n; i += 2) {
        double z0, z1;
        rng_normal_pair_(r, &z0, &z1);
        out[i] = (float)(mean + std * z0);
        out[i + 1] = (float)(mean + std * z1);
    }
    if (i < n) out[i] = mean + std * rng_normal(r);
}

/* Unbiased integer in [0, n), n > 0. Draws x until x ≥ (2^64 mod n): the remaining range
 * [2^64 mod n, 2^64) holds a whole multiple of n values, so x mod n is exactly uniform.
 * The rejection probability is below n/2^64. */
static inline uint64_t rng_below(Rng* r, uint64_t n) {
    if (n == 0) fatalf("rng_below: empty range [0, 0)");
    uint64_t threshold = (0 - n) % n; /* = 2^64 mod n */
    uint64_t x;
    do x = rng_u64(r);
    while (x < threshold);
    return x % n;
}

/* Fisher–Yates: for i = n−1 … 1, swap a[i] with a[j], j uniform in [0, i] */
static inline void rng_shuffle_u32(Rng* r, uint32_t* a, size_t n) {
    for (size_t i = n; i > 1; i--) {
        size_t j = (size_t)rng_below(r, (uint64_t)i);
        uint32_t t = a[i - 1];
        a[i - 1] = a[j];
        a[j] = t;
    }
}

#endif
