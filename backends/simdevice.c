/* sim.c - the simulated device: a capacity, physical memory in 2 MiB pages, virtual addresses
 * without real memory, and a virtual clock advanced by a calibrated cost model.
 *
 * Physical memory. The driver hands out physical memory in 2 MiB pages and can place them
 * anywhere, so virtual contiguity is free: a cudaMalloc fails only when the free pages cannot
 * cover its size rounded up to whole pages. Fragmentation at the driver level is therefore nil;
 * the fragmentation users meet lives in the caching allocator above, which is what gpusim
 * studies.
 *
 * Virtual addresses still matter, because PyTorch's best fit breaks ties between equal-size
 * free blocks by address (docs/fidelity.md §1.3). Two ways to choose them:
 *  - a script (reference-address mode): the n-th cudaMalloc takes the address the real driver
 *    gave the n-th segment of a reference run, as long as the sizes keep matching;
 *  - a placement model of what the H100's driver was seen to do in the reference traces:
 *    addresses 2 MiB aligned, new ranges carved downward from the top of the address space, each
 *    in a chunk rounded up to 32 MiB; the slack left in a chunk, and freed ranges, are reused
 *    for later allocations that fit, the lowest address first; once nothing is allocated, it
 *    starts again from the top, as a fresh device does.
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
 *
 * Several devices: device d's address space is this layout moved up by d * 2^47 (the layout of
 * device 0 lies below 2^47), so no two simulated devices ever hand out the same address, as no
 * two real ones do; each device's cudaMalloc ranges and reservations stay apart, an allocation
 * that would make them meet being an OOM.
 */
#include <string.h>

#include "backend.h"

#include <glib.h>

#define PAGE (2 * GS_MiB)
#define CHUNK (32 * GS_MiB)
#define VA_TOP UINT64_C(0x7f0000000000) /* where the model starts carving (a typical CUDA VA) */
#define VMM_BASE UINT64_C(0x200000000000)
#define DEVICE_SPAN (UINT64_C(1) << 47)   /* each device's window; VA_TOP lies below it */
_Static_assert(VA_TOP < DEVICE_SPAN && VMM_BASE < VA_TOP, "the layout fits in one window");
_Static_assert((UINT64_MAX >> 47) >= GS_SIM_MAX_DEVICES - 1, "every window is addressable");

typedef struct {
    uint64_t va, size;
    uint64_t mapped_pages;
} reservation;

typedef struct {
    uint64_t size;
    uint32_t maps;   /* live mappings of this handle */
    bool released;   /* cuMemRelease'd while mapped: its pages go with the last unmap */
} phys_handle;

typedef struct {
    uint64_t va, size, handle;
} mapping;

typedef struct {
    uint64_t addr, size;
} range;

typedef struct {
    uint64_t total_pages;
    uint64_t used_pages;
    const gs_calibration *cal;
    double clock_us;
    /* live allocations: addr -> size (rounded to pages) */
    GHashTable *live;
    /* free address ranges below the frontier, sorted by address */
    GArray *holes;
    uint64_t frontier; /* everything below is untouched address space */
    uint64_t va_top, vmm_base; /* VA_TOP and VMM_BASE in this device's window */
    const uint64_t *script_addrs, *script_sizes;
    size_t script_n, script_pos;
    bool script_off;
    size_t script_used;
    /* virtual memory */
    GHashTable *reservations; /* va -> reservation */
    GHashTable *handles;      /* handle -> phys_handle */
    GHashTable *pages;        /* va of each mapped granule -> its mapping (owned by maps) */
    GHashTable *maps;         /* mapping va -> mapping */
    uint64_t next_handle;
    uint64_t vmm_frontier;
} sim_state;

static uint64_t round_up(uint64_t x, uint64_t to) { return (x + to - 1) / to * to; }

/* Take [addr, addr+size) out of the hole list (it must lie inside one hole). */
static void holes_take(sim_state *s, uint64_t addr, uint64_t size)
{
    for (guint i = 0; i < s->holes->len; i++) {
        range *h = &g_array_index(s->holes, range, i);
        if (addr < h->addr || addr + size > h->addr + h->size) continue;
        range below = {h->addr, addr - h->addr};
        range above = {addr + size, h->addr + h->size - (addr + size)};
        g_array_remove_index(s->holes, i);
        if (above.size) g_array_insert_val(s->holes, i, above);
        if (below.size) g_array_insert_val(s->holes, i, below);
        return;
    }
}

