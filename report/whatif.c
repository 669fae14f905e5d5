/* whatif.c - the verdict of gpusim whatif: one table (or CSV, JSON) of the candidate settings,
 * most memory saved first, and a recommendation in words.
 */
#include <string.h>

#include "report.h"

/* The device frees as gpusim replay counts them (num_device_free: cudaFree calls and page
 * unmaps that succeeded), so the two commands give one number for one run. */
static uint64_t device_frees(const gs_result *r) { return r->stats.num_device_free; }

static bool ok_at_cap(const gs_whatif_row *r) { return !r->at_cap.oom && r->at_cap.error == GS_OK; }

const char *gs_whatif_outcome(const gs_whatif_row *r) { return gs_result_outcome(&r->at_cap); }

/* Device time against the default's: 1.0 is the same; 0 when there is no default to compare,
 * or the two replays at the cap did not get as far (one died of an OOM sooner): the time of a
 * run to its failure is no cost of the run, and read as one it made a setting that dies look
 * cheaper than the default that completes. */
double gs_whatif_vs_default(const gs_whatif_row *r, const gs_whatif_row *dflt)
{
    if (!dflt || r->at_cap.events != dflt->at_cap.events ||
        strcmp(gs_whatif_outcome(r), gs_whatif_outcome(dflt)) != 0)
        return 0;
    double d = gs_devcalls_total_us(&dflt->at_cap.calls);
    return d > 0 ? gs_devcalls_total_us(&r->at_cap.calls) / d : 0;
}

/* The cost against the default as time first, then the ratio ("+1.76 ms (+13%)"): a ratio of
 * two small times alone reads as a large cost. */
static void vs_default_text(char *buf, size_t n, const gs_whatif_row *r, const gs_whatif_row *dflt)
{
    double v = gs_whatif_vs_default(r, dflt);
    if (v <= 0) {
        g_strlcpy(buf, "-", n);
        return;
    }
    double ms = (gs_devcalls_total_us(&r->at_cap.calls) - gs_devcalls_total_us(&dflt->at_cap.calls)) /
                1000.0;
    g_snprintf(buf, n, "%+.2f ms (%+.0f%%)", ms, 100.0 * (v - 1.0));
}

/* "at the cap of 5.75 GiB (recorded cap)", or "with no cap". A cap of a GiB or more that is
 * no round number of GiB (PyTorch's limit under a memory fraction, 2147483647 B; a device's
 * memory, 81079 MiB) is said in GiB, as every other figure, with its exact value beside it.
 * g_free it. */
static char *cap_phrase(const gs_whatif_cap *cap)
{
    if (!cap->capacity) return g_strdup("with no cap");
    char *exact = gs_format_capacity(cap->capacity, " ");
    GString *g = g_string_new("at the cap of ");
    /* in the parentheses: the exact value, where GiB rounded it, then where the cap came from */
    GPtrArray *said = g_ptr_array_new();
    if (cap->capacity >= GS_GiB && !g_str_has_suffix(exact, "GiB")) {
        char *shown = gs_format_size(cap->capacity);
        g_string_append(g, shown);
        g_free(shown);
        g_ptr_array_add(said, exact);
    } else {
        g_string_append(g, exact);
    }
    if (cap->source) g_ptr_array_add(said, (char *)cap->source);
    for (guint i = 0; i < said->len; i++)
        g_string_append_printf(g, "%s%s", i ? ", " : " (", (char *)said->pdata[i]);
    if (said->len) g_string_append_c(g, ')');
    g_ptr_array_free(said, TRUE);
    g_free(exact);
    return g_string_free(g, FALSE);
}

/* after "The trace ends where the recorded run died," (or "before ...") */
static const char next_steps[] =
    " so every minimum capacity here is a lower bound: the rest of the program may need more. "
    "To know, record the whole program (with no cap or on a larger device, or under gpusim's "
    "library with GPUSIM_TRACE) and ask again, or run it under a setting with gpusim verify.";

/* What --assume-repeat could do for a dying trace, in words appended to the verdict. */
static void period_words(GString *g, const gs_whatif_cap *cap)
{
    if (cap->period)
        g_string_append_printf(g, " Or assume the program goes on as it went: its requests "
                                  "repeat every %zu events, and --assume-repeat N replays N more "
                                  "of them past the death.", cap->period);
    else if (cap->no_period)
        g_string_append_printf(g, " (--assume-repeat cannot help: %s.)", cap->no_period);
}

