/* simdevice.c - the simulated device: a capacity, physical memory in 2 MiB pages, virtual
 * addresses without real memory, and a virtual clock advanced by a calibrated cost model.
 *
 * cudaMalloc and cudaFree follow the CUDA driver as measured on an H100 and an H200 (driver
 * 580; tests/data/driver-h100-2026-11-22/, whose README shows each rule in the recorded
 * calls; docs/fidelity.md §6 states them, and tests/test_driver.c replays
 * every recorded call through this file and checks each address and each change of
 * cudaMemGetInfo). In short, with X the address a fresh context gives its first 2 MiB:
 *   1. Above 1 MiB, a request takes its size rounded up to 2 MiB (S), in memory and address
 *      space. Up to 1 MiB, requests are rounded to 512 bytes and packed into 2 MiB pages: into
 *      the lowest-addressed page whose free end holds them, after the highest live allocation
 *      in it; a new page is placed like a 2 MiB request, and the last free gives it back. The
 *      first allocation in a page costs its 2 MiB of memory, the others nothing.
 *   2. Memory comes from VA ranges: a request goes to the lowest-addressed gap of at least S
 *      inside a range still in use (first fit from the bottom).
 *   3. When none fits, a new range of V = max(32 MiB, S rounded up to 32 MiB) is made with the
 *      request at its bottom: at the top of the highest free hole that is strictly larger than
 *      V, else directly below the lowest range (the first at T = X - 414 MiB). On the H200
 *      (align_512m), a range for a multiple of 512 MiB starts on a 512 MiB boundary, the VA it
 *      skips a hole.
 *   4. A range whose last allocation is freed becomes a free hole (merged with its
 *      neighbours); one at the bottom of the carved space shrinks it instead. So once
 *      everything is freed, the same calls get the same addresses again.
 *   5. A fresh context has a range of its own above T with two usable gaps: 2 MiB at X and
 *      24 MiB at X + 74 MiB.
 *   6. All but one 2 MiB page of the free memory can be allocated.
 * The physical pages themselves can sit anywhere, so fragmentation at the driver level is nil:
 * the fragmentation users meet lives in the caching allocator above, which is what gpusim
 * studies. Addresses matter because PyTorch's best fit breaks ties between equal-size free
 * blocks by address (docs/fidelity.md §1.3). With a script (reference-address mode), the n-th
 * cudaMalloc takes the address the real driver gave the n-th segment of a reference run, as
 * long as the sizes keep matching; the model places the rest (far below the scripted ones).
 * Rules 1 to 5 are simplace.c's, each placement O(log n) in the ranges, holes and pages.
 *
 * Virtual memory (the driver's cuMem* calls, used by expandable segments). A reservation is
 * address space only. cuMemCreate takes physical pages (and is the call that runs out of
 * memory); cuMemMap puts a whole handle at a granularity-aligned address inside a reservation
 * where nothing is mapped yet; cuMemSetAccess needs every page of its range mapped; cuMemUnmap
 * must cover whole mappings; cuMemRelease frees a handle's pages at once, or when its last
 * mapping goes if it is still mapped. Anything else is GS_ERR_INVALID, as the driver's
 * CUDA_ERROR_INVALID_VALUE. Reservations are carved upward from VMM_BASE, far from where
 * cudaMalloc's model places segments, and never reused (the address does not matter to the
 * allocator: an expandable segment's blocks only compare addresses within the segment).
 */
#include <stddef.h>
#include <string.h>

#include "backend.h"
#include "simplace.h"

#include <glib.h>

#define PAGE (2 * GS_MiB)
#define SMALL_MAX GS_MiB               /* rule 1: up to this, requests share pages */
#define SMALL_ALIGN UINT64_C(512)
/* rules 1-5's placement, with its constants: simplace.c */
/* rule 5: X of the model, unless the config says (30 MiB into a 32 MiB block, as measured) */
#define X_DEFAULT (UINT64_C(0x7f0000000000) - 2 * GS_MiB)
#define VMM_BASE UINT64_C(0x200000000000)
/* Several devices: device d's address space is this layout moved up by d * 2^47 (device 0's lies
 * below 2^47), so no two simulated devices ever hand out the same address, as no two real ones
 * do. */
#define DEVICE_SPAN (UINT64_C(1) << 47)
_Static_assert(X_DEFAULT < DEVICE_SPAN && VMM_BASE < X_DEFAULT, "the layout fits in one window");
_Static_assert((UINT64_MAX >> 47) >= GS_SIM_MAX_DEVICES - 1, "every window is addressable");

