/* policy.c - the policy registry: find a policy by name and parse its config. */
#include <string.h>

#include "policies.h"

G_DEFINE_QUARK(gs-policy-error-quark, gs_policy_error)

static const gs_policy_ops *const registry[] = {
    &gs_policy_pytorch,
    &gs_policy_cupy,
    &gs_policy_preallocate,
    &gs_policy_tlsf,
    &gs_policy_bfc,
    &gs_policy_rmm_pool,
    &gs_policy_rmm_arena,
    &gs_policy_cuda_async,
    &gs_policy_stitch,
    NULL,
};

const gs_policy_ops *const *gs_policy_registry(void) { return registry; }

bool gs_policy_blind_to_limit(const gs_policy *p)
{
    return p->ops->blind_to_limit && p->ops->blind_to_limit(p->cfg);
}

bool gs_policy_same_decisions(const gs_policy *a, const gs_policy *b, uint64_t largest)
{
    return a->ops == b->ops && a->ops->same_decisions &&
           a->ops->same_decisions(a->cfg, b->cfg, largest);
}

/* For a policy whose every setting is blind to the limit. */
bool gs_policy_always_blind(const void *cfg)
{
    (void)cfg;
    return true;
}

const char *gs_policy_strip_env(const char *spec)
{
    static const char env[] = "PYTORCH_CUDA_ALLOC_CONF=";
    return g_str_has_prefix(spec, env) ? spec + strlen(env) : spec;
}

/* A spec whose first word is no policy but one of the pytorch policy's keys
 * ("expandable_segments:True,max_split_size_mb:128", PYTORCH_CUDA_ALLOC_CONF as it is): the
 * pytorch policy's config, spelled in full. NULL when spec is anything else. */
static char *as_pytorch_conf(const char *spec)
{
    size_t n = strcspn(spec, ":,");
    for (const gs_policy_ops *const *r = registry; *r; r++)
        if (strlen((*r)->name) == n && strncmp((*r)->name, spec, n) == 0) return NULL;
    for (const gs_policy_key *k = gs_policy_pytorch.keys; k && k->name; k++) {
        size_t kn = strlen(k->name);
        bool prefix = kn && k->name[kn - 1] == '*';
        if (prefix ? n >= kn - 1 && strncmp(spec, k->name, kn - 1) == 0
                   : kn == n && strncmp(spec, k->name, n) == 0)
            return g_strdup_printf("pytorch:%s", spec);
    }
    return NULL;
}

/* gs_policy_new of a setting of printable text. */
static gs_policy *policy_new(const char *given, GError **err)
{
    char *full = as_pytorch_conf(given);
    const char *spec = full ? full : given;
    const char *colon = strchr(spec, ':');
    size_t wlen = colon ? (size_t)(colon - spec) : strlen(spec);
    const char *conf = colon ? colon + 1 : "";
    /* NAME@RELEASE: the release of the original that the policy emulates (pytorch@2.12) */
    const char *at = memchr(spec, '@', wlen);
    size_t nlen = at ? (size_t)(at - spec) : wlen;
    char *release = at ? g_strndup(at + 1, wlen - nlen - 1) : NULL;
    for (const gs_policy_ops *const *r = registry; *r; r++) {
        if (strlen((*r)->name) != nlen || strncmp((*r)->name, spec, nlen) != 0) continue;
        GError *perr = NULL;
        void *cfg = NULL;
        if (!release) cfg = (*r)->parse(conf, &perr);
        else if ((*r)->parse_at) cfg = (*r)->parse_at(release, conf, &perr);
        else
            g_set_error(&perr, GS_POLICY_ERROR, GS_POLICY_ERROR_CONFIG,
                        "%s takes no '@RELEASE' ('@%s'): it emulates one release", (*r)->name,
                        release);
        g_free(release);
        if (!cfg) {
            /* A setting can come from a file (a reference's, a snapshot's): no control byte of
             * it reaches the one-line message raw. */
            char *msg = g_strdup_printf("policy '%s': %s", spec, perr->message);
            char *safe = gs_printable(msg);
            g_set_error_literal(err, GS_POLICY_ERROR, GS_POLICY_ERROR_CONFIG, safe);
            g_free(safe);
            g_free(msg);
            g_error_free(perr);
            g_free(full);
            return NULL;
        }
        gs_policy *p = g_new0(gs_policy, 1);
        p->ops = *r;
        p->cfg = cfg;
        p->spec = g_strdup(spec);
        g_free(full);
        return p;
    }
    g_free(release);
    GString *names = g_string_new(NULL);
    for (const gs_policy_ops *const *r = registry; *r; r++)
        g_string_append_printf(names, "%s%s", names->len ? ", " : "", (*r)->name);
    char *msg = g_strdup_printf("unknown policy '%.*s' (known: %s)", (int)nlen, spec, names->str);
    char *safe = gs_printable(msg);
    g_set_error_literal(err, GS_POLICY_ERROR, GS_POLICY_ERROR_UNKNOWN, safe);
    g_free(safe);
    g_free(msg);
    g_string_free(names, TRUE);
    g_free(full);
    return NULL;
}

