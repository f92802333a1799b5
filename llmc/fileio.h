/*
 * llmc/fileio.h — checked file I/O and the common binary-file header.
 *
 * Every system or file call is checked, through a macro that records the source location of the check:
 * its failure is the one line "error: <path>: <what>: <reason> (file:line)" on stderr and exit status 1
 * (X_check, sys_fatalf), or that line's text in the caller's buffer (X_try, sys_error) for a caller that
 * must not exit. A bad file (a wrong magic, a truncated payload) is told by file_error_, naming the file and
 * what is wrong with it, without a source location.
 * Every binary file of the project (doc/formats.md) begins with a 1024-byte
 * header of 256 little-endian 32-bit words:
 *   h[0] magic, h[1] version, h[2] CRC-32 of the payload (IEEE, as zlib.crc32),
 *   h[3] payload bytes (low 32 bits), h[4] payload bytes (high 32 bits),
 *   h[5..255] fields of the file kind (unused words are zero).
 * header_check() validates magic, version, file length and the payload size;
 * the payload CRC is checked by whoever reads the payload (crc32_update over it).
 *
 * No global mutable state except crc32's table, built once on first use
 * (thread-safe: built under a pthread_once), and the fatal-error hook below.
 */
#ifndef LLMC_FILEIO_H
#define LLMC_FILEIO_H

#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* fseeko, fileno, fsync under -std=c11; must precede system headers */
#endif
#define _FILE_OFFSET_BITS 64
#include <ctype.h>
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <fcntl.h>
#include <unistd.h>

#define HEADER_WORDS 256
#define HEADER_BYTES (HEADER_WORDS * 4)

/* ----------------------------------------------------------------------------
 * fatal errors: one line, naming where and what, then exit(1) through fatal_exit.
 *
 * fatal_exit(status) calls the fatal hook, if one is set, before exit(status). The hook is this
 * header's one piece of mutable global state (one per translation unit, NULL by default); only
 * the fuzz harnesses (dev/fuzz/) set it, to a function that longjmps back into the harness so a
 * parser's error on bad input ends one fuzz input instead of the process. A hook that returns
 * lets the exit happen. */
typedef void (*FatalHook)(int status);
static FatalHook fatal_hook_ = NULL;
static inline void fatal_set_hook(FatalHook hook) { fatal_hook_ = hook; }
static inline void fatal_exit(int status) __attribute__((noreturn));
static inline void fatal_exit(int status) {
    if (fatal_hook_) fatal_hook_(status);
    exit(status);
}
/* "error: MESSAGE SUFFIX\n" in one write, so that the lines of several processes on one stderr (the
 * ranks under mpirun) do not interleave mid-line; a message beyond 16 KiB is cut. stdout is flushed
 * first: in a log of both, the lines that led to the error come before it. */