/* A mapping, as each of its granules holds it (handle 0: none; no handle is 0). */
typedef struct {
    uint64_t va, size, handle;
} mapping;

/* A reservation, with the mapping over each of its granules: expandable segments map and unmap
 * pages on most events of some traces, and a table per granule (not a hash of every mapped
 * granule's address, a key allocated each) makes cuMemMap and cuMemUnmap a few stores. The
 * table is in chunks of GRAN_CHUNK granules (1 GiB), made when first mapped into: a reservation
 * spans the device's whole memory, and most of it is never mapped. A granule holds its mapping
 * itself, not a pointer to one: a cuMemMap allocates nothing. */
#define GRAN_CHUNK 512
typedef struct {
    uint64_t va, size;
    uint64_t mapped_pages;
    mapping **chunk; /* size / PAGE / GRAN_CHUNK (rounded up) chunks, NULL until mapped into */
} reservation;

/* A handle's physical memory. The live ones are kept in an array in handle order: handles are
 * numbered upward and never reused, so appending keeps it sorted and a lookup is the place its
 * number gives (handle_find), else a binary search, with neither a hash nor a malloc per
 * handle. A handle that goes leaves a hole (size 0) until the holes outnumber the live handles;
 * then the array is compacted. */
typedef struct {
    uint64_t handle;
    uint64_t size;   /* 0: gone */
    uint32_t maps;   /* live mappings of this handle */
    bool released;   /* cuMemRelease'd while mapped: its pages go with the last unmap */
} phys_handle;

/* A live cudaMalloc: its address, and what it took, its size rounded (S, or the small request's
 * 512-byte multiple) with two flags in the low bits. */
#define LIVE_SMALL UINT64_C(1)    /* in a shared page */
#define LIVE_SCRIPTED UINT64_C(2) /* placed by the script: in no range of the model */
#define LIVE_FLAGS (LIVE_SMALL | LIVE_SCRIPTED)
_Static_assert(SMALL_ALIGN > LIVE_FLAGS, "a rounded size leaves the flags' bits clear");
typedef struct {
    uint64_t addr;
    uint64_t v;      /* size | LIVE_* flags; 0: an empty slot (a size is never 0) */
} live_slot;

/* The live cudaMallocs by address: open addressing, linear probing, a removal shifting back
 * the slots after it (no tombstones), at most 3/4 full. A GHashTable's insert and remove took
 * 4% of a replay that makes and frees a segment every few events (resnet50 under
 * max_split_size_mb:128 at 6.25 GiB); these are a multiplication and a few compares. */
typedef struct {
    live_slot *slot;
    unsigned bits;   /* 2^bits slots */
    size_t n;
} live_table;

#define LIVE_MIN_BITS 6

static size_t live_home(const live_table *t, uint64_t addr)
{
    return (size_t)((addr * UINT64_C(0x9E3779B97F4A7C15)) >> (64 - t->bits)); /* Fibonacci */
}

static void live_init(live_table *t, unsigned bits)
{
    t->bits = bits;
    t->slot = g_new0(live_slot, (size_t)1 << bits);
    t->n = 0;
}

/* addr's slot, or NULL. */
static live_slot *live_find(const live_table *t, uint64_t addr)
{
    size_t mask = ((size_t)1 << t->bits) - 1;
    for (size_t i = live_home(t, addr);; i = (i + 1) & mask) {
        if (!t->slot[i].v) return NULL;
        if (t->slot[i].addr == addr) return &t->slot[i];
    }
}

static void live_put(live_table *t, uint64_t addr, uint64_t v)
{
    if ((t->n + 1) * 4 > ((size_t)3 << t->bits)) { /* grow */
        live_table old = *t;
        live_init(t, old.bits + 1);
        for (size_t i = 0; i < (size_t)1 << old.bits; i++)
            if (old.slot[i].v) live_put(t, old.slot[i].addr, old.slot[i].v);
        g_free(old.slot);
    }
    size_t mask = ((size_t)1 << t->bits) - 1, i = live_home(t, addr);
    while (t->slot[i].v && t->slot[i].addr != addr) i = (i + 1) & mask;
    if (!t->slot[i].v) t->n++;
    t->slot[i] = (live_slot){addr, v};
}

