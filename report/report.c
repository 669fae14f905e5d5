/* report.c - results as a table for people, CSV and JSON for scripts.
 *
 * Every format carries the same numbers with the names of docs/metrics.md; JSON adds the
 * full PyTorch-style memory_stats and the device calls by kind. With a reference (what the real
 * PyTorch run did), each result also says how the simulation compares.
 */
#include <math.h>
#include <string.h>

#include "report.h"

static const char *outcome(const gs_result *r) { return gs_result_outcome(r); }

static double events_per_s(const gs_result *r)
{
    return r->host_seconds > 0 ? (double)r->events / r->host_seconds : 0.0;
}

/* The comparison with a real run: the numbers the fidelity contract names. */
typedef struct {
    bool have;
    const char *outcome;
    int64_t peak_reserved, segments, device_alloc, device_free, retries, ooms, peak_allocated;
    bool has_stats;
    /* The result is of the reference's own setting and cap: the only one a real run exists
     * for. Another setting or cap is a prediction with nothing to compare: "no real run". */
    bool same_run;
    bool has_event;     /* the real run died at event */
    size_t event;
    bool per_device;    /* a result of several devices: each device is compared on its own, and
                         * the totals only by outcome and match */
    /* same_run, and outcome (and the event of a fatal OOM), peak reserved, segments, device
     * allocs and frees, retries and OOMs all equal; with several devices, on every device */
    bool match;
} ref_cmp;

/* Is r the replay of the reference run's own setting (PYTORCH_CUDA_ALLOC_CONF) and cap? */
static bool same_run(const gs_result *r, const gs_reference *ref)
{
    const char *conf = ref->allocator_conf ? ref->allocator_conf : "";
    const char *spec = r->policy ? r->policy : "";
    bool same_setting = *conf ? g_str_has_prefix(spec, "pytorch:") && strcmp(spec + 8, conf) == 0
                              : strcmp(spec, "pytorch") == 0 || strcmp(spec, "pytorch:") == 0;
    return same_setting && r->capacity == ref->cap_bytes;
}

static ref_cmp compare(const gs_result *r, const gs_reference *ref)
{
    ref_cmp c;
    memset(&c, 0, sizeof c);
    if (!ref) return c;
    c.have = true;
    c.outcome = ref->outcome ? ref->outcome : "?";
    c.has_event = ref->has_outcome_event;
    c.same_run = same_run(r, ref);
    c.event = ref->outcome_event;
    bool same_outcome = strcmp(c.outcome, outcome(r)) == 0 &&
                        (!c.has_event || !r->oom || r->first_oom_event == c.event);
    if (r->n_devices) {
        c.per_device = true;
        c.match = c.same_run && same_outcome && ref->n_devices == r->n_devices;
        for (size_t k = 0; c.match && k < r->n_devices; k++) {
            const gs_reference *dref = gs_reference_device(ref, r->devices[k].device);
            c.match = dref && compare(&r->devices[k], dref).match;
        }
        return c;
    }
    c.peak_reserved = (int64_t)ref->peak_reserved;
    c.segments = (int64_t)ref->n_segment_alloc;
    c.device_alloc = c.segments;
    c.device_free = (int64_t)ref->n_device_free;
    c.has_stats = gs_reference_stat(ref, "num_alloc_retries", &c.retries) &&
                  gs_reference_stat(ref, "num_ooms", &c.ooms) &&
                  gs_reference_stat(ref, "allocated_bytes.all.peak", &c.peak_allocated);
    /* memory_stats, where the run has them, count the whole run (a cut log's events do not) */
    gs_reference_stat(ref, "segment.all.allocated", &c.segments);
    gs_reference_stat(ref, "num_device_alloc", &c.device_alloc);
    gs_reference_stat(ref, "num_device_free", &c.device_free);
    gs_reference_stat(ref, "reserved_bytes.all.peak", &c.peak_reserved);
    c.match = c.same_run && same_outcome &&
              c.peak_reserved == r->stats.reserved_bytes[GS_STAT_ALL].peak &&
              c.segments == r->stats.segment[GS_STAT_ALL].allocated &&
              c.device_alloc == (int64_t)r->stats.num_device_alloc &&
              c.device_free == (int64_t)r->stats.num_device_free &&
              (!c.has_stats || (c.retries == (int64_t)r->stats.num_alloc_retries &&
                                c.ooms == (int64_t)r->stats.num_ooms));
    return c;
}

/* A capacity as typed: "5.75GiB", or bytes when it is not a round number of MiB. */

/* A client's part of r as a result of its own, so the metric helpers and the CSV row apply. */
static gs_result client_as_result(const gs_result *r, const gs_client_result *c)
{
    gs_result cr;
    memset(&cr, 0, sizeof cr);
    cr.policy = c->policy;
    cr.backend = r->backend;
    cr.capacity = r->capacity;
    cr.oom = c->oom;
    cr.first_oom_event = c->first_oom_event;
    cr.first_oom_size = c->first_oom_size;
    cr.stats = c->stats;
    cr.calls = c->calls;
    cr.events = r->events;
    cr.host_seconds = r->host_seconds;
    /* the bound is the device's, all clients together (sim/bound.h) */
    cr.lower_bound_bytes = r->lower_bound_bytes;
    cr.offline_bytes = r->offline_bytes;
    return cr;
}

/* A result's label: its policy (and, with several clients, the arrangement first). */
static char *result_label(const gs_result *r)
{
    GString *s = g_string_new(NULL);
    if (r->arrangement) g_string_append_printf(s, "%s ", r->arrangement);
    g_string_append(s, r->policy);
    bool caps_differ = false;
    for (size_t k = 1; k < r->n_devices; k++)
        caps_differ |= r->devices[k].capacity != r->devices[0].capacity;
    if (caps_differ) {
        /* several devices with limits of their own: each, as --capacity takes them */
        for (size_t k = 0; k < r->n_devices; k++) {
            char *cap = r->devices[k].capacity ? gs_format_capacity(r->devices[k].capacity, "")
                                               : g_strdup("none");
            g_string_append_printf(s, "%s%u=%s", k ? "," : " @", r->devices[k].device, cap);
            g_free(cap);
        }
    } else if (r->n_devices ? r->devices[0].capacity : r->capacity) {
        char *cap = gs_format_capacity(r->n_devices ? r->devices[0].capacity : r->capacity, "");
        g_string_append_printf(s, " @%s", cap);
        g_free(cap);
    }
    return g_string_free(s, FALSE);
}

/* A device's row label under its policy's: "  device 1 @2GiB". */
static char *device_label(const gs_result *d)
{
    GString *s = g_string_new(NULL);
    g_string_append_printf(s, "  device %u", d->device);
    if (d->capacity) {
        char *cap = gs_format_capacity(d->capacity, "");
        g_string_append_printf(s, " @%s", cap);
        g_free(cap);
    }
    return g_string_free(s, FALSE);
}

