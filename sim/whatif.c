/* whatif.c - the minimum capacity of a trace under each candidate setting (whatif.h). */
#include <errno.h>
#include <fcntl.h>
#ifdef __GLIBC__
#include <malloc.h>
#endif
#include <poll.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "probe.h"
#include "whatif.h"

/* The replays of one search, remembered by step: each is a whole replay, and the steps near the
 * answer and the grids come back to capacities the bisection already tried (5-11 of 34-47 on a
 * threshold). At most a few dozen: a list. */
typedef struct {
    gs_whatif_probe_fn probe;
    void *ud;
    uint64_t step;
    gs_whatif_search *out;
    GArray *done; /* probe_done */
} prober;

typedef struct {
    uint64_t lo, hi; /* the steps it answers for, lo <= hi: the one replayed, or more */
    bool ok;
} probe_done;

/* Does the trace complete at k steps? Replayed once (counted in out->probes), then remembered
 * with every step the replay answered for too. */
static bool ok_at(prober *p, uint64_t k)
{
    for (guint i = 0; i < p->done->len; i++) {
        const probe_done *d = &g_array_index(p->done, probe_done, i);
        if (d->lo <= k && k <= d->hi) return d->ok;
    }
    p->out->probes++;
    const uint64_t c = k * p->step;
    uint64_t same[2] = {c, c + 1};
    probe_done d = {k, k, p->probe(c, p->ud, same)};
    /* the multiples of step in [same[0], same[1]) */
    if (same[0] <= c && c < same[1]) {
        d.lo = (same[0] + p->step - 1) / p->step;
        d.hi = same[1] / p->step - (same[1] % p->step == 0);
    }
    g_array_append_val(p->done, d);
    return d.ok;
}

/* The first of GS_WHATIF_GRID - 1 steps spread over (from, to) that completes, or 0. */
static uint64_t grid_success(prober *pr, uint64_t from, uint64_t to)
{
    for (unsigned g = 1; g < GS_WHATIF_GRID && to > from + 1; g++) {
        uint64_t k = from + (to - from) * g / GS_WHATIF_GRID;
        if (k > from && k < to && ok_at(pr, k)) return k;
    }
    return 0;
}

static void bisect(prober *pr, uint64_t lo, uint64_t from, uint64_t hi)
{
    const uint64_t step = pr->step;
    gs_whatif_search *out = pr->out;
    /* in steps: lo_k fails (known), hi_k is the largest considered; the bisection starts from
     * hint_k (>= lo_k), likely to fail but not known to */
    uint64_t lo_k = MAX(lo, from) / step, hi_k = hi / step;
    const uint64_t hint_k = lo_k, known_k = lo / step;
    if (hi_k <= lo_k) return;
    if (!ok_at(pr, hi_k)) {
        /* fails at the largest capacity: the grid below still says whether it ever completes */
        uint64_t k = grid_success(pr, lo_k, hi_k);
        if (!k) return;
        out->fails_above = hi_k * step;
        hi_k = k; /* bisect below this success instead */
    }
    /* invariant: fails at lo_k (or lo_k is the known-failing bound, or the hint), completes
     * at hi_k. The checks below an answer go down to the hint (low_k), as a search from it
     * did, until the hint itself completes; then to the known floor. */
    const uint64_t floor_k = known_k;
    uint64_t low_k = hint_k;
    for (;;) {
        while (hi_k - lo_k > 1) {
            uint64_t mid = lo_k + (hi_k - lo_k) / 2;
            if (ok_at(pr, mid)) hi_k = mid;
            else lo_k = mid;
        }
        /* The step below the answer (the hint, if the bisection stopped on it unreplayed:
         * where it completes, less memory may too, and the search goes on below it), the
         * steps just below that, then a grid further down: a success there means the
         * bisection stopped at a later boundary (hi_k - 1 fails, yet less memory completes):
         * search again below it. (A window where an allocator fails is often a few steps wide,
         * next to its boundary: the grid alone passed over them.) */
        uint64_t below = hi_k - 1 > floor_k && ok_at(pr, hi_k - 1) ? hi_k - 1 : 0;
        if (below && below <= low_k) low_k = floor_k;
        for (uint64_t d = 2; d <= GS_WHATIF_NEAR + 1 && !below && hi_k > low_k + d; d++)
            if (ok_at(pr, hi_k - d)) below = hi_k - d;
        if (!below) below = grid_success(pr, low_k, hi_k - 1);
        if (!below) break;
        /* hi_k - 1 failed, unless it is the success (the hint, unreplayed till now) */
        if (below != hi_k - 1 && (hi_k - 1) * step > out->fails_above)
            out->fails_above = (hi_k - 1) * step;
        hi_k = below;
        lo_k = low_k < below ? low_k : floor_k; /* from the hint again while it is below */
    }
    out->found = true;
    out->min_capacity = hi_k * step;
    out->below_fails = true; /* lo_k = hi_k - 1 failed, or is the known-failing bound */
    /* The steps just above the answer, then a grid up to hi: does more memory ever fail? (The
     * largest failing one is kept.) */
    uint64_t top = hi / step;
    for (uint64_t d = 1; d <= GS_WHATIF_NEAR && hi_k + d <= top; d++) {
        uint64_t k = hi_k + d;
        if (!ok_at(pr, k) && k * step > out->fails_above) out->fails_above = k * step;
    }
    for (unsigned g = 1; g <= GS_WHATIF_GRID; g++) {
        uint64_t k = hi_k + (top - hi_k) * g / GS_WHATIF_GRID;
        if (k <= hi_k) continue;
        if (!ok_at(pr, k) && k * step > out->fails_above) out->fails_above = k * step;
    }
}

