/*
 * llmc/tokenizer.h — GPT-2 byte-level BPE: encoder and decoder, identical to tiktoken's "gpt2".
 *
 * Encoding is two stages.
 *  1. Pre-tokenisation splits the text into pieces, as tiktoken's gpt2 pattern
 *       '(?:[sdmt]|ll|ve|re)| ?\p{L}++| ?\p{N}++| ?[^\s\p{L}\p{N}]++|\s++$|\s+(?!\S)|\s
 *     does under leftmost-first matching, here a hand-written scanner (tokenizer_next_piece):
 *       - "'s 't 'm 'd 'll 've 're" (ASCII, case-sensitive) at the piece start;
 *       - else an optional U+0020 space, then a maximal run of letters, or of numbers, or of
 *         "other" characters (neither White_Space nor letter nor number; apostrophes included);
 *       - else a run of k white-space characters: all of it at the end of the text; k-1 of
 *         them if k >= 2 (the last one is left to prefix what follows); else the one character.
 *     Character classes: Unicode 16.0 (llmc/unicode_tables.h, the version tiktoken's regex crate uses).
 *     Invalid UTF-8: every byte that is not part of a well-formed UTF-8 sequence (Unicode Table 3-7:
 *     no overlongs, no surrogates, nothing above U+10FFFF) is one character of class "other". This is
 *     what tiktoken's pattern does to a Python str decoded with errors="surrogateescape" (each such
 *     byte becomes a lone surrogate, category Cs). Bytes are never replaced, so decode(encode(x)) == x.
 *     A piece longer than TOKENIZER_MAX_PIECE_BYTES (16 MiB: a run of one class that long, such as
 *     text without white space) is refused, not merged: merging takes ~36 bytes of scratch per byte of
 *     the piece (~0.6 GB at the limit), and no text has one (tiktoken's own merge is quadratic in it).
 *     tokenizer_encode_append returns where such a piece starts; tokenizer_encode exits naming it.
 *  2. Byte-pair merging of each piece: a piece that is itself a token is that token; otherwise the
 *     piece starts as its bytes' tokens and, while some adjacent pair (a, b) concatenates to a
 *     mergeable token, the pair of lowest rank (the leftmost if tied) is replaced by that token.
 *     This is tiktoken's rule: a pair merges if its bytes form a token, whichever merge made it.
 *     A token's rank is the index of the merge that produces it (its id minus 256 for GPT-2).
 *
 * The tokenizer file is GBPE (doc/formats.md). tokenizer_encode does no special-token parsing: the
 * text "<|endoftext|>" is encoded as ordinary text; callers insert t->eot_token themselves.
 * Thread safety: a loaded Tokenizer is read-only; tokenizer_encode may run concurrently on it.
 * Valid C11 and C++ (compiled by gcc, g++ and nvcc). No global mutable state.
 */
#ifndef LLMC_TOKENIZER_H
#define LLMC_TOKENIZER_H

#include <limits.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "llmc/fileio.h"
#include "llmc/unicode_tables.h"

#define GBPE_MAGIC 0x45504247u
#define GBPE_VERSION 1

/* character classes, as in llmc/unicode_tables.h */
enum { UCLASS_OTHER = 0, UCLASS_LETTER = 1, UCLASS_NUMBER = 2, UCLASS_SPACE = 3 };

typedef struct {
    uint64_t key;  /* (left id << 32) | right id; 0xFFFFFFFFFFFFFFFF = empty slot */
    int32_t rank;  /* rank of the merged token */
    int32_t merged;
} TokenizerPair;

typedef struct {
    uint32_t tag;  /* upper bits of the byte-string hash, to skip most memcmp calls */
    int32_t id;    /* -1 = empty slot */
} TokenizerPiece;

typedef struct {
    int vocab_size;
    int eot_token;
    int num_merges;
    unsigned char* token_bytes;  /* all tokens' bytes, concatenated in id order */
    uint32_t* token_offset;      /* token i is token_bytes[token_offset[i] .. token_offset[i+1]) */
    int32_t* token_rank;         /* merge index that produces token i; -1 for byte tokens and unmergeable */
    int32_t byte_token[256];     /* the 1-byte token of each byte value */
    TokenizerPiece* pieces;      /* byte string -> id, for every mergeable token (bytes and merge results) */
    uint32_t piece_mask;
    TokenizerPair* pairs;        /* (a, b) -> merged token, for every split of every mergeable token */
    uint32_t pair_mask;
} Tokenizer;

