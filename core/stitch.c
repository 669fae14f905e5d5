/* stitch.c - stitched expandable segments: growth by moving free physical memory (GMLake's idea,
 * ASPLOS'24, on this core's expandable segments; policies/stitch.c says where it departs).
 *
 * A stitched pool grows as an expandable segment does (one virtual reservation per pool and
 * stream, mapped where free and unmapped blocks in a row hold the request), but what it maps
 * there is first the memory it already holds: whole physical handles lying inside free blocks
 * of the same stream, in any stitched pool, are unmapped where they are (their address range
 * becomes an unmapped hole, which a later growth may map again) and mapped at the growth's
 * place. Only what those handles cannot cover is created, as one handle (or several of at most
 * the pool's max_handle), so reserved memory grows only when no free whole handle is left.
 *
 * Handles are of any whole number of pages, not one page each: the driver's cost is per call
 * and per mapping (cuMemSetAccess charges each mapping in its range), so a growth of n pages
 * made as one handle costs about one cudaMalloc where n handles would cost n. The page table of
 * a stitched segment therefore records, per slot, its handle and, at a handle's first slot, how
 * many pages it spans (gs_segment.hpages); a handle moves and is released whole.
 *
 * Memory stays on its stream while it can: a free block's memory may still be in use by work
 * queued on the stream that freed it, so a growth takes handles from its own stream's free
 * blocks first. Only when what those give and what it may create stay short of the request
 * within the limit does it take free handles of other streams (a move's unmap waits for the
 * whole device on the real driver, backends/cuda.c, so the work that used them is done): the
 * out-of-memory ladder's alternative is to release the whole cache, after the same wait, and
 * create again. On programs that feed batches from a side stream this is what separated
 * stitch's retries under a cap from none (BENCHMARKS.md, "Free handles of other streams at the
 * limit").
 */
#include <math.h>

#include "core-int.h"

/* A handle that can move: its segment, first slot and pages, and the free block holding it. */
typedef struct {
    gs_segment *s;
    uint64_t slot, pages;
    gs_block *b;
    bool take;
    bool other; /* of another stream than the growth's */
} donor;

/* Room in s's tables for slot i (handles and hpages grow together). */
static void table_hold(gs_segment *s, uint64_t i)
{
    uint64_t old = s->nhandles;
    (void)seg_handle_at(s, i);
    if (s->nhandles != old) {
        s->hpages = g_renew(uint32_t, s->hpages, s->nhandles);
        memset(s->hpages + old, 0, (s->nhandles - old) * sizeof *s->hpages);
    }
}

/* The handles wholly inside free block b, appended to out (other: b is of another stream than
 * the growth's). */
static void handles_in(gs_block *b, bool other, GArray *out)
{
    gs_segment *s = b->seg;
    uint64_t pg = s->page;
    uint64_t i = (b->addr - s->addr + pg - 1) / pg, end = (b->addr + b->size - s->addr) / pg;
    while (i < end) {
        uint32_t n = i < s->nhandles ? s->hpages[i] : 0;
        if (!n) { /* the tail of a handle that starts before b */
            i++;
            continue;
        }
        if (i + n <= end) {
            donor d = {s, i, n, b, false, other};
            g_array_append_val(out, d);
        }
        i += n;
    }
}

/* The highest free block first: growths go to the top of a reservation, so the free blocks
 * near it are the recent ones (across a pool's reservations the address orders them as the
 * simulated device carves them, upward), and the older free blocks below keep their pages for the
 * requests that best fit reuses there (taking their pages first left their partial pages at
 * both ends as fragments that only a growth into the hole could join again). Within a block,
 * largest first; equal sizes by address, so a replay is deterministic. */
static int donor_cmp(const void *a, const void *b)
{
    const donor *x = a, *y = b;
    if (x->other != y->other) return x->other ? 1 : -1; /* the growth's own stream first */
    if (x->b->addr != y->b->addr) return x->b->addr > y->b->addr ? -1 : 1;
    if (x->pages != y->pages) return x->pages > y->pages ? -1 : 1;
    uint64_t ax = x->s->addr + x->slot, ay = y->s->addr + y->slot;
    return ax < ay ? -1 : ax > ay;
}