void gs_whatif_bisect_from(gs_whatif_probe_fn probe, void *ud, uint64_t lo, uint64_t from,
                           uint64_t hi, uint64_t step, gs_whatif_search *out)
{
    memset(out, 0, sizeof *out);
    prober pr = {probe, ud, step, out, g_array_new(FALSE, FALSE, sizeof(probe_done))};
    /* a hint at or above hi is none (the search from it searched nothing) */
    bisect(&pr, lo, from < hi ? from : lo, hi);
    g_array_free(pr.done, TRUE);
}

void gs_whatif_bisect(gs_whatif_probe_fn probe, void *ud, uint64_t lo, uint64_t hi, uint64_t step,
                      gs_whatif_search *out)
{
    gs_whatif_bisect_from(probe, ud, lo, lo, hi, step, out);
}

/* ---- candidates ---- */

static const char *const standard[] = {
    "pytorch",
    "pytorch:expandable_segments:True",
    "pytorch:max_split_size_mb:64",
    "pytorch:max_split_size_mb:128",
    "pytorch:max_split_size_mb:256",
    "pytorch:max_split_size_mb:512",
    "pytorch:roundup_power2_divisions:4",
    "pytorch:garbage_collection_threshold:0.8",
};

/* Whether two specs name one setting: equal but for white space, which the policies' parser
 * drops as PyTorch does (a recorded "max_split_size_mb: 128" is the candidate
 * "max_split_size_mb:128", replayed once). */
static bool same_spec(const char *a, const char *b)
{
    for (;; a++, b++) {
        while (g_ascii_isspace(*a)) a++;
        while (g_ascii_isspace(*b)) b++;
        if (*a != *b) return false;
        if (!*a) return true;
    }
}

static gs_whatif_row *find_row(GPtrArray *rows, const char *spec)
{
    for (guint i = 0; i < rows->len; i++) {
        gs_whatif_row *r = rows->pdata[i];
        if (same_spec(r->pol->spec, spec)) return r;
    }
    return NULL;
}

static gs_whatif_row *add_row(GPtrArray *rows, const char *spec, GError **err)
{
    gs_whatif_row *r = find_row(rows, spec);
    if (r) return r;
    gs_policy *pol = gs_policy_new(spec, err);
    if (!pol) return NULL;
    r = g_new0(gs_whatif_row, 1);
    r->pol = pol;
    g_ptr_array_add(rows, r);
    return r;
}

static void row_free(gs_whatif_row *r)
{
    gs_probes_free(r->probes);
    gs_result_clear(&r->at_cap);
    gs_policy_free(r->pol);
    g_free(r);
}

void gs_whatif_rows_free(GPtrArray *rows)
{
    if (rows) g_ptr_array_free(rows, TRUE);
}

