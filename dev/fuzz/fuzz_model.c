/* Fuzz harness: llmc/checkpoint.h model_file_read on arbitrary bytes (byte 0: repairs, see fuzz_common.h). */
#include "dev/fuzz/fuzz_common.h"
#include "llmc/checkpoint.h"

int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    uint8_t* buf = (uint8_t*)malloc(size + 1);
    const char* path = fuzz_file(buf, fuzz_repair(data, size, buf, crc32_update));
    FUZZ_RUN({
        GPTConfig c;
        size_t n;
        float* params = model_file_read(path, &c, &n);
        free(params);
    });
    free(buf);
    return 0;
}
