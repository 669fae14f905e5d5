/* probe.c - replays at a cap from checkpoints of the uncapped replay (probe.h).
 *
 * Three roles, one code path: the trunk (gs_probes_plan's replay, in the caller's process), a
 * checkpoint (a fork of the trunk, stopped in the replay's per-event hook, waiting for caps),
 * and a worker (a fork of a checkpoint, which returns from that hook with its heap's limit set
 * and replays on; at the replay's end, in the observe_end hook, before the teardown, it sends
 * its figures and exits). Each checkpoint talks to the trunk's process over a socket pair of its
 * own: the trunk writes a cap, the worker writes back one record, and a checkpoint whose worker
 * died writes a record that says so. send(MSG_NOSIGNAL) rather than write: a checkpoint that is
 * gone is an error to fall back from, not a SIGPIPE.
 */
#include <errno.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include "probe.h"

typedef enum { ROLE_TRUNK, ROLE_CHECKPOINT, ROLE_WORKER } role;

typedef struct {
    pid_t pid;
    int fd;        /* the trunk's end of the socket pair; -1: let go */
    size_t event;  /* stopped before this event */
    uint64_t peak; /* gs_heap_limit_asked before it: it serves caps of at least this */
} checkpoint;

struct gs_probes {
    const gs_trace *t;
    const gs_policy *p;
    gs_replay_opts o; /* the uncapped replay's options, for replays from the start */
    role role;
    bool enabled; /* worth trying: the policy blind to the limit, the trace long */
    bool single;  /* the hook ran: one allocator, with no limit of its own */
    bool stopped; /* a growth was refused, or a fork failed: no more checkpoints */
    /* the first replay: where the reserved bytes first passed each new peak (event, bytes) */
    GArray *rise; /* rise */
    /* the trunk: checkpoints before these events (ascending), made as it reaches them */
    GArray *at;   /* size_t */
    guint next;   /* the next of them */
    GArray *cps;  /* checkpoint, in event order; the live ones have fd >= 0 */
    GArray *pids; /* pid_t of every checkpoint made, to wait for */
    /* the uncapped replay's outcome */
    bool clean;           /* completed with no growth refused */
    uint64_t peak;        /* its gs_heap_limit_asked at the end */
    int64_t reserved;     /* its reserved bytes' peak */
    uint64_t state_pages; /* the pages of heap a probe may write, at most */
    /* in a worker */
    int fd;
    size_t start;
    gs_result *r; /* the trunk's result, which the worker's replay goes on filling */
};

typedef struct {
    size_t event; /* the event that took the reserved bytes to bytes */
    uint64_t bytes;
} rise;

/* The record a worker sends (whole: a stream socket within one host delivers it in order). */
typedef struct {
    uint32_t ok; /* 0: the worker failed (sent by its checkpoint) */
    gs_probe_result r;
} wire;

static bool send_all(int fd, const void *buf, size_t n)
{
    const char *p = buf;
    while (n) {
        ssize_t k = send(fd, p, n, MSG_NOSIGNAL);
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) return false;
        p += k;
        n -= (size_t)k;
    }
    return true;
}

static bool recv_all(int fd, void *buf, size_t n)
{
    char *p = buf;
    while (n) {
        ssize_t k = recv(fd, p, n, 0);
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) return false;
        p += k;
        n -= (size_t)k;
    }
    return true;
}

/* Did any growth fail so far (a device call refused, an OOM, a retry), by a heap's or a
 * result's figures? Then the uncapped replay took a path a capped one need not take, and no
 * later state is shared. */
static bool refused(const gs_devcalls *c, const gs_stats *s)
{
    uint64_t failed = 0;
    for (int k = 0; k < GS_CALL_COUNT; k++) failed += c->failed[k];
    return failed || s->num_alloc_retries || s->num_ooms;
}

/* A checkpoint's life: wait for a cap, fork a worker for it, wait for the worker; until the
 * trunk closes its end. Returns only in a worker. */