/* Every free whole handle of stream's (of every stream's with any) in the stitched pools of
 * pool's group: the ordinary pools, or one private pool's (core.h: a private pool's memory never
 * serves anyone else), in donor_cmp's order. */
static GArray *find_donors(gs_heap *h, unsigned pool, uint32_t stream, bool any)
{
    GArray *d = g_array_new(FALSE, FALSE, sizeof(donor));
    /* none while a capture is underway (a route open): a move's unmap waits for the device on
     * the real driver (backends/cuda.c), which a capture forbids */
    if (h->nroutes) return d;
    unsigned first = pool - gs_pool_kind(pool);
    for (unsigned p = first; p < first + h->npools; p++) {
        if (!h->pools[p].stitch) continue;
        const gs_findex *x = &h->pools[p].blocks;
        for (gs_block *b = gs_findex_first_from(x, any ? 0 : stream); b;
             b = any ? gs_pool_next(h, b) : findex_next_in(x, b)) {
            if (!any && b->stream != stream) break;
            if (b->seg->hpages) handles_in(b, b->stream != stream, d);
        }
    }
    g_array_sort(d, donor_cmp);
    return d;
}

/* Mark the donors to move for need pages, leaving out those inside blocks c and n (the blocks
 * around the place being mapped: unmapping inside them would change that place). Fills first
 * with handles that fit what is left, in donor_cmp's order; then the smallest handle that
 * covers the rest (the first in that order of those as small), if it overshoots by no more
 * than the rest itself (a far larger handle would be pinned by one small block at its new
 * place), else nothing more: the rest is created. wide: any overshoot, when creating the rest
 * would pass the limit (the ladder would release that handle anyway, with the whole cache, and
 * create the rest: a retry). Returns the pages marked. */
static uint64_t choose(GArray *d, uint64_t need, const gs_block *c, const gs_block *n, bool wide)
{
    uint64_t got = 0;
    for (guint i = 0; i < d->len; i++) {
        donor *x = &g_array_index(d, donor, i);
        x->take = x->b != c && x->b != n && got + x->pages <= need;
        if (x->take) got += x->pages;
    }
    if (got < need) {
        donor *best = NULL;
        for (guint i = 0; i < d->len; i++) {
            donor *x = &g_array_index(d, donor, i);
            if (!x->take && x->b != c && x->b != n && got + x->pages >= need &&
                (!best || x->pages < best->pages))
                best = x;
        }
        if (best && (wide || best->pages - (need - got) <= need - got)) {
            best->take = true;
            got += best->pages;
        }
    }
    return got;
}

/* Account bytes of segment s mapped (+) or unmapped (-) from addr. */
static void reserve_delta(gs_heap *h, gs_segment *s, uint64_t addr, int64_t bytes)
{
    if (h->cb.on_reserve) h->cb.on_reserve(h->cb.ud, s, addr, bytes);
    if (bytes > 0) {
        h->total_reserved += (uint64_t)bytes;
        stat2_inc(h->st.reserved_bytes, h->pools[s->pool].type, bytes);
        note_reserved_up(h);
    } else {
        h->total_reserved -= (uint64_t)-bytes;
        stat2_dec(h->st.reserved_bytes, h->pools[s->pool].type, -bytes);
    }
}

/* Turn [addr, addr+size) of free block b (page-aligned, inside it) into an unmapped block,
 * merged with unmapped neighbours; what is left of b on either side stays free, b's struct
 * keeping the lower part when there is one. */
static void carve_hole(gs_heap *h, gs_block *b, uint64_t addr, uint64_t size)
{
    uint64_t end = b->addr + b->size;
    pool_remove(h, b);
    if (addr + size < end)
        pool_insert(h, block_carve(h, b, addr + size, end - (addr + size), b, b->next));
    gs_block *hole = b;
    if (addr > b->addr) {
        hole = block_carve(h, b, addr, size, b, b->next);
        b->size = addr - b->addr;
        pool_insert(h, b);
    } else {
        b->size = size;
    }
    hole->state = GS_BLOCK_UNMAPPED;
    gs_block_try_merge(h, hole, hole->prev);
    gs_block_try_merge(h, hole, hole->next);
    unmapped_insert(h, hole);
}

