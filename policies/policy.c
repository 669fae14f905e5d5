/* policy.c - the policy registry: find a policy by name and parse its config. */
#include <string.h>

#include "policies.h"

G_DEFINE_QUARK(gs-policy-error-quark, gs_policy_error)

static const gs_policy_ops *const registry[] = {
    &gs_policy_pytorch,
    &gs_policy_cupy,
    NULL,
};

const gs_policy_ops *const *gs_policy_registry(void) { return registry; }

gs_policy *gs_policy_new(const char *spec, GError **err)
{
    const char *colon = strchr(spec, ':');
    size_t nlen = colon ? (size_t)(colon - spec) : strlen(spec);
    const char *conf = colon ? colon + 1 : "";
    for (const gs_policy_ops *const *r = registry; *r; r++) {
        if (strlen((*r)->name) != nlen || strncmp((*r)->name, spec, nlen) != 0) continue;
        GError *perr = NULL;
        void *cfg = (*r)->parse(conf, &perr);
        if (!cfg) {
            g_set_error(err, GS_POLICY_ERROR, GS_POLICY_ERROR_CONFIG, "policy '%s': %s", spec,
                        perr->message);
            g_error_free(perr);
            return NULL;
        }
        gs_policy *p = g_new0(gs_policy, 1);
        p->ops = *r;
        p->cfg = cfg;
        p->spec = g_strdup(spec);
        return p;
    }
    GString *names = g_string_new(NULL);
    for (const gs_policy_ops *const *r = registry; *r; r++)
        g_string_append_printf(names, "%s%s", names->len ? ", " : "", (*r)->name);
    g_set_error(err, GS_POLICY_ERROR, GS_POLICY_ERROR_UNKNOWN,
                "unknown policy '%.*s' (known: %s)", (int)nlen, spec, names->str);
    g_string_free(names, TRUE);
    return NULL;
}

void gs_policy_free(gs_policy *p)
{
    if (!p) return;
    p->ops->cfg_free(p->cfg);
    g_free(p->spec);
    g_free(p);
}