static void serve(gs_probes *pr, gs_heap *h, int fd, size_t event)
{
    pr->role = ROLE_CHECKPOINT;
    for (;;) {
        uint64_t cap;
        if (!recv_all(fd, &cap, sizeof cap)) _exit(0);
        pid_t w = fork();
        if (w == 0) {
            pr->role = ROLE_WORKER;
            pr->fd = fd;
            pr->start = event;
            gs_heap_set_limit(h, cap);
            return;
        }
        int status = 0;
        pid_t got = -1;
        if (w > 0)
            while ((got = waitpid(w, &status, 0)) < 0 && errno == EINTR) {
            }
        /* (a fork that failed, w < 0, is a failed probe too: the trunk waits for its answer) */
        if (w < 0 || got != w || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
            wire failed = {0};
            if (!send_all(fd, &failed, sizeof failed)) _exit(0);
        }
    }
}

static void make_checkpoint(gs_probes *pr, gs_heap *h, size_t event, uint64_t peak)
{
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) {
        pr->stopped = true;
        return;
    }
    pid_t pid = fork();
    if (pid < 0) {
        close(sv[0]);
        close(sv[1]);
        pr->stopped = true;
        return;
    }
    if (pid == 0) {
        /* the other checkpoints' ends: held here, they would never see the trunk close them */
        close(sv[0]);
        for (guint k = 0; k < pr->cps->len; k++) {
            checkpoint *c = &g_array_index(pr->cps, checkpoint, k);
            if (c->fd >= 0) close(c->fd);
        }
        serve(pr, h, sv[1], event);
        return; /* a worker: its replay goes on */
    }
    close(sv[1]);
    checkpoint c = {.pid = pid, .fd = sv[0], .event = event, .peak = peak};
    g_array_append_val(pr->cps, c);
    g_array_append_val(pr->pids, pid);
}

/* The first replay's hook: the events that raise the smallest limit that refuses nothing
 * (gs_heap_limit_asked; read before the next event), and what they raise it to. */
static gs_checkpoint_next trace_rise(gs_heap *h, size_t i, void *ud)
{
    gs_probes *pr = ud;
    if (i == 0) pr->single = gs_heap_limit(h) == 0;
    uint64_t res = gs_heap_limit_asked(h);
    rise *last = pr->rise->len ? &g_array_index(pr->rise, rise, pr->rise->len - 1) : NULL;
    if (i > 0 && res > (last ? last->bytes : 0)) {
        rise r = {i - 1, res};
        g_array_append_val(pr->rise, r);
    }
    return GS_CHECKPOINT_GO_ON;
}

/* The trunk's hook: a checkpoint before each event of pr->at. Once the last is made (or a
 * refused growth stops them) the trunk ends its replay: the uncapped result is the first
 * replay's, and the rest would cost a probe's length for nothing (on the LLM generation
 * recording the checkpoints lie at 60% of the trace). A worker forked from a checkpoint goes on
 * to the end without the hook. */
static gs_checkpoint_next at_event(gs_heap *h, size_t i, void *ud)
{
    gs_probes *pr = ud;
    /* the checkpoints' copies may collect garbage under their cap: with the ages kept from the
     * first event, as the heap made with that cap keeps them */
    if (i == 0 && pr->role == ROLE_TRUNK) gs_heap_keep_gc_ages(h);
    if (pr->role != ROLE_TRUNK) return GS_CHECKPOINT_DONE;
    if (pr->stopped || pr->next >= pr->at->len) return GS_CHECKPOINT_STOP;
    if (i != g_array_index(pr->at, size_t, pr->next)) return GS_CHECKPOINT_GO_ON;
    pr->next++;
    if (refused(gs_heap_devcalls(h), gs_heap_stats_now(h))) {
        pr->stopped = true;
        return GS_CHECKPOINT_STOP;
    }
    make_checkpoint(pr, h, i, gs_heap_limit_asked(h));
    if (pr->role != ROLE_TRUNK) return GS_CHECKPOINT_DONE;
    return pr->next < pr->at->len ? GS_CHECKPOINT_GO_ON : GS_CHECKPOINT_STOP;
}

/* In a worker, its replay done: send what it found and exit, without the teardown (which would
 * write, so copy, every page of the heap only to free it). */