/* Of a trace that ends where its run died: what the replays say about getting past that point
 * (never that a setting "completes": the rest of the program is unknown). */
static char *dying_recommendation(const gs_trace *t, const gs_whatif_cap *cap,
                                  const gs_whatif_row *rec, const gs_whatif_row *best_ok,
                                  const gs_whatif_row *least)
{
    gs_trace_caveats cv;
    gs_trace_get_caveats(t, &cv);
    char *where = cap_phrase(cap);
    GString *g = g_string_new(NULL);
    if (rec && !ok_at_cap(rec) && rec->at_cap.oom) {
        if (rec->at_cap.first_oom_event == cv.fatal_oom_event)
            g_string_append_printf(g, "The recorded setting (%s) fails %s at event %zu, as the "
                                      "recorded run did.", rec->pol->spec, where, cv.fatal_oom_event);
        else
            g_string_append_printf(g, "The recorded setting (%s) fails %s at event %zu (the "
                                      "recorded run died at event %zu).", rec->pol->spec, where,
                                   rec->at_cap.first_oom_event, cv.fatal_oom_event);
    } else if (rec && ok_at_cap(rec)) {
        g_string_append_printf(g, "The recorded setting (%s) gets past event %zu %s, where the "
                                  "recorded run died: this replay does not reproduce the death "
                                  "(is the cap the run's?).", rec->pol->spec, cv.fatal_oom_event,
                               where);
    }
    if (best_ok) {
        char *m = gs_format_size(best_ok->search.min_capacity);
        g_string_append_printf(g, "%s%s gets past that point %s, and needs at least %s to get "
                                  "there.", g->len ? " " : "", best_ok->pol->spec, where, m);
        g_free(m);
    } else if (least) {
        char *m = gs_format_size(least->search.min_capacity);
        g_string_append_printf(g, "%sNo candidate gets past that point %s; the least memory to "
                                  "get there is %s's: at least %s.", g->len ? " " : "", where,
                               least->pol->spec, m);
        g_free(m);
    } else {
        g_string_append_printf(g, "%sNo candidate gets past that point at any capacity up to the "
                                  "device's memory.", g->len ? " " : "");
    }
    g_string_append(g, " The trace ends where the recorded run died,");
    g_string_append(g, next_steps);
    period_words(g, cap);
    g_free(where);
    return g_string_free(g, FALSE);
}

/* Of a trace that stops before its run died (died_after_log): what the replays say about getting
 * through the recording, never that a setting completes or saves the run (what killed it is not
 * in the trace: whatif said "completes at the cap" of a run that died). */
static char *stopped_recommendation(const gs_whatif_cap *cap, const gs_whatif_row *rec,
                                    const gs_whatif_row *best_ok, const gs_whatif_row *least)
{
    char *where = cap_phrase(cap);
    GString *g = g_string_new("The recording stops before the recorded run died of an OOM (its "
                              "NAME.json says it died; the log holds no OOM): what killed the run "
                              "is not in it.");
    if (rec)
        g_string_append_printf(g, " The recorded setting (%s) %s the recording %s.", rec->pol->spec,
                               ok_at_cap(rec) ? "gets through" : "fails within", where);
    if (best_ok) {
        char *m = gs_format_size(best_ok->search.min_capacity);
        g_string_append_printf(g, " %s gets through it %s, and needs at least %s to get that far.",
                               best_ok->pol->spec, where, m);
        g_free(m);
    } else if (least) {
        char *m = gs_format_size(least->search.min_capacity);
        g_string_append_printf(g,
                               " No candidate gets through it %s; the least memory to do so is "
                               "%s's: at least %s.",
                               where, least->pol->spec, m);
        g_free(m);
    }
    g_string_append(g, " The trace ends before the recorded run died,");
    g_string_append(g, next_steps);
    g_free(where);
    return g_string_free(g, FALSE);
}