/* ----------------------------------------------------------------------------
 * hashing */

/* 64-bit hash of a byte string: 8-byte words folded by multiply-xorshift. */
static inline uint64_t tokenizer_hash_bytes(const unsigned char* s, size_t n) {
    uint64_t h = 0x9E3779B97F4A7C15ull ^ (n * 0xC2B2AE3D27D4EB4Full);
    while (n >= 8) {
        uint64_t w;
        memcpy(&w, s, 8);
        h = (h ^ w) * 0xFF51AFD7ED558CCDull;
        h ^= h >> 32;
        s += 8;
        n -= 8;
    }
    if (n) {
        uint64_t w = 0;
        memcpy(&w, s, n);
        h = (h ^ w) * 0xFF51AFD7ED558CCDull;
        h ^= h >> 32;
    }
    h *= 0xC4CEB9FE1A85EC53ull;
    return h ^ (h >> 29);
}
static inline uint64_t tokenizer_hash_pair(uint64_t key) {
    key *= 0x9E3779B97F4A7C15ull;
    return key ^ (key >> 31);
}

static inline const unsigned char* tokenizer_token_bytes(const Tokenizer* t, int id, size_t* len) {
    *len = t->token_offset[id + 1] - t->token_offset[id];
    return t->token_bytes + t->token_offset[id];
}

/* id of the mergeable token whose bytes are s[0..n), or -1 */
static inline int tokenizer_lookup_piece(const Tokenizer* t, const unsigned char* s, size_t n) {
    uint64_t h = tokenizer_hash_bytes(s, n);
    uint32_t tag = (uint32_t)(h >> 32);
    for (uint32_t i = (uint32_t)h & t->piece_mask;; i = (i + 1) & t->piece_mask) {
        const TokenizerPiece* p = &t->pieces[i];
        if (p->id < 0) return -1;
        if (p->tag == tag && t->token_offset[p->id + 1] - t->token_offset[p->id] == n &&
            memcmp(t->token_bytes + t->token_offset[p->id], s, n) == 0)
            return p->id;
    }
}

/* the pair (a, b)'s merge: returns the merged token's rank (INT_MAX if a and b do not merge), sets *merged */
static inline int32_t tokenizer_pair_rank(const Tokenizer* t, int32_t a, int32_t b, int32_t* merged) {
    uint64_t key = ((uint64_t)(uint32_t)a << 32) | (uint32_t)b;
    for (uint32_t i = (uint32_t)tokenizer_hash_pair(key) & t->pair_mask;; i = (i + 1) & t->pair_mask) {
        const TokenizerPair* p = &t->pairs[i];
        if (p->key == key) {
            *merged = p->merged;
            return p->rank;
        }
        if (p->key == UINT64_MAX) {
            *merged = -1;
            return INT_MAX;
        }
    }
}

/* ----------------------------------------------------------------------------
 * loading */

/* Reads all of f (a file or a pipe) into a malloc'd buffer; sets *n. Used by the tools to read text. */
static inline unsigned char* tokenizer_read_all(FILE* f, const char* path, size_t* n) {
    size_t cap = 1 << 16, len = 0;
    unsigned char* buf = (unsigned char*)malloc_check(cap);
    for (;;) {
        if (len == cap) {
            cap *= 2;
            unsigned char* grown = (unsigned char*)realloc(buf, cap);
            if (!grown) sys_fatalf("%s: out of memory reading %zu bytes", path, cap);
            buf = grown;
        }
        size_t got = fread(buf + len, 1, cap - len, f);
        len += got;
        if (got == 0) {
            if (ferror(f)) sys_fatalf("%s: read failed: %s", path, strerror(errno));
            break;
        }
    }
    *n = len;
    return buf;
}

static inline uint32_t tokenizer_table_size_(size_t entries) {
    uint32_t size = 1024;
    while (size < 2 * entries) size *= 2; /* load factor <= 1/2 */
    return size;
}

