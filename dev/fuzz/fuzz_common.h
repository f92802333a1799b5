/*
 * dev/fuzz/fuzz_common.h — what every libFuzzer harness of dev/fuzz/ shares.
 *
 * Include it before any llmc/ header. The parsers under test stop on bad input with fatalf /
 * fatal_exit (llmc/fileio.h); here the fatal hook longjmps back into the harness, which turns one
 * rejected input into a normal return. So that a rejected input leaks nothing, the harness's
 * translation unit routes malloc/calloc/realloc/free and fopen/fdopen/fclose through trackers (macros
 * defined below, after the system headers), and fuzz_end() frees and closes whatever the
 * interrupted parser left behind (only objects made inside FUZZ_RUN are tracked; the harness
 * frees its own). Readers take paths: fuzz_file() puts the input into a memfd
 * and returns its /proc/self/fd path.
 *
 * Input layout for the binary formats: byte 0 selects repairs, the rest is the file. Bit 0 sets
 * the header's payload-length words to the real length, bit 1 sets its CRC-32 to the payload's,
 * bit 2 sets word 255 to the CRC-32 of words 0..254 (a training state's sealed header), so
 * mutations reach the checks behind those gates. Global state: the jump buffer, the
 * trackers and the memfd, all private to one harness process.
 */
#ifndef FUZZ_COMMON_H
#define FUZZ_COMMON_H

#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#define _FILE_OFFSET_BITS 64
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <glob.h>
#include <math.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static jmp_buf fuzz_jump_;
static void fuzz_fatal_hook_(int status) { longjmp(fuzz_jump_, status ? status : 1); }

/* live allocations and open files of the current input (a parser holds a handful at a time) */
#define FUZZ_MAX_LIVE 4096
static void* fuzz_live_mem_[FUZZ_MAX_LIVE];
static FILE* fuzz_live_files_[FUZZ_MAX_LIVE];

static int fuzz_active_; /* inside FUZZ_RUN: only what is made there is tracked */
static void fuzz_track_(void** table, void* p) {
    if (!p || !fuzz_active_) return;
    for (int i = 0; i < FUZZ_MAX_LIVE; i++)
        if (!table[i]) {
            table[i] = p;
            return;
        }
    abort(); /* more than FUZZ_MAX_LIVE live objects: a leak in the parser */
}
static void fuzz_untrack_(void** table, void* p) {
    for (int i = 0; p && i < FUZZ_MAX_LIVE; i++)
        if (table[i] == p) {
            table[i] = NULL;
            return;
        }
}
static void* fuzz_malloc(size_t n) {
    void* p = malloc(n);
    fuzz_track_(fuzz_live_mem_, p);
    return p;
}
static void* fuzz_calloc(size_t n, size_t size) {
    void* p = calloc(n, size);
    fuzz_track_(fuzz_live_mem_, p);
    return p;
}
static void* fuzz_realloc(void* old, size_t n) {
    void* p = realloc(old, n);
    if (p) {
        fuzz_untrack_(fuzz_live_mem_, old);
        fuzz_track_(fuzz_live_mem_, p);
    }
    return p;
}
static void fuzz_free(void* p) {
    fuzz_untrack_(fuzz_live_mem_, p);
    free(p);
}
static FILE* fuzz_fopen(const char* path, const char* mode) {
    FILE* f = fopen(path, mode);
    fuzz_track_((void**)fuzz_live_files_, f);
    return f;
}
static FILE* fuzz_fdopen(int fd, const char* mode) {
    FILE* f = fdopen(fd, mode);
    fuzz_track_((void**)fuzz_live_files_, f);
    return f;
}
static int fuzz_fclose(FILE* f) {
    fuzz_untrack_((void**)fuzz_live_files_, f);
    return fclose(f);
}

/* frees and closes what an interrupted parser left; call after every input */
static void fuzz_end(void) {
    for (int i = 0; i < FUZZ_MAX_LIVE; i++) {
        if (fuzz_live_mem_[i]) free(fuzz_live_mem_[i]);
        if (fuzz_live_files_[i]) fclose(fuzz_live_files_[i]);
        fuzz_live_mem_[i] = NULL;
        fuzz_live_files_[i] = NULL;
    }
}

static int fuzz_memfd_ = -1;
static char fuzz_path_[64];

/* the bytes as a file; returns its path */
static const char* fuzz_file(const uint8_t* data, size_t size) {
    if (fuzz_memfd_ < 0) {
        fuzz_memfd_ = memfd_create("fuzz_input", 0);
        if (fuzz_memfd_ < 0) abort();
        snprintf(fuzz_path_, sizeof(fuzz_path_), "/proc/self/fd/%d", fuzz_memfd_);
    }
    if (ftruncate(fuzz_memfd_, 0) != 0 || pwrite(fuzz_memfd_, data, size, 0) != (ssize_t)size) abort();
    return fuzz_path_;
}

/* Copies data[1..size) into out (capacity ≥ size) applying the repairs selected by data[0]; returns the length. */
static size_t fuzz_repair(const uint8_t* data, size_t size, uint8_t* out, uint32_t (*crc)(uint32_t, const void*, size_t)) {
    if (size == 0) return 0;
    size_t n = size - 1;
    memcpy(out, data + 1, n);
    if (n >= 1024) {
        uint32_t w[3];
        uint64_t payload = n - 1024;
        w[0] = crc(0, out + 1024, payload);
        w[1] = (uint32_t)payload;
        w[2] = (uint32_t)(payload >> 32);
        if (data[0] & 1) memcpy(out + 12, &w[1], 8);
        if (data[0] & 2) memcpy(out + 8, &w[0], 4);
        uint32_t header = crc(0, out, 1020); /* a sealed header's CRC (training state), after the repairs above */
        if (data[0] & 4) memcpy(out + 1020, &header, 4);
    }
    return n;
}

#define malloc fuzz_malloc
#define calloc fuzz_calloc
#define realloc fuzz_realloc
#define free fuzz_free
#define fopen fuzz_fopen
#define fdopen fuzz_fdopen
#define fclose fuzz_fclose

/* FUZZ_RUN({ statements }): runs them; a fatal error inside comes back here instead of exiting */
#define FUZZ_RUN(...)                                 \
    do {                                              \
        fatal_set_hook(fuzz_fatal_hook_);             \
        fuzz_active_ = 1;                             \
        if (setjmp(fuzz_jump_) == 0) { __VA_ARGS__ }  \
        fuzz_active_ = 0;                             \
        fuzz_end();                                   \
    } while (0)

#endif
