/* Fuzz harness: llmc/checkpoint.h's training-state reader as a resume uses it (llmc/zero.h): state_file_open, then
 * state_file_read_range of the file's whole shard, on arbitrary bytes (byte 0: repairs, see fuzz_common.h). */
#include "dev/fuzz/fuzz_common.h"
#include "llmc/checkpoint.h"

int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    uint8_t* buf = (uint8_t*)malloc(size + 1);
    const char* path = fuzz_file(buf, fuzz_repair(data, size, buf, crc32_update));
    FUZZ_RUN({
        TrainState st;
        int32_t h[HEADER_WORDS];
        FILE* f = state_file_open(path, &st, h);
        float* m = (float*)malloc_check(st.shard_count * sizeof(float));
        float* v = (float*)malloc_check(st.shard_count * sizeof(float));
        state_file_read_range(f, path, &st, st.shard_offset, st.shard_offset + st.shard_count, m, v);
        fclose_check(f, path);
        free(m);
        free(v);
    });
    free(buf);
    return 0;
}