/* Return a range to the hole list, merging with neighbours. */
static void holes_give(sim_state *s, uint64_t addr, uint64_t size)
{
    guint i = 0;
    while (i < s->holes->len && g_array_index(s->holes, range, i).addr < addr) i++;
    range r = {addr, size};
    g_array_insert_val(s->holes, i, r);
    if (i + 1 < s->holes->len) {
        range *a = &g_array_index(s->holes, range, i), *b = a + 1;
        if (a->addr + a->size == b->addr) {
            a->size += b->size;
            g_array_remove_index(s->holes, i + 1);
        }
    }
    if (i > 0) {
        range *a = &g_array_index(s->holes, range, i - 1), *b = a + 1;
        if (a->addr + a->size == b->addr) {
            a->size += b->size;
            g_array_remove_index(s->holes, i);
        }
    }
}

/* Would [addr, addr+size) collide with a live allocation? (A script may name an address the
 * model has handed out; then the script is abandoned.) */
static bool overlaps_live(sim_state *s, uint64_t addr, uint64_t size)
{
    GHashTableIter it;
    gpointer k, v;
    g_hash_table_iter_init(&it, s->live);
    while (g_hash_table_iter_next(&it, &k, &v)) {
        uint64_t a = *(uint64_t *)k, n = *(uint64_t *)v;
        if (addr < a + n && a < addr + size) return true;
    }
    return false;
}

/* The placement model's address for size bytes (pages), or 0 when the window is full. */
static uint64_t place_model(sim_state *s, uint64_t size)
{
    for (guint i = 0; i < s->holes->len; i++) {
        range *h = &g_array_index(s->holes, range, i);
        if (h->size >= size) {
            uint64_t addr = h->addr;
            holes_take(s, addr, size);
            return addr;
        }
    }
    uint64_t chunk = round_up(size, CHUNK);
    if (s->frontier < s->vmm_frontier || s->frontier - s->vmm_frontier < chunk)
        return 0; /* the window is full: an OOM */
    s->frontier -= chunk;
    if (chunk > size) holes_give(s, s->frontier + size, chunk - size);
    return s->frontier;
}

static gs_status sim_malloc(void *st, uint64_t size, uint64_t *addr)
{
    sim_state *s = st;
    uint64_t rsize = round_up(size, PAGE);
    uint64_t pages = rsize / PAGE;
    s->clock_us += gs_calibration_us(s->cal, GS_CALL_MALLOC, size);
    if (pages > s->total_pages - s->used_pages) return GS_ERR_OOM;

    uint64_t a = 0;
    bool placed = false;
    if (!s->script_off && s->script_pos < s->script_n) {
        if (s->script_sizes[s->script_pos] == size &&
            !overlaps_live(s, s->script_addrs[s->script_pos], rsize)) {
            a = s->script_addrs[s->script_pos++];
            placed = true;
            s->script_used++;
            /* The model must never hand out a scripted range later: keep its frontier below
             * every scripted address that falls inside its part of the address space. */
            if (a >= s->frontier && a < s->va_top) holes_take(s, a, rsize);
            else if (a < s->frontier) s->frontier = a / CHUNK * CHUNK;
        } else {
            s->script_off = true; /* the run diverged from the reference: model from here on */
        }
    }
    if (!placed && !(a = place_model(s, rsize))) return GS_ERR_OOM;

    uint64_t *k = g_new(uint64_t, 2);
    k[0] = a;
    k[1] = rsize;
    g_hash_table_insert(s->live, &k[0], &k[1]);
    s->used_pages += pages;
    *addr = a;
    return GS_OK;
}

static gs_status sim_free(void *st, uint64_t addr)
{
    sim_state *s = st;
    uint64_t *v = g_hash_table_lookup(s->live, &addr);
    if (!v) return GS_ERR_INVALID;
    uint64_t size = *v;
    s->clock_us += gs_calibration_us(s->cal, GS_CALL_FREE, size);
    g_hash_table_remove(s->live, &addr);
    s->used_pages -= size / PAGE;
    if (addr >= s->frontier && addr < s->va_top) holes_give(s, addr, size);
    /* Nothing left: the driver hands out addresses as to a fresh process again (on the H100,
     * a second replay in one process got the first one's segments at addresses in the same
     * order: gpusim validate's timed runs all matched the simulator's fresh-device run). */
    if (g_hash_table_size(s->live) == 0 && !s->script_n) {
        g_array_set_size(s->holes, 0);
        s->frontier = s->va_top;
    }
    return GS_OK;
}

