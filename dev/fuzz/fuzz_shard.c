/* Fuzz harness: the token-shard reader of llmc/dataloader.h (header checks at init, payload, CRC
 * and token checks at load; GTOK and llm.c's format) on arbitrary bytes: init, then batches through two epochs' worth of
 * positions, shuffled. Byte 0: repairs (fuzz_common.h). */
#include "dev/fuzz/fuzz_common.h"
#include "llmc/dataloader.h"

int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    uint8_t* buf = (uint8_t*)malloc(size + 1);
    const char* path = fuzz_file(buf, fuzz_repair(data, size, buf, crc32_update));
    FUZZ_RUN({
        DataLoader dl;
        dataloader_init(&dl, path, 2, 4, 0, 1, 1, 1234);
        dataloader_limit_tokens(&dl, 50257);
        int limit = dl.vocab_size > 0 ? dl.vocab_size : dl.token_limit; /* an llm.c shard states no vocab */
        size_t batches = dataloader_batches_per_epoch(&dl);
        for (size_t i = 0; i < 2 * batches && i < 64; i++) {
            dataloader_next(&dl);
            for (int j = 0; j < 8; j++)
                if (dl.inputs[j] < 0 || dl.inputs[j] >= limit || dl.targets[j] < 0 || dl.targets[j] >= limit) abort();
        }
        dataloader_free(&dl);
    });
    free(buf);
    return 0;
}
