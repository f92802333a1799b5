/*
 * prepare_data — turns a text corpus into GPT-2 token shards (GTOK, doc/formats.md).
 *
 *   ./prepare_data --input PATH... --output-dir DIR [--val-fraction 0.005] [--shard-tokens 100000000]
 *                  [--json-field text] [--doc-separator LINE] [--threads N] [--tokenizer PATH]
 *
 * Inputs, in command-line order: a file ("-": stdin, read as text), or a directory searched recursively
 * (all its files in byte order of their whole paths, strcmp: d/a-b/y.txt, d/a.txt, d/a/x.txt; hidden
 * entries, symbolic links and files with a NUL byte in their first 8 KiB or a UTF-16 byte order mark
 * skipped). A file named directly with such a NUL byte or mark is an error; for a pipe or a device (<(...),
 * /dev/stdin) the 8 KiB are the first ones read. One leading UTF-8 byte order mark of a file is
 * dropped (Python's utf-8-sig). Files named *.jsonl or *.json are JSON lines: one object per line (numbers by
 * JSON's grammar, as Python's json.loads reads them; NaN, Infinity, -Infinity taken), the
 * document is its string field --json-field (an unpaired surrogate escape becomes U+FFFD); blank
 * lines are skipped. Other files are text: the whole file is one document, or, with --doc-separator
 * LINE, the documents are the runs of lines between lines equal to LINE (e.g. "%" for fortune files;
 * compared without the line's "\r\n" or "\n"; a warning if no line matched); empty documents are skipped.
 * Bytes outside well-formed UTF-8 sequences (a Latin-1 or cp1252 file) are encoded as byte tokens, as
 * tiktoken does with surrogateescape, with a warning per file (their count and the first's offset).
 *
 * Output: DIR/train_000000.bin, ... and DIR/val_000000.bin, ...; each document is written as
 * <|endoftext|> followed by its tokens; shards hold --shard-tokens tokens (the last one fewer), and
 * a document may continue into the next shard. Document i (0-based, in input order) goes to val
 * when floor((i+1)·f) > floor(i·f) for f = --val-fraction: one document in every 1/f, evenly spread.
 * Shards are written as DIR/<name>_NNNNNN.bin.tmp and renamed once the whole input is written, so a
 * failed run (a broken JSON line, a full disk, SIGINT/SIGTERM: exit 128 + the signal) leaves the
 * directory as it was; then stale train_/val_ shards (and .tmp files) of an earlier run beyond the ones
 * written are removed. A run holds an exclusive lock (flock) on DIR itself: a second prepare_data on the
 * same directory stops at once instead of mixing its shards with the first one's. (The renames are one per shard, not one atomic step: a kill among them leaves
 * old and new shards side by side.)
 *
 * Deterministic: the shards depend only on the inputs and flags, never on --threads. Parallelism:
 * the input is read in batches of about 64 MiB, cut into chunks of about 1 MiB at JSON-line ends,
 * document separators, or points inside a document where cutting cannot change the tokens
 * (tokenizer_can_cut: before the white space that precedes a word; with --doc-separator only at line
 * starts). Each file is read in blocks of 16 MiB (a smaller file in one read of its size); a stretch
 * without a cut point is held whole, read on in doubling reads up to 256 MiB, beyond which the run
 * stops with an error (a line that long, or text without white space, is no corpus: memory stays
 * bounded even for /dev/zero-like input). A pre-token piece over 16 MiB (TOKENIZER_MAX_PIECE_BYTES:
 * merging one takes ~36 bytes of scratch per byte) stops the run with an error naming the file and its
 * byte offset (the JSON line, for a document field). The threads encode a batch's chunks (OpenMP dynamic schedule) and write
 * each chunk's tokens as soon as all earlier chunks are written (omp ordered), while one of them
 * first reads the next batch: reading and writing overlap encoding instead of running alone.
 */
#include <dirent.h>
#include <fcntl.h>
#include <sys/file.h>
#include <math.h>
#include <omp.h>
#include <time.h>

#include "llmc/cli.h"
#include "llmc/tokenizer.h"
#include "llmc/signals.h"

#define GTOK_MAGIC 0x4B4F5447u
#define GTOK_VERSION 1
/* The sizes (a test build, build/prepare_data_small, makes them tiny to cross every boundary often) */
#ifndef CHUNK_BYTES
#define CHUNK_BYTES (1u << 20)
#endif
#ifndef READ_BYTES
#define READ_BYTES (16u << 20)
#endif
#ifndef BATCH_BYTES
#define BATCH_BYTES (64u << 20)
#endif
#ifndef MAX_UNCUT_BYTES
#define MAX_UNCUT_BYTES (256u << 20) /* the most of a file held while no cut point is found */
#endif

/* ----------------------------------------------------------------------------
 * command line (llmc/cli.h) */
typedef struct {
    CliList inputs;
    const char* output_dir;
    double val_fraction;
    long shard_tokens;
    const char* json_field;
    const char* doc_separator;
    int threads;
    const char* tokenizer_path;
} Options;

#define OPTION(l, type, field, def, lo, hi, help) {NULL, l, type, offsetof(Options, field), def, lo, hi, NULL, help}
static const CliFlag PREPARE_FLAGS[] = {
    OPTION("--input", CLI_STRS, inputs, NULL, 0, 0, "text file, JSON-lines file (*.jsonl, *.json), directory, or - (stdin, text); repeatable"),
    OPTION("--output-dir", CLI_STR, output_dir, NULL, 0, 0, "where train_NNNNNN.bin and val_NNNNNN.bin go (created)"),
    OPTION("--val-fraction", CLI_DOUBLE, val_fraction, "0.005", 0, 1, "the share of documents that go to val, F: one in every 1/F (below 1)"),
    OPTION("--shard-tokens", CLI_LONG, shard_tokens, "100000000", 1, 1e15, "tokens per shard"),
    OPTION("--json-field", CLI_STR, json_field, "text", 0, 0, "the document field of JSON lines"),
    OPTION("--doc-separator", CLI_STR, doc_separator, NULL, 0, 0, "split text files into documents at lines equal to this one"),
    OPTION("--threads", CLI_INT, threads, "0", 0, 1024, "encoding threads (0: all cores)"),
    OPTION("--tokenizer", CLI_STR, tokenizer_path, "data/gpt2_tokenizer.bin", 0, 0, "GBPE tokenizer file"),
};

