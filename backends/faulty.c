/* faulty.c - a backend that wraps another and fails chosen calls, for tests.
 *
 * It fails the nth call (counting only the call kinds in the mask), or each such call with a
 * probability, returning a chosen status (GS_ERR_OOM to exercise the policies' out-of-memory
 * ladder, GS_ERR_DEVICE for a hard failure). A failed call never reaches the inner backend, so
 * the device's state is unchanged, exactly as when a real cudaMalloc/cudaFree fails; its
 * last_error says which call it was ("cudaMalloc(2097152 bytes): device error (injected: call
 * 7)"), so a report names the failure as it would a driver's.
 */
#include "backend.h"

#include <glib.h>

typedef struct {
    gs_backend *inner;
    gs_faulty_config cfg;
    uint64_t calls;    /* calls of the masked kinds so far */
    uint64_t injected;
    GRand *rng;
    /* What the last failed call was, as a driver's message says it (kept, like the CUDA
     * backend's, until the next failure): set when one is injected, cleared when the inner
     * backend fails a call (its own message then stands). */
    char msg[160];
    bool msg_set;
} faulty_state;

/* x: the call's size, address or handle, as its kind says. */
static bool should_fail(faulty_state *f, gs_call_kind k, uint64_t x)
{
    if (f->cfg.mask && !(f->cfg.mask & (1u << k))) return false;
    f->calls++;
    bool fail = (f->cfg.fail_nth && f->calls == f->cfg.fail_nth) ||
                (f->cfg.probability > 0 && g_rand_double(f->rng) < f->cfg.probability);
    if (fail) {
        f->injected++;
        char what[48];
        if (k == GS_CALL_MALLOC || k == GS_CALL_VA_RESERVE || k == GS_CALL_PAGE_CREATE)
            g_snprintf(what, sizeof what, "%" G_GUINT64_FORMAT " bytes", x);
        else if (k == GS_CALL_PAGE_RELEASE)
            g_snprintf(what, sizeof what, "handle %" G_GUINT64_FORMAT, x);
        else if (k == GS_CALL_MEM_INFO)
            what[0] = '\0';
        else
            g_snprintf(what, sizeof what, "0x%" G_GINT64_MODIFIER "x", x);
        g_snprintf(f->msg, sizeof f->msg, "%s(%s): %s (injected: call %" G_GUINT64_FORMAT ")",
                   gs_call_name(k), what, gs_strerror(f->cfg.status), f->calls);
        f->msg_set = true;
    }
    return fail;
}

#define INNER(f) ((f)->inner->ops)
#define ISTATE(f) ((f)->inner->state)

/* The inner backend's answer; a failure of its own replaces the injected message. */
static gs_status passed(faulty_state *f, gs_status st)
{
    if (st != GS_OK) f->msg_set = false;
    return st;
}

static gs_status faulty_malloc(void *st, uint64_t size, uint64_t *addr)
{
    faulty_state *f = st;
    if (should_fail(f, GS_CALL_MALLOC, size)) return f->cfg.status;
    return passed(f, INNER(f)->malloc(ISTATE(f), size, addr));
}

static gs_status faulty_free(void *st, uint64_t addr)
{
    faulty_state *f = st;
    if (should_fail(f, GS_CALL_FREE, addr)) return f->cfg.status;
    return passed(f, INNER(f)->free(ISTATE(f), addr));
}

/* The VMM calls: fail if chosen, else pass through (or report the inner backend's lack). */
#define FORWARD(kind, op, x, ...)                                     \
    do {                                                              \
        faulty_state *f = st;                                         \
        if (!INNER(f)->op) return GS_ERR_UNSUPPORTED;                 \
        if (should_fail(f, GS_CALL_##kind, x)) return f->cfg.status;  \
        return passed(f, INNER(f)->op(ISTATE(f), __VA_ARGS__));       \
    } while (0)

static gs_status faulty_va_reserve(void *st, uint64_t size, uint64_t *va)
{
    FORWARD(VA_RESERVE, va_reserve, size, size, va);
}
static gs_status faulty_va_release(void *st, uint64_t va, uint64_t size)
{
    FORWARD(VA_RELEASE, va_release, va, va, size);
}
static gs_status faulty_page_create(void *st, uint64_t size, uint64_t *handle)
{
    FORWARD(PAGE_CREATE, page_create, size, size, handle);
}
static gs_status faulty_page_release(void *st, uint64_t handle)
{
    FORWARD(PAGE_RELEASE, page_release, handle, handle);
}
static gs_status faulty_map(void *st, uint64_t va, uint64_t size, uint64_t handle)
{
    FORWARD(MAP, map, va, va, size, handle);
}
static gs_status faulty_set_access(void *st, uint64_t va, uint64_t size)
{
    FORWARD(SET_ACCESS, set_access, va, va, size);
}
static gs_status faulty_unmap(void *st, uint64_t va, uint64_t size)
{
    FORWARD(UNMAP, unmap, va, va, size);
}

static gs_status faulty_mem_info(void *st, uint64_t *free_b, uint64_t *total)
{
    faulty_state *f = st;
    if (should_fail(f, GS_CALL_MEM_INFO, 0)) return f->cfg.status;
    return passed(f, INNER(f)->mem_info(ISTATE(f), free_b, total));
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

/* The injected failure's words, else the inner backend's for its own last failure. */
static const char *faulty_last_error(void *st)
{
    faulty_state *f = st;
    if (f->msg_set) return f->msg;
    return INNER(f)->last_error ? INNER(f)->last_error(ISTATE(f)) : NULL;
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
    .last_error = faulty_last_error,
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

uint64_t gs_faulty_calls(const gs_backend *be)
{
    return be->ops == &faulty_ops ? ((const faulty_state *)be->state)->calls : 0;
}
