/*
 * llmc/process_group.h — one process per GPU: who this process is (rank, world size, local rank),
 * how the NCCL unique id reaches every rank, and a watchdog so a dead peer cannot hang the job.
 * Host C (also compiled as C++ by the trainer); MPI only with -DUSE_MPI.
 *
 * Rank discovery, the first launcher whose variables are set:
 *   Open MPI (mpirun)   OMPI_COMM_WORLD_RANK, OMPI_COMM_WORLD_SIZE, OMPI_COMM_WORLD_LOCAL_RANK
 *   torchrun-style      RANK, WORLD_SIZE, LOCAL_RANK (and MASTER_ADDR, MASTER_PORT for tcp); before PMI and
 *                       Slurm, whose variables may describe the allocation or node (srun torchrun, an
 *                       sbatch script starting processes itself) rather than this process
 *   MPICH/Hydra (PMI)   PMI_RANK, PMI_SIZE, MPI_LOCALRANKID
 *   Slurm (srun)        SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID
 *   none                rank 0 of 1
 * PMI without MPI_LOCALRANKID (Slurm's PMI-2 plugin) takes SLURM_LOCALID; a launcher with no local rank
 * at all gets 0 and a warning.
 *
 * Sharing the 128-byte NCCL id from rank 0 (--dist-init):
 *   mpi   MPI_Bcast (a build with MPI, started by an MPI launcher)
 *   file  rank 0 writes the id to --dist-file through "<path>.tmp" + rename; the others poll for the
 *         file (every 50 ms). The path must be new for each job (put the job id in it, e.g.
 *         $SLURM_JOB_ID), on a file system every node sees; rank 0 deletes it once every rank has the
 *         id (process_group_id_used) or when the run ends.
 *   tcp   rank 0 listens on MASTER_PORT (MASTER_PORT + 1 under torchrun, whose own store has that port),
 *         on IPv6 and IPv4; every other rank connects to MASTER_ADDR:port (each address it resolves to,
 *         retrying every 100 ms), sends a tag, its rank and world size, and receives the id. Rank 0
 *         checks that world − 1 distinct ranks of the same world size arrive (another is an error), and
 *         drops a connection that sends no tag (a port scanner) or nothing within 5 s.
 *   auto  mpi when an MPI launcher started us and the build has MPI; else none for world 1; else tcp
 *         when MASTER_ADDR is set; else file when --dist-file is given.
 * Every wait (connect included) is bounded by --dist-timeout seconds: a rank that never arrives gives a
 * one-line error naming the method and the address, and exit status 1. A stop signal (llmc/signals.h:
 * a launcher stopping the job because another rank failed, a scheduler) ends a wait within ~0.1 s:
 * nothing is trained yet, so the rank says so and exits 75 (PREEMPT_EXIT_STATUS: retry), rank 0
 * deleting its --dist-file first (pg_stop_now_).
 *
 * Watchdog (process_group_watchdog_start(pg, what, stoppable), around MPI_Init, the NCCL communicator's creation,
 * the setup after it (checks across ranks, the resume) and the training loop): a thread that exits the
 * process with status 3 and one line on stderr naming `what`
 * when the trainer has not called process_group_heartbeat (or process_group_progress: every host-waited
 * collective of llmc/distributed.cuh calls it) for --dist-timeout seconds — a rank blocked in a
 * collective whose peer died. The launcher (mpirun, srun --kill-on-bad-exit, torchrun, --nproc)
 * then stops the others. process_group_watchdog_hold allows PG_HOLD_FACTOR times as long until the next
 * heartbeat, for work of no known length (the setup: initial weights, rank 0's verification of a
 * checkpoint; a checkpoint write on a slow disk; rank 0's sample, which the others wait for).
 * With `stoppable` (the phases before training, where the trainer polls no stop flag) a stop signal makes
 * it end the process as a rendezvous wait does (pg_stop_now_); the training loop handles its own.
 * On its exits rank 0 deletes its --dist-file (a later run on the path would read this job's id).
 * process_group_watchdog_stop (also called by process_group_finish) ends and joins it, so it never
 * reads the struct after the caller's frame is gone. State: the
 * ProcessGroup struct the caller owns; the heartbeat and the stop flag are read and written atomically; and
 * pg_id_file_pending_, the id file rank 0 deletes at exit unless every rank has used it (a retry on the path).
 */