/* Several clients: who held what when the first OOM came, and each client's numbers. */
static void report_clients(FILE *out, const gs_result *rs, size_t n, char **labels, int w)
{
    bool any = false;
    for (size_t i = 0; i < n; i++) any |= rs[i].n_clients > 0;
    if (!any) return;
    int cw = 6;
    for (size_t i = 0; i < n; i++)
        for (size_t k = 0; k < rs[i].n_clients; k++)
            cw = MAX(cw, (int)strlen(rs[i].clients[k].name));
    fprintf(out, "\nclients (cached = reserved - allocated; shared: a segment is charged to the client whose request made it)\n");
    fprintf(out, "%-*s %-*s %-7s %12s %12s %7s %8s %5s %10s %9s %15s %15s\n", w, "policy", cw,
            "client", "outcome", "peak alloc", "peak reserv", "retries", "reclaims", "OOMs",
            "dev allocs", "dev frees", "reserv @OOM", "cached @OOM");
    for (size_t i = 0; i < n; i++) {
        const gs_result *r = &rs[i];
        for (size_t k = 0; k < r->n_clients; k++) {
            const gs_client_result *c = &r->clients[k];
            char *pa = gs_format_size((uint64_t)c->stats.allocated_bytes[GS_STAT_ALL].peak);
            char *pr = gs_format_size((uint64_t)c->stats.reserved_bytes[GS_STAT_ALL].peak);
            char *ro = r->oom ? gs_format_size(c->reserved_at_oom) : g_strdup("-");
            char *co = r->oom ? gs_format_size(c->reserved_at_oom - c->allocated_at_oom)
                              : g_strdup("-");
            fprintf(out, "%-*s %-*s %-7s %12s %12s %7" G_GUINT64_FORMAT " %8" G_GUINT64_FORMAT
                         " %5" G_GUINT64_FORMAT " %10" G_GUINT64_FORMAT " %9" G_GUINT64_FORMAT
                         " %15s %15s\n",
                    w, labels[i], cw, c->name, c->oom ? "oom" : "ok", pa, pr,
                    c->stats.num_alloc_retries, c->stats.num_reclaim_retries, c->stats.num_ooms,
                    c->stats.num_device_alloc, c->stats.num_device_free, ro, co);
            g_free(pa);
            g_free(pr);
            g_free(ro);
            g_free(co);
        }
    }
}

/* The device calls each policy made, by kind, with their modelled (or measured) time: only the
 * kinds some policy used, so a cudaMalloc-only comparison stays narrow. */
static void report_calls(FILE *out, const gs_result *rs, size_t n, char **labels, int w)
{
    bool used[GS_CALL_COUNT] = {false};
    bool any = false;
    for (size_t i = 0; i < n; i++)
        for (int k = 0; k < GS_CALL_COUNT; k++) any |= used[k] |= rs[i].calls.n[k] > 0;
    if (!any) return;
    bool measured = false; /* on real hardware the times are measured, not modelled */
    for (size_t i = 0; i < n; i++) measured |= rs[i].backend && strcmp(rs[i].backend, "sim") != 0;
    fprintf(out, "\ndevice calls: count / %s ms\n%-*s", measured ? "measured" : "modelled", w,
            "policy");
    for (int k = 0; k < GS_CALL_COUNT; k++)
        if (used[k]) fprintf(out, " %19s", gs_call_name((gs_call_kind)k));
    fputc('\n', out);
    for (size_t i = 0; i < n; i++) {
        fprintf(out, "%-*s", w, labels[i]);
        for (int k = 0; k < GS_CALL_COUNT; k++)
            if (used[k])
                fprintf(out, " %8" G_GUINT64_FORMAT " / %8.2f", rs[i].calls.n[k],
                        rs[i].calls.time_us[k] / 1000.0);
        fputc('\n', out);
    }
}

/* A size as PyTorch's OOM message prints it (c10's format_size: two decimals, "bytes" up to
 * 1 KiB), so the line reads as the one users know. g_free it. */
static char *pytorch_size(uint64_t b)
{
    if (b <= 1024) return g_strdup_printf("%" G_GUINT64_FORMAT " bytes", b);
    if (b <= 1048576) return g_strdup_printf("%.2f KiB", (double)b / 1024.0);
    if (b <= 1073741824) return g_strdup_printf("%.2f MiB", (double)b / 1048576.0);
    return g_strdup_printf("%.2f GiB", (double)b / 1073741824.0);
}

/* "Tried to allocate 516.00 MiB; ... allocated by PyTorch, ... reserved but unallocated". */
char *gs_oom_message(const gs_oom_report *o)
{
    char *req = pytorch_size(o->request), *al = pytorch_size(o->allocated);
    char *un = pytorch_size(o->reserved - MIN(o->reserved, o->allocated));
    char *m = g_strdup_printf("Tried to allocate %s; %s is allocated by PyTorch, and %s is reserved "
                              "by PyTorch but unallocated", req, al, un);
    g_free(req);
    g_free(al);
    g_free(un);
    return m;
}

/* A byte count as Python's "{:,}" writes it: 885,445,120. g_free it. */
static char *thousands(uint64_t v)
{
    char digits[24];
    int n = g_snprintf(digits, sizeof digits, "%" G_GUINT64_FORMAT, v);
    GString *s = g_string_new(NULL);
    for (int i = 0; i < n; i++) {
        if (i && (n - i) % 3 == 0) g_string_append_c(s, ',');
        g_string_append_c(s, digits[i]);
    }
    return g_string_free(s, FALSE);
}

/* The first line under a first OOM: the failing allocator's own words where gpusim knows them
 * (PyTorch's; CuPy's OutOfMemoryError, its pool's rounded size and total bytes held), else
 * PyTorch's figures, labelled as such: another library would not say them. */
static void report_oom_words(FILE *out, const gs_oom_report *o, const char *spec)
{
    size_t fam = strcspn(spec, ":@");
    if (fam == 4 && strncmp(spec, "cupy", 4) == 0) {
        char *sz = thousands(o->rounded), *tot = thousands(o->reserved);
        char *l = o->limit ? thousands(o->limit) : NULL;
        char *lim = l ? g_strdup_printf(", limit set to: %s bytes", l) : g_strdup("");
        fprintf(
            out,
            "    CuPy would say: Out of memory allocating %s bytes (allocated so far: %s bytes%s).\n",
            sz, tot, lim);
        g_free(l);
        g_free(sz);
        g_free(tot);
        g_free(lim);
        return;
    }
    char *msg = gs_oom_message(o);
    bool torch = fam == 7 && strncmp(spec, "pytorch", 7) == 0;
    fprintf(out, "    %s: %s\n", torch ? "PyTorch would say" : "in PyTorch's terms", msg);
    g_free(msg);
}

/* The two lines under a first OOM: the allocator's words, then where the free memory was. */
static void report_oom_lines(FILE *out, const gs_oom_report *o, const char *spec)
{
    char *free_b = gs_format_size(o->free_total), *lg = gs_format_size(o->largest_free);
    char *lp = gs_format_size(o->largest_in_pool), *ls = gs_format_size(o->largest_on_stream);
    char *small = gs_format_size(o->free_too_small), *rq = gs_format_size(o->rounded);
    report_oom_words(out, o, spec);
    /* a request routed to a private pool could use only that pool's blocks: say which */
    char *which = o->private_pool ? g_strdup_printf(" (private pool %" G_GUINT32_FORMAT ")",
                                                    o->private_pool)
                                  : g_strdup("");
    fprintf(out, "    cached free then: %s; largest block %s (in the request's pool%s %s, on its "
                 "stream %s); %s of it in blocks smaller than the request as rounded (%s)\n",
            free_b, lg, which, lp, ls, small, rq);
    g_free(which);
    g_free(free_b);
    g_free(lg);
    g_free(lp);
    g_free(ls);
    g_free(small);
    g_free(rq);
}

/* " at file:line:function" when the trace names the failed request's frame, else "". The
 * frame is data: shown printable, so a byte in it cannot drive the terminal. */
static char *oom_at(const gs_result *r)
{
    const gs_oom_report *o = r->first_oom_report;
    if (!o || !o->frame) return g_strdup("");
    char *f = gs_printable(o->frame), *at = g_strconcat(" at ", f, NULL);
    g_free(f);
    return at;
}