static void live_remove(live_table *t, live_slot *x)
{
    size_t mask = ((size_t)1 << t->bits) - 1, i = (size_t)(x - t->slot);
    for (size_t j = (i + 1) & mask; t->slot[j].v; j = (j + 1) & mask) {
        /* the entry at j may move back to i unless its home lies cyclically in (i, j] */
        size_t home = live_home(t, t->slot[j].addr);
        if (((j - home) & mask) >= ((j - i) & mask)) {
            t->slot[i] = t->slot[j];
            i = j;
        }
    }
    t->slot[i].v = 0;
    t->n--;
}

/* A call kind's modelled time at the last size asked (call_us). */
typedef struct {
    uint64_t size;
    double us;
    bool valid;
} call_memo;

typedef struct {
    uint64_t total_pages;
    uint64_t used_pages;
    const gs_calibration *cal;
    call_memo memo[GS_CALL_COUNT];
    double clock_us;
    live_table live;
    /* the placement model (rules 1-5, simplace.c) */
    uint64_t x;         /* X (rule 5) */
    gs_simplace *place;
    const uint64_t *script_addrs, *script_sizes;
    size_t script_n, script_pos;
    bool script_off;
    size_t script_used;
    /* virtual memory */
    GPtrArray *reservations;  /* reservation*, in no order (they never overlap; a few) */
    reservation *rlast;       /* the one gran_lookup found last */
    /* granule chunks of reservations released, every handle 0 (a reservation is released only
     * once nothing is mapped in it), so a new one takes them as they are: a replay's every pass
     * reserves again, and zeroing a chunk's 12 KiB each time was 4-12% of an expandable
     * segments trace that maps across a GiB */
    GPtrArray *spare_chunks;
    phys_handle *handles;     /* by handle; holes among them (a plain array: a GArray's append
                               * was a call and a check of its size, for every page made) */
    guint nhandles, handles_cap;
    guint handle_holes;
    guint first_hole;         /* the lowest hole's place, while there are holes */
    uint64_t next_handle;
    uint64_t vmm_frontier;
} sim_state;

static uint64_t round_up(uint64_t x, uint64_t to) { return (x + to - 1) / to * to; }

/* The modelled time of a call of kind k on size bytes: the calibration's, remembered for the
 * last size of each kind. An expandable segment's growth creates, maps and releases pages of
 * one size by the hundreds, and each lookup walks the kind's points (about 80 instructions); the
 * calibration never changes under a device, so the remembered time is the same number. */
static double call_us(sim_state *s, gs_call_kind k, uint64_t size)
{
    call_memo *m = &s->memo[k];
    if (!m->valid || m->size != size) {
        m->us = gs_calibration_us(s->cal, k, size);
        m->size = size;
        m->valid = true;
    }
    return m->us;
}

/* The handles' array leads each element with the number it is sorted by (first_at_least). */
_Static_assert(offsetof(phys_handle, handle) == 0, "the sorted array's key leads its element");

/* The first of elements [lo, hi) of v (stride bytes each, ascending by their leading uint64_t)
 * whose key is at least key; hi when none is. */
static inline guint first_at_least(const void *v, size_t stride, guint lo, guint hi, uint64_t key)
{
    while (lo < hi) {
        guint mid = lo + (hi - lo) / 2;
        uint64_t k;
        memcpy(&k, (const char *)v + (size_t)mid * stride, sizeof k);
        if (k < key) lo = mid + 1;
        else hi = mid;
    }
    return lo;
}

/* Would [addr, addr+size) collide with a live allocation? (A script may name an address the
 * model has handed out; then the script is abandoned.) */
static bool overlaps_live(sim_state *s, uint64_t addr, uint64_t size)
{
    for (size_t i = 0; i < (size_t)1 << s->live.bits; i++) {
        const live_slot *x = &s->live.slot[i];
        uint64_t a = x->addr, n = x->v & ~LIVE_FLAGS;
        if (x->v && addr < a + n && a < addr + size) return true;
    }
    return false;
}