static void at_end(const gs_heap *h, void *ud);

static void fill(gs_probe_result *out, const gs_result *r, bool ok, size_t start)
{
    memset(out, 0, sizeof *out);
    out->completes = ok && !r->oom && r->error == GS_OK;
    out->replayed = true;
    out->start = start;
    out->events = r->events > start ? r->events - start : 0;
    out->oom = r->oom;
    out->first_oom_event = r->first_oom_event;
    out->peak_reserved = r->stats.reserved_bytes[GS_STAT_ALL].peak;
    out->device_allocs = r->stats.num_device_alloc;
    out->retries = r->stats.num_alloc_retries;
    out->same_lo = r->same_lo;
    out->same_hi = r->same_hi;
}

/* The first replay's end: the least cap that never binds. */
static void note_end(const gs_heap *h, void *ud)
{
    gs_probes *pr = ud;
    pr->peak = gs_heap_limit_asked(h);
}

static void at_end(const gs_heap *h, void *ud)
{
    gs_probes *pr = ud;
    (void)h;
    if (pr->role != ROLE_WORKER) return;
    wire w = {.ok = 1};
    fill(&w.r, pr->r, true, pr->start);
    _exit(send_all(pr->fd, &w, sizeof w) ? 0 : 1);
}

/* The pages of heap a probe's replay may write, each a page fault to copy in a fork: a block
 * struct for every live and free block at their peaks, a segment's and its placement's (about
 * two blocks' worth) for every segment. */
static uint64_t state_pages(const gs_stats *s)
{
    uint64_t blocks = (uint64_t)(s->active[GS_STAT_ALL].peak + s->inactive_split[GS_STAT_ALL].peak +
                                 3 * s->segment[GS_STAT_ALL].peak);
    return blocks * sizeof(gs_block) / 4096 + 1;
}

gs_probes *gs_probes_new(const gs_trace *t, const gs_policy *p, const gs_replay_opts *o,
                         bool checkpoints, gs_result *uncapped)
{
    gs_probes *pr = g_new0(gs_probes, 1);
    pr->t = t;
    pr->p = p;
    pr->o = *o;
    pr->o.capacity = 0;
    pr->role = ROLE_TRUNK;
    pr->enabled = checkpoints && gs_policy_blind_to_limit(p) && !o->backend && !o->ref;
    pr->rise = g_array_new(FALSE, FALSE, sizeof(rise));
    pr->at = g_array_new(FALSE, FALSE, sizeof(size_t));
    pr->cps = g_array_new(FALSE, FALSE, sizeof(checkpoint));
    pr->pids = g_array_new(FALSE, FALSE, sizeof(pid_t));
    gs_replay_opts uo = pr->o;
    if (pr->enabled) {
        uo.checkpoint = trace_rise;
        uo.checkpoint_ud = pr;
        uo.observe_end = note_end;
        uo.export_ud = pr;
    }
    bool ok = gs_replay_run(t, p, &uo, uncapped, NULL);
    pr->clean = pr->enabled && pr->single && ok && !uncapped->oom && uncapped->error == GS_OK &&
                !refused(&uncapped->calls, &uncapped->stats);
    pr->reserved = uncapped->stats.reserved_bytes[GS_STAT_ALL].peak;
    pr->state_pages = state_pages(&uncapped->stats);
    return pr;
}

/* The event before which a cap of c bytes first binds: the first rise past c (n: none). */
static size_t binds_at(const gs_probes *pr, uint64_t c)
{
    for (guint k = 0; k < pr->rise->len; k++) {
        const rise *r = &g_array_index(pr->rise, rise, k);
        if (r->bytes > c) return r->event;
    }
    return pr->t->n;
}

bool gs_probes_may_fork(const gs_trace *t)
{
    return t->n >= GS_PROBE_MIN_EVENTS;
}

