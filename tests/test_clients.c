/* test_clients.c - several libraries on one GPU (sim/clients.c): the three arrangements
 * (separate, shared, cooperative), per-client policies, the routing of frees to the allocator
 * that made the allocation, the story of traces/data/dataframe-then-torch.gstrace.gz, and that
 * what each client is charged sums to the device's totals on every scenario and arrangement.
 *
 * Usage: test_clients [TRACE_DATA_DIR] (traces/data; the scenario tests need it). */
#include <string.h>

#include "report.h"
#include "testutil.h"

static const char *data_dir;

static gs_result run_with(const gs_trace *t, const char *spec, const char *const *client_specs,
                          gs_clients_mode mode, uint64_t capacity, bool cont)
{
    GError *err = NULL;
    gs_policy *p = gs_policy_new(spec, &err);
    ck_assert_ptr_nonnull(p);
    gs_policy **cp = g_new0(gs_policy *, t->clients->len);
    for (guint k = 0; client_specs && k < t->clients->len; k++)
        if (client_specs[k]) cp[k] = gs_policy_new(client_specs[k], &err);
    gs_replay_opts o = {.capacity = capacity,
                        .device_total = t->device_total ? t->device_total : 80 * GiB,
                        .continue_on_oom = cont,
                        .clients = mode,
                        .client_policy = (const gs_policy *const *)cp};
    gs_result r;
    ck_assert(gs_replay_run(t, p, &o, &r, &err));
    for (guint k = 0; k < t->clients->len; k++) gs_policy_free(cp[k]);
    g_free(cp);
    gs_policy_free(p);
    return r;
}

static gs_result run(const gs_trace *t, const char *spec, gs_clients_mode mode)
{
    return run_with(t, spec, NULL, mode, 0, false);
}

static const gs_client_result *client(const gs_result *r, const char *name)
{
    for (size_t k = 0; k < r->n_clients; k++)
        if (strcmp(r->clients[k].name, name) == 0) return &r->clients[k];
    ck_abort_msg("no client %s", name);
    return NULL;
}

/* What the clients are charged adds up to the device: every additive number (current values,
 * cumulative increases and decreases, counts of calls, retries and OOMs), and what they held
 * at the first OOM; each client's peak is at most the device's, whose peak is at most their
 * sum. Called on every scenario under every arrangement. */
