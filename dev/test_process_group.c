/*
 * dev/test_process_group.c — tests of the host side of multi-GPU training, without MPI or a GPU:
 *   llmc/zero.h: shards tile the parameters with ceil(n/N) per rank (checked element by element against
 *     the definition), and optimizer state written by 4 ranks with uneven shards is read back exactly
 *     by 1, 2, 3 and 7 ranks (values are a formula of the index); a gap between saved shards is an error;
 *   llmc/process_group.h: rank discovery from Slurm and torchrun variables (and a clear error when they
 *     disagree); the NCCL id reaches 3 forked ranks by tcp and by file, with the other ranks started
 *     before rank 0; a rank whose rank 0 never comes exits non-zero within the timeout (tcp and file); rank 0
 *     refuses an id file already at its path (a killed run's or another job's);
 *     the watchdog ends a process that stops heartbeating within timeout + 1 s, and leaves a
 *     heartbeating one alone.
 * Child processes are forked; the test checks their exit status, timing and stderr.
 * Last line: "N passed, M failed"; exit status 1 on any failure.
 */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "llmc/checkpoint.h"
#include "llmc/process_group.h"
#include "llmc/zero.h"
#include "dev/run_child.h"

#include "dev/testlib.h"

static double now_s(void) { return (double)pg_now_ns_() * 1e-9; }

/* the first line of the file at path (a child's stderr), without its newline; "" if none */
static void first_line(const char* path, char* msg, size_t cap) {
    msg[0] = '\0';
    FILE* f = fopen(path, "r");
    if (f) {
        if (!fgets(msg, (int)cap, f)) msg[0] = '\0';
        fclose(f);
    }
    msg[strcspn(msg, "\n")] = '\0';
}

static void clear_launcher_env(void) {
    static const char* names[] = {"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK", "PMI_RANK", "PMI_SIZE",
                                  "MPI_LOCALRANKID", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID", "RANK", "WORLD_SIZE",
                                  "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT", "TORCHELASTIC_RUN_ID"};
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) unsetenv(names[i]);
}

/* ---------------------------------------------------------------------------- shards */
static void test_shards(void) {
    const size_t ns[4] = {1, 7, 118528, 1000003};
    for (int a = 0; a < 4; a++) {
        size_t n = ns[a];
        int good = 1;
        for (int world = 1; world <= 9; world++) {
            size_t expected_size = n / world + (n % world != 0), next = 0; /* ceil(n / world) */
            for (int r = 0; r < world; r++) {
                Shard s = zero_shard(n, world, r);
                size_t end = (size_t)(r + 1) * expected_size < n ? (size_t)(r + 1) * expected_size : n;
                size_t begin = (size_t)r * expected_size < n ? (size_t)r * expected_size : n;
                if (s.size != expected_size || s.offset != begin || s.offset + s.count != end || s.offset != next) good = 0;
                next = s.offset + s.count;
            }
            if (next != n) good = 0;
        }
        check(good, "zero_shard: n=%zu, world 1..9: shards of ceil(n/world) tile [0, n) in rank order", n);
    }
}

/* optimizer values of parameter i: a formula, so any reader's result can be checked */
static float m_of(size_t i) { return 0.5f * (float)i - 3.0f; }
static float v_of(size_t i) { return (float)i * 0.25f + 1.0f; }

static void write_saved_shards(const char* dir, size_t n, int world, const size_t* offsets, int step) {
    for (int r = 0; r < world; r++) {
        TrainState st;
        memset(&st, 0, sizeof(st));
        st.step = step;
        st.rank = r;
        st.world = world;
        st.num_params = n;
        st.shard_offset = offsets[r];
        st.shard_count = offsets[r + 1] - offsets[r];
        st.train_loader.batch = 17;
        st.seq_len = 8;
        st.step_tokens = 64;
        st.schedule.max_lr = 1e-3f;
        st.beta1 = 0.9f;
        st.beta2 = 0.95f;
        st.eps = 1e-8f;
        float* m = (float*)malloc_check((st.shard_count + 1) * sizeof(float));
        float* v = (float*)malloc_check((st.shard_count + 1) * sizeof(float));
        for (size_t i = 0; i < st.shard_count; i++) {
            m[i] = m_of(offsets[r] + i);
            v[i] = v_of(offsets[r] + i);
        }
        char model[4200], state[4200], done[4200];
        checkpoint_paths(model, state, done, sizeof(model), dir, step, r);
        state_file_write(state, &st, m, v, NULL);
        free(m);
        free(v);
    }
}