char *gs_whatif_recommendation(const GPtrArray *rows, const gs_trace *t, const gs_whatif_cap *cap)
{
    const gs_whatif_row *rec = NULL, *best_ok = NULL, *least = NULL;
    uint64_t capacity = cap->capacity;
    for (guint i = 0; i < rows->len; i++) {
        const gs_whatif_row *r = rows->pdata[i];
        if (r->recorded) rec = r;
        if (r->search.found && (!least || r->search.min_capacity < least->search.min_capacity))
            least = r;
        if (ok_at_cap(r) && r->search.found &&
            (!best_ok || r->search.min_capacity < best_ok->search.min_capacity))
            best_ok = r;
    }
    gs_trace_caveats cv;
    gs_trace_get_caveats(t, &cv);
    if (cv.fatal_oom) return dying_recommendation(t, cap, rec, best_ok, least);
    if (cv.died_after_log) return stopped_recommendation(cap, rec, best_ok, least);
    char *where = cap_phrase(cap);
    char *out;
    if (!least && cap->clients_complete) {
        out =
            g_strdup_printf("No candidate completes this trace with its %u clients each on a cache "
                            "of its own (separate): each keeps what it freed, and together they "
                            "hold more than the device has. With --clients %s the recorded "
                            "setting completes (gpusim whatif --clients MODE finds its minimum).",
                            t->clients->len, cap->clients_complete);
    } else if (!least) {
        out = g_strdup_printf("No candidate completes this trace at any capacity up to the device's "
                              "memory: the trace needs more than the device has.");
    } else if (!best_ok) {
        char *m = gs_format_size(least->search.min_capacity);
        char *more = gs_format_size(least->search.min_capacity - capacity);
        out = g_strdup_printf("No candidate completes %s. The least memory is %s's: "
                              "%s, %s more than the cap.", where, least->pol->spec, m, more);
        g_free(m);
        g_free(more);
    } else {
        char *m = gs_format_size(best_ok->search.min_capacity);
        char *head = gs_format_size(capacity - MIN(capacity, best_ok->search.min_capacity));
        if (rec && !ok_at_cap(rec))
            out = g_strdup_printf("The recorded setting (%s) fails %s; %s completes "
                                  "there, needing %s (%s of headroom).",
                                  rec->pol->spec, where, best_ok->pol->spec, m, head);
        else if (rec && best_ok != rec && rec->search.found &&
                 rec->search.min_capacity > best_ok->search.min_capacity) {
            char *saved = gs_format_size(rec->search.min_capacity - best_ok->search.min_capacity);
            out = g_strdup_printf("The recorded setting (%s) completes %s; %s needs "
                                  "least, %s (%s less).",
                                  rec->pol->spec, where, best_ok->pol->spec, m, saved);
            g_free(saved);
        } else {
            out = g_strdup_printf("The recorded setting (%s) completes %s and needs "
                                  "least: %s.",
                                  best_ok->pol->spec, where, m);
        }
        g_free(m);
        g_free(head);
        if (best_ok->search.fails_above) { /* the minimum is no promise for more memory */
            char *f = gs_format_size(best_ok->search.fails_above), *o = out;
            out = g_strdup_printf("%s It fails at %s, though, above that minimum (!).", o, f);
            g_free(o);
            g_free(f);
        }
    }
    g_free(where);
    if (cv.captured) { /* a verdict on captured requests says so first */
        char *o = out;
        out = g_strdup_printf("Predicted from a CPU capture: %s", o);
        g_free(o);
    }
    if (cap->assumption) { /* a verdict on an assumed continuation says so first */
        char *o = out;
        out = g_strdup_printf("Assuming %s: %s", cap->assumption, o);
        g_free(o);
    }
    return out;
}

/* A row's minimum capacity in the table: "5.611 GiB", ">= 5.611 GiB" of a dying trace. */
static char *min_text(const gs_whatif_row *r, bool dies)
{
    if (!r->search.found) return g_strdup("none");
    char *m = gs_format_size(r->search.min_capacity);
    char *out = dies ? g_strdup_printf(">= %s", m) : g_strdup(m);
    g_free(m);
    return out;
}