size_t gs_probes_plan(gs_probes *pr, uint64_t lo, uint64_t hi)
{
    if (!pr->clean || hi <= lo || !gs_probes_may_fork(pr->t)) return 0;
    /* where caps spread over (lo, hi] first bind, each a checkpoint's event */
    size_t shared = 0;
    for (unsigned j = 0; j < GS_PROBE_CHECKPOINTS; j++) {
        size_t e = binds_at(pr, lo + (hi - lo) / GS_PROBE_CHECKPOINTS * j);
        shared += e / GS_PROBE_CHECKPOINTS;
        if (e == 0 || e >= pr->t->n) continue;
        if (pr->at->len && g_array_index(pr->at, size_t, pr->at->len - 1) >= e) continue;
        g_array_append_val(pr->at, e);
    }
    /* Worth a second replay and the forks only if the probes would replay much of the trace
     * again otherwise (20-50 of them, each sharing about `shared` events with the trunk), and
     * more of it than the page faults of copying the heap it may write cost. */
    if (shared < pr->t->n / GS_PROBE_MIN_SHARE ||
        shared < pr->state_pages * GS_PROBE_FAULT_EVENTS || !pr->at->len) {
        g_array_set_size(pr->at, 0);
        return 0;
    }
    gs_replay_opts o = pr->o;
    o.checkpoint = at_event;
    o.checkpoint_ud = pr;
    o.observe_end = at_end;
    o.export_ud = pr;
    gs_result r;
    pr->r = &r;
    (void)gs_replay_run(pr->t, pr->p, &o, &r, NULL);
    if (pr->role == ROLE_WORKER) { /* (at_end exits first; a replay that could not start) */
        wire w = {.ok = 0};
        _exit(send_all(pr->fd, &w, sizeof w) ? 0 : 1);
    }
    pr->r = NULL;
    size_t events = r.events;
    gs_result_clear(&r);
    return events;
}

/* The latest live checkpoint whose peak is within capacity, or NULL. */
static checkpoint *checkpoint_for(gs_probes *pr, uint64_t capacity)
{
    for (guint k = pr->cps->len; k-- > 0;) {
        checkpoint *c = &g_array_index(pr->cps, checkpoint, k);
        if (c->fd >= 0 && c->peak <= capacity) return c;
    }
    return NULL;
}

void gs_probes_run(gs_probes *pr, uint64_t capacity, gs_probe_result *out)
{
    memset(out, 0, sizeof *out);
    if (pr->clean && capacity >= pr->peak) {
        out->completes = true; /* the uncapped replay, never past the cap */
        out->peak_reserved = pr->reserved;
        out->same_lo = pr->peak;
        out->same_hi = UINT64_MAX;
        return;
    }
    for (checkpoint *c; (c = checkpoint_for(pr, capacity));) {
        wire w;
        if (send_all(c->fd, &capacity, sizeof capacity) && recv_all(c->fd, &w, sizeof w) && w.ok) {
            *out = w.r;
            return;
        }
        close(c->fd); /* gone, or its worker failed: the next one, or from the start */
        c->fd = -1;
    }
    gs_replay_opts o = pr->o;
    o.capacity = capacity;
    gs_result r;
    bool ok = gs_replay_run(pr->t, pr->p, &o, &r, NULL);
    fill(out, &r, ok, 0);
    gs_result_clear(&r);
}

unsigned gs_probes_checkpoints(const gs_probes *pr)
{
    unsigned n = 0;
    for (guint k = 0; k < pr->cps->len; k++) n += g_array_index(pr->cps, checkpoint, k).fd >= 0;
    return n;
}

void gs_probes_free(gs_probes *pr)
{
    if (!pr) return;
    for (guint k = 0; k < pr->cps->len; k++) {
        checkpoint *c = &g_array_index(pr->cps, checkpoint, k);
        if (c->fd >= 0) close(c->fd);
    }
    for (guint k = 0; k < pr->pids->len; k++) {
        pid_t pid = g_array_index(pr->pids, pid_t, k);
        while (waitpid(pid, NULL, 0) < 0 && errno == EINTR) {
        }
    }
    g_array_free(pr->rise, TRUE);
    g_array_free(pr->at, TRUE);
    g_array_free(pr->cps, TRUE);
    g_array_free(pr->pids, TRUE);
    g_free(pr);
}
