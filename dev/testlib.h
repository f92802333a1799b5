/*
 * dev/testlib.h — the bookkeeping of the C unit tests (dev/test_*.c): check() prints one line
 * "PASS <what>" or "FAIL <what>" and counts it in `passed` / `failed`, the program's only
 * global state, which its main() reports as the closing "N passed, M failed" line.
 */
#ifndef DEV_TESTLIB_H
#define DEV_TESTLIB_H

#include <stdarg.h>
#include <stdio.h>

static int passed, failed;

static void check(int ok, const char* fmt, ...) __attribute__((format(printf, 2, 3)));
static void check(int ok, const char* fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    printf("%s ", ok ? "PASS" : "FAIL");
    vprintf(fmt, ap);
    printf("\n");
    va_end(ap);
    if (ok) passed++;
    else failed++;
}

#endif