static void parse_options(int argc, char** argv, Options* o) {
    const CliSpec spec = {PREPARE_FLAGS, (int)(sizeof(PREPARE_FLAGS) / sizeof(PREPARE_FLAGS[0])),
                          "prepare_data --input PATH [--input PATH ...] --output-dir DIR [flags]", "give each path its own --input", NULL};
    memset(o, 0, sizeof(*o));
    cli_parse(&spec, o, argc, argv);
    if (o->inputs.count == 0 || !o->output_dir) usagef("--input and --output-dir are required");
    if (o->val_fraction >= 1) usagef("--val-fraction %g is outside [0, 1)", o->val_fraction);
    if (o->threads == 0) o->threads = omp_get_num_procs();
    if (o->doc_separator && strpbrk(o->doc_separator, "\r\n")) /* lines are compared without their "\r\n" or "\n" */
        usagef("--doc-separator must be a single line without '\\r' or '\\n'");
}

/* ----------------------------------------------------------------------------
 * input files */
typedef struct {
    char** paths;
    int* is_jsonl;
    int* is_stream; /* not a regular file (a pipe, a device): its binary check is on its first block read */
    long long* sizes;
    long long* invalid_utf8;  /* bytes of each file outside well-formed UTF-8 sequences (counted as encoded) */
    long long* first_invalid; /* the byte offset of the first one */
    int count, capacity;
    long long total_bytes;
    int binaries; /* files skipped in directories (a NUL byte in their first 8 KiB) */
} FileList;

static int ends_with(const char* s, const char* suffix) {
    size_t n = strlen(s), m = strlen(suffix);
    return n >= m && strcmp(s + n - m, suffix) == 0;
}

static void file_list_add(FileList* l, const char* path, long long size, int is_stream) {
    if (l->count == l->capacity) {
        l->capacity = l->capacity ? 2 * l->capacity : 64;
        l->paths = (char**)realloc_check(l->paths, l->capacity * sizeof(char*));
        l->is_jsonl = (int*)realloc_check(l->is_jsonl, l->capacity * sizeof(int));
        l->is_stream = (int*)realloc_check(l->is_stream, l->capacity * sizeof(int));
        l->sizes = (long long*)realloc_check(l->sizes, l->capacity * sizeof(long long));
        l->invalid_utf8 = (long long*)realloc_check(l->invalid_utf8, l->capacity * sizeof(long long));
        l->first_invalid = (long long*)realloc_check(l->first_invalid, l->capacity * sizeof(long long));
    }
    l->paths[l->count] = strdup(path);
    if (!l->paths[l->count]) sys_fatalf("out of memory listing input files");
    l->is_jsonl[l->count] = ends_with(path, ".jsonl") || ends_with(path, ".json");
    l->is_stream[l->count] = is_stream;
    l->sizes[l->count] = size;
    l->invalid_utf8[l->count] = 0;
    l->first_invalid[l->count] = -1;
    l->total_bytes += size;
    l->count++;
}

#define BINARY_CHECK_BYTES 8192
#define NOT_TEXT "not text (a NUL byte in its first 8 KiB, or a UTF-16 byte order mark): compressed? decompress it first; " \
                 "UTF-16 or UTF-32? convert it to UTF-8"

/* true if a file's first n bytes (up to 8 KiB) hold a NUL byte or start with a UTF-16 byte order mark (UTF-16 text of
 * a script without ASCII, e.g. CJK, may have no NUL byte) */
static int not_text(const unsigned char* buf, size_t n) {
    return memchr(buf, 0, n < BINARY_CHECK_BYTES ? n : BINARY_CHECK_BYTES) != NULL ||
           (n >= 2 && (memcmp(buf, "\xFF\xFE", 2) == 0 || memcmp(buf, "\xFE\xFF", 2) == 0));
}

/* true if path's first 8 KiB are not text (not_text) */
static int looks_binary(const char* path) {
    FILE* f = fopen_check(path, "rb");
    unsigned char buf[BINARY_CHECK_BYTES];
    size_t n = fread(buf, 1, sizeof(buf), f);
    if (ferror(f)) sys_fatalf("%s: read failed: %s", path, strerror(errno));
    fclose_check(f, path);
    return not_text(buf, n);
}

/* a directory's text files as found (any order), before they are sorted into the FileList */
typedef struct {
    char* path;
    long long size;
} FoundFile;

typedef struct {
    FoundFile* files;
    int count, capacity;
} FoundFiles;

static int compare_found_paths(const void* a, const void* b) {
    return strcmp(((const FoundFile*)a)->path, ((const FoundFile*)b)->path);
}

/* collects the text files under dir, recursively (in no order); counts skipped binaries. The directory is
 * read and closed before its subdirectories are opened: a deep tree holds one descriptor at a time. */