/* The first OOM and any device error of one result, under the table. */
static void report_outcome(FILE *out, const gs_result *r, const char *label)
{
    if (r->oom && r->n_clients) {
        /* Say whose request failed and what every client held then: the point of an OOM
         * with several allocators is often memory another one keeps cached. */
        char *sz = gs_format_size(r->first_oom_size);
        char *at = oom_at(r);
        fprintf(out, "  %s: first OOM at event %zu, %s's request of %s (%" G_GUINT64_FORMAT
                     " bytes)%s%s\n    held then:",
                label, r->first_oom_event, r->clients[r->first_oom_client].name, sz,
                r->first_oom_size, at,
                r->stats.num_ooms > 1 ? "; later OOMs counted and skipped" : "");
        g_free(at);
        for (size_t k = 0; k < r->n_clients; k++) {
            const gs_client_result *c = &r->clients[k];
            char *res = gs_format_size(c->reserved_at_oom);
            char *cached = gs_format_size(c->reserved_at_oom - c->allocated_at_oom);
            fprintf(out, "%s %s %s reserved, %s of it cached", k ? ";" : "", c->name, res,
                    cached);
            g_free(res);
            g_free(cached);
        }
        fputc('\n', out);
        g_free(sz);
        if (r->first_oom_report)
            report_oom_lines(out, r->first_oom_report, r->clients[r->first_oom_client].policy);
    } else if (r->oom) {
        char *sz = gs_format_size(r->first_oom_size);
        char *dev = r->n_devices ? g_strdup_printf(" on device %u", r->first_oom_device)
                                 : g_strdup("");
        char *at = oom_at(r);
        fprintf(out, "  %s: first OOM at event %zu%s, a request of %s (%" G_GUINT64_FORMAT
                     " bytes)%s%s\n",
                r->policy, r->first_oom_event, dev, sz, r->first_oom_size, at,
                r->stats.num_ooms > 1 + r->caught_ooms ? "; later OOMs counted and skipped" : "");
        g_free(at);
        g_free(dev);
        g_free(sz);
        if (r->first_oom_report) report_oom_lines(out, r->first_oom_report, r->policy);
    }
    if (r->caught_ooms)
        fprintf(out, "  %s: %zu OOM%s caught and gone past, as the recorded program did\n", label,
                r->caught_ooms, r->caught_ooms > 1 ? "s" : "");
    if (r->error != GS_OK)
        fprintf(out, "  %s: stopped at event %zu: %s: %s\n", r->policy, r->error_event,
                gs_strerror(r->error), r->error_msg ? r->error_msg : "(no detail)");
}

/* One line of the comparison with the real run. */
static void reference_row(FILE *out, const char *label, const gs_result *r, const ref_cmp *c)
{
    char retries[64] = "?", ooms[64] = "?", oc[64];
    if (c->per_device) { /* each device on its own line below */
        g_snprintf(oc, sizeof oc, "%s/%s", c->outcome, outcome(r));
        fprintf(out, "%-44s %-9s %76s  %s\n", label, oc, "",
                !c->same_run ? "no real run" : c->match ? "exact" : "DIFFERS");
        return;
    }
    if (c->has_stats) {
        g_snprintf(retries, sizeof retries, "%" G_GINT64_FORMAT "/%" G_GUINT64_FORMAT,
                   c->retries, r->stats.num_alloc_retries);
        g_snprintf(ooms, sizeof ooms, "%" G_GINT64_FORMAT "/%" G_GUINT64_FORMAT, c->ooms,
                   r->stats.num_ooms);
    }
    g_snprintf(oc, sizeof oc, "%s/%s", c->outcome, outcome(r));
    fprintf(out, "%-44s %-9s %11" G_GINT64_FORMAT "/%-11" G_GINT64_FORMAT
                 " %5" G_GINT64_FORMAT "/%-5" G_GINT64_FORMAT " %5" G_GINT64_FORMAT
                 "/%-5" G_GUINT64_FORMAT " %5" G_GINT64_FORMAT "/%-5" G_GUINT64_FORMAT
                 " %9s %7s  %s\n",
            label, oc, c->peak_reserved, r->stats.reserved_bytes[GS_STAT_ALL].peak, c->segments,
            r->stats.segment[GS_STAT_ALL].allocated, c->device_alloc, r->stats.num_device_alloc,
            c->device_free, r->stats.num_device_free, retries, ooms,
            !c->same_run ? "no real run" : c->match ? "exact" : "DIFFERS");
    if (c->has_event && r->oom && r->first_oom_event != c->event)
        fprintf(out, "%-44s the real run died at event %zu, the simulated one at %zu\n", "",
                c->event, r->first_oom_event);
}

/* The real run (reference) beside each simulated result that has one; with several devices,
 * each device beside its own. */
static void report_references(FILE *out, const gs_result *rs, size_t n,
                              const gs_reference *const *refs)
{
    fprintf(out, "\nreal run (reference) vs simulated:\n");
    fprintf(out, "%-44s %-9s %23s %11s %11s %11s %9s %7s  %s\n", "policy", "outcome",
            "peak reserved", "segments", "dev allocs", "dev frees", "retries", "OOMs", "match");
    for (size_t i = 0; i < n; i++) {
        if (!refs[i]) continue;
        const gs_result *r = &rs[i];
        ref_cmp c = compare(r, refs[i]);
        reference_row(out, r->policy, r, &c);
        for (size_t k = 0; k < r->n_devices; k++) {
            const gs_reference *dref = gs_reference_device(refs[i], r->devices[k].device);
            if (!dref) continue;
            ref_cmp dc = compare(&r->devices[k], dref);
            char *label = g_strdup_printf("  device %u", r->devices[k].device);
            reference_row(out, label, &r->devices[k], &dc);
            g_free(label);
        }
    }
    fprintf(out, "(each pair is real/simulated; 'no real run': another setting or cap than the "
                 "reference run's, a prediction with nothing to compare)\n");
}

/* What the trace can tell, under its first line: where the recorded run died, where its
 * recording began. */
void gs_report_caveats(FILE *out, const gs_trace *t)
{
    gs_trace_caveats cv;
    gs_trace_get_caveats(t, &cv);
    if (cv.fatal_oom)
        fprintf(out, "  the recorded run died at event %zu (an OOM); \"survived\" means a run gets "
                     "that far: the rest of the program is not in the trace\n",
                cv.fatal_oom_event);
    if (cv.died_after_log)
        fprintf(out, "  the recorded run died of an OOM after the recording ends (its NAME.json "
                     "says so): \"survived\" means a run gets through the recording; what killed "
                     "the run, and the rest of the program, are not in the trace\n");
    if (cv.started_mid_run)
        fprintf(out, "  recording started mid-run: %" G_GUINT64_FORMAT " allocation%s synthesized, "
                     "results below that point are approximate\n",
                cv.synthesized, cv.synthesized == 1 ? "" : "s");
    /* the release plain pytorch follows, where it is not 2.11's rules (the table's rows say
     * only "pytorch"; a release the trace names gpusim does not emulate is warned of apart) */
    const char *rec = gs_trace_get_meta(t, "pytorch_version");
    unsigned rel = gs_pytorch_release_of_trace(rec);
    if (rel > GS_PYTORCH_FIRST) {
        char *shown = gs_printable(rec);
        fprintf(out,
                "  recorded with PyTorch %s: plain pytorch replays it as 2.%u (a setting "
                "pytorch@2.N:... names another release)\n",
                shown, rel);
        g_free(shown);
    }
    if (cv.captured) {
        char *how = gs_printable(cv.captured);
        char *unknown = cv.capture_unknown ? gs_printable(cv.capture_unknown) : NULL;
        fprintf(out,
                "  a prediction: the requests were captured on the CPU (%s), not recorded "
                "from a run; not known to the capture: %s\n",
                how, unknown ? unknown : "nothing it counted");
        g_free(how);
        g_free(unknown);
    }
}