/* Unmap donor x's handle from where it is: its range becomes a hole. Returns the handle (0 when
 * the unmap failed; the heap is then unchanged). */
static uint64_t lift(gs_heap *h, const donor *x, gs_status *st)
{
    gs_segment *s = x->s;
    uint64_t pg = s->page, bytes = x->pages * pg, handle = s->handles[x->slot];
    *st = gs_dev_unmap(h->be, &h->calls, s->addr + x->slot * pg, bytes);
    if (*st != GS_OK) return 0;
    for (uint64_t i = x->slot; i < x->slot + x->pages; i++) s->handles[i] = 0;
    s->hpages[x->slot] = 0;
    s->mapped_pages -= x->pages;
    carve_hole(h, x->b, s->addr + x->slot * pg, bytes);
    reserve_delta(h, s, s->addr + x->slot * pg, -(int64_t)bytes);
    return handle;
}

/* Map handle (pages long) at slot i of s, and give it access. */
static gs_status put(gs_heap *h, gs_segment *s, uint64_t i, uint64_t pages, uint64_t handle)
{
    uint64_t bytes = pages * s->page, va = s->addr + i * s->page;
    gs_status st = gs_dev_map(h->be, &h->calls, va, bytes, handle);
    if (st != GS_OK) return st;
    st = gs_dev_set_access(h->be, &h->calls, va, bytes, bytes);
    if (st != GS_OK) {
        (void)gs_dev_unmap(h->be, &h->calls, va, bytes);
        return st;
    }
    table_hold(s, i + pages - 1);
    for (uint64_t k = i; k < i + pages; k++) s->handles[k] = handle;
    s->hpages[i] = (uint32_t)pages;
    s->mapped_pages += pages;
    return GS_OK;
}

/* The place for a growth of size: the unmapped block u of pool/stream that needs the fewest
 * pages mapped (the lowest of those), with the free block c just before it, if any, where the
 * donors chosen for it and what must be created fit u. A request fits c and the start of u,
 * or c, the whole of u and the free block after it: mapping a hole between two free blocks
 * joins the three. Such free blocks are often the free ends of handles that live blocks pin,
 * which no move can use; mapped whole, the hole puts them to use, where a growth at the top
 * of the reservation would create a page for each page of the request. A new reservation
 * when none fits. Sets *need (pages) and marks the donors. */
static gs_status find_place(gs_heap *h, unsigned pool, uint32_t stream, uint64_t size, GArray *d,
                            bool wide, gs_block **u_out, gs_block **c_out, uint64_t *need,
                            uint64_t *got)
{
    const gs_tree *ut = &h->pools[pool].unmapped;
    uint64_t pg = h->pools[pool].page, best = UINT64_MAX;
    gs_block *bu = NULL, *bc = NULL;
    for (gs_block *u = index_lower_bound(ut, stream, 0, 0); u && u->stream == stream && best;
         u = index_next(ut, u)) {
        gs_block *c = u->prev && u->prev->state == GS_BLOCK_FREE ? u->prev : NULL;
        gs_block *after = u->next && u->next->state == GS_BLOCK_FREE ? u->next : NULL;
        uint64_t have = c ? c->size : 0, n = UINT64_MAX;
        if (have + u->size >= size) n = have >= size ? 0 : (size - have + pg - 1) / pg;
        if (after && have + u->size + after->size >= size) n = MIN(n, u->size / pg);
        if (n >= best) continue;
        uint64_t g = choose(d, n, c, u->next, wide);
        if (MAX(g, n) * pg > u->size) continue;
        bu = u, bc = c, best = n;
    }
    if (bu) {
        *u_out = bu;
        *c_out = bc;
        *need = best;
        *got = choose(d, best, bc, bu->next, wide); /* the last may have been another place's */
        return GS_OK;
    }
    gs_block *u;
    gs_status st = gs_expandable_new_segment(h, pool, stream, &u);
    if (st != GS_OK) return st;
    *u_out = u;
    *c_out = NULL;
    *need = (size + pg - 1) / pg;
    *got = choose(d, *need, NULL, NULL, wide);
    return GS_OK;
}

/* What the headroom and max_handle_frac are fractions of: the limit, the device's memory with
 * none. */
