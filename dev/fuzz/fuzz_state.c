/* Fuzz harness: llmc/checkpoint.h state_file_read on arbitrary bytes (byte 0: repairs, see fuzz_common.h). */
#include "dev/fuzz/fuzz_common.h"
#include "llmc/checkpoint.h"

int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    uint8_t* buf = (uint8_t*)malloc(size + 1);
    const char* path = fuzz_file(buf, fuzz_repair(data, size, buf, crc32_update));
    FUZZ_RUN({
        TrainState st;
        float *m, *v, *master;
        state_file_read(path, &st, &m, &v, &master);
        free(m);
        free(v);
        free(master);
    });
    free(buf);
    return 0;
}
