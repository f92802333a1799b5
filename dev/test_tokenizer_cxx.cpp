// test_tokenizer_cxx — llmc/tokenizer.h compiles as C++ (the GPU trainer includes it) and works there.
// Ends with "N passed, M failed".
#include "llmc/tokenizer.h"

int main() {
    Tokenizer t;
    tokenizer_load(&t, "data/gpt2_tokenizer.bin");
    const char* text = "Hello world";
    int* ids;
    size_t n = tokenizer_encode(&t, (const unsigned char*)text, strlen(text), &ids);
    int ok = n == 2 && ids[0] == 15496 && ids[1] == 995; // tiktoken gpt2: "Hello" 15496, " world" 995
    printf("%s: C++ build: encode(\"Hello world\") = [%d, %d] (%zu tokens), expected [15496, 995]\n", ok ? "PASS" : "FAIL",
           n > 0 ? ids[0] : -1, n > 1 ? ids[1] : -1, n);
    free(ids);
    tokenizer_free(&t);
    printf("%d passed, %d failed\n", ok, !ok);
    return ok ? 0 : 1;
}