static double limit_or_device(gs_heap *h)
{
    limit_read_exactly(h);
    return (double)(h->limit ? h->limit : gs_heap_device_total(h));
}

/* Whether a growth planned at need pages, of which the donors give got, is still short: what
 * it must create would pass the limit (the device's memory with none), or the device already
 * refused creating below it (!may_wait). A check of the limit, not its value read: whatif's caps
 * that decide alike stay alike. */
static bool still_short(gs_heap *h, uint64_t need, uint64_t got, uint64_t pg, bool may_wait)
{
    if (need <= got) return false;
    if (!may_wait) return true;
    uint64_t after = h->total_reserved + (need - got) * pg;
    return h->limit ? over_limit(h, after) : after > gs_heap_device_total(h);
}

/* The place of a growth and the free handles to move there (find_place; *d holds them, for
 * the caller to free). None while memory is plentiful. Past the headroom's bound, a growth that
 * fits the limit still moves nothing: it creates what it needs, in one-page handles (fine);
 * free handles move only when creating would pass the limit (the device's memory with none).
 * A move leaves the partial pages at both ends of its free block beside a hole, where a live
 * neighbour pins them, and moves made before memory was needed had left more of those than
 * expandable segments' whole ranges do (a ResNet-50 fed from a side stream: BENCHMARKS.md,
 * "Moves only at the limit"). The eager setting (headroom:0) moves on every growth past the
 * slack's bound, as before, and so does a private pool past the headroom's. */
static gs_status plan_growth(gs_heap *h, unsigned pool, uint32_t stream, uint64_t size, bool plenty,
                             bool may_wait, bool *waited, GArray **d, gs_block **u, gs_block **c,
                             uint64_t *need, uint64_t *got)
{
    /* not in a private pool: the out-of-memory ladder gives back no free memory of a pool still
     * in use, so memory it creates before it must stays its own; moving what it holds keeps it
     * small (CUDA graphs' pools needed 2-3% more memory with creation first). may_wait: the
     * caller's first try; *waited: the moves waited, no donor looked at. */
    bool late = may_wait && !plenty && h->pools[pool].sc.headroom > 0 && pool < GS_MAX_POOLS;
    *waited = false;
    *d = plenty || late ? g_array_new(FALSE, FALSE, sizeof(donor))
                        : find_donors(h, pool, stream, false);
    gs_status st = find_place(h, pool, stream, size, *d, false, u, c, need, got);
    uint64_t pg = h->pools[pool].page;
    if (st == GS_OK && late && still_short(h, *need, *got, pg, true)) {
        g_array_free(*d, TRUE);
        *d = find_donors(h, pool, stream, false);
        st = find_place(h, pool, stream, size, *d, false, u, c, need, got);
    } else {
        *waited = late;
    }
    /* still short: the free handles of other streams too, the growth's own first; then handles
     * of any size. Not in a capture, where find_donors gives none and no release is owed. */
    if (st == GS_OK && !plenty && !*waited && !h->nroutes &&
        still_short(h, *need, *got, pg, may_wait)) {
        g_array_free(*d, TRUE);
        *d = find_donors(h, pool, stream, true);
        h->flush_owed = true; /* (a release the ladder may not need to make now) */
        st = find_place(h, pool, stream, size, *d, false, u, c, need, got);
        if (st == GS_OK && still_short(h, *need, *got, pg, may_wait))
            st = find_place(h, pool, stream, size, *d, true, u, c, need, got);
    }
    return st;
}

/* The pages a plentiful growth creates beyond the fresh ones it needs (gs_stitch_conf.ahead and
 * min_grow): within room bytes (the slack's or headroom's bound less after, the reserved bytes
 * after a growth of the request's size), the limit and space pages of its unmapped block. */