/* overwrites parameter i's m and v in saved rank r's state file (offsets as write_saved_shards had
 * them) with the bytes of a NaN, leaving the header (and its payload CRC) as it was */
static void poison_saved(const char* dir, int step, int r, const size_t* offsets, size_t i) {
    char model[4200], state[4200], done[4200];
    checkpoint_paths(model, state, done, sizeof(model), dir, step, r);
    FILE* f = fopen_check(state, "r+b");
    const uint32_t nan_bits = 0xFFFFFFFFu;
    size_t count = offsets[r + 1] - offsets[r];
    for (int a = 0; a < 2; a++) {
        fseek_check(f, (long long)HEADER_BYTES + (long long)((a * count + i - offsets[r]) * sizeof(float)), SEEK_SET, state);
        fwrite_check(&nan_bits, 4, 1, f, state);
    }
    fclose_check(f, state);
}

typedef struct {
    const char* dir;
    size_t n, lo, hi;
} ReadCtx;

/* zero_read_optimizer of [lo, hi) from step 12 of dir, exit 2 unless m and v are m_of, v_of */
static void read_range_child(void* arg) {
    const ReadCtx* c = (const ReadCtx*)arg;
    float m[1000], v[1000];
    TrainState first;
    zero_read_optimizer(c->dir, 12, 4, c->n, c->lo, c->hi - c->lo, m, v, &first);
    for (size_t i = c->lo; i < c->hi; i++)
        if (m[i - c->lo] != m_of(i) || v[i - c->lo] != v_of(i)) {
            fprintf(stderr, "parameter %zu: m %g v %g\n", i, (double)m[i - c->lo], (double)v[i - c->lo]);
            exit(2);
        }
}

static void test_resharding(const char* tmp) {
    char dir[4096];
    snprintf(dir, sizeof(dir), "%s/ck", tmp);
    make_dir_check(dir);
    size_t n = 1000;
    size_t offsets[5] = {0, 300, 550, 551, 1000}; /* uneven, one shard of a single parameter */
    write_saved_shards(dir, n, 4, offsets, 12);
    const int worlds[4] = {1, 2, 3, 7};
    for (int w = 0; w < 4; w++) {
        int world = worlds[w], good = 1;
        size_t worst_index = 0;
        for (int r = 0; r < world; r++) {
            Shard s = zero_shard(n, world, r);
            float* m = (float*)malloc_check((s.count + 1) * sizeof(float));
            float* v = (float*)malloc_check((s.count + 1) * sizeof(float));
            TrainState first;
            memset(&first, 0, sizeof(first));
            zero_read_optimizer(dir, 12, 4, n, s.offset, s.count, m, v, &first);
            for (size_t i = 0; i < s.count; i++)
                if (m[i] != m_of(s.offset + i) || v[i] != v_of(s.offset + i)) {
                    good = 0;
                    worst_index = s.offset + i;
                }
            if (first.step != 12 || first.rank != 0 || first.train_loader.batch != 17) good = 0;
            free(m);
            free(v);
        }
        check(good, "re-sharding: 4 saved shards [0,300,550,551,1000) read by %d rank(s): every m, v exact, step and loader position%s",
              world, good ? "" : " (wrong)");
        if (!good) printf("     first wrong parameter %zu\n", worst_index);
    }
    /* a rank reads only the slices of its range: the bytes of every other parameter poisoned (a NaN
     * pattern; the file CRCs no longer match) change nothing for rank 1 of 3, [334, 668); one poisoned
     * value inside the range is named */
    const size_t lo = 334, hi = 668, inside = 560;
    for (int r = 0; r < 4; r++)
        for (size_t i = offsets[r]; i < offsets[r + 1]; i++)
            if (i < lo || i >= hi) poison_saved(dir, 12, r, offsets, i);
    ReadCtx ctx = {dir, n, lo, hi};
    char why[1024];
    int code = run_child(read_range_child, &ctx, why, sizeof(why));
    why[strcspn(why, "\n")] = '\0';
    check(code == 0, "re-sharding reads only the overlapping slices: every other parameter's bytes poisoned, rank 1 of 3's m, v "
                     "exact: exit %d %s", code, why);
    poison_saved(dir, 12, 3, offsets, inside);
    code = run_child(read_range_child, &ctx, why, sizeof(why));
    why[strcspn(why, "\n")] = '\0';
    check(code != 0 && strstr(why, "state_00000012_00003.bin") && strstr(why, "non-finite value at parameter 560"),
          "a non-finite value inside the range: exit %d, names the file and the parameter: %s", code, why);

    /* a gap between saved shards */
    char gap_dir[4096], err_path[4200];
    snprintf(gap_dir, sizeof(gap_dir), "%s/gap", tmp);
    make_dir_check(gap_dir);
    size_t gap[3] = {0, 400, 1000};
    write_saved_shards(gap_dir, n, 2, gap, 3);
    char model[4200], state[4200], done[4200];
    checkpoint_paths(model, state, done, sizeof(model), gap_dir, 3, 1);
    size_t bad[3] = {0, 450, 1000}; /* rank 1 rewritten to start at 450: parameters 400..449 are missing */
    TrainState st;
    write_saved_shards(tmp, n, 2, bad, 3);
    char moved[4200];
    checkpoint_paths(model, moved, done, sizeof(model), tmp, 3, 1);
    if (rename(moved, state) != 0) fatalf("rename %s: %s", moved, strerror(errno));
    snprintf(err_path, sizeof(err_path), "%s/gap_err", tmp);
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        if (!freopen(err_path, "w", stderr)) _exit(99);
        float buf_m[1000], buf_v[1000];
        zero_read_optimizer(gap_dir, 3, 2, n, 0, n, buf_m, buf_v, &st);
        _exit(0);
    }
    int status;
    waitpid(pid, &status, 0);
    char msg[512];
    first_line(err_path, msg, sizeof(msg));
    check(WIFEXITED(status) && WEXITSTATUS(status) != 0 && strstr(msg, "starts at parameter 450") != NULL,
          "saved shards with a gap: exit %d, \"%s\"", WIFEXITED(status) ? WEXITSTATUS(status) : -1, msg);
}