static void table(FILE *out, const char *name, const gs_trace *t, const GPtrArray *rows,
                  const gs_whatif_cap *cap, const char *rec_text)
{
    gs_trace_caveats cv;
    gs_trace_get_caveats(t, &cv);
    const gs_whatif_row *dflt = gs_whatif_default(rows);
    uint64_t capacity = cap->capacity;
    char *where = cap_phrase(cap);
    char *shown = gs_printable(name); /* a name with a line break keeps the table's lines */
    fprintf(out, "whatif %s: %zu events, %s\n", shown, t->n, where);
    g_free(shown);
    g_free(where);
    gs_report_caveats(out, t); /* a minimum capacity of a dying trace: to get that far */
    if (cap->assumption) fprintf(out, "  assumed, not recorded: %s\n", cap->assumption);
    /* the trace's bound (sim/bound.h): no minimum capacity can be below it */
    if (rows->len) gs_report_bound(out, &((const gs_whatif_row *)rows->pdata[0])->at_cap, true);
    int w = 7, wm = 12;
    for (guint i = 0; i < rows->len; i++) {
        const gs_whatif_row *r = rows->pdata[i];
        w = MAX(w, (int)strlen(r->pol->spec) + (r->recorded ? 11 : 0));
        char *m = min_text(r, cv.dies);
        wm = MAX(wm, (int)strlen(m));
        g_free(m);
    }
    fprintf(out, "%-*s %-8s %*s %13s %7s %9s %9s %18s\n", w, "setting", "at cap", wm + 1,
            "min capacity", "headroom", "retries", "dev frees", "device ms", "vs dflt");
    bool any_nonmono = false;
    for (guint i = 0; i < rows->len; i++) {
        const gs_whatif_row *r = rows->pdata[i];
        char *label = g_strdup_printf("%s%s", r->pol->spec, r->recorded ? " (recorded)" : "");
        char *minc = min_text(r, cv.dies);
        char *head;
        if (!r->search.found || !capacity) head = g_strdup("-");
        else if (r->search.min_capacity <= capacity) {
            char *h = gs_format_size(capacity - r->search.min_capacity);
            head = g_strdup_printf("%s", h);
            g_free(h);
        } else {
            char *h = gs_format_size(r->search.min_capacity - capacity);
            head = g_strdup_printf("-%s", h);
            g_free(h);
        }
        char vs[48];
        vs_default_text(vs, sizeof vs, r, dflt);
        const char *oc = gs_whatif_outcome(r);
        fprintf(out, "%-*s %-8s %*s%s %13s %7" G_GUINT64_FORMAT " %9" G_GUINT64_FORMAT
                     " %9.2f %18s\n",
                w, label, strcmp(oc, "oom") == 0 ? "OOM" : oc, wm, minc,
                r->search.fails_above ? "!" : " ", head, r->at_cap.stats.num_alloc_retries,
                device_frees(&r->at_cap), gs_devcalls_total_us(&r->at_cap.calls) / 1000.0, vs);
        any_nonmono |= r->search.fails_above != 0;
        g_free(label);
        g_free(minc);
        g_free(head);
    }
    if (any_nonmono) {
        fputs("! the setting fails at a larger capacity than its minimum:\n", out);
        for (guint i = 0; i < rows->len; i++) {
            const gs_whatif_row *r = rows->pdata[i];
            if (!r->search.fails_above) continue;
            char *f = gs_format_size(r->search.fails_above);
            fprintf(out, "  %s fails at %s\n", r->pol->spec, f);
            g_free(f);
        }
    }
    /* requests the recorded program saw fail and went past (oom events before the end): a
     * replay fails them too, where memory is short, and goes on as the program did */
    size_t caught = cv.n_oom_events - (cv.fatal_oom ? 1 : 0);
    char *caught_words =
        caught ? g_strdup_printf("; ok, min capacity: no OOM but at the %zu request%s the recorded "
                                 "program caught failing and went past",
                                 caught, caught == 1 ? "" : "s")
               : g_strdup("");
    fprintf(
        out,
        "(at cap, retries, dev frees (cudaFree calls and expandable segments' blocks unmapped, "
        "as gpusim replay counts them), device ms: the replay at the cap; vs dflt: its modelled device time "
        "against the default setting's, - where one of the two died sooner%s%s)\n",
        caught_words,
        cv.fatal_oom        ? "; survived: gets past the point where the recorded run died, and "
                              ">= : the memory to get that far, a lower bound"
        : cv.died_after_log ? "; survived: gets through the recording, which stops before the "
                              "run died, and >= : the memory to get that far, a lower bound"
                            : "");
    g_free(caught_words);
    fprintf(out, "\n%s\n", rec_text);
}

