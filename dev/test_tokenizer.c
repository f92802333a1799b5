/*
 * test_tokenizer — properties of llmc/tokenizer.h that need no outside reference:
 *  1. round trip: decode(encode(x)) == x for random byte strings (uniform bytes, and strings built
 *     from tricky atoms: contractions, spaces, tabs, newlines, multi-byte and invalid UTF-8);
 *  2. the heap merge (large pieces) equals the linear-scan merge (tiktoken's algorithm) on the
 *     same pieces, run both ways on random pieces of 2..1500 bytes;
 *  3. cutting a text where tokenizer_can_cut holds and encoding the parts gives the tokens of the whole;
 *  4. the tokenizer file's byte tokens and merges are consistent (each byte decodes to itself);
 *  5. a piece over TOKENIZER_MAX_PIECE_BYTES is refused: tokenizer_encode_append returns its offset,
 *     with the tokens before it appended;
 *  6. tokenizer_invalid_utf8 (8 bytes at a time where ASCII) counts the bytes tokenizer_char_class takes
 *     one at a time as invalid, on known sequences and on random text.
 * Exactness against tiktoken is dev/test_tokenizer_exact.py.
 */
#include "llmc/tokenizer.h"

static int passed = 0, failed = 0;

static void check(int ok, const char* what) {
    printf("%s: %s\n", ok ? "PASS" : "FAIL", what);
    if (ok) passed++;
    else failed++;
}

/* xorshift64*: the tests' deterministic random numbers */
static uint64_t rng_next(uint64_t* s) {
    *s ^= *s >> 12;
    *s ^= *s << 25;
    *s ^= *s >> 27;
    return *s * 0x2545F4914F6CDD1Dull;
}

static const char* ATOMS[] = {
    " ", "  ", "\t", "\n", "\r\n", "'s", "'S", "'ll", "'LL", "'re", "'ve", "'d", "'m", "'t", "'x", "''",
    "a", "Z", "hello", " world", "123", "4", " 56", "x1y2", "!", "?!", " ...", "\xc3\xa9", "\xe6\x97\xa5\xe6\x9c\xac",
    "\xd8\xb9\xd8\xb1\xd8\xa8", "\xf0\x9f\x98\x80", "\xcc\x81", "\xc2\xa0", "\xe3\x80\x80", "\xc2\x85", "\xe2\x80\xa8",
    "\x80", "\xff", "\xc3", "\xe2\x82", "\xf0\x9f\x98", "\xed\xa0\x80", "\xc0\xaf", "\xf4\x90\x80\x80", "\x00", "\x1f",
};

static size_t random_text(uint64_t* rng, unsigned char* buf, size_t max, int uniform) {
    size_t len = rng_next(rng) % max, n = 0;
    if (uniform) {
        for (; n < len; n++) buf[n] = (unsigned char)rng_next(rng);
        return n;
    }
    size_t num_atoms = sizeof(ATOMS) / sizeof(ATOMS[0]);
    while (n < len) {
        const char* a = ATOMS[rng_next(rng) % num_atoms];
        size_t m = strlen(a);
        if (m == 0) m = 1; /* the "\x00" atom */
        if (n + m > max) break;
        memcpy(buf + n, a, m);
        n += m;
    }
    return n;
}

static int round_trips(const Tokenizer* t, const unsigned char* s, size_t n, unsigned char* out) {
    int* ids;
    size_t count = tokenizer_encode(t, s, n, &ids), m = 0;
    int ok = 1;
    for (size_t i = 0; i < count && ok; i++) {
        size_t len;
        const unsigned char* b = tokenizer_token_bytes(t, ids[i], &len);
        if (ids[i] < 0 || ids[i] >= t->vocab_size || m + len > n) ok = 0;
        else {
            memcpy(out + m, b, len);
            m += len;
        }
    }
    free(ids);
    return ok && m == n && memcmp(out, s, n) == 0;
}