static uint64_t ahead_pages(const gs_heap *h, const gs_pool *p, double room, uint64_t after,
                            uint64_t fresh, uint64_t need, uint64_t space)
{
    uint64_t pg = p->page, at = h->total_reserved + fresh * pg;
    if (h->limit) room = MIN(room, (double)(h->limit - after)); /* plenty: after <= limit */
    uint64_t extra = room > 0 ? (uint64_t)(room / (double)pg) : 0;
    uint64_t floor = p->sc.min_grow / pg > fresh ? p->sc.min_grow / pg - fresh : 0;
    extra = MIN(extra, MAX((uint64_t)(p->sc.ahead * (double)need), floor));
    /* with a floor, ahead adds at most the floor: a large request doubled would be a large
     * handle that its one block pins, and memory reserved long before it is used */
    if (p->sc.min_grow) extra = MIN(extra, p->sc.min_grow / pg);
    extra = MIN(extra, space);
    /* ahead beyond the floor stays within the peak reserved so far: memory made ahead of need
     * that later requests did not use set the run's peak (up to 2% above expandable segments'
     * with no limit, on most real traces: BENCHMARKS.md, "Growth ahead within the peak"); only
     * what the growth needs, and the floor's PyTorch-sized growths, may raise it */
    uint64_t top = (uint64_t)h->st.reserved_bytes[GS_STAT_ALL].peak;
    return MIN(extra, MAX(floor, top > at ? (top - at) / pg : 0));
}

/* One try of gs_stitch_grow; may_wait and *waited as plan_growth's. */
static gs_status grow(gs_heap *h, unsigned pool, uint32_t stream, uint64_t size, bool may_wait,
                      bool *waited, gs_block **out)
{
    gs_pool *p = &h->pools[pool];
    uint64_t pg = p->page;
    /* Plentiful memory (gs_stitch_conf.slack): no donors, so the growth creates all it needs. */
    uint64_t after = h->total_reserved + (size + pg - 1) / pg * pg;
    /* "all"'s current is filled in only when the statistics are read (core-int.h): the sum of
     * the two types' is the live figure */
    uint64_t alloc = (uint64_t)stat_all(h->st.allocated_bytes) + size;
    uint64_t peak = MAX((uint64_t)h->st.allocated_bytes[GS_STAT_ALL].peak, alloc);
    double bound = (double)peak * (1.0 + p->sc.slack);
    if (p->sc.headroom > 0) bound = limit_or_device(h) * (1.0 - p->sc.headroom);
    bool plenty = (p->sc.slack > 0 || p->sc.headroom > 0) && (double)after <= bound &&
                  !over_limit(h, after);
    GArray *d;
    gs_block *u, *c;
    uint64_t need, got;
    gs_status st =
        plan_growth(h, pool, stream, size, plenty, may_wait, waited, &d, &u, &c, &need, &got);
    if (st != GS_OK) goto out;
    if (need == 0) { /* c holds it already: frees drained by the ladder's flush merged into it */
        pool_remove(h, c);
        *out = c;
        goto out;
    }
    uint64_t fresh = got < need ? need - got : 0; /* pages to create */
    if (plenty && fresh && (p->sc.ahead > 0 || p->sc.min_grow)) {
        /* the room left under the limit counts where it is less than the bound's: a check of
         * after + room against the limit (so an uncapped replay notes it as asked for), and
         * below it the limit read as a number */
        double room = bound - (double)after;
        if (room > 0 && over_limit(h, after + (uint64_t)ceil(room))) limit_read_exactly(h);
        fresh += ahead_pages(h, p, room, after, fresh, need, u->size / pg - MAX(got, need));
    }
    if (over_limit(h, h->total_reserved + fresh * pg)) {
        st = GS_ERR_OOM;
        goto out;
    }
    /* Create first: a growth that runs out of memory changes nothing. One handle, or pieces of
     * at most max_handle and max_handle_frac of the limit. */
    uint64_t piece = p->sc.max_handle ? MAX(p->sc.max_handle / pg, 1) : fresh;
    if (p->sc.max_handle_frac > 0) /* gs_stitch_conf.max_handle_frac */
        piece =
            MIN(piece, MAX((uint64_t)(limit_or_device(h) * p->sc.max_handle_frac / (double)pg), 1));
    /* near the limit, a small growth is made of one-page handles (gs_stitch_conf.fine) */
    if (!plenty && fresh * pg <= p->sc.fine) piece = 1;
    GArray *made = g_array_new(FALSE, FALSE, 2 * sizeof(uint64_t));
    for (uint64_t left = fresh; left > 0 && st == GS_OK;) {
        uint64_t n = MIN(left, piece), hd = 0;
        st = gs_dev_page_create(h->be, &h->calls, n * pg, &hd);
        if (st == GS_OK) {
            uint64_t e[2] = {hd, n};
            g_array_append_vals(made, e, 1);
            left -= n;
        }
    }
    if (st != GS_OK) {
        for (guint i = 0; i < made->len; i++) {
            uint64_t *e = &g_array_index(made, uint64_t, 2 * i);
            gs_status r = gs_expandable_release_page(h, e[0], e[1] * pg);
            if (st == GS_ERR_OOM && r != GS_OK) st = r;
        }
        g_array_free(made, TRUE);
        goto out;
    }
    /* Move the donors, then map what was made after them, slot by slot from u's start. u keeps
     * its struct: no donor lies beside it (choose left c and u->next out). */
    gs_segment *s = u->seg;
    uint64_t slot = (u->addr - s->addr) / pg, at = slot;
    for (guint i = 0; i < d->len && st == GS_OK; i++) {
        donor *x = &g_array_index(d, donor, i);
        if (!x->take) continue;
        h->moving = true; /* (its unmap is no release: gs_heap_moving) */
        uint64_t hd = lift(h, x, &st);
        h->moving = false;
        if (st != GS_OK) break;
        st = put(h, s, at, x->pages, hd);
        if (st != GS_OK) { /* the handle is in no table now: give it back */
            (void)gs_expandable_release_page(h, hd, x->pages * pg);
            break;
        }
        at += x->pages;
        /* a later donor of the same block: the block's struct kept the lower part only if the
         * handles are lifted from the top down; otherwise look the block up again */
        for (guint k = i + 1; k < d->len; k++) {
            donor *y = &g_array_index(d, donor, k);
            if (y->take && y->b == x->b) {
                gs_block *b = x->b;
                uint64_t ya = y->s->addr + y->slot * pg;
                while (b && !(ya >= b->addr && ya < b->addr + b->size)) b = b->next;
                y->b = b;
            }
        }
    }
    for (guint i = 0; i < made->len; i++) {
        uint64_t *e = &g_array_index(made, uint64_t, 2 * i);
        if (st == GS_OK) st = put(h, s, at, e[1], e[0]);
        if (st != GS_OK) (void)gs_expandable_release_page(h, e[0], e[1] * pg);
        else at += e[1];
    }
    g_array_free(made, TRUE);
    if (at > slot) {
        gs_block *b = gs_expandable_settle(h, u, (at - slot) * pg);
        reserve_delta(h, s, s->addr + slot * pg, (int64_t)((at - slot) * pg));
        h->st.num_device_alloc++;
        if (st == GS_OK) {
            g_assert(b->size >= size);
            pool_remove(h, b);
            *out = b;
        }
    }
out:
    g_array_free(d, TRUE);
    return st;
}

