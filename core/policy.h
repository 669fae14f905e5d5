/* policy.h - the policy seam: the table of hooks the core calls. It lives with the core, which
 * calls it; the implementations and their registry are policies/ (policies.h).
 *
 * A policy decides what the core leaves open (see core/core.h): rounding, pool choice, segment
 * size, whether a cached block may serve a request, whether to split it, and what to release
 * under pressure. Policies are found by name, and their config is parsed from PyTorch's own
 * syntax so a user can paste PYTORCH_CUDA_ALLOC_CONF as it is:
 *
 *     pytorch                                   PyTorch 2.11's native caching allocator
 *     pytorch:max_split_size_mb:128,expandable_segments:False
 *     cupy                                      CuPy 14's MemoryPool
 *
 * A spec is NAME or NAME:CONF. Hooks take the parsed config (cfg) and never keep state of their
 * own: all state lives in the heap, so one gs_policy may serve many heaps. A policy that must
 * remember something between calls (BFC's next region size) keeps it in the heap's few policy
 * words (gs_heap_policy_state).
 *
 * Families that are not PyTorch's use three optional hooks at the end of the
 * table, all NULL by default so the two original families are untouched: pick (a block
 * chosen by the policy: first fit, TLSF's good fit, stream-blind pools), grow (growth chosen by
 * the policy: one arena up front, BFC's doubling regions, pools of a fixed size) and
 * keeps_cache (memory never handed back). One seam still: the core owns blocks, splitting,
 * merging, statistics and the ladder; the hooks only choose.
 */
#ifndef GS_POLICY_H
#define GS_POLICY_H

#include <glib.h>
#include <stdbool.h>
#include <stdint.h>

#include "core.h"

G_BEGIN_DECLS

#define GS_POLICY_VERSION 1

typedef struct {
    bool is_small; /* counted as small_pool in the statistics (else large_pool) */
} gs_pool_desc;

/* How a stitched pool grows (the stitch hook below; core/stitch.c). */
typedef struct {
    uint64_t max_handle; /* the largest handle a growth creates, bytes; 0: any */
    /* While the heap's reserved bytes after a growth stay within (1 + slack) x its peak
     * allocated bytes (and the limit), the growth creates new memory instead of moving free
     * handles: a move unmaps memory, which on the real driver waits for the whole device
     * (backends/cuda.c), and in a program's steady state such moves repeat every step. Under
     * that bound memory is plentiful; above it every growth stitches first. 0: always stitch. */
    double slack;
    /* While memory is plentiful, a growth also creates up to ahead x what it needs beyond it
     * (within the slack and the limit, in the same handle): fewer growths, so fewer driver
     * calls (each mapping costs its cuMemSetAccess), for handles that a live block pins more
     * often; what it adds beyond min_grow never takes the reserved bytes past their peak so
     * far. 0: exactly what it needs. */
    double ahead;
    /* While memory is plentiful, a growth creates at least this many bytes (within the slack
     * and the limit, in the same handle), as PyTorch's default grows a 20 MiB segment for a
     * 1-10 MiB request: as few growths as the default makes; and ahead adds at most this much
     * beyond what a growth needs. 0: no floor, no bound on ahead. */
    uint64_t min_grow;
    /* Non-zero: memory is plentiful while the reserved bytes after a growth stay within
     * (1 - headroom) x the limit (the device's memory when there is none), instead of the
     * slack's bound. */
    double headroom;
    /* Once memory is not plentiful, a growth that creates at most this many bytes creates them
     * as one handle per page, so that each page can later move or go back alone (a handle
     * shared by a live block and free pages cannot); larger growths stay one handle (their
     * block is one request). 0: never. */
    uint64_t fine;
    /* Non-zero: a growth creates handles of at most this fraction of the limit (the device's
     * memory when there is none), besides max_handle. A handle's free pages cannot move while
     * one live block is in it, so the memory a live block can pin is its handle's size: sized
     * by the limit, that is a bounded share of it however large the requests, where a handle
     * of one large request (made in one piece while memory was plentiful) later pinned by the
     * smaller blocks that reuse it strands up to the whole request. With no limit the bound is
     * loose (about 320 MiB on an 80 GiB device), so growths stay few. */
    double max_handle_frac;
} gs_stitch_conf;

/* One config key of a policy, in the original's syntax (KEY:VALUE, comma-separated). A policy's
 * keys are one table that serves both its parser (gs_policy_conf_parse) and --help
 * (gs_policy_keys_help), so the two cannot drift apart. */
typedef struct {
    const char *name;  /* "max_split_size_mb"; a trailing '*' matches every key with that prefix */
    const char *arg;   /* what follows the colon in --help: "N", "True" */
    const char *help;  /* for --help, lines after the first indented; NULL: accepted, not listed
                        * (a key of the original that has no effect on a replay) */
    /* Set the key in cfg (the policy's config, already holding its defaults); false and err
     * (GS_POLICY_ERROR_CONFIG, naming the key and the value) when val is not acceptable. */
    bool (*set)(void *cfg, const char *key, const char *val, GError **err);
} gs_policy_key;