static inline void tokenizer_insert_piece_(Tokenizer* t, int id) {
    size_t n;
    const unsigned char* s = tokenizer_token_bytes(t, id, &n);
    uint64_t h = tokenizer_hash_bytes(s, n);
    uint32_t i = (uint32_t)h & t->piece_mask;
    while (t->pieces[i].id >= 0) i = (i + 1) & t->piece_mask;
    t->pieces[i].tag = (uint32_t)(h >> 32);
    t->pieces[i].id = id;
}

static inline void tokenizer_insert_pair_(Tokenizer* t, int32_t a, int32_t b, int32_t merged) {
    uint64_t key = ((uint64_t)(uint32_t)a << 32) | (uint32_t)b;
    uint32_t i = (uint32_t)tokenizer_hash_pair(key) & t->pair_mask;
    while (t->pairs[i].key != UINT64_MAX) {
        if (t->pairs[i].key == key) return; /* a+b's bytes name one token, so the entry is the same */
        i = (i + 1) & t->pair_mask;
    }
    t->pairs[i].key = key;
    t->pairs[i].rank = t->token_rank[merged];
    t->pairs[i].merged = merged;
}

/* Loads a GBPE file. Checks the header, the payload CRC, every length, that each byte value has
 * exactly one 1-byte token, that every merge's bytes are its parts' bytes concatenated, and that no
 * two mergeable tokens have the same bytes. Exits with a one-line error naming the file otherwise. */