/* Whether a PYTORCH_CUDA_ALLOC_CONF picks the cudaMallocAsync backend: PyTorch then allocates
 * through the driver's stream-ordered pool, not its caching allocator, and ignores that
 * allocator's settings; gpusim's model of that pool is the cuda-async policy. */
static bool conf_is_async(const char *conf)
{
    char **items = g_strsplit(conf, ",", -1);
    bool async = false;
    for (char **i = items; *i; i++) {
        char **kv = g_strsplit(*i, ":", 2);
        if (kv[0] && kv[1] && strcmp(g_strstrip(kv[0]), "backend") == 0 &&
            strcmp(g_strstrip(kv[1]), "cudaMallocAsync") == 0)
            async = true;
        g_strfreev(kv);
    }
    g_strfreev(items);
    return async;
}

GPtrArray *gs_whatif_candidates(const char *recorded_conf, const char *const *extra, GError **err)
{
    GPtrArray *rows = g_ptr_array_new_with_free_func((GDestroyNotify)row_free);
    char *rec = !recorded_conf || !*recorded_conf ? g_strdup("pytorch")
                : conf_is_async(recorded_conf)   ? g_strdup("cuda-async")
                                                 : g_strdup_printf("pytorch:%s", recorded_conf);
    gs_whatif_row *r = add_row(rows, rec, err);
    g_free(rec);
    if (!r) { /* a recorded setting gpusim cannot parse: say so, with the trace's words */
        char *shown = gs_printable(recorded_conf);
        g_prefix_error(err, "the recorded setting (allocator_conf '%s'): ", shown);
        g_free(shown);
        g_ptr_array_free(rows, TRUE);
        return NULL;
    }
    r->recorded = true;
    for (size_t i = 0; i < G_N_ELEMENTS(standard); i++) add_row(rows, standard[i], NULL);
    for (const char *const *e = extra; e && *e; e++) {
        if (!(r = add_row(rows, *e, err))) {
            g_ptr_array_free(rows, TRUE);
            return NULL;
        }
        r->given = true;
    }
    return rows;
}

const gs_whatif_row *gs_whatif_default(const GPtrArray *rows)
{
    for (guint i = 0; i < rows->len; i++) {
        const gs_whatif_row *r = rows->pdata[i];
        if (strcmp(r->pol->spec, "pytorch") == 0) return r;
    }
    return NULL;
}

const gs_whatif_row *gs_whatif_recorded(const GPtrArray *rows)
{
    for (guint i = 0; i < rows->len; i++) {
        const gs_whatif_row *r = rows->pdata[i];
        if (r->recorded) return r;
    }
    return NULL;
}

static gint by_min_capacity(gconstpointer a, gconstpointer b)
{
    const gs_whatif_row *x = *(gs_whatif_row *const *)a, *y = *(gs_whatif_row *const *)b;
    if (x->search.found != y->search.found) return x->search.found ? -1 : 1;
    if (x->search.min_capacity != y->search.min_capacity)
        return x->search.min_capacity < y->search.min_capacity ? -1 : 1;
    return 0; /* g_ptr_array_sort is stable: candidates' order breaks ties */
}

void gs_whatif_sort(GPtrArray *rows) { g_ptr_array_sort(rows, by_min_capacity); }

/* ---- replays ---- */

/* bound: the trace's, computed once for every replay of the search (sim/bound.h) */
static gs_replay_opts replay_opts(const gs_whatif_opts *o, uint64_t capacity, const gs_bound *bound)
{
    return (gs_replay_opts){.capacity = capacity,
                            .device_total = o->device_total,
                            .cal = o->cal,
                            .bound = bound,
                            .clients = o->clients};
}

typedef struct {
    gs_probes *probes;
    bool spans;       /* the caps a replay answers for too are taken (not --full-replays) */
    unsigned replays; /* made: a cap that cannot bind needs none */
    uint64_t events;  /* replayed by them */
} probe_ctx;