static void check_sums(const gs_result *r, const char *what)
{
    ck_assert_msg(r->n_clients >= 2, "%s: %zu clients", what, r->n_clients);
    const gs_stats *d = &r->stats;
    gs_stats sum;
    memset(&sum, 0, sizeof sum);
    gs_devcalls calls;
    memset(&calls, 0, sizeof calls);
    int64_t peak_res_sum = 0, peak_alloc_sum = 0;
    uint64_t res_oom = 0, alloc_oom = 0;
    for (size_t k = 0; k < r->n_clients; k++) {
        const gs_stats *s = &r->clients[k].stats;
        const gs_stat *pairs[][2] = {
            {&s->allocation[GS_STAT_ALL], &sum.allocation[GS_STAT_ALL]},
            {&s->allocated_bytes[GS_STAT_ALL], &sum.allocated_bytes[GS_STAT_ALL]},
            {&s->allocated_bytes[GS_STAT_SMALL], &sum.allocated_bytes[GS_STAT_SMALL]},
            {&s->allocated_bytes[GS_STAT_LARGE], &sum.allocated_bytes[GS_STAT_LARGE]},
            {&s->requested_bytes[GS_STAT_ALL], &sum.requested_bytes[GS_STAT_ALL]},
            {&s->requested_bytes[GS_STAT_SMALL], &sum.requested_bytes[GS_STAT_SMALL]},
            {&s->reserved_bytes[GS_STAT_ALL], &sum.reserved_bytes[GS_STAT_ALL]},
            {&s->reserved_bytes[GS_STAT_LARGE], &sum.reserved_bytes[GS_STAT_LARGE]},
            {&s->segment[GS_STAT_ALL], &sum.segment[GS_STAT_ALL]},
        };
        for (size_t i = 0; i < G_N_ELEMENTS(pairs); i++) {
            gs_stat *into = (gs_stat *)pairs[i][1];
            into->current += pairs[i][0]->current;
            into->allocated += pairs[i][0]->allocated;
            into->freed += pairs[i][0]->freed;
        }
        sum.num_alloc_retries += s->num_alloc_retries;
        sum.num_reclaim_retries += s->num_reclaim_retries;
        sum.num_ooms += s->num_ooms;
        sum.num_sync_all_streams += s->num_sync_all_streams;
        sum.num_device_alloc += s->num_device_alloc;
        sum.num_device_free += s->num_device_free;
        gs_devcalls_add(&calls, &r->clients[k].calls);
        peak_res_sum += s->reserved_bytes[GS_STAT_ALL].peak;
        peak_alloc_sum += s->allocated_bytes[GS_STAT_ALL].peak;
        ck_assert_int_le(s->reserved_bytes[GS_STAT_ALL].peak, d->reserved_bytes[GS_STAT_ALL].peak);
        ck_assert_int_le(s->allocated_bytes[GS_STAT_ALL].peak, d->allocated_bytes[GS_STAT_ALL].peak);
        res_oom += r->clients[k].reserved_at_oom;
        alloc_oom += r->clients[k].allocated_at_oom;
    }
#define SAME(field)                                                                          \
    ck_assert_msg(sum.field == d->field, "%s: clients' " #field " sums to %" G_GINT64_FORMAT  \
                  ", the device's is %" G_GINT64_FORMAT, what, (int64_t)sum.field, (int64_t)d->field)
#define SAME_STAT(name, t)                                                                   \
    do {                                                                                     \
        SAME(name[t].current);                                                               \
        SAME(name[t].allocated);                                                             \
        SAME(name[t].freed);                                                                 \
    } while (0)
    SAME_STAT(allocation, GS_STAT_ALL);
    SAME_STAT(allocated_bytes, GS_STAT_ALL);
    SAME_STAT(allocated_bytes, GS_STAT_SMALL);
    SAME_STAT(allocated_bytes, GS_STAT_LARGE);
    SAME_STAT(requested_bytes, GS_STAT_ALL);
    SAME_STAT(requested_bytes, GS_STAT_SMALL);
    SAME_STAT(reserved_bytes, GS_STAT_ALL);
    SAME_STAT(reserved_bytes, GS_STAT_LARGE);
    SAME_STAT(segment, GS_STAT_ALL);
    SAME(num_alloc_retries);
    SAME(num_reclaim_retries);
    SAME(num_ooms);
    SAME(num_sync_all_streams);
    SAME(num_device_alloc);
    SAME(num_device_free);
#undef SAME_STAT
#undef SAME
    for (int k = 0; k < GS_CALL_COUNT; k++) {
        ck_assert_uint_eq(calls.n[k], r->calls.n[k]);
        ck_assert_uint_eq(calls.failed[k], r->calls.failed[k]);
        ck_assert_double_eq_tol(calls.time_us[k], r->calls.time_us[k], 1e-6 * (1 + r->calls.time_us[k]));
    }
    ck_assert_int_le(d->reserved_bytes[GS_STAT_ALL].peak, peak_res_sum);
    ck_assert_int_le(d->allocated_bytes[GS_STAT_ALL].peak, peak_alloc_sum);
    if (r->oom) {
        ck_assert(client(r, r->clients[r->first_oom_client].name)->oom);
        /* the device's reserved bytes at the OOM are what the clients held then */
        ck_assert_uint_le(res_oom, (uint64_t)d->reserved_bytes[GS_STAT_ALL].peak);
        ck_assert_uint_le(alloc_oom, res_oom);
    }
}

static gs_trace *load(const char *name)
{
    char *path = g_build_filename(data_dir, name, NULL);
    GError *err = NULL;
    gs_trace *t = gs_trace_load(path, 0, NULL, NULL, &err);
    ck_assert_msg(t != NULL, "%s", err ? err->message : "");
    g_free(path);
    return t;
}

/* The story: a data-frame library on CuPy's pool peaks near 55 GiB and frees it all, then
 * PyTorch asks for 40 GiB on the 80 GiB device. */