static inline void fatal_print_(const char* suffix, const char* fmt, va_list ap) {
    char line[16384];
    const size_t room = sizeof(line) - 1; /* the text, then '\n' */
    size_t n = 7;
    memcpy(line, "error: ", n);
    int k = vsnprintf(line + n, room - n, fmt, ap);
    n += k < 0 ? 0 : (size_t)k < room - n ? (size_t)k : room - n - 1;
    k = snprintf(line + n, room - n, "%s", suffix);
    n += k < 0 ? 0 : (size_t)k < room - n ? (size_t)k : room - n - 1;
    line[n++] = '\n';
    fflush(stdout);
    fflush(stderr);
    if (write(2, line, (size_t)n) < 0) return; /* nothing else can report it */
}
static inline void fatalf(const char* fmt, ...) __attribute__((noreturn, format(printf, 1, 2)));
static inline void fatalf(const char* fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fatal_print_("", fmt, ap);
    va_end(ap);
    fatal_exit(1);
}
/* fatalf's line without the exit: for an error the caller handles (a run that checkpoints before it exits) */
static inline void error_print(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
static inline void error_print(const char* fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fatal_print_("", fmt, ap);
    va_end(ap);
}
/* a failed system or file call: "error: MESSAGE (file:line)", the location of the check, and exit(1) */
#define sys_fatalf(...) sys_fatalf_(__FILE__, __LINE__, __VA_ARGS__)
static inline void sys_fatalf_(const char* file, int line, const char* fmt, ...) __attribute__((noreturn, format(printf, 3, 4)));
static inline void sys_fatalf_(const char* file, int line, const char* fmt, ...) {
    char at[4200];
    snprintf(at, sizeof(at), " (%s:%d)", file, line);
    va_list ap;
    va_start(ap, fmt);
    fatal_print_(at, fmt, ap);
    va_end(ap);
    fatal_exit(1);
}
/* a bad command line: "error: ... (see --help)" and exit status 2 (the tools' flag parsers) */
static inline void usagef(const char* fmt, ...) __attribute__((noreturn, format(printf, 1, 2)));
static inline void usagef(const char* fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fatal_print_(" (see --help)", fmt, ap);
    va_end(ap);
    fatal_exit(2);
}

/* The checks below come in two forms: X_try reports a failure (0, or −1 with the one-line message in err:
 * a loader that must not exit mid-run, llmc/dataloader.h) and X_check exits with that message through
 * fatalf. Each is a macro: the (file:line) of a failed call's message is where the macro was used. */
/* a bad file's message into err (cap bytes), naming the file and what is wrong; returns −1 */
static inline int file_error_(char* err, size_t cap, const char* fmt, ...) __attribute__((format(printf, 3, 4)));
static inline int file_error_(char* err, size_t cap, const char* fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, cap, fmt, ap);
    va_end(ap);
    return -1;
}
/* a failed call's message into err (cap bytes): "MESSAGE (file:line)", the location of the check; returns −1 */
#define sys_error(err, cap, ...) sys_error_(err, cap, __FILE__, __LINE__, __VA_ARGS__)
static inline int sys_error_(char* err, size_t cap, const char* file, int line, const char* fmt, ...) __attribute__((format(printf, 5, 6)));
static inline int sys_error_(char* err, size_t cap, const char* file, int line, const char* fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int k = vsnprintf(err, cap, fmt, ap);
    va_end(ap);
    size_t n = k < 0 ? 0 : (size_t)k < cap ? (size_t)k : cap - 1;
    snprintf(err + n, cap - n, " (%s:%d)", file, line);
    return -1;
}
static inline int fopen_try_(FILE** f, const char* path, const char* mode, char* err, size_t cap, const char* file, int line) {
    *f = fopen(path, mode);
    if (!*f)
        return sys_error_(err, cap, file, line, "%s: cannot open for %s: %s", path, mode[0] == 'r' ? "reading" : "writing",
                          strerror(errno));
    return 0;
}
static inline int fread_try_(void* buf, size_t size, size_t n, FILE* f, const char* path, char* err, size_t cap, const char* file,
                             int line) {
    size_t got = fread(buf, size, n, f);
    if (got == n) return 0;
    if (feof(f))
        return file_error_(err, cap, "%s: file is truncated (wanted %zu items of %zu bytes, got %zu)", path, n, size, got);
    return sys_error_(err, cap, file, line, "%s: read failed: %s", path, strerror(errno));
}
static inline int fseek_try_(FILE* f, long long off, int whence, const char* path, char* err, size_t cap, const char* file, int line) {
    if (fseeko(f, (off_t)off, whence) != 0) return sys_error_(err, cap, file, line, "%s: seek failed: %s", path, strerror(errno));
    return 0;
}
static inline FILE* fopen_check_(const char* path, const char* mode, const char* file, int line) {
    FILE* f;
    char err[4600];
    if (fopen_try_(&f, path, mode, err, sizeof(err), file, line) != 0) fatalf("%s", err);
    return f;
}
static inline void fread_check_(void* buf, size_t size, size_t n, FILE* f, const char* path, const char* file, int line) {
    char err[4600];
    if (fread_try_(buf, size, n, f, path, err, sizeof(err), file, line) != 0) fatalf("%s", err);
}
static inline void fwrite_check_(const void* buf, size_t size, size_t n, FILE* f, const char* path, const char* file, int line) {
    if (fwrite(buf, size, n, f) != n) sys_fatalf_(file, line, "%s: write failed: %s", path, strerror(errno));
}
static inline void fseek_check_(FILE* f, long long off, int whence, const char* path, const char* file, int line) {
    char err[4600];
    if (fseek_try_(f, off, whence, path, err, sizeof(err), file, line) != 0) fatalf("%s", err);
}
/* fclose after flushing; for files being written also fsync, so a rename that follows is durable */
static inline void fclose_check_(FILE* f, int sync, const char* path, const char* file, int line) {
    if (fflush(f) != 0) sys_fatalf_(file, line, "%s: write failed: %s", path, strerror(errno));
    if (sync && fsync(fileno(f)) != 0) sys_fatalf_(file, line, "%s: fsync failed: %s", path, strerror(errno));
    if (fclose(f) != 0) sys_fatalf_(file, line, "%s: close failed: %s", path, strerror(errno));
}
static inline void* malloc_check_(size_t n, const char* file, int line) {
    void* p = malloc(n ? n : 1);
    if (!p) sys_fatalf_(file, line, "out of memory allocating %zu bytes", n);
    return p;
}
static inline void* calloc_check_(size_t n, size_t size, const char* file, int line) {
    void* p = calloc(n ? n : 1, size ? size : 1);
    if (!p) sys_fatalf_(file, line, "out of memory allocating %zu x %zu bytes", n, size);
    return p;
}
/* realloc that exits on failure (p is then not freed: the process ends) */
static inline void* realloc_check_(void* p, size_t n, const char* file, int line) {
    void* q = realloc(p, n ? n : 1);
    if (!q) sys_fatalf_(file, line, "out of memory allocating %zu bytes", n);
    return q;
}
#define fopen_try(f, path, mode, err, cap) fopen_try_(f, path, mode, err, cap, __FILE__, __LINE__)
#define fread_try(buf, size, n, f, path, err, cap) fread_try_(buf, size, n, f, path, err, cap, __FILE__, __LINE__)
#define fseek_try(f, off, whence, path, err, cap) fseek_try_(f, off, whence, path, err, cap, __FILE__, __LINE__)
#define fopen_check(path, mode) fopen_check_(path, mode, __FILE__, __LINE__)
#define fread_check(buf, size, n, f, path) fread_check_(buf, size, n, f, path, __FILE__, __LINE__)
#define fwrite_check(buf, size, n, f, path) fwrite_check_(buf, size, n, f, path, __FILE__, __LINE__)
#define fseek_check(f, off, whence, path) fseek_check_(f, off, whence, path, __FILE__, __LINE__)
#define fclose_check(f, path) fclose_check_(f, 0, path, __FILE__, __LINE__)
#define fclose_sync_check(f, path) fclose_check_(f, 1, path, __FILE__, __LINE__)
#define malloc_check(n) malloc_check_(n, __FILE__, __LINE__)
#define calloc_check(n, size) calloc_check_(n, size, __FILE__, __LINE__)
#define realloc_check(p, n) realloc_check_(p, n, __FILE__, __LINE__)