static gs_status sim_malloc(void *st, uint64_t size, uint64_t *addr)
{
    sim_state *s = st;
    s->clock_us += call_us(s, GS_CALL_MALLOC, size);
    bool small = size <= SMALL_MAX, new_page = true;
    uint64_t rsize = small ? round_up(size, SMALL_ALIGN) : round_up(size, PAGE);
    if (small) (void)gs_simplace_small(s->place, rsize, false, &new_page);
    uint64_t pages = small ? (new_page ? 1 : 0) : rsize / PAGE;
    /* rule 6: one page of the free memory is never handed out */
    uint64_t avail = s->total_pages - s->used_pages;
    if (pages && pages + 1 > avail) return GS_ERR_OOM;

    uint64_t a = 0;
    bool scripted = false;
    if (!s->script_off && s->script_pos < s->script_n) {
        if (s->script_sizes[s->script_pos] == size &&
            !overlaps_live(s, s->script_addrs[s->script_pos], rsize)) {
            a = s->script_addrs[s->script_pos++];
            scripted = true;
            s->script_used++;
        } else {
            s->script_off = true; /* the run diverged from the reference: model from here on */
        }
    }
    if (!scripted && small) a = gs_simplace_small(s->place, rsize, true, &new_page);
    else if (!scripted) a = gs_simplace_place(s->place, rsize);

    uint64_t took = scripted ? round_up(size, PAGE) : rsize;
    uint64_t flags = scripted ? LIVE_SCRIPTED : small ? LIVE_SMALL : 0;
    live_put(&s->live, a, took | flags);
    s->used_pages += scripted ? took / PAGE : pages;
    *addr = a;
    return GS_OK;
}

static gs_status sim_free(void *st, uint64_t addr)
{
    sim_state *s = st;
    live_slot *x = live_find(&s->live, addr);
    if (!x) return GS_ERR_INVALID;
    uint64_t v = x->v, size = v & ~LIVE_FLAGS;
    s->clock_us += call_us(s, GS_CALL_FREE, size);
    if (v & LIVE_SCRIPTED) {
        s->used_pages -= size / PAGE;
    } else if (v & LIVE_SMALL) {
        if (gs_simplace_unsmall(s->place, addr)) s->used_pages--;
    } else {
        gs_simplace_unplace(s->place, addr);
        s->used_pages -= size / PAGE;
    }
    live_remove(&s->live, x);
    return GS_OK;
}

static gs_status sim_mem_info(void *st, uint64_t *free_b, uint64_t *total)
{
    sim_state *s = st;
    s->clock_us += call_us(s, GS_CALL_MEM_INFO, 0);
    *free_b = (s->total_pages - s->used_pages) * PAGE;
    *total = s->total_pages * PAGE;
    return GS_OK;
}

/* ---- virtual memory ---- */

static reservation *reservation_of(sim_state *s, uint64_t va, uint64_t size)
{
    for (guint i = 0; i < s->reservations->len; i++) {
        reservation *r = s->reservations->pdata[i];
        if (va >= r->va && size <= r->size && va - r->va <= r->size - size) return r;
    }
    return NULL;
}

static uint64_t gran_chunks(const reservation *r)
{
    return (r->size / PAGE + GRAN_CHUNK - 1) / GRAN_CHUNK;
}

/* The mapping over granule i of r, or NULL. */
static const mapping *gran_get(const reservation *r, uint64_t i)
{
    const mapping *c = r->chunk[i / GRAN_CHUNK];
    return c && c[i % GRAN_CHUNK].handle ? &c[i % GRAN_CHUNK] : NULL;
}

/* A granule chunk with no mapping: a spare one, else a new one. */
static mapping *chunk_new(sim_state *s)
{
    if (s->spare_chunks->len) return g_ptr_array_steal_index(s->spare_chunks, s->spare_chunks->len - 1);
    return g_new0(mapping, GRAN_CHUNK);
}

/* Granules [i, i + n) lie in chunks i / GRAN_CHUNK on: each chunk's share, [*j, *j + *len) of
 * chunk *k, one at a time (a mapping's granules are walked as a run within its chunk, not each
 * found by a division). Returns false when none is left; g is where the next share starts. */
static bool gran_span(uint64_t *g, uint64_t end, uint64_t *k, uint64_t *j, uint64_t *len)
{
    if (*g >= end) return false;
    *k = *g / GRAN_CHUNK;
    *j = *g % GRAN_CHUNK;
    *len = MIN(end - *g, GRAN_CHUNK - *j);
    *g += *len;
    return true;
}

/* Whether any granule of [i, i + n) of r is mapped. */
static bool gran_any(const reservation *r, uint64_t i, uint64_t n)
{
    for (uint64_t g = i, k, j, len; gran_span(&g, i + n, &k, &j, &len);) {
        const mapping *c = r->chunk[k];
        if (!c) continue;
        for (uint64_t x = j; x < j + len; x++)
            if (c[x].handle) return true;
    }
    return false;
}

