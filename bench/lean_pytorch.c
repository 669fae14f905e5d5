/* lean_pytorch.c - a lean, exact emulation of PyTorch 2.11's native CUDA caching allocator at
 * its default settings, and the benchmark that races gpusim's replay core against it.
 *
 * The replay core's speed target is ">= 0.9x the speed of a lean exact reference emulation kept
 * in bench/, in the same run": what gpusim's generality (every policy and setting behind one
 * core, a simulated device, statistics for reports) may cost over the one allocator written
 * plainly. This is that allocator: DeviceCachingAllocator with no max_split_size_mb, expandable
 * segments, garbage collection or memory fraction, so no oversize rule and no out-of-memory
 * ladder (docs/pytorch-allocator.md; its sections are cited below). One device, one client,
 * any number of streams; alloc, free (deferred too: free, then free_done) and empty_cache. A
 * trace with anything else is skipped.
 *
 * Per (pool, stream) the free blocks are in size classes (8 per power of two, a bitmap of those
 * in use), each a treap in PyTorch's order, (size, address) (§1.3): best fit descends the
 * request's class, else takes the least block of the next class in use. (One treap per (pool,
 * stream) is simpler, and was 2.5 times slower than gpusim on gpt2: seven levels of loads, each
 * waiting on the last, per search, insertion and removal.) Blocks link their neighbours for the
 * split (§1.8) and the merge (§1.9).
 *
 * The statistics are PyTorch's DeviceStats, all it keeps at this setting, kept eagerly, as
 * DeviceCachingAllocator keeps them (alloc_block, alloc_found_block, free, free_block,
 * release_block): for each StatType (aggregate, small_pool, large_pool), current and peak of
 * allocation, segment, active, inactive_split, allocated_bytes, reserved_bytes, active_bytes,
 * inactive_split_bytes and requested_bytes; num_device_alloc and num_device_free (cudaMalloc,
 * cudaFree). num_alloc_retries and num_ooms stay 0 (no out-of-memory ladder), oversize_* too
 * (no max_split_size); allocated and freed, the running sums, are not kept. The target asks for
 * them ("a lean exact emulation of the same policy, with PyTorch's statistics kept eagerly"):
 * gpusim keeps them too, so an emulation without them would race less work.
 *
 * Addresses only break ties between free blocks of equal size, but that changes what follows
 * (docs/fidelity.md §1.3): with segments placed by a bump allocator, upward, allocated bytes on
 * gpt2 and resnet50 ended a few hundred KiB off gpusim's; downward (as the driver carves new
 * ranges, backends/simdevice.c, rule 3) the bundled traces matched, but cnn_train, generate_kv
 * and sidecnn did not, where the driver's other rules (an older range's slack filled, a freed
 * range reused) decide a tie. So each segment's address comes from gpusim's simulated device
 * through the backend seam, as the replay's do (its cost, in the few events that make or free a
 * segment, is in both timings); --bump-placement takes the downward bump instead, for a check
 * of what placement costs.
 *
 *   bench_lean TRACE... [--runs K] [--repeat N] [--only lean|gpusim] [--bump-placement]
 *
 * Per trace, K runs of each, alternated: gpusim's replay under the `pytorch` policy, uncapped,
 * timed as bench_replay times it (gs_replay_run whole, the bound computed before), and the
 * emulation; each run is N passes over the events, what is live freed between passes (as
 * sim/replay.c's free_live). CPU time of the process. One line per trace:
 *
 *   TRACE events=E repeat=N runs=K gpusim_ns=G lean_ns=L ratio=L/G ratio_paired=R
 *       peak_reserved=.. peak_allocated=.. mallocs=.. frees=.. match=yes|no
 *
 * ns per event: medians over the runs; ratio: gpusim's speed over the emulation's (the target's
 * figure), ratio_paired the median of each run's. match: the emulation's statistics equal
 * gpusim's result (each of DeviceStats' nine arrays, current and peak, for all, small_pool and
 * large_pool; num_device_alloc and num_device_free, which are the cudaMalloc and cudaFree calls;
 * no retry, no OOM); each difference is a MISMATCH line on stderr (the stat as memory_stats()
 * names it: allocated_bytes.large_pool.peak), and the exit status 1. --only runs one of the two,
 * once, for callgrind (bench/ir_per_event.sh's way: subtract a run of one pass).
 *
 * A benchmark, not a test: it is not run by 'meson test'.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "replay.h"

#define MAX_RUNS 99

/* §1.1, the constants of the default setting */
#define MIN_BLOCK UINT64_C(512)
#define SMALL_SIZE (UINT64_C(1) << 20)       /* kSmallSize: the small pool's largest request */
#define SMALL_BUFFER (UINT64_C(2) << 20)     /* kSmallBuffer: a small pool's segment */
#define LARGE_BUFFER (UINT64_C(20) << 20)    /* kLargeBuffer: a 1-10 MiB request's segment */
#define MIN_LARGE_ALLOC (UINT64_C(10) << 20) /* kMinLargeAlloc: from here, the request's own */
#define ROUND_LARGE (UINT64_C(2) << 20)      /* kRoundLarge: what that segment is rounded to */
#define CHUNK 256                            /* block structs allocated at a time */

