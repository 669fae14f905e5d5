/* faultsweep.c - one replay with one failed device call, and its checks (faultsweep.h). */
#include "faultsweep.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "report.h"

const char *const gs_fault_policies[] = {
    "pytorch",
    "pytorch:max_split_size_mb:128",
    "pytorch:expandable_segments:True",
    "pytorch:garbage_collection_threshold:0.6",
    "pytorch:roundup_power2_divisions:4",
    "cupy",
};
const size_t gs_fault_n_policies = G_N_ELEMENTS(gs_fault_policies);

#define MAX_WHY 20 /* broken promises described, of a tally */

void gs_fault_tally_init(gs_fault_tally *y)
{
    memset(y, 0, sizeof *y);
    y->why = g_string_new(NULL);
}

void gs_fault_tally_clear(gs_fault_tally *y)
{
    g_string_free(y->why, TRUE);
    memset(y, 0, sizeof *y);
}

/* The simulated device of a run: the trace's size, else an H100's 80 GiB. */
static gs_backend *sim_device(const gs_trace *t)
{
    gs_sim_config sc = {.total_bytes = t->device_total ? t->device_total : GS_DEFAULT_DEVICE_TOTAL};
    return gs_sim_backend_new(&sc);
}

void gs_fault_count(const gs_fault_target *x, uint64_t calls[GS_CALL_COUNT])
{
    for (int k = 0; k < GS_CALL_COUNT; k++) {
        gs_faulty_config fc = {.mask = 1u << k};
        gs_backend *be = gs_faulty_backend_new(sim_device(x->t), &fc);
        gs_replay_opts o = {.capacity = x->capacity, .backend = be, .clients = x->clients};
        gs_result r;
        GError *e = NULL;
        if (!gs_replay_run(x->t, x->p, &o, &r, &e)) g_error("%s: %s", x->name, e->message);
        calls[k] = gs_faulty_calls(be);
        gs_result_clear(&r);
        gs_backend_destroy(be);
    }
}

size_t gs_fault_pick(uint64_t n, uint64_t first, uint64_t every, uint64_t *out)
{
    size_t m = 0;
    for (uint64_t i = 1; i <= n; i++)
        if (every <= 1 || i <= first || i % every == 0 || i == n) out[m++] = i;
    return m;
}

/* What one run's observer knows. */
typedef struct {
    const gs_fault_target *x;
    gs_backend *be;
    gs_fault_tally *y;
    size_t seen;          /* events observed */
    uint64_t ooms;        /* num_ooms at the last event (of the heap observed) */
    long inj_event;       /* the event during which the call failed; -1: not yet */
    char *bad;            /* the first broken promise */
} run_ctx;

static void broken(run_ctx *c, const char *fmt, ...) G_GNUC_PRINTF(2, 3);
static void broken(run_ctx *c, const char *fmt, ...)
{
    if (c->bad) return;
    va_list ap;
    va_start(ap, fmt);
    c->bad = g_strdup_vprintf(fmt, ap);
    va_end(ap);
}

static void check_heap(run_ctx *c, const gs_heap *h, size_t index)
{
    char *why = NULL;
    c->y->heap_checks++;
    if (gs_heap_check(h, &why) != 0) broken(c, "heap after event %zu: %s", index, why);
    g_free(why);
}

static void observe(const gs_heap *h, const gs_event *e, size_t index, void *ud)
{
    run_ctx *c = ud;
    bool check = false;
    if (c->inj_event < 0 && gs_faulty_injected(c->be)) {
        c->inj_event = (long)index;
        check = true;
    }
    uint64_t ooms = gs_heap_stats(h)->num_ooms;
    if (ooms != c->ooms) check = true;
    c->ooms = ooms;
    if ((index & 1023) == 0 || index + 1 == c->x->t->n) check = true;
    if (check) check_heap(c, h, index);
    c->seen++;
}

static uint64_t device_free(gs_backend *sim)
{
    uint64_t fr = 0, tot = 0;
    sim->ops->mem_info(sim->state, &fr, &tot);
    return fr;
}

/* The report of r in fmt, in memory. */
static char *report_text(const gs_fault_target *x, gs_format fmt, const gs_result *r, size_t *len)
{
    char *buf = NULL;
    FILE *f = open_memstream(&buf, len);
    gs_report(f, fmt, x->name, x->t, r, 1, NULL, true);
    fclose(f);
    return buf;
}

