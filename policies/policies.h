/* policies.h - the named policies (pytorch.c, cupy.c, preallocate.c, tlsf.c, bfc.c,
 * rmm_pool.c, rmm_arena.c, cuda_async.c) and the registry that finds them by name
 * and parses their config (policy.c). The contract they implement is core/policy.h.
 */
#ifndef GS_POLICIES_H
#define GS_POLICIES_H

#include "policy.h"

G_BEGIN_DECLS

/* Look up NAME in the registry and parse CONF. PYTORCH_CUDA_ALLOC_CONF pasted as it is, with
 * or without "PYTORCH_CUDA_ALLOC_CONF=" in front and without "pytorch:", is the pytorch policy's
 * config ("expandable_segments:True" is "pytorch:expandable_segments:True", the spec kept). */
gs_policy *gs_policy_new(const char *spec, GError **err);
void gs_policy_free(gs_policy *p);
/* Parse "KEY:VALUE,KEY:VALUE" into cfg by the table keys (commas inside [...] do not split):
 * every key must be in the table. false and err (GS_POLICY_ERROR_CONFIG) otherwise. */
bool gs_policy_conf_parse(const gs_policy_key *keys, void *cfg, const char *conf, GError **err);
/* The keys of a policy for --help, one per key ("max_split_size_mb:N  blocks >= ..."), then its
 * keys_help note. g_free it. */
char *gs_policy_keys_help(const gs_policy_ops *ops);
/* spec after a "PYTORCH_CUDA_ALLOC_CONF=" in front, if it has one. */
const char *gs_policy_strip_env(const char *spec);
/* Whether p's setting reads no limit until a growth meets it (gs_policy_ops.blind_to_limit). */
bool gs_policy_blind_to_limit(const gs_policy *p);
/* Whether a and b decide alike on a trace whose largest request is largest bytes
 * (gs_policy_ops.same_decisions): the same family, and its op says so. */
bool gs_policy_same_decisions(const gs_policy *a, const gs_policy *b, uint64_t largest);
/* The registry, NULL-terminated, for --help and tests. */
const gs_policy_ops *const *gs_policy_registry(void);

extern const gs_policy_ops gs_policy_pytorch;
extern const gs_policy_ops gs_policy_cupy; /* policies/cupy.c */
extern const gs_policy_ops gs_policy_stitch; /* policies/stitch.c */
extern const gs_policy_ops gs_policy_preallocate; /* preallocate.c */
extern const gs_policy_ops gs_policy_tlsf;        /* tlsf.c */
extern const gs_policy_ops gs_policy_bfc;         /* bfc.c */
extern const gs_policy_ops gs_policy_rmm_pool;    /* rmm_pool.c */
extern const gs_policy_ops gs_policy_rmm_arena;   /* rmm_arena.c */
extern const gs_policy_ops gs_policy_cuda_async;  /* cuda_async.c */

/* blind_to_limit for a policy none of whose settings reads the limit (cupy, tlsf). */
bool gs_policy_always_blind(const void *cfg);

/* ---- For the families (family.c): config values, each error naming the key and the value ---- */
/* 0 < x <= 1 */
bool gs_family_fraction(const char *key, const char *val, double *out, GError **err);
/* RMM's "P%" (percent_of_free_device_memory): 1 and *out = P/100 for 0 < P <= 100; 0 when val
 * does not end in '%' (nothing set: the caller reads another form); -1 and err otherwise */
int gs_family_percent(const char *key, const char *val, double *out, GError **err);
/* a size as people write it (util's gs_parse_size), lo .. GS_MAX_REQUEST */
bool gs_family_size(const char *key, const char *val, uint64_t lo, uint64_t *out, GError **err);
/* a power of two, lo .. hi */
bool gs_family_pow2(const char *key, const char *val, uint64_t lo, uint64_t hi, uint64_t *out,
                    GError **err);
/* true/false/1/0 (any case) */
bool gs_family_bool(const char *key, const char *val, bool *out, GError **err);
/* The fit rule (gs_policy_ops.fit_rule) of a policy whose fits is always true and whose
 * should_split is b->size - rounded >= min_rest, in every pool. */
void gs_family_rule_any_fit(gs_fit_rule *out, uint64_t min_rest);
/* fit_rule for fits always true and should_split b->size > rounded (any remainder). */
bool gs_family_fit_rule_split_any(const void *cfg, gs_fit_rule *out);
/* Stream-blind families keep every segment on stream 0 and search it alone: the smallest free
 * block of at least size (lowest address among equals). Their first fit, the lowest-addressed
 * one, is the core's gs_pool_first_fit on stream 0 (with gs_policy_ops.addr_order). */
gs_block *gs_family_best_fit0(gs_heap *h, unsigned pool, uint64_t size);
/* Stream-ordered pools (rmm-pool, cuda-async): the smallest free block of at least size on
 * stream (lowest address among equals); failing that, when others, the smallest that fits on
 * the lowest-numbered other stream that has one (RMM walks its map of per-stream free lists in
 * order and takes the first list's best fit). */
gs_block *gs_family_stream_first(gs_heap *h, unsigned pool, uint32_t stream, uint64_t size,
                                 bool others);
/* Its second half alone: the smallest that fits on the lowest-numbered stream other than
 * stream that has one (for a pick that has searched stream itself already). */
gs_block *gs_family_other_stream_first(gs_heap *h, unsigned pool, uint32_t stream,
                                       uint64_t size);

/* TLSF's mapping_search for the tlsf policy's cfg: the lower edge of the first size class whose
 * every block serves size (exposed for tests). */
uint64_t gs_tlsf_search_size(const void *cfg, uint64_t size);

/* ---- The PyTorch releases the pytorch policy emulates (pytorch_versions.c) ----
 * pytorch@2.12:CONF follows 2.12; plain pytorch follows the release the trace was recorded with
 * (its header's pytorch_version), else 2.11. Only 2.11 is measured against real runs. */
#define GS_PYTORCH_FIRST 11 /* 2.11 */
#define GS_PYTORCH_LAST 14  /* 2.14 */
/* A PyTorch version as written ("2.13", "2.13.0+cu130", "2.14.0a0+4fdf77b"): its minor number
 * when it is 2.x, else 0. */
unsigned gs_pytorch_release_parse(const char *text);
/* The release plain pytorch emulates for a trace recorded with that version: its minor number
 * brought into GS_PYTORCH_FIRST .. GS_PYTORCH_LAST; 0 when recorded names no 2.x release. */
unsigned gs_pytorch_release_of_trace(const char *recorded);
/* The policy to replay a trace recorded with PyTorch `recorded` (its pytorch_version; NULL when
 * the trace does not say) under, in place of p: NULL when p serves as it is (not pytorch, a
 * spec with @RELEASE, or a trace of 2.11 or of no known release); else a new policy with p's
 * spec, for that release (gs_policy_free it). NULL and err when a key of p's needs a release
 * newer than the trace's (the message names both). */
gs_policy *gs_policy_at_release(const gs_policy *p, const char *recorded, GError **err);

/* PyTorch's size helpers, exposed for tests and other policies. */
uint64_t gs_pytorch_round_size(const void *cfg, uint64_t size);
/* roundup_power2_divisions in effect for a size (PyTorch's interval table). */
unsigned gs_pytorch_divisions(const void *cfg, uint64_t size);

G_END_DECLS

#endif
