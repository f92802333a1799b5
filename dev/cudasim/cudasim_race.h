/*
 * dev/cudasim/cudasim_race.h — the race check's host side (make sim-test-races: the simulator built with
 * -fsanitize=thread). Included by cudasim.h before the runtime; the device side (simulated threads as TSan
 * fibers, barriers) is in cudasim_exec.h. Without ThreadSanitizer everything here is empty.
 *
 * Contexts: the host thread, and each stream, whose work (kernels, copies, memsets, the fake libraries'
 * calls) runs as that stream's own TSan fiber (race_as_stream), whichever host call happens to execute it.
 * Happens-before edges, each through a sync address of its own (a token, one per piece of work):
 *   - the host to a piece of work: released when the host queues it (after building it), acquired when it
 *     starts;
 *   - a stream's work runs in order (one fiber);
 *   - a piece of work to what waits for it: released when it ends, acquired by the host when it
 *     synchronises with it (stream, event, device synchronisation, a blocking copy, cudaFree), by the work
 *     after a cudaStreamWaitEvent on its event's record, and by work that CUDA's implicit ordering puts
 *     after it (the legacy default stream and the blocking streams).
 * So a kernel on one stream reading what another stream's kernel writes without an event wait, or the
 * host reading a result it did not synchronise with, is reported whatever order the simulator ran them in.
 * Global state: t_race_stream, the stream whose work this OS thread runs now (thread_local).
 */
#ifndef CUDASIM_RACE_H
#define CUDASIM_RACE_H

#include <deque>
#include <vector>

#if defined(__SANITIZE_THREAD__)
#define CUDASIM_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define CUDASIM_TSAN 1
#endif
#endif

#ifdef CUDASIM_TSAN
/* not instrumented: accesses in a function (and its OpenMP regions) that only the race check's annotations order */
#define CUDASIM_NO_TSAN __attribute__((no_sanitize("thread")))
#include <sanitizer/tsan_interface.h>
/* ThreadSanitizer entry points its header does not declare */
extern "C" {
void __tsan_ignore_thread_begin(void);
void __tsan_ignore_thread_end(void);
void __tsan_read_range(void* addr, unsigned long size);
}
#else
#define CUDASIM_NO_TSAN
#endif

namespace cudasim {

#ifdef CUDASIM_TSAN
/* the simulator's own bookkeeping while one lives: not tracked */
struct Untracked {
    Untracked() { __tsan_ignore_thread_begin(); }
    ~Untracked() { __tsan_ignore_thread_end(); }
    Untracked(const Untracked&) = delete;
    Untracked& operator=(const Untracked&) = delete;
};
/* a stream's TSan fiber, its own C stack (the host's stack, shared, would look raced by every frame), and one
 * sync address per piece of work queued on it (ticket t: tokens[t - 1]) */
struct RaceStream {
    void* fiber = nullptr;
    char* stack = nullptr;
    bool running = false;
    std::deque<char> tokens;
};
/* runs fn(arg) on r's own stack (cudasim_exec.h) */
void race_run_on_stack(RaceStream& r, void (*fn)(void*), void* arg);
inline thread_local const void* t_race_stream = nullptr;

inline const void* race_current_stream() { return t_race_stream; }
inline const char* race_token(RaceStream& r, unsigned long long ticket) { return ticket ? &r.tokens[ticket - 1] : nullptr; }
inline void race_release(const char* token) {
    if (token) __tsan_release(const_cast<char*>(token));
}
inline void race_acquire(const char* token) {
    if (token) __tsan_acquire(const_cast<char*>(token));
}
/* a new piece of work on the stream: its token (and the stream's fiber, made now: TSan orders a new fiber after
 * what its maker did so far, and the host makes it when it queues the stream's first work) */
inline const char* race_new_token(RaceStream& r) {
    if (!r.fiber) r.fiber = __tsan_create_fiber(0);
    r.tokens.push_back(0);
    return &r.tokens.back();
}
/* Runs fn as the stream (key: the stream): fn's token (the host's clock when it queued fn) and the tokens of
 * the work fn waits for are acquired, and at the end the stream's clock is released into fn's token. The
 * host resolves the tokens and keeps the queues: the stream's fiber runs nothing of the runtime's
 * bookkeeping. */
template <typename F>
inline void race_as_stream(RaceStream& r, const void* key, const char* token, const std::vector<const char*>& waits, F& fn) {
    void* prev = __tsan_get_current_fiber();
    const void* prev_key = t_race_stream;
    __tsan_switch_to_fiber(r.fiber, __tsan_switch_to_fiber_no_sync);
    {
        Untracked untracked; /* the host's bookkeeping */
        t_race_stream = key;
        race_acquire(token);
        for (const char* w : waits) race_acquire(w);
    }
    race_run_on_stack(r, [](void* f) { (*(F*)f)(); }, const_cast<void*>((const void*)&fn));
    race_release(token);
    {
        Untracked untracked;
        t_race_stream = prev_key;
    }
    __tsan_switch_to_fiber(prev, __tsan_switch_to_fiber_no_sync);
}
#else
struct Untracked {
    Untracked() {}
};
struct RaceStream {};
inline const void* race_current_stream() { return nullptr; }
inline const char* race_token(RaceStream&, unsigned long long) { return nullptr; }
inline void race_release(const char*) {}
inline void race_acquire(const char*) {}
inline const char* race_new_token(RaceStream&) { return nullptr; }
template <typename F>
inline void race_as_stream(RaceStream&, const void*, const char*, const std::vector<const char*>&, F& fn) { fn(); }
#endif

} /* namespace cudasim */

#endif /* CUDASIM_RACE_H */
