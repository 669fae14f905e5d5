/* sweep.c - expand a grid of settings written with brace lists, replay a trace in every cell on
 * a GLib thread pool, and report one CSV row per cell.
 *
 * Cells run in parallel safely because nothing in the replay path is shared and mutable: the
 * trace is read-only, each cell has its own policy, heap and simulated device, the calibration
 * table is only read, and the core has no global state. Results land in their cell's slot, so
 * the output's order is the grid's, not the order cells finish in.
 */
#include <math.h>
#include <string.h>

#include "sweep.h"

G_DEFINE_QUARK(gs-sweep-error-quark, gs_sweep_error)

typedef struct {
    char *text;    /* the expanded string */
    char **choice; /* the alternative taken in each brace list */
} expansion;

/* The parameter a brace list sets: the key in front of it ("pytorch:max_split_size_mb:{...}"
 * and "...,garbage_collection_threshold:{...}" name max_split_size_mb and
 * garbage_collection_threshold); the fallback for a list not after "key:". */
static char *group_name(const char *before, const char *fallback)
{
    size_t n = strlen(before);
    if (n < 2 || before[n - 1] != ':') return g_strdup(fallback);
    const char *start = before + n - 1;
    while (start > before && start[-1] != ':' && start[-1] != ',') start--;
    return start < before + n - 1 ? g_strndup(start, (size_t)(before + n - 1 - start)) : g_strdup(fallback);
}

static gboolean bad(GError **err, const char *what, const char *s, const char *why)
{
    g_set_error(err, GS_SWEEP_ERROR, GS_SWEEP_ERROR_INPUT, "%s '%s': %s", what, s, why);
    return FALSE;
}

/* Shell-style brace expansion without nesting: "a{1,2}b{x,y}" is a1bx a1by a2bx a2by. names
 * gets each list's parameter name; out gets the expansions. */
/* Digits after the point in a number as written ("0.25": 2). */
static int decimals(const char *s)
{
    const char *dot = strchr(s, '.');
    return dot ? (int)strspn(dot + 1, "0123456789") : 0;
}

/* A range in braces, "A..B" or "A..B..STEP" (STEP 1 by default): the numbers A, A+STEP, ...
 * up to B, written with as many decimals as the most precise of the three. NULL and a reason
 * in *why when it is no range gpusim can expand. */
static char **expand_range(const char *item, const char **why)
{
    char **p = g_strsplit(item, "..", 3);
    guint n = g_strv_length(p);
    double v[3] = {0, 0, 1};
    int dec = 0;
    *why = NULL;
    for (guint i = 0; i < n && !*why; i++) {
        char *end;
        v[i] = g_ascii_strtod(p[i], &end);
        if (!*p[i] || *end || !isfinite(v[i])) *why = "a range is A..B or A..B..STEP, in numbers";
        dec = MAX(dec, decimals(p[i]));
    }
    g_strfreev(p);
    if (*why) return NULL;
    if (n < 2) return (*why = "a range is A..B or A..B..STEP", NULL);
    if (!(v[2] > 0)) return (*why = "a range's STEP must be above 0", NULL);
    if (v[1] < v[0]) return (*why = "a range goes up: A..B with A <= B", NULL);
    double count = floor((v[1] - v[0]) / v[2] + 1e-9) + 1;
    if (count > GS_SWEEP_MAX_CELLS) return (*why = "a range of more values than a sweep may have cells", NULL);
    GPtrArray *out = g_ptr_array_new();
    for (guint i = 0; i < (guint)count; i++)
        g_ptr_array_add(out, g_strdup_printf("%.*f", dec, v[0] + v[2] * i));
    g_ptr_array_add(out, NULL);
    return (char **)g_ptr_array_free(out, FALSE);
}

/* inner split at its commas outside square brackets: a choice may be a list of its own, as
 * roundup_power2_divisions' "[256:1,>:4]" (split there, "{[256:1,>:4],2}" had three choices,
 * and the policy refused the first, "[256:1"). A bracket left open is the policy's to refuse. */
