/*
 * dev/cudasim/tests/sim_test_util.h — helpers of the simulator's tests: counting checks, and running a
 * function in a child process to see it fail the way it should.
 */
#ifndef SIM_TEST_UTIL_H
#define SIM_TEST_UTIL_H

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

/* Runs fn() in a child process (one simulator OS thread, since OpenMP does not survive fork) and checks
 * that it exits non-zero with `expected` in its stderr. */
template <typename F>
inline void check_child_fails(TestCounts& tc, const char* what, const char* expected, F fn) {
    fflush(stdout);
    fflush(stderr);
    int fds[2];
    if (pipe(fds) != 0) { perror("pipe"); exit(1); }
    pid_t pid = fork();
    if (pid < 0) { perror("fork"); exit(1); }
    if (pid == 0) {
        close(fds[0]);
        dup2(fds[1], 2);
        setenv("CUDASIM_THREADS", "1", 1);
        fn();
        fflush(stdout);
        _exit(0);
    }
    close(fds[1]);
    static char buf[1 << 16];
    size_t len = 0;
    ssize_t got;
    while ((got = read(fds[0], buf + len, sizeof buf - 1 - len)) > 0) len += (size_t)got;
    buf[len] = 0;
    close(fds[0]);
    int status = 0;
    waitpid(pid, &status, 0);
    bool failed_nonzero = !(WIFEXITED(status) && WEXITSTATUS(status) == 0);
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

inline int finish(const TestCounts& tc) {
    printf("%d passed, %d failed\n", tc.passed, tc.failed);
    return tc.failed ? 1 : 0;
}

#endif /* SIM_TEST_UTIL_H */