/* Completes: no OOM and no device error. */
static bool completes(uint64_t capacity, void *ud, uint64_t same[2])
{
    probe_ctx *x = ud;
    gs_probe_result pr;
    gs_probes_run(x->probes, capacity, &pr);
    x->replays += pr.replayed;
    x->events += pr.events;
    if (x->spans && pr.same_hi) same[0] = pr.same_lo, same[1] = pr.same_hi;
    return pr.completes;
}

/* What a row's search found, as a search in a process of its own sends it back. */
typedef struct {
    gs_whatif_search search;
    unsigned replays;
    uint64_t events;
} found;

/* Where the bisection starts, in whole steps below the first that can complete: *known, below
 * which none completes, and *from (>= *known), below which none is likely to.
 * *known is the trace's bound (the peak of its live requests' bytes, rounded up to 2 MiB: no
 * allocator serves them in less); 0 with several clients each capped alone, the bound being
 * the device's, every client together. *from is the uncapped replay's peak of allocated bytes,
 * where the search started until it was found to be no floor: a block handed out whole can be
 * larger than its request (one of max_split_size_mb's cached oversize blocks, up to 20 MiB
 * more; a remainder too small to split), and under a cap the release of cached blocks before
 * a growth gives later requests blocks of their own size, so a capped run that completes can
 * allocate less at its peak than the uncapped one did (whatif said 100 MiB for a trace that
 * completes at 86). Where that run failed, or the trace has requests its program caught
 * failing (served with no cap, they add to it), *from is *known. */
static void search_floor(const gs_trace *t, const gs_result *up, uint64_t *known, uint64_t *from)
{
    int64_t b = gs_result_capacity_per_client(up) ? 0
                                                  : gs_result_per_allocator(up, GS_FIG_LOWER_BOUND);
    gs_trace_caveats cv;
    gs_trace_get_caveats(t, &cv);
    int64_t a = up->oom || cv.n_oom_events ? 0 : gs_result_per_allocator(up, GS_FIG_ALLOCATED_PEAK);
    *known = b > 0 ? ((uint64_t)b - 1) / GS_WHATIF_STEP * GS_WHATIF_STEP : 0;
    *from = a > 0 ? ((uint64_t)a - 1) / GS_WHATIF_STEP * GS_WHATIF_STEP : 0;
    *from = MAX(*from, *known);
}

/* The search of one row: its uncapped replay (the trunk of its probes' checkpoints,
 * sim/probe.h; the replay at the cap where there is no cap, at_cap), then the bisection. */
static void search_row(gs_whatif_row *r, const gs_trace *t, const gs_whatif_opts *o,
                       const gs_bound *bound, found *f)
{
    memset(f, 0, sizeof *f);
    gs_result own;
    const gs_result *up = &r->at_cap;
    probe_ctx p = {.probes = r->probes, .spans = !o->full_replays};
    if (!p.probes) {
        gs_replay_opts uo = replay_opts(o, 0, bound);
        p.probes = gs_probes_new(t, r->pol, &uo, !o->full_replays, &own);
        up = &own;
        f->replays = 1;
        f->events = own.events;
    }
    r->probes = NULL; /* (freed below, with its checkpoints, in the process that made them) */
    /* The search's ceiling: what the setting reserves with no cap. At that capacity or more no
     * request meets the limit, so the replay is the uncapped one and completes; above it
     * nothing is left to learn (and no guess at the device's size is searched). */
    uint64_t hi = o->device_total;
    if (!up->oom && up->error == GS_OK) {
        uint64_t need = (uint64_t)gs_result_per_allocator(up, GS_FIG_RESERVED_PEAK);
        need = (need / GS_WHATIF_STEP + 1) * GS_WHATIF_STEP;
        hi = MIN(hi, need);
    }
    uint64_t lo, from;
    search_floor(t, up, &lo, &from);
    if (up == &own) gs_result_clear(&own);
    size_t trunk = gs_probes_plan(p.probes, from, hi);
    f->replays += trunk > 0;
    f->events += trunk;
    gs_whatif_bisect_from(completes, &p, lo, from, hi, GS_WHATIF_STEP, &f->search);
    /* A setting whose choices read the limit (stitch's slack, RMM's arena sized from it, a
     * preallocated fraction) may fail at the capacity it reserves with no cap, and complete at
     * a larger one: the ceiling above is then no ceiling, and the search is made again up to
     * the device's memory. */
    if (!f->search.found && hi < o->device_total)
        gs_whatif_bisect_from(completes, &p, lo, from, o->device_total, GS_WHATIF_STEP, &f->search);
    f->search.probes = p.replays; /* both searches' */
    f->replays += p.replays;
    f->events += p.events;
    gs_probes_free(p.probes);
}