const char *gs_report_bound_of_clients(const gs_result *r)
{
    return gs_result_capacity_per_client(r)
               ? "its clients' allocators together: each client's, capped alone, may need less"
               : NULL;
}

/* The trace's bound (sim/bound.h), the same for every result of it: one line, and one per
 * device of a trace that names several. The headline is the devices' sum, as the table's totals
 * are, or with per_device (whatif: a capacity is each device's own limit) the largest device's.
 * The planner always finishes (offline >= lower). */
void gs_report_bound(FILE *out, const gs_result *r, bool per_device)
{
    bool largest = per_device && r->n_devices;
    char *lb = gs_format_size(largest ? (uint64_t)gs_result_per_allocator(r, GS_FIG_LOWER_BOUND)
                                      : r->lower_bound_bytes);
    char *off = gs_format_size(largest ? (uint64_t)gs_result_per_allocator(r, GS_FIG_OFFLINE)
                                       : r->offline_bytes);
    const char *clients = per_device ? gs_report_bound_of_clients(r) : NULL;
    fprintf(out,
            "  bound%s: no allocator needs less than %s (peak live requests, in 2 MiB pages); "
            "an offline planner needs %s%s%s%s\n",
            largest ? ", per device (the largest device's)" : "", lb, off, clients ? " (" : "",
            clients ? clients : "", clients ? ")" : "");
    g_free(lb);
    g_free(off);
    for (size_t k = 0; k < r->n_devices; k++) {
        lb = gs_format_size(r->devices[k].lower_bound_bytes);
        off = gs_format_size(r->devices[k].offline_bytes);
        fprintf(out, "    device %u: %s; offline %s\n", r->devices[k].device, lb, off);
        g_free(lb);
        g_free(off);
    }
}

/* The per-pool rows of the results that have them (a trace with private pools). */
static void report_pools(FILE *out, const gs_result *rs, size_t n, char **labels, int w)
{
    bool any = false;
    for (size_t i = 0; i < n; i++) any |= rs[i].n_pools > 0;
    if (!any) return;
    fprintf(out, "\nby pool (0: the ordinary pools; else the private pool's id in the trace)\n");
    fprintf(out, "%-*s %10s %12s %12s %12s %12s %8s %10s %9s %8s\n", w, "policy", "pool",
            "resv@peak", "peak reserv", "reserv end", "alloc end", "segments", "dev allocs",
            "dev frees", "released");
    for (size_t i = 0; i < n; i++)
        for (size_t k = 0; k < rs[i].n_pools; k++) {
            const gs_pool_result *p = &rs[i].pools[k];
            char *ap = gs_format_size(p->reserved_at_peak), *pr = gs_format_size(p->peak_reserved);
            char *re = gs_format_size(p->reserved_end), *ae = gs_format_size(p->allocated_end);
            fprintf(out, "%-*s %10" G_GUINT32_FORMAT " %12s %12s %12s %12s %8" G_GUINT64_FORMAT
                         " %10" G_GUINT64_FORMAT " %9" G_GUINT64_FORMAT " %8s\n",
                    w, labels[i], p->id, ap, pr, re, ae, p->segments_end, p->device_allocs,
                    p->device_frees, !p->id ? "-" : p->released ? "yes" : "no");
            g_free(ap);
            g_free(pr);
            g_free(re);
            g_free(ae);
        }
}

static void table_row(FILE *out, int w, const char *label, const gs_result *r)
{
    char *pa = gs_format_size((uint64_t)r->stats.allocated_bytes[GS_STAT_ALL].peak);
    char *pr = gs_format_size((uint64_t)r->stats.reserved_bytes[GS_STAT_ALL].peak);
    fprintf(out, "%-*s %-7s %12s %12s %5.1f%% %7" G_GUINT64_FORMAT " %5" G_GUINT64_FORMAT
                 " %10" G_GUINT64_FORMAT " %9" G_GUINT64_FORMAT " %10.2f %8.2f\n",
            w, label, outcome(r), pa, pr, 100.0 * gs_result_frag_peak(r), r->stats.num_alloc_retries,
            r->stats.num_ooms, r->stats.num_device_alloc, r->stats.num_device_free,
            gs_devcalls_total_us(&r->calls) / 1000.0, events_per_s(r) / 1e6);
    g_free(pa);
    g_free(pr);
}

static void report_table(FILE *out, const char *name, const gs_trace *t, const gs_result *rs,
                         size_t n, const gs_reference *const *refs)
{
    char *shown = gs_printable(name); /* a name with a line break keeps the table's lines */
    fprintf(out, "trace %s: %zu events, %zu allocations\n", shown, t->n, t->n_slots);
    g_free(shown);
    gs_report_caveats(out, t);
    if (n) gs_report_bound(out, &rs[0], false);
    char **labels = g_new0(char *, n + 1);
    int w = 6;
    for (size_t i = 0; i < n; i++) {
        labels[i] = result_label(&rs[i]);
        w = MAX(w, (int)strlen(labels[i]));
        for (size_t k = 0; k < rs[i].n_devices; k++) {
            char *dl = device_label(&rs[i].devices[k]);
            w = MAX(w, (int)strlen(dl));
            g_free(dl);
        }
    }
    fprintf(out, "%-*s %-7s %12s %12s %6s %7s %5s %10s %9s %10s %8s\n",
            w, "policy", "outcome", "peak alloc", "peak reserv", "frag", "retries", "OOMs",
            "dev allocs", "dev frees", "device ms", "Mev/s");
    for (size_t i = 0; i < n; i++) {
        table_row(out, w, labels[i], &rs[i]);
        for (size_t k = 0; k < rs[i].n_devices; k++) {
            char *dl = device_label(&rs[i].devices[k]);
            table_row(out, w, dl, &rs[i].devices[k]);
            g_free(dl);
        }
    }
    for (size_t i = 0; i < n; i++) report_outcome(out, &rs[i], labels[i]);
    report_pools(out, rs, n, labels, w);
    report_clients(out, rs, n, labels, w);
    report_calls(out, rs, n, labels, w);
    g_strfreev(labels);
    if (refs) report_references(out, rs, n, refs);
}

#define CSV_COLUMNS                                                                            \
    "policy,capacity_bytes,outcome,first_oom_event,first_oom_size,first_oom_allocated_bytes,"  \
    "first_oom_reserved_bytes,first_oom_free_bytes,first_oom_largest_free_bytes,"              \
    "first_oom_free_too_small_bytes,peak_allocated_bytes,"                                     \
    "peak_reserved_bytes,peak_requested_bytes,frag_peak,waste_bytes,internal_frag,"            \
    "external_frag,num_alloc_retries,num_ooms,num_device_alloc,num_device_free,"               \
    "segments_allocated,device_time_us,replay_events_per_s,lower_bound_bytes,offline_bytes"
/* ... then, for each device call kind K (gs_call_name), n_K and us_K: calls made, time in them;
 * then, when some trace of the output has several clients, these, and a row per client after
 * each result's (the device's) row: */
#define CSV_CLIENT_COLUMNS \
    "arrangement,client,num_reclaim_retries,reserved_at_first_oom,allocated_at_first_oom"

