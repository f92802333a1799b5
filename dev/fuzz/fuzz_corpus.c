/* Fuzz harness: prepare_data.c's corpus readers on arbitrary bytes: the JSON-lines field
 * extractor (json_line_field, each line, field "text") and the chunk cutter (find_cut, for JSON
 * lines and for text with and without a separator line, with the file read to its end or not), which
 * must return a cut at or after where it was asked to start, and none when asked to start past the
 * bytes read (prepare_data asks a chunk's length ahead, which may lie beyond them). prepare_data.c is
 * included with its main renamed, so its static functions are reachable. */
#include <omp.h>
#include "dev/fuzz/fuzz_common.h"
#define main prepare_data_main
#include "prepare_data.c"
#undef main

int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    FUZZ_RUN({
        unsigned char* out = (unsigned char*)malloc(size + 1);
        for (size_t i = 0, next; i < size; i = next) {
            size_t end = line_end(data, size, i, &next);
            size_t len = 0;
            const char* err = json_line_field(data + i, end - i, "text", out, &len);
            if (!err && len > end - i) abort();
            if (next <= i) abort();
        }
        for (int mode = 0; mode < 6; mode++) { /* JSON lines, text with a separator line, text; read to the end or not */
            int jsonl = mode / 2 == 0, eof = mode % 2;
            const char* sep = mode / 2 == 1 ? "---" : NULL;
            size_t from = 0;
            int starts_document;
            for (int cuts = 0; cuts < 10000; cuts++) {
                size_t cut = find_cut(data, size, eof, from, jsonl, sep, &starts_document);
                if (cut == 0) break;
                if (cut < from || cut > size) abort();
                from = cut + 1 + (size_t)(cuts % 3) * 7; /* sometimes ahead, as prepare_data asks, to past the end */
            }
            if (find_cut(data, size, eof, size + 1 + (size % 64), jsonl, sep, &starts_document) != 0) abort();
        }
        free(out);
    });
    return 0;
}