#ifndef LLMC_PROCESS_GROUP_H
#define LLMC_PROCESS_GROUP_H

#include <errno.h>
#include <netdb.h>
#include <poll.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include "llmc/fileio.h"
#include "llmc/signals.h"

#if defined(USE_MPI)
#ifndef OMPI_SKIP_MPICXX
#define OMPI_SKIP_MPICXX 1
#endif
#include <mpi.h>
/* MPI call checked: "error: MPI: <call> failed: <reason> (file:line)", exit 1 */
static inline void mpi_check_(int err, const char* call, const char* file, int line) {
    if (err == MPI_SUCCESS) return;
    char msg[MPI_MAX_ERROR_STRING];
    int len = 0;
    MPI_Error_string(err, msg, &len);
    fprintf(stderr, "error: MPI: %s failed: %s (%s:%d)\n", call, msg, file, line);
    exit(1);
}
#define mpiCheck(call) mpi_check_((call), #call, __FILE__, __LINE__)
#endif

#define PG_ID_BYTES 128
#define PG_WATCHDOG_EXIT 3
#define PG_HOLD_FACTOR 10

typedef struct {
    int rank, world, local_rank;
    const char* launcher; /* "mpirun", "pmi", "slurm", "env" or "none" */
    char method[8];       /* how the id is shared: "mpi", "file", "tcp" or "none" */
    int mpi_started;      /* this process called MPI_Init */
    double timeout_s;
    const char* file_path;
    int64_t heartbeat_ns; /* atomic: CLOCK_MONOTONIC of the last heartbeat */
    int held;             /* atomic: since then, PG_HOLD_FACTOR x the timeout (process_group_watchdog_hold) */
    const char* watched;  /* what the watchdog guards, for its message */
    pthread_t watchdog;
    int watchdog_running;
    int watchdog_stop;    /* atomic: process_group_finish asks the watchdog to end */
    int stoppable;        /* a stop signal ends the watched phase (process_group_watchdog_start) */
} ProcessGroup;