static void csv_field(FILE *out, const char *s)
{
    char *q = gs_csv_quote(s);
    fputs(q, out);
    g_free(q);
}

static void csv_row(FILE *out, const gs_result *r)
{
    const gs_stats *s = &r->stats;
    csv_field(out, r->policy);
    fprintf(out, ",%" G_GUINT64_FORMAT ",%s,", r->capacity, outcome(r));
    if (r->oom) fprintf(out, "%zu,%" G_GUINT64_FORMAT ",", r->first_oom_event, r->first_oom_size);
    else fprintf(out, ",,");
    const gs_oom_report *o = r->first_oom_report;
    if (o)
        fprintf(out, "%" G_GUINT64_FORMAT ",%" G_GUINT64_FORMAT ",%" G_GUINT64_FORMAT
                     ",%" G_GUINT64_FORMAT ",%" G_GUINT64_FORMAT ",",
                o->allocated, o->reserved, o->free_total, o->largest_free, o->free_too_small);
    else fprintf(out, ",,,,,");
    fprintf(out,
            "%" G_GINT64_FORMAT ",%" G_GINT64_FORMAT ",%" G_GINT64_FORMAT ",%.6f,%" G_GINT64_FORMAT
            ",%.6f,%.6f,%" G_GUINT64_FORMAT ",%" G_GUINT64_FORMAT ",%" G_GUINT64_FORMAT
            ",%" G_GUINT64_FORMAT ",%" G_GINT64_FORMAT ",%.1f,%.0f",
            s->allocated_bytes[GS_STAT_ALL].peak, s->reserved_bytes[GS_STAT_ALL].peak,
            s->requested_bytes[GS_STAT_ALL].peak, gs_result_frag_peak(r),
            s->reserved_bytes[GS_STAT_ALL].peak - s->allocated_bytes[GS_STAT_ALL].peak,
            gs_result_internal_frag(r), gs_result_external_frag(r), s->num_alloc_retries,
            s->num_ooms, s->num_device_alloc, s->num_device_free, s->segment[GS_STAT_ALL].allocated,
            gs_devcalls_total_us(&r->calls), events_per_s(r));
    fprintf(out, ",%" G_GUINT64_FORMAT ",%" G_GUINT64_FORMAT, r->lower_bound_bytes,
            r->offline_bytes);
    for (int k = 0; k < GS_CALL_COUNT; k++)
        fprintf(out, ",%" G_GUINT64_FORMAT ",%.1f", r->calls.n[k], r->calls.time_us[k]);
}

static void json_stat(gs_jw *w, const char *name, const char *pool, const gs_stat *st)
{
    static const char *const parts[] = {"allocated", "current", "freed", "peak"};
    const int64_t vals[] = {st->allocated, st->current, st->freed, st->peak};
    for (int i = 0; i < 4; i++) {
        char *key = g_strdup_printf("%s%s%s.%s", name, pool ? "." : "", pool ? pool : "", parts[i]);
        gs_jw_key(w, key);
        gs_jw_int(w, vals[i]);
        g_free(key);
    }
}

static void jw_u(gs_jw *w, const char *key, uint64_t v)
{
    gs_jw_key(w, key);
    gs_jw_uint(w, v);
}

static void jw_i(gs_jw *w, const char *key, int64_t v)
{
    gs_jw_key(w, key);
    gs_jw_int(w, v);
}

static void jw_f(gs_jw *w, const char *key, const char *fmt, double v)
{
    gs_jw_key(w, key);
    gs_jw_num(w, fmt, v);
}

static void jw_s(gs_jw *w, const char *key, const char *v)
{
    gs_jw_key(w, key);
    gs_jw_str(w, v);
}