/* Granules [i, i + n) of r hold m. */
static void gran_set(sim_state *s, reservation *r, uint64_t i, uint64_t n, mapping m)
{
    for (uint64_t g = i, k, j, len; gran_span(&g, i + n, &k, &j, &len);) {
        if (!r->chunk[k]) r->chunk[k] = chunk_new(s);
        mapping *c = r->chunk[k];
        for (uint64_t x = j; x < j + len; x++) c[x] = m;
    }
}

/* Granules [i, i + n) of r, all mapped, hold nothing. */
static void gran_clear(reservation *r, uint64_t i, uint64_t n)
{
    for (uint64_t g = i, k, j, len; gran_span(&g, i + n, &k, &j, &len);) {
        mapping *c = r->chunk[k];
        for (uint64_t x = j; x < j + len; x++) c[x].handle = 0;
    }
}

/* The mapping over the granule at a (granularity-aligned), or NULL when none (or when no
 * reservation holds a). */
static const mapping *gran_lookup(sim_state *s, uint64_t a)
{
    reservation *r = s->rlast;
    if (!r || a < r->va || a - r->va >= r->size) {
        r = reservation_of(s, a, PAGE);
        if (!r) return NULL;
        s->rlast = r;
    }
    return gran_get(r, (a - r->va) / PAGE);
}

/* Frees a reservation, the mappings left in it with it (sim_destroy). */
static void reservation_free(gpointer p)
{
    reservation *r = p;
    for (uint64_t c = 0; c < gran_chunks(r); c++) g_free(r->chunk[c]);
    g_free(r->chunk);
    g_free(r);
}

/* Frees a reservation with nothing mapped in it; its chunks become spares (chunk_new). */
static void reservation_release(sim_state *s, reservation *r)
{
    for (uint64_t c = 0; c < gran_chunks(r); c++)
        if (r->chunk[c]) g_ptr_array_add(s->spare_chunks, r->chunk[c]);
    g_free(r->chunk);
    g_free(r);
}

static gs_status sim_va_reserve(void *st, uint64_t size, uint64_t *va)
{
    sim_state *s = st;
    s->clock_us += call_us(s, GS_CALL_VA_RESERVE, size);
    if (size == 0 || size % PAGE) return GS_ERR_INVALID;
    /* The reservations grow up towards cudaMalloc's space, which grows down: where they would
     * meet, the address space is spent (the driver's CUDA_ERROR_OUT_OF_MEMORY). */
    uint64_t bottom = gs_simplace_bottom(s->place);
    if (bottom < s->vmm_frontier || bottom - s->vmm_frontier < size) return GS_ERR_OOM;
    reservation *r = g_new0(reservation, 1);
    r->va = s->vmm_frontier;
    r->size = size;
    r->chunk = g_new0(mapping *, gran_chunks(r));
    s->vmm_frontier += size;
    g_ptr_array_add(s->reservations, r);
    *va = r->va;
    return GS_OK;
}

static gs_status sim_va_release(void *st, uint64_t va, uint64_t size)
{
    sim_state *s = st;
    s->clock_us += call_us(s, GS_CALL_VA_RELEASE, size);
    for (guint i = 0; i < s->reservations->len; i++) {
        reservation *r = s->reservations->pdata[i];
        if (r->va != va) continue;
        if (r->size != size || r->mapped_pages) return GS_ERR_INVALID;
        if (s->rlast == r) s->rlast = NULL;
        reservation_release(s, g_ptr_array_steal_index_fast(s->reservations, i));
        return GS_OK;
    }
    return GS_ERR_INVALID;
}

/* Room for n more handles at the end of the array. */
static void handles_room(sim_state *s, guint n)
{
    if (s->nhandles + n <= s->handles_cap) return;
    s->handles_cap = MAX(s->nhandles + n, s->handles_cap ? 2 * s->handles_cap : 64);
    s->handles = g_renew(phys_handle, s->handles, s->handles_cap);
}