static char **split_choices(const char *inner)
{
    GPtrArray *out = g_ptr_array_new();
    int depth = 0;
    const char *start = inner;
    for (const char *c = inner;; c++) {
        if (*c == '[') depth++;
        else if (*c == ']' && depth > 0) depth--;
        else if ((*c == ',' && depth == 0) || !*c) {
            g_ptr_array_add(out, g_strndup(start, (size_t)(c - start)));
            start = c + 1;
        }
        if (!*c) break;
    }
    g_ptr_array_add(out, NULL);
    return (char **)g_ptr_array_free(out, FALSE);
}

/* The choices of one brace list: its comma-separated items, a range expanded in place. */
static char **brace_choices(const char *inner, const char **why)
{
    char **items = split_choices(inner);
    GPtrArray *out = g_ptr_array_new();
    *why = NULL;
    for (char **it = items; *it && !*why; it++) {
        if (!strstr(*it, "..")) {
            g_ptr_array_add(out, g_strdup(*it));
            continue;
        }
        char **r = expand_range(*it, why);
        for (char **x = r; x && *x; x++) g_ptr_array_add(out, *x);
        g_free(r); /* the strings moved to out */
    }
    g_strfreev(items);
    g_ptr_array_add(out, NULL);
    char **choices = (char **)g_ptr_array_free(out, FALSE);
    if (*why) {
        g_strfreev(choices);
        return NULL;
    }
    return choices;
}

static gboolean expand(const char *s, const char *what, const char *fallback, GPtrArray *names,
                       GArray *out, GError **err)
{
    GPtrArray *lits = g_ptr_array_new_with_free_func(g_free);
    GPtrArray *groups = g_ptr_array_new_with_free_func((GDestroyNotify)g_strfreev);
    GString *lit = g_string_new(NULL), *before = g_string_new(NULL);
    gboolean ok = TRUE;
    for (const char *c = s; ok && *c;) {
        if (*c == '}') {
            ok = bad(err, what, s, "a '}' without its '{'");
            break;
        }
        if (*c != '{') {
            g_string_append_c(lit, *c);
            g_string_append_c(before, *c++);
            continue;
        }
        const char *close = strchr(c, '}'), *open2 = strchr(c + 1, '{');
        if (!close) {
            ok = bad(err, what, s, "a '{' without its '}'");
            break;
        }
        if (open2 && open2 < close) {
            ok = bad(err, what, s, "braces inside braces are not supported");
            break;
        }
        char *inner = g_strndup(c + 1, (size_t)(close - c - 1));
        const char *why = NULL;
        char **alts = brace_choices(inner, &why);
        g_free(inner);
        if (!alts) {
            ok = bad(err, what, s, why);
            break;
        }
        for (char **a = alts; ok && *a; a++)
            if (!**a) ok = bad(err, what, s, "an empty choice in braces (write {64,128})");
        if (!alts[0]) ok = bad(err, what, s, "empty braces (write {64,128})");
        if (!ok) {
            g_strfreev(alts);
            break;
        }
        g_ptr_array_add(names, group_name(before->str, fallback));
        g_ptr_array_add(lits, g_string_free(lit, FALSE));
        lit = g_string_new(NULL);
        g_ptr_array_add(groups, alts);
        g_string_append(before, "{}");
        c = close + 1;
    }
    if (ok) {
        /* the cells it makes, counted before any is (saturating past the limit) */
        uint64_t cells = 1;
        for (guint k = 0; k < groups->len; k++)
            cells = MIN(cells * g_strv_length(groups->pdata[k]), (uint64_t)GS_SWEEP_MAX_CELLS + 1);
        if (cells > GS_SWEEP_MAX_CELLS) {
            char *why = g_strdup_printf("more than %u cells, the most a sweep may have (split the "
                                        "grid into several sweeps)", GS_SWEEP_MAX_CELLS);
            ok = bad(err, what, s, why);
            g_free(why);
        }
    }
    if (ok) {
        /* an odometer over the lists, the last one turning fastest */
        guint ng = groups->len;
        guint *at = g_new0(guint, ng + 1);
        for (;;) {
            GString *t = g_string_new(NULL);
            expansion x = {.choice = g_new0(char *, ng + 1)};
            for (guint k = 0; k < ng; k++) {
                char **alts = groups->pdata[k];
                g_string_append(t, lits->pdata[k]);
                g_string_append(t, alts[at[k]]);
                x.choice[k] = g_strdup(alts[at[k]]);
            }
            g_string_append(t, lit->str);
            x.text = g_string_free(t, FALSE);
            g_array_append_val(out, x);
            int k = (int)ng - 1;
            while (k >= 0) {
                if (((char **)groups->pdata[k])[++at[k]]) break;
                at[k--] = 0;
            }
            if (k < 0) break; /* every list wrapped round: done */
        }
        g_free(at);
    }
    g_string_free(lit, TRUE);
    g_string_free(before, TRUE);
    g_ptr_array_free(lits, TRUE);
    g_ptr_array_free(groups, TRUE);
    return ok;
}

