/* repeat.c - seeing past a recorded death by an explicit assumption (trace.h, "An assumed
 * continuation"): most programs are loops, and a trace that ends where its run died can be
 * continued as the loop would have gone on.
 *
 * The period is found on the events' signatures, not their ids: an alloc is its size and
 * stream; a free (or its completion) is also how many events back its allocation was, so that a
 * shifted copy frees the shifted allocation; a cache release or a mark is its op. The fatal oom
 * is the allocation that failed, so it signs as an alloc of its size. The smallest period P
 * whose last two repetitions, ending at the death, equal the ones before them (2P events each
 * matched P back) is taken. The continuation then follows the recurrence event[t] =
 * shift(event[t - P]): the death's request is made as the allocation it was, and the loop goes
 * on for N more periods. An assumption, never a fact: every report of such a trace says so.
 */
#include <string.h>

#include "trace-int.h"

/* What a period must hold, at least: two repetitions matched (the last 2P events against the
 * P before each). The search is bounded by this many comparisons. */
#define REPEAT_BUDGET (UINT64_C(200) * 1000 * 1000)

typedef struct {
    const gs_trace *t;
    size_t death;            /* the fatal oom's index */
    size_t *alloc_ev;        /* slot -> its alloc's event index */
} sig_ctx;

/* Whether events i and j (i < j, both <= death) sign alike. */
static bool same_sig(const sig_ctx *x, size_t i, size_t j)
{
    const gs_event *a = &x->t->ev[i], *b = &x->t->ev[j];
    uint8_t oa = i == x->death ? GS_OP_ALLOC : a->op, ob = j == x->death ? GS_OP_ALLOC : b->op;
    if (oa != ob) return false;
    switch (oa) {
    case GS_OP_ALLOC:
    case GS_OP_OOM:
        return a->size == b->size && a->stream == b->stream;
    case GS_OP_FREE:
    case GS_OP_FREE_DONE:
        return a->size == b->size && a->stream == b->stream && a->flags == b->flags &&
               i - x->alloc_ev[a->slot] == j - x->alloc_ev[b->slot];
    default:
        return true; /* a cache release, a mark (its size is the iteration: not compared) */
    }
}

bool gs_trace_find_period(const gs_trace *t, gs_trace_period *out, const char **why)
{
    memset(out, 0, sizeof *out);
    gs_trace_caveats cv;
    gs_trace_get_caveats(t, &cv);
    if (!cv.fatal_oom) {
        *why = "the trace does not end where its run died: there is nothing to see past";
        return false;
    }
    uint32_t *devs = NULL;
    size_t ndev = gs_trace_devices(t, &devs);
    g_free(devs);
    if (t->clients->len > 1 || ndev > 1 || gs_trace_has_pools(t)) {
        *why = "only a trace of one client on one device, without private pools, is continued";
        return false;
    }
    sig_ctx x = {.t = t, .death = cv.fatal_oom_event, .alloc_ev = g_new(size_t, t->n_slots + 1)};
    for (size_t i = 0; i < t->n; i++)
        if (t->ev[i].op == GS_OP_ALLOC) x.alloc_ev[t->ev[i].slot] = i;
    const size_t D = x.death;
    uint64_t spent = 0;
    bool found = false;
    for (size_t p = 1; !found && 3 * p <= D + 1 && spent < REPEAT_BUDGET; p++) {
        bool ok = true, any_alloc = false;
        for (size_t k = 0; ok && k < 2 * p; k++) {
            size_t j = D - k;
            ok = same_sig(&x, j - p, j);
            any_alloc |= j == D || t->ev[j].op == GS_OP_ALLOC;
            spent++;
        }
        if (ok && any_alloc) {
            found = true;
            out->period = p;
            out->death = D;
            out->start = D - p; /* the last complete period: [D - p, D) */
        }
    }
    g_free(x.alloc_ev);
    if (!found)
        *why = spent >= REPEAT_BUDGET ? "no repeating period found within the search's budget"
                                      : "the recorded requests do not repeat: no period whose last "
                                        "two repetitions before the death are alike";
    return found;
}