static inline void tokenizer_load(Tokenizer* t, const char* path) {
    memset(t, 0, sizeof(*t));
    if (path[0] != '/' && access(path, F_OK) != 0 && errno == ENOENT) /* most often the default, run from another directory */
        fatalf("%s: no such tokenizer file (a relative path, from the current directory: run from the repository root, or give "
               "--tokenizer PATH)", path);
    FILE* f = fopen_regular_check(path);
    int32_t h[HEADER_WORDS];
    header_read_check(f, path, "tokenizer file", GBPE_MAGIC, GBPE_VERSION, h);
    int V = h[5], eot = h[6], M = h[7];
    if (V < 256 || V > (1 << 24)) fatalf("%s: tokenizer file has vocab size %d, outside [256, 2^24]", path, V);
    if (eot < 0 || eot >= V) fatalf("%s: tokenizer file has end-of-text token %d, outside [0, %d)", path, eot, V);
    if (M < 0 || M > V) fatalf("%s: tokenizer file has %d merges, outside [0, vocab size %d]", path, M, V);
    uint64_t payload_bytes = header_payload_bytes(h);
    if (payload_bytes > (1ull << 31)) fatalf("%s: tokenizer payload of %llu bytes is implausibly large", path, (unsigned long long)payload_bytes);
    unsigned char* payload = (unsigned char*)malloc_check(payload_bytes);
    uint32_t crc = 0;
    payload_read(f, path, payload, payload_bytes, &crc);
    fclose_check(f, path);
    payload_crc_check(h, crc, path, "tokenizer file");

    t->vocab_size = V;
    t->eot_token = eot;
    t->num_merges = M;
    t->token_offset = (uint32_t*)malloc_check(((size_t)V + 1) * sizeof(uint32_t));
    t->token_rank = (int32_t*)malloc_check((size_t)V * sizeof(int32_t));
    size_t pos = 0, total = 0;
    for (int i = 0; i < V; i++) {
        if (pos + 2 > payload_bytes) fatalf("%s: tokenizer payload ends inside token %d's length", path, i);
        uint16_t len;
        memcpy(&len, payload + pos, 2);
        if (len == 0) fatalf("%s: token %d has length 0", path, i);
        pos += 2 + (size_t)len;
        if (pos > payload_bytes) fatalf("%s: tokenizer payload ends inside token %d's bytes", path, i);
        total += len;
    }
    if (payload_bytes - pos != (uint64_t)M * 12)
        fatalf("%s: tokenizer payload has %llu bytes after the tokens, expected %d merges x 12 = %llu", path,
               (unsigned long long)(payload_bytes - pos), M, (unsigned long long)M * 12);
    t->token_bytes = (unsigned char*)malloc_check(total);
    pos = 0;
    size_t off = 0;
    for (int b = 0; b < 256; b++) t->byte_token[b] = -1;
    for (int i = 0; i < V; i++) {
        uint16_t len;
        memcpy(&len, payload + pos, 2);
        memcpy(t->token_bytes + off, payload + pos + 2, len);
        t->token_offset[i] = (uint32_t)off;
        t->token_rank[i] = -1;
        if (len == 1 && i != eot) {
            unsigned char b = payload[pos + 2];
            if (t->byte_token[b] >= 0) fatalf("%s: tokens %d and %d are both the byte 0x%02x", path, t->byte_token[b], i, b);
            t->byte_token[b] = i;
        }
        pos += 2 + (size_t)len;
        off += len;
    }
    t->token_offset[V] = (uint32_t)off;
    for (int b = 0; b < 256; b++)
        if (t->byte_token[b] < 0) fatalf("%s: no token is the single byte 0x%02x", path, b);

    /* merges: check them and record each merged token's rank */
    int32_t* merges = (int32_t*)malloc_check((size_t)M * 12 + 1);
    memcpy(merges, payload + pos, (size_t)M * 12);
    free(payload);
    for (int m = 0; m < M; m++) {
        int32_t a = merges[3 * m], b = merges[3 * m + 1], c = merges[3 * m + 2];
        if (a < 0 || a >= V || b < 0 || b >= V || c < 0 || c >= V || c == eot || a == eot || b == eot)
            fatalf("%s: merge %d (%d, %d -> %d) has a token id outside [0, %d) or the end-of-text token", path, m, a, b, c, V);
        size_t la, lb, lc;
        const unsigned char* sa = tokenizer_token_bytes(t, a, &la);
        const unsigned char* sb = tokenizer_token_bytes(t, b, &lb);
        const unsigned char* sc = tokenizer_token_bytes(t, c, &lc);
        if (lc != la + lb || memcmp(sc, sa, la) != 0 || memcmp(sc + la, sb, lb) != 0)
            fatalf("%s: merge %d: token %d's bytes are not token %d's followed by token %d's", path, m, c, a, b);
        if (t->token_rank[c] < 0) t->token_rank[c] = m;
    }
    free(merges);

    /* byte string -> id for the mergeable tokens */
    size_t mergeable = 0;
    for (int i = 0; i < V; i++) mergeable += (t->token_rank[i] >= 0 || (i != eot && t->token_offset[i + 1] - t->token_offset[i] == 1));
    uint32_t piece_slots = tokenizer_table_size_(mergeable);
    t->pieces = (TokenizerPiece*)malloc_check(piece_slots * sizeof(TokenizerPiece));
    t->piece_mask = piece_slots - 1;
    for (uint32_t i = 0; i < piece_slots; i++) t->pieces[i].id = -1;
    for (int i = 0; i < V; i++) {
        size_t n;
        const unsigned char* s = tokenizer_token_bytes(t, i, &n);
        int is_byte = (i != eot && n == 1);
        if (t->token_rank[i] < 0 && !is_byte) continue;
        int prior = tokenizer_lookup_piece(t, s, n);
        if (prior >= 0) fatalf("%s: mergeable tokens %d and %d have the same bytes", path, prior, i);
        tokenizer_insert_piece_(t, i);
    }
    /* pairs: every split of a merged token into two mergeable tokens merges to it (tiktoken's rule) */
    size_t splits = 0;
    for (int i = 0; i < V; i++)
        if (t->token_rank[i] >= 0) splits += t->token_offset[i + 1] - t->token_offset[i] - 1;
    uint32_t pair_slots = tokenizer_table_size_(splits);
    t->pairs = (TokenizerPair*)malloc_check(pair_slots * sizeof(TokenizerPair));
    t->pair_mask = pair_slots - 1;
    for (uint32_t i = 0; i < pair_slots; i++) t->pairs[i].key = UINT64_MAX;
    for (int i = 0; i < V; i++) {
        if (t->token_rank[i] < 0) continue;
        size_t n;
        const unsigned char* s = tokenizer_token_bytes(t, i, &n);
        for (size_t k = 1; k < n; k++) {
            int a = tokenizer_lookup_piece(t, s, k), b = tokenizer_lookup_piece(t, s + k, n - k);
            if (a >= 0 && b >= 0) tokenizer_insert_pair_(t, a, b, i);
        }
    }
}

