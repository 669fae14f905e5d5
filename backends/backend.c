/* backend.c - status strings, call names, and the timed, counted wrappers around backend calls. */
#include "backend.h"

#include <glib.h>

const char *gs_strerror(gs_status s)
{
    switch (s) {
#define GS_STATUS_STR(code, msg) \
    case code:                   \
        return msg;
        GS_STATUS_LIST(GS_STATUS_STR)
#undef GS_STATUS_STR
    }
    return "unknown status";
}

const char *gs_call_name(gs_call_kind k)
{
    static const char *const names[GS_CALL_COUNT] = {
#define GS_CALL_STR(k, name) name,
        GS_CALL_KINDS(GS_CALL_STR)
#undef GS_CALL_STR
    };
    return (unsigned)k < GS_CALL_COUNT ? names[k] : "?";
}

double gs_devcalls_total_us(const gs_devcalls *c)
{
    double t = 0;
    for (int k = 0; k < GS_CALL_COUNT; k++) t += c->time_us[k];
    return t;
}

void gs_devcalls_add(gs_devcalls *into, const gs_devcalls *c)
{
    for (int k = 0; k < GS_CALL_COUNT; k++) {
        into->n[k] += c->n[k];
        into->failed[k] += c->failed[k];
        into->time_us[k] += c->time_us[k];
    }
}

/* Time one call on the backend's own clock and count it. The observer is told the call covered
 * `parts` pieces of `part_size` bytes each and is given the time per piece: one piece for every
 * call but cuMemSetAccess, whose cost is per mapping in its range. */
static inline void account(gs_backend *be, gs_devcalls *calls, gs_call_kind k, double t0,
                           gs_status st, uint64_t part_size, uint64_t parts)
{
    if (!calls) return;
    double us = be->ops->now_us(be->state) - t0;
    calls->n[k]++;
    if (st != GS_OK) calls->failed[k]++;
    calls->time_us[k] += us;
    if (be->observe) be->observe(be->observe_ud, k, part_size, us / (double)parts, st);
}

gs_status gs_dev_malloc(gs_backend *be, gs_devcalls *calls, uint64_t size, uint64_t *addr)
{
    double t0 = be->ops->now_us(be->state);
    gs_status st = be->ops->malloc(be->state, size, addr);
    account(be, calls, GS_CALL_MALLOC, t0, st, size, 1);
    return st;
}

gs_status gs_dev_free(gs_backend *be, gs_devcalls *calls, uint64_t addr, uint64_t size)
{
    double t0 = be->ops->now_us(be->state);
    gs_status st = be->ops->free(be->state, addr);
    account(be, calls, GS_CALL_FREE, t0, st, size, 1);
    return st;
}

gs_status gs_dev_mem_info(gs_backend *be, gs_devcalls *calls, uint64_t *free_b, uint64_t *total)
{
    double t0 = be->ops->now_us(be->state);
    gs_status st = be->ops->mem_info(be->state, free_b, total);
    account(be, calls, GS_CALL_MEM_INFO, t0, st, 0, 1);
    return st;
}

/* The VMM wrappers differ only in the op and its arguments. */
#define VMM_CALL(kind, part_size, parts, op, ...)                      \
    do {                                                               \
        if (!be->ops->op) return GS_ERR_UNSUPPORTED;                   \
        double t0 = be->ops->now_us(be->state);                        \
        gs_status st = be->ops->op(be->state, __VA_ARGS__);            \
        account(be, calls, GS_CALL_##kind, t0, st, part_size, parts);  \
        return st;                                                     \
    } while (0)

gs_status gs_dev_va_reserve(gs_backend *be, gs_devcalls *calls, uint64_t size, uint64_t *va)
{
    VMM_CALL(VA_RESERVE, size, 1, va_reserve, size, va);
}

gs_status gs_dev_va_release(gs_backend *be, gs_devcalls *calls, uint64_t va, uint64_t size)
{
    VMM_CALL(VA_RELEASE, size, 1, va_release, va, size);
}

gs_status gs_dev_page_create(gs_backend *be, gs_devcalls *calls, uint64_t size, uint64_t *handle)
{
    VMM_CALL(PAGE_CREATE, size, 1, page_create, size, handle);
}

gs_status gs_dev_page_release(gs_backend *be, gs_devcalls *calls, uint64_t handle,
                              uint64_t size)
{
    VMM_CALL(PAGE_RELEASE, size, 1, page_release, handle);
}

gs_status gs_dev_map(gs_backend *be, gs_devcalls *calls, uint64_t va, uint64_t size, uint64_t handle)
{
    VMM_CALL(MAP, size, 1, map, va, size, handle);
}

gs_status gs_dev_set_access(gs_backend *be, gs_devcalls *calls, uint64_t va, uint64_t size,
                            uint64_t page)
{
    uint64_t parts = page && size / page ? size / page : 1;
    VMM_CALL(SET_ACCESS, parts > 1 ? page : size, parts, set_access, va, size);
}

gs_status gs_dev_unmap(gs_backend *be, gs_devcalls *calls, uint64_t va, uint64_t size)
{
    VMM_CALL(UNMAP, size, 1, unmap, va, size);
}

/* One call of a batch through its wrapper. */
static gs_status dev_call(gs_backend *be, gs_devcalls *calls, const gs_dev_call *c)
{
    switch (c->kind) {
    case GS_CALL_PAGE_CREATE: return gs_dev_page_create(be, calls, c->size, c->handle);
    case GS_CALL_PAGE_RELEASE: return gs_dev_page_release(be, calls, *c->handle, c->size);
    case GS_CALL_MAP: return gs_dev_map(be, calls, c->va, c->size, *c->handle);
    case GS_CALL_UNMAP: return gs_dev_unmap(be, calls, c->va, c->size);
    default: return GS_ERR_INVALID;
    }
}

gs_status gs_dev_batch(gs_backend *be, gs_devcalls *calls, const gs_dev_call *c, size_t n,
                       size_t *made)
{
    if (be->ops->batch && calls && !be->observe) return be->ops->batch(be->state, c, n, made, calls);
    gs_status st = GS_OK;
    size_t i = 0;
    while (i < n && st == GS_OK) st = dev_call(be, calls, &c[i++]);
    *made = i;
    return st;
}

gs_status gs_dev_touch(gs_backend *be, uint64_t addr, uint64_t size)
{
    return be->ops->touch ? be->ops->touch(be->state, addr, size) : GS_OK;
}

const char *gs_dev_last_error(const gs_backend *be)
{
    return be->ops->last_error ? be->ops->last_error(be->state) : NULL;
}

bool gs_dev_has_vmm(const gs_backend *be)
{
    const gs_backend_ops *o = be->ops;
    return o->va_reserve && o->va_release && o->page_create && o->page_release && o->map &&
           o->set_access && o->unmap && o->granularity;
}

void gs_backend_destroy(gs_backend *be)
{
    if (!be) return;
    be->ops->destroy(be->state);
    g_free(be);
}
