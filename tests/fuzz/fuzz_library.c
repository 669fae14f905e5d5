/* fuzz_library.c - libgpusim_torch.so's entry points (torch/pluggable.c, compiled in) on the
 * simulated device, called as PyTorch and CuPy call them: any order, bad arguments, several
 * threads at once, a fork while another thread is inside the allocator.
 *
 * The input is a program of 3-byte instructions (OP, A, B); OP's low 3 bits choose:
 *   0-2  malloc of (1 + (A << 8 | B)) << ((OP >> 3) & 15) bytes (up to 2 GiB: OOMs happen),
 *        on device OP >> 7, stream B & 3
 *   3    free of live allocation number (A << 8 | B) modulo how many are live
 *   4    with (OP >> 3) & 7: 0, empty_cache; 7, torch.cuda.memory_stats() as gpusim run's
 *        hook asks it (into a buffer of B bytes) on device OP >> 7, and with A & 3 of 1 or 2
 *        a reset of its peaks or of its counts first; 1, 2, 3, PyTorch's private pool hooks on
 *        device OP >> 7, pool A & 3 (a CUDA graph's; with A & 4 a MemPool's, as use_mem_pool
 *        calls them): begin (its filter takes stream B & 3), end, release; 4, 5, 6, a
 *        torch.cuda.MemPool's life as gpusim run's stand-in calls it (MemPool A & 3): made,
 *        deleted, its use count; in any order, as a careless caller may
 *   5    calls PyTorch never makes but a careless caller may: a size of 0 or less, a device of
 *        -1, 64 or 2^20, a free of an address never given, a free on the wrong device
 *   6    two threads, each allocating and freeing A % 32 + 1 blocks of sizes from B, at once
 *   7    fork: the child allocates and frees, then exits; with A odd, while another thread of
 *        the parent allocates and frees (the lock taken across fork)
 *
 * Promises checked for every input:
 *   - a malloc gives NULL or a 512-byte-aligned address whose block overlaps no live block of
 *     its device (from any thread); a bad call gives NULL and changes nothing;
 *   - a forked child can free what it inherited and allocate (the lock is not left held);
 *   - with everything freed, every pool ended and released as often as it was begun, and the
 *     cache emptied, a request of 960 MiB fits the 1 GiB cap: nothing was lost.
 */
#include "fuzz.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include "gpusim_torch.h"

#define MiB (1024 * 1024)
#define MAX_LIVE 4096

typedef struct {
    uintptr_t addr;
    ssize_t size;
    int device;
} live_block;

/* The live blocks of every thread, under one lock: what any malloc must not overlap. */
static struct {
    pthread_mutex_t lock;
    live_block b[MAX_LIVE];
    size_t n;
} live = {.lock = PTHREAD_MUTEX_INITIALIZER};

static void setup_once(void)
{
    static bool done;
    if (done) return;
    done = true;
    /* the library reads its settings at its first call: the simulated device, a cap */
    g_setenv("GPUSIM_BACKEND", "sim", TRUE);
    g_setenv("GPUSIM_CAPACITY", "1GiB", TRUE);
    g_setenv("GPUSIM_POLICY", "pytorch", TRUE);
    g_unsetenv("GPUSIM_TRACE");
    g_unsetenv("GPUSIM_STATS");
}

/* malloc through the library, checked; the block is recorded live. Returns its address, or 0
 * (no memory, or the harness's table full). */
static uintptr_t take(ssize_t size, int device, uintptr_t stream)
{
    void *p = gpusim_malloc(size, device, (void *)stream);
    if (!p) return 0;
    uintptr_t a = (uintptr_t)p;
    GS_FUZZ_CHECK(a % 512 == 0, "malloc(%zd) gave %#lx: not 512-byte aligned", size,
                  (unsigned long)a);
    pthread_mutex_lock(&live.lock);
    for (size_t i = 0; i < live.n; i++) {
        const live_block *o = &live.b[i];
        GS_FUZZ_CHECK(o->device != device || a + (uintptr_t)size <= o->addr ||
                          o->addr + (uintptr_t)o->size <= a,
                      "malloc(%zd) on device %d gave %#lx, inside live block %#lx+%zd", size,
                      device, (unsigned long)a, (unsigned long)o->addr, o->size);
    }
    bool room = live.n < MAX_LIVE;
    if (room) live.b[live.n++] = (live_block){a, size, device};
    pthread_mutex_unlock(&live.lock);
    if (!room) gpusim_free(p, size, device, (void *)stream);
    return room ? a : 0;
}