/* Levenshtein distance of a and b ignoring case (--Max-Steps is one typo of --max-steps away, not three), for the "did you
 * mean" of unknown flags (both shorter than 64 characters; longer ones count as far) */
static inline int edit_distance(const char* a, const char* b) {
    size_t n = strlen(a), m = strlen(b);
    if (n >= 64 || m >= 64) return 1 << 20;
    int row[64];
    for (size_t j = 0; j <= m; j++) row[j] = (int)j;
    for (size_t i = 1; i <= n; i++) {
        int diag = row[0];
        row[0] = (int)i;
        for (size_t j = 1; j <= m; j++) {
            int up = row[j];
            int best = diag + (tolower((unsigned char)a[i - 1]) != tolower((unsigned char)b[j - 1]));
            if (up + 1 < best) best = up + 1;
            if (row[j - 1] + 1 < best) best = row[j - 1] + 1;
            row[j] = best;
            diag = up;
        }
    }
    return row[m];
}

static inline int directory_error_(char* err, size_t cap, const char* path) {
    return file_error_(err, cap, "%s: a directory, where a file is expected (a model: DIR/model_NNNNNNNN.bin, or -o DIR -y 1 to "
                       "resume; token shards: a glob such as -i 'DIR/train_*.bin')", path);
}

/* size of an open file in bytes; a directory is an error (fopen opens one, and its reads fail) */
#define file_size_try(f, path, size, err, cap) file_size_try_(f, path, size, err, cap, __FILE__, __LINE__)
static inline int file_size_try_(FILE* f, const char* path, long long* size, char* err, size_t cap, const char* file, int line) {
    struct stat st;
    if (fstat(fileno(f), &st) != 0) return sys_error_(err, cap, file, line, "%s: stat failed: %s", path, strerror(errno));
    if (S_ISDIR(st.st_mode)) return directory_error_(err, cap, path);
    *size = (long long)st.st_size;
    return 0;
}

/* Opens path for reading as a regular file (a model, state, tokenizer, shard or reference file): a directory, a FIFO, a
 * socket or a device is an error, not a wait (opened with O_NONBLOCK: a FIFO without a writer blocks open(2) for ever,
 * and a stop signal cannot end it) */