static inline void tokenizer_free(Tokenizer* t) {
    free(t->token_bytes);
    free(t->token_offset);
    free(t->token_rank);
    free(t->pieces);
    free(t->pairs);
    memset(t, 0, sizeof(*t));
}

/* ----------------------------------------------------------------------------
 * pre-tokenisation */

/* Decodes the character at s[i] (i < n): returns its class and sets *len to its byte length.
 * A byte that does not begin a well-formed UTF-8 sequence is one character of class "other". */
static inline int tokenizer_char_class(const unsigned char* s, size_t n, size_t i, size_t* len) {
    unsigned c = s[i];
    if (c < 0x80) {
        *len = 1;
        return UNICODE_BLOCKS[UNICODE_STAGE1[0]][c];
    }
    size_t avail = n - i;
    uint32_t cp;
    if (c >= 0xC2 && c <= 0xDF) {
        if (avail < 2 || (s[i + 1] & 0xC0) != 0x80) goto invalid;
        cp = ((c & 0x1Fu) << 6) | (s[i + 1] & 0x3Fu);
        *len = 2;
    } else if (c >= 0xE0 && c <= 0xEF) {
        if (avail < 3 || (s[i + 1] & 0xC0) != 0x80 || (s[i + 2] & 0xC0) != 0x80) goto invalid;
        cp = ((c & 0x0Fu) << 12) | ((s[i + 1] & 0x3Fu) << 6) | (s[i + 2] & 0x3Fu);
        if (cp < 0x800 || (cp >= 0xD800 && cp <= 0xDFFF)) goto invalid; /* overlong, surrogate */
        *len = 3;
    } else if (c >= 0xF0 && c <= 0xF4) {
        if (avail < 4 || (s[i + 1] & 0xC0) != 0x80 || (s[i + 2] & 0xC0) != 0x80 || (s[i + 3] & 0xC0) != 0x80) goto invalid;
        cp = ((c & 0x07u) << 18) | ((s[i + 1] & 0x3Fu) << 12) | ((s[i + 2] & 0x3Fu) << 6) | (s[i + 3] & 0x3Fu);
        if (cp < 0x10000 || cp > 0x10FFFF) goto invalid; /* overlong, too large */
        *len = 4;
    } else {
        goto invalid;
    }
    return UNICODE_BLOCKS[UNICODE_STAGE1[cp >> 8]][cp & 255];
invalid:
    *len = 1;
    return UCLASS_OTHER;
}

/* End of the piece that starts at s[i] (i < n), by the rules in the file comment. */
static inline size_t tokenizer_next_piece(const unsigned char* s, size_t n, size_t i) {
    if (s[i] == '\'' && i + 1 < n) {
        unsigned char c = s[i + 1];
        if (c == 's' || c == 't' || c == 'm' || c == 'd') return i + 2;
        if (i + 2 < n) {
            unsigned char d = s[i + 2];
            if ((c == 'l' && d == 'l') || (c == 'v' && d == 'e') || (c == 'r' && d == 'e')) return i + 3;
        }
    }
    size_t len;
    int cls = tokenizer_char_class(s, n, i, &len);
    size_t j = i + len;
    if (s[i] == ' ' && j < n) { /* a space prefixes a following letter, number or other run */
        size_t len1;
        int cls1 = tokenizer_char_class(s, n, j, &len1);
        if (cls1 != UCLASS_SPACE) {
            cls = cls1;
            j += len1;
        }
    }
    if (cls != UCLASS_SPACE) {
        while (j < n) {
            if (s[j] < 0x80) { /* ASCII fast path */
                if (UNICODE_BLOCKS[UNICODE_STAGE1[0]][s[j]] != cls) break;
                j++;
                continue;
            }
            if (tokenizer_char_class(s, n, j, &len) != cls) break;
            j += len;
        }
        return j;
    }
    /* white space: run [i, j) of k characters, the last one starting at last */
    size_t last = i, k = 1;
    while (j < n && tokenizer_char_class(s, n, j, &len) == UCLASS_SPACE) {
        last = j;
        j += len;
        k++;
    }
    if (j == n) return n;      /* \s++$ */
    if (k >= 2) return last;   /* \s+(?!\S) */
    return j;                  /* \s */
}

