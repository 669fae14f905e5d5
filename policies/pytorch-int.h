/* pytorch-int.h - what the pytorch policy's two files share: its parsed configuration, and the
 * keys and rules that differ between the PyTorch releases it emulates. pytorch.c is the
 * allocator (2.11's algorithm, with the few branches a later release takes); pytorch_versions.c
 * says which release has which key and how a release is named and chosen. Private to them. */
#ifndef GS_PYTORCH_INT_H
#define GS_PYTORCH_INT_H

#include "policies.h"

G_BEGIN_DECLS

/* §1.1 */
enum {
    kMinBlockSize = 512,
    kSmallSize = 1048576,
    kSmallBuffer = 2097152,
    kLargeBuffer = 20971520,
    kMinLargeAlloc = 10485760,
    kRoundLarge = 2097152,
};

#define ROUNDUP_INTERVALS 16 /* 1 MiB .. 64 GiB, one per power of two (§1.2) */

typedef struct {
    /* The release emulated, as 2.x's minor number (GS_PYTORCH_FIRST .. GS_PYTORCH_LAST); 0 for
     * a spec without @RELEASE until it is resolved for a trace (gs_policy_at_release): 2.11's
     * rules meanwhile. */
    unsigned release;
    /* A spec without @RELEASE takes the keys of every release; the newest release one of its
     * keys needs (0: none newer than 2.11) and that key, for the refusal when the trace's
     * release lacks it. */
    unsigned needs;
    const char *needs_key;
    uint64_t max_split_size;         /* UINT64_MAX: unlimited */
    uint64_t max_non_split_rounding; /* the given one, else large_segment's */
    bool non_split_given;
    uint64_t large_segment; /* large_segment_size_mb: default kLargeBuffer */
    unsigned divisions[ROUNDUP_INTERVALS];
    double gc_threshold; /* 0: off */
    double fraction;     /* per_process_memory_fraction; 1: no limit */
    bool expandable;
    bool throw_on_oom;                    /* throw_on_cudamalloc_oom (2.12+) */
    bool es_reserve, es_reserve_by_class; /* expandable_segments_reserve(_by_class) given (2.14) */
    bool es_reserve_bad;                  /* one not of PyTorch's forms: ignored, as PyTorch does */
} pytorch_cfg;

/* The release a parse is for: cfg->release, and for a spec without @RELEASE every key is taken
 * and the newest release a key needs noted. False and err (naming the key and the first release
 * that has it) when cfg's release lacks key; since: the first release that has it. */
bool gs_pytorch_key_since(pytorch_cfg *cfg, const char *key, unsigned since, GError **err);

/* The keys that 2.11 lacks or that differ by release (pytorch_versions.c), for the key table. */
bool gs_pytorch_set_large_segment(void *cfg, const char *key, const char *val, GError **err);
bool gs_pytorch_set_fraction(void *cfg, const char *key, const char *val, GError **err);
bool gs_pytorch_set_throw_on_oom(void *cfg, const char *key, const char *val, GError **err);
bool gs_pytorch_set_es_reserve(void *cfg, const char *key, const char *val, GError **err);
bool gs_pytorch_set_es_reserve_by_class(void *cfg, const char *key, const char *val, GError **err);
/* The limit and the rejection bound (gs_policy_ops.limit, reject_above) */
uint64_t gs_pytorch_limit(const void *cfg, uint64_t device_total);
uint64_t gs_pytorch_reject_above(const void *cfg, uint64_t device_total);
/* The warnings of those keys (gs_policy_ops.warnings appends them) */
void gs_pytorch_release_warnings(const pytorch_cfg *cfg, bool has_limit, GPtrArray *out);

/* PyTorch's exact spellings of a boolean (pytorch.c) */
bool gs_pytorch_parse_bool(const char *key, const char *val, bool *out, GError **err);
/* Parse conf into a new configuration for release (0: a spec without @RELEASE) (pytorch.c) */
void *gs_pytorch_parse_release(unsigned release, const char *conf, GError **err);
/* gs_policy_ops.parse_at: "2.12" (pytorch_versions.c) */
void *gs_pytorch_parse_at(const char *release, const char *conf, GError **err);

G_END_DECLS

#endif