/* ---------------------------------------------------------------------------- process group */

/* a forked rank: environment set, process_group_find + start_mpi + share_id; exits 0 if it got the expected id */
/* a port for a tcp rendezvous test: below Linux's ephemeral range (32768-60999), where a client socket of any
 * process could hold it; apart for each process and for each of its tests (which) */
static int test_port(int which) { return 20000 + (int)((getpid() * 2 + which) % 12000); }

static pid_t spawn_rank(int rank, int world, const char* method, const char* file, int port, double timeout, const char* err_path) {
    fflush(stdout);
    pid_t pid = fork();
    if (pid != 0) return pid;
    if (err_path && !freopen(err_path, "w", stderr)) _exit(99);
    preempt_install(); /* as the trainer: a stop signal sets the flag the rendezvous polls */
    clear_launcher_env();
    char text[32];
    snprintf(text, sizeof(text), "%d", rank);
    setenv("RANK", text, 1);
    snprintf(text, sizeof(text), "%d", world);
    setenv("WORLD_SIZE", text, 1);
    setenv("LOCAL_RANK", "0", 1);
    if (port > 0) {
        setenv("MASTER_ADDR", "127.0.0.1", 1);
        snprintf(text, sizeof(text), "%d", port);
        setenv("MASTER_PORT", text, 1);
    }
    ProcessGroup pg;
    process_group_find(&pg, method, file, timeout);
    process_group_start_mpi(&pg, NULL, NULL);
    unsigned char id[PG_ID_BYTES];
    if (rank == 0)
        for (int i = 0; i < PG_ID_BYTES; i++) id[i] = (unsigned char)(i * 7 + 3);
    else memset(id, 0, sizeof(id));
    process_group_share_id(&pg, id);
    for (int i = 0; i < PG_ID_BYTES; i++)
        if (id[i] != (unsigned char)(i * 7 + 3)) _exit(10);
    _exit(pg.rank == rank && pg.world == world && strcmp(pg.method, method[0] == 'a' ? "tcp" : method) == 0 ? 0 : 11);
}