static void csv(FILE *out, const char *name, const gs_trace *t, const GPtrArray *rows,
                const gs_whatif_cap *cap)
{
    gs_trace_caveats cv;
    gs_trace_get_caveats(t, &cv);
    const gs_whatif_row *dflt = gs_whatif_default(rows);
    uint64_t capacity = cap->capacity;
    fputs("trace,policy,recorded,capacity_bytes,outcome,min_capacity_bytes,fails_above_bytes,"
          "headroom_bytes,num_alloc_retries,num_ooms,device_frees,device_time_us,"
          "device_time_vs_default,peak_reserved_bytes,replays,lower_bound_bytes,offline_bytes,"
          "min_capacity_is_lower_bound,capacity_source,assumption\n", out);
    char *tq = gs_csv_quote(name);
    char *sq = gs_csv_quote(cap->source ? cap->source : "");
    char *aq = gs_csv_quote(cap->assumption ? cap->assumption : "");
    for (guint i = 0; i < rows->len; i++) {
        const gs_whatif_row *r = rows->pdata[i];
        char *pq = gs_csv_quote(r->pol->spec);
        fprintf(out, "%s,%s,%d,", tq, pq, r->recorded);
        if (capacity) fprintf(out, "%" G_GUINT64_FORMAT, capacity);
        fprintf(out, ",%s,", gs_whatif_outcome(r));
        if (r->search.found) fprintf(out, "%" G_GUINT64_FORMAT, r->search.min_capacity);
        fputc(',', out);
        if (r->search.fails_above) fprintf(out, "%" G_GUINT64_FORMAT, r->search.fails_above);
        fputc(',', out);
        if (r->search.found && capacity)
            fprintf(out, "%" G_GINT64_FORMAT, (int64_t)capacity - (int64_t)r->search.min_capacity);
        fprintf(out, ",%" G_GUINT64_FORMAT ",%" G_GUINT64_FORMAT ",%" G_GUINT64_FORMAT ",%.1f,",
                r->at_cap.stats.num_alloc_retries, r->at_cap.stats.num_ooms,
                device_frees(&r->at_cap), gs_devcalls_total_us(&r->at_cap.calls));
        double vs = gs_whatif_vs_default(r, dflt);
        if (vs > 0) fprintf(out, "%.4f", vs); /* empty: none (JSON's null) */
        fprintf(out,
                ",%" G_GINT64_FORMAT ",%u,%" G_GUINT64_FORMAT ",%" G_GUINT64_FORMAT ",%d,%s,%s\n",
                gs_result_per_allocator(&r->at_cap, GS_FIG_RESERVED_PEAK),
                r->search.probes + r->replays,
                (uint64_t)gs_result_per_allocator(&r->at_cap, GS_FIG_LOWER_BOUND),
                (uint64_t)gs_result_per_allocator(&r->at_cap, GS_FIG_OFFLINE),
                cv.dies && r->search.found, sq, aq);
        g_free(pq);
    }
    g_free(aq);
    g_free(sq);
    g_free(tq);
}