/* ---- the emulation ---- */

enum { FREE, ALLOCATED, PENDING };

/* A free block's order as one number, size above address: a comparison is one compare, and a
 * descent picks its child by the comparison's value, not by a branch. */
typedef unsigned __int128 lkey;

typedef struct lblock lblock;
struct lblock {
    union {
        lkey key;           /* free: (size, addr), its place in the treap */
        uint64_t requested; /* allocated, pending: the request's own size (requested_bytes) */
    }; /* (never both: a block has a key only while free; a field of its own would take the
        * struct from 80 bytes to 96, the key's alignment) */
    uint64_t addr, size;
    lblock *prev, *next; /* neighbours in the segment, by address; none: the whole segment */
    lblock *kid[2];      /* free: its treap's children, lower keys in kid[0]; pending: the list */
    uint32_t prio;       /* the treap's heap order (higher nearer the root) */
    uint32_t stream;
    uint32_t slot; /* pending: the trace's slot, emptied when empty_cache completes it */
    uint8_t small; /* the pool: 1 small, 0 large */
    uint8_t state;
};

/* The size classes: 8 per power of two of size / 512 (TLSF's mapping, in size order), up to
 * the largest segment (a request up to GS_MAX_REQUEST, 2^46, rounded to 2 MiB: below 2^47). */
enum { SUB = 3, NCLASS = 38 << SUB, NWORDS = NCLASS / 64 + 1 };

typedef struct {
    uint64_t used[NWORDS]; /* the classes that hold a block */
    lblock *cls[NCLASS];   /* each class's treap */
} lbins;

/* PyTorch's DeviceStats arrays, as DeviceCachingAllocator keeps them (CUDACachingAllocator.cpp):
 * each per StatType, current and peak (not allocated and freed, PyTorch's running totals, which
 * the check leaves out too). */
enum {
    ST_ALLOCATION,           /* blocks the program holds */
    ST_SEGMENT,              /* cudaMalloc'd segments */
    ST_ACTIVE,               /* blocks the program holds or whose free awaits its events */
    ST_INACTIVE_SPLIT,       /* free blocks of a split segment */
    ST_ALLOCATED_BYTES,      /* as allocation, in bytes */
    ST_RESERVED_BYTES,       /* as segment, in bytes */
    ST_ACTIVE_BYTES,         /* as active, in bytes */
    ST_INACTIVE_SPLIT_BYTES, /* as inactive_split, in bytes */
    ST_REQUESTED_BYTES,      /* the requests' own sizes, unrounded, of the active blocks */
    NSTAT
};

/* StatType, in gpusim's order, which is PyTorch's: the check indexes gs_stats' arrays with it */
enum {
    AGGREGATE = GS_STAT_ALL,
    SMALL_POOL = GS_STAT_SMALL,
    LARGE_POOL = GS_STAT_LARGE,
    NTYPE = GS_STAT_TYPES
};

typedef struct {
    int64_t current, peak;
} lstat;

typedef struct {
    lbins **bins;   /* the free blocks, [2 * stream + small]; NULL until one is freed there */
    lblock **slots; /* each allocation's block, by the trace's slot; NULL: not live */
    size_t nslots;
    lblock *pending;         /* deferred frees not yet completed */
    lblock *spare;           /* block structs to reuse, linked by next */
    GPtrArray *chunks;       /* where the block structs live */
    uint64_t bump;           /* the last segment's address: the next goes below */
    uint64_t rng;            /* xorshift64: the treaps' priorities */
    lstat st[NSTAT][NTYPE];  /* DeviceStats' arrays, [ST_*][StatType] */
    uint64_t mallocs, frees; /* num_device_alloc, num_device_free: cudaMalloc and cudaFree calls */
    gs_backend *dev;         /* the simulated device placing segments; --bump-placement: NULL */
    gs_devcalls calls;       /* its calls (the seam's wrappers count them) */
} lean;