#define fopen_regular_try(f, path, err, cap) fopen_regular_try_(f, path, err, cap, __FILE__, __LINE__)
#define fopen_regular_check(path) fopen_regular_check_(path, __FILE__, __LINE__)
static inline int fopen_regular_try_(FILE** f, const char* path, char* err, size_t cap, const char* file, int line) {
    *f = NULL;
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) return sys_error_(err, cap, file, line, "%s: cannot open for reading: %s", path, strerror(errno));
    struct stat st;
    int rc = 0;
    if (fstat(fd, &st) != 0) rc = sys_error_(err, cap, file, line, "%s: stat failed: %s", path, strerror(errno));
    else if (S_ISDIR(st.st_mode)) rc = directory_error_(err, cap, path);
    else if (!S_ISREG(st.st_mode))
        rc = file_error_(err, cap, "%s: not a regular file (a %s), where a file is expected", path,
                         S_ISFIFO(st.st_mode) ? "FIFO" : S_ISSOCK(st.st_mode) ? "socket" : "device");
    else if (fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK) != 0) /* for the reads: a FUSE file system passes it on */
        rc = sys_error_(err, cap, file, line, "%s: fcntl failed: %s", path, strerror(errno));
    else if (!(*f = fdopen(fd, "rb"))) rc = sys_error_(err, cap, file, line, "%s: fdopen failed: %s", path, strerror(errno));
    if (rc != 0) close(fd);
    return rc;
}
static inline FILE* fopen_regular_check_(const char* path, const char* file, int line) {
    FILE* f;
    char err[4600];
    if (fopen_regular_try_(&f, path, err, sizeof(err), file, line) != 0) fatalf("%s", err);
    return f;
}

/* File descriptors 0, 1 and 2 that a launcher left closed are opened on /dev/null: otherwise the next file opened (a
 * lock file, a checkpoint) would take one, and the log, or error messages, would be written into it. */
static inline void std_fds_open(void) {
    for (int fd = 0; fd <= 2; fd++) {
        if (fcntl(fd, F_GETFD) != -1 || errno != EBADF) continue;
        int null_fd = open("/dev/null", fd == 0 ? O_RDONLY : O_WRONLY);
        if (null_fd != fd) exit(71); /* nothing can be reported: stderr may be the one missing */
    }
}
#define file_size_check(f, path) file_size_check_(f, path, __FILE__, __LINE__)
static inline long long file_size_check_(FILE* f, const char* path, const char* file, int line) {
    long long size = 0;
    char err[4600];
    if (file_size_try_(f, path, &size, err, sizeof(err), file, line) != 0) fatalf("%s", err);
    return size;
}

/* What a file whose first header word is `magic` is, for the message when another kind was expected ("" if
 * unknown): this project's formats (doc/formats.md) and llm.c's (its model, state, tokenizer and shard files). */
static inline const char* file_magic_hint(uint32_t magic) {
    switch (magic) {
    case 0x4D545047u: return ": it is a model file (GPTM, this project's format), for -e of the trainers and sample_gpt";
    case 0x53545047u: return ": it is a training state file (GPTS); its checkpoint's model file is the model_NNNNNNNN.bin beside it";
    case 0x4B4F5447u: return ": it is a token shard (GTOK), training data for -i / -j";
    case 0x45504247u: return ": it is a tokenizer file (GBPE), for --tokenizer";
    case 0x46455247u: return ": it is a reference state (GREF), for test_gpt";
    case 20240326u: return ": it is an llm.c model file: convert it with python3 scripts/llmc.py import FILE MODEL.bin";
    case 20240527u: return ": it is an llm.c training state file (its weights are the llm.c model file beside it: scripts/llmc.py import)";
    case 20240328u: return ": it is an llm.c tokenizer file (ours: data/gpt2_tokenizer.bin)";
    case 20240520u: return ": it is an llm.c token shard, training data for -i / -j";
    case 20240801u: return ": it is an llm.c LLaMA-3 token shard (uint32 tokens), which this build does not read";
    }
    return "";
}

/* ----------------------------------------------------------------------------
 * CRC-32 (IEEE 802.3, reflected, poly 0xEDB88320), equal to Python's zlib.crc32.
 * crc32_update(0, buf, n) starts a checksum; feed more with the returned value.
 * Slicing-by-8 tables: about 1-2 GB/s per core. */