gs_policy *gs_policy_new(const char *given, GError **err)
{
    given = gs_policy_strip_env(given);
    /* A setting is shown on one line (a table's row, a CSV field, a file name's part):
     * white space in it (a tab, a line break) is a space, as good as none to PyTorch, whose
     * ConfigTokenizer drops every isspace() byte; any other control byte would reach the
     * output raw, and PyTorch would take it into a key: refused. */
    char *norm = NULL;
    for (const char *c = given; *c; c++) {
        unsigned char u = (unsigned char)*c;
        if (u >= 0x20 && u != 0x7f) continue;
        if (g_ascii_isspace(u)) {
            if (!norm) norm = g_strdup(given);
            norm[c - given] = ' ';
            continue;
        }
        char *safe = gs_printable(given);
        g_set_error(err, GS_POLICY_ERROR, GS_POLICY_ERROR_CONFIG,
                    "policy '%s': a control character (byte 0x%02x) in the setting", safe, u);
        g_free(safe);
        g_free(norm);
        return NULL;
    }
    gs_policy *p = policy_new(norm ? norm : given, err);
    g_free(norm);
    return p;
}

/* Split "k:v,k:v" at top-level commas (a roundup list contains commas inside brackets), its
 * white space dropped: PyTorch's tokenizer (ConfigTokenizer, c10/core/AllocatorConfig.h) skips
 * every isspace() character, so "max_split_size_mb: 64" and "[256 : 1, >:2]" are settings it
 * takes. */
static GPtrArray *split_conf(const char *given)
{
    char *conf = g_strdup(given), *w = conf;
    for (const char *r = given; *r; r++)
        if (!g_ascii_isspace(*r)) *w++ = *r;
    *w = '\0';
    GPtrArray *items = g_ptr_array_new_with_free_func(g_free);
    int depth = 0;
    const char *start = conf;
    for (const char *p = conf;; p++) {
        if (*p == '[') depth++;
        else if (*p == ']') depth--;
        if (*p == '\0' || (*p == ',' && depth == 0)) {
            char *item = g_strstrip(g_strndup(start, (size_t)(p - start)));
            if (*item) g_ptr_array_add(items, item);
            else g_free(item);
            if (*p == '\0') break;
            start = p + 1;
        }
    }
    g_free(conf);
    return items;
}

static const gs_policy_key *find_key(const gs_policy_key *keys, const char *key)
{
    for (const gs_policy_key *k = keys; k && k->name; k++) {
        size_t n = strlen(k->name);
        if (n && k->name[n - 1] == '*' ? strncmp(key, k->name, n - 1) == 0
                                       : strcmp(key, k->name) == 0)
            return k;
    }
    return NULL;
}

bool gs_policy_conf_parse(const gs_policy_key *keys, void *cfg, const char *conf, GError **err)
{
    GPtrArray *items = split_conf(conf ? conf : "");
    bool ok = true;
    for (unsigned i = 0; ok && i < items->len; i++) {
        char *item = items->pdata[i];
        char *colon = strchr(item, ':');
        if (!colon) {
            g_set_error(err, GS_POLICY_ERROR, GS_POLICY_ERROR_CONFIG, "'%s': expected key:value",
                        item);
            ok = false;
            break;
        }
        *colon = '\0';
        const gs_policy_key *k = find_key(keys, item);
        if (!k) {
            g_set_error(err, GS_POLICY_ERROR, GS_POLICY_ERROR_CONFIG,
                        "unknown key '%s' (see gpusim replay --help for the policies' keys)", item);
            ok = false;
        } else {
            ok = k->set(cfg, item, colon + 1, err);
        }
    }
    g_ptr_array_free(items, TRUE);
    return ok;
}

char *gs_policy_keys_help(const gs_policy_ops *ops)
{
    GString *s = g_string_new(NULL);
    for (const gs_policy_key *k = ops->keys; k && k->name; k++) {
        if (!k->help) continue;
        char *key = g_strdup_printf("%s:%s", k->name, k->arg);
        char **lines = g_strsplit(k->help, "\n", -1);
        /* the key, then its help from column 30; a longer key keeps two spaces before it */
        g_string_append_printf(s, "%-28s %s%s\n", key, strlen(key) > 28 ? " " : "", lines[0]);
        for (char **l = lines + 1; *l; l++) g_string_append_printf(s, "%-28s %s\n", "", *l);
        g_strfreev(lines);
        g_free(key);
    }
    if (ops->keys_help) g_string_append(s, ops->keys_help);
    return g_string_free(s, FALSE);
}

void gs_policy_free(gs_policy *p)
{
    if (!p) return;
    p->ops->cfg_free(p->cfg);
    g_free(p->spec);
    g_free(p);
}