static void take(gs_whatif_row *r, const found *f)
{
    r->search = f->search;
    r->replays += f->replays - f->search.probes; /* the uncapped one; the search's are its own */
    r->replayed_events += f->events;
}

typedef struct {
    GPtrArray *rows;
    const gs_trace *t;
    const gs_whatif_opts *o;
    const gs_bound *bound;
    /* For each row, the earlier row whose search it takes (same_decisions), or -1: searched */
    gint *same_as;
    GMutex lock;
    size_t done;
    gint next;   /* the next row a thread of row_thread takes */
    bool search; /* the threads search too: no search of this trace forks */
} run_ctx;

static void report_done(run_ctx *x)
{
    g_mutex_lock(&x->lock);
    x->done++;
    if (x->o->progress) x->o->progress(x->done, x->rows->len, x->o->progress_ud);
    g_mutex_unlock(&x->lock);
}

/* The replay at the cap of row i: the report's figures (the recorded setting with the recorded
 * run's addresses). */
static void at_cap(run_ctx *x, guint i)
{
    gs_whatif_row *r = x->rows->pdata[i];
    gs_replay_opts ro = replay_opts(x->o, x->o->capacity, x->bound);
    if (r->recorded) ro.ref = x->o->ref; /* the recorded run at its limit, placed as it was */
    if (!ro.capacity && !ro.ref)
        /* no cap: this is the search's uncapped replay too, made through its probes */
        r->probes = gs_probes_new(x->t, r->pol, &ro, !x->o->full_replays, &r->at_cap);
    else (void)gs_replay_run(x->t, r->pol, &ro, &r->at_cap, NULL);
    r->replays = 1;
    r->replayed_events = r->at_cap.events;
}

/* Row i, which takes another row's search (take_alike, once that is made): done now, its replay
 * at the cap's probes freed here, in the process that made them, not carried into every fork. */
static void settle_alike(run_ctx *x, guint i)
{
    gs_whatif_row *r = x->rows->pdata[i];
    gs_probes_free(r->probes);
    r->probes = NULL;
    report_done(x);
}

/* Row i's search in this process. */
static void search_here(run_ctx *x, guint i)
{
    if (x->same_as[i] >= 0) {
        settle_alike(x, i);
        return;
    }
    found f;
    search_row(x->rows->pdata[i], x->t, x->o, x->bound, &f);
    take(x->rows->pdata[i], &f);
    report_done(x);
}

/* A thread of the replays at the cap (and of the searches, x->search): rows until none is left.
 * Joined threads, not a GLib pool, whose threads may still be exiting after g_thread_pool_free
 * returns: a lock one of them held (the allocator's, in its exit) would stay held in the searches'
 * forks. */
static gpointer row_thread(gpointer user)
{
    run_ctx *x = user;
    for (gint i; (i = g_atomic_int_add(&x->next, 1)) < (gint)x->rows->len;) {
        at_cap(x, (guint)i);
        if (x->search) search_here(x, (guint)i);
    }
    return NULL;
}

/* Every fork copies the page table of what is mapped, and every checkpoint and probe is a
 * fork: what the conversion and the replays at the cap freed goes back to the system before
 * the searches (on the LLM recording, 10 MiB of 4 KiB pages became 4 MiB, and the system time
 * of a whatif from 0.40 s to 0.32 s: BENCHMARKS.md, "whatif from checkpoints"). glibc keeps freed
 * memory inside its heap unless asked; elsewhere this does nothing. */
static void give_back_freed(void)
{
#ifdef __GLIBC__
    (void)malloc_trim(0);
#endif
}

/* Searches in processes of their own, up to jobs at once: a search's checkpoints are forks,
 * made where the process has one thread (sim/probe.h). Each sends its row's figures back on
 * a pipe. A search that cannot be forked, or whose process fails, runs here instead. */