static gs_status sim_mem_info(void *st, uint64_t *free_b, uint64_t *total)
{
    sim_state *s = st;
    s->clock_us += gs_calibration_us(s->cal, GS_CALL_MEM_INFO, 0);
    *free_b = (s->total_pages - s->used_pages) * PAGE;
    *total = s->total_pages * PAGE;
    return GS_OK;
}

/* ---- virtual memory ---- */

static reservation *reservation_of(sim_state *s, uint64_t va, uint64_t size)
{
    GHashTableIter it;
    gpointer k, v;
    g_hash_table_iter_init(&it, s->reservations);
    while (g_hash_table_iter_next(&it, &k, &v)) {
        reservation *r = v;
        if (va >= r->va && size <= r->size && va - r->va <= r->size - size) return r;
    }
    return NULL;
}

static gs_status sim_va_reserve(void *st, uint64_t size, uint64_t *va)
{
    sim_state *s = st;
    s->clock_us += gs_calibration_us(s->cal, GS_CALL_VA_RESERVE, size);
    if (size == 0 || size % PAGE) return GS_ERR_INVALID;
    if (s->frontier < s->vmm_frontier || s->frontier - s->vmm_frontier < size)
        return GS_ERR_OOM; /* the window is full */
    reservation *r = g_new0(reservation, 1);
    r->va = s->vmm_frontier;
    r->size = size;
    s->vmm_frontier += size;
    g_hash_table_insert(s->reservations, &r->va, r);
    *va = r->va;
    return GS_OK;
}

static gs_status sim_va_release(void *st, uint64_t va, uint64_t size)
{
    sim_state *s = st;
    s->clock_us += gs_calibration_us(s->cal, GS_CALL_VA_RELEASE, size);
    reservation *r = g_hash_table_lookup(s->reservations, &va);
    if (!r || r->size != size || r->mapped_pages) return GS_ERR_INVALID;
    g_hash_table_remove(s->reservations, &va);
    return GS_OK;
}

static gs_status sim_page_create(void *st, uint64_t size, uint64_t *handle)
{
    sim_state *s = st;
    s->clock_us += gs_calibration_us(s->cal, GS_CALL_PAGE_CREATE, size);
    if (size == 0 || size % PAGE) return GS_ERR_INVALID;
    if (size / PAGE > s->total_pages - s->used_pages) return GS_ERR_OOM;
    s->used_pages += size / PAGE;
    phys_handle *p = g_new0(phys_handle, 1);
    p->size = size;
    uint64_t *k = g_new(uint64_t, 1);
    *k = ++s->next_handle;
    g_hash_table_insert(s->handles, k, p);
    *handle = *k;
    return GS_OK;
}

static void handle_drop(sim_state *s, uint64_t handle, phys_handle *p)
{
    s->used_pages -= p->size / PAGE;
    g_hash_table_remove(s->handles, &handle);
}

static gs_status sim_page_release(void *st, uint64_t handle)
{
    sim_state *s = st;
    phys_handle *p = g_hash_table_lookup(s->handles, &handle);
    s->clock_us += gs_calibration_us(s->cal, GS_CALL_PAGE_RELEASE, p ? p->size : PAGE);
    if (!p || p->released) return GS_ERR_INVALID;
    if (p->maps) p->released = true;
    else handle_drop(s, handle, p);
    return GS_OK;
}

static gs_status sim_map(void *st, uint64_t va, uint64_t size, uint64_t handle)
{
    sim_state *s = st;
    s->clock_us += gs_calibration_us(s->cal, GS_CALL_MAP, size);
    phys_handle *p = g_hash_table_lookup(s->handles, &handle);
    reservation *r = reservation_of(s, va, size);
    if (!p || p->released || p->size != size || va % PAGE || !r) return GS_ERR_INVALID;
    for (uint64_t a = va; a < va + size; a += PAGE)
        if (g_hash_table_contains(s->pages, &a)) return GS_ERR_INVALID; /* already mapped */
    mapping *m = g_new(mapping, 1);
    *m = (mapping){va, size, handle};
    g_hash_table_insert(s->maps, &m->va, m);
    for (uint64_t a = va; a < va + size; a += PAGE) {
        uint64_t *k = g_new(uint64_t, 1);
        *k = a;
        g_hash_table_insert(s->pages, k, m);
    }
    p->maps++;
    r->mapped_pages += size / PAGE;
    return GS_OK;
}