/* torch.cuda.memory_stats()'s flat dotted keys, so a real run and a simulated one diff cleanly. */
void gs_report_memory_stats(gs_jw *w, const gs_stats *s)
{
    static const char *const pools[GS_STAT_TYPES] = {"all", "small_pool", "large_pool"};
    gs_jw_object(w);
#define JSON_ARRAY(name) \
    for (int t = 0; t < GS_STAT_TYPES; t++) json_stat(w, #name, pools[t], &s->name[t]);
    GS_STAT_ARRAYS(JSON_ARRAY)
#undef JSON_ARRAY
    json_stat(w, "oversize_allocations", NULL, &s->oversize_allocations);
    json_stat(w, "oversize_segments", NULL, &s->oversize_segments);
    jw_u(w, "num_alloc_retries", s->num_alloc_retries);
    jw_u(w, "num_ooms", s->num_ooms);
    jw_u(w, "num_sync_all_streams", s->num_sync_all_streams);
    jw_u(w, "num_device_alloc", s->num_device_alloc);
    jw_u(w, "num_device_free", s->num_device_free);
    /* PyTorch 2.12's key (throw_on_cudamalloc_oom): written when a request was so refused, so
     * the reports of every other setting keep 2.11's keys */
    if (s->num_oom_rejections) jw_u(w, "num_oom_rejections", s->num_oom_rejections);
    jw_i(w, "max_split_size", s->max_split_size);
    gs_jw_object_end(w);
}

/* The peaks and fragmentation every result and every client's part share. */
static void json_peaks(gs_jw *w, const gs_result *r, const gs_stats *s)
{
    jw_i(w, "peak_allocated_bytes", s->allocated_bytes[GS_STAT_ALL].peak);
    jw_i(w, "peak_reserved_bytes", s->reserved_bytes[GS_STAT_ALL].peak);
    jw_i(w, "peak_requested_bytes", s->requested_bytes[GS_STAT_ALL].peak);
    jw_f(w, "frag_peak", "%.6f", gs_result_frag_peak(r));
    jw_i(w, "waste_bytes", s->reserved_bytes[GS_STAT_ALL].peak - s->allocated_bytes[GS_STAT_ALL].peak);
}

static void json_client(gs_jw *w, const gs_result *r, const gs_client_result *c)
{
    gs_result cr = client_as_result(r, c);
    const gs_stats *s = &c->stats;
    gs_jw_key(w, c->name);
    gs_jw_object(w);
    jw_s(w, "policy", c->policy);
    jw_s(w, "outcome", c->oom ? "oom" : "ok");
    if (c->oom) {
        gs_jw_key(w, "first_oom");
        gs_jw_object(w);
        jw_u(w, "event", c->first_oom_event);
        jw_u(w, "size", c->first_oom_size);
        gs_jw_object_end(w);
    }
    json_peaks(w, &cr, s);
    jw_u(w, "num_alloc_retries", s->num_alloc_retries);
    jw_u(w, "num_reclaim_retries", s->num_reclaim_retries);
    jw_u(w, "num_ooms", s->num_ooms);
    jw_u(w, "num_device_alloc", s->num_device_alloc);
    jw_u(w, "num_device_free", s->num_device_free);
    jw_i(w, "segments_allocated", s->segment[GS_STAT_ALL].allocated);
    jw_f(w, "device_time_us", "%.1f", gs_devcalls_total_us(&c->calls));
    jw_i(w, "allocated_bytes", s->allocated_bytes[GS_STAT_ALL].current);
    jw_i(w, "reserved_bytes", s->reserved_bytes[GS_STAT_ALL].current);
    jw_u(w, "released_for_others_bytes", c->released_for_others);
    if (r->oom) {
        gs_jw_key(w, "at_first_oom");
        gs_jw_object(w);
        jw_u(w, "reserved_bytes", c->reserved_at_oom);
        jw_u(w, "allocated_bytes", c->allocated_at_oom);
        jw_u(w, "cached_bytes", c->reserved_at_oom - c->allocated_at_oom);
        gs_jw_object_end(w);
    }
    gs_jw_object_end(w);
}

static void json_reference(gs_jw *w, const gs_result *r, const gs_reference *ref)
{
    ref_cmp c = compare(r, ref);
    gs_jw_object(w);
    jw_s(w, "path", ref->path);
    jw_s(w, "outcome", c.outcome);
    if (c.has_event) jw_u(w, "outcome_event", c.event);
    if (!c.per_device) {
        jw_i(w, "peak_reserved_bytes", c.peak_reserved);
        jw_i(w, "segments_allocated", c.segments);
        jw_i(w, "num_device_alloc", c.device_alloc);
        jw_i(w, "num_device_free", c.device_free);
    }
    if (c.has_stats && !c.per_device) {
        jw_i(w, "num_alloc_retries", c.retries);
        jw_i(w, "num_ooms", c.ooms);
        jw_i(w, "peak_allocated_bytes", c.peak_allocated);
    }
    jw_u(w, "segments_at_reference_addresses", r->script_used);
    gs_jw_key(w, "compared");
    gs_jw_bool(w, c.same_run);
    gs_jw_key(w, "match");
    if (c.same_run) gs_jw_bool(w, c.match);
    else gs_jw_null(w);
    gs_jw_object_end(w);
}

/* The first OOM's report, as members of its first_oom object. */
static void json_oom_report(gs_jw *w, const gs_oom_report *o)
{
    char *msg = gs_oom_message(o);
    jw_s(w, "message", msg);
    g_free(msg);
    if (o->frame) jw_s(w, "frame", o->frame);
    jw_u(w, "rounded_size", o->rounded);
    jw_u(w, "pool", o->pool);
    if (o->private_pool) jw_u(w, "private_pool", o->private_pool);
    jw_u(w, "stream", o->stream);
    jw_u(w, "allocated_bytes", o->allocated);
    jw_u(w, "reserved_bytes", o->reserved);
    jw_u(w, "reserved_unallocated_bytes", o->reserved - MIN(o->reserved, o->allocated));
    jw_u(w, "free_bytes", o->free_total);
    jw_u(w, "free_too_small_bytes", o->free_too_small);
    jw_u(w, "largest_free_bytes", o->largest_free);
    jw_u(w, "largest_free_in_pool_bytes", o->largest_in_pool);
    jw_u(w, "largest_free_on_stream_bytes", o->largest_on_stream);
}

#define JSON_LINE ",\n   " /* a result's members run over a few lines, grouped */

/* show_caught: the trace has oom events, and each result says how many it went past. */
static void json_result(gs_jw *w, const gs_result *r, const gs_reference *ref, bool show_caught)
{
    const gs_stats *s = &r->stats;
    gs_jw_object(w);
    jw_s(w, "policy", r->policy);
    jw_s(w, "backend", r->backend ? r->backend : "sim");
    jw_u(w, "capacity_bytes", r->capacity);
    jw_s(w, "outcome", outcome(r));
    if (r->arrangement) {
        jw_s(w, "arrangement", r->arrangement);
        jw_u(w, "num_reclaim_retries", r->stats.num_reclaim_retries);
    }
    if (r->oom) {
        gs_jw_key(w, "first_oom");
        gs_jw_object(w);
        jw_u(w, "event", r->first_oom_event);
        jw_u(w, "size", r->first_oom_size);
        if (r->n_clients) jw_s(w, "client", r->clients[r->first_oom_client].name);
        if (r->n_devices) jw_u(w, "device", r->first_oom_device);
        if (r->first_oom_report) json_oom_report(w, r->first_oom_report);
        gs_jw_object_end(w);
    }
    if (r->error != GS_OK) {
        gs_jw_key(w, "error");
        gs_jw_object(w);
        jw_u(w, "event", r->error_event);
        jw_s(w, "message", r->error_msg ? r->error_msg : gs_strerror(r->error));
        gs_jw_object_end(w);
    }
    gs_jw_break(w, JSON_LINE);
    json_peaks(w, r, s);
    jw_u(w, "lower_bound_bytes", r->lower_bound_bytes);
    jw_u(w, "offline_bytes", r->offline_bytes);
    jw_f(w, "internal_frag", "%.6f", gs_result_internal_frag(r));
    jw_f(w, "external_frag", "%.6f", gs_result_external_frag(r));
    gs_jw_break(w, JSON_LINE);
    jw_u(w, "num_alloc_retries", s->num_alloc_retries);
    jw_u(w, "num_ooms", s->num_ooms);
    if (show_caught) jw_u(w, "caught_ooms", r->caught_ooms);
    jw_u(w, "num_device_alloc", s->num_device_alloc);
    jw_u(w, "num_device_free", s->num_device_free);
    jw_i(w, "segments_allocated", s->segment[GS_STAT_ALL].allocated);
    jw_f(w, "device_time_us", "%.1f", gs_devcalls_total_us(&r->calls));
    jw_u(w, "events", r->events);
    jw_f(w, "replay_events_per_s", "%.0f", events_per_s(r));
    gs_jw_break(w, JSON_LINE);
    jw_u(w, "device_free_bytes_before", r->dev_free_before);
    jw_u(w, "device_free_bytes_after", r->dev_free_after);
    gs_jw_break(w, JSON_LINE);
    gs_jw_key(w, "device_calls");
    gs_jw_object(w);
    for (int k = 0; k < GS_CALL_COUNT; k++) {
        if (!r->calls.n[k]) continue;
        gs_jw_key(w, gs_call_name((gs_call_kind)k));
        gs_jw_object(w);
        jw_u(w, "n", r->calls.n[k]);
        jw_u(w, "failed", r->calls.failed[k]);
        jw_f(w, "time_us", "%.1f", r->calls.time_us[k]);
        gs_jw_object_end(w);
    }
    gs_jw_object_end(w);
    gs_jw_break(w, JSON_LINE);
    gs_jw_key(w, "memory_stats");
    gs_report_memory_stats(w, s);
    if (r->n_pools) {
        gs_jw_break(w, JSON_LINE);
        gs_jw_key(w, "pools");
        gs_jw_array(w);
        for (size_t k = 0; k < r->n_pools; k++) {
            const gs_pool_result *p = &r->pools[k];
            gs_jw_break(w, ",\n     ");
            gs_jw_object(w);
            jw_u(w, "pool", p->id);
            jw_u(w, "reserved_at_peak_bytes", p->reserved_at_peak);
            jw_u(w, "peak_reserved_bytes", p->peak_reserved);
            jw_u(w, "reserved_end_bytes", p->reserved_end);
            jw_u(w, "allocated_end_bytes", p->allocated_end);
            jw_u(w, "segments_end", p->segments_end);
            jw_u(w, "num_device_alloc", p->device_allocs);
            jw_u(w, "num_device_free", p->device_frees);
            if (p->id) {
                gs_jw_key(w, "released");
                gs_jw_bool(w, p->released);
            }
            gs_jw_object_end(w);
        }
        gs_jw_array_end(w);
    }
    if (r->n_clients) {
        gs_jw_break(w, JSON_LINE);
        gs_jw_key(w, "clients");
        gs_jw_object(w);
        gs_jw_text(w, "\n     ");
        for (size_t k = 0; k < r->n_clients; k++) {
            gs_jw_break(w, ",\n     ");
            json_client(w, r, &r->clients[k]);
        }
        gs_jw_text(w, "\n   ");
        gs_jw_object_end(w);
    }
    if (r->n_devices) {
        /* each device as a result of its own, with the same keys */
        gs_jw_break(w, JSON_LINE);
        gs_jw_key(w, "devices");
        gs_jw_object(w);
        gs_jw_text(w, "\n    ");
        for (size_t k = 0; k < r->n_devices; k++) {
            char id[16];
            g_snprintf(id, sizeof id, "%u", r->devices[k].device);
            gs_jw_break(w, ",\n    ");
            gs_jw_key(w, id);
            json_result(w, &r->devices[k], gs_reference_device(ref, r->devices[k].device),
                        show_caught);
        }
        gs_jw_text(w, "\n   ");
        gs_jw_object_end(w);
    }
    if (ref) {
        gs_jw_break(w, JSON_LINE);
        gs_jw_key(w, "reference");
        json_reference(w, r, ref);
    }
    if (r->json_extra) gs_jw_text(w, r->json_extra);
    gs_jw_object_end(w);
}

static void json_trace(FILE *out, const char *name, const gs_trace *t, const gs_result *rs, size_t n,
                       const gs_reference *const *refs)
{
    GString *g = g_string_new(NULL);
    gs_jw w;
    gs_jw_init(&w, g);
    gs_jw_object(&w);
    jw_s(&w, "trace", name);
    jw_u(&w, "events", t->n);
    jw_u(&w, "allocations", t->n_slots);
    gs_trace_caveats cv;
    gs_trace_get_caveats(t, &cv);
    if (cv.fatal_oom) {
        /* what the trace can tell: the recorded run died here, so a run that gets past it has
         * "survived" that far, and nothing is known of the rest of the program */
        jw_u(&w, "recorded_fatal_oom_event", cv.fatal_oom_event);
        jw_s(&w, "recorded_fatal_oom_note", "the recorded run died at this event; \"survived\" "
                                            "means it gets that far: the rest of the program is "
                                            "not in the trace");
    }
    if (cv.died_after_log) /* (a snapshot dumped before the death: no event to name) */
        jw_s(&w, "recorded_death_note",
             "the recorded run died of an OOM after the trace ends; "
             "\"survived\" means it gets through the trace: what "
             "killed the run is not in it");
    if (cv.started_mid_run) {
        jw_u(&w, "synthesized_allocs", cv.synthesized);
        jw_s(&w, "synthesized_allocs_note", "recording started mid-run: these allocations were "
                                            "synthesized; results are approximate");
    }
    gs_jw_key(&w, "results");
    gs_jw_array(&w);
    gs_jw_text(&w, "\n  ");
    for (size_t i = 0; i < n; i++) {
        gs_jw_break(&w, ",\n  ");
        json_result(&w, &rs[i], refs ? refs[i] : NULL, cv.n_oom_events > 0);
    }
    gs_jw_finish_list(&w, out);
}

/* The client columns of one CSV row: c NULL for the device's row (or a one-client result). */
static void csv_client_cols(FILE *out, const gs_result *r, const gs_client_result *c)
{
    fputc(',', out);
    if (r->arrangement) fputs(r->arrangement, out);
    fputc(',', out);
    if (c) csv_field(out, c->name);
    fprintf(out, ",%" G_GUINT64_FORMAT ",", c ? c->stats.num_reclaim_retries : r->stats.num_reclaim_retries);
    if (r->oom && r->n_clients) {
        uint64_t res = 0, al = 0;
        for (size_t k = 0; k < r->n_clients; k++) {
            if (c && c != &r->clients[k]) continue;
            res += r->clients[k].reserved_at_oom;
            al += r->clients[k].allocated_at_oom;
        }
        fprintf(out, "%" G_GUINT64_FORMAT ",%" G_GUINT64_FORMAT, res, al);
    } else {
        fputc(',', out);
    }
}


unsigned gs_report_columns(const gs_trace *t)
{
    unsigned cols = t->clients->len > 1 ? GS_REPORT_CLIENT_COLUMNS : 0;
    gs_trace_caveats cv;
    gs_trace_get_caveats(t, &cv);
    if (cv.fatal_oom || cv.started_mid_run || cv.n_oom_events) cols |= GS_REPORT_CAVEAT_COLUMNS;
    uint32_t *ids = NULL;
    if (gs_trace_devices(t, &ids) > 1) cols |= GS_REPORT_DEVICE_COLUMNS;
    g_free(ids);
    uint32_t *pids = NULL;
    if (gs_trace_pool_ids(t, &pids)) cols |= GS_REPORT_POOL_COLUMNS;
    g_free(pids);
    return cols;
}

void gs_report(FILE *out, gs_format fmt, const char *name, const gs_trace *t,
               const gs_result *rs, size_t n, const gs_reference *const *refs, bool first)
{
    gs_report_ex(out, fmt, name, t, rs, n, refs, first, gs_report_columns(t));
}

#define CSV_REF_COLUMNS                                                                   \
    "ref_outcome,ref_peak_reserved_bytes,ref_segments_allocated,ref_num_device_alloc,"    \
    "ref_num_alloc_retries,ref_match,ref_num_device_free,ref_num_ooms,ref_outcome_event"
#define CSV_CAVEAT_COLUMNS "recorded_fatal_oom_event,synthesized_allocs,caught_ooms"
#define CSV_DEVICE_COLUMNS "device"
#define CSV_POOL_COLUMNS                                                                   \
    "pool,pool_reserved_at_peak_bytes,pool_peak_reserved_bytes,pool_reserved_end_bytes,"   \
    "pool_allocated_end_bytes,pool_segments_end,pool_num_device_alloc,pool_num_device_free," \
    "pool_released"

/* The number of columns in a list of them. */
static size_t csv_ncols(const char *cols)
{
    size_t n = 1;
    for (const char *c = cols; *c; c++) n += *c == ',';
    return n;
}

/* A pool's row: the trace, the result's policy, capacity and outcome, every other column of
 * the result's row empty (skip of them), then the pool's columns. */
static void csv_pool_row(FILE *out, const char *name, const gs_result *r, const gs_pool_result *p,
                         size_t skip)
{
    csv_field(out, name);
    fputc(',', out);
    csv_field(out, r->policy);
    fprintf(out, ",%" G_GUINT64_FORMAT ",%s", r->capacity, outcome(r));
    for (size_t k = 0; k < skip; k++) fputc(',', out);
    fprintf(out, ",%" G_GUINT32_FORMAT ",%" G_GUINT64_FORMAT ",%" G_GUINT64_FORMAT
                 ",%" G_GUINT64_FORMAT ",%" G_GUINT64_FORMAT ",%" G_GUINT64_FORMAT
                 ",%" G_GUINT64_FORMAT ",%" G_GUINT64_FORMAT ",%s\n",
            p->id, p->reserved_at_peak, p->peak_reserved, p->reserved_end, p->allocated_end,
            p->segments_end, p->device_allocs, p->device_frees,
            !p->id ? "" : p->released ? "true" : "false");
}

/* The reference columns of one CSV row (refs given); ref NULL: none for this row. */
static void csv_ref_cols(FILE *out, const gs_result *r, const gs_reference *ref)
{
    ref_cmp c = compare(r, ref);
    if (!c.have) {
        fprintf(out, ",,,,,,,,,");
        return;
    }
    fprintf(out, ",%s,", c.outcome);
    if (!c.per_device)
        fprintf(out, "%" G_GINT64_FORMAT ",%" G_GINT64_FORMAT ",%" G_GINT64_FORMAT, c.peak_reserved,
                c.segments, c.device_alloc);
    else
        fprintf(out, ",,");
    fputc(',', out);
    if (c.has_stats) fprintf(out, "%" G_GINT64_FORMAT, c.retries);
    fprintf(out, ",%s,", c.match ? "true" : "false");
    if (!c.per_device) fprintf(out, "%" G_GINT64_FORMAT, c.device_free);
    fputc(',', out);
    if (c.has_stats) fprintf(out, "%" G_GINT64_FORMAT, c.ooms);
    fputc(',', out);
    if (c.has_event) fprintf(out, "%zu", c.event);
}

static void csv_caveat_cols(FILE *out, const gs_trace_caveats *cv, const gs_result *r)
{
    fputc(',', out);
    if (cv->fatal_oom) fprintf(out, "%zu", cv->fatal_oom_event);
    fprintf(out, ",%" G_GUINT64_FORMAT ",%zu", cv->synthesized, r->caught_ooms);
}

void gs_report_ex(FILE *out, gs_format fmt, const char *name, const gs_trace *t,
                  const gs_result *rs, size_t n, const gs_reference *const *refs, bool first,
                  unsigned columns)
{
    bool client_columns = columns & GS_REPORT_CLIENT_COLUMNS;
    bool caveat_columns = columns & GS_REPORT_CAVEAT_COLUMNS;
    bool device_columns = columns & GS_REPORT_DEVICE_COLUMNS;
    bool pool_columns = columns & GS_REPORT_POOL_COLUMNS;
    /* a pool row's empty columns: the result's own after policy, capacity and outcome */
    size_t pool_skip = csv_ncols(CSV_COLUMNS) - 3 + 2 * GS_CALL_COUNT +
                       (refs ? csv_ncols(CSV_REF_COLUMNS) : 0) +
                       (client_columns ? csv_ncols(CSV_CLIENT_COLUMNS) : 0) +
                       (caveat_columns ? csv_ncols(CSV_CAVEAT_COLUMNS) : 0) +
                       (device_columns ? csv_ncols(CSV_DEVICE_COLUMNS) : 0);
    gs_trace_caveats cv;
    gs_trace_get_caveats(t, &cv);
    switch (fmt) {
    case GS_FMT_TABLE:
        if (!first) fputc('\n', out);
        report_table(out, name, t, rs, n, refs);
        break;
    case GS_FMT_CSV:
        if (first) {
            fprintf(out, "trace,%s", CSV_COLUMNS);
            for (int k = 0; k < GS_CALL_COUNT; k++)
                fprintf(out, ",n_%s,us_%s", gs_call_name((gs_call_kind)k),
                        gs_call_name((gs_call_kind)k));
            fprintf(out, "%s%s%s%s%s\n", refs ? "," CSV_REF_COLUMNS : "",
                    client_columns ? "," CSV_CLIENT_COLUMNS : "",
                    caveat_columns ? "," CSV_CAVEAT_COLUMNS : "",
                    device_columns ? "," CSV_DEVICE_COLUMNS : "",
                    pool_columns ? "," CSV_POOL_COLUMNS : "");
        }
        for (size_t i = 0; i < n; i++) {
            csv_field(out, name);
            fputc(',', out);
            csv_row(out, &rs[i]);
            if (refs) csv_ref_cols(out, &rs[i], refs[i]);
            if (client_columns) csv_client_cols(out, &rs[i], NULL);
            if (caveat_columns) csv_caveat_cols(out, &cv, &rs[i]);
            if (device_columns) fputc(',', out);
            if (pool_columns) fputs(",,,,,,,,,", out);
            fputc('\n', out);
            for (size_t k = 0; pool_columns && k < rs[i].n_pools; k++)
                csv_pool_row(out, name, &rs[i], &rs[i].pools[k], pool_skip);
            size_t n_client_rows = columns & GS_REPORT_NO_CLIENT_ROWS ? 0 : rs[i].n_clients;
            for (size_t k = 0; client_columns && k < n_client_rows; k++) {
                gs_result cr = client_as_result(&rs[i], &rs[i].clients[k]);
                csv_field(out, name);
                fputc(',', out);
                csv_row(out, &cr);
                if (refs) csv_ref_cols(out, &cr, NULL);
                csv_client_cols(out, &rs[i], &rs[i].clients[k]);
                if (caveat_columns) csv_caveat_cols(out, &cv, &cr);
                if (device_columns) fputc(',', out);
                if (pool_columns) fputs(",,,,,,,,,", out);
                fputc('\n', out);
            }
            for (size_t k = 0; device_columns && k < rs[i].n_devices; k++) {
                const gs_result *dr = &rs[i].devices[k];
                csv_field(out, name);
                fputc(',', out);
                csv_row(out, dr);
                if (refs) csv_ref_cols(out, dr, gs_reference_device(refs[i], dr->device));
                if (client_columns) csv_client_cols(out, dr, NULL);
                if (caveat_columns) csv_caveat_cols(out, &cv, dr);
                fprintf(out, ",%u%s\n", dr->device, pool_columns ? ",,,,,,,,," : "");
            }
        }
        break;
    case GS_FMT_JSON:
        json_trace(out, name, t, rs, n, refs);
        break;
    }
}

/* ---- a sweep: a row per cell ---- */

/* The replay's CSV of n results (0 or 1) of t, with its header line or without: a string to
 * g_free. */
static char *replay_csv(const char *trace_name, const gs_trace *t, const gs_result *r, size_t n,
                        bool header, unsigned columns)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *mem = open_memstream(&buf, &len);
    gs_report_ex(mem, GS_FMT_CSV, trace_name, t, r, n, NULL, header, columns);
    fclose(mem);
    char *s = g_strdup(buf); /* open_memstream's is free()'s, the callers g_free */
    free(buf);
    return s;
}