/* A growth whose moves waited for the limit (plan_growth) may still be refused by the device
 * below it, where other allocators hold the rest of its memory (two libraries, a full device):
 * it tries again, moving free handles, before the out-of-memory ladder releases the whole cache
 * (or, during a capture, where the ladder does not, before it fails). */
gs_status gs_stitch_grow(gs_heap *h, unsigned pool, uint32_t stream, uint64_t size, gs_block **out)
{
    bool waited;
    gs_status st = grow(h, pool, stream, size, true, &waited, out);
    if (st == GS_ERR_OOM && waited) st = grow(h, pool, stream, size, false, &waited, out);
    return st;
}

/* Release the cache of free block b of a stitched segment: unmap and release every handle wholly
 * inside it (a handle that reaches beyond it is pinned by a neighbour and stays). */
gs_status gs_stitch_unmap(gs_heap *h, gs_block *b)
{
    GArray *d = g_array_new(FALSE, FALSE, sizeof(donor));
    handles_in(b, false, d);
    gs_status st = GS_OK;
    /* from the top down, so b's struct keeps the part below each hole (carve_hole) */
    for (guint i = d->len; i-- > 0 && st == GS_OK;) {
        donor *x = &g_array_index(d, donor, i);
        uint64_t hd = lift(h, x, &st);
        if (st != GS_OK) break;
        h->st.num_device_free++;
        st = gs_expandable_release_page(h, hd, x->pages * x->s->page);
    }
    g_array_free(d, TRUE);
    return st;
}