/* Is every granule of [va, va+size) mapped? */
static bool range_mapped(sim_state *s, uint64_t va, uint64_t size)
{
    if (size == 0 || va % PAGE || size % PAGE) return false;
    for (uint64_t a = va; a < va + size; a += PAGE)
        if (!g_hash_table_contains(s->pages, &a)) return false;
    return true;
}

/* cuMemSetAccess costs per mapping in its range, not per byte: on the H100 a range of n 20 MiB
 * handles took n times what one took (27 us each; 2.2 ms for 78 of them), while one handle of
 * 1 GiB took 88 us (bench/results/h100-2026-11-22-validate/). So each mapping is charged what the
 * table says for one mapping of its size. */
static gs_status sim_set_access(void *st, uint64_t va, uint64_t size)
{
    sim_state *s = st;
    if (!range_mapped(s, va, size)) {
        s->clock_us += gs_calibration_us(s->cal, GS_CALL_SET_ACCESS, PAGE);
        return GS_ERR_INVALID;
    }
    for (uint64_t a = va; a < va + size;) {
        const mapping *m = g_hash_table_lookup(s->pages, &a);
        s->clock_us += gs_calibration_us(s->cal, GS_CALL_SET_ACCESS, m->size);
        a = m->va + m->size;
    }
    return GS_OK;
}

static gs_status sim_unmap(void *st, uint64_t va, uint64_t size)
{
    sim_state *s = st;
    s->clock_us += gs_calibration_us(s->cal, GS_CALL_UNMAP, size);
    if (!range_mapped(s, va, size)) return GS_ERR_INVALID;
    /* The range must consist of whole mappings: check before changing anything. */
    for (uint64_t a = va; a < va + size;) {
        mapping *m = g_hash_table_lookup(s->pages, &a);
        if (m->va != a || m->size > va + size - a) return GS_ERR_INVALID;
        a += m->size;
    }
    for (uint64_t a = va; a < va + size;) {
        mapping *m = g_hash_table_lookup(s->maps, &a);
        uint64_t n = m->size, h = m->handle;
        for (uint64_t q = a; q < a + n; q += PAGE) g_hash_table_remove(s->pages, &q);
        reservation_of(s, a, n)->mapped_pages -= n / PAGE;
        phys_handle *p = g_hash_table_lookup(s->handles, &h);
        if (--p->maps == 0 && p->released) handle_drop(s, h, p);
        g_hash_table_remove(s->maps, &a); /* frees m */
        a += n;
    }
    return GS_OK;
}

static uint64_t sim_granularity(void *st) { return PAGE; }
static double sim_now(void *st) { return ((sim_state *)st)->clock_us; }

static void sim_destroy(void *st)
{
    sim_state *s = st;
    g_hash_table_destroy(s->live);
    g_array_free(s->holes, TRUE);
    g_hash_table_destroy(s->pages);
    g_hash_table_destroy(s->maps);
    g_hash_table_destroy(s->handles);
    g_hash_table_destroy(s->reservations);
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
    .granularity = sim_granularity,
    .mem_info = sim_mem_info,
    .now_us = sim_now,
    .destroy = sim_destroy,
};

gs_backend *gs_sim_backend_new(const gs_sim_config *cfg)
{
    g_return_val_if_fail(cfg->device < GS_SIM_MAX_DEVICES, NULL);
    sim_state *s = g_new0(sim_state, 1);
    uint64_t usable = cfg->total_bytes > cfg->reserved_bytes ? cfg->total_bytes - cfg->reserved_bytes : 0;
    s->total_pages = usable / PAGE;
    s->cal = cfg->cal;
    /* the key and value live in one g_new'd pair; the key pointer owns it */
    s->live = g_hash_table_new_full(g_int64_hash, g_int64_equal, g_free, NULL);
    s->holes = g_array_new(FALSE, FALSE, sizeof(range));
    s->va_top = (uint64_t)cfg->device * DEVICE_SPAN + VA_TOP;
    s->vmm_base = (uint64_t)cfg->device * DEVICE_SPAN + VMM_BASE;
    s->frontier = s->va_top;
    s->reservations = g_hash_table_new_full(g_int64_hash, g_int64_equal, NULL, g_free);
    s->handles = g_hash_table_new_full(g_int64_hash, g_int64_equal, g_free, g_free);
    s->maps = g_hash_table_new_full(g_int64_hash, g_int64_equal, NULL, g_free);
    s->pages = g_hash_table_new_full(g_int64_hash, g_int64_equal, g_free, NULL);
    s->vmm_frontier = s->vmm_base;
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
