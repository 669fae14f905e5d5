/* check.c - gs_heap_check: every invariant of the heap, verified from scratch (TLSF's
 * tlsf_check). Blocks must tile their segments, free neighbours must have merged, each index must
 * hold exactly its pool's free (or unmapped) blocks in order with the heap property, and every
 * "current" statistic must equal a recount. Tests call it after every operation; it costs a walk
 * of the whole heap, so the replay never does.
 */
#include "core-int.h"

typedef struct {
    int n;
    char *first;
} check_ctx;

G_GNUC_PRINTF(2, 3) static void fail(check_ctx *c, const char *fmt, ...)
{
    if (c->n++ == 0) {
        va_list ap;
        va_start(ap, fmt);
        c->first = g_strdup_vprintf(fmt, ap);
        va_end(ap);
    }
}

#define INSIST(c, cond, ...) \
    do {                     \
        if (!(cond)) fail(c, __VA_ARGS__); \
    } while (0)

/* Walk a treap in order, checking order, heap property, and that it holds only blocks in state
 * (free, or unmapped) with the key that state implies; returns the node count. */
static size_t check_tree(check_ctx *c, const gs_heap *h, unsigned pool, const gs_block *n,
                         const gs_block **last, uint8_t state)
{
    if (!n) return 0;
    size_t k = check_tree(c, h, pool, n->left, last, state);
    INSIST(c, n->state == state, "index of pool %u holds a block in state %d, not %d (%#" G_GINT64_MODIFIER "x)", pool, n->state, state, n->addr);
    INSIST(c, n->skey == skey_of(n->stream, state == GS_BLOCK_FREE ? n->size : 0),
           "block %#" G_GINT64_MODIFIER "x: stale index key", n->addr);
    INSIST(c, n->pool == pool, "block %#" G_GINT64_MODIFIER "x is in the index of pool %u but belongs to pool %u", n->addr, pool, n->pool);
    if (*last) INSIST(c, key_of(*last) < key_of(n), "index of pool %u out of order", pool);
    if (n->left) INSIST(c, n->left->prio <= n->prio, "treap heap property broken");
    if (n->right) INSIST(c, n->right->prio <= n->prio, "treap heap property broken");
    *last = n;
    return k + 1 + check_tree(c, h, pool, n->right, last, state);
}