static uint32_t crc32_table_[8][256];
static pthread_once_t crc32_once_ = PTHREAD_ONCE_INIT;
static void crc32_init_(void) {
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++) c = (c & 1) ? 0xEDB88320u ^ (c >> 1) : c >> 1;
        crc32_table_[0][i] = c;
    }
    for (int t = 1; t < 8; t++)
        for (uint32_t i = 0; i < 256; i++)
            crc32_table_[t][i] = (crc32_table_[t - 1][i] >> 8) ^ crc32_table_[0][crc32_table_[t - 1][i] & 0xFF];
}
static inline uint32_t crc32_update(uint32_t crc, const void* data, size_t n) {
    pthread_once(&crc32_once_, crc32_init_);
    const uint8_t* p = (const uint8_t*)data;
    crc = ~crc;
    while (n >= 8) {
        uint32_t lo, hi;
        memcpy(&lo, p, 4);
        memcpy(&hi, p + 4, 4);
        lo ^= crc;
        crc = crc32_table_[7][lo & 0xFF] ^ crc32_table_[6][(lo >> 8) & 0xFF] ^ crc32_table_[5][(lo >> 16) & 0xFF] ^
              crc32_table_[4][lo >> 24] ^ crc32_table_[3][hi & 0xFF] ^ crc32_table_[2][(hi >> 8) & 0xFF] ^
              crc32_table_[1][(hi >> 16) & 0xFF] ^ crc32_table_[0][hi >> 24];
        p += 8;
        n -= 8;
    }
    while (n--) crc = crc32_table_[0][(crc ^ *p++) & 0xFF] ^ (crc >> 8);
    return ~crc;
}

/* ----------------------------------------------------------------------------
 * the common header */
static inline uint64_t header_payload_bytes(const int32_t* h) {
    return (uint64_t)(uint32_t)h[3] | ((uint64_t)(uint32_t)h[4] << 32);
}
static inline void header_init(int32_t* h, uint32_t magic, int32_t version) {
    memset(h, 0, HEADER_BYTES);
    h[0] = (int32_t)magic;
    h[1] = version;
}
static inline void header_set_payload(int32_t* h, uint64_t bytes, uint32_t crc) {
    h[2] = (int32_t)crc;
    h[3] = (int32_t)(uint32_t)(bytes & 0xFFFFFFFFu);
    h[4] = (int32_t)(uint32_t)(bytes >> 32);
}
/* CRC-32 of header words 0..254, which a kind that seals its header keeps in word 255 */
static inline uint32_t header_crc(const int32_t* h) { return crc32_update(0, h, (HEADER_WORDS - 1) * 4); }
static inline uint64_t header_get_u64(const int32_t* h, int lo) {
    return (uint64_t)(uint32_t)h[lo] | ((uint64_t)(uint32_t)h[lo + 1] << 32);
}
static inline void header_set_u64(int32_t* h, int lo, uint64_t v) {
    h[lo] = (int32_t)(uint32_t)(v & 0xFFFFFFFFu);
    h[lo + 1] = (int32_t)(uint32_t)(v >> 32);
}
static inline float header_get_f32(const int32_t* h, int i) { float x; memcpy(&x, &h[i], 4); return x; }
static inline void header_set_f32(int32_t* h, int i, float x) { memcpy(&h[i], &x, 4); }

/* Reads the header of `path` (opened as f) and checks magic, version and that the
 * file length equals 1024 + payload bytes. `kind` names the file kind in messages
 * ("model file", "token shard", ...). header_read_check exits with a one-line error on mismatch. */
static inline int header_read_try(FILE* f, const char* path, const char* kind, uint32_t magic, int32_t version, int32_t* h, char* err,
                                  size_t cap) {
    long long size = 0;
    if (file_size_try(f, path, &size, err, cap) != 0) return -1;
    if (size < HEADER_BYTES)
        return file_error_(err, cap, "%s: not a %s: %lld bytes, shorter than the %d-byte header", path, kind, size, HEADER_BYTES);
    if (fread_try(h, 4, HEADER_WORDS, f, path, err, cap) != 0) return -1;
    if ((uint32_t)h[0] != magic)
        return file_error_(err, cap, "%s: not a %s: magic 0x%08x, expected 0x%08x%s", path, kind, (uint32_t)h[0], magic,
                           file_magic_hint((uint32_t)h[0]));
    if (h[1] != version)
        return file_error_(err, cap, "%s: %s version %d is not supported (this build reads version %d)", path, kind, h[1], version);
    uint64_t payload = header_payload_bytes(h);
    if ((uint64_t)(size - HEADER_BYTES) != payload)
        return file_error_(err, cap, "%s: %s is %s: header says %llu payload bytes, file has %lld", path, kind,
                           (uint64_t)(size - HEADER_BYTES) < payload ? "truncated" : "too long", (unsigned long long)payload,
                           size - HEADER_BYTES);
    return 0;
}
static inline void header_read_check(FILE* f, const char* path, const char* kind, uint32_t magic,
                                     int32_t version, int32_t* h) {
    char err[4600];
    if (header_read_try(f, path, kind, magic, version, h, err, sizeof(err)) != 0) fatalf("%s", err);
}

