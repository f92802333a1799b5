/*
 * llmc/zero.h — ZeRO-1 sharding of the optimizer state, and reading it back with any number of ranks.
 *
 * Shards: the n parameters in flat model-file order (doc/formats.md) are cut into `world` ranges of
 * S = ceil(n / world) elements; rank r owns [r·S, min((r+1)·S, n)). Every rank allocates S elements
 * of each optimizer array, so the last shard is padded (never "n must divide by world"); a rank
 * whose range starts past n owns nothing (count 0) but still takes part in every collective.
 * Optimizer bytes per rank are therefore S × (bytes per element), falling as 1/world.
 *
 * Checkpoints: rank r's state file (llmc/checkpoint.h) holds AdamW m and v of its range, with
 * shard_offset/shard_count in the header. A run of any world size reads, for its own range, the
 * slices of the saved shards that overlap it and no other payload byte (zero_read_optimizer), after
 * checking from the headers that the saved shards tile [0, n) exactly once. With ZeRO off every rank holds the whole state
 * but writes only its range, so checkpoints look the same for ZeRO 0 and 1.
 * No global state.
 */
#ifndef LLMC_ZERO_H
#define LLMC_ZERO_H

#include <stddef.h>
#include "llmc/checkpoint.h"

typedef struct {
    size_t offset; /* first owned parameter */
    size_t count;  /* owned parameters: S, fewer for the last rank, 0 past the end */
    size_t size;   /* S = ceil(n / world): elements allocated per rank */
} Shard;

static inline Shard zero_shard(size_t n, int world, int rank) {
    Shard s;
    s.size = (n + (size_t)world - 1) / (size_t)world;
    s.offset = s.size * (size_t)rank;
    if (s.offset > n) s.offset = n;
    s.count = s.offset + s.size <= n ? s.size : n - s.offset;
    return s;
}

/* m and v (count floats each) of the parameters [offset, offset + count) from checkpoint `step` of
 * dir, which `saved_world` ranks wrote. Reads every saved rank's header and, of the shards that overlap
 * the range, those slices (state_file_read_range: checked finite; the payload CRCs are the resume's
 * verification's, llmc/train_setup.h); *first gets saved rank 0's state (step, data position,
 * settings). Exits naming the file if the saved shards do not tile the n parameters exactly once in
 * rank order. */
static inline void zero_read_optimizer(const char* dir, int step, int saved_world, size_t n, size_t offset, size_t count,
                                       float* m, float* v, TrainState* first) {
    size_t expected_offset = 0;
    for (int r = 0; r < saved_world; r++) {
        char model_path[4200], state_path[4200], done_path[4200];
        checkpoint_paths(model_path, state_path, done_path, sizeof(model_path), dir, step, r);
        TrainState st;
        int32_t h[HEADER_WORDS];
        FILE* f = state_file_open(state_path, &st, h);
        if (st.rank != r || st.world != saved_world || st.step != step)
            fatalf("%s: state file says rank %d of %d at step %d, expected rank %d of %d at step %d", state_path, st.rank, st.world,
                   st.step, r, saved_world, step);
        if (st.num_params != n) fatalf("%s: optimizer state is for %zu parameters, this model has %zu", state_path, st.num_params, n);
        if (st.shard_offset != expected_offset)
            fatalf("%s: shard starts at parameter %zu, but the shards before it end at %zu", state_path, st.shard_offset,
                   expected_offset);
        expected_offset += st.shard_count;
        size_t lo = st.shard_offset > offset ? st.shard_offset : offset;
        size_t hi_saved = st.shard_offset + st.shard_count, hi_want = offset + count;
        size_t hi = hi_saved < hi_want ? hi_saved : hi_want;
        if (lo < hi) state_file_read_range(f, state_path, &st, lo, hi, m + (lo - offset), v + (lo - offset));
        fclose_check(f, state_path);
        if (r == 0) *first = st;
    }
    if (expected_offset != n)
        fatalf("%s: the %d state files of step %d cover %zu of the %zu parameters", dir, saved_world, step, expected_offset, n);
}

#endif /* LLMC_ZERO_H */