static void test_rendezvous(const char* tmp, const char* method) {
    char file[4200];
    snprintf(file, sizeof(file), "%s/nccl_id_%s", tmp, method);
    int port = strcmp(method, "tcp") == 0 ? test_port(0) : 0;
    pid_t pids[3];
    pids[1] = spawn_rank(1, 3, method, file, port, 20.0, NULL);
    pids[2] = spawn_rank(2, 3, method, file, port, 20.0, NULL);
    usleep(300000); /* the others wait for rank 0 */
    pids[0] = spawn_rank(0, 3, method, file, port, 20.0, NULL);
    int codes[3];
    for (int r = 0; r < 3; r++) {
        int status;
        waitpid(pids[r], &status, 0);
        codes[r] = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    }
    check(codes[0] == 0 && codes[1] == 0 && codes[2] == 0, "%s rendezvous: 3 ranks (rank 0 last) all hold rank 0's 128-byte id (exit %d %d %d)",
          method, codes[0], codes[1], codes[2]);
}

static void test_rendezvous_timeout(const char* tmp, const char* method, const char* expect) {
    char file[4200], err_path[4200];
    snprintf(file, sizeof(file), "%s/never_%s", tmp, method);
    snprintf(err_path, sizeof(err_path), "%s/timeout_%s.err", tmp, method);
    double t0 = now_s();
    pid_t pid = spawn_rank(1, 2, method, file, strcmp(method, "tcp") == 0 ? 40000 + (int)(getpid() % 20000) : 0, 1.0, err_path);
    int status;
    waitpid(pid, &status, 0);
    double secs = now_s() - t0;
    char msg[512];
    first_line(err_path, msg, sizeof(msg));
    check(WIFEXITED(status) && WEXITSTATUS(status) == 1 && secs >= 1.0 && secs < 4.0 && strstr(msg, expect) != NULL,
          "%s rendezvous without rank 0, --dist-timeout 1: exit %d after %.1f s (bound [1, 4) s): \"%s\"", method,
          WIFEXITED(status) ? WEXITSTATUS(status) : -1, secs, msg);
}

/* rank 0 finds an id file at its --dist-file path (a killed run's, or another job's that its other ranks may be
 * reading): it stops at once, exit 1, naming the file, and leaves it as it was */
static void test_rendezvous_stale(const char* tmp) {
    char file[4200], err_path[4200], msg[512];
    snprintf(file, sizeof(file), "%s/stale_id", tmp);
    snprintf(err_path, sizeof(err_path), "%s/stale.err", tmp);
    unsigned char old[PG_ID_BYTES];
    memset(old, 0x5a, sizeof(old));
    FILE* f = fopen_check(file, "wb");
    fwrite_check(old, 1, sizeof(old), f, file);
    fclose_check(f, file);
    pid_t pid = spawn_rank(0, 2, "file", file, 0, 20.0, err_path);
    int status;
    waitpid(pid, &status, 0);
    first_line(err_path, msg, sizeof(msg));
    unsigned char now[PG_ID_BYTES] = {0};
    f = fopen_check(file, "rb");
    size_t got = fread(now, 1, sizeof(now), f);
    fclose_check(f, file);
    check(WIFEXITED(status) && WEXITSTATUS(status) == 1 && strstr(msg, "stale_id: the NCCL id file exists already") != NULL &&
              got == sizeof(old) && memcmp(now, old, sizeof(old)) == 0,
          "rank 0 with a stale --dist-file: exit %d, the file untouched: \"%s\"", WIFEXITED(status) ? WEXITSTATUS(status) : -1, msg);
}

/* rank 0 publishes the id file, then fails before every rank used it (exit(1), as fatalf: a peer died in the
 * NCCL init): the file is gone, so that a retry on the path is not refused */
static void test_id_file_removed_on_error(const char* tmp) {
    char file[4200];
    snprintf(file, sizeof(file), "%s/error_id", tmp);
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        clear_launcher_env();
        setenv("RANK", "0", 1);
        setenv("WORLD_SIZE", "2", 1);
        setenv("LOCAL_RANK", "0", 1);
        ProcessGroup pg;
        process_group_find(&pg, "file", file, 20.0);
        process_group_start_mpi(&pg, NULL, NULL);
        unsigned char id[PG_ID_BYTES] = {1};
        process_group_share_id(&pg, id);
        exit(access(file, F_OK) == 0 ? 1 : 2); /* 1: published, then an error exit */
    }
    int status;
    waitpid(pid, &status, 0);
    check(WIFEXITED(status) && WEXITSTATUS(status) == 1 && access(file, F_OK) != 0,
          "rank 0 exits with an error after publishing the id file: the file is deleted at exit (exit %d, %s)",
          WIFEXITED(status) ? WEXITSTATUS(status) : -1, access(file, F_OK) == 0 ? "still there" : "gone");
}

