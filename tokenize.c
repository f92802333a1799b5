/*
 * tokenize — check any text through the GPT-2 tokenizer (llmc/tokenizer.h).
 *   ./tokenize --ids FILE   prints the token ids of FILE's bytes ('-' = stdin), space-separated
 *   ./tokenize --text       reads whitespace-separated ids on stdin, writes their bytes to stdout
 *   --tokenizer PATH        GBPE file (default data/gpt2_tokenizer.bin)
 * No special-token parsing: "<|endoftext|>" in the text is ordinary text; id 50256 decodes to it.
 * A pre-token piece over 16 MiB (TOKENIZER_MAX_PIECE_BYTES) is an error naming its byte offset, as in prepare_data.
 */
#include "llmc/cli.h"
#include "llmc/tokenizer.h"

typedef struct {
    const char* ids;
    int text;
    const char* tokenizer;
} Options;

static const CliFlag TOKENIZE_FLAGS[] = {
    {NULL, "--ids", CLI_STR, offsetof(Options, ids), NULL, 0, 0, NULL, "print the token ids of this file's bytes ('-' reads stdin)"},
    {NULL, "--text", CLI_BOOL, offsetof(Options, text), "0", 0, 1, NULL, "read token ids from stdin, write their bytes to stdout"},
    {NULL, "--tokenizer", CLI_STR, offsetof(Options, tokenizer), "data/gpt2_tokenizer.bin", 0, 0, NULL, "tokenizer file (GBPE)"},
};

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
    const CliSpec spec = {TOKENIZE_FLAGS, (int)(sizeof(TOKENIZE_FLAGS) / sizeof(TOKENIZE_FLAGS[0])), "tokenize --ids FILE | --text   [--tokenizer PATH]", NULL, NULL};
    Options o;
    cli_parse(&spec, &o, argc, argv);
    if ((o.ids != NULL) == (o.text != 0)) usagef("give exactly one of --ids FILE and --text");
    Tokenizer t;
    tokenizer_load(&t, o.tokenizer);
    const char* in_path = o.text || strcmp(o.ids, "-") == 0 ? "stdin" : o.ids;
    FILE* f = (o.text || strcmp(o.ids, "-") == 0) ? stdin : fopen_check(o.ids, "rb");
    size_t n;
    unsigned char* input = tokenizer_read_all(f, in_path, &n);
    if (f != stdin) fclose_check(f, in_path);
    if (o.text) {
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