static gs_status sim_page_create(void *st, uint64_t size, uint64_t *handle)
{
    sim_state *s = st;
    s->clock_us += call_us(s, GS_CALL_PAGE_CREATE, size);
    if (size == 0 || size % PAGE) return GS_ERR_INVALID;
    if (size / PAGE > s->total_pages - s->used_pages) return GS_ERR_OOM;
    s->used_pages += size / PAGE;
    *handle = ++s->next_handle;
    phys_handle p = {.handle = *handle, .size = size};
    handles_room(s, 1);
    s->handles[s->nhandles++] = p; /* the largest handle yet: the array stays sorted */
    return GS_OK;
}

/* The live handle h, or NULL; valid until handles next change. Handles are numbered upward and
 * a hole keeps its place until a compaction, so h lies at least as many places below the last
 * entry as its number is below the last's (fewer only where a compaction took handles out
 * between them): that place, exact for every handle made since the last compaction, is tried
 * first, then the search runs from it. */
static phys_handle *handle_find(sim_state *s, uint64_t h)
{
    guint lo = 0, hi = s->nhandles;
    if (!hi) return NULL;
    uint64_t last = s->handles[hi - 1].handle;
    if (h > last) return NULL;
    if (last - h < hi) {
        lo = hi - 1 - (guint)(last - h);
        phys_handle *p = &s->handles[lo];
        if (p->handle == h) return p->size ? p : NULL;
        if (p->handle > h) return NULL; /* cannot be: h would lie below lo */
    }
    lo = first_at_least(s->handles, sizeof(phys_handle), lo, hi, h);
    phys_handle *p = &s->handles[lo];
    return lo < hi && p->handle == h && p->size ? p : NULL;
}

static inline void handle_drop(sim_state *s, phys_handle *p)
{
    s->used_pages -= p->size / PAGE;
    p->size = 0;
    guint at = (guint)(p - s->handles);
    if (!s->handle_holes || at < s->first_hole) s->first_hole = at;
    if (++s->handle_holes <= s->nhandles / 2) return;
    /* compact: more holes than live handles. From the lowest hole: the handles below it stay
     * (pages made and given back by the hundreds, as an expandable segment that meets the cap
     * does, leave their holes above the long-lived ones). */
    guint n = s->first_hole;
    for (guint i = n; i < s->nhandles; i++) {
        const phys_handle *q = &s->handles[i];
        if (q->size) s->handles[n++] = *q;
    }
    s->nhandles = n;
    s->handle_holes = 0;
}

static gs_status sim_page_release(void *st, uint64_t handle)
{
    sim_state *s = st;
    phys_handle *p = handle_find(s, handle);
    s->clock_us += call_us(s, GS_CALL_PAGE_RELEASE, p ? p->size : PAGE);
    if (!p || p->released) return GS_ERR_INVALID;
    if (p->maps) p->released = true;
    else handle_drop(s, p);
    return GS_OK;
}

static gs_status sim_map(void *st, uint64_t va, uint64_t size, uint64_t handle)
{
    sim_state *s = st;
    s->clock_us += call_us(s, GS_CALL_MAP, size);
    phys_handle *p = handle_find(s, handle);
    reservation *r = reservation_of(s, va, size);
    if (!p || p->released || p->size != size || va % PAGE || !r) return GS_ERR_INVALID;
    uint64_t g = (va - r->va) / PAGE;
    if (gran_any(r, g, size / PAGE)) return GS_ERR_INVALID; /* already mapped */
    gran_set(s, r, g, size / PAGE, (mapping){va, size, handle});
    p->maps++;
    r->mapped_pages += size / PAGE;
    return GS_OK;
}

/* Is every granule of [va, va+size) mapped? Mapping by mapping: a mapping's granules are all
 * mapped. */
static bool range_mapped(sim_state *s, uint64_t va, uint64_t size)
{
    if (size == 0 || va % PAGE || size % PAGE) return false;
    for (uint64_t a = va; a < va + size;) {
        const mapping *m = gran_lookup(s, a);
        if (!m) return false;
        a = m->va + m->size;
    }
    return true;
}

/* cuMemSetAccess costs per mapping in its range, not per byte: on the H100 a range of n 20 MiB
 * handles took n times what one took (27 us each; 2.2 ms for 78 of them), while one handle of
 * 1 GiB took 88 us (lab/results/h100-2026-11-22-validate/). So each mapping is charged what the
 * table says for one mapping of its size. */