/* A policy's fits and should_split as data (the fit_rule hook below), for the core to apply
 * inline: both are called on nearly every malloc, and a call through a pointer there costs more
 * than the rule. With A = oversize, W = oversize_waste and, for the policy's pool kind k of the
 * block, split[k]:
 *   fits(b, rounded)          rounded < A ? b->size < A : b->size < rounded + W
 *   should_split(b, rounded)  rounded < split[k].below && b->size - rounded >= split[k].min_rest
 * (PyTorch's oversize rules and split rule; "any remainder" is below UINT64_MAX, min_rest 1). */
typedef struct {
    uint64_t oversize, oversize_waste;
    struct {
        uint64_t below, min_rest;
    } split[GS_MAX_POOLS];
} gs_fit_rule;

typedef struct gs_policy_ops {
    int version;            /* GS_POLICY_VERSION */
    const char *name;
    const char *summary;    /* one line for --help */
    const gs_policy_key *keys; /* its config keys, ending with a {NULL} entry; NULL: none */
    const char *keys_help;  /* optional: a note for --help after the keys ("no config keys...") */

    /* Optional. Settings that do nothing, or are known to misbehave together, as one sentence
     * each (g_strdup'd into out): has_limit says whether the allocator has a limit. */
    void (*warnings)(const void *cfg, bool has_limit, GPtrArray *out);
    /* Parse CONF (may be ""); NULL and err (GS_POLICY_ERROR) naming the bad key or value. */
    void *(*parse)(const char *conf, GError **err);
    /* Optional: a policy that emulates several releases of its original parses NAME@RELEASE:CONF
     * here (release "2.12"); NULL and err when it does not emulate that release. NULL: a spec
     * with @RELEASE is refused (the policy has one). */
    void *(*parse_at)(const char *release, const char *conf, GError **err);
    void (*cfg_free)(void *cfg);

    unsigned npools;
    const gs_pool_desc *pools;

    uint64_t (*round_size)(const void *cfg, uint64_t size);
    unsigned (*pool_of)(const void *cfg, uint64_t rounded);
    uint64_t (*segment_size)(const void *cfg, uint64_t rounded);
    /* May the best-fit candidate b serve a request of rounded size? Returning false ends the
     * search (every later candidate is larger): PyTorch's oversize rules. */
    bool (*fits)(const void *cfg, const gs_block *b, uint64_t rounded);
    bool (*should_split)(const void *cfg, const gs_block *b, uint64_t rounded);
    /* Blocks and segments at least this large count as oversize (UINT64_MAX: never). */
    uint64_t (*oversize)(const void *cfg);
    /* Optional. Non-zero: the pool grows as an expandable segment, mapping physical handles of
     * this many bytes into one virtual reservation per stream (needs a backend with the
     * driver's VMM calls); 0 or NULL: it grows by cudaMalloc segments. */
    uint64_t (*expandable_page)(const void *cfg, unsigned pool);
    /* Optional, for pools with an expandable_page. True: the pool's reservations are stitched
     * (core/stitch.c): a growth first moves whole free physical handles of this stream from
     * anywhere in the stitched pools to where the request needs them, and creates only what is
     * still missing, as one handle of up to conf->max_handle bytes (0: any size); while
     * memory is plentiful (conf->slack) it creates instead of moving. NULL or false:
     * PyTorch's expandable segments, one handle per page. */
    bool (*stitch)(const void *cfg, unsigned pool, gs_stitch_conf *conf);

    /* Optional. The limit the policy's own settings put on the bytes a heap may reserve on a
     * device of device_total bytes (PyTorch's per_process_memory_fraction key), 0: none. Asked
     * once, when a heap is made without a limit of its own: the caller's limit (--capacity, as
     * a later set_per_process_memory_fraction call) wins. Asked first with device_total 0,
     * whether there is one at all (non-zero then): the device is asked its size only if so. */
    uint64_t (*limit)(const void *cfg, uint64_t device_total);
    /* Optional. A growth that would take the reserved bytes past this (on a device of
     * device_total bytes) fails at once, before any device call and with no release of the
     * cache and no retry (PyTorch 2.12's throw_on_cudamalloc_oom); 0: no such bound. Asked
     * when a heap is made, first with device_total 0, as limit is. */
    uint64_t (*reject_above)(const void *cfg, uint64_t device_total);
    /* Optional. True when nothing this setting decides reads the heap's limit until a growth
     * meets it (no arena, threshold or bound sized from the limit), or until a growth meets the
     * bound limit_unread says: a replay under a cap is then the uncapped replay, event for
     * event, up to the first growth that would pass the cap or that bound, and whatif starts
     * its replays at a cap from checkpoints of the uncapped one (sim/probe.h). NULL or false:
     * not known to be; every such replay starts at the trace's first event.
     * tests/test_probe.c holds each policy that says so to it. */
    bool (*blind_to_limit)(const void *cfg);
    /* Optional. Whether settings a and b of this policy take the same decision at every step of
     * a replay whose largest request (before rounding) is largest bytes: they differ only in
     * thresholds that no block of such a trace reaches (PyTorch's max_split_size_mb above its
     * largest segment). whatif then searches once for both. NULL or false: not known to. */
    bool (*same_decisions)(const void *a, const void *b, uint64_t largest);
    /* Optional, with collect. The smallest limit under which a growth that finds reserved
     * bytes already reserved leaves collect nothing to do (garbage collection's threshold is
     * a fraction of the limit); 0 when collect reads no limit. The heap folds it into
     * gs_heap_limit_asked, so a setting that collects garbage can be blind to the limit too.
     * A collect that acts under a limit then says with gs_heap_limit_decides for which limits
     * it would have done the same (with no limit_unread, the heap takes it to read the limit
     * exactly). */
    uint64_t (*limit_unread)(const void *cfg, uint64_t reserved);

    /* Optional. Before growing: free cached memory by policy (PyTorch's garbage collection).
     * Called only when the heap has a limit. */
    gs_status (*collect)(gs_heap *h, const void *cfg);
    /* Optional. After a failed growth: release some cached memory for this request and say
     * whether growth should be tried again before the full flush (PyTorch's
     * release_available_cached_blocks). A false return after partial releases is meaningful:
     * PyTorch then goes straight to the full flush. */
    bool (*release_some)(gs_heap *h, const void *cfg, unsigned pool, uint32_t stream,
                         uint64_t rounded, gs_status *st);

    /* ---- Optional: families that choose their own block or grow their own way ----
     * Added for the policy-family work (policies/preallocate.c, tlsf.c, bfc.c). Left NULL/false,
     * the core
     * does exactly what it did before: best fit from its index and one segment of segment_size
     * per growth (the pytorch and cupy policies set none of these; the malloc hot path pays
     * one predictable branch on pick). */

    /* Choose the free block for a request of rounded bytes on stream, instead of the core's
     * best fit (fits is then not called): a block of pool's index at least rounded bytes large
     * (read it with gs_pool_lower_bound/next), or NULL for a miss. The core takes it out of the
     * index and splits it by should_split. First fit, TLSF's good fit, a stream-blind search. */
    gs_block *(*pick)(gs_heap *h, const void *cfg, unsigned pool, uint32_t stream,
                      uint64_t rounded);
    /* Grow the pool for a request that no free block serves, instead of one cudaMalloc of
     * segment_size: add segments with gs_heap_grow_segment (any size, any stream, several or
     * none) and return GS_OK, or GS_ERR_OOM to refuse (another status: a device error). The core
     * then looks for a block again (pick or best fit) and climbs the ladder when there is none:
     * attempt 0 is the first growth, 1 follows release_some, 2 the full release (the counted
     * retry). State across calls (BFC's doubling region size) lives in the heap:
     * gs_heap_policy_state. */
    gs_status (*grow)(gs_heap *h, const void *cfg, unsigned pool, uint32_t stream,
                      uint64_t rounded, unsigned attempt);
    /* Optional. True: the allocator never gives cached memory back, so the ladder's full release
     * and empty_cache complete pending frees but free no segment (a preallocated arena, BFC
     * without garbage collection). NULL: false. Asked once, when a heap is made. */
    bool (*keeps_cache)(const void *cfg);

    /* Optional. True and *out: fits and should_split are exactly the rule of gs_fit_rule with
     * these numbers (both hooks must still be given, and agree: test_policy checks), so the
     * core applies it without calling them. NULL or false: the core calls the hooks. Asked
     * once, when a heap is made. */
    bool (*fit_rule)(const void *cfg, gs_fit_rule *out);

    /* Optional. True: the core also keeps each stream's free blocks of every pool in address
     * order, so that gs_pool_first_fit finds the lowest-addressed block that holds a request
     * from that order (core/addr_index.c) instead of a walk over every larger block. Every index
     * update of the policy's pools then pays the second order's update; the other policies pay
     * one predictable branch. A function of the configuration, as a policy may offer first fit
     * as one of its settings (preallocate's fit:first). NULL: false. Asked once, when a heap
     * is made. */
    bool (*addr_order)(const void *cfg);
    /* Optional. True: pick returns its block already out of the index, taken with
     * gs_pool_take_lower_bound or gs_pool_take (one descent of the index where a pick the core
     * takes out costs two: the pick's and the removal's). */
    bool pick_takes;
} gs_policy_ops;

struct gs_policy {
    const gs_policy_ops *ops;
    void *cfg;
    char *spec; /* as given: NAME or NAME:CONF */
};

/* A request's size as p rounds it, for a report of a request that failed: a request above
 * GS_MAX_REQUEST fails before any rounding (gs_heap_malloc), and a rounding of it could overflow
 * (pytorch's roundup_power2_divisions gave 0 for 2^64 - 616), so it is reported as it was. */
static inline uint64_t gs_policy_rounded(const gs_policy *p, uint64_t size)
{
    return size <= GS_MAX_REQUEST ? p->ops->round_size(p->cfg, size) : size;
}

#define GS_POLICY_ERROR (gs_policy_error_quark())
GQuark gs_policy_error_quark(void);
typedef enum { GS_POLICY_ERROR_UNKNOWN, GS_POLICY_ERROR_CONFIG } gs_policy_error_code;

G_END_DECLS

#endif
