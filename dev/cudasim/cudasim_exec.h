/*
 * dev/cudasim/cudasim_exec.h — the simulator's execution model: fibers, block barrier, warp rendezvous,
 * grid launch. The design is described at the top of cudasim.h. Included by cudasim.h only.
 */
#ifndef CUDASIM_EXEC_H
#define CUDASIM_EXEC_H

#include <errno.h>
#include <omp.h>
#include <pthread.h>
#include <stdarg.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include <map>
#include <memory>
#include <mutex>
#include <tuple>
#include <type_traits>
#include <utility>

#if defined(__x86_64__) && !defined(CUDASIM_UCONTEXT)
#define CUDASIM_ASM_SWITCH 1
#else
#include <ucontext.h>
#endif

#if defined(__SANITIZE_ADDRESS__)
#define CUDASIM_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define CUDASIM_ASAN 1
#endif
#endif
#ifdef CUDASIM_ASAN
#include <sanitizer/asan_interface.h>
#include <sanitizer/common_interface_defs.h>
#endif


#ifdef CUDASIM_ASM_SWITCH
/* cudasim_switch_context(save, load): pushes the callee-saved registers (rbp rbx r12-r15) on the current
 * stack, stores rsp into *save, loads rsp = load, pops the registers saved there and returns into that
 * context. A new fiber's stack is prepared to look like a saved context whose return address is
 * cudasim_fiber_trampoline, which calls the function held in r13. Emitted in a COMDAT group, so every
 * translation unit that includes this header may carry it. The x87/MXCSR control words are not switched:
 * all fibers of the process share one floating-point environment. */
__asm__(
    ".pushsection .text.cudasim_switch_context,\"axG\",@progbits,cudasim_switch_context,comdat\n"
    ".weak cudasim_switch_context\n"
    ".type cudasim_switch_context,@function\n"
    "cudasim_switch_context:\n"
    "  pushq %rbp\n  pushq %rbx\n  pushq %r12\n  pushq %r13\n  pushq %r14\n  pushq %r15\n"
    "  movq %rsp, (%rdi)\n"
    "  movq %rsi, %rsp\n"
    "  popq %r15\n  popq %r14\n  popq %r13\n  popq %r12\n  popq %rbx\n  popq %rbp\n"
    "  ret\n"
    ".size cudasim_switch_context, .-cudasim_switch_context\n"
    ".popsection\n"
    ".pushsection .text.cudasim_fiber_trampoline,\"axG\",@progbits,cudasim_fiber_trampoline,comdat\n"
    ".weak cudasim_fiber_trampoline\n"
    ".type cudasim_fiber_trampoline,@function\n"
    "cudasim_fiber_trampoline:\n"
    "  callq *%r13\n"
    "  ud2\n"
    ".size cudasim_fiber_trampoline, .-cudasim_fiber_trampoline\n"
    ".popsection\n");
extern "C" void cudasim_switch_context(void** save_sp, void* load_sp);
extern "C" void cudasim_fiber_trampoline(void);
#endif

namespace cudasim {

struct Fiber {
    void* sp; /* saved stack pointer while switched out (asm switch) */
#ifndef CUDASIM_ASM_SWITCH
    ucontext_t uc;
#endif
    void* asan_fake_stack;
    char* stack_lo;
    uint3 thread_idx;
    unsigned linear; /* x + y*bx + z*bx*by; lane = linear % 32, warp = linear / 32 */
    /* deferred cp.async: copies pending in the executor's cp_pending slots of this thread, groups committed */
    unsigned cp_count, cp_commits;
    void* race_fiber; /* race check (ThreadSanitizer builds): this slot's TSan fiber in the launch's context */
};

/* The launch's scheduling mode (CUDASIM_SCHEDULE, CUDASIM_CP_ASYNC; read once per launch by launch_mode). */
enum Schedule { SCHEDULE_FIFO, SCHEDULE_REVERSE, SCHEDULE_SHUFFLE };
struct LaunchMode {
    Schedule schedule;
    uint64_t seed;          /* shuffle: the permutations' seed */
    bool cp_async_deferred; /* cp_async_16 records its copy; cp_async_wait performs it */
};

/* one deferred cp.async: 16 bytes src -> dst, in commit group `group` of its thread, issued at file:line */
struct CpAsyncCopy {
    void* dst;
    const void* src;
    unsigned group;
    int line;
    const char* file;
};
constexpr unsigned kMaxCpAsyncPending = 256; /* per thread; more is reported as an error */

struct Warp;
/* A warp operation's semantics: called once, by the last lane of the mask to arrive, with every lane's
 * input and output pointers (wp.in[lane], wp.out[lane], for the lanes of wp.mask). */
typedef void (*WarpFn)(const Warp& wp);

struct Warp {
    unsigned arrived; /* lanes of the pending operation that have arrived */
    unsigned exited;  /* lanes whose thread has returned from the kernel */
    unsigned mask;
    WarpFn fn;
    const char* op;
    const char* file;
    int line;
    unsigned first_lane;
    const void* in[32];
    void* out[32];
};

/* fiber stacks: one mapping, `capacity` slots of (guard page + stack_bytes) */
struct FiberStacks {
    char* region = nullptr;
    size_t stack_bytes = 0, slot_bytes = 0, region_bytes = 0;
    unsigned capacity = 0;
    FiberStacks() = default;
    FiberStacks(const FiberStacks&) = delete;
    FiberStacks& operator=(const FiberStacks&) = delete;
    ~FiberStacks() {
        if (region) munmap(region, region_bytes);
    }
};

struct Executor {
    FiberStacks stacks;
    size_t stack_bytes = 0; /* the launch's fibers' stack size */
    Fiber fibers[kMaxThreadsPerBlock];
    unsigned ready[kMaxThreadsPerBlock]; /* FIFO ring of fiber indices */
    unsigned ready_head = 0, ready_count = 0;
    unsigned nthreads = 0, live = 0, exited = 0, first_exited = 0;
    /* __syncthreads */
    unsigned bar_arrived = 0;
    const char* bar_file = nullptr;
    int bar_line = 0;
    unsigned bar_first = 0;
    unsigned bar_waiters[kMaxThreadsPerBlock];
    Warp warps[kMaxThreadsPerBlock / 32];
    /* the launch */
    const char* kernel_text = nullptr;
    void (*entry)(void*) = nullptr;
    void* entry_ctx = nullptr;
    uint3 block_idx;
    dim3 block_dim, grid_dim;
    void* dyn_smem = nullptr;
    LaunchMode mode{SCHEDULE_FIFO, 0, false};
    uint64_t rng = 0;                    /* shuffle: splitmix64 state, seeded per block from mode.seed */
    CpAsyncCopy* cp_pending = nullptr;   /* deferred cp.async: kMaxCpAsyncPending slots per thread */
    /* the OS thread's own context, resumed when the block's last thread exits */
    void* sched_sp = nullptr;
#ifndef CUDASIM_ASM_SWITCH
    ucontext_t sched_uc;
#endif
    void* sched_fake_stack = nullptr;
    void* sched_stack_lo = nullptr;
    size_t sched_stack_size = 0;
#ifdef CUDASIM_TSAN
    /* race check, per context (the stream whose work the launch is; cudasim_race.h): the TSan fibers of this OS
     * thread's own context (sched: created on the OS threads that help the host) and of the thread slots; sync
     * addresses: block start, threads done, arrivals at __syncthreads (block) and __syncwarp (warp[w]), and
     * wake[t], what thread t acquires when a barrier releases it */
    struct RaceCtx {
        void* sched = nullptr;
        std::vector<void*> slots;
        FiberStacks stacks; /* two streams' blocks on this OS thread are not ordered: stacks of their own */
        char block_start = 0, done = 0, block = 0, warp[kMaxThreadsPerBlock / 32] = {}, wake[kMaxThreadsPerBlock] = {};
    };
    std::map<const void*, RaceCtx> race_ctx;
    RaceCtx* race = nullptr;      /* the launch's context */
    void* race_own = nullptr;     /* the fiber this OS thread had before the launch */
    void* race_sched = nullptr;   /* the fiber the block's threads return to */
#endif