static void search_forked(run_ctx *x, unsigned jobs)
{
    GPtrArray *rows = x->rows;
    struct running {
        pid_t pid;
        int fd;
        guint row;
    } *run = g_new0(struct running, jobs);
    struct pollfd *pf = g_new0(struct pollfd, jobs);
    unsigned n = 0;
    guint next = 0;
    while (next < rows->len || n) {
        while (n < jobs && next < rows->len) {
            if (x->same_as[next] >= 0) {
                settle_alike(x, next++);
                continue;
            }
            int fds[2] = {-1, -1};
            pid_t pid = -1;
            if (pipe2(fds, O_CLOEXEC) == 0 && (pid = fork()) == 0) {
                close(fds[0]);
                found f;
                search_row(rows->pdata[next], x->t, x->o, x->bound, &f);
                ssize_t w = write(fds[1], &f, sizeof f);
                _exit(w == (ssize_t)sizeof f ? 0 : 1);
            }
            next++;
            if (pid < 0) {
                if (fds[0] >= 0) {
                    close(fds[0]);
                    close(fds[1]);
                }
                search_here(x, next - 1);
                continue;
            }
            close(fds[1]);
            run[n++] = (struct running){pid, fds[0], next - 1};
        }
        if (!n) continue;
        for (unsigned k = 0; k < n; k++) pf[k] = (struct pollfd){.fd = run[k].fd, .events = POLLIN};
        if (poll(pf, n, -1) < 0) continue; /* EINTR: ask again */
        for (unsigned k = n; k-- > 0;) {
            if (!pf[k].revents) continue;
            found f;
            ssize_t got = read(run[k].fd, &f, sizeof f);
            close(run[k].fd);
            while (waitpid(run[k].pid, NULL, 0) < 0 && errno == EINTR) {
            }
            if (got == (ssize_t)sizeof f) {
                take(rows->pdata[run[k].row], &f);
                report_done(x);
            } else {
                search_here(x, run[k].row);
            }
            run[k] = run[--n];
        }
    }
    g_free(run);
    g_free(pf);
}

/* The largest request of t that a heap rounds, failed ones included (before any rounding): one
 * above GS_MAX_REQUEST fails before any rounding in every setting, so it is left out (its
 * rounding could wrap to a small size). */
static uint64_t largest_request(const gs_trace *t)
{
    uint64_t m = 0;
    for (size_t i = 0; i < t->n; i++) {
        const gs_event *e = &t->ev[i];
        if ((e->op == GS_OP_ALLOC || e->op == GS_OP_OOM) && e->size > m &&
            e->size <= GS_MAX_REQUEST)
            m = e->size;
    }
    return m;
}

/* Which rows decide alike on t at every step (gs_policy_same_decisions: PyTorch's
 * max_split_size_mb above every segment the trace can make): each such row takes the search of
 * the first row it decides alike with, which alone is searched. Its replay at the cap is still
 * made: that is its report's, whose max_split_size statistic is its own. With share false
 * (--full-replays, for comparison) every row is searched. */
static gint *rows_alike(GPtrArray *rows, const gs_trace *t, bool share)
{
    gint *same_as = g_new(gint, rows->len ? rows->len : 1);
    uint64_t largest = share ? largest_request(t) : 0;
    for (guint i = 0; i < rows->len; i++) {
        const gs_whatif_row *r = rows->pdata[i];
        same_as[i] = -1;
        for (guint k = 0; share && k < i && same_as[i] < 0; k++) {
            const gs_whatif_row *q = rows->pdata[k];
            if (same_as[k] < 0 && gs_policy_same_decisions(q->pol, r->pol, largest))
                same_as[i] = (gint)k;
        }
    }
    return same_as;
}

/* The rows that took another's search: its answer, none of its replays. */
static void take_alike(run_ctx *x)
{
    for (guint i = 0; i < x->rows->len; i++) {
        if (x->same_as[i] < 0) continue;
        gs_whatif_row *r = x->rows->pdata[i];
        const gs_whatif_row *from = x->rows->pdata[x->same_as[i]];
        r->search = from->search;
        r->search.probes = 0;
    }
}