/* Free live block k (the last one takes its place). */
static void give(size_t k)
{
    pthread_mutex_lock(&live.lock);
    live_block b = live.b[k];
    live.b[k] = live.b[--live.n];
    pthread_mutex_unlock(&live.lock);
    gpusim_free((void *)b.addr, b.size, b.device, NULL);
}

/* Free the live block at addr (a thread's own). */
static void give_addr(uintptr_t addr)
{
    pthread_mutex_lock(&live.lock);
    for (size_t i = 0; i < live.n; i++)
        if (live.b[i].addr == addr) {
            live_block b = live.b[i];
            live.b[i] = live.b[--live.n];
            pthread_mutex_unlock(&live.lock);
            gpusim_free((void *)b.addr, b.size, b.device, NULL);
            return;
        }
    pthread_mutex_unlock(&live.lock);
}

typedef struct {
    unsigned n, seed;
    uintptr_t stream;
} churn_args;

/* A thread's work: n blocks of sizes from seed, every other one freed at once, the rest at
 * the end. */
static void *churn(void *v)
{
    const churn_args *c = v;
    uintptr_t mine[32];
    unsigned kept = 0;
    for (unsigned i = 0; i < c->n; i++) {
        ssize_t size = (ssize_t)(((c->seed * 2654435761u + i * 40503u) % 4096u + 1) * 4096u);
        uintptr_t a = take(size, 0, c->stream);
        if (!a) continue;
        if (i % 2) give_addr(a);
        else mine[kept++] = a;
    }
    for (unsigned i = 0; i < kept; i++) give_addr(mine[i]);
    return NULL;
}

static void threads(unsigned n, unsigned seed)
{
    pthread_t t[2];
    churn_args c[2] = {{n, seed, 0}, {n, seed + 1, 0x100}};
    for (int i = 0; i < 2; i++)
        GS_FUZZ_CHECK(pthread_create(&t[i], NULL, churn, &c[i]) == 0, "%s", "pthread_create");
    for (int i = 0; i < 2; i++) pthread_join(t[i], NULL);
}

static void *busy(void *stop)
{
    while (!g_atomic_int_get((gint *)stop)) {
        void *p = gpusim_malloc(8192, 0, NULL);
        if (p) gpusim_free(p, 8192, 0, NULL);
    }
    return NULL;
}

static void pools_done(void);

/* The child must be able to use its copy of the allocator: a lock left held across the fork
 * would hang it here. It frees what the parent had live (its copy) and ends the pools the input
 * left open (a capture's private pool holds what was freed in it: an input that filled the cap
 * there left the child no room, and the harness called that a broken allocator), so that its
 * request fits whatever the parent held. */
static void forked(bool with_thread)
{
    gint stop = 0;
    pthread_t t;
    if (with_thread)
        GS_FUZZ_CHECK(pthread_create(&t, NULL, busy, &stop) == 0, "%s", "pthread_create");
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        while (live.n) give(live.n - 1);
        pools_done();
        gpusim_empty_cache();
        void *p = gpusim_malloc(4096, 0, NULL);
        if (p) gpusim_free(p, 4096, 0, NULL);
        _exit(p ? 0 : 3);
    }
    if (with_thread) {
        g_atomic_int_set(&stop, 1);
        pthread_join(t, NULL);
    }
    GS_FUZZ_CHECK(pid > 0, "%s", "fork failed");
    int status = 0;
    pid_t w;
    while ((w = waitpid(pid, &status, 0)) < 0 && errno == EINTR) continue;
    GS_FUZZ_CHECK(w == pid, "waitpid: %s", g_strerror(errno));
    GS_FUZZ_CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0,
                  "the forked child could not allocate (status %d)", status);
}