/* A stop signal to a rank waiting in the rendezvous (rank 0 for its peer, rank 1 for rank 0 over tcp or the
 * file) ends it within a second, exit 75, saying so; rank 0 waits with --dist-timeout 3e6 (25 days: its
 * poll timeout in ms overflowed an int, and the wait failed at once) */
static void test_rendezvous_stop(const char* tmp) {
    const struct { int rank; const char* method; double timeout; } cases[3] = {{0, "tcp", 3e6}, {1, "tcp", 30.0}, {1, "file", 30.0}};
    for (int c = 0; c < 3; c++) {
        char file[4200], err_path[4200];
        snprintf(file, sizeof(file), "%s/stop_%d", tmp, c);
        snprintf(err_path, sizeof(err_path), "%s/stop_%d.err", tmp, c);
        pid_t pid = spawn_rank(cases[c].rank, 2, cases[c].method, file, 45000 + c + (int)(getpid() % 10000), cases[c].timeout, err_path);
        usleep(800000);
        int status, alive = waitpid(pid, &status, WNOHANG) == 0;
        double t0 = now_s();
        kill(pid, SIGTERM);
        waitpid(pid, &status, 0);
        double secs = now_s() - t0;
        char msg[512];
        first_line(err_path, msg, sizeof(msg));
        check(alive && WIFEXITED(status) && WEXITSTATUS(status) == 75 && secs < 1.0 && strstr(msg, "SIGTERM during the") != NULL,
              "rank %d waiting in the %s rendezvous (--dist-timeout %g): still waiting after 0.8 s, then SIGTERM: exit %d after %.2f s: "
              "\"%s\"", cases[c].rank, cases[c].method, cases[c].timeout, WIFEXITED(status) ? WEXITSTATUS(status) : -1, secs, msg);
    }
}

/* process_group_find + start_mpi (--dist-init auto) in a child under env ("NAME=VALUE", NULL-terminated) and nothing
 * else of the launchers'; true if it found rank of world, the local rank, the launcher and the method */
static int discovers(const char* const* env, int rank, int world, int local, const char* launcher, const char* method) {
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        if (!freopen("/dev/null", "w", stderr)) _exit(99);
        clear_launcher_env();
        for (int i = 0; env[i]; i++) putenv((char*)env[i]);
        ProcessGroup pg;
        process_group_find(&pg, "auto", "", 5.0);
        process_group_start_mpi(&pg, NULL, NULL);
        _exit(pg.rank == rank && pg.world == world && pg.local_rank == local && strcmp(pg.launcher, launcher) == 0 &&
                      strcmp(pg.method, method) == 0
                  ? 0
                  : 1);
    }
    int status;
    waitpid(pid, &status, 0);
    return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

/* process_group_find + start_mpi in a child under env, its stderr in err_path: its exit status (−1 if killed), the
 * first line of its stderr in msg */
static int discovery_fails(const char* const* env, const char* err_path, char* msg, size_t cap) {
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        if (!freopen(err_path, "w", stderr)) _exit(99);
        clear_launcher_env();
        for (int i = 0; env[i]; i++) putenv((char*)env[i]);
        ProcessGroup pg;
        process_group_find(&pg, "auto", "", 5.0);
        process_group_start_mpi(&pg, NULL, NULL);
        _exit(0);
    }
    int status;
    waitpid(pid, &status, 0);
    first_line(err_path, msg, cap);
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