/* Whether the character that s[e] ends, as the encoder decodes s, is White_Space, given that s[e + 1]
 * starts a character (ASCII, or a lead byte of a well-formed sequence). An ASCII or lead byte always
 * starts a character (an invalid sequence is one byte of class other), so the character holding s[e]
 * starts at the last such byte at most 3 back, if it ends at e. */
static inline int tokenizer_space_ends_at(const unsigned char* s, size_t n, size_t e) {
    size_t q = e, len;
    while (q > 0 && e - q < 3 && (s[q] & 0xC0) == 0x80) q--;
    return tokenizer_char_class(s, n, q, &len) == UCLASS_SPACE && q + len == e + 1;
}

/* True if a document may be cut before s[p] without changing its tokens: the text before p and the
 * text from p, each encoded alone, give the tokens of the whole. A piece holds White_Space (any
 * script; an invalid byte is other) only as a run of it or as the ' ' that begins " word", and no
 * piece looks behind its start; so a piece starts at p in both, and the pieces before p end there, when
 *   - s[p-1] is '\n' and neither the character before it nor the one at p is White_Space (that newline
 *     is a piece of its own: "X\nY"), or
 *   - the character at p is White_Space and the one after it is not: a run of white space before a
 *     word ends its piece before its last character (\s+(?!\S)), which is a piece of its own or
 *     begins the next ("\r\nY", "\n\nY", "a b").
 * The characters at and after p must be whole in s[0..n): a caller that has read part of a file cuts
 * only at p + 8 <= n, or anywhere once it has the whole file. */
static inline int tokenizer_can_cut(const unsigned char* s, size_t n, size_t p) {
    size_t len, next_len;
    if (p < 2 || p >= n) return 0;
    int space_at_p = tokenizer_char_class(s, n, p, &len) == UCLASS_SPACE;
    if (!space_at_p) return s[p - 1] == '\n' && !tokenizer_space_ends_at(s, n, p - 2);
    return p + len < n && tokenizer_char_class(s, n, p + len, &next_len) != UCLASS_SPACE;
}

/* ----------------------------------------------------------------------------
 * byte-pair merging */

/* Scratch space of one encode call: per part of the piece being merged. */
typedef struct {
    int32_t* tok;    /* token of each part */
    int32_t* rank;   /* rank of the pair (part k, part k+1), INT_MAX if none */
    int32_t* merged; /* its merged token */
    int32_t* next;   /* linked list of live parts (large pieces) */
    int32_t* prev;
    uint64_t* heap;  /* (rank << 32 | part index) of candidate pairs (large pieces) */
    size_t capacity;
} BpeScratch;

static inline void bpe_scratch_reserve(BpeScratch* w, size_t n) {
    if (n <= w->capacity) return;
    size_t cap = n < 64 ? 64 : n;
    free(w->tok);
    free(w->heap);
    w->tok = (int32_t*)malloc_check(cap * 5 * sizeof(int32_t));
    w->rank = w->tok + cap;
    w->merged = w->rank + cap;
    w->next = w->merged + cap;
    w->prev = w->next + cap;
    w->heap = (uint64_t*)malloc_check(cap * 2 * sizeof(uint64_t));
    w->capacity = cap;
}

static inline void bpe_heap_push(uint64_t* heap, size_t* size, uint64_t x) {
    size_t i = (*size)++;
    while (i > 0 && heap[(i - 1) / 2] > x) {
        heap[i] = heap[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    heap[i] = x;
}
static inline uint64_t bpe_heap_pop(uint64_t* heap, size_t* size) {
    uint64_t top = heap[0], x = heap[--(*size)];
    size_t i = 0;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= *size) break;
        if (c + 1 < *size && heap[c + 1] < heap[c]) c++;
        if (heap[c] >= x) break;
        heap[i] = heap[c];
        i = c;
    }
    heap[i] = x;
    return top;
}