/* The failure as the reports say it: at its event, with the injector's message. */
static void check_reported(run_ctx *c, const gs_result *r, const char *msg)
{
    if (r->error_event != (size_t)c->inj_event)
        broken(c, "failure at event %ld reported at event %zu", c->inj_event, r->error_event);
    if (!r->error_msg || strcmp(r->error_msg, msg) != 0)
        broken(c, "failure reported with '%s', not the backend's '%s'",
               r->error_msg ? r->error_msg : "(no message)", msg);
    if (r->events != (size_t)c->inj_event + 1)
        broken(c, "replay went on after a device failure (%zu events)", r->events);
    size_t len;
    char *table = report_text(c->x, GS_FMT_TABLE, r, &len);
    char *line = g_strdup_printf("stopped at event %ld: %s: %s", c->inj_event,
                                 gs_strerror(r->error), msg);
    if (!strstr(table, line)) broken(c, "the table lacks '%s'", line);
    g_free(line);
    free(table);
    char *json = report_text(c->x, GS_FMT_JSON, r, &len);
    GError *e = NULL;
    gs_json *j = gs_json_parse("report", json, len, &e);
    if (!j) {
        broken(c, "the JSON report does not parse: %s", e->message);
        g_error_free(e);
    } else {
        const gs_json *rs = gs_json_get(j, "results");
        const gs_json *err = rs && rs->type == GS_JSON_ARRAY && rs->n == 1
                                 ? gs_json_get(rs->items[0], "error") : NULL;
        const gs_json *m = gs_json_get(err, "message");
        uint64_t ev = UINT64_MAX;
        if (!err || !gs_json_uint(gs_json_get(err, "event"), &ev) || ev != (uint64_t)c->inj_event ||
            !m || m->type != GS_JSON_STRING || strcmp(m->str, msg) != 0)
            broken(c, "the JSON report's error is not {\"event\": %ld, \"message\": \"%s\"}",
                   c->inj_event, msg);
        gs_json_free(j);
    }
    free(json);
}

gboolean gs_fault_one(const gs_fault_target *x, gs_call_kind k, uint64_t nth, gs_status st,
                      gs_fault_tally *y)
{
    gs_backend *sim = sim_device(x->t);
    gs_faulty_config fc = {.mask = 1u << k, .fail_nth = nth, .status = st};
    gs_backend *be = gs_faulty_backend_new(sim, &fc);
    uint64_t free_before = device_free(sim);
    run_ctx c = {.x = x, .be = be, .y = y, .inj_event = -1};
    gs_replay_opts o = {.capacity = x->capacity, .backend = be, .clients = x->clients,
                        .observe = observe, .observe_ud = &c};
    gs_result r;
    GError *e = NULL;
    y->runs++;
    if (!gs_replay_run(x->t, x->p, &o, &r, &e)) {
        /* a failure while the allocator starts: said, nothing else to check */
        broken(&c, "the replay did not start: %s", e->message);
        g_error_free(e);
        memset(&r, 0, sizeof r);
    } else {
        uint64_t free_after = device_free(sim);
        const char *msg = gs_dev_last_error(be);
        if (gs_faulty_injected(be) != 1) {
            broken(&c, "%" G_GUINT64_FORMAT " failures injected, not 1", gs_faulty_injected(be));
        } else if (r.teardown_failures) {
            /* the failed call was one of the teardown's: counted, the rest given back */
            y->in_teardown++;
            if (c.inj_event >= 0) broken(&c, "a failure at event %ld counted in the teardown", c.inj_event);
            /* (more than one: the teardown makes every call whatever the others returned, and a
             * reservation whose page could not be unmapped cannot be released either) */
            if (r.error != GS_OK) broken(&c, "a teardown failure reported as the replay's");
            if (free_after > free_before) broken(&c, "the device gained memory");
        } else if (c.inj_event < 0) {
            broken(&c, "the failed call was neither an event's nor the teardown's");
        } else {
            y->in_replay++;
            if (free_after != free_before)
                broken(&c, "device free memory %" G_GUINT64_FORMAT " before, %" G_GUINT64_FORMAT
                           " after (%" G_GINT64_FORMAT " bytes not given back)", free_before,
                       free_after, (int64_t)(free_before - free_after));
            if (r.error == GS_OK && st == GS_ERR_OOM) {
                y->handled++;
                if (r.oom) y->oom_outcome++;
            } else if (r.error != st) {
                broken(&c, "an injected '%s' at event %ld came out as '%s'", gs_strerror(st),
                       c.inj_event, gs_strerror(r.error));
            } else {
                y->reported++;
                check_reported(&c, &r, msg ? msg : "(no message)");
            }
        }
    }
    if (c.bad) {
        y->broken++;
        if (y->broken <= MAX_WHY)
            g_string_append_printf(y->why, "%s, %s, cap %" G_GUINT64_FORMAT ", %s: %s #%" G_GUINT64_FORMAT
                                   " failing with '%s': %s\n", x->name, x->p->spec, x->capacity,
                                   gs_clients_mode_name(x->clients), gs_call_name(k), nth,
                                   gs_strerror(st), c.bad);
    }
    gboolean ok = c.bad == NULL;
    g_free(c.bad);
    gs_result_clear(&r);
    gs_backend_destroy(be);
    return ok;
}