/* PyTorch's increase_stat and decrease_stat, on a pool's type t and on AGGREGATE, as
 * for_each_selected_stat_type applies them to get_stat_types_for_pool's two types. Each type has
 * its own peak, so AGGREGATE's is the peak of the sum, which no sum of the pools' peaks gives. A
 * decrease cannot pass the peak, so it leaves it alone (as decrease_stat does): comparing there
 * too cost 28 instructions an event, an eighth of the emulation's. */
static inline void stat_inc(lstat s[NTYPE], unsigned t, int64_t v)
{
    s[t].current += v;
    if (s[t].current > s[t].peak) s[t].peak = s[t].current;
    s[AGGREGATE].current += v;
    if (s[AGGREGATE].current > s[AGGREGATE].peak) s[AGGREGATE].peak = s[AGGREGATE].current;
}

static inline void stat_dec(lstat s[NTYPE], unsigned t, int64_t v)
{
    s[t].current -= v;
    s[AGGREGATE].current -= v;
}

static inline unsigned type_of(bool small)
{
    return small ? SMALL_POOL : LARGE_POOL;
}

static inline bool is_split(const lblock *b)
{
    return b->prev || b->next;
}

static lblock *block_new(lean *L)
{
    if (!L->spare) {
        lblock *c = g_new(lblock, CHUNK);
        g_ptr_array_add(L->chunks, c);
        for (int i = 0; i < CHUNK; i++) c[i].next = i + 1 < CHUNK ? &c[i + 1] : NULL;
        L->spare = c;
    }
    lblock *b = L->spare;
    L->spare = b->next;
    L->rng ^= L->rng << 13;
    L->rng ^= L->rng >> 7;
    L->rng ^= L->rng << 17;
    b->prio = (uint32_t)(L->rng >> 32);
    b->kid[0] = b->kid[1] = b->prev = b->next = NULL;
    return b;
}

static void block_delete(lean *L, lblock *b)
{
    b->next = L->spare;
    L->spare = b;
}

/* ---- the free blocks of a (pool, stream): size classes, each a treap by (size, address) ---- */

static inline lkey key_of(const lblock *b)
{
    return (lkey)b->size << 64 | b->addr;
}

/* Cut the subtree t into the blocks before k (*l) and after it (*r). */
static void treap_split(lblock *t, lkey k, lblock **l, lblock **r)
{
    while (t) {
        if (t->key < k) {
            *l = t;
            l = &t->kid[1];
            t = t->kid[1];
        } else {
            *r = t;
            r = &t->kid[0];
            t = t->kid[0];
        }
    }
    *l = *r = NULL;
}

/* Join a and b, every block of a before every block of b. */
static lblock *treap_join(lblock *a, lblock *b)
{
    lblock *root, **link = &root;
    while (a && b) {
        if (a->prio > b->prio) {
            *link = a;
            link = &a->kid[1];
            a = a->kid[1];
        } else {
            *link = b;
            link = &b->kid[0];
            b = b->kid[0];
        }
    }
    *link = a ? a : b;
    return root;
}

static void treap_insert(lblock **root, lblock *b)
{
    lkey k = b->key = key_of(b);
    lblock **link = root;
    while (*link && (*link)->prio > b->prio) link = &(*link)->kid[(*link)->key < k];
    treap_split(*link, k, &b->kid[0], &b->kid[1]);
    *link = b;
}

static void treap_erase(lblock **root, lblock *b)
{
    lblock **link = root;
    while (*link != b) link = &(*link)->kid[(*link)->key < b->key];
    *link = treap_join(b->kid[0], b->kid[1]);
}

/* The smallest block of at least size, the lowest address among equals, taken out. */
static lblock *treap_take_fit(lblock **root, uint64_t size)
{
    lblock **link = root, **best = NULL;
    while (*link) {
        bool fits = (*link)->size >= size;
        best = fits ? link : best;
        link = &(*link)->kid[!fits];
    }
    if (!best) return NULL;
    lblock *b = *best;
    *best = treap_join(b->kid[0], b->kid[1]);
    return b;
}

static inline unsigned class_of(uint64_t size)
{
    uint64_t u = size >> 9; /* at least 1: sizes are multiples of 512 */
    unsigned fl = 63u - (unsigned)__builtin_clzll(u);
    return fl << SUB | (unsigned)(u << SUB >> fl & ((1u << SUB) - 1));
}

static void bins_insert(lbins *B, lblock *b)
{
    unsigned c = class_of(b->size);
    treap_insert(&B->cls[c], b);
    B->used[c / 64] |= UINT64_C(1) << c % 64;
}

static void bins_erase(lbins *B, lblock *b)
{
    unsigned c = class_of(b->size);
    treap_erase(&B->cls[c], b);
    if (!B->cls[c]) B->used[c / 64] &= ~(UINT64_C(1) << c % 64);
}

