/*
A small deterministic random number generator (xorshift64*), its state one uint64, so a
checkpoint can store it and a resumed run continues the same stream. Used for random
initialization (-e dN), sampling and data shuffling. Not PyTorch's generator: the tests load
the reference model from a file instead of re-creating PyTorch's draws.
*/
#ifndef LLMC_RAND_H
#define LLMC_RAND_H

#include <stdint.h>
#include <math.h>

typedef struct { uint64_t state; } Rng;

static inline void rng_init(Rng* rng, uint64_t seed) {
    // splitmix64 scrambles the seed, so seeds 1, 2, 3 give unrelated streams (and 0 is allowed)
    uint64_t z = seed + 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    rng->state = z ? z : 1; // xorshift must never hold 0
}

static inline uint32_t rng_u32(Rng* rng) {
    uint64_t x = rng->state;
    x ^= x >> 12; x ^= x << 25; x ^= x >> 27;
    rng->state = x;
    return (uint32_t)((x * 0x2545F4914F6CDD1Dull) >> 32);
}

// uniform in [0, 1), 24 random bits (what a float holds exactly)
static inline float rng_uniform(Rng* rng) { return (rng_u32(rng) >> 8) / 16777216.0f; }

// normal(mean, std) by Box-Muller; one draw per call keeps the stream easy to reason about
static inline float rng_normal(Rng* rng, float mean, float std) {
    float u1 = 1.0f - rng_uniform(rng); // (0, 1]: log(0) must not happen
    float u2 = rng_uniform(rng);
    return mean + std * sqrtf(-2.0f * logf(u1)) * cosf(6.28318530717958647692f * u2);
}

// uniform integer in [0, n), for shuffles (n far below 2^32, so the modulo bias is negligible)
static inline uint32_t rng_below(Rng* rng, uint32_t n) { return rng_u32(rng) % n; }

// Index drawn from probabilities probs[0..n) with the uniform number coin in [0, 1).
static inline int sample_index(const float* probs, int n, float coin) {
    float cdf = 0.0f;
    for (int i = 0; i < n; i++) {
        cdf += probs[i];
        if (coin < cdf) { return i; }
    }
    return n - 1; // rounding left the sum just under 1
}

#endif // LLMC_RAND_H
