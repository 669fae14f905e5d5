/* faulty.c - a backend that wraps another and fails chosen calls, for tests.
 *
 * It fails the nth call (counting only the call kinds in the mask), or each such call with a
 * probability, returning a chosen status (GS_ERR_OOM to exercise the policies' out-of-memory
 * ladder, GS_ERR_DEVICE for a hard failure). A failed call never reaches the inner backend, so
 * the device's state is unchanged, exactly as when a real cudaMalloc/cudaFree fails.
 */
#include "backend.h"

#include <glib.h>

typedef struct {
    gs_backend *inner;
    gs_faulty_config cfg;
    uint64_t calls;    /* calls of the masked kinds so far */
    uint64_t injected;
    GRand *rng;
} faulty_state;

static bool should_fail(faulty_state *f, gs_call_kind k)
{
    if (f->cfg.mask && !(f->cfg.mask & (1u << k))) return false;
    f->calls++;
    bool fail = (f->cfg.fail_nth && f->calls == f->cfg.fail_nth) ||
                (f->cfg.probability > 0 && g_rand_double(f->rng) < f->cfg.probability);
    if (fail) f->injected++;
    return fail;
}

#define INNER(f) ((f)->inner->ops)
#define ISTATE(f) ((f)->inner->state)

static gs_status faulty_malloc(void *st, uint64_t size, uint64_t *addr)
{
    faulty_state *f = st;
    if (should_fail(f, GS_CALL_MALLOC)) return f->cfg.status;
    return INNER(f)->malloc(ISTATE(f), size, addr);
}

static gs_status faulty_free(void *st, uint64_t addr)
{
    faulty_state *f = st;
    if (should_fail(f, GS_CALL_FREE)) return f->cfg.status;
    return INNER(f)->free(ISTATE(f), addr);
}

/* The VMM calls: fail if chosen, else pass through (or report the inner backend's lack). */
#define FORWARD(kind, op, ...)                                        \
    do {                                                              \
        faulty_state *f = st;                                         \
        if (!INNER(f)->op) return GS_ERR_UNSUPPORTED;                 \
        if (should_fail(f, GS_CALL_##kind)) return f->cfg.status;     \
        return INNER(f)->op(ISTATE(f), __VA_ARGS__);                  \
    } while (0)

static gs_status faulty_va_reserve(void *st, uint64_t size, uint64_t *va)
{
    FORWARD(VA_RESERVE, va_reserve, size, va);
}
static gs_status faulty_va_release(void *st, uint64_t va, uint64_t size)
{
    FORWARD(VA_RELEASE, va_release, va, size);
}
static gs_status faulty_page_create(void *st, uint64_t size, uint64_t *handle)
{
    FORWARD(PAGE_CREATE, page_create, size, handle);
}
static gs_status faulty_page_release(void *st, uint64_t handle)
{
    FORWARD(PAGE_RELEASE, page_release, handle);
}
static gs_status faulty_map(void *st, uint64_t va, uint64_t size, uint64_t handle)
{
    FORWARD(MAP, map, va, size, handle);
}
static gs_status faulty_set_access(void *st, uint64_t va, uint64_t size)
{
    FORWARD(SET_ACCESS, set_access, va, size);
}
static gs_status faulty_unmap(void *st, uint64_t va, uint64_t size)
{
    FORWARD(UNMAP, unmap, va, size);
}

static gs_status faulty_mem_info(void *st, uint64_t *free_b, uint64_t *total)
{
    faulty_state *f = st;
    if (should_fail(f, GS_CALL_MEM_INFO)) return f->cfg.status;
    return INNER(f)->mem_info(ISTATE(f), free_b, total);
}

static uint64_t faulty_granularity(void *st)
{
    faulty_state *f = st;
    return INNER(f)->granularity ? INNER(f)->granularity(ISTATE(f)) : 0;
}

static double faulty_now(void *st)
{
    faulty_state *f = st;
    return INNER(f)->now_us(ISTATE(f));
}

static void faulty_destroy(void *st)
{
    faulty_state *f = st;
    gs_backend_destroy(f->inner);
    g_rand_free(f->rng);
    g_free(f);
}

static const gs_backend_ops faulty_ops = {
    .version = GS_BACKEND_VERSION,
    .name = "faulty",
    .malloc = faulty_malloc,
    .free = faulty_free,
    .va_reserve = faulty_va_reserve,
    .va_release = faulty_va_release,
    .page_create = faulty_page_create,
    .page_release = faulty_page_release,
    .map = faulty_map,
    .set_access = faulty_set_access,
    .unmap = faulty_unmap,
    .granularity = faulty_granularity,
    .mem_info = faulty_mem_info,
    .now_us = faulty_now,
    .destroy = faulty_destroy,
};

gs_backend *gs_faulty_backend_new(gs_backend *inner, const gs_faulty_config *cfg)
{
    faulty_state *f = g_new0(faulty_state, 1);
    f->inner = inner;
    f->cfg = *cfg;
    if (f->cfg.status == GS_OK) f->cfg.status = GS_ERR_OOM;
    f->rng = g_rand_new_with_seed((guint32)cfg->seed);
    gs_backend *be = g_new0(gs_backend, 1);
    be->ops = &faulty_ops;
    be->state = f;
    return be;
}

uint64_t gs_faulty_injected(const gs_backend *be)
{
    return be->ops == &faulty_ops ? ((const faulty_state *)be->state)->injected : 0;
}