static void find_text_files(FoundFiles* found, const char* dir, int* binaries) {
    DIR* d = opendir(dir);
    if (!d) sys_fatalf("%s: cannot open directory: %s", dir, strerror(errno));
    char** names = NULL;
    int n = 0, cap = 0;
    struct dirent* e;
    while ((errno = 0, e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.') continue;
        if (n == cap) {
            cap = cap ? 2 * cap : 64;
            names = (char**)realloc_check(names, cap * sizeof(char*));
        }
        size_t len = strlen(dir) + strlen(e->d_name) + 2;
        names[n] = (char*)malloc_check(len);
        snprintf(names[n++], len, "%s/%s", dir, e->d_name);
    }
    if (errno != 0) sys_fatalf("%s: cannot list directory: %s", dir, strerror(errno));
    if (closedir(d) != 0) sys_fatalf("%s: cannot close directory: %s", dir, strerror(errno));
    for (int i = 0; i < n; i++) {
        struct stat st;
        if (lstat(names[i], &st) != 0) sys_fatalf("%s: cannot stat: %s", names[i], strerror(errno));
        if (S_ISDIR(st.st_mode)) {
            find_text_files(found, names[i], binaries);
        } else if (S_ISREG(st.st_mode) && !looks_binary(names[i])) {
            if (found->count == found->capacity) {
                found->capacity = found->capacity ? 2 * found->capacity : 64;
                found->files = (FoundFile*)realloc_check(found->files, found->capacity * sizeof(FoundFile));
            }
            found->files[found->count].path = names[i]; /* the list owns it now */
            found->files[found->count++].size = st.st_size;
            continue;
        } else if (S_ISREG(st.st_mode)) {
            (*binaries)++;
        }
        free(names[i]);
    }
    free(names);
}

/* adds the text files under dir, recursively, in byte order of their whole paths (strcmp: d/a-b/y.txt,
 * d/a.txt, d/a/x.txt, as '-' < '.' < '/'); counts skipped binaries */
static void add_directory(FileList* l, const char* dir, int* binaries) {
    FoundFiles found = {NULL, 0, 0};
    find_text_files(&found, dir, binaries);
    qsort(found.files, found.count, sizeof(FoundFile), compare_found_paths);
    for (int i = 0; i < found.count; i++) {
        file_list_add(l, found.files[i].path, found.files[i].size, 0);
        free(found.files[i].path);
    }
    free(found.files);
}

static void gather_inputs(FileList* l, const Options* o) {
    memset(l, 0, sizeof(*l));
    for (int i = 0; i < o->inputs.count; i++) {
        const char* input = strcmp(o->inputs.items[i], "-") == 0 ? "/dev/stdin" : o->inputs.items[i]; /* "-": stdin, as ./tokenize */
        struct stat st;
        if (stat(input, &st) != 0) sys_fatalf("%s: cannot read input: %s", input, strerror(errno));
        if (S_ISDIR(st.st_mode)) {
            int before = l->count, binaries_before = l->binaries;
            add_directory(l, input, &l->binaries);
            if (l->count == before)
                fatalf("%s: directory has no text files (%d binary files skipped)", input, l->binaries - binaries_before);
        } else {
            if (access(input, R_OK) != 0) sys_fatalf("%s: cannot read input: %s", input, strerror(errno));
            /* a pipe or a device can be read once: read_block checks its first block instead */
            if (S_ISREG(st.st_mode) && looks_binary(input)) fatalf("%s: " NOT_TEXT, input);
            file_list_add(l, input, st.st_size, !S_ISREG(st.st_mode));
        }
    }
}

/* ----------------------------------------------------------------------------
 * JSON lines: the string value of one top-level field of an object */

typedef struct {
    const unsigned char* s;
    size_t n, i;
    const char* error; /* first error, or NULL */
} JsonCursor;

static void json_ws(JsonCursor* c) {
    while (c->i < c->n && (c->s[c->i] == ' ' || c->s[c->i] == '\t' || c->s[c->i] == '\r')) c->i++;
}
static int json_fail(JsonCursor* c, const char* what) {
    if (!c->error) c->error = what;
    return 0;
}
static void put_utf8(unsigned char* out, size_t* len, uint32_t cp) {
    if (cp < 0x80) out[(*len)++] = (unsigned char)cp;
    else if (cp < 0x800) {
        out[(*len)++] = (unsigned char)(0xC0 | (cp >> 6));
        out[(*len)++] = (unsigned char)(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
        out[(*len)++] = (unsigned char)(0xE0 | (cp >> 12));
        out[(*len)++] = (unsigned char)(0x80 | ((cp >> 6) & 0x3F));
        out[(*len)++] = (unsigned char)(0x80 | (cp & 0x3F));
    } else {
        out[(*len)++] = (unsigned char)(0xF0 | (cp >> 18));
        out[(*len)++] = (unsigned char)(0x80 | ((cp >> 12) & 0x3F));
        out[(*len)++] = (unsigned char)(0x80 | ((cp >> 6) & 0x3F));
        out[(*len)++] = (unsigned char)(0x80 | (cp & 0x3F));
    }
}
static int json_hex4(JsonCursor* c, uint32_t* v) {
    if (c->i + 4 > c->n) return json_fail(c, "truncated \\u escape");
    *v = 0;
    for (int k = 0; k < 4; k++) {
        unsigned char h = c->s[c->i++];
        int d = h >= '0' && h <= '9' ? h - '0' : h >= 'a' && h <= 'f' ? h - 'a' + 10 : h >= 'A' && h <= 'F' ? h - 'A' + 10 : -1;
        if (d < 0) return json_fail(c, "bad hex digit in \\u escape");
        *v = *v * 16 + (uint32_t)d;
    }
    return 1;
}
/* Parses a string at c->i (which is '"'). If out is non-NULL, writes its decoded UTF-8 there (it
 * needs at most as many bytes as the literal) and sets *len. Raw bytes >= 0x80 pass through. */
static int json_string(JsonCursor* c, unsigned char* out, size_t* len) {
    size_t used = 0;
    c->i++;
    for (;;) {
        if (c->i >= c->n) return json_fail(c, "unterminated string");
        unsigned char ch = c->s[c->i++];
        if (ch == '"') break;
        if (ch < 0x20) return json_fail(c, "control character inside a string");
        if (ch != '\\') {
            if (out) out[used++] = ch;
            continue;
        }
        if (c->i >= c->n) return json_fail(c, "unterminated string");
        unsigned char e = c->s[c->i++];
        uint32_t cp;
        switch (e) {
        case '"': cp = '"'; break;
        case '\\': cp = '\\'; break;
        case '/': cp = '/'; break;
        case 'b': cp = '\b'; break;
        case 'f': cp = '\f'; break;
        case 'n': cp = '\n'; break;
        case 'r': cp = '\r'; break;
        case 't': cp = '\t'; break;
        case 'u': /* a surrogate pair is one code point; an unpaired surrogate (valid JSON, not a character) is
                   * U+FFFD, as tiktoken encodes a Python str holding one */
            if (!json_hex4(c, &cp)) return 0;
            if (cp >= 0xDC00 && cp <= 0xDFFF) cp = 0xFFFD;
            else if (cp >= 0xD800 && cp <= 0xDBFF) {
                size_t at = c->i;
                uint32_t lo = 0;
                if (c->i + 2 <= c->n && c->s[c->i] == '\\' && c->s[c->i + 1] == 'u') {
                    c->i += 2;
                    if (!json_hex4(c, &lo)) return 0;
                }
                if (lo >= 0xDC00 && lo <= 0xDFFF) cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
                else {
                    c->i = at; /* the next escape is read on its own */
                    cp = 0xFFFD;
                }
            }
            break;
        default: return json_fail(c, "unknown escape in string");
        }
        if (out) put_utf8(out, &used, cp);
    }
    if (len) *len = used;
    return 1;
}
static int json_digits(JsonCursor* c) { /* [0-9]+: returns how many */
    size_t start = c->i;
    while (c->i < c->n && c->s[c->i] >= '0' && c->s[c->i] <= '9') c->i++;
    return c->i > start;
}
/* A number at c->i, by JSON's grammar -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)? (RFC 8259, as Python's
 * json.loads); one that runs on past it ("01", "1.", ".5", "+1", "1e5.0") is an error. */
static int json_number(JsonCursor* c) {
    const char* bad = "a number outside JSON's grammar -?(0|[1-9][0-9]*)(.[0-9]+)?([eE][+-]?[0-9]+)?";
    if (c->i < c->n && c->s[c->i] == '-') c->i++;
    if (c->i < c->n && c->s[c->i] == '0') c->i++;
    else if (c->i >= c->n || !json_digits(c)) return json_fail(c, bad);
    if (c->i < c->n && c->s[c->i] == '.') {
        c->i++;
        if (!json_digits(c)) return json_fail(c, bad);
    }
    if (c->i < c->n && (c->s[c->i] == 'e' || c->s[c->i] == 'E')) {
        c->i++;
        if (c->i < c->n && (c->s[c->i] == '+' || c->s[c->i] == '-')) c->i++;
        if (!json_digits(c)) return json_fail(c, bad);
    }
    if (c->i < c->n && c->s[c->i] && strchr("+-.eE0123456789", c->s[c->i])) return json_fail(c, bad);
    return 1;
}
/* Skips any JSON value, checked as Python's json.loads does (brackets, literals, numbers, strings). */
static int json_skip_value(JsonCursor* c, int depth) {
    json_ws(c);
    if (c->i >= c->n) return json_fail(c, "missing value");
    if (depth > 512) return json_fail(c, "nesting deeper than 512");
    unsigned char ch = c->s[c->i];
    if (ch == '"') return json_string(c, NULL, NULL);
    if (ch == '{' || ch == '[') {
        unsigned char close = ch == '{' ? '}' : ']';
        c->i++;
        json_ws(c);
        if (c->i < c->n && c->s[c->i] == close) {
            c->i++;
            return 1;
        }
        for (;;) {
            if (close == '}') {
                json_ws(c);
                if (c->i >= c->n || c->s[c->i] != '"') return json_fail(c, "expected a string key");
                if (!json_string(c, NULL, NULL)) return 0;
                json_ws(c);
                if (c->i >= c->n || c->s[c->i] != ':') return json_fail(c, "expected ':' after a key");
                c->i++;
            }
            if (!json_skip_value(c, depth + 1)) return 0;
            json_ws(c);
            if (c->i < c->n && c->s[c->i] == ',') {
                c->i++;
                continue;
            }
            if (c->i < c->n && c->s[c->i] == close) {
                c->i++;
                return 1;
            }
            return json_fail(c, close == '}' ? "expected ',' or '}' in an object" : "expected ',' or ']' in an array");
        }
    }
    /* NaN, Infinity and -Infinity are not JSON, but Python's json.loads takes them (and writes them) */
    static const char* literals[] = {"true", "false", "null", "NaN", "Infinity", "-Infinity"};
    for (int k = 0; k < 6; k++) {
        size_t m = strlen(literals[k]);
        if (c->i + m <= c->n && memcmp(c->s + c->i, literals[k], m) == 0) {
            c->i += m;
            return 1;
        }
    }
    if (ch && strchr("-0123456789+.", ch)) return json_number(c);
    return json_fail(c, "unexpected character where a value should be");
}
static const char JSON_NO_FIELD[] = "the object has no string field named";

/* Extracts field `field` (a string) of the object on line s[0..n) into out; returns NULL or an error. */
static const char* json_line_field(const unsigned char* s, size_t n, const char* field, unsigned char* out, size_t* len) {
    JsonCursor c = {s, n, 0, NULL};
    size_t field_len = strlen(field);
    int found = 0;
    json_ws(&c);
    if (c.i >= n || s[c.i] != '{') return "line is not a JSON object";
    c.i++;
    json_ws(&c);
    if (c.i < n && s[c.i] == '}') c.i++;
    else
        for (;;) {
            json_ws(&c);
            if (c.i >= n || s[c.i] != '"') return "expected a string key";
            /* the key is compared decoded ("te\u0078t" names text); it is decoded after the field's value
             * found so far, which fits: decoding never lengthens a string, and out holds a line */
            unsigned char* key = out + (found ? *len : 0);
            size_t key_len = 0;
            if (!json_string(&c, key, &key_len)) return c.error;
            int is_field = key_len == field_len && memcmp(key, field, field_len) == 0;
            json_ws(&c);
            if (c.i >= n || s[c.i] != ':') return "expected ':' after a key";
            c.i++;
            json_ws(&c);
            if (is_field) {
                if (c.i >= n || s[c.i] != '"') return "the document field is not a string";
                if (!json_string(&c, out, len)) return c.error;
                found = 1;
            } else if (!json_skip_value(&c, 1)) {
                return c.error;
            }
            json_ws(&c);
            if (c.i < n && s[c.i] == ',') {
                c.i++;
                continue;
            }
            if (c.i < n && s[c.i] == '}') {
                c.i++;
                break;
            }
            return "expected ',' or '}' in the object";
        }
    json_ws(&c);
    if (c.i != n) return "text after the object";
    if (!found) return JSON_NO_FIELD;
    return NULL;
}

/* ----------------------------------------------------------------------------
 * chunks: a piece of one file, encoded by one thread */
typedef struct {
    const unsigned char* data;
    size_t len;
    int file;
    long long offset;     /* byte offset of data[0] in the file */
    int starts_document; /* text files: the chunk begins a new document */
    long long first_line; /* JSON lines: line number of the chunk's first line */
} Chunk;

typedef struct {
    int starts_document; /* this segment begins a new document (else it continues the previous one) */
    size_t first, count; /* its tokens: output.ids[first .. first+count) */
} Segment;

/* One chunk's tokens, cut into segments at document starts. Each thread owns one and reuses it for
 * every chunk it encodes (the chunk is written before the thread takes the next), so its buffers
 * are allocated and faulted in once, not per chunk. */
typedef struct {
    TokenizerOutput output;
    Segment* segments;
    int num_segments, cap_segments;
    unsigned char* json_text; /* JSON lines: the decoded document field */
    size_t json_capacity;
    long long separators;     /* --doc-separator lines in the chunk */
    size_t invalid_utf8;      /* bytes of the chunk outside well-formed UTF-8 sequences */
    size_t first_invalid;     /* the offset in the chunk of the first one */
    char error[1024];         /* the chunk's first error (a broken JSON line, a piece over 16 MiB), or "" */
} Encoded;

static void encoded_free(Encoded* e) {
    tokenizer_output_free(&e->output);
    free(e->segments);
    free(e->json_text);
    memset(e, 0, sizeof(*e));
}

/* Appends the segment s[0..n); returns n, or the offset in s of a pre-token piece over TOKENIZER_MAX_PIECE_BYTES
 * (then the segment holds the tokens before it) */
static size_t encoded_add_segment(Encoded* e, const Tokenizer* t, const unsigned char* s, size_t n, int starts_document) {
    if (n == 0) return 0;
    if (e->num_segments == e->cap_segments) {
        e->cap_segments = e->cap_segments ? 2 * e->cap_segments : 16;
        e->segments = (Segment*)realloc_check(e->segments, e->cap_segments * sizeof(Segment));
    }
    Segment* sg = &e->segments[e->num_segments++];
    sg->starts_document = starts_document;
    sg->first = e->output.count;
    size_t done = tokenizer_encode_append(t, s, n, &e->output);
    sg->count = e->output.count - sg->first;
    return done;
}

/* Sets e->error for a text file's piece over TOKENIZER_MAX_PIECE_BYTES at s[at] (s: the segment, inside the chunk) */
static void long_piece_error(Encoded* e, const Chunk* ch, const FileList* files, const unsigned char* s, size_t n, size_t at) {
    snprintf(e->error, sizeof(e->error), "%s: " TOKENIZER_LONG_PIECE_FMT, files->paths[ch->file],
             tokenizer_next_piece(s, n, at) - at, ch->offset + (long long)(s - ch->data) + (long long)at,
             TOKENIZER_MAX_PIECE_BYTES >> 20);
}

/* length of the line starting at s[i] without its '\n' (and a '\r' before it), and where the next starts */
static size_t line_end(const unsigned char* s, size_t n, size_t i, size_t* next) {
    const unsigned char* nl = (const unsigned char*)memchr(s + i, '\n', n - i);
    size_t end = nl ? (size_t)(nl - s) : n;
    *next = nl ? end + 1 : n;
    return end > i && s[end - 1] == '\r' ? end - 1 : end;
}

static int is_separator_line(const unsigned char* s, size_t n, size_t i, const char* sep, size_t* next) {
    size_t end = line_end(s, n, i, next);
    size_t m = strlen(sep);
    return end - i == m && memcmp(s + i, sep, m) == 0;
}

/* Encodes one chunk into e's segments (replacing what e held); errors (broken JSON lines, a piece over
 * TOKENIZER_MAX_PIECE_BYTES) go to e->error. Counts its bytes of invalid UTF-8. */
static void encode_chunk(const Chunk* ch, Encoded* e, const Tokenizer* t, const Options* o, const FileList* files) {
    const unsigned char* s = ch->data;
    size_t n = ch->len;
    e->output.count = 0;
    e->num_segments = 0;
    e->separators = 0;
    e->error[0] = 0;
    /* chunks end where a character does (after a '\n', before a White_Space character), so the count of
     * each chunk is the file's count over its bytes */
    e->invalid_utf8 = tokenizer_invalid_utf8(s, n, &e->first_invalid);
    if (files->is_jsonl[ch->file]) {
        if (e->json_capacity < n) { /* a decoded field is never longer than its line */
            free(e->json_text);
            e->json_text = (unsigned char*)malloc_check(n);
            e->json_capacity = n;
        }
        unsigned char* text = e->json_text;
        long long line = ch->first_line;
        for (size_t i = 0, next; i < n; i = next, line++) {
            size_t end = line_end(s, n, i, &next);
            size_t k = i;
            while (k < end && (s[k] == ' ' || s[k] == '\t')) k++;
            if (k == end) continue;
            size_t len = 0;
            const char* err = json_line_field(s + i, end - i, o->json_field, text, &len);
            if (err) {
                snprintf(e->error, sizeof(e->error), "%s:%lld: broken JSON line: %s%s%s (a *.json or *.jsonl input is read as JSON lines, one object a line)",
                         files->paths[ch->file], line, err, err == JSON_NO_FIELD ? " " : "", err == JSON_NO_FIELD ? o->json_field : "");
                break;
            }
            if (len == 0) continue;
            size_t done = encoded_add_segment(e, t, text, len, 1);
            if (done < len) {
                snprintf(e->error, sizeof(e->error), "%s:%lld: the document field holds " TOKENIZER_LONG_PIECE_FMT,
                         files->paths[ch->file], line, tokenizer_next_piece(text, len, done) - done, (long long)done,
                         TOKENIZER_MAX_PIECE_BYTES >> 20);
                break;
            }
        }
    } else if (o->doc_separator) {
        int starts = ch->starts_document;
        size_t doc = 0, next;
        for (size_t i = 0; i < n; i = next) {
            if (is_separator_line(s, n, i, o->doc_separator, &next)) {
                size_t done = encoded_add_segment(e, t, s + doc, i - doc, starts);
                if (done < i - doc) {
                    long_piece_error(e, ch, files, s + doc, i - doc, done);
                    return;
                }
                e->separators++;
                doc = next;
                starts = 1;
            }
        }
        size_t done = encoded_add_segment(e, t, s + doc, n - doc, starts);
        if (done < n - doc) long_piece_error(e, ch, files, s + doc, n - doc, done);
    } else {
        size_t done = encoded_add_segment(e, t, s, n, ch->starts_document);
        if (done < n) long_piece_error(e, ch, files, s, n, done);
    }
}

/* First cut point at or after `from` in s[0..n) (what has been read of the file so far; eof: all of it)
 * at which a chunk may end: after a JSON line's '\n'; after a separator line (then the next chunk
 * starts a document); or inside a document where tokenizer_can_cut holds (with separators, at a line
 * start only, so that each chunk's lines are whole; before eof, with the 8 bytes it reads after p
 * read: a character cut by the read would be misjudged). Returns 0 if none. A separator line that
 * holds s[from - 1] counts: the document after it must start one. */
static size_t find_cut(const unsigned char* s, size_t n, int eof, size_t from, int jsonl, const char* sep, int* starts_document) {
    if (from < 1) from = 1;
    if (from > n) return 0; /* not read that far yet */
    if (jsonl) {
        const unsigned char* nl = from - 1 < n ? (const unsigned char*)memchr(s + from - 1, '\n', n - from + 1) : NULL;
        return nl ? (size_t)(nl - s) + 1 : 0;
    }
    size_t p = from;
    if (sep) { /* back to the start of the line holding s[from - 1], if it is short enough to be a separator */
        size_t lo = from > strlen(sep) + 2 ? from - strlen(sep) - 2 : 0, q = from - 1;
        while (q > lo && s[q - 1] != '\n') q--;
        if (q == 0 || s[q - 1] == '\n') p = q;
    }
    for (; p < n; p++) {
        if (sep && p > 0 && s[p - 1] != '\n') continue;
        size_t next;
        if (sep && is_separator_line(s, n, p, sep, &next) && next < n && s[next - 1] == '\n') {
            *starts_document = 1;
            return next;
        }
        size_t len; /* with separators, no cut before white space: the document may end after it ("x\n\n---") */
        if (p >= from && (eof || p + 8 <= n) && tokenizer_can_cut(s, n, p) &&
            !(sep && tokenizer_char_class(s, n, p, &len) == UCLASS_SPACE)) {
            *starts_document = 0;
            return p;
        }
    }
    return 0;
}

/* ----------------------------------------------------------------------------
 * output shards */
typedef struct {
    const char* name; /* "train" or "val" */
    const char* dir;
    long shard_tokens;
    int vocab_size;
    AtomicFile file;
    int open;
    int shards_done;
    uint64_t in_shard, total;
    uint32_t crc;
    uint16_t buf[1 << 15];
    size_t buffered;
} ShardWriter;

#define MAX_SHARDS 1000000 /* of each split: DIR/<name>_000000.bin ... _999999.bin */

/* DIR/<name>_NNNNNN.bin, with suffix (".tmp": where the shard is written until the run succeeds) */
static void shard_path(const ShardWriter* w, int k, const char* suffix, char* path, size_t size) {
    snprintf(path, size, "%s/%s_%06d.bin%s", w->dir, w->name, k, suffix);
}

/* The writers whose .tmp files are removed if the program exits with an error (atexit): a failed run
 * leaves the directory as it was. With llmc/signals.h's flag of a stop signal and main's static `out`
 * (static for its size: the writers' large buffers, not on the stack), the program's only mutable
 * globals: exit() gives no other way to reach them. After a successful run the .tmp files are
 * renamed, so nothing is left to remove. */
static ShardWriter* open_writers_[2];

static void remove_tmp_files(void) {
    for (int i = 0; i < 2; i++) {
        const ShardWriter* w = open_writers_[i];
        for (int k = 0; w && k < w->shards_done + w->open; k++) {
            char path[4200];
            shard_path(w, k, ".tmp", path, sizeof(path));
            (void)unlink(path); /* best effort, at exit after the error already reported */
        }
    }
}

/* exits (128 + the signal, the .tmp files removed by remove_tmp_files) once a stop signal (llmc/signals.h) came */
static void stop_if_signalled(void) {
    int sig = preempt_requested();
    if (!sig) return;
    fprintf(stderr, "\nprepare_data: stopped by %s; no shard was written (the output directory is as it was)\n", preempt_signal_name(sig));
    exit(128 + sig);
}

static void shard_flush(ShardWriter* w) {
    fwrite_check(w->buf, 2, w->buffered, w->file.f, w->file.tmp_path);
    w->crc = crc32_update(w->crc, w->buf, w->buffered * 2);
    w->buffered = 0;
}

static void shard_finish(ShardWriter* w) {
    shard_flush(w);
    int32_t h[HEADER_WORDS];
    header_init(h, GTOK_MAGIC, GTOK_VERSION);
    header_set_payload(h, w->in_shard * 2, w->crc);
    header_set_u64(h, 5, w->in_shard);
    h[7] = w->vocab_size;
    h[8] = 2;
    fseek_check(w->file.f, 0, SEEK_SET, w->file.tmp_path);
    fwrite_check(h, 4, HEADER_WORDS, w->file.f, w->file.tmp_path);
    fclose_sync_check(w->file.f, w->file.tmp_path);
    w->file.f = NULL;
    w->open = 0;
    w->shards_done++;
}

/* once the whole input is written: every complete shard, kept as .tmp so far, goes under its name */
static void shard_commit_all(const ShardWriter* w) {
    for (int k = 0; k < w->shards_done; k++) {
        char tmp[4200], path[4200];
        shard_path(w, k, ".tmp", tmp, sizeof(tmp));
        shard_path(w, k, "", path, sizeof(path));
        if (rename(tmp, path) != 0) sys_fatalf("%s: rename from %s failed: %s", path, tmp, strerror(errno));
    }
    if (w->shards_done > 0) { /* the renames durable */
        char path[4200];
        shard_path(w, 0, "", path, sizeof(path));
        dir_sync_check(path);
    }
}

static void shard_write(ShardWriter* w, const int* tokens, size_t n) {
    for (size_t i = 0; i < n; i++) {
        if (!w->open) {
            char path[4200];
            if (w->shards_done == MAX_SHARDS) /* names sort in shard order only with 6 digits, as the loader reads them */
                fatalf("%s: more than %d %s shards: give a larger --shard-tokens (now %lld)", w->dir, MAX_SHARDS, w->name,
                       (long long)w->shard_tokens);
            shard_path(w, w->shards_done, "", path, sizeof(path));
            atomic_open(&w->file, path);
            w->open = 1;
            w->in_shard = 0;
            w->crc = 0;
            int32_t zeros[HEADER_WORDS] = {0};
            fwrite_check(zeros, 4, HEADER_WORDS, w->file.f, w->file.tmp_path);
        }
        w->buf[w->buffered++] = (uint16_t)tokens[i];
        w->in_shard++;
        w->total++;
        if (w->buffered == sizeof(w->buf) / sizeof(w->buf[0])) shard_flush(w);
        if (w->in_shard == (uint64_t)w->shard_tokens) shard_finish(w);
    }
}

/* The output side: both splits' writers and the document count that drives the val rule. */
typedef struct {
    ShardWriter train, val;
    ShardWriter* current; /* the split of the document being written */
    long long documents, val_documents, bytes_done, separators;
} Output;

/* Appends chunk c's documents (encoded in e) to their splits and adds its invalid UTF-8 to its file's;
 * chunks must come in input order. Exits with the chunk's error (a broken JSON line, a piece over
 * TOKENIZER_MAX_PIECE_BYTES), if any. */
static void write_chunk(Output* out, const Encoded* e, const Chunk* c, FileList* files, int eot_token, double val_fraction) {
    stop_if_signalled();
    if (e->error[0]) fatalf("%s", e->error);
    if (e->invalid_utf8) {
        if (!files->invalid_utf8[c->file]) files->first_invalid[c->file] = c->offset + (long long)e->first_invalid;
        files->invalid_utf8[c->file] += (long long)e->invalid_utf8;
    }
    for (int k = 0; k < e->num_segments; k++) {
        const Segment* sg = &e->segments[k];
        if (sg->starts_document) {
            int is_val = floor((double)(out->documents + 1) * val_fraction) > floor((double)out->documents * val_fraction);
            out->current = is_val ? &out->val : &out->train;
            out->val_documents += is_val;
            out->documents++;
            shard_write(out->current, &eot_token, 1);
        }
        shard_write(out->current, e->output.ids + sg->first, sg->count);
    }
    out->separators += e->separators;
    out->bytes_done += (long long)c->len;
}

/* removes w's DIR/<name>_NNNNNN.bin (and .bin.tmp: a killed run's) beyond the shards this run wrote,
 * left from an earlier, larger run; one that cannot be removed is an error (the trainer's glob would read it) */
static int remove_stale_shards(const ShardWriter* w) {
    int removed = 0;
    for (int k = w->shards_done;; k++) {
        char paths[2][4200];
        shard_path(w, k, "", paths[0], sizeof(paths[0]));
        shard_path(w, k, ".tmp", paths[1], sizeof(paths[1]));
        int gone = 0;
        for (int i = 0; i < 2; i++) {
            if (unlink(paths[i]) == 0) gone++;
            else if (errno != ENOENT)
                sys_fatalf("%s: cannot delete this shard of an earlier, larger run (the new shards are written; a trainer reading "
                           "%s/%s_*.bin would take it too): %s", paths[i], w->dir, w->name, strerror(errno));
        }
        if (!gone) break;
        removed += gone;
    }
    return removed;
}


/* ----------------------------------------------------------------------------
 * driver */
typedef struct {
    FILE* f;
    int file; /* index of the open file, or -1 */
    unsigned char* carry;
    size_t carry_len;
    size_t read_size;
    int starts_document;
    long long line;
    long long offset; /* the byte offset in the file of the carry's first byte (of the next block's, if none) */
} Reader;

typedef struct {
    Chunk* chunks;
    int num_chunks, cap_chunks;
    unsigned char** blocks;
    int num_blocks, cap_blocks;
    size_t bytes;
} Batch;

static Chunk* batch_add_chunk(Batch* b) {
    if (b->num_chunks == b->cap_chunks) {
        b->cap_chunks = b->cap_chunks ? 2 * b->cap_chunks : 256;
        b->chunks = (Chunk*)realloc_check(b->chunks, b->cap_chunks * sizeof(Chunk));
    }
    Chunk* c = &b->chunks[b->num_chunks++];
    memset(c, 0, sizeof(*c));
    return c;
}

static void batch_add_block(Batch* b, unsigned char* block) {
    if (b->num_blocks == b->cap_blocks) {
        b->cap_blocks = b->cap_blocks ? 2 * b->cap_blocks : 64;
        b->blocks = (unsigned char**)realloc_check(b->blocks, b->cap_blocks * sizeof(unsigned char*));
    }
    b->blocks[b->num_blocks++] = block;
}

static long long count_lines(const unsigned char* s, size_t n) {
    long long k = 0;
    for (const unsigned char* p = s; (p = (const unsigned char*)memchr(p, '\n', n - (size_t)(p - s))) != NULL; p++) k++;
    return k;
}

/* Reads the next block of the current file (opening the next file when needed) and cuts it into
 * chunks appended to b; bytes after the last cut carry over to the next block. Returns 0 when all
 * files are done. */
static int read_block(Reader* r, Batch* b, const FileList* files, const Options* o) {
    int first = !r->f; /* the file's first block (then there is no carry) */
    if (!r->f) {
        if (r->file + 1 >= files->count) return 0;
        r->file++;
        r->f = fopen_check(files->paths[r->file], "rb");
        r->starts_document = 1;
        r->line = 1;
        r->offset = 0;
        long long size = files->sizes[r->file]; /* one read for a small file (+ 1 byte: its end is seen) */
        r->read_size = size > 0 && size < READ_BYTES ? (size_t)size + 1 : READ_BYTES;
    }
    const char* path = files->paths[r->file];
    int jsonl = files->is_jsonl[r->file];
    unsigned char* block = (unsigned char*)realloc(r->carry, r->carry_len + r->read_size); /* the carry first */
    if (!block) sys_fatalf("%s: out of memory reading %zu bytes (no cut point found in the %zu before)", path, r->read_size, r->carry_len);
    size_t got = fread(block + r->carry_len, 1, r->read_size, r->f);
    if (ferror(r->f)) sys_fatalf("%s: read failed: %s", path, strerror(errno));
    int eof = got < r->read_size;
    if (first && files->is_stream[r->file] && not_text(block, got)) fatalf("%s: " NOT_TEXT, path);
    if (first && got >= 3 && memcmp(block, "\xEF\xBB\xBF", 3) == 0) { /* a UTF-8 byte order mark (as Python's utf-8-sig) */
        memmove(block, block + 3, got - 3);
        got -= 3;
        r->offset = 3;
    }
    size_t n = r->carry_len + got;
    r->carry = NULL;
    r->carry_len = 0;
    size_t pos = 0;
    while (pos < n) {
        int next_starts = 0;
        size_t cut = n - pos <= CHUNK_BYTES && eof ? n : find_cut(block, n, eof, pos + CHUNK_BYTES, jsonl, o->doc_separator, &next_starts);
        if (cut == 0 && eof) cut = n;
        if (cut == 0) break;
        Chunk* c = batch_add_chunk(b);
        c->data = block + pos;
        c->len = cut - pos;
        c->file = r->file;
        c->offset = r->offset + (long long)pos;
        c->starts_document = r->starts_document;
        c->first_line = r->line;
        if (jsonl) r->line += count_lines(block + pos, cut - pos);
        r->starts_document = next_starts;
        b->bytes += cut - pos;
        pos = cut;
    }
    if (pos == 0 && n > 0) { /* no cut point yet: the block is the carry, and the next read is larger (to the cap) */
        if (n >= MAX_UNCUT_BYTES && jsonl) /* the line that does not end: the last one (no '\n' after the lines before it) */
            fatalf("%s:%lld: no cut point in %u MiB: a JSON line that long (not JSON lines?); prepare_data holds at most that much uncut",
                   path, r->line + count_lines(block, n), MAX_UNCUT_BYTES >> 20);
        if (n >= MAX_UNCUT_BYTES) /* with separators a document is cut only at a line start after a non-space character */
            fatalf("%s: no cut point in %u MiB (a line that long, or text without white space before a word%s): not a text corpus? "
                   "split it (prepare_data holds at most that much uncut)", path, MAX_UNCUT_BYTES >> 20,
                   o->doc_separator ? "; with --doc-separator, also a document without a separator line whose lines end in "
                                      "\\r\\n or are indented: a cut there would change its tokens" : "");
        r->carry = block;
        r->carry_len = n;
        r->read_size = 2 * r->read_size < MAX_UNCUT_BYTES - n ? 2 * r->read_size : MAX_UNCUT_BYTES - n;
    } else {
        if (n > 0) batch_add_block(b, block);
        else free(block); /* an empty file: nothing points into it */
        r->offset += (long long)pos;
        if (pos < n) {
            r->carry_len = n - pos;
            r->carry = (unsigned char*)malloc_check(r->carry_len);
            memcpy(r->carry, block + pos, r->carry_len);
        }
        r->read_size = READ_BYTES; /* after a carry's doubling, or a small file that grew since it was listed */
    }
    if (eof) {
        fclose_check(r->f, path);
        r->f = NULL;
    }
    return 1;
}

/* Empties b and reads blocks into it until it holds BATCH_BYTES or the input ends; returns 0 at the end. */
static int read_batch(Reader* r, Batch* b, const FileList* files, const Options* o) {
    memset(b, 0, sizeof(*b));
    int more = 1;
    while (b->bytes < BATCH_BYTES && (more = read_block(r, b, files, o))) {}
    return more;
}

static void batch_free(Batch* b) {
    for (int k = 0; k < b->num_blocks; k++) free(b->blocks[k]);
    free(b->blocks);
    free(b->chunks);
    memset(b, 0, sizeof(*b));
}

#define MAX_UTF8_WARNINGS 20 /* files named in invalid-UTF-8 warnings; the rest are counted */

static double now_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + 1e-9 * ts.tv_nsec;
}

int main(int argc, char** argv) {
    std_fds_open();
    Options o;
    parse_options(argc, argv, &o);
    Tokenizer t;
    tokenizer_load(&t, o.tokenizer_path);
    if (t.vocab_size > 65536) fatalf("%s: vocab size %d does not fit the uint16 shards", o.tokenizer_path, t.vocab_size);
    FileList files;
    gather_inputs(&files, &o);
    if (mkdir(o.output_dir, 0777) != 0 && errno != EEXIST)
        sys_fatalf("%s: cannot create output directory: %s", o.output_dir, strerror(errno));
    struct stat st;
    if (stat(o.output_dir, &st) != 0 || !S_ISDIR(st.st_mode)) fatalf("%s: output path is not a directory", o.output_dir);
    if (access(o.output_dir, W_OK | X_OK) != 0) sys_fatalf("%s: output directory is not writable: %s", o.output_dir, strerror(errno));
    /* an exclusive lock on the directory itself for the life of the process (the kernel drops it however the process
     * ends; nothing is left in the directory); its descriptor stays open */
    int dir_fd = open(o.output_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dir_fd < 0) sys_fatalf("%s: cannot open the output directory: %s", o.output_dir, strerror(errno));
    if (flock(dir_fd, LOCK_EX | LOCK_NB) != 0) {
        if (errno == EWOULDBLOCK) fatalf("%s: another prepare_data is writing to this output directory", o.output_dir);
        fprintf(stderr, "warning: %s: cannot lock it (%s): nothing stops a second prepare_data from writing here too\n", o.output_dir,
                strerror(errno));
    }

    static Output out; /* large buffers: not on the stack */
    ShardWriter* const train = &out.train;
    ShardWriter* const val = &out.val;
    train->name = "train";
    val->name = "val";
    train->dir = val->dir = o.output_dir;
    train->shard_tokens = val->shard_tokens = o.shard_tokens;
    train->vocab_size = val->vocab_size = t.vocab_size;
    out.current = train;
    open_writers_[0] = train;
    open_writers_[1] = val;
    atexit(remove_tmp_files);
    preempt_install();

    int progress_tty = isatty(2);
    double start = now_seconds(), last_report = start;
    Reader reader = {NULL, -1, NULL, 0, READ_BYTES, 1, 1, 0};
    Batch batches[2];
    int more = read_batch(&reader, &batches[0], &files, &o);
    for (int cur = 0, last = 0; !last; cur = 1 - cur) {
        Batch* b = &batches[cur];
        last = !more;
        /* one thread reads the next batch, then joins the others; a chunk is written once the ones
         * before it are (omp ordered), so the shards are the same for any number of threads */
#pragma omp parallel num_threads(o.threads)
        {
            Encoded encoded;
            memset(&encoded, 0, sizeof(encoded));
#pragma omp single nowait
            if (more) more = read_batch(&reader, &batches[1 - cur], &files, &o);
#pragma omp for schedule(dynamic, 1) ordered
            for (int c = 0; c < b->num_chunks; c++) {
                encode_chunk(&b->chunks[c], &encoded, &t, &o, &files);
#pragma omp ordered
                write_chunk(&out, &encoded, &b->chunks[c], &files, t.eot_token, o.val_fraction);
            }
            encoded_free(&encoded);
        }
        batch_free(b);
        stop_if_signalled();
        double now = now_seconds();
        if (now - last_report > (progress_tty ? 0.25 : 5.0) || last) {
            double rate = out.bytes_done / 1e6 / (now - start + 1e-9);
            char eta[64] = ""; /* none when the listed sizes are passed (a pipe, a growing file) */
            if (rate > 0 && files.total_bytes > out.bytes_done)
                snprintf(eta, sizeof(eta), ", ETA %.0f s", (files.total_bytes - out.bytes_done) / 1e6 / rate);
            fprintf(stderr, "%s%.1f/%.1f MB, %.1f MB/s, %llu tokens%s%s", progress_tty ? "\r" : "", out.bytes_done / 1e6,
                    files.total_bytes / 1e6, rate, (unsigned long long)(train->total + val->total), eta, progress_tty ? "   " : "\n");
            last_report = now;
        }
    }
    if (out.documents == 0) fatalf("%s: the inputs hold no documents (all empty)", o.inputs.items[0]);
    if (train->total == 0) fatalf("%s: every document went to val (%lld documents, --val-fraction %g)", o.inputs.items[0], out.documents, o.val_fraction);
    if (train->open) shard_finish(train);
    if (val->open) shard_finish(val);
    stop_if_signalled(); /* the last chance: from here the shards go under their names */
    shard_commit_all(train);
    shard_commit_all(val);
    int stale = remove_stale_shards(train) + remove_stale_shards(val);
    double elapsed = now_seconds() - start;
    fprintf(stderr, "%s%lld documents from %d files (%.1f MB) in %.2f s, %.1f MB/s, %d threads\n", progress_tty ? "\r" : "",
            out.documents, files.count, out.bytes_done / 1e6, elapsed, out.bytes_done / 1e6 / elapsed, o.threads);
    if (files.binaries)
        fprintf(stderr, "skipped %d binary files in the input directories (a NUL byte in their first 8 KiB or a UTF-16 byte order mark: compressed, or UTF-16/UTF-32)\n",
                files.binaries);
    fprintf(stderr, "train: %llu tokens in %d shards; val: %llu tokens (%lld documents) in %d shards -> %s%s\n",
            (unsigned long long)train->total, train->shards_done, (unsigned long long)val->total, out.val_documents,
            val->shards_done, o.output_dir, stale ? " (removed stale shards of an earlier run)" : "");
    if (val->total == 0 && o.val_fraction > 0)
        fprintf(stderr, "warning: val is empty: %lld documents are fewer than 1/%g\n", out.documents, o.val_fraction);
    int text_files = 0;
    for (int i = 0; i < files.count; i++) text_files += !files.is_jsonl[i];
    if (o.doc_separator && out.separators == 0 && text_files > 0)
        fprintf(stderr, "warning: --doc-separator '%s' matched no line of the inputs: each text file was one document "
                        "(a typo? other characters on the separator lines, such as white space?)\n", o.doc_separator);
    int invalid_files = 0;
    for (int i = 0; i < files.count; i++) {
        if (!files.invalid_utf8[i]) continue;
        if (invalid_files++ < MAX_UTF8_WARNINGS)
            fprintf(stderr, "warning: %s: %lld byte%s of invalid UTF-8 (first at byte offset %lld); the tokenizer keeps each as a "
                            "byte token (convert a Latin-1/cp1252 file with iconv -f cp1252 -t utf-8)\n",
                    files.paths[i], files.invalid_utf8[i], files.invalid_utf8[i] == 1 ? "" : "s", files.first_invalid[i]);
    }
    if (invalid_files > MAX_UTF8_WARNINGS)
        fprintf(stderr, "warning: and %d more files with invalid UTF-8\n", invalid_files - MAX_UTF8_WARNINGS);
    for (int i = 0; i < files.count; i++) free(files.paths[i]);
    free(files.paths);
    free(files.is_jsonl);
    free(files.is_stream);
    free(files.sizes);
    free(files.invalid_utf8);
    free(files.first_invalid);
    free(o.inputs.items);
    tokenizer_free(&t);
    return 0;
}