START_TEST(story_separate_ooms_with_the_frame_cached)
{
    gs_trace *t = load("dataframe-then-torch.gstrace.gz");
    const char *specs[] = {NULL, NULL};
    for (guint k = 0; k < t->clients->len; k++)
        if (strcmp(t->clients->pdata[k], "cupy") == 0) specs[k] = "cupy";
    gs_result sep = run_with(t, "pytorch", specs, GS_CLIENTS_SEPARATE, 0, false);
    ck_assert_str_eq(sep.arrangement, "separate");
    ck_assert(sep.oom);
    const gs_client_result *torch = client(&sep, "torch"), *cupy = client(&sep, "cupy");
    ck_assert_str_eq(sep.clients[sep.first_oom_client].name, "torch");
    ck_assert(torch->oom && !cupy->oom);
    ck_assert_uint_eq(torch->first_oom_size, 40 * GiB);
    ck_assert_str_eq(cupy->policy, "cupy");
    ck_assert_str_eq(torch->policy, "pytorch");
    /* the frame's memory: nothing of it in use, about 55 GiB of it cached */
    ck_assert_uint_eq(cupy->allocated_at_oom, 0);
    ck_assert_uint_gt(cupy->reserved_at_oom, 54 * GiB);
    ck_assert_uint_lt(cupy->reserved_at_oom, 56 * GiB);
    ck_assert_uint_ge(torch->stats.num_alloc_retries, 1); /* torch flushed its own cache */
    check_sums(&sep, "story separate");

    gs_result shared = run(t, "pytorch", GS_CLIENTS_SHARED);
    ck_assert(!shared.oom);
    ck_assert_uint_eq(shared.events, t->n);
    ck_assert_str_eq(client(&shared, "cupy")->policy, "pytorch");
    check_sums(&shared, "story shared");

    gs_result coop = run_with(t, "pytorch", specs, GS_CLIENTS_COOPERATIVE, 0, false);
    ck_assert(!coop.oom);
    ck_assert_uint_eq(coop.events, t->n);
    ck_assert_uint_eq(client(&coop, "torch")->stats.num_reclaim_retries, 1);
    ck_assert_uint_eq(coop.stats.num_reclaim_retries, 1);
    ck_assert_uint_gt(client(&coop, "cupy")->released_for_others, 54 * GiB);
    ck_assert_uint_eq(client(&coop, "torch")->released_for_others, 0);
    check_sums(&coop, "story cooperative");
    gs_result_clear(&sep);
    gs_result_clear(&shared);
    gs_result_clear(&coop);
    gs_trace_free(t);
}
END_TEST

/* Every bundled scenario with several clients, under every arrangement and the two policies,
 * stopping at the first OOM and going on past it: the clients sum to the device. */
START_TEST(clients_sum_to_the_device_on_every_scenario)
{
    const char *const traces[] = {"dataframe-then-torch.gstrace.gz", "producer-consumer.gstrace.gz"};
    const char *const specs[] = {"pytorch", "cupy", "pytorch:expandable_segments:True"};
    for (size_t i = 0; i < G_N_ELEMENTS(traces); i++) {
        gs_trace *t = load(traces[i]);
        ck_assert_uint_ge(t->clients->len, 2);
        for (int m = 0; m < GS_CLIENTS_COUNT; m++)
            for (size_t s = 0; s < G_N_ELEMENTS(specs); s++)
                for (int cont = 0; cont < 2; cont++) {
                    char *what = g_strdup_printf("%s %s %s%s", traces[i],
                                                 gs_clients_mode_name((gs_clients_mode)m),
                                                 specs[s], cont ? " continue-on-oom" : "");
                    gs_result r = run_with(t, specs[s], NULL, (gs_clients_mode)m, 0, cont);
                    check_sums(&r, what);
                    if (cont) ck_assert_uint_eq(r.events, t->n);
                    gs_result_clear(&r);
                    g_free(what);
                }
        gs_trace_free(t);
    }
}
END_TEST

/* The producer-consumer pair on its 15 GiB device: with an allocator each, the caches crowd
 * the device out; cooperative allocators get through by asking each other; one shared
 * allocator gets through with the fewest device calls. */