/* §1.7: best fit, taken out. Every block of a higher class is larger than any of size's class,
 * so a miss in that class is served by the least block of the next class in use. */
static lblock *bins_take_fit(lbins *B, uint64_t size)
{
    unsigned c = class_of(size);
    lblock *b = treap_take_fit(&B->cls[c], size);
    if (!b) {
        unsigned w = (c + 1) / 64; /* (c + 1 <= NCLASS < 64 * NWORDS) */
        uint64_t m = B->used[w] & ~UINT64_C(0) << (c + 1) % 64;
        while (!m && ++w < NWORDS) m = B->used[w];
        if (!m) return NULL;
        c = w * 64 + (unsigned)__builtin_ctzll(m);
        lblock **link = &B->cls[c];
        while ((*link)->kid[0]) link = &(*link)->kid[0];
        b = *link;
        *link = b->kid[1];
    }
    if (!B->cls[c]) B->used[c / 64] &= ~(UINT64_C(1) << c % 64);
    return b;
}

/* The bins of a (pool, stream), made on its first free block. */
static lbins *bins_at(lean *L, uint32_t stream, bool small)
{
    lbins **B = &L->bins[2 * stream + small];
    if (!*B) *B = g_new0(lbins, 1);
    return *B;
}

/* ---- malloc and free ---- */

/* §1.5: a segment for a request of size (rounded) that no cached block serves; its one block
 * goes straight to the request. */
static lblock *new_segment(lean *L, uint64_t size, uint32_t stream, bool small)
{
    uint64_t seg = small                    ? SMALL_BUFFER
                   : size < MIN_LARGE_ALLOC ? LARGE_BUFFER
                                            : (size + ROUND_LARGE - 1) / ROUND_LARGE * ROUND_LARGE;
    lblock *b = block_new(L);
    /* downward, as the driver carves new ranges; a device that refuses (gpusim climbed its
     * out-of-memory ladder there, which the emulation has not: the check says so) bumps too */
    if (!L->dev || gs_dev_malloc(L->dev, &L->calls, seg, &b->addr) != GS_OK) {
        L->bump -= seg;
        b->addr = L->bump;
    }
    b->size = seg;
    b->stream = stream;
    b->small = small;
    /* alloc_block */
    stat_inc(L->st[ST_SEGMENT], type_of(small), 1);
    stat_inc(L->st[ST_RESERVED_BYTES], type_of(small), (int64_t)seg);
    L->mallocs++;
    return b;
}

/* §1.4 to §1.8: round, best fit on the stream, else a new segment; split off the high end when
 * enough is left (512 bytes in the small pool, more than 1 MiB in the large one). */
static void lean_malloc(lean *L, uint64_t orig, uint32_t stream, uint32_t slot)
{
    uint64_t size = orig < MIN_BLOCK ? MIN_BLOCK : (orig + MIN_BLOCK - 1) / MIN_BLOCK * MIN_BLOCK;
    bool small = size <= SMALL_SIZE;
    lbins *B = L->bins[2 * stream + small];
    lblock *b = B ? bins_take_fit(B, size) : NULL;
    if (!b) b = new_segment(L, size, stream, small);
    unsigned t = type_of(small);
    bool already_split = is_split(b); /* (a fresh segment's block is not) */
    uint64_t rest = b->size - size;
    if (small ? rest >= MIN_BLOCK : rest > SMALL_SIZE) {
        lblock *r = block_new(L);
        r->addr = b->addr + size;
        r->size = rest;
        r->stream = stream;
        r->small = small;
        r->state = FREE;
        r->prev = b;
        r->next = b->next;
        if (b->next) b->next->prev = r;
        b->next = r;
        b->size = size;
        bins_insert(bins_at(L, stream, small), r);
        /* alloc_found_block: an inactive split block shrinks by what is taken; an unsplit one
         * leaves a new inactive split block, the rest */
        if (already_split) {
            stat_dec(L->st[ST_INACTIVE_SPLIT_BYTES], t, (int64_t)size);
        } else {
            stat_inc(L->st[ST_INACTIVE_SPLIT_BYTES], t, (int64_t)rest);
            stat_inc(L->st[ST_INACTIVE_SPLIT], t, 1);
        }
    } else if (already_split) {
        /* an inactive split block becomes active whole */
        stat_dec(L->st[ST_INACTIVE_SPLIT_BYTES], t, (int64_t)b->size);
        stat_dec(L->st[ST_INACTIVE_SPLIT], t, 1);
    }
    b->state = ALLOCATED;
    b->requested = orig;
    stat_inc(L->st[ST_ALLOCATION], t, 1);
    stat_inc(L->st[ST_ALLOCATED_BYTES], t, (int64_t)b->size);
    stat_inc(L->st[ST_ACTIVE], t, 1);
    stat_inc(L->st[ST_ACTIVE_BYTES], t, (int64_t)b->size);
    stat_inc(L->st[ST_REQUESTED_BYTES], t, (int64_t)orig);
    L->slots[slot] = b;
}