gs_trace *gs_trace_assume_repeat(const gs_trace *t, const gs_trace_period *p, unsigned n,
                                 const char **why)
{
    const size_t D = p->death, P = p->period, total = D + (size_t)n * P;
    const char *client = t->clients->len ? g_ptr_array_index(t->clients, 0) : "torch";
    gs_trace *o = gs_trace_new();
    for (guint i = 0; i < t->meta->len; i++) {
        const gs_trace_meta *m = &g_array_index(t->meta, gs_trace_meta, i);
        if (strcmp(m->key, "fatal_oom_event") != 0) gs_trace_set_meta(o, m->key, m->value);
    }
    o->device_total = t->device_total;
    /* per event of the extended sequence: the new slot of an alloc, the event index of the
     * allocation a free frees (in the extended sequence), and each slot's liveness */
    uint32_t *slot_at = g_new(uint32_t, total);
    size_t *frees_at = g_new(size_t, total);
    size_t *alloc_ev = g_new(size_t, t->n_slots + 1);
    GArray *live = g_array_new(FALSE, TRUE, sizeof(bool));
    bool ok = true;
    for (size_t i = 0; i < total && ok; i++) {
        /* the event as recorded, or, past the death, the recorded one a whole number of periods
         * back that it repeats (the death's request, at D, repeats the alloc at D - P, alike by
         * the period's signatures); src: the event P back, recorded or generated */
        size_t src = i < D ? i : i - P;
        const gs_event *e = &t->ev[i < D ? i : D - P + (i - D) % P];
        uint8_t op = e->op, flags = e->flags;
        uint64_t size = e->size;
        uint32_t stream = e->stream;
        uint64_t sv = g_array_index(t->streams, uint64_t, stream);
        slot_at[i] = UINT32_MAX;
        switch (op) {
        case GS_OP_ALLOC: {
            uint32_t s = gs_trace_add_alloc(o, client, sv, size);
            slot_at[i] = s;
            bool yes = true;
            g_array_append_val(live, yes);
            if (i < D) alloc_ev[e->slot] = i;
            break;
        }
        case GS_OP_FREE:
        case GS_OP_FREE_DONE: {
            size_t q = i < D ? alloc_ev[e->slot] : frees_at[src] + P;
            frees_at[i] = q;
            uint32_t s = q < i ? slot_at[q] : UINT32_MAX;
            if (s == UINT32_MAX || (op == GS_OP_FREE && !g_array_index(live, bool, s))) {
                *why = "the period does not close: a repetition frees an allocation it does not "
                       "hold";
                ok = false;
                break;
            }
            if (op == GS_OP_FREE) {
                g_array_index(live, bool, s) = false;
                if (flags & GS_EV_DEFERRED) gs_trace_add_free_deferred(o, s);
                else gs_trace_add_free(o, s);
            } else {
                gs_trace_add_free_done(o, s);
            }
            break;
        }
        case GS_OP_OOM: /* a request the recorded run caught: made again, as it was */
            gs_trace_add_oom(o, client, sv, size);
            break;
        default:
            gs_trace_add_op(o, (gs_op)op, size);
            break;
        }
    }
    g_free(slot_at);
    g_free(frees_at);
    g_free(alloc_ev);
    g_array_free(live, TRUE);
    if (!ok) {
        gs_trace_free(o);
        return NULL;
    }
    char *words = g_strdup_printf("the last complete period (%zu events, %zu..%zu) repeated %u "
                                  "time%s from event %zu, where the recorded run died",
                                  P, p->start, D - 1, n, n == 1 ? "" : "s", D);
    gs_trace_set_meta(o, "assumed_repeat", words);
    g_free(words);
    return o;
}