START_TEST(producer_consumer_arrangements)
{
    gs_trace *t = load("producer-consumer.gstrace.gz");
    const char *specs[] = {NULL, NULL};
    for (guint k = 0; k < t->clients->len; k++)
        if (strcmp(t->clients->pdata[k], "cupy") == 0) specs[k] = "cupy";
    gs_result sep = run_with(t, "pytorch", specs, GS_CLIENTS_SEPARATE, 0, false);
    gs_result shared = run(t, "pytorch", GS_CLIENTS_SHARED);
    gs_result coop = run_with(t, "pytorch", specs, GS_CLIENTS_COOPERATIVE, 0, false);
    ck_assert(sep.oom);
    ck_assert(!shared.oom);
    ck_assert(!coop.oom);
    ck_assert_uint_gt(coop.stats.num_reclaim_retries, 0);
    ck_assert_uint_lt(shared.stats.num_device_alloc + shared.stats.num_device_free,
                      coop.stats.num_device_alloc + coop.stats.num_device_free);
    gs_result_clear(&sep);
    gs_result_clear(&shared);
    gs_result_clear(&coop);
    gs_trace_free(t);
}
END_TEST

/* A built trace that touches the corners: a free by another client than the allocating one
 * goes back to the allocating client's allocator; deferred frees, completed by their event or
 * by a flush; empty_cache empties only its client's allocator; small and large pools. */
static gs_trace *corner_trace(void)
{
    gs_trace *t = gs_trace_new();
    uint32_t a = gs_trace_add_alloc(t, "torch", 0, 30 * MiB);
    uint32_t b = gs_trace_add_alloc(t, "cupy", 0, 4096);
    uint32_t c = gs_trace_add_alloc(t, "cupy", 1, 12 * MiB);
    gs_trace_add_free_deferred(t, c);
    uint32_t d = gs_trace_add_alloc(t, "torch", 0, 700 * 1024);
    gs_trace_add_free(t, a);
    gs_trace_add_op(t, GS_OP_EMPTY_CACHE, 0); /* client 0: torch */
    gs_trace_add_free_done(t, c);
    uint32_t e = gs_trace_add_alloc(t, "cupy", 0, 50 * MiB);
    gs_trace_add_free(t, b);
    gs_trace_add_free(t, d);
    gs_trace_add_free_deferred(t, e);
    gs_trace_add_alloc(t, "torch", 0, 70 * MiB); /* still live at the end */
    gs_trace_add_op(t, GS_OP_EMPTY_CACHE, 0);    /* a flush completes e */
    gs_trace_add_free_done(t, e);
    return t;
}

START_TEST(corner_cases_sum_and_route)
{
    gs_trace *t = corner_trace();
    const char *const specs[] = {"pytorch", "cupy", "pytorch:expandable_segments:True"};
    for (int m = 0; m < GS_CLIENTS_COUNT; m++)
        for (size_t s = 0; s < G_N_ELEMENTS(specs); s++) {
            gs_result r = run(t, specs[s], (gs_clients_mode)m);
            char *what = g_strdup_printf("corners %s %s", gs_clients_mode_name((gs_clients_mode)m), specs[s]);
            ck_assert_msg(!r.oom && r.error == GS_OK, "%s", what);
            check_sums(&r, what);
            /* at the end only torch's 70 MiB is live, and nothing is pending */
            ck_assert_int_eq(r.stats.allocated_bytes[GS_STAT_ALL].current,
                             client(&r, "torch")->stats.allocated_bytes[GS_STAT_ALL].current);
            ck_assert_int_eq(client(&r, "cupy")->stats.allocated_bytes[GS_STAT_ALL].current, 0);
            ck_assert_int_eq(client(&r, "cupy")->stats.requested_bytes[GS_STAT_ALL].current, 0);
            ck_assert_int_eq(client(&r, "torch")->stats.requested_bytes[GS_STAT_ALL].current, 70 * MiB);
            gs_result_clear(&r);
            g_free(what);
        }
    gs_trace_free(t);
}
END_TEST

/* A free of what another client allocated returns it to the allocating client's allocator:
 * with separate allocators the torch allocator's numbers drop, not cupy's. */