static void test_discovery(const char* tmp) {
    const char* slurm[] = {"SLURM_PROCID=2", "SLURM_NTASKS=4", "SLURM_LOCALID=1", "MASTER_ADDR=127.0.0.1", "MASTER_PORT=29500", NULL};
    check(discovers(slurm, 2, 4, 1, "slurm", "tcp"), "Slurm variables: rank 2 of 4, local rank 1, id by tcp (MASTER_ADDR set)");
    const char* env_in_slurm[] = {"RANK=1", "WORLD_SIZE=2", "LOCAL_RANK=1", "SLURM_PROCID=0", "SLURM_NTASKS=1", "SLURM_LOCALID=0",
                                  "MASTER_ADDR=127.0.0.1", "MASTER_PORT=29500", NULL};
    check(discovers(env_in_slurm, 1, 2, 1, "env", "tcp"),
          "RANK, WORLD_SIZE, LOCAL_RANK inside a Slurm allocation (srun torchrun, an sbatch script's processes): rank 1 of 2 from them");
    const char* pmi2[] = {"PMI_RANK=1", "PMI_SIZE=2", "SLURM_PROCID=1", "SLURM_NTASKS=2", "SLURM_LOCALID=1", "MASTER_ADDR=127.0.0.1",
                          "MASTER_PORT=29500", NULL};
    check(discovers(pmi2, 1, 2, 1, "pmi", "tcp"), "srun --mpi=pmi2 (PMI_RANK, no MPI_LOCALRANKID): local rank 1 from SLURM_LOCALID");
    const char* lone[] = {"MASTER_ADDR=localhost", NULL};
    check(discovers(lone, 0, 1, 0, "none", "none"), "one process with MASTER_ADDR but no MASTER_PORT: no rendezvous at all");
    char err_path[4200], msg[512];
    snprintf(err_path, sizeof(err_path), "%s/discovery.err", tmp);
    const char* past_world[] = {"RANK=4", "WORLD_SIZE=4", NULL};
    int code = discovery_fails(past_world, err_path, msg, sizeof(msg));
    check(code == 1 && strstr(msg, "RANK=4") != NULL, "RANK=4 of WORLD_SIZE=4: exit %d, \"%s\"", code, msg);
    /* a batch script's own process sees the allocation's SLURM_NTASKS: the error says to use srun */
    const char* batch[] = {"SLURM_PROCID=0", "SLURM_NTASKS=4", "SLURM_LOCALID=0", NULL};
    code = discovery_fails(batch, err_path, msg, sizeof(msg));
    check(code == 1 && strstr(msg, "rank 0 of 4 (from slurm)") != NULL && strstr(msg, "launch it with srun") != NULL,
          "Slurm variables of the allocation, no srun step: exit %d, \"%s\"", code, msg);
}

/* tcp rendezvous with a port scanner's connection (bytes that are no hello) and a silent one reaching rank 0
 * before rank 1: both are dropped (the silent one after 5 s) and the ranks meet */
static void test_rendezvous_strays(void) {
    int port = test_port(1);
    double t0 = now_s();
    pid_t rank0 = spawn_rank(0, 2, "tcp", "", port, 30.0, "/dev/null");
    struct addrinfo hints, *res;
    memset(&hints, 0, sizeof(hints));
    hints.ai_family = AF_INET;
    hints.ai_socktype = SOCK_STREAM;
    char port_text[16];
    snprintf(port_text, sizeof(port_text), "%d", port);
    int strays[2] = {-1, -1}, err = 0;
    ProcessGroup self; /* pg_connect_ reads it only after a stop signal */
    memset(&self, 0, sizeof(self));
    if (getaddrinfo("127.0.0.1", port_text, &hints, &res) == 0) {
        for (int k = 0; k < 2; k++)
            while (strays[k] < 0 && now_s() - t0 < 10.0)
                if ((strays[k] = pg_connect_(&self, res, pg_now_ns_() + 1000000000LL, &err)) < 0) usleep(50000);
        freeaddrinfo(res);
    }
    const char probe[] = "GET / HTTP/1.0\r\n\r\n";
    int sent = strays[0] >= 0 && send(strays[0], probe, sizeof(probe) - 1, MSG_NOSIGNAL) == (ssize_t)(sizeof(probe) - 1);
    pid_t rank1 = spawn_rank(1, 2, "tcp", "", port, 30.0, "/dev/null");
    int codes[2];
    pid_t pids[2] = {rank0, rank1};
    for (int r = 0; r < 2; r++) {
        int status;
        waitpid(pids[r], &status, 0);
        codes[r] = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    }
    double secs = now_s() - t0;
    for (int k = 0; k < 2; k++)
        if (strays[k] >= 0) close(strays[k]);
    check(sent && strays[1] >= 0 && codes[0] == 0 && codes[1] == 0 && secs < 15.0,
          "tcp rendezvous past a stray HTTP request and a silent connection: both ranks hold the id (exit %d %d) after %.1f s", codes[0],
          codes[1], secs);
}

