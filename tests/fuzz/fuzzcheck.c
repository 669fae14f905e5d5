/* fuzzcheck.c - the promises about a trace that the trace harnesses share (fuzz_trace.c, the
 * text reader; fuzz_binary.c, the binary one): its structure, and two traces being the same.
 */
#include "fuzz.h"

#include <string.h>

#include "trace.h"

/* The trace's structure, as trace.h promises it. */
void gs_fuzz_check_trace(const gs_trace *t)
{
    GS_FUZZ_CHECK(t->clients->len <= GS_TRACE_MAX_CLIENTS, "%u clients", t->clients->len);
    GS_FUZZ_CHECK(t->streams->len <= GS_TRACE_MAX_STREAMS, "%u streams", t->streams->len);
    uint8_t *state = g_new0(uint8_t, t->n_slots ? t->n_slots : 1); /* 0 live, 1 freed, 2 done */
    size_t *free_ix = g_new0(size_t, t->n_slots ? t->n_slots : 1);
    uint64_t *size = g_new0(uint64_t, t->n_slots ? t->n_slots : 1);
    size_t slots = 0;
    for (size_t i = 0; i < t->n; i++) {
        const gs_event *e = &t->ev[i];
        GS_FUZZ_CHECK(e->op < GS_OP_COUNT, "event %zu: op %u", i, e->op);
        GS_FUZZ_CHECK(e->client < t->clients->len, "event %zu: client %u", i, e->client);
        GS_FUZZ_CHECK(e->stream < t->streams->len, "event %zu: stream %u", i, e->stream);
        switch ((gs_op)e->op) {
        case GS_OP_ALLOC:
            GS_FUZZ_CHECK(e->slot == slots, "event %zu: alloc slot %u, want %zu", i, e->slot, slots);
            GS_FUZZ_CHECK(e->flags == 0, "event %zu: flags on an alloc", i);
            size[slots++] = e->size;
            break;
        case GS_OP_FREE:
            GS_FUZZ_CHECK(e->slot < slots && state[e->slot] == 0, "event %zu: free of slot %u", i,
                          e->slot);
            GS_FUZZ_CHECK(e->size == size[e->slot], "event %zu: free size", i);
            state[e->slot] = 1;
            free_ix[e->slot] = i;
            break;
        case GS_OP_FREE_DONE:
            GS_FUZZ_CHECK(e->slot < slots && state[e->slot] == 1, "event %zu: free_done of slot %u",
                          i, e->slot);
            GS_FUZZ_CHECK(e->size == size[e->slot], "event %zu: free_done size", i);
            GS_FUZZ_CHECK(t->ev[free_ix[e->slot]].flags & GS_EV_DEFERRED,
                          "event %zu: free_done of a free not marked deferred", i);
            state[e->slot] = 2;
            break;
        default:
            GS_FUZZ_CHECK(e->slot == UINT32_MAX, "event %zu: slot on %s", i, gs_op_name(e->op));
            break;
        }
    }
    GS_FUZZ_CHECK(slots == t->n_slots, "%zu allocs, n_slots %zu", slots, t->n_slots);
    /* A free marked deferred is completed by a free_done. */
    for (size_t s = 0; s < slots; s++)
        GS_FUZZ_CHECK(state[s] != 1 || !(t->ev[free_ix[s]].flags & GS_EV_DEFERRED),
                      "slot %zu: deferred free never done", s);
    for (guint c = 0; c < t->clients->len; c++) {
        const char *name = t->clients->pdata[c];
        GS_FUZZ_CHECK(*name && strspn(name, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                                            "0123456789_.-") == strlen(name),
                      "client name '%s'", name);
    }
    g_free(state);
    g_free(free_ix);
    g_free(size);
}

void gs_fuzz_check_same(const gs_trace *a, const gs_trace *b, const char *what)
{
    GS_FUZZ_CHECK(a->n == b->n && a->n_slots == b->n_slots, "%s: %zu/%zu events", what, a->n, b->n);
    GS_FUZZ_CHECK(a->n == 0 || memcmp(a->ev, b->ev, a->n * sizeof *a->ev) == 0,
                  "%s: events differ", what);
    GS_FUZZ_CHECK(a->n_slots == 0 ||
                      memcmp(a->slot_id, b->slot_id, a->n_slots * sizeof *a->slot_id) == 0,
                  "%s: ids differ", what);
    GS_FUZZ_CHECK(a->clients->len == b->clients->len, "%s: clients", what);
    for (guint c = 0; c < a->clients->len; c++)
        GS_FUZZ_CHECK(strcmp(a->clients->pdata[c], b->clients->pdata[c]) == 0, "%s: client %u",
                      what, c);
    GS_FUZZ_CHECK(a->streams->len == b->streams->len &&
                      (a->streams->len == 0 ||
                       memcmp(a->streams->data, b->streams->data,
                              a->streams->len * sizeof(uint64_t)) == 0),
                  "%s: streams differ", what);
    GS_FUZZ_CHECK(a->device_total == b->device_total, "%s: device_total", what);
    GS_FUZZ_CHECK(a->meta->len == b->meta->len, "%s: %u/%u header entries", what, a->meta->len,
                  b->meta->len);
    for (guint m = 0; m < a->meta->len; m++) {
        const gs_trace_meta *x = &g_array_index(a->meta, gs_trace_meta, m);
        const gs_trace_meta *y = &g_array_index(b->meta, gs_trace_meta, m);
        /* device_total_bytes is written as the number it was read as ("007" comes back "7") */
        GS_FUZZ_CHECK(strcmp(x->key, y->key) == 0 &&
                          (strcmp(x->key, "device_total_bytes") == 0 ||
                           strcmp(x->value, y->value) == 0),
                      "%s: header entry %u", what, m);
    }
}