/* The pool hooks: begins and releases counted per device and pool, so that the end can end
 * and release what the input left; so are the MemPools made. A capture's filter: its stream
 * (ctx). */
static int uses[2][8], open_begins[2][8], mempools[2][4];

/* Pool k's pair: k < 4 a CUDA graph's (k + 1, 0), else a MemPool's (0, k - 3). */
static uint64_t graph_of(unsigned k)
{
    return k < 4 ? k + 1 : 0;
}
static uint64_t user_of(unsigned k)
{
    return k < 4 ? 0 : k - 3;
}

static int capture_stream(void *ctx, void *stream)
{
    return stream == ctx;
}

static void pool_op(unsigned kind, int device, unsigned a, unsigned b)
{
    unsigned k = a & 7; /* the hooks' pool */
    uint64_t g = graph_of(k), u = user_of(k);
    if (kind == 1) {
        gpusim_pool_begin(device, g, u, capture_stream, (void *)((uintptr_t)(b & 3) * 0x100));
        uses[device][k]++;
        open_begins[device][k]++;
    } else if (kind == 2) {
        gpusim_pool_end(device, g, u);
        if (open_begins[device][k]) open_begins[device][k]--;
    } else if (kind == 3) {
        gpusim_pool_release(device, g, u);
        /* a release of a MemPool's id beyond the uses begun takes the MemPool's own use, as
         * PyTorch's release_pool does (the harness kept counting it made) */
        if (uses[device][k]) uses[device][k]--;
        else if (k >= 4 && mempools[device][k - 4]) mempools[device][k - 4]--;
    }
    k = a & 3; /* the MemPool */
    if (kind == 4) {
        /* A MemPool is made whether or not the library had a slot for it: refused one, it owes
         * its use and takes it at its next (torch/pools.c, owed), and use_count counts it. The
         * harness counted only a create that returned 0, and called the owed use a fault. */
        int before = gpusim_mempool_use_count(device, 0, k + 1);
        int rc = gpusim_mempool_create(device, 0, k + 1);
        int after = gpusim_mempool_use_count(device, 0, k + 1);
        GS_FUZZ_CHECK(rc != 0 || after == before + 1, "MemPool %u made: %d uses, then %d", k,
                      before, after);
        mempools[device][k] += rc == 0 || after == before + 1;
    } else if (kind == 5) {
        gpusim_mempool_destroy(device, 0, k + 1);
        if (mempools[device][k]) mempools[device][k]--;
    } else if (kind == 6) {
        /* (with no use_mem_pool of it open or unreleased: those a careless caller makes may
         * be refused, and the harness cannot tell) */
        int n = gpusim_mempool_use_count(device, 0, k + 1);
        GS_FUZZ_CHECK(uses[device][k + 4] || n == mempools[device][k],
                      "MemPool %u: %d uses, %d made", k, n, mempools[device][k]);
    }
}

/* The value of KEY in the statistics' JSON, or -1 when absent. */
static long long stat_of(const char *json, const char *key)
{
    char quoted[96];
    snprintf(quoted, sizeof quoted, "\"%s\": ", key);
    const char *at = strstr(json, quoted);
    return at ? strtoll(at + strlen(quoted), NULL, 10) : -1;
}

/* torch.cuda.memory_stats() and its resets: whatever the buffer, a NUL-ended prefix and the
 * whole length; whatever the resets, each peak the program sees at least its current. */
