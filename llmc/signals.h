/*
 * llmc/signals.h — preemption: stop at a safe point, checkpoint, exit with a status a requeue script can test.
 *
 * preempt_install() makes SIGTERM (what a scheduler sends before killing), SIGUSR1 (Slurm's
 * `--signal=USR1@T` warning), SIGINT (Ctrl-C), SIGHUP (the terminal closed) and SIGPIPE (stdout is a
 * pipe whose reader is gone: `| tee log`, tee killed) set a flag instead of killing the process (SIGHUP
 * and SIGPIPE only where not ignored already: under nohup a closed terminal stops nothing). The trainer
 * polls preempt_requested() between steps, between micro-steps and between validation batches; when it
 * is set, the trainer writes a checkpoint of the last completed step and exits with PREEMPT_EXIT_STATUS
 * (75, EX_TEMPFAIL of sysexits.h: "temporary failure, retry"); scripts/slurm_train.sbatch requeues on it. A second SIGINT while the first is being handled exits at
 * once with status 130 (Ctrl-C twice), saying so on stderr. SIGXFSZ is ignored, so a write past a
 * file-size limit (`ulimit -f`) fails with EFBIG and a clear message instead of killing the process.
 *
 * The handler only stores the signal number into a volatile sig_atomic_t (async-signal-safe) or
 * calls _exit. Handlers use SA_RESTART, so file reads and writes in progress are not cut short.
 * Global mutable state: preempt_signal_, the number of the first signal received (0: none), one per
 * translation unit; install and poll from the same one (the trainer's main file).
 */
#ifndef LLMC_SIGNALS_H
#define LLMC_SIGNALS_H

#include "llmc/fileio.h"
#include <signal.h>
#include <unistd.h>

#define PREEMPT_EXIT_STATUS 75

static volatile sig_atomic_t preempt_signal_ = 0;

static inline void preempt_handler_(int sig) {
    if (sig == SIGINT && preempt_signal_ == SIGINT) {
        static const char msg[] = "\nSIGINT twice: exiting at once (status 130), without the clean stop of the first (a trainer saves no "
                                  "checkpoint of the steps since its last one; prepare_data leaves .tmp files, its next run removes them)\n";
        ssize_t unused = write(STDERR_FILENO, msg, sizeof(msg) - 1);
        (void)unused;
        _exit(130);
    }
    if (!preempt_signal_) preempt_signal_ = sig;
}

static inline void preempt_install(void) {
    struct sigaction sa;
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = preempt_handler_;
    sa.sa_flags = SA_RESTART;
    sigemptyset(&sa.sa_mask);
    const int sigs[5] = {SIGTERM, SIGUSR1, SIGINT, SIGHUP, SIGPIPE};
    for (int i = 0; i < 5; i++) {
        struct sigaction old;
        if (sigaction(sigs[i], NULL, &old) != 0) sys_fatalf("sigaction(%s) failed: %s", strsignal(sigs[i]), strerror(errno));
        if (i >= 3 && old.sa_handler == SIG_IGN) continue; /* nohup's SIGHUP (and an ignored SIGPIPE) stay ignored */
        if (sigaction(sigs[i], &sa, NULL) != 0) sys_fatalf("sigaction(%s) failed: %s", strsignal(sigs[i]), strerror(errno));
    }
    if (signal(SIGXFSZ, SIG_IGN) == SIG_ERR) sys_fatalf("ignoring SIGXFSZ failed: %s", strerror(errno));
}

/* the number of the first stop signal received, 0 if none */
static inline int preempt_requested(void) { return (int)preempt_signal_; }

/* the name of a stop signal, for the line that says the run stops */
static inline const char* preempt_signal_name(int sig) {
    switch (sig) {
    case SIGTERM: return "SIGTERM";
    case SIGUSR1: return "SIGUSR1";
    case SIGINT: return "SIGINT";
    case SIGHUP: return "SIGHUP";
    case SIGPIPE: return "SIGPIPE (a write to a closed pipe: the reader of the output is gone?)";
    }
    return "a stop signal";
}

#endif