static void expansions_free(GArray *a)
{
    for (guint i = 0; i < a->len; i++) {
        expansion *x = &g_array_index(a, expansion, i);
        g_free(x->text);
        g_strfreev(x->choice);
    }
    g_array_free(a, TRUE);
}

/* The column of a parameter name, added if new. */
static guint param_col(GPtrArray *params, const char *name)
{
    for (guint i = 0; i < params->len; i++)
        if (strcmp(params->pdata[i], name) == 0) return i;
    g_ptr_array_add(params, g_strdup(name));
    return params->len - 1;
}

void gs_sweep_free(gs_sweep *s)
{
    if (!s) return;
    for (guint i = 0; i < s->cells->len; i++) {
        gs_sweep_cell *c = &g_array_index(s->cells, gs_sweep_cell, i);
        g_free(c->policy);
        gs_policy_free(c->pol);
        g_strfreev(c->values);
    }
    g_array_free(s->cells, TRUE);
    g_ptr_array_free(s->params, TRUE);
    g_free(s);
}

void gs_sweep_shard(gs_sweep *s, unsigned k, unsigned n)
{
    g_return_if_fail(n > 0 && k < n);
    guint kept = 0;
    for (guint i = 0; i < s->cells->len; i++) {
        gs_sweep_cell *c = &g_array_index(s->cells, gs_sweep_cell, i);
        if (c->index % n == k) {
            if (kept != i) g_array_index(s->cells, gs_sweep_cell, kept) = *c;
            kept++;
        } else {
            g_free(c->policy);
            gs_policy_free(c->pol);
            g_strfreev(c->values);
        }
    }
    g_array_set_size(s->cells, kept);
}

/* The columns of one template's brace lists: each list's name, a name used twice in one
 * template getting a suffix ("max_split_size_mb#2"). */
static GArray *template_columns(gs_sweep *s, const GPtrArray *names)
{
    GArray *c = g_array_new(FALSE, FALSE, sizeof(guint));
    for (guint k = 0; k < names->len; k++) {
        char *name = g_strdup(names->pdata[k]);
        for (int dup = 2;; dup++) {
            bool used = false;
            for (guint j = 0; j < k; j++)
                used |= strcmp(g_ptr_array_index(s->params, g_array_index(c, guint, j)), name) == 0;
            if (!used) break;
            g_free(name);
            name = g_strdup_printf("%s#%d", (char *)names->pdata[k], dup);
        }
        guint col = param_col(s->params, name);
        g_array_append_val(c, col);
        g_free(name);
    }
    return c;
}

/* Where each parameter goes in a cell's values. */
typedef struct {
    const GArray *cols;     /* the template's lists, in order */
    guint cap_col;          /* G_MAXUINT: no capacity list */
    guint tmpl_col;         /* G_MAXUINT: one template */
} cell_layout;