    ~Executor();
};

inline thread_local Executor* t_exec = nullptr;
inline thread_local Fiber* t_cur = nullptr;

/* ---- race check (sim-test-races: the simulator built with -fsanitize=thread; the host side, streams, in
 * cudasim_race.h). Each simulated thread is a ThreadSanitizer fiber, switched without synchronisation, so TSan
 * reports two threads' accesses to one address, one of them a write and not both atomic, that no
 * happens-before edge orders, in whatever order they ran. The edges are those CUDA guarantees: __syncthreads
 * (the block), __syncwarp (its mask's lanes), a launch's start (after its stream's earlier work) and end
 * (before what waits for it); shuffles, ballots, mma and ldmatrix exchange registers, not memory, and order
 * nothing. ldmatrix counts as each lane reading its own row, cp.async as its thread's write of the
 * destination and read of the source; the simulator's own bookkeeping is not tracked (Untracked). Blocks
 * that run one after another on one OS thread are ordered, as if the GPU had run them in turn (so shared
 * memory and fiber stacks, reused, start clean): races between blocks show between blocks on different OS
 * threads, which the launch deals round-robin (block b on thread b % CUDASIM_THREADS), so neighbouring blocks
 * are checked against each other. Every TSan fiber, and every fiber stack, serves one stream (RaceCtx), so
 * launches on different streams are ordered only by what orders the streams. Limit: static __shared__
 * arrays are one copy per OS thread, so kernels that use them on two unordered streams would be reported
 * (the project's kernels with static shared memory all run on the compute stream). Without TSan all of this
 * is empty. ---- */
#ifdef CUDASIM_TSAN
/* a thread arrives at __syncthreads (warp < 0) or at warp w's __syncwarp */
inline void race_arrive(Executor* ex, int warp) { __tsan_release(warp < 0 ? &ex->race->block : &ex->race->warp[warp]); }
/* the last arrival: takes every arrival's clock and hands it to the threads ids[0..n) it releases */
inline void race_complete(Executor* ex, int warp, const unsigned* ids, unsigned n) {
    __tsan_acquire(warp < 0 ? &ex->race->block : &ex->race->warp[warp]);
    for (unsigned i = 0; i < n; i++) __tsan_release(&ex->race->wake[ids[i]]);
}
inline void race_complete_warp(Executor* ex, unsigned w, unsigned mask) {
    unsigned ids[32], n = 0;
    for (unsigned m = mask; m; m &= m - 1) ids[n++] = 32 * w + (unsigned)__builtin_ctz(m);
    race_complete(ex, (int)w, ids, n);
}
inline void race_resume(Executor* ex, Fiber* f) { __tsan_acquire(&ex->race->wake[f->linear]); }
/* ldmatrix: the lanes that give a row address read its 16 bytes */
inline void race_row_read(const void* row, int matrices) {
    if ((int)(t_cur->linear % 32) < 8 * matrices) __tsan_read_range(const_cast<void*>(row), 16);
}
#else
inline void race_arrive(Executor*, int) {}
inline void race_complete(Executor*, int, const unsigned*, unsigned) {}
inline void race_complete_warp(Executor*, unsigned, unsigned) {}
inline void race_resume(Executor*, Fiber*) {}
inline void race_row_read(const void*, int) {}
#endif

/* ---- failure reports ---- */

/* the kernel's name: the launch text up to its first top-level comma */
inline void kernel_name(const char* text, char* buf, size_t n) {
    size_t i = 0;
    int depth = 0;
    for (; text && text[i] && i + 1 < n; i++) {
        char c = text[i];
        if (c == '<' || c == '(') depth++;
        if (c == '>' || c == ')') depth--;
        if (c == ',' && depth <= 0) break;
        buf[i] = c;
    }
    buf[i] = 0;
}

/* prints "error: cudasim: kernel K block (x,y,z) thread (x,y,z): <message>" and exits with status 1 */
__attribute__((noreturn, format(printf, 1, 2))) inline void fail(const char* fmt, ...) {
    char name[128];
    Executor* ex = t_exec;
    fflush(stdout);
    if (ex) {
        kernel_name(ex->kernel_text, name, sizeof name);
        fprintf(stderr, "error: cudasim: kernel %s block (%u,%u,%u)", name, ex->block_idx.x, ex->block_idx.y, ex->block_idx.z);
        if (t_cur) fprintf(stderr, " thread (%u,%u,%u)", t_cur->thread_idx.x, t_cur->thread_idx.y, t_cur->thread_idx.z);
        fputs(": ", stderr);
    } else {
        fputs("error: cudasim: ", stderr);
    }
    va_list ap;
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    fflush(stderr);
    _Exit(1);
}

inline uint3 thread_of(const Executor* ex, unsigned linear) { return ex->fibers[linear].thread_idx; }

/* Every remaining thread is blocked: say what the first blocked group waits for. */
__attribute__((noreturn)) inline void deadlock(Executor* ex) {
    t_cur = nullptr;
    if (ex->bar_arrived) {
        uint3 t = thread_of(ex, ex->bar_first);
        fail("deadlock: %u of %u threads wait at __syncthreads (%s:%d), first thread (%u,%u,%u); the others wait "
             "in warp operations",
             ex->bar_arrived, ex->nthreads, ex->bar_file, ex->bar_line, t.x, t.y, t.z);
    }
    for (unsigned w = 0; w * 32 < ex->nthreads; w++) {
        const Warp& wp = ex->warps[w];
        if (wp.arrived)
            fail("deadlock: warp %u lanes 0x%08x wait at %s (%s:%d) for lanes 0x%08x of mask 0x%08x, which never arrive",
                 w, wp.arrived, wp.op, wp.file, wp.line, wp.mask & ~wp.arrived, wp.mask);
    }
    fail("deadlock: %u threads blocked", ex->live);
}

/* ---- fiber switching ---- */

/* (not instrumented: thread_exit, which the race check cannot bracket as untracked, uses them) */
CUDASIM_NO_TSAN inline void push_ready(Executor* ex, unsigned linear) {
    ex->ready[(ex->ready_head + ex->ready_count) % kMaxThreadsPerBlock] = linear;
    ex->ready_count++;
}
CUDASIM_NO_TSAN inline Fiber* pop_ready(Executor* ex) {
    Fiber* f = &ex->fibers[ex->ready[ex->ready_head]];
    ex->ready_head = (ex->ready_head + 1) % kMaxThreadsPerBlock;
    ex->ready_count--;
    return f;
}

/* switches from `from` (nullptr: the OS thread's context; dying: never resumed) to `to` (nullptr: the
 * OS thread's context); callers are untracked by the race check */
CUDASIM_NO_TSAN inline void switch_fiber(Executor* ex, Fiber* from, Fiber* to, bool dying) {
    t_cur = to;
#ifdef CUDASIM_TSAN
    __tsan_switch_to_fiber(to ? to->race_fiber : ex->race_sched, __tsan_switch_to_fiber_no_sync);
#endif
#ifdef CUDASIM_ASAN
    void** fake = dying ? nullptr : (from ? &from->asan_fake_stack : &ex->sched_fake_stack);
    if (to) __sanitizer_start_switch_fiber(fake, to->stack_lo, ex->stack_bytes);
    else __sanitizer_start_switch_fiber(fake, ex->sched_stack_lo, ex->sched_stack_size);
#else
    (void)dying;
#endif
#ifdef CUDASIM_ASM_SWITCH
    cudasim_switch_context(from ? &from->sp : &ex->sched_sp, to ? to->sp : ex->sched_sp);
#else
    if (swapcontext(from ? &from->uc : &ex->sched_uc, to ? &to->uc : &ex->sched_uc) != 0) fail("swapcontext failed");
#endif
#ifdef CUDASIM_ASAN
    __sanitizer_finish_switch_fiber(from ? from->asan_fake_stack : ex->sched_fake_stack, nullptr, nullptr);
#endif
}

/* splitmix64: the shuffle schedule's generator */
inline uint64_t next_random(uint64_t* state) {
    uint64_t z = (*state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* makes fibers ids[0..n) (ascending) ready in the launch's order: ascending (fifo), descending (reverse), or a
 * Fisher-Yates permutation drawn from the block's generator (shuffle); ids is permuted in place */
inline void push_released(Executor* ex, unsigned* ids, unsigned n) {
    if (ex->mode.schedule == SCHEDULE_SHUFFLE) {
        for (unsigned i = n; i > 1; i--) std::swap(ids[i - 1], ids[next_random(&ex->rng) % i]);
    }
    if (ex->mode.schedule == SCHEDULE_REVERSE) {
        for (unsigned i = n; i-- > 0;) push_ready(ex, ids[i]);
    } else {
        for (unsigned i = 0; i < n; i++) push_ready(ex, ids[i]);
    }
}

/* the current fiber, already back on the ready queue, lets the queue's head run (which may be itself) */
inline void yield_current(Executor* ex, Fiber* f) {
    Fiber* next = pop_ready(ex);
    if (next != f) switch_fiber(ex, f, next, false);
}

/* the current fiber waits: run the next ready fiber */
inline void block_current(Executor* ex, Fiber* f) {
    if (ex->ready_count == 0) deadlock(ex);
    switch_fiber(ex, f, pop_ready(ex), false);
}

/* a thread returned from the kernel */
CUDASIM_NO_TSAN [[noreturn]] inline void thread_exit(Executor* ex, Fiber* f) {
#ifdef CUDASIM_TSAN
    __tsan_release(&ex->race->done);
#endif
    unsigned lane = f->linear % 32;
    Warp& wp = ex->warps[f->linear / 32];
    if (ex->bar_arrived) {
        uint3 t = thread_of(ex, ex->bar_first);
        fail("thread exited while %u threads wait at __syncthreads (%s:%d), e.g. thread (%u,%u,%u): divergent barrier",
             ex->bar_arrived, ex->bar_file, ex->bar_line, t.x, t.y, t.z);
    }
    if (wp.arrived && (wp.mask >> lane & 1u))
        fail("lane %u exited while lanes 0x%08x wait for it at %s (%s:%d) with mask 0x%08x: divergent warp operation",
             lane, wp.arrived, wp.op, wp.file, wp.line, wp.mask);
    if (f->cp_count) {
        const CpAsyncCopy& c = ex->cp_pending[(size_t)f->linear * kMaxCpAsyncPending];
        fail("thread exited with %u cp.async copies not waited for (the oldest issued at %s:%d): a GPU would complete "
             "them, but the project's kernels must cp_async_wait<0>() before exiting",
             f->cp_count, c.file, c.line);
    }
    wp.exited |= 1u << lane;
    if (ex->exited++ == 0) ex->first_exited = f->linear;
    ex->live--;
#ifdef CUDASIM_ASAN
    /* this stack's remaining frames never return: clear their redzones before the slot is reused */
    char* frame = (char*)__builtin_frame_address(0);
    char* lo = frame - 4096 > f->stack_lo ? frame - 4096 : f->stack_lo;
    __asan_unpoison_memory_region(lo, (size_t)(f->stack_lo + ex->stack_bytes - lo));
#endif
    if (ex->live == 0) switch_fiber(ex, f, nullptr, true);
    else if (ex->ready_count == 0) deadlock(ex);
    else switch_fiber(ex, f, pop_ready(ex), true);
    __builtin_unreachable();
}

CUDASIM_NO_TSAN inline void fiber_main(void) {
#ifdef CUDASIM_ASAN
    __sanitizer_finish_switch_fiber(nullptr, nullptr, nullptr);
#endif
    Executor* ex = t_exec;
#ifdef CUDASIM_TSAN
    __tsan_acquire(&ex->race->block_start);
#endif
    ex->entry(ex->entry_ctx);
    thread_exit(ex, t_cur);
}

/* ---- executors: one per OS thread ---- */

inline size_t stack_kib_setting() {
    const char* s = getenv("CUDASIM_STACK_KB");
    long kb = s ? atol(s) : 256;
    return kb >= 16 ? (size_t)kb : 16;
}

/* makes room for n fiber stacks in s (one mapping; the lowest page of each slot is a guard page) and gives the
 * executor's first n fibers those stacks */
inline void reserve_fibers(Executor* ex, FiberStacks& s, unsigned n) {
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    if (n > s.capacity) {
        if (s.region) munmap(s.region, s.region_bytes);
        s.stack_bytes = (stack_kib_setting() * 1024 + page - 1) / page * page;
        s.slot_bytes = s.stack_bytes + page;
        s.region_bytes = s.slot_bytes * n;
        void* region = mmap(nullptr, s.region_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        if (region == MAP_FAILED) fail("cannot map %zu bytes of fiber stacks: %s", s.region_bytes, strerror(errno));
        s.region = (char*)region;
        for (unsigned i = 0; i < n; i++)
            if (mprotect(s.region + (size_t)i * s.slot_bytes, page, PROT_NONE) != 0)
                fail("mprotect of a fiber guard page failed: %s", strerror(errno));
        s.capacity = n;
    }
    ex->stack_bytes = s.stack_bytes;
    for (unsigned i = 0; i < n; i++) ex->fibers[i].stack_lo = s.region + (size_t)i * s.slot_bytes + page;
}

inline Executor::~Executor() {
#ifdef CUDASIM_TSAN
    for (auto& ctx : race_ctx) {
        if (ctx.second.sched) __tsan_destroy_fiber(ctx.second.sched);
        for (void* slot : ctx.second.slots) __tsan_destroy_fiber(slot);
    }
#endif
}

inline Executor* this_thread_executor() {
    static thread_local Executor* ex = nullptr;
    static thread_local struct Owner { Executor** p; ~Owner() { delete *p; } } owner{&ex};
    (void)owner;
    if (!ex) {
        ex = new Executor();
        pthread_attr_t attr;
        if (pthread_getattr_np(pthread_self(), &attr) != 0) fail("pthread_getattr_np failed");
        if (pthread_attr_getstack(&attr, &ex->sched_stack_lo, &ex->sched_stack_size) != 0) fail("pthread_attr_getstack failed");
        pthread_attr_destroy(&attr);
    }
    return ex;
}

#ifndef CUDASIM_ASM_SWITCH
/* a fresh context that enters fiber_main on the fiber's stack (own frame: getcontext returns twice) */
inline void init_ucontext(Executor* ex, Fiber* f) {
    if (getcontext(&f->uc) != 0) fail("getcontext failed");
    f->uc.uc_stack.ss_sp = f->stack_lo;
    f->uc.uc_stack.ss_size = ex->stack_bytes;
    f->uc.uc_link = nullptr;
    makecontext(&f->uc, fiber_main, 0);
}
#endif

/* runs block `b` (linear block index, x fastest) of the current launch to completion */
inline void run_block(Executor* ex, unsigned long long b) {
    Untracked untracked;
#ifdef CUDASIM_TSAN
    /* the blocks that ran before on this OS thread, the launch and the host's work before it happen before
     * this block */
    __tsan_acquire(&ex->race->done);
    __tsan_release(&ex->race->block_start);
#endif
    dim3 g = ex->grid_dim, bd = ex->block_dim;
    ex->block_idx = uint3{(unsigned)(b % g.x), (unsigned)(b / g.x % g.y), (unsigned)(b / ((unsigned long long)g.x * g.y))};
    unsigned n = bd.x * bd.y * bd.z;
    ex->nthreads = n;
    ex->live = n;
    ex->exited = 0;
    ex->bar_arrived = 0;
    ex->ready_head = 0;
    ex->ready_count = 0;
    if (ex->mode.schedule == SCHEDULE_SHUFFLE) {
        ex->rng = ex->mode.seed ^ (b + 1) * 0xD1B54A32D192ED03ull;
        next_random(&ex->rng);
    }
    for (unsigned w = 0; w * 32 < n; w++) {
        ex->warps[w].arrived = 0;
        ex->warps[w].exited = 0;
    }
    for (unsigned i = 0; i < n; i++) {
        Fiber* f = &ex->fibers[i];
        f->linear = i;
        f->thread_idx = uint3{i % bd.x, i / bd.x % bd.y, i / (bd.x * bd.y)};
        f->asan_fake_stack = nullptr;
        f->cp_count = 0;
        f->cp_commits = 0;
#ifdef CUDASIM_ASM_SWITCH
        /* a saved context: r15 r14 r13=fiber_main r12 rbx rbp=0, then the return address; after the
         * ret, rsp is 16-byte aligned so the trampoline's call enters fiber_main with the ABI alignment */
        void** sp = (void**)(f->stack_lo + ex->stack_bytes - 72);
        sp[0] = nullptr;
        sp[1] = nullptr;
        sp[2] = (void*)&fiber_main;
        sp[3] = nullptr;
        sp[4] = nullptr;
        sp[5] = nullptr;
        sp[6] = (void*)&cudasim_fiber_trampoline;
        f->sp = sp;
#else
        init_ucontext(ex, f);
#endif
        ex->bar_waiters[i] = i;
    }
    push_released(ex, ex->bar_waiters, n);
    switch_fiber(ex, nullptr, pop_ready(ex), false);
}

/* ---- __syncthreads: O(1) per arrival. fifo: the last arrival goes on and then the waiters run in arrival
 * order; reverse/shuffle: every thread of the block, the last arrival included, is made ready in the mode's
 * order of thread indices (O(block) per barrier) and the queue's head runs ---- */
inline void syncthreads_at(const char* file, int line) {
    Untracked untracked;
    Executor* ex = t_exec;
    Fiber* f = t_cur;
    if (ex->exited) {
        uint3 t = thread_of(ex, ex->first_exited);
        fail("__syncthreads (%s:%d) reached after %u threads of the block exited (e.g. thread (%u,%u,%u)): divergent barrier",
             file, line, ex->exited, t.x, t.y, t.z);
    }
    if (ex->bar_arrived == 0) {
        ex->bar_file = file;
        ex->bar_line = line;
        ex->bar_first = f->linear;
    } else if (ex->bar_line != line || (ex->bar_file != file && strcmp(ex->bar_file, file) != 0)) {
        uint3 t = thread_of(ex, ex->bar_first);
        fail("waits at __syncthreads (%s:%d) while thread (%u,%u,%u) waits at __syncthreads (%s:%d): divergent barrier",
             file, line, t.x, t.y, t.z, ex->bar_file, ex->bar_line);
    }
    race_arrive(ex, -1);
    if (ex->bar_arrived + 1 < ex->nthreads) {
        ex->bar_waiters[ex->bar_arrived++] = f->linear;
        block_current(ex, f);
        race_resume(ex, f);
        return;
    }
    race_complete(ex, -1, ex->bar_waiters, ex->bar_arrived);
    if (ex->mode.schedule == SCHEDULE_FIFO) {
        for (unsigned i = 0; i < ex->bar_arrived; i++) push_ready(ex, ex->bar_waiters[i]);
        ex->bar_arrived = 0;
        return;
    }
    ex->bar_arrived = 0;
    for (unsigned i = 0; i < ex->nthreads; i++) ex->bar_waiters[i] = i;
    push_released(ex, ex->bar_waiters, ex->nthreads);
    yield_current(ex, f);
}

/* ---- warp rendezvous ---- */

inline unsigned lanes_in_warp(const Executor* ex, unsigned w) {
    unsigned n = ex->nthreads - 32 * w;
    return n >= 32 ? 0xffffffffu : (1u << n) - 1u;
}

/* The calling lane joins warp operation `op` over the lanes of `mask`, leaving its input and output
 * pointers; the last lane to arrive runs fn for all lanes and wakes the others (fifo: it goes on, the others
 * queue in lane order; reverse/shuffle: all lanes of the mask, itself included, queue in the mode's order
 * of lanes, behind the threads already ready). aligned: a PTX .aligned instruction (mma, ldmatrix), which
 * every lane must reach at the same instruction (PTX ISA: "otherwise the behavior is undefined"), so lanes
 * arriving from different call sites are reported; shuffles and votes may join from different sites. */
inline void syncwarp_fn(const Warp& wp) { (void)wp; }

inline void warp_collective(const char* op, unsigned mask, WarpFn fn, const void* in, void* out, const char* file, int line,
                            bool aligned = false) {
    Untracked untracked;
    Executor* ex = t_exec;
    Fiber* f = t_cur;
    unsigned lane = f->linear % 32, w = f->linear / 32;
    Warp& wp = ex->warps[w];
    if (!(mask >> lane & 1u)) fail("%s (%s:%d): mask 0x%08x does not include the calling lane %u", op, file, line, mask, lane);
    if (mask & ~lanes_in_warp(ex, w))
        fail("%s (%s:%d): mask 0x%08x names lanes 0x%08x that do not exist (warp %u of a %u-thread block)", op, file, line,
             mask, mask & ~lanes_in_warp(ex, w), w, ex->nthreads);
    if (mask & wp.exited)
        fail("%s (%s:%d): mask 0x%08x names lanes 0x%08x that have exited: divergent warp operation", op, file, line, mask,
             mask & wp.exited);
    if (wp.arrived == 0) {
        wp.mask = mask;
        wp.fn = fn;
        wp.op = op;
        wp.file = file;
        wp.line = line;
        wp.first_lane = lane;
    } else if (wp.fn != fn || wp.mask != mask || strcmp(wp.op, op) != 0) {
        fail("%s (%s:%d) with mask 0x%08x while lane %u waits at %s (%s:%d) with mask 0x%08x: lanes disagree on the warp operation",
             op, file, line, mask, wp.first_lane, wp.op, wp.file, wp.line, wp.mask);
    } else if (aligned && (wp.line != line || strcmp(wp.file, file) != 0)) {
        fail("%s (%s:%d) while lane %u waits at %s (%s:%d): lanes reach a .aligned warp instruction from different call sites",
             op, file, line, wp.first_lane, wp.op, wp.file, wp.line);
    }
    wp.in[lane] = in;
    wp.out[lane] = out;
    wp.arrived |= 1u << lane;
    bool orders_memory = fn == syncwarp_fn;
    if (orders_memory) race_arrive(ex, (int)w);
    if (wp.arrived != mask) {
        block_current(ex, f);
        if (orders_memory) race_resume(ex, f);
        return;
    }
    fn(wp);
    wp.arrived = 0;
    if (orders_memory) race_complete_warp(ex, w, mask);
    if (ex->mode.schedule == SCHEDULE_FIFO) {
        for (unsigned others = mask & ~(1u << lane); others; others &= others - 1)
            push_ready(ex, 32 * w + (unsigned)__builtin_ctz(others));
        return;
    }
    unsigned ids[32], n = 0;
    for (unsigned m = mask; m; m &= m - 1) ids[n++] = 32 * w + (unsigned)__builtin_ctz(m);
    push_released(ex, ids, n);
    yield_current(ex, f);
}

/* ---- cp.async (llmc/mma.cuh's simulated cp_async_*). Copy at issue by default; deferred: cp_async_16 records
 * (dst, src) in the thread's open group and fills dst with 0xFF bytes (bf16/fp32 NaN) at once, commit closes
 * the group, cp_async_wait<N> performs the copies of all but the newest N committed groups (a GPU reads the
 * source by completion too). A read before the wait sees the poison. ---- */
inline void cp_async_issue(void* dst, const void* src, const char* file, int line) {
    Executor* ex = t_exec;
    Fiber* f = t_cur;
    if (!ex->mode.cp_async_deferred) {
        memcpy(dst, src, 16);
        return;
    }
    {
        Untracked untracked; /* the simulator's bookkeeping; the copy's accesses (here, at the wait) are the thread's */
        if (f->cp_count == kMaxCpAsyncPending)
            fail("cp_async_16 (%s:%d): %u copies already pending in this thread (the simulator's bound): wait for older groups",
                 file, line, kMaxCpAsyncPending);
        ex->cp_pending[(size_t)f->linear * kMaxCpAsyncPending + f->cp_count++] = CpAsyncCopy{dst, src, f->cp_commits, line, file};
    }
    memset(dst, 0xff, 16);
}
inline void cp_async_commit_group() {
    Untracked untracked;
    if (t_exec->mode.cp_async_deferred) t_cur->cp_commits++;
}
/* completes the thread's copies of every group with at least `newest` committed groups after it */
inline void cp_async_wait_groups(unsigned newest) {
    if (!t_exec->mode.cp_async_deferred) return;
    Fiber* f = t_cur;
    CpAsyncCopy* q = t_exec->cp_pending + (size_t)f->linear * kMaxCpAsyncPending;
    unsigned done = 0, count;
    {
        Untracked untracked;
        count = f->cp_count;
        while (done < count && f->cp_commits - q[done].group > newest) done++;
    }
    for (unsigned i = 0; i < done; i++) memcpy(q[i].dst, q[i].src, 16);
    Untracked untracked;
    memmove(q, q + done, (count - done) * sizeof *q);
    f->cp_count = count - done;
}

/* ---- shuffles: the PTX shfl.sync definition. With segment mask s = 32 - width:
 * minLane = lane & s, maxLane = minLane | (c & ~s) where c = 31 (idx/down/bfly) or 0 (up), b = arg & 31;
 * idx: j = minLane | (b & ~s); up: j = lane - b, valid if j >= maxLane; down: j = lane + b, valid if
 * j <= maxLane; bfly: j = lane ^ b, valid if j <= maxLane. An invalid j returns the lane's own value. */
enum ShflMode { SHFL_IDX, SHFL_UP, SHFL_DOWN, SHFL_BFLY };
struct ShflIn {
    uint64_t bits;
    int arg;
    int width;
};

template <int mode>
inline void shfl_fn(const Warp& wp) {
    const ShflIn* first = (const ShflIn*)wp.in[wp.first_lane];
    int width = first->width;
    if (width < 1 || width > 32 || (width & (width - 1)))
        fail("%s (%s:%d): width %d is not a power of two in [1, 32]", wp.op, wp.file, wp.line, width);
    int seg = 32 - width;
    int cval = mode == SHFL_UP ? 0 : 31;
    for (unsigned m = wp.mask; m; m &= m - 1) {
        int lane = __builtin_ctz(m);
        const ShflIn* in = (const ShflIn*)wp.in[lane];
        if (in->width != width)
            fail("%s (%s:%d): lane %d passes width %d, lane %u width %d", wp.op, wp.file, wp.line, lane, in->width,
                 wp.first_lane, width);
        int b = in->arg & 31;
        int min_lane = lane & seg, max_lane = min_lane | (cval & ~seg);
        int j;
        bool valid;
        switch (mode) {
        case SHFL_IDX: j = min_lane | (b & ~seg); valid = j <= max_lane; break;
        case SHFL_UP: j = lane - b; valid = j >= max_lane; break;
        case SHFL_DOWN: j = lane + b; valid = j <= max_lane; break;
        default: j = lane ^ b; valid = j <= max_lane; break;
        }
        uint64_t r;
        if (!valid) r = in->bits;
        else if (!(wp.mask >> j & 1u)) r = ~0ull; /* reading a lane outside the mask: undefined on a GPU */
        else r = ((const ShflIn*)wp.in[j])->bits;
        *(uint64_t*)wp.out[lane] = r;
    }
}

template <int mode, typename T>
inline T shfl(const char* op, unsigned mask, T var, int arg, int width, const char* file, int line) {
    static_assert(sizeof(T) <= 8 && std::is_trivially_copyable<T>::value, "shuffles move 4 or 8 bytes");
    ShflIn in;
    in.bits = 0;
    memcpy(&in.bits, &var, sizeof(T));
    in.arg = arg;
    in.width = width;
    uint64_t out;
    warp_collective(op, mask, shfl_fn<mode>, &in, &out, file, line);
    T r;
    memcpy(&r, &out, sizeof(T));
    return r;
}

/* ballot / all / any: in = the lane's predicate (int), out = the ballot of the mask's lanes */
inline void ballot_fn(const Warp& wp) {
    unsigned ballot = 0;
    for (unsigned m = wp.mask; m; m &= m - 1) {
        unsigned lane = (unsigned)__builtin_ctz(m);
        if (*(const int*)wp.in[lane]) ballot |= 1u << lane;
    }
    for (unsigned m = wp.mask; m; m &= m - 1) *(unsigned*)wp.out[__builtin_ctz(m)] = ballot;
}
/* ---- launches ---- */

/* per-kernel dynamic shared memory limits set by cudaFuncSetAttribute */
struct FuncAttrTable {
    std::mutex lock;
    std::map<const void*, size_t> max_dynamic_smem;
};
inline FuncAttrTable& func_attr_table() { static FuncAttrTable t; return t; }

inline size_t dynamic_smem_limit(const void* kernel) {
    FuncAttrTable& t = func_attr_table();
    std::lock_guard<std::mutex> guard(t.lock);
    auto it = t.max_dynamic_smem.find(kernel);
    return it == t.max_dynamic_smem.end() ? kSmemDefaultMax : it->second;
}

/* the launch's configuration errors, as the CUDA runtime reports them */
inline cudaError_t check_launch(const void* kernel, dim3 grid, dim3 block, size_t smem) {
    if (block.x == 0 || block.y == 0 || block.z == 0 || block.x > 1024 || block.y > 1024 || block.z > 64 ||
        (unsigned long long)block.x * block.y * block.z > kMaxThreadsPerBlock)
        return cudaErrorInvalidConfiguration;
    if (grid.x == 0 || grid.y == 0 || grid.z == 0 || grid.x > 2147483647u || grid.y > 65535 || grid.z > 65535)
        return cudaErrorInvalidConfiguration;
    if (smem > dynamic_smem_limit(kernel)) return cudaErrorInvalidValue;
    return cudaSuccess;
}

/* the OS threads a launch runs on: CUDASIM_THREADS, else OpenMP's default */
inline int os_threads_setting() {
    const char* s = getenv("CUDASIM_THREADS");
    long n = s ? atol(s) : omp_get_max_threads();
    return n < 1 ? 1 : (int)n;
}

/* a whole string of decimal digits that fits 64 bits */
inline bool parse_decimal(const char* s, uint64_t* value) {
    if (*s < '0' || *s > '9') return false;
    char* end = nullptr;
    errno = 0;
    *value = strtoull(s, &end, 10);
    return errno == 0 && *end == 0;
}

/* CUDASIM_SCHEDULE = fifo (default) | reverse | shuffle[:seed] (seed: decimal, default 1); CUDASIM_CP_ASYNC =
 * issue | deferred (default: issue under fifo, deferred otherwise). A bad value is an error. */
inline LaunchMode launch_mode() {
    LaunchMode m{SCHEDULE_FIFO, 1, false};
    const char* s = getenv("CUDASIM_SCHEDULE");
    if (s && *s && strcmp(s, "fifo") != 0) {
        if (strcmp(s, "reverse") == 0) m.schedule = SCHEDULE_REVERSE;
        else if (strcmp(s, "shuffle") == 0) m.schedule = SCHEDULE_SHUFFLE;
        else if (strncmp(s, "shuffle:", 8) == 0 && parse_decimal(s + 8, &m.seed)) m.schedule = SCHEDULE_SHUFFLE;
        else fail("CUDASIM_SCHEDULE=%s: expected fifo, reverse, shuffle or shuffle:<decimal seed>", s);
    }
    m.cp_async_deferred = m.schedule != SCHEDULE_FIFO;
    const char* c = getenv("CUDASIM_CP_ASYNC");
    if (c && *c) {
        if (strcmp(c, "deferred") == 0) m.cp_async_deferred = true;
        else if (strcmp(c, "issue") == 0) m.cp_async_deferred = false;
        else fail("CUDASIM_CP_ASYNC=%s: expected issue or deferred", c);
    }
    return m;
}

#ifdef CUDASIM_TSAN
/* the race check's context of a launch of stream `key` on this OS thread (n threads a block): the stream's own
 * fiber on the thread that runs its work, else this OS thread's fiber for that stream; its slot fibers; the
 * launch's start (fork, released by the host thread) acquired */
CUDASIM_NO_TSAN inline void race_enter(Executor* ex, const void* key, unsigned n, const char* fork) {
    Executor::RaceCtx* rc;
    {
        Untracked untracked;
        rc = &ex->race_ctx[key];
        while (rc->slots.size() < n) rc->slots.push_back(__tsan_create_fiber(0));
        if (t_race_stream != key && !rc->sched) rc->sched = __tsan_create_fiber(0);
    }
    ex->race = rc;
    ex->race_own = __tsan_get_current_fiber();
    if (t_race_stream != key) __tsan_switch_to_fiber(rc->sched, __tsan_switch_to_fiber_no_sync);
    ex->race_sched = __tsan_get_current_fiber();
    race_acquire(fork);
    for (unsigned i = 0; i < n; i++) ex->fibers[i].race_fiber = rc->slots[i];
}
/* every thread of the launch that ran here happens before what follows */
CUDASIM_NO_TSAN inline void race_settle(Executor* ex) { __tsan_acquire(&ex->race->done); }
/* and before the join; this OS thread's own fiber again */
CUDASIM_NO_TSAN inline void race_leave(Executor* ex, const char* join) {
    race_release(join);
    if (ex->race_sched != ex->race_own) __tsan_switch_to_fiber(ex->race_own, __tsan_switch_to_fiber_no_sync);
    ex->race = nullptr;
}
/* each context's fibers have stacks of their own */
inline FiberStacks& fiber_stacks(Executor* ex) { return ex->race->stacks; }
#else
inline void race_enter(Executor*, const void*, unsigned, const char*) {}
inline FiberStacks& fiber_stacks(Executor* ex) { return ex->stacks; }
inline void race_settle(Executor*) {}
inline void race_leave(Executor*, const char*) {}
#endif

#ifdef CUDASIM_TSAN
#ifndef CUDASIM_ASM_SWITCH
#error "the race check (ThreadSanitizer) needs the x86-64 context switch (not CUDASIM_UCONTEXT)"
#endif
constexpr size_t kRaceStackBytes = (size_t)8 << 20; /* a stream's work: launches, the fake libraries, MPI */
struct RaceStackCall {
    void (*fn)(void*);
    void* arg;
    void* back_sp;
};
inline thread_local RaceStackCall* t_race_call = nullptr;
/* entered on a stream's stack through cudasim_fiber_trampoline: runs the call, then goes back for good */
CUDASIM_NO_TSAN inline void race_stack_main(void) {
    RaceStackCall* c = t_race_call;
    c->fn(c->arg);
    void* abandoned;
    cudasim_switch_context(&abandoned, c->back_sp);
    __builtin_unreachable();
}
CUDASIM_NO_TSAN inline void race_run_on_stack(RaceStream& r, void (*fn)(void*), void* arg) {
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    if (!r.stack) {
        void* m = mmap(nullptr, kRaceStackBytes + page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        if (m == MAP_FAILED) fail("cannot map a stream's stack for the race check: %s", strerror(errno));
        if (mprotect(m, page, PROT_NONE) != 0) fail("mprotect of a stream stack's guard page failed: %s", strerror(errno));
        r.stack = (char*)m + page;
    }
    if (r.running) fail("race check: a stream's work queued more work on the same stream and ran it at once");
    r.running = true;
    /* a saved context as run_block prepares a fiber's: r13 = race_stack_main, then the trampoline */
    void** sp = (void**)(r.stack + kRaceStackBytes - 72);
    for (int i = 0; i < 6; i++) sp[i] = nullptr;
    sp[2] = (void*)&race_stack_main;
    sp[6] = (void*)&cudasim_fiber_trampoline;
    RaceStackCall call{fn, arg, nullptr}, *prev = t_race_call;
    t_race_call = &call;
    cudasim_switch_context(&call.back_sp, sp);
    t_race_call = prev;
    r.running = false;
}
#endif

/* runs `blocks` blocks on the calling OS thread's executor; the launch fields are per executor. race_key,
 * race_fork, race_join: the race check's stream and the launch's sync addresses (none on one OS thread) */
inline void run_blocks_here(const char* text, void (*entry)(void*), void* ctx, LaunchMode mode, dim3 grid, dim3 block,
                            size_t smem, unsigned long long begin, unsigned long long step, unsigned long long end,
                            const void* race_key, const char* race_fork, const char* race_join) {
    Executor* ex;
    unsigned nthreads = block.x * block.y * block.z;
    {
        Untracked untracked;
        ex = this_thread_executor();
    }
    race_enter(ex, race_key, nthreads, race_fork);
    {
        Untracked untracked; /* the executor's bookkeeping (its fibers are tracked, each for itself) */
        reserve_fibers(ex, fiber_stacks(ex), nthreads);
        ex->mode = mode;
        if (mode.cp_async_deferred) {
            ex->cp_pending = (CpAsyncCopy*)malloc((size_t)nthreads * kMaxCpAsyncPending * sizeof(CpAsyncCopy));
            if (!ex->cp_pending) fail("out of memory for the deferred cp.async copies of %u threads", nthreads);
        }
        ex->kernel_text = text;
        ex->entry = entry;
        ex->entry_ctx = ctx;
        ex->grid_dim = grid;
        ex->block_dim = block;
        if (posix_memalign(&ex->dyn_smem, 128, smem ? smem : 1) != 0) fail("out of memory for %zu bytes of shared memory", smem);
        memset(ex->dyn_smem, 0xFF, smem); /* leftovers on a GPU: NaN here, so a read before a write shows */
        t_exec = ex;
        for (unsigned long long b = begin; b < end; b += step) run_block(ex, b);
        race_settle(ex);
        t_exec = nullptr;
        free(ex->dyn_smem);
        ex->dyn_smem = nullptr;
        free(ex->cp_pending);
        ex->cp_pending = nullptr;
    }
    race_leave(ex, race_join);
}

/* Runs a launch's blocks, dealt round-robin over the OS threads (block b on thread b % n). The team always
 * has the set size (threads past the last block idle): libgomp ends the threads a smaller team leaves out and
 * starts new ones for the next larger team, and each new OS thread needs a new executor. A one-block launch
 * runs on the calling thread. (Not instrumented by the race check: only its annotations order the region.) */
CUDASIM_NO_TSAN inline void run_grid(const char* text, void (*entry)(void*), void* call, LaunchMode mode, dim3 grid, dim3 block, size_t smem) {
    unsigned long long nblocks = (unsigned long long)grid.x * grid.y * grid.z;
    int nt = os_threads_setting();
    const void* key = race_current_stream();
    if (nt == 1 || nblocks == 1) {
        run_blocks_here(text, entry, call, mode, grid, block, smem, 0, 1, nblocks, key, nullptr, nullptr);
        return;
    }
    /* OpenMP's own synchronisation is invisible to TSan: the launch's start and end through two addresses of
     * the launch's own call object (released by the host thread inside the region: after it wrote the
     * region's shared variables) */
    const char *fork = (const char*)call, *join = fork + 1;
#pragma omp parallel num_threads(nt)
    {
#ifdef CUDASIM_TSAN
#pragma omp master
        race_release(fork);
#pragma omp barrier
#endif
        if ((unsigned long long)omp_get_thread_num() < nblocks)
            run_blocks_here(text, entry, call, mode, grid, block, smem, (unsigned long long)omp_get_thread_num(),
                            (unsigned long long)omp_get_num_threads(), nblocks, key, fork, join);
    }
    race_acquire(join);
}

/* The host/device memory check of a launch's argument `index`: a non-NULL raw pointer must point into a
 * cudaMalloc allocation or pinned host memory (start through one past the end), which a GPU kernel can
 * read; a pointer to pageable host memory prints one line and returns false. Pointers inside struct
 * arguments are not checked. */
template <typename T>
inline bool check_kernel_arg(const char* text, int index, const T& value) {
    if constexpr (std::is_pointer<T>::value && !std::is_function<typename std::remove_pointer<T>::type>::value) {
        const void* p = (const void*)value;
        if (!p || find_alloc(p, true) || is_pinned(p, true)) return true;
        char name[128];
        kernel_name(text, name, sizeof name);
        fflush(stdout);
        fprintf(stderr, "cudasim: error: launch of kernel %s: argument %d (counting from 0) %p is pageable host memory, "
                        "which a GPU kernel cannot access (device memory from cudaMalloc or pinned memory from "
                        "cudaMallocHost only); launch: %s\n", name, index, p, text);
        return false;
    }
    return true;
}
template <typename Tuple, size_t... I>
inline bool check_kernel_args(const char* text, const Tuple& params, std::index_sequence<I...>) {
    bool ok = true;
    ((ok = check_kernel_arg(text, (int)I, std::get<I>(params)) && ok), ...);
    return ok;
}

/* Runs kernel(args...) over grid x block on `stream` (now, or queued: CUDASIM_STREAMS, cudasim_runtime.h);
 * configuration errors are recorded for cudaGetLastError at the call and nothing runs. Blocks are dealt
 * round-robin over the OS threads (block b on thread b % n), so which thread runs a block is fixed; each
 * block's result does not depend on it. The arguments are copied at the call, as a GPU launch does; a raw
 * pointer argument to pageable host memory is cudaErrorInvalidValue (check_kernel_arg) and nothing runs. */
template <typename... P, typename... A>
inline void launch(const char* text, void (*kernel)(P...), dim3 grid, dim3 block, size_t smem, cudaStream_t stream, A&&... args) {
    cudaError_t err = check_launch((const void*)kernel, grid, block, smem);
    if (err != cudaSuccess) {
        set_error(err);
        return;
    }
    struct Call {
        void (*kernel)(P...);
        std::tuple<std::decay_t<P>...> params;
    };
    auto call = std::make_shared<Call>(Call{kernel, std::tuple<std::decay_t<P>...>(std::forward<A>(args)...)});
    if (!check_kernel_args(text, call->params, std::index_sequence_for<P...>{})) {
        set_error(cudaErrorInvalidValue);
        return;
    }
    void (*entry)(void*) = [](void* c) { std::apply(((Call*)c)->kernel, ((Call*)c)->params); };
    LaunchMode mode = launch_mode();
    /* the closure holds the only reference, so the host frees the call with the closure (untracked) */
    enqueue(stream, [call = std::move(call), text, entry, mode, grid, block, smem] { run_grid(text, entry, call.get(), mode, grid, block, smem); });
}

inline void* dynamic_smem() { return t_exec->dyn_smem; }

} /* namespace cudasim */

/* ---- the kernel-side built-ins ---- */
#define threadIdx (static_cast<const uint3&>(::cudasim::t_cur->thread_idx))
#define blockIdx (static_cast<const uint3&>(::cudasim::t_exec->block_idx))
#define blockDim (static_cast<const dim3&>(::cudasim::t_exec->block_dim))
#define gridDim (static_cast<const dim3&>(::cudasim::t_exec->grid_dim))
constexpr int warpSize = 32;

#define CUDASIM_SITE const char *cudasim_file = __builtin_FILE(), int cudasim_line = __builtin_LINE()

inline void __syncthreads(CUDASIM_SITE) { cudasim::syncthreads_at(cudasim_file, cudasim_line); }
inline void __syncwarp(unsigned mask = 0xffffffffu, CUDASIM_SITE) {
    cudasim::warp_collective("__syncwarp", mask, cudasim::syncwarp_fn, nullptr, nullptr, cudasim_file, cudasim_line);
}
template <typename T>
inline T __shfl_sync(unsigned mask, T var, int src_lane, int width = 32, CUDASIM_SITE) {
    return cudasim::shfl<cudasim::SHFL_IDX>("__shfl_sync", mask, var, src_lane, width, cudasim_file, cudasim_line);
}
template <typename T>
inline T __shfl_up_sync(unsigned mask, T var, unsigned delta, int width = 32, CUDASIM_SITE) {
    return cudasim::shfl<cudasim::SHFL_UP>("__shfl_up_sync", mask, var, (int)delta, width, cudasim_file, cudasim_line);
}
template <typename T>
inline T __shfl_down_sync(unsigned mask, T var, unsigned delta, int width = 32, CUDASIM_SITE) {
    return cudasim::shfl<cudasim::SHFL_DOWN>("__shfl_down_sync", mask, var, (int)delta, width, cudasim_file, cudasim_line);
}
template <typename T>
inline T __shfl_xor_sync(unsigned mask, T var, int lane_mask, int width = 32, CUDASIM_SITE) {
    return cudasim::shfl<cudasim::SHFL_BFLY>("__shfl_xor_sync", mask, var, lane_mask, width, cudasim_file, cudasim_line);
}
inline unsigned __ballot_sync(unsigned mask, int pred, CUDASIM_SITE) {
    unsigned ballot;
    cudasim::warp_collective("__ballot_sync", mask, cudasim::ballot_fn, &pred, &ballot, cudasim_file, cudasim_line);
    return ballot;
}
inline int __all_sync(unsigned mask, int pred, CUDASIM_SITE) {
    unsigned ballot;
    cudasim::warp_collective("__all_sync", mask, cudasim::ballot_fn, &pred, &ballot, cudasim_file, cudasim_line);
    return ballot == mask;
}
inline int __any_sync(unsigned mask, int pred, CUDASIM_SITE) {
    unsigned ballot;
    cudasim::warp_collective("__any_sync", mask, cudasim::ballot_fn, &pred, &ballot, cudasim_file, cudasim_line);
    return ballot != 0;
}

/* cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes): raises the kernel's
 * dynamic shared memory limit, at most to the device's opt-in maximum (the H100's 227 KiB; CUDASIM_SMEM_OPTIN) */
template <typename F>
inline cudaError_t cudaFuncSetAttribute(F* kernel, cudaFuncAttribute attr, int value) {
    if (attr == cudaFuncAttributePreferredSharedMemoryCarveout) return cudaSuccess;
    if (attr != cudaFuncAttributeMaxDynamicSharedMemorySize || value < 0 || (size_t)value > cudasim::smem_optin_max())
        return cudasim::set_error(cudaErrorInvalidValue);
    cudasim::FuncAttrTable& t = cudasim::func_attr_table();
    std::lock_guard<std::mutex> guard(t.lock);
    t.max_dynamic_smem[(const void*)kernel] = (size_t)value;
    return cudaSuccess;
}

#endif /* CUDASIM_EXEC_H */
