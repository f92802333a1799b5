/*
 * dev/run_child.h — failure paths of the unit tests: run_child(fn, ctx, err, cap) runs fn(ctx) in a forked
 * child whose stderr is captured into err (at most cap - 1 bytes, NUL-terminated) and whose stdout goes to
 * /dev/null, and returns the child's exit status (128 + the signal when one killed it; 0 when fn returns).
 * The caller checks the status and the message. Fork before any OpenMP region, so the child holds no
 * thread pool. No global state.
 */
#ifndef DEV_RUN_CHILD_H
#define DEV_RUN_CHILD_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include "llmc/fileio.h"

static int run_child(void (*fn)(void*), void* ctx, char* err, size_t cap) {
    int fds[2];
    if (pipe(fds) != 0) sys_fatalf("pipe failed: %s", strerror(errno));
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    if (pid < 0) sys_fatalf("fork failed: %s", strerror(errno));
    if (pid == 0) {
        if (close(fds[0]) != 0 || dup2(fds[1], 2) < 0) sys_fatalf("child: redirecting stderr failed: %s", strerror(errno));
        if (!freopen("/dev/null", "w", stdout)) sys_fatalf("child: /dev/null: cannot open for writing: %s", strerror(errno));
        fn(ctx);
        _exit(0);
    }
    if (close(fds[1]) != 0) sys_fatalf("close failed: %s", strerror(errno));
    size_t len = 0;
    ssize_t got;
    while (len + 1 < cap && (got = read(fds[0], err + len, cap - 1 - len)) > 0) len += (size_t)got;
    err[len] = '\0';
    if (close(fds[0]) != 0) sys_fatalf("close failed: %s", strerror(errno));
    int ws = 0;
    if (waitpid(pid, &ws, 0) < 0) sys_fatalf("waitpid failed: %s", strerror(errno));
    return WIFEXITED(ws) ? WEXITSTATUS(ws) : 128 + WTERMSIG(ws);
}

#endif /* DEV_RUN_CHILD_H */
