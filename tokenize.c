/*
 * tokenize — check any text through the GPT-2 tokenizer (llmc/tokenizer.h).
 *   ./tokenize --ids FILE   prints the token ids of FILE's bytes ('-' = stdin), space-separated
 *   ./tokenize --text       reads whitespace-separated ids on stdin, writes their bytes to stdout
 *   --tokenizer PATH        GBPE file (default data/gpt2_tokenizer.bin)
 * No special-token parsing: "<|endoftext|>" in the text is ordinary text; id 50256 decodes to it.
 * A pre-token piece over 16 MiB (TOKENIZER_MAX_PIECE_BYTES) is an error naming its byte offset, as in prepare_data.
 */
#include "llmc/tokenizer.h"

/* prints the help (to stderr, then `error` as the last line, if error is non-NULL) and exits */
static void usage(const char* error, const char* arg) {
    fprintf(error ? stderr : stdout,
            "usage: tokenize --ids FILE | --text   [--tokenizer PATH]\n"
            "  --ids FILE        print the token ids of FILE's bytes ('-' reads stdin)\n"
            "  --text            read token ids from stdin, write their bytes to stdout\n"
            "  --tokenizer PATH  tokenizer file (default data/gpt2_tokenizer.bin)\n");
    if (error) fprintf(stderr, "error: %s%s\n", error, arg);
    exit(error ? 2 : 0);
}

/* writes ids as decimal, space-separated, newline-terminated */
static void print_ids(const int* ids, size_t n) {
    char buf[1 << 16];
    size_t used = 0;
    for (size_t i = 0; i < n; i++) {
        if (used > sizeof(buf) - 16) {
            fwrite_check(buf, 1, used, stdout, "stdout");
            used = 0;
        }
        char digits[12];
        int d = 0;
        unsigned v = (unsigned)ids[i];
        do digits[d++] = (char)('0' + v % 10); while ((v /= 10) != 0);
        if (i) buf[used++] = ' ';
        while (d) buf[used++] = digits[--d];
    }
    buf[used++] = '\n';
    fwrite_check(buf, 1, used, stdout, "stdout");
}

/* parses whitespace-separated ids from text and writes the bytes of each */
static void print_text(const Tokenizer* t, const unsigned char* text, size_t n) {
    size_t i = 0, index = 0;
    while (i < n) {
        while (i < n && (text[i] == ' ' || text[i] == '\n' || text[i] == '\t' || text[i] == '\r')) i++;
        if (i == n) break;
        size_t start = i;
        long long v = 0;
        while (i < n && text[i] >= '0' && text[i] <= '9' && v < (1ll << 40)) v = v * 10 + (text[i++] - '0');
        if (i == start || (i < n && text[i] != ' ' && text[i] != '\n' && text[i] != '\t' && text[i] != '\r') || v >= t->vocab_size) {
            size_t end = start;
            while (end < n && end - start < 20 && text[end] != ' ' && text[end] != '\n') end++;
            fatalf("stdin: token %zu \"%.*s\" is not a token id in [0, %d)", index, (int)(end - start),
                   (const char*)text + start, t->vocab_size);
        }
        size_t len;
        const unsigned char* bytes = tokenizer_token_bytes(t, (int)v, &len);
        fwrite_check(bytes, 1, len, stdout, "stdout");
        index++;
    }
}

int main(int argc, char** argv) {
    const char* tokenizer_path = "data/gpt2_tokenizer.bin";
    const char* ids_path = NULL;
    int text_mode = 0;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--ids") == 0 && i + 1 < argc) ids_path = argv[++i];
        else if (strcmp(argv[i], "--text") == 0) text_mode = 1;
        else if (strcmp(argv[i], "--tokenizer") == 0 && i + 1 < argc) tokenizer_path = argv[++i];
        else if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) usage(NULL, "");
        else usage("unknown or incomplete argument ", argv[i]);
    }
    if ((ids_path != NULL) == text_mode) usage("give exactly one of --ids FILE and --text", "");
    Tokenizer t;
    tokenizer_load(&t, tokenizer_path);
    const char* in_path = text_mode || strcmp(ids_path, "-") == 0 ? "stdin" : ids_path;
    FILE* f = (text_mode || strcmp(ids_path, "-") == 0) ? stdin : fopen_check(ids_path, "rb");
    size_t n;
    unsigned char* input = tokenizer_read_all(f, in_path, &n);
    if (f != stdin) fclose_check(f, in_path);
    if (text_mode) {
        print_text(&t, input, n);
    } else {
        TokenizerOutput out;
        memset(&out, 0, sizeof(out));
        size_t long_piece = tokenizer_encode_append(&t, input, n, &out);
        if (long_piece < n)
            fatalf("%s: " TOKENIZER_LONG_PIECE_FMT, in_path, tokenizer_next_piece(input, n, long_piece) - long_piece,
                   (long long)long_piece, TOKENIZER_MAX_PIECE_BYTES >> 20);
        print_ids(out.ids, out.count);
        tokenizer_output_free(&out);
    }
    fclose_check(stdout, "stdout");
    free(input);
    tokenizer_free(&t);
    return 0;
}