int main(int argc, char** argv) {
    Tokenizer t;
    tokenizer_load(&t, argc > 1 ? argv[1] : "data/gpt2_tokenizer.bin");
    uint64_t rng = 0x853C49E6748FEA9Bull;
    enum { MAX = 4096 };
    unsigned char* buf = (unsigned char*)malloc_check(MAX);
    unsigned char* out = (unsigned char*)malloc_check(MAX);

    /* 1. round trip */
    for (int uniform = 0; uniform < 2; uniform++) {
        int cases = 20000, bad = 0;
        size_t bytes = 0;
        for (int c = 0; c < cases; c++) {
            size_t n = random_text(&rng, buf, uniform ? 300 : MAX, uniform);
            bytes += n;
            if (!round_trips(&t, buf, n, out)) bad++;
        }
        char what[160];
        snprintf(what, sizeof(what), "round trip of %d %s strings (%zu bytes): %d differ", cases,
                 uniform ? "uniform random byte" : "tricky-atom", bytes, bad);
        check(bad == 0, what);
    }
    /* long runs of one byte: 10^5 spaces (heap path) */
    {
        size_t n = 100000;
        unsigned char* spaces = (unsigned char*)malloc_check(n);
        unsigned char* back = (unsigned char*)malloc_check(n);
        memset(spaces, ' ', n);
        check(round_trips(&t, spaces, n, back), "round trip of 100000 spaces (one piece, heap merge)");
        free(spaces);
        free(back);
    }

    /* 2. heap merge == linear merge */
    {
        BpeScratch w1, w2;
        memset(&w1, 0, sizeof(w1));
        memset(&w2, 0, sizeof(w2));
        int cases = 300, bad = 0;
        size_t worst_len = 0;
        for (int c = 0; c < cases; c++) {
            size_t n = 2 + rng_next(&rng) % 1500;
            const char* alphabet = c % 3 == 0 ? " " : c % 3 == 1 ? "abcdefghijklmnopqrstuvwxyz" : "aeiou tnsrl";
            size_t k = strlen(alphabet);
            bpe_scratch_reserve(&w1, n);
            bpe_scratch_reserve(&w2, n);
            for (size_t i = 0; i < n; i++) w1.tok[i] = w2.tok[i] = t.byte_token[(unsigned char)alphabet[rng_next(&rng) % k]];
            size_t m1 = bpe_merge(&t, &w1, n, (size_t)-1), m2 = bpe_merge(&t, &w2, n, 0);
            if (m1 != m2 || memcmp(w1.tok, w2.tok, m1 * sizeof(int32_t)) != 0) {
                bad++;
                if (n > worst_len) worst_len = n;
            }
        }
        char what[160];
        snprintf(what, sizeof(what), "heap merge equals linear-scan merge on %d pieces of 2..1501 bytes: %d differ (longest %zu)",
                 cases, bad, worst_len);
        check(bad == 0, what);
        free(w1.tok);
        free(w1.heap);
        free(w2.tok);
        free(w2.heap);
    }

    /* 3. cut points */
    {
        int texts = 600, cuts = 0, non_ascii = 0, in_line = 0, bad = 0;
        for (int c = 0; c < texts; c++) {
            size_t n = random_text(&rng, buf, 1024, 0);
            int* whole;
            size_t count = tokenizer_encode(&t, buf, n, &whole);
            for (size_t p = 0; p < n; p++) {
                if (!tokenizer_can_cut(buf, n, p)) continue;
                int *a, *b;
                size_t ca = tokenizer_encode(&t, buf, p, &a), cb = tokenizer_encode(&t, buf + p, n - p, &b);
                cuts++;
                non_ascii += buf[p - 2] >= 0x80 || buf[p] >= 0x80;
                in_line += buf[p - 1] != '\n';
                if (ca + cb != count || memcmp(a, whole, ca * sizeof(int)) != 0 || memcmp(b, whole + ca, cb * sizeof(int)) != 0)
                    bad++;
                free(a);
                free(b);
            }
            free(whole);
        }
        char what[160];
        snprintf(what, sizeof(what),
                 "encode(prefix) + encode(suffix) == encode(text) at %d cut points (%d beside a byte >= 0x80, %d not after a newline): %d differ",
                 cuts, non_ascii, in_line, bad);
        check(bad == 0 && cuts > 100 && non_ascii > 100 && in_line > 100, what);
    }

    /* 4. byte tokens */
    {
        int bad = 0;
        for (int b = 0; b < 256; b++) {
            size_t len;
            const unsigned char* s = tokenizer_token_bytes(&t, t.byte_token[b], &len);
            if (len != 1 || s[0] != b) bad++;
        }
        size_t len;
        const unsigned char* eot = tokenizer_token_bytes(&t, t.eot_token, &len);
        check(bad == 0 && t.vocab_size == 50257 && t.eot_token == 50256 && len == 13 && memcmp(eot, "<|endoftext|>", 13) == 0,
              "256 byte tokens decode to their byte; vocab 50257; <|endoftext|> is 50256");
    }
    /* 5. the longest piece: "ab" then " " + 16 MiB + 1 of 'x' (one piece, the space prefixing the letters) */
    {
        size_t n = 3 + TOKENIZER_MAX_PIECE_BYTES;
        unsigned char* text = (unsigned char*)malloc_check(n);
        memcpy(text, "ab ", 3);
        memset(text + 3, 'x', n - 3);
        TokenizerOutput o;
        memset(&o, 0, sizeof(o));
        size_t at = tokenizer_encode_append(&t, text, n, &o);
        size_t piece = tokenizer_next_piece(text, n, at) - at;
        char what[200];
        snprintf(what, sizeof(what), "a piece of %zu bytes (limit %zu) is refused at offset %zu (want 2), %zu tokens before it (want 1: \"ab\")",
                 piece, TOKENIZER_MAX_PIECE_BYTES, at, o.count);
        check(at == 2 && piece == TOKENIZER_MAX_PIECE_BYTES + 1 && o.count == 1 && o.ids[0] == tokenizer_lookup_piece(&t, text, 2), what);
        tokenizer_output_free(&o);
        free(text);
    }

    /* 6. invalid UTF-8 counts */
    {
        static const struct { const char* s; size_t n, count, first; } known[] = {
            {"caf\xe9 na\xefve", 10, 2, 3},         /* Latin-1 */
            {"\xf0\x9f\x98\x80 ok \xc3\xa9", 10, 0, 10}, /* valid: none (first = n) */
            {"abcdefgh\xe2\x82", 10, 2, 8},          /* a truncated sequence after 8 ASCII bytes */
            {"\xed\xa0\x80", 3, 3, 0},                /* a surrogate */
            {"12345678\xc0\xaf", 10, 2, 8},          /* overlong */
            {"\xf4\x90\x80\x80", 4, 4, 0},           /* above U+10FFFF */
        };
        int bad = 0;
        for (size_t k = 0; k < sizeof(known) / sizeof(known[0]); k++) {
            size_t first, count = tokenizer_invalid_utf8((const unsigned char*)known[k].s, known[k].n, &first);
            bad += count != known[k].count || first != known[k].first;
        }
        int texts = 2000, random_bad = 0;
        size_t total = 0;
        for (int c = 0; c < texts; c++) {
            size_t n = random_text(&rng, buf, 600, c % 2), want = 0, want_first = n, len;
            for (size_t i = 0; i < n; i += len) {
                tokenizer_char_class(buf, n, i, &len);
                if (buf[i] >= 0x80 && len == 1 && want++ == 0) want_first = i;
            }
            size_t first, count = tokenizer_invalid_utf8(buf, n, &first);
            random_bad += count != want || first != want_first;
            total += want;
        }
        char what[200];
        snprintf(what, sizeof(what), "invalid UTF-8 counts: %d of 6 known sequences wrong; %d of %d random texts (%zu invalid bytes) "
                 "differ from a byte-at-a-time count", bad, random_bad, texts, total);
        check(bad == 0 && random_bad == 0 && total > 1000, what);
    }
    free(buf);
    free(out);
    tokenizer_free(&t);
    printf("%d passed, %d failed\n", passed, failed);
    return failed != 0;
}