/* mode 0: no heartbeat; 1: a heartbeat every 0.1 s; 2: process_group_finish, then the struct overwritten (as a
 * returned frame's would be) and 1.5 s idle past the timeout, as exit handlers may take */
static void test_watchdog(void) {
    for (int mode = 0; mode <= 5; mode++) {
        double t0 = now_s();
        fflush(stdout);
        pid_t pid = fork();
        if (pid == 0) {
            if (!freopen("/dev/null", "w", stderr)) _exit(99);
            clear_launcher_env();
            ProcessGroup pg;
            process_group_find(&pg, "auto", "", mode == 5 ? 0.3 : 1.0);
            process_group_start_mpi(&pg, NULL, NULL);
            process_group_watchdog_start(&pg, "the test", 0);
            if (mode >= 3) { /* held: 2.5 s, then (mode 4) a heartbeat and no more; (mode 5) 6 s, past 10 x 0.3 s */
                process_group_watchdog_hold(&pg);
                usleep(mode == 5 ? 6000000 : 2500000);
                if (mode != 4) _exit(0);
                process_group_heartbeat(&pg);
                usleep(2500000);
                _exit(0);
            }
            if (mode == 2) {
                process_group_finish(&pg);
                memset(&pg, 0, sizeof pg);
                usleep(1500000);
                _exit(0);
            }
            for (int i = 0; i < 25; i++) { /* 2.5 s */
                usleep(100000);
                if (mode == 1) process_group_heartbeat(&pg);
            }
            _exit(0);
        }
        int status;
        waitpid(pid, &status, 0);
        double secs = now_s() - t0;
        int code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
        if (mode == 0)
            check(code == PG_WATCHDOG_EXIT && secs >= 1.0 && secs < 2.0,
                  "watchdog, --dist-timeout 1, no heartbeat: exit %d (expected %d) after %.2f s (bound [1, 2) s)", code, PG_WATCHDOG_EXIT,
                  secs);
        else if (mode == 1)
            check(code == 0, "watchdog, --dist-timeout 1, heartbeat every 0.1 s: the process runs its 2.5 s (exit %d)", code);
        else if (mode == 2)
            check(code == 0, "watchdog ended by process_group_finish: the struct overwritten, 1.5 s idle with --dist-timeout 1: exit %d", code);
        else if (mode == 3)
            check(code == 0, "watchdog held (a checkpoint write): 2.5 s with no heartbeat and --dist-timeout 1: exit %d", code);
        else if (mode == 5)
            check(code == PG_WATCHDOG_EXIT && secs >= 3.0 && secs < 4.0,
                  "watchdog held, --dist-timeout 0.3: exit %d (expected %d) after %.2f s (bound [3, 4) s: 10 x the timeout)", code,
                  PG_WATCHDOG_EXIT, secs);
        else
            check(code == PG_WATCHDOG_EXIT && secs >= 3.5 && secs < 4.5,
                  "watchdog held 2.5 s, then a heartbeat and none after: exit %d (expected %d) after %.2f s (bound [3.5, 4.5) s)", code,
                  PG_WATCHDOG_EXIT, secs);
    }
}

int main(void) {
    char tmp[] = "/tmp/test_process_group_XXXXXX";
    if (!mkdtemp(tmp)) fatalf("mkdtemp: %s", strerror(errno));
    test_shards();
    test_resharding(tmp);
    test_discovery(tmp);
    test_rendezvous(tmp, "tcp");
    test_rendezvous(tmp, "file");
    test_rendezvous_strays();
    test_rendezvous_timeout(tmp, "tcp", "no NCCL id from tcp://127.0.0.1");
    test_rendezvous_timeout(tmp, "file", "no NCCL id file");
    test_rendezvous_stop(tmp);
    test_rendezvous_stale(tmp);
    test_id_file_removed_on_error(tmp);
    test_watchdog();
    char cmd[4200];
    snprintf(cmd, sizeof(cmd), "rm -rf %s", tmp);
    if (system(cmd) != 0) fprintf(stderr, "warning: could not remove %s\n", tmp);
    printf("%d passed, %d failed\n", passed, failed);
    return failed ? 1 : 0;
}