/* §1.9, free_block: merge with the free neighbours of the segment, back to the free blocks. The
 * block stops being active now, and its request with it; each neighbour merged was an inactive
 * split block, and the result is one if the segment is still split. */
static void free_block(lean *L, lblock *b)
{
    lbins *B = bins_at(L, b->stream, b->small);
    unsigned t = type_of(b->small);
    int64_t size = (int64_t)b->size, requested = (int64_t)b->requested;
    int64_t split_blocks = 0, split_bytes = 0;
    lblock *p = b->prev, *n = b->next;
    if (p && p->state == FREE) {
        split_blocks--;
        split_bytes -= (int64_t)p->size;
        bins_erase(B, p);
        b->addr = p->addr;
        b->size += p->size;
        b->prev = p->prev;
        if (b->prev) b->prev->next = b;
        block_delete(L, p);
    }
    if (n && n->state == FREE) {
        split_blocks--;
        split_bytes -= (int64_t)n->size;
        bins_erase(B, n);
        b->size += n->size;
        b->next = n->next;
        if (b->next) b->next->prev = b;
        block_delete(L, n);
    }
    b->state = FREE;
    bins_insert(B, b); /* (b->requested is gone: the key overlays it) */
    if (is_split(b)) {
        split_blocks++;
        split_bytes += (int64_t)b->size;
    }
    if (split_blocks > 0) stat_inc(L->st[ST_INACTIVE_SPLIT], t, split_blocks);
    else if (split_blocks < 0) stat_dec(L->st[ST_INACTIVE_SPLIT], t, -split_blocks);
    if (split_bytes > 0) stat_inc(L->st[ST_INACTIVE_SPLIT_BYTES], t, split_bytes);
    else if (split_bytes < 0) stat_dec(L->st[ST_INACTIVE_SPLIT_BYTES], t, -split_bytes);
    stat_dec(L->st[ST_ACTIVE], t, 1);
    stat_dec(L->st[ST_ACTIVE_BYTES], t, size);
    stat_dec(L->st[ST_REQUESTED_BYTES], t, requested);
}

static void pending_unlink(lean *L, lblock *b)
{
    if (b->kid[0]) b->kid[0]->kid[1] = b->kid[1];
    else L->pending = b->kid[1];
    if (b->kid[1]) b->kid[1]->kid[0] = b->kid[0];
}

/* The program's free (PyTorch's free): allocation and allocated bytes drop now, deferred or not;
 * active, active bytes and requested bytes when the block is freed (free_block). */
static void free_request(lean *L, const lblock *b)
{
    stat_dec(L->st[ST_ALLOCATION], type_of(b->small), 1);
    stat_dec(L->st[ST_ALLOCATED_BYTES], type_of(b->small), (int64_t)b->size);
}

/* §1.9, free: a deferred free's block waits for its free_done. */
static void lean_free(lean *L, uint32_t slot, bool deferred)
{
    lblock *b = L->slots[slot];
    free_request(L, b);
    if (!deferred) {
        L->slots[slot] = NULL;
        free_block(L, b);
        return;
    }
    b->state = PENDING;
    b->slot = slot;
    b->kid[0] = NULL;
    b->kid[1] = L->pending;
    if (L->pending) L->pending->kid[0] = b;
    L->pending = b;
}

/* In-order walk of a treap, gathering its whole segments (free blocks without neighbours). */
static void gather_whole(lblock *t, GPtrArray *out)
{
    for (; t; t = t->kid[1]) {
        gather_whole(t->kid[0], out);
        if (!t->prev && !t->next) g_ptr_array_add(out, t);
    }
}

/* §1.10, release_cached_blocks: the device synchronised, every pending free completes, the
 * oldest first (synchronize_and_free_events walks each stream's events from the front; the list
 * has the newest at its head); then every free block that is a whole segment goes back to the
 * device. */