/* Reads n bytes of payload into buf and folds them into *crc. Large reads go in
 * 64 MiB pieces so that progress is bounded. */
static inline int payload_read_try(FILE* f, const char* path, void* buf, size_t n, uint32_t* crc, char* err, size_t cap) {
    uint8_t* p = (uint8_t*)buf;
    while (n) {
        size_t piece = n < (64u << 20) ? n : (64u << 20);
        if (fread_try(p, 1, piece, f, path, err, cap) != 0) return -1;
        if (crc) *crc = crc32_update(*crc, p, piece);
        p += piece;
        n -= piece;
    }
    return 0;
}
static inline void payload_read(FILE* f, const char* path, void* buf, size_t n, uint32_t* crc) {
    char err[4600];
    if (payload_read_try(f, path, buf, n, crc, err, sizeof(err)) != 0) fatalf("%s", err);
}
static inline int payload_crc_try(const int32_t* h, uint32_t crc, const char* path, const char* kind, char* err, size_t cap) {
    if ((uint32_t)h[2] != crc)
        return file_error_(err, cap, "%s: %s is corrupt: payload CRC-32 0x%08x, header says 0x%08x", path, kind, crc, (uint32_t)h[2]);
    return 0;
}
static inline void payload_crc_check(const int32_t* h, uint32_t crc, const char* path, const char* kind) {
    char err[4600];
    if (payload_crc_try(h, crc, path, kind, err, sizeof(err)) != 0) fatalf("%s", err);
}

/* Atomic write: data goes to "<path>.tmp", is fsynced, then renamed over path.
 * A reader never sees a half-written file under the final name. */
typedef struct {
    FILE* f;
    char final_path[4096];
    char tmp_path[4112];
} AtomicFile;
static inline void atomic_open(AtomicFile* a, const char* path) {
    size_t len = strlen(path);
    if (len >= sizeof(a->final_path)) fatalf("%s: path too long", path);
    memcpy(a->final_path, path, len + 1);
    memcpy(a->tmp_path, path, len);
    memcpy(a->tmp_path + len, ".tmp", 5);
    a->f = fopen_check(a->tmp_path, "wb");
}
/* fsync of the directory holding path (dir gets its name), so that a rename into it is durable: 0, or
 * the errno (EINVAL, ENOSYS, ENOTSUP: a file system without directory fsync, as some network and FUSE
 * mounts; that counts as done) */
static inline int dir_sync(const char* path, char* dir, size_t cap) {
    const char* slash = strrchr(path, '/');
    if (!slash) snprintf(dir, cap, ".");
    else snprintf(dir, cap, "%.*s", (int)(slash - path == 0 ? 1 : slash - path), path);
    int fd = open(dir, O_RDONLY | O_DIRECTORY);
    if (fd < 0) return errno;
    int err = fsync(fd) == 0 || errno == EINVAL || errno == ENOSYS || errno == ENOTSUP || errno == EOPNOTSUPP ? 0 : errno;
    if (close(fd) != 0 && err == 0) err = errno;
    return err;
}
#define dir_sync_check(path) dir_sync_check_(path, __FILE__, __LINE__)
static inline void dir_sync_check_(const char* path, const char* file, int line) {
    char dir[4096];
    int err = dir_sync(path, dir, sizeof(dir));
    if (err) sys_fatalf_(file, line, "%s: cannot sync the directory: %s", dir, strerror(err));
}

static inline void atomic_commit(AtomicFile* a) {
    fclose_sync_check(a->f, a->tmp_path);
    a->f = NULL;
    if (rename(a->tmp_path, a->final_path) != 0)
        sys_fatalf("%s: rename from %s failed: %s", a->final_path, a->tmp_path, strerror(errno));
    dir_sync_check(a->final_path);
}

#endif
