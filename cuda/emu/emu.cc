/* The emulator's machinery (emu.h): fibers and their scheduler, barriers, warp collectives, the
 * shared-memory record, and the runtime API subset.
 *
 * A block's threads are fibers made with makecontext on stacks of their own (mmap'd once, with a
 * guard page below each). Each round resumes every ready fiber once, in the chosen order: a fiber runs
 * until it waits or ends, then hands the CPU straight to the next ready fiber of the round (one
 * swapcontext per hand-off), the last one back to the scheduler. A barrier or collective is released by the
 * last thread to arrive, which marks the waiters ready. A round in which nothing was ready while
 * some thread has not ended is a deadlock, reported with what each waiting thread waits for.
 * Under AddressSanitizer every switch is announced with __sanitizer_{start,finish}_switch_fiber. */
#include "emu.h"

#include <pthread.h>
#include <sys/mman.h>
#include <time.h>
#include <ucontext.h>
#include <unistd.h>

#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <new>
#include <vector>

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
#include <sanitizer/common_interface_defs.h>
#define EMU_ASAN 1
#else
#define EMU_ASAN 0
#endif

namespace emu {
namespace {

/* Instrumented frames are several times larger under the address sanitizer. */
constexpr size_t STACK_BYTES = EMU_ASAN ? 512 * 1024 : 128 * 1024;
constexpr unsigned MAX_STATIC_ARRAYS = 64;
constexpr uint16_t MANY_READERS = 0xFFFF, NO_WARP = 0xFFFF;

enum fiber_state { READY, AT_BARRIER, AT_WARP, DONE };

/* One cp.async in flight: its destination in the arena and the bytes it will write there. */
struct async_copy {
    size_t pos;
    unsigned bytes;
    unsigned char data[16];
};

struct fiber {
    ucontext_t ctx;
    unsigned char *stack = nullptr; /* STACK_BYTES usable, a guard page below */
    fiber_state state = DONE;
    uint3 tid{0, 0, 0};
    unsigned linear = 0;
    site wait{nullptr, 0};
    const char *what = nullptr; /* the collective it waits in */
    unsigned mask = 0;
    void *fake_stack = nullptr; /* address sanitizer's record of this fiber's stack */
    bool abandoned = false;     /* left mid-kernel by a fault: its stack may hold stale poison */
    std::vector<async_copy> copies;  /* its cp.async in flight, oldest first */
    std::vector<size_t> group_ends;  /* copies[0, group_ends[i]) form the committed groups up to i */
};

struct warp {
    lane_data data[32];
    uint16_t sync_epoch = 0; /* completed __syncwarp calls */
};

/* What the block did last to one byte of shared memory. */
struct byte_record {
    uint32_t w_serial, r_serial; /* block serial of the last write and of the read record (0: none) */
    uint32_t w_epoch, r_epoch;   /* barrier epoch then */
    uint16_t w_wepoch, r_wepoch; /* the thread's warp-sync epoch then (the latest read's) */
    uint16_t writer, reader;     /* linear thread index; reader MANY_READERS: several */
    uint16_t reader_warp;        /* the readers' warp, or NO_WARP when they span several */
    uint8_t in_flight;           /* the writer's cp.async to it has not landed */
};

struct emulator {
    order ord = FORWARD;
    uint64_t seed = 1, rng = 1;
    bool configured = false, quiet = false;
    int sm = 0; /* the modelled architecture, 0 until configured */
    char fault_msg[2048] = "";
    cudaError_t fault_code = cudaSuccess; /* the error fault_msg explains */
    bool faulted = false;
    cudaError_t last_error = cudaSuccess;
    std::map<void (*)(void), size_t> max_dynamic; /* cudaFuncAttributeMaxDynamicSharedMemorySize per kernel */

    /* the launch */
    const char *kernel = "";
    dim3 grid, block;
    uint3 bidx{0, 0, 0};
    size_t dyn_bytes = 0;
    std::function<void()> body;
    unsigned nthreads = 0, done = 0, at_barrier = 0;
    uint32_t bar_epoch = 0;
    std::vector<fiber> fibers = std::vector<fiber>(MAX_THREADS);
    warp warps[MAX_THREADS / 32];
    fiber *cur = nullptr;
    std::vector<unsigned> round; /* the order of the current round */
    size_t round_pos = 0;        /* the running fiber's place in it */
    unsigned ran = 0;            /* fibers resumed in this round */
    ucontext_t sched_ctx;
    void *sched_fake = nullptr;
    const void *sched_bottom = nullptr;
    size_t sched_size = 0;

    /* shared memory: [dynamic | static arrays] */
    unsigned char *arena = nullptr;
    byte_record *record = nullptr;
    uint32_t serial = 0;
    size_t used = 0;
    smem_array dyn{"dynamic", nullptr, 0};
    smem_array statics[MAX_STATIC_ARRAYS];
    const void *static_keys[MAX_STATIC_ARRAYS];
    unsigned n_statics = 0;