static void lean_empty_cache(lean *L, size_t nroots)
{
    lblock *old = L->pending;
    while (old && old->kid[1]) old = old->kid[1];
    while (old) {
        lblock *newer = old->kid[0];
        pending_unlink(L, old);
        L->slots[old->slot] = NULL;
        free_block(L, old);
        old = newer;
    }
    GPtrArray *whole = g_ptr_array_new();
    for (size_t k = 0; k < nroots; k++) {
        lbins *B = L->bins[k];
        if (!B) continue;
        g_ptr_array_set_size(whole, 0);
        for (unsigned c = 0; c < NCLASS; c++) gather_whole(B->cls[c], whole);
        for (guint i = 0; i < whole->len; i++) {
            lblock *b = whole->pdata[i];
            bins_erase(B, b);
            /* release_block: a whole segment, so no inactive split block goes with it */
            stat_dec(L->st[ST_SEGMENT], type_of(b->small), 1);
            stat_dec(L->st[ST_RESERVED_BYTES], type_of(b->small), (int64_t)b->size);
            L->frees++;
            if (L->dev) (void)gs_dev_free(L->dev, &L->calls, b->addr, b->size);
            block_delete(L, b);
        }
    }
    g_ptr_array_free(whole, TRUE);
}

/* Between passes the program "ends" as sim/replay.c's free_live has it: what is live is freed,
 * a pending free completed, in slot order; the cache stays. */
static void free_live(lean *L)
{
    for (size_t s = 0; s < L->nslots; s++) {
        lblock *b = L->slots[s];
        if (!b) continue;
        if (b->state == PENDING) pending_unlink(L, b);
        else free_request(L, b);
        L->slots[s] = NULL;
        free_block(L, b);
    }
}

/* The emulation over repeat passes of t's events, its statistics into *L; driver: segments
 * placed by gpusim's simulated device of t's size (as sim/replay.c opens it, without latencies),
 * else by the bump allocator. */
static G_GNUC_NO_INLINE void lean_run(const gs_trace *t, unsigned repeat, bool driver, lean *L)
{
    size_t nstreams = MAX(t->streams->len, 1u), nroots = 2 * nstreams;
    *L = (lean){.bins = g_new0(lbins *, nroots),
                .nslots = t->n_slots,
                .slots = g_new0(lblock *, MAX(t->n_slots, 1)),
                .chunks = g_ptr_array_new(),
                .bump = UINT64_C(1) << 47,
                .rng = UINT64_C(0x9e3779b97f4a7c15)};
    uint64_t total = t->device_total ? t->device_total : GS_DEFAULT_DEVICE_TOTAL;
    if (driver)
        L->dev = gs_sim_backend_new(
            &(gs_sim_config){.total_bytes = total, .align_512m = gs_sim_h200_like(total)});
    for (unsigned k = 0; k < repeat; k++) {
        if (k) free_live(L);
        for (size_t i = 0; i < t->n; i++) {
            const gs_event *e = &t->ev[i];
            if (e->op == GS_OP_ALLOC) {
                lean_malloc(L, e->size, e->stream, e->slot);
            } else if (e->op == GS_OP_FREE) {
                lean_free(L, e->slot, e->flags & GS_EV_DEFERRED);
            } else if (e->op == GS_OP_FREE_DONE) {
                lblock *b = L->slots[e->slot]; /* NULL: empty_cache completed it */
                if (!b) continue;
                pending_unlink(L, b);
                L->slots[e->slot] = NULL;
                free_block(L, b);
            } else if (e->op == GS_OP_EMPTY_CACHE) {
                lean_empty_cache(L, nroots);
            }
        }
    }
    /* the statistics are the result: the structures go now, as gpusim's replay frees its heap
     * within the timed call */
    g_ptr_array_free(L->chunks, TRUE);
    for (size_t k = 0; k < nroots; k++) g_free(L->bins[k]);
    g_free(L->bins);
    g_free(L->slots);
    if (L->dev) gs_backend_destroy(L->dev);
    L->chunks = NULL;
    L->bins = NULL;
    L->slots = NULL;
    L->dev = NULL;
}

/* ---- the benchmark ---- */

static double cpu_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Why the emulation cannot replay t, or NULL when it can. */
static const char *unsupported(const gs_trace *t)
{
    uint32_t *ids = NULL;
    size_t ndev = gs_trace_devices(t, &ids);
    g_free(ids);
    if (ndev > 1) return "several devices";
    if (t->clients->len > 1) return "several clients";
    for (size_t i = 0; i < t->n; i++) {
        gs_op op = (gs_op)t->ev[i].op;
        if (op != GS_OP_ALLOC && op != GS_OP_FREE && op != GS_OP_FREE_DONE &&
            op != GS_OP_EMPTY_CACHE && op != GS_OP_MARK)
            return gs_op_name(op);
        /* (the size classes end there; gpusim refuses such a request, an OOM) */
        if (op == GS_OP_ALLOC && t->ev[i].size > GS_MAX_REQUEST) return "a request past 2^46";
    }
    return NULL;
}

