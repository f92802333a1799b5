/*
 * dev/cudasim/tests/sim_test_util.h — helpers of the simulator's tests: counting checks, and running a
 * function in a child process to see it fail the way it should.
 */
#ifndef SIM_TEST_UTIL_H
#define SIM_TEST_UTIL_H

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

struct TestCounts {
    int passed = 0, failed = 0;
};

/* records one check: prints "ok"/"FAIL", what was compared and the worst error */
inline void check(TestCounts& tc, bool ok, const char* what, double worst_err) {
    printf("%s  %-64s worst error %.3g\n", ok ? "ok  " : "FAIL", what, worst_err);
    if (ok) tc.passed++;
    else tc.failed++;
}

/* Runs fn() in a child process with CUDASIM_THREADS=threads (the parent must not have started OpenMP's thread
 * pool, which does not survive fork, when threads > 1); returns its exit status (128 + the signal when one
 * killed it) with its stderr in buf (NUL-terminated, at most cap - 1 bytes). */
template <typename F>
inline int run_child_stderr(F fn, const char* threads, char* buf, size_t cap) {
    fflush(stdout);
    fflush(stderr);
    int fds[2];
    if (pipe(fds) != 0) { perror("pipe"); exit(1); }
    pid_t pid = fork();
    if (pid < 0) { perror("fork"); exit(1); }
    if (pid == 0) {
        close(fds[0]);
        dup2(fds[1], 2);
        setenv("CUDASIM_THREADS", threads, 1);
        fn();
        fflush(stdout);
        _exit(0);
    }
    close(fds[1]);
    size_t len = 0;
    char sink[4096]; /* what does not fit is read and dropped, so the child never blocks on a full pipe */
    for (;;) {
        size_t room = cap - 1 - len;
        ssize_t got = room ? read(fds[0], buf + len, room) : read(fds[0], sink, sizeof sink);
        if (got <= 0) break;
        if (room) len += (size_t)got;
    }
    buf[len] = 0;
    close(fds[0]);
    int status = 0;
    waitpid(pid, &status, 0);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

/* Runs fn() in a child process (one simulator OS thread, since OpenMP does not survive fork) and checks
 * that it exits non-zero with `expected` in its stderr. */
template <typename F>
inline void check_child_fails(TestCounts& tc, const char* what, const char* expected, F fn) {
    static char buf[1 << 16];
    int status = run_child_stderr(fn, "1", buf, sizeof buf);
    bool failed_nonzero = status != 0;
    bool has_message = strstr(buf, expected) != NULL;
    /* show the line that carries the expected text (or the first line) */
    char* line = strstr(buf, expected);
    while (line && line > buf && line[-1] != '\n') line--;
    if (!line) line = buf;
    char* nl = strchr(line, '\n');
    if (nl) *nl = 0;
    printf("      child said: %.200s\n", line);
    check(tc, failed_nonzero && has_message, what, 0.0);
}

/* Runs `program` (a shell command: a test whose last result line is "N passed, M failed") with the
 * variable assignments `env` before it: one check, passed when it exits 0 with "0 failed"; its last lines
 * are shown otherwise. */
inline void check_program_under(TestCounts& tc, const char* program, const char* env) {
    char cmd[1024], what[1024], line[1024], tail[8][1024], result[256] = "no result line";
    snprintf(cmd, sizeof cmd, "%s %s 2>&1", env, program);
    fflush(stdout);
    FILE* p = popen(cmd, "r");
    if (!p) {
        fprintf(stderr, "error: cannot run %s: %s\n", program, strerror(errno));
        exit(1);
    }
    int n = 0;
    while (fgets(line, sizeof line, p)) {
        snprintf(tail[n++ % 8], sizeof tail[0], "%s", line);
        int passed, failed;
        if (sscanf(line, "%d passed, %d failed", &passed, &failed) == 2) snprintf(result, sizeof result, "%.*s", (int)strcspn(line, "\n"), line);
    }
    int status = pclose(p);
    bool ok = status == 0 && strstr(result, " 0 failed") != nullptr;
    if (!ok)
        for (int i = n > 8 ? n - 8 : 0; i < n; i++) printf("      | %s", tail[i % 8]);
    snprintf(what, sizeof what, "%s %s: %s", env, program, result);
    check(tc, ok, what, 0.0);
}

inline int finish(const TestCounts& tc) {
    printf("%d passed, %d failed\n", tc.passed, tc.failed);
    return tc.failed ? 1 : 0;
}

#endif /* SIM_TEST_UTIL_H */