static inline int64_t pg_now_ns_(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* integer value of environment variable name, or -1 if unset; exits if it is not a number */
static inline int pg_env_int_(const char* name) {
    const char* s = getenv(name);
    if (!s || !s[0]) return -1;
    char* end;
    long v = strtol(s, &end, 10);
    if (*end != '\0' || v < 0 || v > (1 << 24)) fatalf("environment: %s=%s is not a non-negative integer", name, s);
    return (int)v;
}

static inline int pg_mpi_launched_(void) { return getenv("OMPI_COMM_WORLD_SIZE") || getenv("PMI_SIZE"); }

/* the tcp rendezvous port: MASTER_PORT, or the next one under torchrun (its agent's store listens on MASTER_PORT) */
static inline int pg_tcp_port_(void) { return pg_env_int_("MASTER_PORT") + (getenv("TORCHELASTIC_RUN_ID") ? 1 : 0); }

/* Finds rank, world and local rank from the environment (top comment) and chooses the id-sharing
 * method from `method` ("auto", "mpi", "file", "tcp"); exits on inconsistent input. MPI is not started
 * yet (process_group_start_mpi): a trainer selects its GPU (by pg->local_rank) first, so that a
 * CUDA-aware MPI does not put a context of every rank on GPU 0. */
static inline void process_group_find(ProcessGroup* pg, const char* method, const char* file_path, double timeout_s) {
    memset(pg, 0, sizeof(*pg));
    pg->timeout_s = timeout_s;
    pg->file_path = file_path;
    static const struct {
        const char *name, *rank, *world, *local;
    } launchers[4] = {{"mpirun", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK"},
                      {"env", "RANK", "WORLD_SIZE", "LOCAL_RANK"},
                      {"pmi", "PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID"},
                      {"slurm", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID"}};
    pg->rank = 0;
    pg->world = 1;
    pg->launcher = "none";
    for (int i = 0; i < 4; i++) {
        int rank = pg_env_int_(launchers[i].rank), world = pg_env_int_(launchers[i].world);
        if (rank < 0 && world < 0) continue;
        if (rank < 0 || world < 1 || rank >= world)
            fatalf("environment: %s=%s and %s=%s do not give a rank in [0, world)", launchers[i].rank,
                   getenv(launchers[i].rank) ? getenv(launchers[i].rank) : "(unset)", launchers[i].world,
                   getenv(launchers[i].world) ? getenv(launchers[i].world) : "(unset)");
        pg->rank = rank;
        pg->world = world;
        int local = pg_env_int_(launchers[i].local);
        if (local < 0 && strcmp(launchers[i].name, "pmi") == 0) local = pg_env_int_("SLURM_LOCALID"); /* srun --mpi=pmi2 */
        if (local < 0 && world > 1)
            fprintf(stderr, "warning: rank %d of %d (from %s): %s is not set: using GPU 0\n", rank, world, launchers[i].name,
                    launchers[i].local);
        pg->local_rank = local >= 0 ? local : 0;
        pg->launcher = launchers[i].name;
        break;
    }
    const char* chosen = method;
    if (strcmp(method, "auto") == 0) {
#if defined(USE_MPI)
        int mpi_ok = pg_mpi_launched_();
#else
        int mpi_ok = 0;
#endif
        if (mpi_ok) chosen = "mpi";
        else if (pg->world == 1) chosen = "none";
        else if (getenv("MASTER_ADDR") && getenv("MASTER_ADDR")[0]) chosen = "tcp";
        else if (file_path && file_path[0]) chosen = "file";
        else
            fatalf("rank %d of %d (from %s): no way to share the NCCL id: %sset MASTER_ADDR and MASTER_PORT (tcp), or give "
                   "--dist-file PATH on a shared file system%s",
                   pg->rank, pg->world, pg->launcher,
                   pg_mpi_launched_() ? "this binary was built without MPI, so mpirun cannot share it: " : "start with mpirun, ",
                   strcmp(pg->launcher, "slurm") == 0 ? " (a process a batch script starts itself, not through srun, sees the "
                                                        "allocation's SLURM_NTASKS: launch it with srun, or unset SLURM_PROCID to "
                                                        "run one process)"
                                                      : "");
    } else if (strcmp(method, "mpi") != 0 && strcmp(method, "file") != 0 && strcmp(method, "tcp") != 0) {
        fatalf("--dist-init %s: expected auto, mpi, file or tcp", method);
    }
    snprintf(pg->method, sizeof(pg->method), "%s", chosen);
    if (strcmp(chosen, "file") == 0 && !(file_path && file_path[0])) fatalf("--dist-init file needs --dist-file PATH");
    if (strcmp(chosen, "tcp") == 0 && (!getenv("MASTER_ADDR") || !getenv("MASTER_ADDR")[0] || pg_env_int_("MASTER_PORT") <= 0 ||
                                       pg_tcp_port_() > 65535))
        fatalf("--dist-init tcp needs MASTER_ADDR and MASTER_PORT (1 to %d) in the environment", getenv("TORCHELASTIC_RUN_ID") ? 65534 : 65535);
#if !defined(USE_MPI)
    if (strcmp(chosen, "mpi") == 0) fatalf("--dist-init mpi: this binary was built without MPI (use file or tcp)");
#endif
}



/* A poll's timeout in ms until deadline, in slices of at most 100 ms (a stop signal is then seen soon; no
 * int overflow at a --dist-timeout of weeks); 0 once it has passed. */
static inline int pg_poll_ms_(int64_t deadline) {
    int64_t left = (deadline - pg_now_ns_()) / 1000000;
    return left <= 0 ? 0 : left > 100 ? 100 : (int)left;
}

/* Whether this process wrote the --dist-file (rank 0 of the file method): it deletes it when the id is used
 * or the run ends, however it ends. */
static inline int pg_owns_id_file_(const ProcessGroup* pg) { return strcmp(pg->method, "file") == 0 && pg->rank == 0; }

/* The id file rank 0 wrote and has not deleted yet (its only global state: "" when none): an error exit
 * (exit(), as fatalf's, after the rendezvous and before every rank used the id) deletes it at exit, so that
 * a retry on the same path is not refused as another job's. The watchdog and stop paths delete it themselves. */
static char pg_id_file_pending_[4200];
static inline void pg_remove_pending_id_file_(void) {
    if (pg_id_file_pending_[0]) unlink(pg_id_file_pending_);
}

/* Ends the process after a stop signal in a wait before training (top comment): async-signal-safe
 * enough for the watchdog thread (a write and _exit; rank 0's unlink of the id file). */
static inline void pg_stop_now_(const ProcessGroup* pg, const char* during) {
    if (pg_owns_id_file_(pg)) unlink(pg->file_path);
    char line[512];
    int n = snprintf(line, sizeof(line), "error: rank %d: %s during %s: stopping (nothing trained yet, nothing to save)\n", pg->rank,
                     preempt_signal_name(preempt_requested()), during);
    ssize_t unused = write(STDERR_FILENO, line, n > 0 && (size_t)n < sizeof(line) ? (size_t)n : sizeof(line) - 1);
    (void)unused;
    _exit(PREEMPT_EXIT_STATUS);
}
static inline void pg_stop_if_signalled_(const ProcessGroup* pg, const char* during) {
    if (preempt_requested()) pg_stop_now_(pg, during);
}

/* file method: rank 0 publishes, the others poll (bounded by timeout_s) */
static inline void pg_share_file_(const ProcessGroup* pg, unsigned char* id) {
    const char* path = pg->file_path;
    if (pg->rank == 0) {
        /* rank 0 deletes the file once every rank has used it; one already there is another job's or a killed
         * run's, whose id the other ranks may be reading right now: stop (the launcher stops them too) */
        if (access(path, F_OK) == 0)
            fatalf("%s: the NCCL id file exists already: left by an earlier run that was killed, or another job's now; delete "
                   "it, or give each job its own --dist-file (e.g. with $SLURM_JOB_ID and $SLURM_RESTART_COUNT)",
                   path);
        AtomicFile a;
        atomic_open(&a, path);
        fwrite_check(id, 1, PG_ID_BYTES, a.f, a.tmp_path);
        atomic_commit(&a);
        snprintf(pg_id_file_pending_, sizeof(pg_id_file_pending_), "%s", path);
        atexit(pg_remove_pending_id_file_);
        return;
    }
    int64_t deadline = pg_now_ns_() + (int64_t)(pg->timeout_s * 1e9);
    for (;;) {
        FILE* f = fopen(path, "rb");
        if (f) {
            size_t got = fread(id, 1, PG_ID_BYTES, f);
            if (ferror(f)) sys_fatalf("%s: read failed: %s", path, strerror(errno));
            fclose_check(f, path);
            if (got == PG_ID_BYTES) return;
            fatalf("%s: NCCL id file has %zu bytes, expected %d", path, got, PG_ID_BYTES);
        }
        if (errno != ENOENT) sys_fatalf("%s: cannot open the NCCL id file: %s", path, strerror(errno)); /* not a wait for rank 0 */
        if (pg_now_ns_() > deadline)
            fatalf("rank %d: no NCCL id file %s after %.0f s (--dist-timeout): is rank 0 running, and is the path on a file "
                   "system every node sees?",
                   pg->rank, path, pg->timeout_s);
        pg_stop_if_signalled_(pg, "the file rendezvous");
        usleep(50000);
    }
}

/* reads/writes exactly len bytes with poll, bounded by deadline; returns 0 or -1 */
static inline int pg_io_(const ProcessGroup* pg, int fd, void* buf, size_t len, int writing, int64_t deadline) {
    unsigned char* p = (unsigned char*)buf;
    while (len > 0) {
        struct pollfd pfd = {fd, (short)(writing ? POLLOUT : POLLIN), 0};
        int wait_ms = pg_poll_ms_(deadline);
        if (wait_ms <= 0) return -1;
        int ready = poll(&pfd, 1, wait_ms);
        pg_stop_if_signalled_(pg, "the tcp rendezvous");
        if (ready == 0 || (ready < 0 && errno == EINTR)) continue;
        if (ready < 0) return -1;
        ssize_t k = writing ? send(fd, p, len, MSG_NOSIGNAL) : recv(fd, p, len, 0);
        if (k < 0 && (errno == EINTR || errno == EAGAIN)) continue;
        if (k <= 0) return -1;
        p += k;
        len -= (size_t)k;
    }
    return 0;
}

/* a connected socket to addr within deadline (a non-blocking connect, polled), or -1 with *err set */
static inline int pg_connect_(const ProcessGroup* pg, const struct addrinfo* addr, int64_t deadline, int* err) {
    int fd = socket(addr->ai_family, addr->ai_socktype | SOCK_NONBLOCK, addr->ai_protocol);
    if (fd < 0) {
        *err = errno;
        return -1;
    }
    if (connect(fd, addr->ai_addr, addr->ai_addrlen) == 0) return fd;
    if (errno == EINPROGRESS) {
        struct pollfd pfd = {fd, POLLOUT, 0};
        for (;;) {
            int wait_ms = pg_poll_ms_(deadline), ready = wait_ms > 0 ? poll(&pfd, 1, wait_ms) : 0;
            pg_stop_if_signalled_(pg, "the tcp rendezvous");
            if ((ready == 0 && wait_ms > 0) || (ready < 0 && errno == EINTR)) continue;
            int so_error = ETIMEDOUT;
            socklen_t len = sizeof(so_error);
            if (ready > 0) getsockopt(fd, SOL_SOCKET, SO_ERROR, &so_error, &len);
            if (so_error == 0) return fd;
            *err = so_error;
            break;
        }
    } else {
        *err = errno;
    }
    (void)close(fd); /* a socket that failed to connect: nothing to lose */
    return -1;
}

#define PG_TCP_TAG 0x434D4C4C /* "LLMC": the first word a peer sends */

/* tcp method: rank 0 serves the id to world − 1 connections; the others connect (retrying) */
static inline void pg_share_tcp_(const ProcessGroup* pg, unsigned char* id) {
    const char* host = getenv("MASTER_ADDR");
    char port[16];
    snprintf(port, sizeof(port), "%d", pg_tcp_port_());
    int64_t deadline = pg_now_ns_() + (int64_t)(pg->timeout_s * 1e9);
    struct addrinfo hints, *res = NULL;
    memset(&hints, 0, sizeof(hints));
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    if (pg->rank == 0) {
        hints.ai_flags = AI_PASSIVE;
        int rc = getaddrinfo(NULL, port, &hints, &res);
        if (rc != 0) sys_fatalf("tcp rendezvous: port %s: %s", port, gai_strerror(rc));
        int fd = -1, one = 1, zero = 0;
        for (const struct addrinfo* a = res; a && fd < 0; a = a->ai_next) /* IPv6 first: with V6ONLY off it takes IPv4 too */
            if (a->ai_family == AF_INET6 && (fd = socket(a->ai_family, a->ai_socktype, a->ai_protocol)) >= 0) {
                /* IPv4 too, or this socket is not the one (the next address, or the first one below);
                 * SO_REUSEADDR is best effort (a restart soon after a crash binds anyway where it fails) */
                (void)setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
                if (setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof(zero)) != 0 || bind(fd, a->ai_addr, a->ai_addrlen) != 0) {
                    /* a port in use is that (an IPv4-only socket would leave IPv6 peers waiting for the timeout) */
                    if (errno == EADDRINUSE)
                        sys_fatalf("tcp rendezvous: rank 0 cannot listen on port %s: %s (is the port free?)", port, strerror(errno));
                    (void)close(fd); /* never used: nothing to lose */
                    fd = -1;
                }
            }
        if (fd < 0) {
            fd = socket(res->ai_family, res->ai_socktype, res->ai_protocol);
            if (fd < 0) sys_fatalf("tcp rendezvous: socket: %s", strerror(errno));
            (void)setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
            if (bind(fd, res->ai_addr, res->ai_addrlen) != 0)
                sys_fatalf("tcp rendezvous: rank 0 cannot listen on port %s: %s (is the port free?)", port, strerror(errno));
        }
        if (listen(fd, 128) != 0) sys_fatalf("tcp rendezvous: rank 0 cannot listen on port %s: %s (is the port free?)", port, strerror(errno));
        freeaddrinfo(res);
        unsigned char* seen = (unsigned char*)calloc_check((size_t)pg->world, 1);
        for (int joined = 1; joined < pg->world;) {
            struct pollfd pfd = {fd, POLLIN, 0};
            int wait_ms = pg_poll_ms_(deadline), ready = wait_ms > 0 ? poll(&pfd, 1, wait_ms) : 0;
            pg_stop_if_signalled_(pg, "the tcp rendezvous");
            if ((ready == 0 && wait_ms > 0) || (ready < 0 && errno == EINTR)) continue;
            if (ready <= 0)
                fatalf("tcp rendezvous: rank 0 saw %d of %d ranks on port %s within %.0f s (--dist-timeout)", joined, pg->world, port,
                       pg->timeout_s);
            int peer = accept(fd, NULL, NULL);
            if (peer < 0) continue;
            int64_t hello_deadline = pg_now_ns_() + 5000000000LL; /* a silent connection cannot hold the others up */
            int32_t hello[3];
            if (pg_io_(pg, peer, hello, sizeof(hello), 0, hello_deadline < deadline ? hello_deadline : deadline) == 0 &&
                hello[0] == PG_TCP_TAG) {
                if (hello[2] != pg->world || hello[1] <= 0 || hello[1] >= pg->world || seen[hello[1]])
                    fatalf("tcp rendezvous: a peer says rank %d of %d; this job is %d ranks (each rank once)", hello[1], hello[2],
                           pg->world);
                if (pg_io_(pg, peer, id, PG_ID_BYTES, 1, deadline) == 0) {
                    seen[hello[1]] = 1;
                    joined++;
                }
            }
            (void)close(peer); /* the id is sent (or the peer is dropped): nothing to lose */
        }
        free(seen);
        (void)close(fd); /* the listening socket, done with */
        return;
    }
    char last_error[256] = "no attempt";
    for (;;) {
        int rc = getaddrinfo(host, port, &hints, &res);
        if (rc != 0) snprintf(last_error, sizeof(last_error), "resolving %s: %s", host, gai_strerror(rc));
        for (const struct addrinfo* a = rc == 0 ? res : NULL; a; a = a->ai_next) {
            int64_t attempt = pg_now_ns_() + 5000000000LL; /* a filtered address must leave time for the next */
            int err = 0, fd = pg_connect_(pg, a, attempt < deadline ? attempt : deadline, &err);
            if (fd < 0) { /* a timeout at the deadline says less than the error before it */
                if (err != ETIMEDOUT || strcmp(last_error, "no attempt") == 0)
                    snprintf(last_error, sizeof(last_error), "connect: %s", strerror(err));
                continue;
            }
            int32_t hello[3] = {PG_TCP_TAG, pg->rank, pg->world};
            int ok = pg_io_(pg, fd, hello, sizeof(hello), 1, deadline) == 0 && pg_io_(pg, fd, id, PG_ID_BYTES, 0, deadline) == 0;
            (void)close(fd); /* the id is read (or this attempt is dropped): nothing to lose */
            if (ok) {
                freeaddrinfo(res);
                return;
            }
            snprintf(last_error, sizeof(last_error), "connected, but no id came back");
        }
        if (rc == 0) freeaddrinfo(res);
        if (pg_now_ns_() > deadline)
            fatalf("rank %d: no NCCL id from tcp://%s:%s within %.0f s (--dist-timeout; last: %s): is rank 0 running and reachable?",
                   pg->rank, host, port, pg->timeout_s, last_error);
        pg_stop_if_signalled_(pg, "the tcp rendezvous");
        usleep(100000);
    }
}

/* Gives every rank rank 0's PG_ID_BYTES bytes at id, by the chosen method. */
static inline void process_group_share_id(const ProcessGroup* pg, unsigned char* id) {
    if (strcmp(pg->method, "file") == 0) pg_share_file_(pg, id);
    else if (strcmp(pg->method, "tcp") == 0) pg_share_tcp_(pg, id);
#if defined(USE_MPI)
    else if (strcmp(pg->method, "mpi") == 0) mpiCheck(MPI_Bcast(id, PG_ID_BYTES, MPI_BYTE, 0, MPI_COMM_WORLD));
#endif
}

/* the time first: a watchdog that reads the new time with the old flag is only more lenient */
static inline void process_group_beat_(ProcessGroup* pg, int held) {
    __atomic_store_n(&pg->heartbeat_ns, pg_now_ns_(), __ATOMIC_SEQ_CST);
    __atomic_store_n(&pg->held, held, __ATOMIC_SEQ_CST);
}
static inline void process_group_heartbeat(ProcessGroup* pg) { process_group_beat_(pg, 0); }
/* progress (a collective completed): the clock restarts, a hold stays (each phase of held work gets its 10x) */
static inline void process_group_progress(ProcessGroup* pg) { __atomic_store_n(&pg->heartbeat_ns, pg_now_ns_(), __ATOMIC_SEQ_CST); }

static inline void* pg_watchdog_main_(void* arg) {
    ProcessGroup* pg = (ProcessGroup*)arg;
    int64_t limit = (int64_t)(pg->timeout_s * 1e9);
    for (;;) {
        usleep(200000);
        if (__atomic_load_n(&pg->watchdog_stop, __ATOMIC_ACQUIRE)) return NULL;
        if (pg->stoppable) pg_stop_if_signalled_(pg, pg->watched);
        int held = __atomic_load_n(&pg->held, __ATOMIC_SEQ_CST);
        int64_t idle = pg_now_ns_() - __atomic_load_n(&pg->heartbeat_ns, __ATOMIC_SEQ_CST);
        if (idle > (held ? PG_HOLD_FACTOR : 1) * limit) {
            char factor[64] = "";
            if (held) snprintf(factor, sizeof(factor), " x %d, for work of no known length", PG_HOLD_FACTOR);
            fprintf(stderr, "error: rank %d of %d: no progress for %.0f s (--dist-timeout%s) in %s: a peer rank died or hangs; exiting\n",
                    pg->rank, pg->world, (double)idle * 1e-9, factor, pg->watched);
            fflush(stderr);
            if (pg_owns_id_file_(pg)) unlink(pg->file_path);
            _exit(PG_WATCHDOG_EXIT);
        }
    }
    return NULL;
}

/* A heartbeat after which PG_HOLD_FACTOR x the timeout may pass until the next process_group_heartbeat (top comment). */
static inline void process_group_watchdog_hold(ProcessGroup* pg) { process_group_beat_(pg, 1); }

/* Starts the watchdog (top comment) over `what` (a string that outlives it); the heartbeat starts now. */
static inline void process_group_watchdog_start(ProcessGroup* pg, const char* what, int stoppable) {
    pg->watched = what;
    pg->stoppable = stoppable;
    process_group_heartbeat(pg);
    __atomic_store_n(&pg->watchdog_stop, 0, __ATOMIC_RELAXED);
    if (pthread_create(&pg->watchdog, NULL, pg_watchdog_main_, pg) != 0) fatalf("cannot start the watchdog thread");
    pg->watchdog_running = 1;
}

/* Ends and joins the watchdog, if it runs. */
static inline void process_group_watchdog_stop(ProcessGroup* pg) {
    if (!pg->watchdog_running) return;
    __atomic_store_n(&pg->watchdog_stop, 1, __ATOMIC_RELEASE);
    if (pthread_join(pg->watchdog, NULL) != 0) fatalf("cannot join the watchdog thread");
    pg->watchdog_running = 0;
}

/* After process_group_find: starts MPI when the method is mpi, or when an MPI launcher started a build
 * with MPI (the simulated NCCL needs it), and checks MPI's rank and world against the launcher's. */
static inline void process_group_start_mpi(ProcessGroup* pg, int* argc, char*** argv) {
#if defined(USE_MPI)
    if (strcmp(pg->method, "mpi") == 0 || pg_mpi_launched_()) {
        /* bounded like every wait: a peer that hangs before or inside its MPI_Init would hold this rank in it */
        process_group_watchdog_start(pg, "MPI_Init (every rank joining MPI)", 1);
        mpiCheck(MPI_Init(argc, argv));
        process_group_watchdog_stop(pg);
        pg->mpi_started = 1;
        int mpi_rank, mpi_world;
        mpiCheck(MPI_Comm_rank(MPI_COMM_WORLD, &mpi_rank));
        mpiCheck(MPI_Comm_size(MPI_COMM_WORLD, &mpi_world));
        if (strcmp(pg->launcher, "none") != 0 && (mpi_rank != pg->rank || mpi_world != pg->world))
            fatalf("MPI says rank %d of %d, the environment (%s) says %d of %d%s", mpi_rank, mpi_world, pg->launcher, pg->rank, pg->world,
                   strcmp(pg->launcher, "slurm") == 0 || getenv("SLURM_PROCID")
                       ? " (under srun, MPI needs Slurm's PMI: srun --mpi=pmix or pmi2, or use --dist-init tcp)"
                       : "");
        pg->rank = mpi_rank;
        pg->world = mpi_world;
    }
#else
    (void)pg;
    (void)argc;
    (void)argv;
#endif
}

/* Every rank has used the id (the NCCL communicator exists: its creation needs them all): rank 0 removes
 * the id file, so that a later job on the same path cannot read this one's id. */
static inline void process_group_id_used(const ProcessGroup* pg) {
    pg_id_file_pending_[0] = '\0';
    if (pg_owns_id_file_(pg) && unlink(pg->file_path) != 0 && errno != ENOENT)
        printf("warning: %s: cannot delete the NCCL id file (%s): delete it before a later job uses this path\n", pg->file_path,
               strerror(errno));
}

/* End of the run: the watchdog stopped, rank 0 removes the id file; MPI is finalised if this process started it. */
static inline void process_group_finish(ProcessGroup* pg) {
    process_group_watchdog_stop(pg);
    process_group_id_used(pg);
#if defined(USE_MPI)
    if (pg->mpi_started) mpiCheck(MPI_Finalize());
#endif
}

#endif /* LLMC_PROCESS_GROUP_H */
