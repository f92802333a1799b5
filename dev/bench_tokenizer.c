/*
 * bench_tokenizer — single-core encoding throughput of llmc/tokenizer.h.
 *   dev/bench_tokenizer FILE [REPEATS] [TOKENIZER]
 * Prints the best-of-REPEATS MB/s of tokenizer_encode over FILE's bytes (load time excluded).
 * The tiktoken baseline is measured in the same run by dev/bench_tokenizer.sh.
 */
#include <time.h>

#include "llmc/tokenizer.h"

static double now_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + 1e-9 * ts.tv_nsec;
}

int main(int argc, char** argv) {
    if (argc < 2) fatalf("usage: bench_tokenizer FILE [REPEATS] [TOKENIZER]");
    int repeats = argc > 2 ? atoi(argv[2]) : 5;
    Tokenizer t;
    double t0 = now_seconds();
    tokenizer_load(&t, argc > 3 ? argv[3] : "data/gpt2_tokenizer.bin");
    double load = now_seconds() - t0;
    FILE* f = fopen_check(argv[1], "rb");
    size_t n;
    unsigned char* text = tokenizer_read_all(f, argv[1], &n);
    fclose_check(f, argv[1]);
    double best = 1e30;
    size_t count = 0;
    for (int r = 0; r < repeats; r++) {
        int* ids;
        double start = now_seconds();
        count = tokenizer_encode(&t, text, n, &ids);
        double dt = now_seconds() - start;
        if (dt < best) best = dt;
        free(ids);
    }
    printf("llmc tokenizer: %zu bytes -> %zu tokens, best of %d: %.3f s, %.1f MB/s (tokenizer load %.1f ms)\n", n,
           count, repeats, best, n / best / 1e6, load * 1e3);
    free(text);
    tokenizer_free(&t);
    return 0;
}