static void memory_stats(int device, unsigned a, unsigned b)
{
    if ((a & 3) == 1) gpusim_reset_peak_stats(device);
    if ((a & 3) == 2) gpusim_reset_accumulated_stats(device);
    char small[256], *whole = malloc(1 << 16);
    size_t n = gpusim_memory_stats(device, small, b);
    GS_FUZZ_CHECK(n == 0 || b == 0 || strlen(small) == MIN(n, (size_t)b - 1),
                  "memory_stats into %u bytes: %zu long, %zu written", b, n, strlen(small));
    size_t m = gpusim_memory_stats(device, whole, 1 << 16);
    GS_FUZZ_CHECK(m == n && m < (1 << 16), "memory_stats: %zu long, then %zu", n, m);
    static const char *const stats[] = {"allocated_bytes.all", "reserved_bytes.all",
                                        "active.large_pool", "inactive_split_bytes.small_pool"};
    for (size_t i = 0; m && i < sizeof stats / sizeof *stats; i++) {
        char cur[64], peak[64];
        snprintf(cur, sizeof cur, "%s.current", stats[i]);
        snprintf(peak, sizeof peak, "%s.peak", stats[i]);
        long long c = stat_of(whole, cur), p = stat_of(whole, peak);
        GS_FUZZ_CHECK(c >= 0 && p >= c, "%s: current %lld, peak %lld", stats[i], c, p);
    }
    free(whole);
}

static void pools_done(void)
{
    for (int d = 0; d < 2; d++)
        for (unsigned k = 0; k < 8; k++) {
            for (; open_begins[d][k]; open_begins[d][k]--)
                gpusim_pool_end(d, graph_of(k), user_of(k));
            for (; uses[d][k]; uses[d][k]--) gpusim_pool_release(d, graph_of(k), user_of(k));
            if (k < 4)
                for (; mempools[d][k]; mempools[d][k]--) gpusim_mempool_destroy(d, 0, k + 1);
        }
}

static void bad_calls(unsigned a, unsigned b)
{
    static const int devices[] = {-1, 64, 1 << 20};
    GS_FUZZ_CHECK(gpusim_malloc(-(ssize_t)a, 0, NULL) == NULL, "%s", "malloc of a size <= 0");
    GS_FUZZ_CHECK(gpusim_malloc(4096, devices[b % 3], NULL) == NULL, "malloc on device %d",
                  devices[b % 3]);
    gpusim_free((void *)(uintptr_t)(0x1000 + a * 512u), 4096, 0, NULL); /* never given */
    gpusim_free((void *)(uintptr_t)(0x1000 + a * 512u), 4096, devices[b % 3], NULL);
    pthread_mutex_lock(&live.lock);
    live_block x = live.n ? live.b[(a << 8 | b) % live.n] : (live_block){0};
    pthread_mutex_unlock(&live.lock);
    if (x.addr) /* on the other device: refused, the block stays live where it is */
        gpusim_free((void *)x.addr, x.size, 1 - x.device, NULL);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    setup_once();
    for (size_t i = 0; i + 3 <= size && i < 3 * 2048; i += 3) {
        unsigned op = data[i], a = data[i + 1], b = data[i + 2];
        switch (op & 7) {
        case 0:
        case 1:
        case 2:
            (void)take((ssize_t)((1 + (a << 8 | b)) << ((op >> 3) & 15)), (int)(op >> 7),
                       (uintptr_t)(b & 3) * 0x100);
            break;
        case 3:
            if (live.n) give((a << 8 | b) % live.n); /* (no thread runs here) */
            break;
        case 4:
            if (((op >> 3) & 7) == 7) memory_stats((int)(op >> 7), a, b);
            else if ((op >> 3) & 7) pool_op((op >> 3) & 7, (int)(op >> 7), a, b);
            else gpusim_empty_cache();
            break;
        case 5: bad_calls(a, b); break;
        case 6: threads(a % 32 + 1, b); break;
        default: forked(a & 1); break;
        }
    }
    while (live.n) give(live.n - 1);
    pools_done();
    gpusim_empty_cache();
    /* nothing lost: the whole cap is there again */
    void *p = gpusim_malloc(960 * (ssize_t)MiB, 0, NULL);
    GS_FUZZ_CHECK(p != NULL, "%s",
                  "960 MiB do not fit a 1 GiB cap with nothing live and the "
                  "cache emptied");
    gpusim_free(p, 960 * (ssize_t)MiB, 0, NULL);
    gpusim_empty_cache();
    return 0;
}