    std::map<uintptr_t, size_t> allocations;
};

emulator E;

uint64_t next_random(void)
{
    /* splitmix64 */
    uint64_t z = (E.rng += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

void configure_from_environment(void)
{
    if (E.configured) return;
    E.configured = true;
    const char *o = getenv("KVL_EMU_ORDER"), *s = getenv("KVL_EMU_SEED");
    if (o && strcmp(o, "reverse") == 0) E.ord = REVERSE;
    if (o && strcmp(o, "random") == 0) E.ord = RANDOM;
    if (s) E.seed = strtoull(s, nullptr, 0);
    E.rng = E.seed;
}

void configure_arch(void)
{
    if (E.sm != 0) return;
    const char *a = getenv("KVL_EMU_ARCH");
    E.sm = a && strcmp(a, "90") == 0 ? 90 : 80;
}

/* indices[n] = 0 … n − 1 in the current order */
void make_order(std::vector<unsigned> &indices, unsigned n)
{
    indices.resize(n);
    for (unsigned i = 0; i < n; i++) indices[i] = E.ord == REVERSE ? n - 1 - i : i;
    if (E.ord != RANDOM) return;
    for (unsigned i = n; i > 1; i--) {
        unsigned j = static_cast<unsigned>(next_random() % i);
        unsigned t = indices[i - 1];
        indices[i - 1] = indices[j];
        indices[j] = t;
    }
}

/* ---- fault reports ------------------------------------------------------------------------------------
 * A fault never returns to the fiber that raised it, so reports are built in static buffers, never in
 * objects that would need destroying; a few rotate so that one message can use several. */

char *scratch_text(void)
{
    static char buf[8][320];
    static unsigned next = 0;
    return buf[next++ % 8];
}

const char *where(const fiber *f)
{
    char *b = scratch_text();
    snprintf(b, 320, "block (%u,%u,%u) thread (%u,%u,%u)", E.bidx.x, E.bidx.y, E.bidx.z, f->tid.x, f->tid.y, f->tid.z);
    return b;
}

const char *state_of(const fiber *f)
{
    char *b = scratch_text();
    switch (f->state) {
    case DONE: return "has exited";
    case READY: return "is still running";
    case AT_BARRIER: snprintf(b, 320, "waits at __syncthreads at %s:%d", f->wait.file, f->wait.line); break;
    case AT_WARP:
        snprintf(b, 320, "waits at %s at %s:%d with mask 0x%08x", f->what, f->wait.file, f->wait.line, f->mask);
        break;
    }
    return b;
}

void record_fault(const char *msg)
{
    E.faulted = true;
    E.fault_code = cudaErrorLaunchFailure;
    snprintf(E.fault_msg, sizeof E.fault_msg, "emulator fault in kernel %s: %s", E.kernel, msg);
    if (!E.quiet) fprintf(stderr, "%s\n", E.fault_msg);
}

/* A launch or call the GPU would refuse: the error, with its reason kept for cudaGetErrorString. */
cudaError_t refuse(cudaError_t e, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
cudaError_t refuse(cudaError_t e, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(E.fault_msg, sizeof E.fault_msg, fmt, ap);
    va_end(ap);
    E.fault_code = e;
    if (!E.quiet) fprintf(stderr, "%s\n", E.fault_msg);
    return E.last_error = e;
}

/* ---- fibers ---------------------------------------------------------------------------------------- */

void start_switch(void **fake, const void *bottom, size_t size)
{
#if EMU_ASAN
    __sanitizer_start_switch_fiber(fake, bottom, size);
#else
    (void)fake, (void)bottom, (void)size;
#endif
}

void finish_switch(void *fake, const void **bottom, size_t *size)
{
#if EMU_ASAN
    __sanitizer_finish_switch_fiber(fake, bottom, size);
#else
    (void)fake, (void)bottom, (void)size;
#endif
}

/* The next ready fiber of this round, or nullptr when the round is over (or a fault ended it). */
fiber *next_in_round(void)
{
    while (!E.faulted && ++E.round_pos < E.round.size()) {
        fiber *f = &E.fibers[E.round[E.round_pos]];
        if (f->state == READY) {
            E.ran++;
            return f;
        }
    }
    return nullptr;
}

/* Hand the CPU from the running fiber to the next ready one of the round, or back to the scheduler;
 * `fake` is where the address sanitizer keeps this fiber's stack record (nullptr: it never returns). */
void hand_off(void **fake)
{
    fiber *f = E.cur, *next = next_in_round();
    start_switch(fake, next ? next->stack : E.sched_bottom, next ? STACK_BYTES : E.sched_size);
    E.cur = next;
    swapcontext(&f->ctx, next ? &next->ctx : &E.sched_ctx);
    finish_switch(f->fake_stack, nullptr, nullptr);
}

/* The fiber waits; it continues here when resumed. */
void yield(void) { hand_off(&E.cur->fake_stack); }

/* The fiber ended or faulted, for good. */
[[noreturn]] void leave(void)
{
    hand_off(nullptr);
    abort(); /* an ended fiber is never resumed */
}

void check_exit(fiber *f);

void fiber_entry(void)
{
    finish_switch(nullptr, nullptr, nullptr);
    E.body();
    fiber *f = E.cur;
    f->state = DONE;
    E.done++;
    check_exit(f);
    leave();
}

/* One round: every fiber ready now or made ready before the round reaches it runs once, in order. */
void run_round(void)
{
    make_order(E.round, E.nthreads);
    E.round_pos = static_cast<size_t>(-1);
    E.ran = 0;
    fiber *first = next_in_round();
    if (!first) return;
    E.cur = first;
    start_switch(&E.sched_fake, first->stack, STACK_BYTES);
    swapcontext(&E.sched_ctx, &first->ctx);
    finish_switch(E.sched_fake, nullptr, nullptr);
    E.cur = nullptr;
}

/* The scheduler's own stack, for the address sanitizer's switch announcements. */
void find_scheduler_stack(void)
{
#if EMU_ASAN
    pthread_attr_t attr;
    void *addr = nullptr;
    size_t size = 0;
    if (!E.sched_bottom && pthread_getattr_np(pthread_self(), &attr) == 0) {
        pthread_attr_getstack(&attr, &addr, &size);
        pthread_attr_destroy(&attr);
        E.sched_bottom = addr;
        E.sched_size = size;
    }
#endif
}

int prepare_fiber(fiber *f)
{
    if (!f->stack) {
        const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
        void *m = mmap(nullptr, STACK_BYTES + page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                       -1, 0);
        if (m == MAP_FAILED) return -1;
        mprotect(m, page, PROT_NONE);
        f->stack = static_cast<unsigned char *>(m) + page;
    }
#if EMU_ASAN
    /* A fiber that returned has unpoisoned its own frames; one abandoned by a fault has not. (Whole
     * stacks are not unpoisoned every time: the sanitizer releases and refaults the shadow pages.) */
    if (f->abandoned) ASAN_UNPOISON_MEMORY_REGION(f->stack, STACK_BYTES);
#endif
    f->abandoned = false;
    static ucontext_t blank;
    static bool have_blank = false;
    if (!have_blank) {
        getcontext(&blank); /* the signal mask every fiber starts with, taken once */
        have_blank = true;
    }
    f->ctx = blank; /* its floating-point state pointer is blank's, read once on entry and never changed */
    f->ctx.uc_stack.ss_sp = f->stack;
    f->ctx.uc_stack.ss_size = STACK_BYTES;
    f->ctx.uc_link = nullptr;
    makecontext(&f->ctx, fiber_entry, 0);
    /* The stack now lives in the saved registers. Left in uc_stack, it would make the sanitizer's
     * swapcontext interceptor wipe the shadow of this live stack on every switch to it. */
    f->ctx.uc_stack.ss_sp = nullptr;
    f->ctx.uc_stack.ss_size = 0;
    f->state = READY;
    f->fake_stack = nullptr;
    f->copies.clear();
    f->group_ends.clear();
    return 0;
}

/* ---- shared memory --------------------------------------------------------------------------------- */

int prepare_shared(void)
{
    if (!E.arena) {
        E.arena = static_cast<unsigned char *>(aligned_alloc(128, SHARED_BYTES));
        E.record = static_cast<byte_record *>(calloc(SHARED_BYTES, sizeof(byte_record)));
        if (!E.arena || !E.record) return -1;
    }
    E.serial++;
    E.n_statics = 0;
    E.dyn = smem_array{"dynamic shared memory", E.arena, E.dyn_bytes};
    E.used = (E.dyn_bytes + 15) / 16 * 16;
    memset(E.arena, 0xFF, E.dyn_bytes); /* poison: NaN as float, −1 as an integer */
    return 0;
}

unsigned warp_of(unsigned linear) { return linear / 32; }

/* The same line of the same file (one literal per file, so the pointers usually settle it). */
bool same_site(site a, site b) { return a.line == b.line && (a.file == b.file || strcmp(a.file, b.file) == 0); }

const char *element_name(const smem_array *a, size_t pos)
{
    char *b = scratch_text();
    snprintf(b, 320, "%s (byte %zu of %zu)", a->name, pos, a->bytes);
    return b;
}

const char *thread_name(unsigned linear)
{
    if (linear == MANY_READERS) return "other threads";
    char *b = scratch_text();
    const fiber &f = E.fibers[linear];
    snprintf(b, 320, "thread (%u,%u,%u)", f.tid.x, f.tid.y, f.tid.z);
    return b;
}

} /* namespace */

namespace {

/* What one access needs of the running thread, loaded once (the records could alias E's fields). */
struct accessor {
    uint32_t serial, bar;
    uint16_t me, warp, wepoch;
    /* an earlier access by `other` at (epoch, wepoch) comes before this one */
    bool after(uint16_t other, uint32_t epoch, uint16_t other_wepoch) const
    {
        return other == me || epoch < bar || (other / 32 == warp && other_wepoch < wepoch);
    }
    /* every read the record holds comes before this access */
    bool after_reads(const byte_record &r) const
    {
        return r.r_epoch < bar || r.reader == me || (r.reader_warp == warp && r.r_wepoch < wepoch);
    }
};

accessor accessor_of(const fiber *f)
{
    const uint16_t warp = static_cast<uint16_t>(warp_of(f->linear));
    return accessor{E.serial, E.bar_epoch, static_cast<uint16_t>(f->linear), warp, E.warps[warp].sync_epoch};
}

} /* namespace */

void smem_read(const smem_array *a, const void *p, size_t bytes)
{
    const accessor x = accessor_of(E.cur);
    const size_t pos = static_cast<size_t>(static_cast<const unsigned char *>(p) - E.arena);
    for (byte_record *r = E.record + pos, *end = r + bytes; r < end; r++) {
        if (r->w_serial != x.serial)
            fault("%s reads %s, which no thread of the block has written", where(E.cur),
                  element_name(a, static_cast<size_t>(r - E.record) - static_cast<size_t>(a->base - E.arena)));
        if (r->in_flight)
            fault("%s reads %s, which a cp.async of %s has not landed in: no cp.async.wait_group retired it",
                  where(E.cur),
                  element_name(a, static_cast<size_t>(r - E.record) - static_cast<size_t>(a->base - E.arena)),
                  thread_name(r->writer));
        if (!x.after(r->writer, r->w_epoch, r->w_wepoch))
            fault("race: %s reads %s, written by %s with no barrier between", where(E.cur),
                  element_name(a, static_cast<size_t>(r - E.record) - static_cast<size_t>(a->base - E.arena)),
                  thread_name(r->writer));
        if (r->r_serial != x.serial || x.after_reads(*r)) {
            r->reader = x.me;
            r->reader_warp = x.warp;
        } else if (r->reader != x.me) {
            r->reader = MANY_READERS;
            r->reader_warp = r->reader_warp == x.warp ? x.warp : NO_WARP;
        }
        r->r_serial = x.serial;
        r->r_epoch = x.bar;
        r->r_wepoch = x.wepoch;
    }
}

namespace {

/* The running thread writes bytes of a at p now (in_flight: a cp.async it issues, landing later). */
void record_write(const smem_array *a, const void *p, size_t bytes, bool in_flight)
{
    const accessor x = accessor_of(E.cur);
    const size_t pos = static_cast<size_t>(static_cast<const unsigned char *>(p) - E.arena);
    for (byte_record *r = E.record + pos, *end = r + bytes; r < end; r++) {
        if (r->w_serial == x.serial && r->in_flight)
            fault("%s writes %s, which a cp.async of %s has not landed in yet", where(E.cur),
                  element_name(a, static_cast<size_t>(r - E.record) - static_cast<size_t>(a->base - E.arena)),
                  thread_name(r->writer));
        if (r->w_serial == x.serial && !x.after(r->writer, r->w_epoch, r->w_wepoch))
            fault("race: %s writes %s, also written by %s with no barrier between", where(E.cur),
                  element_name(a, static_cast<size_t>(r - E.record) - static_cast<size_t>(a->base - E.arena)),
                  thread_name(r->writer));
        if (r->r_serial == x.serial && !x.after_reads(*r))
            fault("race: %s writes %s, read by %s with no barrier between", where(E.cur),
                  element_name(a, static_cast<size_t>(r - E.record) - static_cast<size_t>(a->base - E.arena)),
                  thread_name(r->reader));
        *r = byte_record{x.serial, 0, x.bar, 0, x.wepoch, 0, x.me, 0, 0, in_flight};
    }
}

} /* namespace */

void smem_write(const smem_array *a, const void *p, size_t bytes) { record_write(a, p, bytes, false); }

void smem_out_of_bounds(const smem_array *a, ptrdiff_t pos, size_t elem_bytes)
{
    fault("%s accesses %zu bytes at byte %td of %s, which holds %zu bytes%s", where(E.cur), elem_bytes, pos,
          a->name, a->bytes, pos >= 0 && static_cast<size_t>(pos) % elem_bytes ? " (misaligned)" : "");
}

const smem_array *static_shared(const void *key, const char *name, size_t bytes)
{
    for (unsigned i = 0; i < E.n_statics; i++)
        if (E.static_keys[i] == key) return &E.statics[i];
    if (E.n_statics == MAX_STATIC_ARRAYS) fault("more than %u __shared__ arrays in one kernel", MAX_STATIC_ARRAYS);
    const size_t statics = E.used - (E.dyn_bytes + 15) / 16 * 16;
    if (bytes > DEFAULT_DYNAMIC_SHARED - statics)
        fault("__shared__ %s of %zu bytes: with the %zu bytes of the block's other __shared__ arrays, above the 48 KB "
              "of static shared memory ptxas allows", name, bytes, statics);
    if (bytes > shared_limit() - E.used)
        fault("__shared__ %s of %zu bytes: the block already uses %zu of the %zu bytes sm_%d allows", name, bytes,
              E.used, shared_limit(), arch());
    smem_array *a = &E.statics[E.n_statics];
    *a = smem_array{name, E.arena + E.used, bytes};
    memset(a->base, 0xFF, bytes);
    E.static_keys[E.n_statics++] = key;
    E.used += (bytes + 15) / 16 * 16;
    return a;
}

const smem_array *dynamic_shared(const char *name)
{
    (void)name;
    return &E.dyn;
}

/* ---- the running thread ------------------------------------------------------------------------------ */

const uint3 &thread_idx(void) { return E.cur->tid; }
const uint3 &block_idx(void) { return E.bidx; }
const dim3 &block_dim(void) { return E.block; }
const dim3 &grid_dim(void) { return E.grid; }

void misaligned_global(site s, const void *p, size_t bytes, size_t align)
{
    fault("%s at %s:%d accesses %zu bytes of global memory at %p, not a multiple of %zu (misaligned)", where(E.cur),
          s.file, s.line, bytes, p, align);
}

void fault(const char *fmt, ...)
{
    char buf[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    record_fault(buf);
    leave();
}

namespace {

/* A thread ended: nobody may still wait for it at a barrier or in a collective. */
void check_exit(fiber *f)
{
    for (unsigned i = 0; i < E.nthreads; i++) {
        const fiber &o = E.fibers[i];
        if (o.state == AT_BARRIER)
            fault("%s exits while %s %s: the barrier can never complete", where(f), where(&o),
                  state_of(&o));
        if (o.state == AT_WARP && warp_of(i) == warp_of(f->linear) && (o.mask >> (f->linear % 32) & 1u))
            fault("%s %s, whose mask names lane %u of %s, which has exited", where(&o), state_of(&o),
                  f->linear % 32, where(f));
    }
}

/* Nothing can run and not every thread has ended: say what the waiting threads wait for. */
void deadlock(void)
{
    char msg[1536] = "deadlock:";
    size_t len = strlen(msg);
    for (unsigned i = 0; i < E.nthreads && len == 9; i++) {
        const fiber &f = E.fibers[i];
        if (f.state != AT_WARP) continue;
        for (unsigned l = 0; l < 32; l++) {
            const fiber &o = E.fibers[warp_of(i) * 32 + l];
            if (!(f.mask >> l & 1u) || (o.state == AT_WARP && o.mask == f.mask && o.what == f.what)) continue;
            snprintf(msg + len, sizeof msg - len, " %s %s, but lane %u (%s) %s;", where(&f), state_of(&f), l, where(&o),
                     state_of(&o));
            break;
        }
        len = strlen(msg);
    }
    for (unsigned i = 0; i < E.nthreads && len == 9; i++)
        if (E.fibers[i].state != DONE) {
            snprintf(msg + len, sizeof msg - len, " %s %s;", where(&E.fibers[i]), state_of(&E.fibers[i]));
            len = strlen(msg);
        }
    record_fault(msg);
}

void run_block(void)
{
    E.done = 0;
    E.at_barrier = 0;
    E.bar_epoch = 1;
    for (warp &w : E.warps) w.sync_epoch = 0;
    for (unsigned i = 0; i < E.nthreads; i++) {
        fiber &f = E.fibers[i];
        f.linear = i;
        f.tid = uint3{i % E.block.x, i / E.block.x % E.block.y, i / (E.block.x * E.block.y)};
        if (prepare_fiber(&f) != 0) {
            record_fault("cannot map a fiber stack");
            return;
        }
    }
    find_scheduler_stack();
    while (E.done < E.nthreads) {
        run_round();
        if (E.faulted) {
            for (unsigned i = 0; i < E.nthreads; i++) E.fibers[i].abandoned = E.fibers[i].state != DONE;
            return;
        }
        if (E.ran == 0 && E.done < E.nthreads) {
            deadlock();
            for (unsigned i = 0; i < E.nthreads; i++) E.fibers[i].abandoned = E.fibers[i].state != DONE;
            return;
        }
    }
}

} /* namespace */

void syncthreads(site s)
{
    fiber *f = E.cur;
    f->state = AT_BARRIER;
    f->wait = s;
    E.at_barrier++;
    if (E.done > 0)
        for (unsigned i = 0; i < E.nthreads; i++)
            if (E.fibers[i].state == DONE)
                fault("%s waits at __syncthreads at %s:%d, which %s can never reach: it has exited", where(f),
                      s.file, s.line, where(&E.fibers[i]));
    if (E.at_barrier < E.nthreads) {
        yield();
        return;
    }
    for (unsigned i = 0; i < E.nthreads; i++) {
        const fiber &o = E.fibers[i];
        if (!same_site(o.wait, s))
            fault("%s and %s wait at different __syncthreads (%s:%d and %s:%d)", where(f), where(&o),
                  s.file, s.line, o.wait.file, o.wait.line);
    }
    for (unsigned i = 0; i < E.nthreads; i++) E.fibers[i].state = READY;
    E.at_barrier = 0;
    E.bar_epoch++;
}

/* ---- warp collectives ----------------------------------------------------------------------------------- */

void collective(site s, const char *what, unsigned mask, const void *in, size_t in_bytes, void *out, size_t out_bytes,
                combine_fn combine)
{
    fiber *f = E.cur;
    const unsigned lane = f->linear % 32, w = warp_of(f->linear);
    const unsigned first = w * 32, present = E.nthreads - first >= 32 ? 0xFFFFFFFFu : (1u << (E.nthreads - first)) - 1u;
    if (!(mask >> lane & 1u))
        fault("%s calls %s at %s:%d with mask 0x%08x, which does not name its own lane %u", where(f), what,
              s.file, s.line, mask, lane);
    if (mask & ~present)
        fault("%s calls %s at %s:%d with mask 0x%08x, naming lanes absent from a block of %u threads (present 0x%08x)",
              where(f), what, s.file, s.line, mask, E.nthreads, present);
    bool complete = true;
    for (unsigned l = 0; l < 32; l++) {
        const fiber &o = E.fibers[first + l];
        const bool named = mask >> l & 1u;
        if (l == lane || (!named && !(o.state == AT_WARP && (o.mask >> lane & 1u)))) continue;
        if (o.state == DONE)
            fault("%s calls %s at %s:%d with mask 0x%08x, naming lane %u, which has exited", where(f), what,
                  s.file, s.line, mask, l);
        if (o.state == AT_WARP && (o.mask != mask || o.what != what || !same_site(o.wait, s)))
            fault("%s calls %s at %s:%d with mask 0x%08x, while lane %u %s", where(f), what, s.file, s.line,
                  mask, l, state_of(&o));
        if (o.state != AT_WARP) complete = false;
    }
    warp &wp = E.warps[w];
    memcpy(wp.data[lane].in, in, in_bytes);
    f->state = AT_WARP;
    f->wait = s;
    f->what = what;
    f->mask = mask;
    if (complete) {
        char msg[512] = "";
        if (combine(wp.data, mask, msg, sizeof msg) != 0)
            fault("%s at %s:%d in %s: %s", what, s.file, s.line, where(f), msg);
        for (unsigned l = 0; l < 32; l++)
            if (mask >> l & 1u) E.fibers[first + l].state = READY;
    } else {
        yield();
    }
    memcpy(out, wp.data[lane].out, out_bytes);
}

namespace {

struct shfl_in {
    uint64_t bits;
    int kind, arg, width;
};

int combine_shfl(lane_data *d, unsigned lanes, char *msg, size_t cap)
{
    for (unsigned l = 0; l < 32; l++) {
        if (!(lanes >> l & 1u)) continue;
        shfl_in a;
        memcpy(&a, d[l].in, sizeof a);
        const int wdt = a.width;
        if (wdt < 1 || wdt > 32 || (wdt & (wdt - 1)) != 0) {
            snprintf(msg, cap, "lane %u passes width %d, not a power of two up to 32", l, wdt);
            return -1;
        }
        const int self = static_cast<int>(l), base = self & ~(wdt - 1);
        int src = self;
        switch (a.kind) {
        case SHFL_IDX: src = base + (a.arg & (wdt - 1)); break;
        case SHFL_UP: src = self - a.arg >= base ? self - a.arg : self; break;
        case SHFL_DOWN: src = self + a.arg < base + wdt ? self + a.arg : self; break;
        case SHFL_XOR: src = (self ^ a.arg) < base + wdt ? (self ^ a.arg) & 31 : self; break;
        default: break;
        }
        if (!(lanes >> src & 1u)) {
            snprintf(msg, cap, "lane %u reads lane %d, which is not in the mask 0x%08x", l, src, lanes);
            return -1;
        }
        shfl_in from;
        memcpy(&from, d[src].in, sizeof from);
        memcpy(d[l].out, &from.bits, sizeof from.bits);
    }
    return 0;
}

int combine_ballot(lane_data *d, unsigned lanes, char *msg, size_t cap)
{
    (void)msg, (void)cap;
    unsigned bits = 0;
    for (unsigned l = 0; l < 32; l++) {
        int p;
        memcpy(&p, d[l].in, sizeof p);
        if ((lanes >> l & 1u) && p) bits |= 1u << l;
    }
    for (unsigned l = 0; l < 32; l++)
        if (lanes >> l & 1u) memcpy(d[l].out, &bits, sizeof bits);
    return 0;
}

int combine_syncwarp(lane_data *d, unsigned lanes, char *msg, size_t cap)
{
    (void)d, (void)lanes, (void)msg, (void)cap;
    E.warps[warp_of(E.cur->linear)].sync_epoch++;
    return 0;
}

struct mma_in {
    uint32_t a[4], b[2];
    float c[4];
};

float bf16_lo(uint32_t r) { return __uint_as_float(r << 16); }
float bf16_hi(uint32_t r) { return __uint_as_float(r & 0xFFFF0000u); }

int combine_mma(lane_data *d, unsigned lanes, char *msg, size_t cap)
{
    if (lanes != 0xFFFFFFFFu) {
        snprintf(msg, cap, "mma.sync needs all 32 lanes, the mask is 0x%08x", lanes);
        return -1;
    }
    double A[16][16], B[16][8], C[16][8];
    for (unsigned l = 0; l < 32; l++) {
        mma_in m;
        memcpy(&m, d[l].in, sizeof m);
        const unsigned g = l >> 2, t = l & 3;
        A[g][2 * t] = bf16_lo(m.a[0]);
        A[g][2 * t + 1] = bf16_hi(m.a[0]);
        A[g + 8][2 * t] = bf16_lo(m.a[1]);
        A[g + 8][2 * t + 1] = bf16_hi(m.a[1]);
        A[g][2 * t + 8] = bf16_lo(m.a[2]);
        A[g][2 * t + 9] = bf16_hi(m.a[2]);
        A[g + 8][2 * t + 8] = bf16_lo(m.a[3]);
        A[g + 8][2 * t + 9] = bf16_hi(m.a[3]);
        B[2 * t][g] = bf16_lo(m.b[0]);
        B[2 * t + 1][g] = bf16_hi(m.b[0]);
        B[2 * t + 8][g] = bf16_lo(m.b[1]);
        B[2 * t + 9][g] = bf16_hi(m.b[1]);
        C[g][2 * t] = m.c[0];
        C[g][2 * t + 1] = m.c[1];
        C[g + 8][2 * t] = m.c[2];
        C[g + 8][2 * t + 1] = m.c[3];
    }
    for (unsigned l = 0; l < 32; l++) {
        const unsigned g = l >> 2, t = l & 3;
        const unsigned rows[4] = {g, g, g + 8, g + 8}, cols[4] = {2 * t, 2 * t + 1, 2 * t, 2 * t + 1};
        float out[4];
        for (int i = 0; i < 4; i++) {
            double acc = C[rows[i]][cols[i]];
            for (int k = 0; k < 16; k++) acc += A[rows[i]][k] * B[k][cols[i]];
            out[i] = static_cast<float>(acc);
        }
        memcpy(d[l].out, out, sizeof out);
    }
    return 0;
}

} /* namespace */

uint64_t shfl(site s, shfl_kind kind, unsigned mask, uint64_t bits, int arg, int width)
{
    static const char *const names[] = {"__shfl_sync", "__shfl_up_sync", "__shfl_down_sync", "__shfl_xor_sync"};
    shfl_in in{bits, kind, arg, width};
    uint64_t out = 0;
    collective(s, names[kind], mask, &in, sizeof in, &out, sizeof out, combine_shfl);
    return out;
}

unsigned ballot(site s, unsigned mask, int predicate)
{
    unsigned out = 0;
    collective(s, "__ballot_sync", mask, &predicate, sizeof predicate, &out, sizeof out, combine_ballot);
    return out;
}

void syncwarp(site s, unsigned mask)
{
    int none = 0;
    collective(s, "__syncwarp", mask, &none, sizeof none, &none, sizeof none, combine_syncwarp);
}

void mma_bf16_m16n8k16(site s, float d[4], const uint32_t a[4], const uint32_t b[2], const float c[4])
{
    mma_in in;
    memcpy(in.a, a, sizeof in.a);
    memcpy(in.b, b, sizeof in.b);
    memcpy(in.c, c, sizeof in.c);
    collective(s, "mma.sync.m16n8k16", 0xFFFFFFFFu, &in, sizeof in, d, 4 * sizeof(float), combine_mma);
}

/* ---- asynchronous copies ------------------------------------------------------------------------------
 * A copy is taken from global memory when issued (kernels do not write what they are copying) and lands
 * in shared memory, as a write of its thread at that moment, when a wait retires its group. */

namespace {

void land(const async_copy &c)
{
    const accessor x = accessor_of(E.cur);
    memcpy(E.arena + c.pos, c.data, c.bytes);
    for (byte_record *r = E.record + c.pos, *end = r + c.bytes; r < end; r++)
        *r = byte_record{x.serial, 0, x.bar, 0, x.wepoch, 0, x.me, 0, 0, 0};
}

/* Land the thread's oldest copies until only the n most recent committed groups (and the uncommitted
 * copies) are in flight. */
void retire_groups(fiber *f, unsigned n)
{
    if (f->group_ends.size() <= n) return;
    const size_t keep_from = f->group_ends.size() - n, landed = f->group_ends[keep_from - 1];
    for (size_t i = 0; i < landed; i++) land(f->copies[i]);
    f->copies.erase(f->copies.begin(), f->copies.begin() + static_cast<ptrdiff_t>(landed));
    f->group_ends.erase(f->group_ends.begin(), f->group_ends.begin() + static_cast<ptrdiff_t>(keep_from));
    for (size_t &e : f->group_ends) e -= landed;
}

} /* namespace */

void cp_async(site s, cp_async_cache cache, const smem_array *a, ptrdiff_t offset, const void *src, unsigned bytes,
              unsigned src_bytes)
{
    const char *name = cache == CP_ASYNC_CG ? "cp.async.cg" : "cp.async.ca";
    if (cache == CP_ASYNC_CG ? bytes != 16 : bytes != 4 && bytes != 8 && bytes != 16)
        fault("%s at %s:%d copies %u bytes: %s copies %s", where(E.cur), s.file, s.line, bytes, name,
              cache == CP_ASYNC_CG ? "16" : "4, 8 or 16");
    if (src_bytes > bytes)
        fault("%s at %s:%d: %s of %u bytes reads %u source bytes, more than it copies", where(E.cur), s.file, s.line,
              name, bytes, src_bytes);
    const ptrdiff_t pos = (a->base - E.arena) + offset;
    if (offset < 0 || offset + static_cast<ptrdiff_t>(bytes) > static_cast<ptrdiff_t>(a->bytes) || pos % bytes != 0)
        fault("%s at %s:%d: %s of %u bytes to byte %td of %s, which holds %zu bytes%s", where(E.cur), s.file, s.line,
              name, bytes, offset, a->name, a->bytes, pos % bytes ? " (misaligned)" : "");
    if (reinterpret_cast<uintptr_t>(src) % bytes != 0) misaligned_global(s, src, bytes, bytes);
    async_copy c{static_cast<size_t>(pos), bytes, {0}};
    if (src_bytes > 0) memcpy(c.data, src, src_bytes);
    record_write(a, a->base + offset, bytes, true);
    E.cur->copies.push_back(c);
}

void cp_async_commit(site s)
{
    (void)s;
    E.cur->group_ends.push_back(E.cur->copies.size()); /* an empty group is a group too */
}

void cp_async_wait(site s, unsigned n)
{
    (void)s;
    retire_groups(E.cur, n);
}

void cp_async_wait_all(site s)
{
    cp_async_commit(s);
    cp_async_wait(s, 0);
}

/* ---- ldmatrix ------------------------------------------------------------------------------------------ */

namespace {

struct ldmatrix_in {
    uint64_t pos; /* the row's place in the arena */
    uint32_t count, trans;
};

int combine_ldmatrix(lane_data *d, unsigned lanes, char *msg, size_t cap)
{
    if (lanes != 0xFFFFFFFFu) {
        snprintf(msg, cap, "ldmatrix needs all 32 lanes, the mask is 0x%08x", lanes);
        return -1;
    }
    ldmatrix_in in[32];
    for (unsigned l = 0; l < 32; l++) memcpy(&in[l], d[l].in, sizeof in[l]);
    for (unsigned l = 0; l < 32; l++) {
        uint32_t r[4] = {0, 0, 0, 0};
        for (unsigned i = 0; i < in[l].count; i++) {
            if (!in[l].trans) {
                memcpy(&r[i], E.arena + in[8 * i + l / 4].pos + 4 * (l % 4), 4);
                continue;
            }
            uint16_t lo, hi;
            memcpy(&lo, E.arena + in[8 * i + 2 * (l % 4)].pos + 2 * (l / 4), 2);
            memcpy(&hi, E.arena + in[8 * i + 2 * (l % 4) + 1].pos + 2 * (l / 4), 2);
            r[i] = lo | static_cast<uint32_t>(hi) << 16;
        }
        memcpy(d[l].out, r, sizeof r);
    }
    return 0;
}

} /* namespace */

void ldmatrix(site s, unsigned count, bool trans, uint32_t *r, const smem_array *a, ptrdiff_t offset)
{
    static const char *const names[2][5] = {
        {"", "ldmatrix.x1", "ldmatrix.x2", "", "ldmatrix.x4"},
        {"", "ldmatrix.x1.trans", "ldmatrix.x2.trans", "", "ldmatrix.x4.trans"}};
    if (count != 1 && count != 2 && count != 4)
        fault("%s at %s:%d: ldmatrix of %u matrices", where(E.cur), s.file, s.line, count);
    const unsigned lane = E.cur->linear % 32;
    ldmatrix_in in{0, count, trans ? 1u : 0u};
    if (lane < 8 * count) { /* this lane's address is row lane % 8 of matrix lane / 8 */
        const ptrdiff_t pos = (a->base - E.arena) + offset;
        if (offset < 0 || offset + 16 > static_cast<ptrdiff_t>(a->bytes) || pos % 16 != 0)
            fault("%s at %s:%d: %s row %u of matrix %u at byte %td of %s (%zu bytes): %s", where(E.cur), s.file,
                  s.line, names[trans][count], lane % 8, lane / 8, offset, a->name, a->bytes,
                  pos % 16 ? "not 16-byte aligned" : "outside the array");
        smem_read(a, a->base + offset, 16);
        in.pos = static_cast<uint64_t>(pos);
    }
    uint32_t out[4];
    collective(s, names[trans][count], 0xFFFFFFFFu, &in, sizeof in, out, sizeof out, combine_ldmatrix);
    memcpy(r, out, count * sizeof(uint32_t));
}

/* ---- launch ----------------------------------------------------------------------------------------- */

void set_order(order o, uint64_t seed)
{
    E.configured = true;
    E.ord = o;
    E.seed = E.rng = seed;
}

order current_order(void)
{
    configure_from_environment();
    return E.ord;
}

void set_quiet(int quiet) { E.quiet = quiet != 0; }

int set_arch(int sm)
{
    if (sm != 80 && sm != 90) return -1;
    E.sm = sm;
    return 0;
}

int arch(void)
{
    configure_arch();
    return E.sm;
}

size_t shared_limit(void) { return arch() == 90 ? SHARED_BYTES : 163 * 1024; }

cudaError_t set_max_dynamic_shared(void (*key)(void), int bytes)
{
    if (bytes < 0 || static_cast<size_t>(bytes) > shared_limit())
        return refuse(cudaErrorInvalidValue,
                      "cudaFuncSetAttribute(MaxDynamicSharedMemorySize, %d): sm_%d allows at most %zu bytes per block",
                      bytes, arch(), shared_limit());
    E.max_dynamic[key] = static_cast<size_t>(bytes);
    return cudaSuccess;
}

const char *last_fault(void) { return E.fault_msg; }

namespace {

/* The launch's text up to its first top-level comma: the kernel with its template arguments. */
const char *kernel_name(const char *kernel)
{
    static char name[256];
    size_t len = 0;
    for (int depth = 0; kernel[len] && len + 1 < sizeof name && !(kernel[len] == ',' && depth == 0); len++)
        depth += kernel[len] == '<' ? 1 : kernel[len] == '>' ? -1 : 0;
    memcpy(name, kernel, len);
    name[len] = '\0';
    return name;
}

/* cudaSuccess, or the error the GPU gives a launch of this shape (with the reason recorded) */
cudaError_t check_launch(void (*key)(void), dim3 grid, dim3 block, size_t dynamic_smem)
{
    const size_t threads = static_cast<size_t>(block.x) * block.y * block.z;
    const size_t blocks = static_cast<size_t>(grid.x) * grid.y * grid.z;
    if (threads == 0 || threads > MAX_THREADS || blocks == 0 || grid.y > 65535 || grid.z > 65535)
        return refuse(cudaErrorInvalidConfiguration, "launch of kernel %s: grid (%u,%u,%u) of blocks (%u,%u,%u)",
                      E.kernel, grid.x, grid.y, grid.z, block.x, block.y, block.z);
    if (dynamic_smem > shared_limit())
        return refuse(cudaErrorInvalidValue,
                      "launch of kernel %s: %zu bytes of dynamic shared memory, above the %zu bytes sm_%d allows a "
                      "block", E.kernel, dynamic_smem, shared_limit(), arch());
    auto raised = E.max_dynamic.find(key);
    const size_t allowed = raised == E.max_dynamic.end() ? DEFAULT_DYNAMIC_SHARED : raised->second;
    if (dynamic_smem > allowed)
        return refuse(cudaErrorInvalidValue,
                      "launch of kernel %s: %zu bytes of dynamic shared memory, above the %zu its "
                      "cudaFuncAttributeMaxDynamicSharedMemorySize allows%s", E.kernel, dynamic_smem, allowed,
                      raised == E.max_dynamic.end() ? " (never raised: 48 KB)" : "");
    return cudaSuccess;
}

} /* namespace */

cudaError_t launch(const char *kernel, void (*key)(void), dim3 grid, dim3 block, size_t dynamic_smem,
                   std::function<void()> body)
{
    configure_from_environment();
    E.kernel = kernel_name(kernel);
    E.fault_msg[0] = '\0';
    if (check_launch(key, grid, block, dynamic_smem) != cudaSuccess) return E.last_error;
    const size_t threads = static_cast<size_t>(block.x) * block.y * block.z;
    const size_t blocks = static_cast<size_t>(grid.x) * grid.y * grid.z;
    E.grid = grid;
    E.block = block;
    E.dyn_bytes = dynamic_smem;
    E.body = std::move(body);
    E.nthreads = static_cast<unsigned>(threads);
    E.faulted = false;
    std::vector<unsigned> order_list;
    make_order(order_list, static_cast<unsigned>(blocks));
    for (unsigned b : order_list) {
        E.bidx = uint3{b % grid.x, b / grid.x % grid.y, b / (grid.x * grid.y)};
        if (prepare_shared() != 0) {
            record_fault("cannot allocate shared memory");
            break;
        }
        run_block();
        if (E.faulted) break;
    }
    E.body = nullptr;
    return E.last_error = E.faulted ? cudaErrorLaunchFailure : cudaSuccess;
}

} /* namespace emu */

/* ---- the runtime API subset ------------------------------------------------------------------------------ */

using emu::E;

namespace {

/* [p, p + bytes) lies inside one allocation of cudaMalloc */
bool on_device(const void *p, size_t bytes)
{
    const uintptr_t a = reinterpret_cast<uintptr_t>(p);
    auto it = E.allocations.upper_bound(a);
    if (it == E.allocations.begin()) return false;
    --it;
    return a - it->first <= it->second && bytes <= it->second - (a - it->first);
}

cudaError_t set_error(cudaError_t e)
{
    if (e != cudaSuccess) E.last_error = e;
    E.fault_msg[0] = '\0';
    return e;
}

} /* namespace */

cudaError_t cudaMalloc(void **p, size_t bytes)
{
    *p = aligned_alloc(256, (bytes + 255) / 256 * 256 + (bytes == 0 ? 256 : 0));
    if (!*p) return set_error(cudaErrorMemoryAllocation);
    E.allocations[reinterpret_cast<uintptr_t>(*p)] = bytes;
    return cudaSuccess;
}

cudaError_t cudaFree(void *p)
{
    if (!p) return cudaSuccess;
    auto it = E.allocations.find(reinterpret_cast<uintptr_t>(p));
    if (it == E.allocations.end()) return set_error(cudaErrorInvalidDevicePointer);
    E.allocations.erase(it);
    free(p);
    return cudaSuccess;
}

cudaError_t cudaMemcpy(void *dst, const void *src, size_t bytes, cudaMemcpyKind kind)
{
    const bool dst_dev = kind == cudaMemcpyHostToDevice || kind == cudaMemcpyDeviceToDevice;
    const bool src_dev = kind == cudaMemcpyDeviceToHost || kind == cudaMemcpyDeviceToDevice;
    if (bytes == 0) return cudaSuccess;
    if ((dst_dev && !on_device(dst, bytes)) || (src_dev && !on_device(src, bytes)))
        return set_error(cudaErrorInvalidValue);
    memmove(dst, src, bytes);
    return cudaSuccess;
}

cudaError_t cudaMemset(void *p, int value, size_t bytes)
{
    if (bytes == 0) return cudaSuccess;
    if (!on_device(p, bytes)) return set_error(cudaErrorInvalidValue);
    memset(p, value, bytes);
    return cudaSuccess;
}

cudaError_t cudaDeviceSynchronize(void) { return cudaGetLastError(); }

cudaError_t cudaGetLastError(void)
{
    cudaError_t e = E.last_error;
    E.last_error = cudaSuccess;
    return e;
}

cudaError_t cudaPeekAtLastError(void) { return E.last_error; }

const char *cudaGetErrorString(cudaError_t e)
{
    if (e == E.fault_code && E.fault_msg[0]) return E.fault_msg;
    switch (e) {
    case cudaSuccess: return "no error";
    case cudaErrorInvalidValue: return "invalid argument";
    case cudaErrorMemoryAllocation: return "out of memory";
    case cudaErrorInvalidConfiguration: return "invalid configuration argument";
    case cudaErrorInvalidDevicePointer: return "invalid device pointer";
    case cudaErrorInsufficientDriver: return "CUDA driver version is insufficient for CUDA runtime version";
    case cudaErrorNoDevice: return "no CUDA-capable device is detected";
    case cudaErrorLaunchFailure: return "unspecified launch failure";
    }
    return "unknown error";
}

cudaError_t cudaGetDeviceCount(int *n)
{
    const char *d = getenv("KVL_EMU_DEVICE");
    *n = 0;
    if (d && strcmp(d, "none") == 0) return set_error(cudaErrorNoDevice);
    if (d && strcmp(d, "broken") == 0) return set_error(cudaErrorInsufficientDriver);
    *n = 1;
    return cudaSuccess;
}

cudaError_t cudaGetDeviceProperties(cudaDeviceProp *prop, int device)
{
    if (device != 0) return set_error(cudaErrorInvalidValue);
    memset(prop, 0, sizeof *prop);
    snprintf(prop->name, sizeof prop->name, "CPU emulator (fibers)");
    prop->multiProcessorCount = 132; /* an H200's, so that splits are chosen as on one */
    prop->sharedMemPerBlockOptin = emu::shared_limit();
    prop->l2CacheSize = 1 << 20;
    return cudaSuccess;
}

struct emu_event {
    struct timespec t;
};

cudaError_t cudaEventCreate(cudaEvent_t *e)
{
    *e = new emu_event{};
    return cudaSuccess;
}

cudaError_t cudaEventDestroy(cudaEvent_t e)
{
    delete e;
    return cudaSuccess;
}

cudaError_t cudaEventRecord(cudaEvent_t e, int stream)
{
    (void)stream;
    clock_gettime(CLOCK_MONOTONIC, &e->t);
    return cudaSuccess;
}

cudaError_t cudaEventSynchronize(cudaEvent_t e)
{
    (void)e;
    return cudaSuccess;
}

cudaError_t cudaEventElapsedTime(float *ms, cudaEvent_t start, cudaEvent_t stop)
{
    *ms = static_cast<float>((stop->t.tv_sec - start->t.tv_sec) * 1e3 + (stop->t.tv_nsec - start->t.tv_nsec) * 1e-6);
    return cudaSuccess;
}

/* ---- cuBLAS ------------------------------------------------------------------------------------------ */

struct emu_cublas {
    int unused;
};

cublasStatus_t cublasCreate(cublasHandle_t *h)
{
    *h = new (std::nothrow) emu_cublas{0};
    return *h ? CUBLAS_STATUS_SUCCESS : CUBLAS_STATUS_ALLOC_FAILED;
}

cublasStatus_t cublasDestroy(cublasHandle_t h)
{
    delete h;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasSgemmStridedBatched(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n,
                                         int k, const float *alpha, const float *A, int lda, long long strideA,
                                         const float *B, int ldb, long long strideB, const float *beta, float *C,
                                         int ldc, long long strideC, int batch)
{
    if (!h || m < 0 || n < 0 || k < 0 || batch < 0 || ldc < (m > 1 ? m : 1) ||
        lda < ((ta == CUBLAS_OP_N ? m : k) > 1 ? (ta == CUBLAS_OP_N ? m : k) : 1) ||
        ldb < ((tb == CUBLAS_OP_N ? k : n) > 1 ? (tb == CUBLAS_OP_N ? k : n) : 1))
        return CUBLAS_STATUS_INVALID_VALUE;
    for (int b = 0; b < batch; b++) {
        const float *a = A + b * strideA, *x = B + b * strideB;
        float *c = C + b * strideC;
        for (int j = 0; j < n; j++)
            for (int i = 0; i < m; i++) {
                float acc = 0.0f;
                for (int l = 0; l < k; l++) {
                    const long long il = i + static_cast<long long>(l) * lda, li = l + static_cast<long long>(i) * lda;
                    const long long lj = l + static_cast<long long>(j) * ldb, jl = j + static_cast<long long>(l) * ldb;
                    const float av = ta == CUBLAS_OP_N ? a[il] : a[li], bv = tb == CUBLAS_OP_N ? x[lj] : x[jl];
                    acc += av * bv;
                }
                float *out = c + i + static_cast<long long>(j) * ldc;
                *out = *beta == 0.0f ? *alpha * acc : *alpha * acc + *beta * *out;
            }
    }
    return CUBLAS_STATUS_SUCCESS;
}