/* Merges the n (>= 2) byte tokens in w->tok. Pieces of up to linear_max parts (BPE_LINEAR_MAX;
 * the tests pass other values to check both paths against each other): repeatedly scan the pair
 * ranks for the lowest (leftmost on ties), O(n^2) with a tiny constant. Larger pieces (long runs of spaces, say):
 * the same order from a min-heap keyed (rank, part index) over a linked list of parts, O(n log n);
 * stale heap entries are recognised by re-deriving the pair's rank. Returns the number of tokens
 * left in w->tok[0..). */
#define BPE_LINEAR_MAX 256
static inline size_t bpe_merge(const Tokenizer* t, BpeScratch* w, size_t n, size_t linear_max) {
    int32_t* tok = w->tok;
    int32_t* rank = w->rank;
    int32_t* merged = w->merged;
    if (n <= linear_max) {
        for (size_t k = 0; k + 1 < n; k++) rank[k] = tokenizer_pair_rank(t, tok[k], tok[k + 1], &merged[k]);
        while (n > 1) {
            size_t best = 0;
            for (size_t k = 1; k + 1 < n; k++)
                if (rank[k] < rank[best]) best = k;
            if (rank[best] == INT_MAX) break;
            tok[best] = merged[best];
            memmove(tok + best + 1, tok + best + 2, (n - best - 2) * sizeof(int32_t));
            memmove(rank + best + 1, rank + best + 2, (n - best - 2) * sizeof(int32_t));
            memmove(merged + best + 1, merged + best + 2, (n - best - 2) * sizeof(int32_t));
            n--;
            if (best + 1 < n) rank[best] = tokenizer_pair_rank(t, tok[best], tok[best + 1], &merged[best]);
            if (best > 0) rank[best - 1] = tokenizer_pair_rank(t, tok[best - 1], tok[best], &merged[best - 1]);
        }
        return n;
    }
    int32_t* next = w->next;
    int32_t* prev = w->prev;
    uint64_t* heap = w->heap;
    size_t heap_size = 0;
    for (size_t k = 0; k < n; k++) {
        next[k] = k + 1 < n ? (int32_t)(k + 1) : -1;
        prev[k] = (int32_t)k - 1;
    }
    for (size_t k = 0; k + 1 < n; k++) {
        int32_t m = -1, r = tokenizer_pair_rank(t, tok[k], tok[k + 1], &m);
        if (r != INT_MAX) bpe_heap_push(heap, &heap_size, ((uint64_t)(uint32_t)r << 32) | k);
    }
    while (heap_size) {
        uint64_t top = bpe_heap_pop(heap, &heap_size);
        int32_t k = (int32_t)(uint32_t)top, r = (int32_t)(top >> 32), m = -1;
        if (tok[k] < 0 || next[k] < 0 || tokenizer_pair_rank(t, tok[k], tok[next[k]], &m) != r) continue;
        int32_t gone = next[k];
        tok[k] = m;
        tok[gone] = -1; /* dead */
        next[k] = next[gone];
        if (next[k] >= 0) prev[next[k]] = k;
        if (next[k] >= 0 && (r = tokenizer_pair_rank(t, tok[k], tok[next[k]], &m)) != INT_MAX)
            bpe_heap_push(heap, &heap_size, ((uint64_t)(uint32_t)r << 32) | (uint32_t)k);
        if (prev[k] >= 0 && (r = tokenizer_pair_rank(t, tok[prev[k]], tok[k], &m)) != INT_MAX)
            bpe_heap_push(heap, &heap_size, ((uint64_t)(uint32_t)r << 32) | (uint32_t)prev[k]);
    }
    size_t out = 0;
    for (int32_t k = 0; k >= 0; k = next[k]) tok[out++] = tok[k];
    return out;
}

/* The longest pre-token piece merged (see the file comment): its scratch is ~36 bytes per byte. */
#define TOKENIZER_MAX_PIECE_BYTES ((size_t)16 << 20)
/* the tools' message for one (its length, its byte offset as long long, the limit in MiB) */
#define TOKENIZER_LONG_PIECE_FMT "a pre-token piece of %zu bytes at byte offset %lld, over the tokenizer's %zu MiB " \
                                 "(a run of letters, digits, symbols or white space that long: not a text corpus?)"

