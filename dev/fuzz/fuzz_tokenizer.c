/* Fuzz harness: llmc/tokenizer.h tokenizer_load on arbitrary bytes (byte 0: repairs, fuzz_common.h);
 * a tokenizer that loads must then encode a fixed text and decode it back to the same bytes. */
#include "dev/fuzz/fuzz_common.h"
#include "llmc/tokenizer.h"

int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    uint8_t* buf = (uint8_t*)malloc(size + 1);
    const char* path = fuzz_file(buf, fuzz_repair(data, size, buf, crc32_update));
    FUZZ_RUN({
        Tokenizer t;
        tokenizer_load(&t, path);
        static const char text[] = "Hello world, it's 2024!\n\tcaf\xc3\xa9 \xe2\x80\x94 ok";
        int* ids;
        size_t n = tokenizer_encode(&t, (const unsigned char*)text, sizeof(text) - 1, &ids);
        size_t pos = 0;
        for (size_t i = 0; i < n; i++) {
            if (ids[i] < 0 || ids[i] >= t.vocab_size) abort();
            size_t len;
            const unsigned char* bytes = tokenizer_token_bytes(&t, ids[i], &len);
            if (pos + len > sizeof(text) - 1 || memcmp(bytes, text + pos, len) != 0) abort();
            pos += len;
        }
        if (pos != sizeof(text) - 1) abort();
        free(ids);
        tokenizer_free(&t);
    });
    free(buf);
    return 0;
}