static void json(FILE *out, const char *name, const gs_trace *t, const GPtrArray *rows,
                 const gs_whatif_cap *cap, const char *rec_text)
{
    gs_trace_caveats cv;
    gs_trace_get_caveats(t, &cv);
    const gs_whatif_row *dflt = gs_whatif_default(rows);
    uint64_t capacity = cap->capacity;
    GString *g = g_string_new(NULL);
    gs_jw w;
    gs_jw_init(&w, g);
    gs_jw_object(&w);
    gs_jw_key(&w, "trace");
    gs_jw_str(&w, name);
    gs_jw_key(&w, "trace_events"); /* what a row's replayed_events are counted against */
    gs_jw_uint(&w, t->n);
    gs_jw_key(&w, "capacity_bytes");
    if (capacity) gs_jw_uint(&w, capacity);
    else gs_jw_null(&w);
    gs_jw_key(&w, "capacity_source");
    if (cap->source) gs_jw_str(&w, cap->source);
    else gs_jw_null(&w);
    gs_jw_key(&w, "device_total_bytes");
    if (cap->device_total) gs_jw_uint(&w, cap->device_total);
    else gs_jw_null(&w);
    gs_jw_key(&w, "step_bytes");
    gs_jw_uint(&w, GS_WHATIF_STEP);
    gs_jw_key(&w, "recommendation");
    gs_jw_str(&w, rec_text);
    /* what the trace can tell: a minimum capacity of a trace that ends where its run died is
     * the memory to get that far */
    gs_jw_key(&w, "recorded_fatal_oom_event");
    if (cv.fatal_oom) gs_jw_uint(&w, cv.fatal_oom_event);
    else gs_jw_null(&w);
    gs_jw_key(&w, "synthesized_allocs");
    gs_jw_uint(&w, cv.synthesized);
    gs_jw_key(&w, "assumption");
    if (cap->assumption) gs_jw_str(&w, cap->assumption);
    else gs_jw_null(&w);
    if (cv.captured) { /* (only a capture's verdict has these) */
        gs_jw_key(&w, "captured");
        gs_jw_str(&w, cv.captured);
        gs_jw_key(&w, "capture_unknown");
        if (cv.capture_unknown) gs_jw_str(&w, cv.capture_unknown);
        else gs_jw_null(&w);
    }
    gs_jw_key(&w, "period_events");
    if (cap->period) gs_jw_uint(&w, cap->period);
    else gs_jw_null(&w);
    gs_jw_key(&w, "results");
    gs_jw_array(&w);
    for (guint i = 0; i < rows->len; i++) {
        const gs_whatif_row *r = rows->pdata[i];
        gs_jw_break(&w, ",\n  ");
        if (i == 0) gs_jw_text(&w, "\n  ");
        gs_jw_object(&w);
        gs_jw_key(&w, "policy");
        gs_jw_str(&w, r->pol->spec);
        gs_jw_key(&w, "recorded");
        gs_jw_bool(&w, r->recorded);
        gs_jw_key(&w, "outcome");
        gs_jw_str(&w, gs_whatif_outcome(r));
        gs_jw_key(&w, "min_capacity_bytes");
        if (r->search.found) gs_jw_uint(&w, r->search.min_capacity);
        else gs_jw_null(&w);
        gs_jw_key(&w, "min_capacity_is_lower_bound");
        gs_jw_bool(&w, cv.dies && r->search.found);
        gs_jw_key(&w, "fails_above_bytes");
        if (r->search.fails_above) gs_jw_uint(&w, r->search.fails_above);
        else gs_jw_null(&w);
        gs_jw_key(&w, "headroom_bytes");
        if (r->search.found && capacity)
            gs_jw_int(&w, (int64_t)capacity - (int64_t)r->search.min_capacity);
        else gs_jw_null(&w);
        gs_jw_key(&w, "retries");
        gs_jw_uint(&w, r->at_cap.stats.num_alloc_retries);
        gs_jw_key(&w, "num_ooms");
        gs_jw_uint(&w, r->at_cap.stats.num_ooms);
        gs_jw_key(&w, "first_oom_event");
        if (r->at_cap.oom) gs_jw_uint(&w, r->at_cap.first_oom_event);
        else gs_jw_null(&w);
        gs_jw_key(&w, "device_frees");
        gs_jw_uint(&w, device_frees(&r->at_cap));
        gs_jw_key(&w, "device_time_us");
        gs_jw_num(&w, "%.1f", gs_devcalls_total_us(&r->at_cap.calls));
        gs_jw_key(&w, "device_time_vs_default");
        double v = gs_whatif_vs_default(r, dflt);
        if (v > 0) gs_jw_num(&w, "%.4f", v);
        else gs_jw_null(&w);
        gs_jw_key(&w, "peak_reserved_bytes");
        gs_jw_int(&w, gs_result_per_allocator(&r->at_cap, GS_FIG_RESERVED_PEAK));
        gs_jw_key(&w, "replays");
        gs_jw_uint(&w, r->search.probes + r->replays);
        gs_jw_key(&w, "replayed_events"); /* theirs, all together */
        gs_jw_uint(&w, r->replayed_events);
        gs_jw_key(&w, "lower_bound_bytes");
        gs_jw_int(&w, gs_result_per_allocator(&r->at_cap, GS_FIG_LOWER_BOUND));
        gs_jw_key(&w, "offline_bytes");
        gs_jw_int(&w, gs_result_per_allocator(&r->at_cap, GS_FIG_OFFLINE));
        gs_jw_object_end(&w);
    }
    gs_jw_finish_list(&w, out);
}

void gs_whatif_report(FILE *out, gs_format fmt, const char *name, const gs_trace *t,
                      const GPtrArray *rows, const gs_whatif_cap *cap)
{
    char *rec = gs_whatif_recommendation(rows, t, cap);
    if (fmt == GS_FMT_JSON) json(out, name, t, rows, cap, rec);
    else if (fmt == GS_FMT_CSV) csv(out, name, t, rows, cap);
    else table(out, name, t, rows, cap, rec);
    g_free(rec);
}