/* gpusim's replay, timed as bench_replay's timed_replay times it. */
static double time_gpusim(const gs_trace *t, const gs_policy *p, const gs_bound *b, unsigned repeat,
                          gs_result *r)
{
    gs_replay_opts o = {.device_total = t->device_total, .repeat = repeat, .bound = b};
    GError *err = NULL;
    double c0 = cpu_s();
    gboolean ok = gs_replay_run(t, p, &o, r, &err);
    double s = cpu_s() - c0;
    if (!ok) {
        fprintf(stderr, "bench_lean: %s\n", err->message);
        exit(2);
    }
    return s;
}

static double time_lean(const gs_trace *t, unsigned repeat, bool driver, lean *L)
{
    double c0 = cpu_s();
    lean_run(t, repeat, driver, L);
    return cpu_s() - c0;
}

/* The emulation's figures against gpusim's: TRUE when each is equal (each difference printed).
 * driver: the emulation's segments were placed by gpusim's simulated device. */
static gboolean same_results(const char *path, const gs_result *r, const lean *L, bool driver)
{
    const gs_stats *s = &r->stats;
    /* every array of DeviceStats, current and peak of each StatType, named as PyTorch's
     * memory_stats() names them ("allocated_bytes.large_pool.peak") */
    const struct {
        const char *what;
        const gs_stat *gpusim;
        const lstat *lean;
    } a[] = {
        {"allocation", s->allocation, L->st[ST_ALLOCATION]},
        {"segment", s->segment, L->st[ST_SEGMENT]},
        {"active", s->active, L->st[ST_ACTIVE]},
        {"inactive_split", s->inactive_split, L->st[ST_INACTIVE_SPLIT]},
        {"allocated_bytes", s->allocated_bytes, L->st[ST_ALLOCATED_BYTES]},
        {"reserved_bytes", s->reserved_bytes, L->st[ST_RESERVED_BYTES]},
        {"active_bytes", s->active_bytes, L->st[ST_ACTIVE_BYTES]},
        {"inactive_split_bytes", s->inactive_split_bytes, L->st[ST_INACTIVE_SPLIT_BYTES]},
        {"requested_bytes", s->requested_bytes, L->st[ST_REQUESTED_BYTES]},
    };
    G_STATIC_ASSERT(G_N_ELEMENTS(a) == NSTAT);
    static const char *const type_name[NTYPE] = {"all", "small_pool", "large_pool"};
    gboolean same = TRUE;
    for (size_t i = 0; i < G_N_ELEMENTS(a); i++) {
        for (unsigned t = 0; t < NTYPE; t++) {
            const gs_stat *g = &a[i].gpusim[t];
            const lstat *l = &a[i].lean[t];
            if (g->current != l->current)
                fprintf(stderr, "MISMATCH %s %s.%s.current gpusim=%" PRId64 " lean=%" PRId64 "\n",
                        path, a[i].what, type_name[t], g->current, l->current);
            if (g->peak != l->peak)
                fprintf(stderr, "MISMATCH %s %s.%s.peak gpusim=%" PRId64 " lean=%" PRId64 "\n",
                        path, a[i].what, type_name[t], g->peak, l->peak);
            same &= g->current == l->current && g->peak == l->peak;
        }
    }
    const struct {
        const char *what;
        int64_t gpusim, lean;
    } f[] = {
        {"mallocs", (int64_t)r->calls.n[GS_CALL_MALLOC], (int64_t)L->mallocs},
        {"device_allocs", (int64_t)s->num_device_alloc, (int64_t)L->mallocs},
        {"frees", (int64_t)r->calls.n[GS_CALL_FREE], (int64_t)L->frees},
        {"device_frees", (int64_t)s->num_device_free, (int64_t)L->frees},
        /* the emulation has no out-of-memory ladder: gpusim must not have needed one */
        {"retries", (int64_t)s->num_alloc_retries, 0},
        {"ooms", (int64_t)s->num_ooms, 0},
    };
    for (size_t i = 0; i < G_N_ELEMENTS(f); i++) {
        if (f[i].gpusim == f[i].lean) continue;
        fprintf(stderr, "MISMATCH %s %s gpusim=%" PRId64 " lean=%" PRId64 "\n", path, f[i].what,
                f[i].gpusim, f[i].lean);
        same = FALSE;
    }
    if (!same && !driver)
        fprintf(stderr,
                "MISMATCH %s: a tie between free blocks of equal size may have gone by "
                "address otherwise (docs/fidelity.md §1.3); without --bump-placement, "
                "segments are placed as gpusim places them\n",
                path);
    return same;
}

/* One trace: 0, 1 for a mismatch, 2 when it cannot be read. only: NULL (both), "lean" or
 * "gpusim". */