/* A growing token array plus the merge scratch space, reused across encode calls by one thread. */
typedef struct {
    int* ids;
    size_t count, capacity;
    BpeScratch scratch;
} TokenizerOutput;

static inline void tokenizer_output_free(TokenizerOutput* out) {
    free(out->ids);
    free(out->scratch.tok);
    free(out->scratch.heap);
    memset(out, 0, sizeof(*out));
}

/* Appends the tokens of one piece s[0..n) to out (which has room for n more). */
static inline void tokenizer_encode_piece(const Tokenizer* t, const unsigned char* s, size_t n, TokenizerOutput* out) {
    if (n == 1) {
        out->ids[out->count++] = t->byte_token[s[0]];
        return;
    }
    int whole = tokenizer_lookup_piece(t, s, n);
    if (whole >= 0) {
        out->ids[out->count++] = whole;
        return;
    }
    BpeScratch* w = &out->scratch;
    bpe_scratch_reserve(w, n);
    for (size_t k = 0; k < n; k++) w->tok[k] = t->byte_token[s[k]];
    size_t m = bpe_merge(t, w, n, BPE_LINEAR_MAX);
    memcpy(out->ids + out->count, w->tok, m * sizeof(int));
    out->count += m;
}

/* Appends the tokens of text[0..n) (any bytes) to out, growing it as needed. Returns n, or the offset
 * of the first piece longer than TOKENIZER_MAX_PIECE_BYTES: the tokens before it are appended, none
 * from it on (the caller reports it; tokenizer_next_piece(text, n, offset) is its end). */
static inline size_t tokenizer_encode_append(const Tokenizer* t, const unsigned char* text, size_t n, TokenizerOutput* out) {
    if (out->count + n + 1 > out->capacity) { /* at most one token per byte */
        size_t cap = out->capacity * 2 > out->count + n + 1 ? out->capacity * 2 : out->count + n + 1;
        out->ids = (int*)realloc_check(out->ids, cap * sizeof(int));
        out->capacity = cap;
    }
    for (size_t i = 0; i < n;) {
        size_t end = tokenizer_next_piece(text, n, i);
        if (end - i > TOKENIZER_MAX_PIECE_BYTES) return i;
        tokenizer_encode_piece(t, text + i, end - i, out);
        i = end;
    }
    return n;
}

/* Count of the bytes of s[0..n) that are not part of a well-formed UTF-8 sequence (each one is a
 * character of its own to the encoder, a byte token), and the offset of the first in *first (n if none). */
static inline size_t tokenizer_invalid_utf8(const unsigned char* s, size_t n, size_t* first) {
    size_t count = 0, i = 0, len;
    *first = n;
    while (i < n) {
        uint64_t w;
        if (i + 8 <= n && (memcpy(&w, s + i, 8), (w & 0x8080808080808080ull) == 0)) { /* 8 ASCII bytes */
            i += 8;
            continue;
        }
        if (s[i] < 0x80) {
            i++;
            continue;
        }
        tokenizer_char_class(s, n, i, &len);
        if (len == 1) {
            if (!count) *first = i;
            count++;
        }
        i += len;
    }
    return count;
}

/* Encodes text[0..n) (any bytes) into *ids_out (malloc'd; the caller frees it); returns the count.
 * Exits with an error on a piece over TOKENIZER_MAX_PIECE_BYTES (callers that name a file use
 * tokenizer_encode_append). */
static inline size_t tokenizer_encode(const Tokenizer* t, const unsigned char* text, size_t n, int** ids_out) {
    TokenizerOutput out;
    memset(&out, 0, sizeof(out));
    size_t long_piece = tokenizer_encode_append(t, text, n, &out);
    if (long_piece < n)
        fatalf("text of %zu bytes: " TOKENIZER_LONG_PIECE_FMT, n, tokenizer_next_piece(text, n, long_piece) - long_piece,
               (long long)long_piece, TOKENIZER_MAX_PIECE_BYTES >> 20);
    int* shrunk = (int*)realloc(out.ids, (out.count + 1) * sizeof(int));
    *ids_out = shrunk ? shrunk : out.ids;
    size_t count = out.count;
    out.ids = NULL;
    tokenizer_output_free(&out);
    return count;
}

#endif