void gs_sweep_csv(FILE *out, const gs_sweep *s, const char *trace_name, const gs_trace *t,
                  const gs_result *results, const gint *finished)
{
    /* The replay's own CSV rows (report.c), each prefixed with its cell and parameters: one
     * source for the columns, so a sweep's CSV and a replay's never drift apart. Each cell's
     * row is made alone and kept whole: a row is one record, but a quoted field (a trace name)
     * may hold a line break, so the rows of several cells are not split at line ends. */
    unsigned columns =
        (gs_report_columns(t) & ~(unsigned)(GS_REPORT_DEVICE_COLUMNS | GS_REPORT_POOL_COLUMNS)) |
        GS_REPORT_NO_CLIENT_ROWS;
    /* one record per cell: a trace of several devices gives its totals here, one of several
     * clients the whole run's (the rows per client are replay's), one of private pools its
     * allocator's (no pool rows); a shard with no cell still gets the header, so every shard's
     * file has the same first line (the header's names hold no line break) */
    char *head = replay_csv(trace_name, t, results, 0, true, columns);
    GString *o = g_string_new("cell");
    for (guint k = 0; k < s->params->len; k++) {
        g_string_append_c(o, ',');
        gs_csv_field(o, s->params->pdata[k]);
    }
    g_string_append_printf(o, ",%s", head);
    g_free(head);
    for (guint i = 0; i < s->cells->len; i++) {
        if (finished && !g_atomic_int_get(&finished[i])) continue;
        const gs_sweep_cell *c = &g_array_index(s->cells, gs_sweep_cell, i);
        char *row = replay_csv(trace_name, t, &results[i], 1, false, columns);
        g_string_append_printf(o, "%zu", c->index); /* the whole grid's, in a shard too */
        for (guint k = 0; k < s->params->len; k++) {
            g_string_append_c(o, ',');
            gs_csv_field(o, c->values[k]);
        }
        g_string_append_printf(o, ",%s", row);
        g_free(row);
    }
    fwrite(o->str, 1, o->len, out);
    g_string_free(o, TRUE);
}
