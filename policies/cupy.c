/* cupy.c - CuPy 14's MemoryPool (cupy/cuda/memory.pyx, SingleDeviceMemoryPool) as a gpusim
 * policy, so a trace with a CuPy client replays against the pool that client really has.
 *
 * What CuPy does, and where it lives here (docs/cupy-pool.md):
 *   - sizes round up to 512 bytes (ALLOCATION_UNIT_SIZE, _round_size): round_size;
 *   - one pool, with free chunks kept per stream ("arenas"): a chunk freed on stream S serves
 *     only requests on S. The core's index is keyed by stream already;
 *   - best fit: the smallest free chunk at least as large as the request (lower_bound in the
 *     arena), split when larger, the remainder going back to the arena; a freed chunk merges
 *     with free neighbours of its allocation: fits always true, should_split on any remainder;
 *   - a miss cudaMallocs exactly the rounded size (no segment rounding, no small pool);
 *   - free_all_blocks releases only chunks that are a whole cudaMalloc (prev and next None),
 *     which is what the core's gs_heap_release_cached does with cudaMalloc segments;
 *   - the OOM path (_try_malloc): when the pool's limit (set_limit, CUPY_GPU_MEMORY_LIMIT:
 *     --capacity here) or cudaMalloc refuses, free_all_blocks and try again, then fail. That is
 *     the core's ladder with no garbage collection and no partial release: the full release,
 *     then the counted retry (num_alloc_retries), then the OOM.
 *
 * Where the replay departs from CuPy, on purpose:
 *   - A request larger than the limit itself fails in CuPy before free_all_blocks; here it goes
 *     through the ladder like any other (the cache is released, the retry counted, then OOM).
 *   - CuPy tries a third time after gc.collect() and another free_all_blocks. A replay holds no
 *     garbage, so that attempt sees the same pool and device as the second and fails the same
 *     way; gpusim does not repeat it (a CuPy OOM shows one failed cudaMalloc fewer).
 *   - Among free chunks of equal size CuPy takes whichever its index holds first: the lowest
 *     address of the Python chunk object in 14.1's std::set (a Python set's order in 14.0),
 *     which no trace records; gpusim takes the lowest device address. Which chunk is taken
 *     decides what merges later, so sizes and counts can depend on it: on programs of many
 *     small arrays the replay's peak was exact on two, 0.8% above the real pool's on one
 *     (docs/cupy-pool.md, "Ties").
 *   - A request of 0 bytes takes no memory in CuPy (a null pointer); here it takes 512 bytes,
 *     as in PyTorch, because the core serves every request with a block.
 *   - CuPy keeps no statistics of PyTorch's kinds; the core's (allocated, reserved, segments,
 *     retries, OOMs, device calls) mean the same things here: reserved is CuPy's total_bytes(),
 *     allocated its used_bytes(). Everything counts in the large pool (CuPy has one).
 *
 * No config keys: "cupy" is the whole spec. The pool's limit is --capacity.
 */
#include "policies.h"

enum { kUnit = 512 };

static const gs_pool_desc cupy_pools[] = {{.is_small = false}};

static void *cupy_parse(const char *conf, GError **err)
{
    if (conf && *conf) {
        g_set_error(err, GS_POLICY_ERROR, GS_POLICY_ERROR_CONFIG,
                    "unknown key '%s' (the cupy policy has no config keys; its limit is "
                    "--capacity)", conf);
        return NULL;
    }
    /* Nothing to configure, but a policy's cfg is non-NULL when parsing succeeded. */
    return g_new0(char, 1);
}

static uint64_t cupy_round_size(const void *cfg, uint64_t size)
{
    if (size == 0) return kUnit; /* see the departures above */
    return (size + kUnit - 1) / kUnit * kUnit;
}

static unsigned cupy_pool_of(const void *cfg, uint64_t rounded) { return 0; }

/* One cudaMalloc of exactly the rounded size per miss. */
static uint64_t cupy_segment_size(const void *cfg, uint64_t rounded) { return rounded; }

static bool cupy_fits(const void *cfg, const gs_block *b, uint64_t rounded) { return true; }

/* Chunk.split: any remainder (a multiple of 512 bytes) becomes a free chunk. */
static bool cupy_should_split(const void *cfg, const gs_block *b, uint64_t rounded)
{
    return b->size > rounded;
}

static uint64_t cupy_oversize(const void *cfg) { return UINT64_MAX; }

const gs_policy_ops gs_policy_cupy = {
    .version = GS_POLICY_VERSION,
    .name = "cupy",
    .summary = "CuPy 14's MemoryPool (512-byte rounding, per-stream best fit, split and merge)",
    .keys_help = "(no config keys; --capacity is the pool's set_limit)\n",
    .parse = cupy_parse,
    .blind_to_limit = gs_policy_always_blind,
    .cfg_free = g_free,
    .npools = 1,
    .pools = cupy_pools,
    .round_size = cupy_round_size,
    .pool_of = cupy_pool_of,
    .segment_size = cupy_segment_size,
    .fits = cupy_fits,
    .should_split = cupy_should_split,
    .fit_rule = gs_family_fit_rule_split_any,
    .oversize = cupy_oversize,
};
