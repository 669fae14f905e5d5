/* fuzz_trace.c - the trace reader (traces/read.c), text and gzip, from memory and from a file.
 *
 * Promises checked for every input:
 *   - gs_trace_parse (strict) either gives a trace or fails with one line "fuzz.gstrace:...";
 *   - a trace it gives is well formed: every event's client, stream and slot exist, a free or
 *     free_done carries its allocation's size, a free_done follows a free marked deferred, ids
 *     in the order of the allocs;
 *   - gs_trace_load of the same bytes from a file (the chunked reader and its gzip path), in
 *     lenient mode, gives the same trace whenever the strict parse did, with no warning, and a
 *     well-formed one (warnings counted) whenever it gives one;
 *   - a trace read back from gs_trace_save (text or gzip) is the same trace.
 */
#include "fuzz.h"

#include <string.h>

#include "trace.h"

#define NAME "fuzz.gstrace"

typedef struct {
    const char *path;
    size_t n;
} warnings;

/* A lenient-mode warning is "FILE:LINE: message" too. */
static void count_warning(const char *msg, void *ud)
{
    warnings *w = ud;
    size_t len = strlen(w->path);
    GS_FUZZ_CHECK(strncmp(msg, w->path, len) == 0 && msg[len] == ':', "warning '%s'", msg);
    for (const char *c = msg; *c; c++)
        GS_FUZZ_CHECK((unsigned char)*c >= 0x20 && *c != 0x7f, "warning with byte 0x%02x: '%s'",
                      (unsigned char)*c, msg);
    w->n++;
}

/* The trace's structure, as trace.h promises it. */
static void check_trace(const gs_trace *t)
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

static void check_same(const gs_trace *a, const gs_trace *b, const char *what)
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

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    GError *e = NULL;
    gs_trace *strict = gs_trace_parse(NAME, (const char *)data, size, 0, NULL, NULL, &e);
    if (strict) {
        GS_FUZZ_CHECK(e == NULL, "a trace and an error");
        GS_FUZZ_CHECK(strict->n_warnings == 0, "warnings in strict mode");
        check_trace(strict);
    } else {
        gs_fuzz_check_error(e, GS_TRACE_ERROR, NAME);
        g_clear_error(&e);
    }

    /* The same bytes from a file, lenient. */
    const char *path = gs_fuzz_file(data, size);
    warnings w = {path, 0};
    gs_trace *lenient = gs_trace_load(path, GS_TRACE_LENIENT, count_warning, &w, &e);
    if (lenient) {
        GS_FUZZ_CHECK(e == NULL, "a trace and an error");
        GS_FUZZ_CHECK(lenient->n_warnings == w.n, "%zu warnings counted, %zu said",
                      lenient->n_warnings, w.n);
        check_trace(lenient);
        if (strict) {
            GS_FUZZ_CHECK(w.n == 0, "lenient warns where strict accepts");
            check_same(strict, lenient, "lenient from a file");
        }
    } else {
        GS_FUZZ_CHECK(!strict, "strict parse accepts what the lenient load refuses: %s",
                      e ? e->message : "?");
        gs_fuzz_check_error(e, GS_TRACE_ERROR, path);
        g_clear_error(&e);
    }

    /* What the writer makes of a trace reads back as that trace, plain or compressed. */
    if (strict) {
        char *out = gs_fuzz_path(size % 2 ? "rt.gstrace.gz" : "rt.gstrace");
        GS_FUZZ_CHECK(gs_trace_save(strict, out, &e), "save: %s", e ? e->message : "?");
        gs_trace *back = gs_trace_load(out, 0, NULL, NULL, &e);
        GS_FUZZ_CHECK(back != NULL, "written trace does not read back: %s", e ? e->message : "?");
        check_same(strict, back, "written and read back");
        gs_trace_free(back);
        g_free(out);
    }
    gs_trace_free(strict);
    gs_trace_free(lenient);
    return 0;
}