int gs_heap_check(const gs_heap *h, char **why)
{
    check_ctx c = {0, NULL};
    gs_stats re;
    memset(&re, 0, sizeof re);
    size_t free_blocks[GS_MAX_POOLS] = {0}, unmapped_blocks[GS_MAX_POOLS] = {0};
    size_t nseg = 0;
    uint64_t reserved = 0;

    for (const gs_segment *s = h->segments; s; s = s->next) {
        nseg++;
        bool small = h->pools[s->pool].is_small;
        int t = small ? GS_STAT_SMALL : GS_STAT_LARGE;
        if (!s->expandable) {
            /* expandable segments count by their mapped bytes, below, and not as segments */
            reserved += s->size;
            re.segment[GS_STAT_ALL].current++;
            re.segment[t].current++;
            re.reserved_bytes[GS_STAT_ALL].current += (int64_t)s->size;
            re.reserved_bytes[t].current += (int64_t)s->size;
            if (s->size >= h->oversize) re.oversize_segments.current++;
        } else {
            INSIST(&c, s->page == h->pools[s->pool].page && s->page && s->size % s->page == 0,
                   "expandable segment %#" G_GINT64_MODIFIER "x: page size", s->addr);
        }
        INSIST(&c, s->head && s->head->prev == NULL, "segment %#" G_GINT64_MODIFIER "x: head block has a prev", s->addr);
        uint64_t at = s->addr, mapped = 0;
        bool split = !s->expandable && s->head && s->head->next != NULL;
        for (const gs_block *b = s->head; b; b = b->next) {
            INSIST(&c, b->seg == s, "block %#" G_GINT64_MODIFIER "x points to the wrong segment", b->addr);
            INSIST(&c, b->addr == at, "segment %#" G_GINT64_MODIFIER "x: gap or overlap at %#" G_GINT64_MODIFIER "x (block starts at %#" G_GINT64_MODIFIER "x)", s->addr, at, b->addr);
            INSIST(&c, b->size > 0, "block %#" G_GINT64_MODIFIER "x has size 0", b->addr);
            INSIST(&c, b->pool == s->pool && b->stream == s->stream, "block %#" G_GINT64_MODIFIER "x: pool/stream differ from its segment", b->addr);
            if (b->next) INSIST(&c, b->next->prev == b, "block %#" G_GINT64_MODIFIER "x: next->prev is not the block", b->addr);
            if (s->expandable) {
                /* Pages are mapped exactly under the blocks that are not unmapped. */
                bool um = b->state == GS_BLOCK_UNMAPPED;
                if (um) INSIST(&c, (b->addr - s->addr) % s->page == 0 && b->size % s->page == 0,
                               "unmapped block %#" G_GINT64_MODIFIER "x is not page-aligned", b->addr);
                else mapped += b->size;
                for (uint64_t a = (b->addr - s->addr) / s->page * s->page; a < b->addr + b->size - s->addr; a += s->page)
                    if (um) INSIST(&c, s->handles[a / s->page] == 0, "segment %#" G_GINT64_MODIFIER "x: page %" G_GUINT64_FORMAT " under an unmapped block has a handle", s->addr, a / s->page);
                    else INSIST(&c, s->handles[a / s->page] != 0, "segment %#" G_GINT64_MODIFIER "x: page %" G_GUINT64_FORMAT " under a mapped block has no handle", s->addr, a / s->page);
            } else {
                INSIST(&c, b->state != GS_BLOCK_UNMAPPED, "block %#" G_GINT64_MODIFIER "x: unmapped in a cudaMalloc segment", b->addr);
            }
            if (b->state == GS_BLOCK_UNMAPPED) {
                unmapped_blocks[b->pool]++;
                INSIST(&c, !(b->next && b->next->state == GS_BLOCK_UNMAPPED), "unmapped blocks should have coalesced at %#" G_GINT64_MODIFIER "x", b->next ? b->next->addr : 0);
            } else if (b->state == GS_BLOCK_FREE) {
                free_blocks[b->pool]++;
                INSIST(&c, !(b->next && b->next->state == GS_BLOCK_FREE), "blocks should have coalesced at %#" G_GINT64_MODIFIER "x", b->next ? b->next->addr : 0);
                if (split) {
                    re.inactive_split[GS_STAT_ALL].current++;
                    re.inactive_split[t].current++;
                    re.inactive_split_bytes[GS_STAT_ALL].current += (int64_t)b->size;
                    re.inactive_split_bytes[t].current += (int64_t)b->size;
                }
            } else {
                /* Allocated and pending blocks are both "active" in PyTorch's terms. */
                re.active[GS_STAT_ALL].current++;
                re.active[t].current++;
                re.active_bytes[GS_STAT_ALL].current += (int64_t)b->size;
                re.active_bytes[t].current += (int64_t)b->size;
                re.requested_bytes[GS_STAT_ALL].current += (int64_t)b->requested;
                re.requested_bytes[t].current += (int64_t)b->requested;
                if (b->state == GS_BLOCK_ALLOCATED) {
                    re.allocation[GS_STAT_ALL].current++;
                    re.allocation[t].current++;
                    re.allocated_bytes[GS_STAT_ALL].current += (int64_t)b->size;
                    re.allocated_bytes[t].current += (int64_t)b->size;
                    if (b->size >= h->oversize) re.oversize_allocations.current++;
                }
            }
            at += b->size;
        }
        INSIST(&c, at == s->addr + s->size, "segment %#" G_GINT64_MODIFIER "x: blocks cover %" G_GUINT64_FORMAT " of %" G_GUINT64_FORMAT " bytes", s->addr, at - s->addr, s->size);
        if (s->expandable) {
            INSIST(&c, mapped == s->mapped_pages * s->page, "expandable segment %#" G_GINT64_MODIFIER "x: blocks map %" G_GUINT64_FORMAT " bytes, pages say %" G_GUINT64_FORMAT, s->addr, mapped, s->mapped_pages * s->page);
            reserved += mapped;
            re.reserved_bytes[GS_STAT_ALL].current += (int64_t)mapped;
            re.reserved_bytes[t].current += (int64_t)mapped;
        }
    }
    INSIST(&c, nseg == h->nsegments, "segment list holds %zu segments, count says %zu", nseg, h->nsegments);
    INSIST(&c, reserved == h->total_reserved, "segments hold %" G_GUINT64_FORMAT " bytes, reserved says %" G_GUINT64_FORMAT, reserved, h->total_reserved);

    for (unsigned i = 0; i < h->npools; i++) {
        const gs_block *last = NULL;
        size_t n = check_tree(&c, h, i, h->pools[i].blocks.root, &last, GS_BLOCK_FREE);
        INSIST(&c, n == h->pools[i].blocks.count, "index of pool %u holds %zu blocks, count says %zu", i, n, h->pools[i].blocks.count);
        INSIST(&c, n == free_blocks[i], "index of pool %u holds %zu blocks, segments have %zu free", i, n, free_blocks[i]);
        last = NULL;
        n = check_tree(&c, h, i, h->pools[i].unmapped.root, &last, GS_BLOCK_UNMAPPED);
        INSIST(&c, n == h->pools[i].unmapped.count, "unmapped index of pool %u holds %zu blocks, count says %zu", i, n, h->pools[i].unmapped.count);
        INSIST(&c, n == unmapped_blocks[i], "unmapped index of pool %u holds %zu blocks, segments have %zu", i, n, unmapped_blocks[i]);
    }
    for (const gs_block *b = h->pending; b; b = b->right)
        INSIST(&c, b->state == GS_BLOCK_PENDING, "pending list holds a block that is not pending");

#define CHECK_ARRAY(name)                                                                    \
    for (int t = 0; t < GS_STAT_TYPES; t++)                                                  \
        INSIST(&c, re.name[t].current == h->st.name[t].current,                              \
               "stat " #name "[%d].current is %" G_GINT64_FORMAT ", recount gives %" G_GINT64_FORMAT, t, \
               h->st.name[t].current, re.name[t].current);
    GS_STAT_ARRAYS(CHECK_ARRAY)
#undef CHECK_ARRAY
    INSIST(&c, re.oversize_allocations.current == h->st.oversize_allocations.current, "stat oversize_allocations differs from recount");
    INSIST(&c, re.oversize_segments.current == h->st.oversize_segments.current, "stat oversize_segments differs from recount");

    if (why) *why = c.first;
    else g_free(c.first);
    return c.n;
}