static gs_status sim_set_access(void *st, uint64_t va, uint64_t size)
{
    sim_state *s = st;
    if (!range_mapped(s, va, size)) {
        s->clock_us += call_us(s, GS_CALL_SET_ACCESS, PAGE);
        return GS_ERR_INVALID;
    }
    for (uint64_t a = va; a < va + size;) {
        const mapping *m = gran_lookup(s, a);
        s->clock_us += call_us(s, GS_CALL_SET_ACCESS, m->size);
        a = m->va + m->size;
    }
    return GS_OK;
}

/* Unmaps m, a mapping gran_lookup has just found (so s->rlast holds it): its granules
 * cleared, and its handle's memory freed if the handle was released while mapped. Returns its
 * size. */
static uint64_t unmap_found(sim_state *s, const mapping *m)
{
    reservation *r = s->rlast;
    uint64_t n = m->size;
    phys_handle *p = handle_find(s, m->handle);
    gran_clear(r, (m->va - r->va) / PAGE, n / PAGE);
    r->mapped_pages -= n / PAGE;
    if (--p->maps == 0 && p->released) handle_drop(s, p);
    return n;
}

static gs_status sim_unmap(void *st, uint64_t va, uint64_t size)
{
    sim_state *s = st;
    s->clock_us += call_us(s, GS_CALL_UNMAP, size);
    /* one whole mapping, as an expandable segment unmaps page by page: found once */
    const mapping *one = gran_lookup(s, va);
    if (one && one->va == va && one->size == size) {
        unmap_found(s, one);
        return GS_OK;
    }
    if (!range_mapped(s, va, size)) return GS_ERR_INVALID;
    /* The range must consist of whole mappings: check before changing anything. */
    for (uint64_t a = va; a < va + size;) {
        const mapping *m = gran_lookup(s, a);
        if (m->va != a || m->size > va + size - a) return GS_ERR_INVALID;
        a += m->size;
    }
    for (uint64_t a = va; a < va + size;) a += unmap_found(s, gran_lookup(s, a));
    return GS_OK;
}

/* Calls c[i..n) while they are cuMemCreates of one valid size that find memory: each as
 * sim_page_create makes it, counted and timed as sim_batch does, with one check for the memory
 * they need, not one per page. Returns how many were made. */
static size_t create_run(sim_state *s, const gs_dev_call *c, size_t i, size_t n, gs_devcalls *calls)
{
    uint64_t size = c[i].size, pages = size / PAGE;
    uint64_t fit = (s->total_pages - s->used_pages) / pages;
    size_t m = i;
    while (m < n && m - i < fit && c[m].kind == GS_CALL_PAGE_CREATE && c[m].size == size) m++;
    handles_room(s, (guint)(m - i));
    double us = call_us(s, GS_CALL_PAGE_CREATE, size);
    for (size_t j = i; j < m; j++) {
        double t0 = s->clock_us;
        s->clock_us += us;
        calls->time_us[GS_CALL_PAGE_CREATE] += s->clock_us - t0;
        *c[j].handle = ++s->next_handle;
        s->handles[s->nhandles++] = (phys_handle){.handle = s->next_handle, .size = size};
    }
    s->used_pages += (m - i) * pages;
    calls->n[GS_CALL_PAGE_CREATE] += m - i;
    return m - i;
}

/* Calls c[i..n) while they are cuMemReleases of live handles: each as sim_page_release makes
 * it, counted and timed as sim_batch does. A batch releases pages made one after another, which lie
 * one after another in the handle array: each is looked for first where the last one was.
 * Returns how many were made; the first that would fail is left to sim_page_release. */
static size_t release_run(sim_state *s, const gs_dev_call *c, size_t i, size_t n,
                          gs_devcalls *calls)
{
    phys_handle *p = NULL;
    size_t j = i;
    for (; j < n && c[j].kind == GS_CALL_PAGE_RELEASE; j++) {
        uint64_t h = *c[j].handle;
        if (!p || p >= s->handles + s->nhandles || p->handle != h) p = handle_find(s, h);
        if (!p || !p->size || p->released) break;
        double t0 = s->clock_us;
        s->clock_us += call_us(s, GS_CALL_PAGE_RELEASE, p->size);
        calls->time_us[GS_CALL_PAGE_RELEASE] += s->clock_us - t0;
        calls->n[GS_CALL_PAGE_RELEASE]++;
        if (p->maps) {
            p->released = true;
            p++;
            continue;
        }
        guint before = s->nhandles;
        handle_drop(s, p);
        p = s->nhandles == before ? p + 1 : NULL; /* NULL: compacted, p is gone */
    }
    return j - i;
}