static int bench_trace(const char *path, const gs_policy *p, unsigned runs, unsigned repeat,
                       const char *only, bool driver)
{
    GError *err = NULL;
    gs_trace *t = gs_trace_load(path, 0, NULL, NULL, &err);
    if (!t) {
        fprintf(stderr, "bench_lean: %s\n", err->message);
        g_error_free(err);
        return 2;
    }
    const char *why = unsupported(t);
    if (why) {
        printf("%s skipped: %s\n", path, why);
        gs_trace_free(t);
        return 0;
    }
    double ev = (double)t->n * repeat;
    gs_bound *b = gs_bound_compute(t); /* outside the timed part, as the commands do */
    gs_result r = {0};
    lean L = {0};
    if (only) {
        bool g = strcmp(only, "gpusim") == 0;
        double s = g ? time_gpusim(t, p, b, repeat, &r) : time_lean(t, repeat, driver, &L);
        printf("%s events=%zu repeat=%u only=%s ns=%.2f peak_reserved=%" PRId64 "\n", path, t->n,
               repeat, only, s * 1e9 / ev,
               g ? r.stats.reserved_bytes[GS_STAT_ALL].peak
                 : L.st[ST_RESERVED_BYTES][AGGREGATE].peak);
        gs_result_clear(&r);
        gs_bound_free(b);
        gs_trace_free(t);
        return 0;
    }
    double g_ns[MAX_RUNS], l_ns[MAX_RUNS], ratio[MAX_RUNS];
    gboolean same = TRUE;
    for (unsigned k = 0; k < runs; k++) {
        /* each of the pair goes first every other run: neither always meets a cold cache */
        if (k % 2) l_ns[k] = time_lean(t, repeat, driver, &L) * 1e9 / ev;
        gs_result_clear(&r);
        g_ns[k] = time_gpusim(t, p, b, repeat, &r) * 1e9 / ev;
        if (k % 2 == 0) l_ns[k] = time_lean(t, repeat, driver, &L) * 1e9 / ev;
        ratio[k] = l_ns[k] / g_ns[k];
        if (k == 0) same = same_results(path, &r, &L, driver);
    }
    double gm = gs_median(g_ns, runs), lm = gs_median(l_ns, runs);
    printf("%s events=%zu repeat=%u runs=%u gpusim_ns=%.2f lean_ns=%.2f ratio=%.3f "
           "ratio_paired=%.3f peak_reserved=%" PRId64 " peak_allocated=%" PRId64 " mallocs=%" PRIu64
           " frees=%" PRIu64 " match=%s\n",
           path, t->n, repeat, runs, gm, lm, lm / gm, gs_median(ratio, runs),
           L.st[ST_RESERVED_BYTES][AGGREGATE].peak, L.st[ST_ALLOCATED_BYTES][AGGREGATE].peak,
           L.mallocs, L.frees, same ? "yes" : "no");
    fflush(stdout);
    gs_result_clear(&r);
    gs_bound_free(b);
    gs_trace_free(t);
    return same ? 0 : 1;
}

static int usage(void)
{
    fprintf(stderr, "usage: bench_lean TRACE... [--runs K] [--repeat N] [--only lean|gpusim] "
                    "[--bump-placement]\n");
    return 2;
}

int main(int argc, char **argv)
{
    unsigned runs = 5, repeat = 200;
    const char *only = NULL;
    bool driver = true;
    GPtrArray *paths = g_ptr_array_new();
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        bool has = i + 1 < argc;
        if (strcmp(a, "--runs") == 0 && has) runs = (unsigned)atoi(argv[++i]);
        else if (strcmp(a, "--repeat") == 0 && has) repeat = (unsigned)atoi(argv[++i]);
        else if (strcmp(a, "--only") == 0 && has) only = argv[++i];
        else if (strcmp(a, "--bump-placement") == 0) driver = false;
        else if (a[0] != '-') g_ptr_array_add(paths, argv[i]);
        else return usage();
    }
    if (!paths->len || !repeat || !runs || runs > MAX_RUNS ||
        (only && strcmp(only, "lean") != 0 && strcmp(only, "gpusim") != 0))
        return usage();
    GError *err = NULL;
    gs_policy *p = gs_policy_new("pytorch", &err);
    g_assert(p); /* a built-in spec */
    int rc = 0;
    for (guint i = 0; i < paths->len; i++) {
        int one = bench_trace(paths->pdata[i], p, runs, repeat, only, driver);
        rc = MAX(rc, one); /* (MAX evaluates its arguments twice) */
    }
    gs_policy_free(p);
    g_ptr_array_free(paths, TRUE);
    return rc;
}