/* A replay from the first event at a capacity, for second_chance's bisection. */
typedef struct {
    const gs_trace *t;
    const gs_policy *p;
    const gs_whatif_opts *o;
    const gs_bound *bound;
    unsigned replays;
    uint64_t events;
} plain_ctx;

static bool completes_plain(uint64_t capacity, void *ud, uint64_t same[2])
{
    plain_ctx *x = ud;
    gs_replay_opts ro = replay_opts(x->o, capacity, x->bound);
    gs_result r;
    bool ok = gs_replay_run(x->t, x->p, &ro, &r, NULL) && !r.oom && r.error == GS_OK;
    x->replays++;
    x->events += r.events;
    if (!x->o->full_replays && r.same_hi) same[0] = r.same_lo, same[1] = r.same_hi;
    gs_result_clear(&r);
    return ok;
}

static gint cmp_u64(gconstpointer a, gconstpointer b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* A setting whose search found no capacity (it fails at the most it was given, and at every
 * point the bisection and its grid replayed) may still complete in a window of capacities,
 * narrower than the grid's step (two clients of which one, capped, fails the other less): the
 * other settings' minimum capacities are replayed for it, in ascending order, and from the
 * first that completes the least one is found below it. Its failure at the top stays said
 * (fails_above: the most it was given). */
static void second_chance(run_ctx *x)
{
    GArray *caps = g_array_new(FALSE, FALSE, sizeof(uint64_t));
    for (guint i = 0; i < x->rows->len; i++) {
        const gs_whatif_row *r = x->rows->pdata[i];
        if (x->same_as[i] < 0 && r->search.found) g_array_append_val(caps, r->search.min_capacity);
    }
    g_array_sort(caps, cmp_u64);
    for (guint i = 0; caps->len && i < x->rows->len; i++) {
        gs_whatif_row *r = x->rows->pdata[i];
        if (x->same_as[i] >= 0 || r->search.found) continue;
        plain_ctx p = {.t = x->t, .p = r->pol, .o = x->o, .bound = x->bound};
        unsigned before = r->search.probes;
        for (guint k = 0; k < caps->len; k++) {
            uint64_t c = g_array_index(caps, uint64_t, k);
            uint64_t same[2] = {c, c + 1};
            if ((k && c == g_array_index(caps, uint64_t, k - 1)) || !completes_plain(c, &p, same))
                continue;
            gs_whatif_bisect(completes_plain, &p, 0, c, GS_WHATIF_STEP, &r->search);
            if (!r->search.fails_above) r->search.fails_above = x->o->device_total;
            break;
        }
        r->search.probes = before + p.replays; /* (the bisection's are among them) */
        r->replayed_events += p.events;
    }
    g_array_free(caps, TRUE);
}

void gs_whatif_run(GPtrArray *rows, const gs_trace *t, const gs_whatif_opts *o)
{
    gs_bound *bound = gs_bound_compute(t);
    run_ctx x = {.rows = rows,
                 .t = t,
                 .o = o,
                 .bound = bound,
                 .same_as = rows_alike(rows, t, !o->full_replays)};
    g_mutex_init(&x.lock);
    unsigned jobs = o->jobs ? o->jobs : g_get_num_processors();
    if (jobs > rows->len) jobs = rows->len;
    /* A trace too short for checkpoints (or with them turned off) searches on the threads too:
     * a process per search would cost more than it saves. Else the replays at the cap on
     * threads, then the searches, whose checkpoints are forks of a process with one thread:
     * this one, once those threads are joined. */
    x.search = o->full_replays || !gs_probes_may_fork(t);
    if (jobs <= 1) {
        (void)row_thread(&x); /* this thread alone: its searches may fork */
        give_back_freed();
        for (guint i = 0; !x.search && i < rows->len; i++) search_here(&x, i);
    } else {
        GThread **th = g_new(GThread *, jobs);
        for (unsigned k = 0; k < jobs; k++) th[k] = g_thread_new("whatif", row_thread, &x);
        for (unsigned k = 0; k < jobs; k++) g_thread_join(th[k]);
        g_free(th);
        give_back_freed();
        if (!x.search) search_forked(&x, jobs);
    }
    second_chance(&x);
    take_alike(&x);
    g_free(x.same_as);
    g_mutex_clear(&x.lock);
    gs_bound_free(bound);
}