/* The cells of one expansion of a template: one per capacity (caps NULL: one, no limit). */
static gboolean add_cells(gs_sweep *s, const char *tmpl, const expansion *pe, const GArray *caps,
                          const cell_layout *lay, GError **err)
{
    gs_policy *pol = gs_policy_new(pe->text, err);
    if (!pol) return FALSE;
    guint np = s->params->len;
    size_t n_caps = caps ? caps->len : 1;
    for (size_t k = 0; k < n_caps; k++) {
        gs_sweep_cell cell = {.policy = g_strdup(pe->text), .values = g_new0(char *, np + 1),
                              .index = s->cells->len};
        cell.pol = k == 0 ? pol : gs_policy_new(pe->text, NULL);
        for (guint j = 0; j < np; j++) cell.values[j] = g_strdup("");
        for (guint j = 0; j < lay->cols->len; j++) {
            guint col = g_array_index(lay->cols, guint, j);
            g_free(cell.values[col]);
            cell.values[col] = g_strdup(pe->choice[j]);
        }
        if (lay->tmpl_col != G_MAXUINT) {
            g_free(cell.values[lay->tmpl_col]);
            cell.values[lay->tmpl_col] = g_strdup(tmpl);
        }
        gboolean ok = TRUE;
        if (caps) {
            const expansion *ce = &g_array_index(caps, expansion, k);
            GError *e2 = NULL;
            if (strchr(ce->text, '=')) { /* as every command but replay says it */
                g_set_error(err, GS_SWEEP_ERROR, GS_SWEEP_ERROR_INPUT,
                            "--capacity: sizes per device (DEV=SIZE) apply to gpusim replay only");
                ok = FALSE;
            } else if (!gs_parse_size(ce->text, &cell.capacity, &e2)) {
                g_set_error(err, GS_SWEEP_ERROR, GS_SWEEP_ERROR_INPUT, "--capacity: %s", e2->message);
                g_error_free(e2);
                ok = FALSE;
            }
            if (lay->cap_col != G_MAXUINT) {
                /* the whole value ("5.75GiB") reads better than the list's part */
                g_free(cell.values[lay->cap_col]);
                cell.values[lay->cap_col] = g_strdup(ce->text);
            }
        }
        g_array_append_val(s->cells, cell);
        if (!ok) return FALSE;
    }
    return TRUE;
}

gs_sweep *gs_sweep_new(const char *const *policies, const char *capacity, GError **err)
{
    static const char *const dflt[] = {"pytorch", NULL};
    if (!policies || !policies[0]) policies = dflt;
    size_t n_templates = g_strv_length((char **)policies);
    gs_sweep *s = g_new0(gs_sweep, 1);
    s->params = g_ptr_array_new_with_free_func(g_free);
    s->cells = g_array_new(FALSE, TRUE, sizeof(gs_sweep_cell));

    /* Expand everything first, so the columns are known before any cell is made. */
    GPtrArray *pol_names = g_ptr_array_new_with_free_func((GDestroyNotify)g_ptr_array_unref);
    GPtrArray *pol_exp = g_ptr_array_new_with_free_func((GDestroyNotify)expansions_free);
    GPtrArray *cap_names = g_ptr_array_new_with_free_func(g_free);
    GArray *cap_exp = g_array_new(FALSE, FALSE, sizeof(expansion));
    gboolean ok = TRUE;
    for (size_t p = 0; ok && p < n_templates; p++) {
        GPtrArray *names = g_ptr_array_new_with_free_func(g_free);
        GArray *ex = g_array_new(FALSE, FALSE, sizeof(expansion));
        ok = expand(policies[p], "--policy", "policy_name", names, ex, err);
        g_ptr_array_add(pol_names, names);
        g_ptr_array_add(pol_exp, ex);
    }
    if (ok && capacity) ok = expand(capacity, "--capacity", "capacity", cap_names, cap_exp, err);
    uint64_t n_cells = 0; /* every template's cells times every capacity */
    for (guint p = 0; ok && p < pol_exp->len; p++)
        n_cells += (uint64_t)((GArray *)pol_exp->pdata[p])->len * (capacity ? cap_exp->len : 1);
    if (ok && n_cells > GS_SWEEP_MAX_CELLS) {
        g_set_error(err, GS_SWEEP_ERROR, GS_SWEEP_ERROR_INPUT,
                    "the grid has %" G_GUINT64_FORMAT " cells, more than the %u a sweep may have "
                    "(split it into several sweeps)", n_cells, GS_SWEEP_MAX_CELLS);
        ok = FALSE;
    }
    if (ok) {
        /* Columns: the policies' lists, the capacity, then "template" for the template when there
         * are several. */
        GPtrArray *cols = g_ptr_array_new_with_free_func((GDestroyNotify)g_array_unref);
        for (size_t p = 0; p < n_templates; p++)
            g_ptr_array_add(cols, template_columns(s, pol_names->pdata[p]));
        cell_layout lay = {
            .cap_col = cap_names->len ? param_col(s->params, "capacity") : G_MAXUINT,
            .tmpl_col = n_templates > 1 ? param_col(s->params, "template") : G_MAXUINT,
        };
        for (size_t p = 0; ok && p < n_templates; p++) {
            const GArray *ex = pol_exp->pdata[p];
            lay.cols = cols->pdata[p];
            for (guint e = 0; ok && e < ex->len; e++)
                ok = add_cells(s, policies[p], &g_array_index(ex, expansion, e),
                               capacity ? cap_exp : NULL, &lay, err);
        }
        g_ptr_array_free(cols, TRUE);
    }
    g_ptr_array_free(pol_names, TRUE);
    g_ptr_array_free(pol_exp, TRUE);
    g_ptr_array_free(cap_names, TRUE);
    expansions_free(cap_exp);
    if (!ok) {
        gs_sweep_free(s);
        return NULL;
    }
    return s;
}