/* The calls one after another, each counted and timed as account() in backend.c does a single
 * one. */
static gs_status sim_batch(void *st, const gs_dev_call *c, size_t n, size_t *made,
                           gs_devcalls *calls)
{
    sim_state *s = st;
    gs_status r = GS_OK;
    size_t i = 0;
    while (i < n && r == GS_OK) {
        /* a run of cuMemCreates at once; the one that finds no memory is made as itself */
        if (c[i].kind == GS_CALL_PAGE_CREATE && c[i].size && c[i].size % PAGE == 0) {
            size_t k = create_run(s, c, i, n, calls);
            i += k;
            if (k) continue;
        }
        if (c[i].kind == GS_CALL_PAGE_RELEASE) {
            size_t k = release_run(s, c, i, n, calls);
            i += k;
            if (k) continue;
        }
        const gs_dev_call *x = &c[i++];
        double t0 = s->clock_us;
        switch (x->kind) {
        case GS_CALL_PAGE_CREATE: r = sim_page_create(s, x->size, x->handle); break;
        case GS_CALL_PAGE_RELEASE: r = sim_page_release(s, *x->handle); break;
        case GS_CALL_MAP: r = sim_map(s, x->va, x->size, *x->handle); break;
        case GS_CALL_UNMAP: r = sim_unmap(s, x->va, x->size); break;
        default: *made = i; return GS_ERR_INVALID; /* not a batch's: neither counted nor timed */
        }
        calls->n[x->kind]++;
        calls->failed[x->kind] += r != GS_OK;
        calls->time_us[x->kind] += s->clock_us - t0;
    }
    *made = i;
    return r;
}

static uint64_t sim_granularity(void *st) { return PAGE; }
static double sim_now(void *st) { return ((sim_state *)st)->clock_us; }

static void sim_destroy(void *st)
{
    sim_state *s = st;
    g_free(s->live.slot);
    gs_simplace_free(s->place);
    g_free(s->handles);
    g_ptr_array_free(s->reservations, TRUE);
    g_ptr_array_free(s->spare_chunks, TRUE);
    g_free(s);
}

static const gs_backend_ops sim_ops = {
    .version = GS_BACKEND_VERSION,
    .name = "sim",
    .malloc = sim_malloc,
    .free = sim_free,
    .va_reserve = sim_va_reserve,
    .va_release = sim_va_release,
    .page_create = sim_page_create,
    .page_release = sim_page_release,
    .map = sim_map,
    .set_access = sim_set_access,
    .unmap = sim_unmap,
    .batch = sim_batch,
    .granularity = sim_granularity,
    .mem_info = sim_mem_info,
    .now_us = sim_now,
    .destroy = sim_destroy,
};

gs_backend *gs_sim_backend_new(const gs_sim_config *cfg)
{
    g_return_val_if_fail(cfg->device < GS_SIM_MAX_DEVICES, NULL);
    uint64_t window = (uint64_t)cfg->device * DEVICE_SPAN;
    sim_state *s = g_new0(sim_state, 1);
    uint64_t usable = cfg->total_bytes > cfg->reserved_bytes ? cfg->total_bytes - cfg->reserved_bytes : 0;
    s->total_pages = usable / PAGE;
    s->cal = cfg->cal;
    live_init(&s->live, LIVE_MIN_BITS);
    s->x = cfg->origin ? cfg->origin : window + X_DEFAULT;
    s->place = gs_simplace_new(s->x, cfg->align_512m);
    s->reservations = g_ptr_array_new_with_free_func(reservation_free);
    s->spare_chunks = g_ptr_array_new_with_free_func(g_free);
    s->vmm_frontier = window + VMM_BASE;
    s->script_addrs = cfg->script_addrs;
    s->script_sizes = cfg->script_sizes;
    s->script_n = cfg->script_addrs && cfg->script_sizes ? cfg->script_n : 0;
    gs_backend *be = g_new0(gs_backend, 1);
    be->ops = &sim_ops;
    be->state = s;
    return be;
}

size_t gs_sim_script_used(const gs_backend *be)
{
    return be->ops == &sim_ops ? ((sim_state *)be->state)->script_used : 0;
}

uint64_t gs_sim_origin(const gs_backend *be)
{
    return be->ops == &sim_ops ? ((sim_state *)be->state)->x : 0;
}
