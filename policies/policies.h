/* policies.h - the named policies (pytorch.c, cupy.c) and the registry that finds them by name
 * and parses their config (policy.c). The contract they implement is core/policy.h.
 */
#ifndef GS_POLICIES_H
#define GS_POLICIES_H

#include "policy.h"

G_BEGIN_DECLS

/* Look up NAME in the registry and parse CONF. */
gs_policy *gs_policy_new(const char *spec, GError **err);
void gs_policy_free(gs_policy *p);
/* The registry, NULL-terminated, for --help and tests. */
const gs_policy_ops *const *gs_policy_registry(void);

extern const gs_policy_ops gs_policy_pytorch;
extern const gs_policy_ops gs_policy_cupy; /* policies/cupy.c */

/* PyTorch's size helpers, exposed for tests and other policies. */
uint64_t gs_pytorch_round_size(const void *cfg, uint64_t size);
/* roundup_power2_divisions in effect for a size (PyTorch's interval table). */
unsigned gs_pytorch_divisions(const void *cfg, uint64_t size);

G_END_DECLS

#endif