START_TEST(a_free_goes_to_the_allocating_client)
{
    /* The builder gives a free its allocation's client, so write the trace as text with the
     * free on the other client's line. */
    const char *text = "# gpusim-trace 1\n"
                       "seq,time_us,op,client,device,stream,id,size\n"
                       "0,0,alloc,torch,0,0,1,4194304\n"
                       "1,1,alloc,cupy,0,0,2,1024\n"
                       "2,2,free,cupy,0,0,1,4194304\n";
    GError *err = NULL;
    gs_trace *t = gs_trace_parse("x", text, strlen(text), 0, NULL, NULL, &err);
    ck_assert_msg(t != NULL, "%s", err ? err->message : "");
    gs_result r = run(t, "pytorch", GS_CLIENTS_SEPARATE);
    ck_assert_int_eq(client(&r, "torch")->stats.allocated_bytes[GS_STAT_ALL].current, 0);
    ck_assert_int_eq(client(&r, "torch")->stats.allocated_bytes[GS_STAT_ALL].freed, 4 * MiB);
    ck_assert_int_eq(client(&r, "cupy")->stats.allocated_bytes[GS_STAT_ALL].current, 1024);
    check_sums(&r, "cross-client free");
    gs_result_clear(&r);
    r = run(t, "pytorch", GS_CLIENTS_SHARED);
    ck_assert_int_eq(client(&r, "torch")->stats.allocated_bytes[GS_STAT_ALL].current, 0);
    check_sums(&r, "cross-client free, shared");
    gs_result_clear(&r);
    gs_trace_free(t);
}
END_TEST

/* A trace with one client replays exactly as before, under any arrangement: no clients part,
 * the same numbers as its one allocator. */
START_TEST(one_client_is_unchanged)
{
    gs_trace *one = gs_trace_new();
    uint32_t a = gs_trace_add_alloc(one, "torch", 0, 30 * MiB);
    gs_trace_add_alloc(one, "torch", 0, 4096);
    gs_trace_add_free(one, a);
    for (int m = 0; m < GS_CLIENTS_COUNT; m++) {
        gs_result r = run(one, "pytorch", (gs_clients_mode)m);
        ck_assert_ptr_null(r.clients);
        ck_assert_ptr_null(r.arrangement);
        ck_assert_uint_eq(r.n_clients, 0);
        ck_assert_int_eq(r.stats.reserved_bytes[GS_STAT_ALL].peak, 32 * MiB);
        ck_assert_uint_eq(r.stats.num_reclaim_retries, 0);
        gs_result_clear(&r);
    }
    gs_trace_free(one);
}
END_TEST

/* A client's own limit is not the device's refusal: cooperative allocators do not ask the
 * others then, and --capacity holds for each allocator. */
START_TEST(cooperative_does_not_reclaim_for_a_limit)
{
    gs_trace *t = gs_trace_new();
    uint32_t a = gs_trace_add_alloc(t, "cupy", 0, 60 * MiB);
    gs_trace_add_free(t, a);
    gs_trace_add_alloc(t, "torch", 0, 60 * MiB);
    gs_trace_add_alloc(t, "torch", 0, 60 * MiB); /* over torch's own 100 MiB */
    gs_result r = run_with(t, "pytorch", NULL, GS_CLIENTS_COOPERATIVE, 100 * MiB, false);
    ck_assert(r.oom);
    ck_assert_uint_eq(r.first_oom_event, 3);
    ck_assert_uint_eq(r.stats.num_reclaim_retries, 0);
    ck_assert_uint_eq(client(&r, "cupy")->released_for_others, 0);
    ck_assert_uint_eq(client(&r, "cupy")->reserved_at_oom, 60 * MiB);
    check_sums(&r, "limit");
    gs_result_clear(&r);
    gs_trace_free(t);
}
END_TEST

static Suite *clients_suite(void)
{
    Suite *s = suite_create("clients");
    TCase *tc = tcase_create("built");
    tcase_add_test(tc, corner_cases_sum_and_route);
    tcase_add_test(tc, a_free_goes_to_the_allocating_client);
    tcase_add_test(tc, one_client_is_unchanged);
    tcase_add_test(tc, cooperative_does_not_reclaim_for_a_limit);
    suite_add_tcase(s, tc);
    if (data_dir) {
        TCase *tt = tcase_create("scenarios");
        tcase_set_timeout(tt, 120);
        tcase_add_test(tt, story_separate_ooms_with_the_frame_cached);
        tcase_add_test(tt, clients_sum_to_the_device_on_every_scenario);
        tcase_add_test(tt, producer_consumer_arrangements);
        suite_add_tcase(s, tt);
    }
    return s;
}

int main(int argc, char **argv)
{
    data_dir = argc > 1 ? argv[1] : NULL;
    return run_suite(clients_suite());
}