/* ---- running the cells ---- */

typedef struct {
    const gs_sweep *s;
    const gs_trace *t;
    const gs_replay_opts *base;
    gs_result *results;
    GMutex lock;
    size_t done;
    char *first_error;
    gs_sweep_progress_fn progress;
    void *ud;
} run_ctx;

static void run_cell(gpointer data, gpointer user)
{
    run_ctx *x = user;
    size_t i = GPOINTER_TO_SIZE(data) - 1;
    const gs_sweep_cell *c = &g_array_index(x->s->cells, gs_sweep_cell, i);
    gs_replay_opts o = *x->base;
    o.capacity = c->capacity;
    o.progress = NULL; /* the sweep reports cells, not events */
    o.observe = NULL;
    GError *err = NULL;
    gboolean ok = gs_replay_run(x->t, c->pol, &o, &x->results[i], &err);
    g_mutex_lock(&x->lock);
    if (!ok && !x->first_error) x->first_error = g_strdup(err->message);
    x->done++;
    if (x->progress) x->progress(i, x->done, x->s->cells->len, x->ud);
    g_mutex_unlock(&x->lock);
    g_clear_error(&err);
}

gboolean gs_sweep_run(const gs_sweep *s, const gs_trace *t, const gs_replay_opts *base,
                      unsigned jobs, gs_sweep_progress_fn progress, void *ud, gs_result *results,
                      GError **err)
{
    /* the trace's bound once for every cell (sim/bound.h), unless the caller has it */
    gs_bound *own = base->bound ? NULL : gs_bound_compute(t);
    gs_replay_opts with_bound = *base;
    if (own) with_bound.bound = own;
    run_ctx x = {.s = s, .t = t, .base = &with_bound, .results = results, .progress = progress,
                 .ud = ud};
    g_mutex_init(&x.lock);
    if (!jobs) jobs = g_get_num_processors();
    if (jobs > s->cells->len) jobs = s->cells->len;
    if (jobs <= 1) {
        for (guint i = 0; i < s->cells->len; i++) run_cell(GSIZE_TO_POINTER(i + 1), &x);
    } else {
        /* the workers start with the stop signals blocked (an exclusive pool starts them here,
         * with this thread's mask), and GLib keeps some idle after the pool is freed: one of
         * them would otherwise take an interrupt meant for the main thread, which holds it back
         * while it writes a file or draws a plot (util.h, gs_stop_signals) */
        sigset_t before;
        gs_hold_stops(&before);
        GThreadPool *pool = g_thread_pool_new(run_cell, &x, (gint)jobs, TRUE, NULL);
        gs_release_stops(&before);
        for (guint i = 0; i < s->cells->len; i++)
            g_thread_pool_push(pool, GSIZE_TO_POINTER(i + 1), NULL);
        g_thread_pool_free(pool, FALSE, TRUE); /* wait for every cell */
    }
    g_mutex_clear(&x.lock);
    gs_bound_free(own);
    if (x.first_error) {
        g_set_error(err, GS_SWEEP_ERROR, GS_SWEEP_ERROR_INPUT, "%s", x.first_error);
        g_free(x.first_error);
        return FALSE;
    }
    return TRUE;
}
