/* cmd_verify.c - gpusim verify [-p SETTING]... [--capacity C] [--prediction FILE] -- CMD ARGS:
 * the user's unmodified program run on the real GPU once per setting (verify.c runs it), each
 * run beside what gpusim predicted for it, with a verdict per setting.
 */
#include <signal.h>
#include <string.h>

#include "cli.h"

static const char verify_description[] =
    "Runs CMD (a Python program that uses PyTorch, run as given: no shell) once per SETTING, under\n"
    "PyTorch's own allocator: PYTORCH_CUDA_ALLOC_CONF is the setting, and --capacity is applied\n"
    "as torch.cuda.set_per_process_memory_fraction before the program's first allocation, by a\n"
    "start-up hook gpusim puts on the child's PYTHONPATH (torch/verify/sitecustomize.py; the\n"
    "program is not edited, and a sitecustomize of your own still runs). At exit the hook reports\n"
    "the outcome (oom: the program died of torch.OutOfMemoryError), peak reserved and allocated\n"
    "bytes, allocation retries and device calls from torch.cuda.memory_stats(); gpusim adds the\n"
    "wall time. The program's own output goes to standard error.\n"
    "\n"
    "--prediction FILE puts each run beside what gpusim said of it: a whatif verdict (--format\n"
    "json; its cap and settings are the defaults) or a gpusim trace (replayed here under each\n"
    "setting at the cap). The verdict: agrees (the outcome, and the retries where the prediction\n"
    "comes from a complete trace), or differs and how. A prediction from a trace that ends where\n"
    "its run died says 'survived' for a setting that gets that far: a run that then completes\n"
    "'agrees (as far as the trace goes)', one that dies later 'differs: died after the recorded\n"
    "death' (the rest of the program needed more). A run that measured nothing is 'unmeasured':\n"
    "the hook could not set the cap (PyTorch not importable by that Python, no device; the\n"
    "program is then not run), or PyTorch never used CUDA memory.\n"
    "\n"
    "Settings are PyTorch's: pytorch (the default), pytorch:KEY:VALUE,... and cuda-async\n"
    "(backend:cudaMallocAsync). Without -p: the prediction's settings, else pytorch.\n"
    "\n"
    "Examples:\n"
    "  gpusim verify --capacity 14GiB -p pytorch -p pytorch:expandable_segments:True -- \\\n"
    "      python3 train.py --steps 50\n"
    "  gpusim whatif oom.pickle --format json -o verdict.json\n"
    "  gpusim verify --prediction verdict.json -- python3 train.py\n"
    "  gpusim whatif oom.pickle --verify -- python3 train.py      (the top settings, chained)\n"
    "\n"
    "Exit status: 0 every run agrees with its prediction (or none was given), 3 some verdict\n"
    "differs or is unmeasured, 2 bad usage or a program that cannot be started.";

static void pred_from_json(const gs_json *r, gs_verify_prediction *p)
{
    const gs_json *v;
    memset(p, 0, sizeof *p);
    if (!(v = gs_json_get(r, "outcome")) || v->type != GS_JSON_STRING) return;
    p->have = true;
    g_strlcpy(p->outcome, v->str, sizeof p->outcome);
    gs_json_uint(gs_json_get(r, "peak_reserved_bytes"), &p->peak_reserved);
    v = gs_json_get(r, "min_capacity_is_lower_bound");
    bool dies = v && v->type == GS_JSON_BOOL && v->b;
    /* retries of a dying trace's replay are those up to its death: not the program's */
    p->has_retries = !dies && gs_json_uint(gs_json_get(r, "retries"), &p->retries);
}

/* A whatif verdict (JSON): its settings (into specs, when none were given) and predictions, its
 * cap (into *cap, unless given). */
static void load_verdict(const char *path, GPtrArray *specs, GArray *preds, uint64_t *cap,
                         bool cap_given)
{
    GError *err = NULL;
    gs_json *j = gs_json_load(path, &err);
    if (!j)
        gs_cli_usage_error("--prediction: neither a whatif verdict (JSON) nor a gpusim trace: %s",
                           err->message);
    const gs_json *res = gs_json_get(j, "results");
    if (!res || res->type != GS_JSON_ARRAY || !res->n)
        gs_cli_usage_error("--prediction: %s: not a gpusim whatif verdict (no \"results\")", path);
    uint64_t c;
    if (!cap_given && gs_json_uint(gs_json_get(j, "capacity_bytes"), &c)) *cap = c;
    bool given = specs->len > 0;
    if (!given)
        for (size_t i = 0; i < res->n; i++) {
            const gs_json *p = gs_json_get(res->items[i], "policy");
            char *conf = NULL;
            if (p && p->type == GS_JSON_STRING && gs_verify_conf(p->str, &conf))
                g_ptr_array_add(specs, g_strdup(p->str));
            g_free(conf);
        }
    g_array_set_size(preds, specs->len);
    size_t found = 0;
    for (guint k = 0; k < specs->len; k++)
        for (size_t i = 0; i < res->n; i++) {
            const gs_json *p = gs_json_get(res->items[i], "policy");
            if (p && p->type == GS_JSON_STRING && strcmp(p->str, specs->pdata[k]) == 0) {
                pred_from_json(res->items[i], &g_array_index(preds, gs_verify_prediction, k));
                found += g_array_index(preds, gs_verify_prediction, k).have;
            }
        }
    if (!found)
        gs_cli_usage_error("--prediction: %s: predicts none of the settings to run (its results "
                           "name no PyTorch setting%s)", path, given ? " given with -p" : "");
    gs_json_free(j);
}

/* A gpusim trace: each setting replayed at the cap. */
static void predict_from_trace(const gs_cli *c, const char *path, GPtrArray *specs, GArray *preds,
                               uint64_t cap)
{
    GError *lerr = NULL;
    gs_trace *t = gs_trace_load(path, c->lenient ? GS_TRACE_LENIENT : 0, NULL, NULL, &lerr);
    if (!t)
        gs_cli_usage_error("--prediction: neither a whatif verdict (JSON) nor a gpusim trace: %s",
                           lerr->message);
    if (!specs->len) g_ptr_array_add(specs, g_strdup("pytorch"));
    g_array_set_size(preds, specs->len);
    for (guint k = 0; k < specs->len; k++) {
        GError *err = NULL;
        gs_policy *pol = gs_policy_new(specs->pdata[k], &err);
        if (!pol) gs_cli_usage_error("-p: %s", err->message);
        gs_replay_opts ro = {.capacity = cap, .device_total = c->total};
        gs_result r;
        if (!gs_replay_run(t, pol, &ro, &r, &err)) gs_cli_usage_error("%s: %s", path, err->message);
        gs_verify_predict(&r, &g_array_index(preds, gs_verify_prediction, k));
        gs_result_clear(&r);
        gs_policy_free(pol);
    }
    gs_trace_free(t);
}

/* A size in the table: "-" when unknown. g_free it. */
static char *size_cell(bool have, uint64_t v) { return have ? gs_format_size(v) : g_strdup("-"); }

static void write_table(FILE *out, char *const *cmd, uint64_t cap, const char *cap_words,
                        const gs_verify_run *runs, const gs_verify_prediction *preds, size_t n)
{
    /* the command as a shell would take it back: an argument with a blank or a quote quoted */
    GString *q = g_string_new(NULL);
    for (char *const *a = cmd; *a; a++) {
        if (q->len) g_string_append_c(q, ' ');
        bool plain = **a && strspn(*a, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                                         "0123456789_-./=:,+@%") == strlen(*a);
        char *sq = plain ? NULL : g_shell_quote(*a);
        g_string_append(q, sq ? sq : *a);
        g_free(sq);
    }
    char *shown = g_string_free(q, FALSE), *line = gs_printable(shown);
    char *c = cap ? gs_format_capacity(cap, " ") : NULL;
    fprintf(out, "verify %s: %zu setting%s, %s%s%s%s%s\n", line, n, n == 1 ? "" : "s",
            c ? "at the cap of " : "with no cap", c ? c : "", cap_words && c ? " (" : "",
            cap_words && c ? cap_words : "", cap_words && c ? ")" : "");
    g_free(c);
    g_free(line);
    g_free(shown);
    int w = 7;
    for (size_t i = 0; i < n; i++) w = MAX(w, (int)strlen(runs[i].spec));
    fprintf(out, "%-*s %-8s %13s %7s %8s | %-9s %13s %7s | %s\n", w, "setting", "outcome",
            "peak reserv", "retries", "wall s", "predicted", "peak reserv", "retries", "verdict");
    for (size_t i = 0; i < n; i++) {
        const gs_verify_run *r = &runs[i];
        const gs_verify_prediction *p = preds ? &preds[i] : NULL;
        bool hp = p && p->have;
        char *pr = size_cell(r->has_stats, r->peak_reserved);
        char *pp = size_cell(hp, hp ? p->peak_reserved : 0);
        char rt[24] = "-", prt[24] = "-";
        if (r->has_stats) g_snprintf(rt, sizeof rt, "%" G_GUINT64_FORMAT, r->retries);
        if (hp && p->has_retries) g_snprintf(prt, sizeof prt, "%" G_GUINT64_FORMAT, p->retries);
        fprintf(out, "%-*s %-8s %13s %7s %8.2f | %-9s %13s %7s | %s\n", w, r->spec, r->outcome,
                pr, rt, r->wall_s, hp ? p->outcome : "-", pp, prt, gs_verify_judge(r, p));
        g_free(pr);
        g_free(pp);
    }
    for (size_t i = 0; i < n; i++)
        if (runs[i].signal)
            fprintf(out, "  %s: killed by signal %d (%s)%s\n", runs[i].spec, runs[i].signal,
                    g_strsignal(runs[i].signal),
                    runs[i].signal == SIGKILL ? ": the kernel's out-of-memory killer (host memory) "
                                                "sends this one, among others" : "");
        else if (runs[i].hook_error)
            fprintf(out, "  %s: %s (the program was not run)\n", runs[i].spec, runs[i].hook_error);
        else if (!runs[i].reported)
            fprintf(out, "  %s: no report from the program (exit %d): it did not run Python, or "
                         "left through os._exit\n", runs[i].spec, runs[i].exit_status);
        else if (runs[i].died_of)
            fprintf(out, "  %s: died of %s (exit %d)\n", runs[i].spec, runs[i].died_of,
                    runs[i].exit_status);
        else if (runs[i].exit_status)
            fprintf(out, "  %s: exit %d\n", runs[i].spec, runs[i].exit_status);
    fputs("(outcome, peak reserved, retries: torch.cuda.memory_stats() at the program's exit, "
          "the largest over its devices; wall s: the whole run)\n", out);
}

static void write_json(FILE *out, uint64_t cap, const char *cap_words, const gs_verify_run *runs,
                       const gs_verify_prediction *preds, size_t n)
{
    GString *g = g_string_new(NULL);
    gs_jw w;
    gs_jw_init(&w, g);
    gs_jw_object(&w);
    gs_jw_key(&w, "capacity_bytes");
    if (cap) gs_jw_uint(&w, cap);
    else gs_jw_null(&w);
    gs_jw_key(&w, "capacity_source");
    if (cap && cap_words) gs_jw_str(&w, cap_words);
    else gs_jw_null(&w);
    gs_jw_key(&w, "runs");
    gs_jw_array(&w);
    for (size_t i = 0; i < n; i++) {
        const gs_verify_run *r = &runs[i];
        const gs_verify_prediction *p = preds && preds[i].have ? &preds[i] : NULL;
        gs_jw_break(&w, ",\n  ");
        if (i == 0) gs_jw_text(&w, "\n  ");
        gs_jw_object(&w);
        gs_jw_key(&w, "policy");
        gs_jw_str(&w, r->spec);
        gs_jw_key(&w, "outcome");
        gs_jw_str(&w, r->outcome);
        gs_jw_key(&w, "exit_status");
        gs_jw_int(&w, r->exit_status);
        gs_jw_key(&w, "limit_bytes");
        if (r->limit) gs_jw_uint(&w, r->limit);
        else gs_jw_null(&w);
#define STAT(k, v)                                   \
    gs_jw_key(&w, k);                                \
    if (r->has_stats) gs_jw_uint(&w, v);             \
    else gs_jw_null(&w)
        STAT("peak_reserved_bytes", r->peak_reserved);
        STAT("peak_allocated_bytes", r->peak_allocated);
        STAT("num_alloc_retries", r->retries);
        STAT("num_ooms", r->ooms);
        STAT("num_device_alloc", r->device_allocs);
        STAT("num_device_free", r->device_frees);
#undef STAT
        gs_jw_key(&w, "wall_s");
        gs_jw_num(&w, "%.3f", r->wall_s);
        gs_jw_key(&w, "predicted_outcome");
        if (p) gs_jw_str(&w, p->outcome);
        else gs_jw_null(&w);
        gs_jw_key(&w, "predicted_peak_reserved_bytes");
        if (p) gs_jw_uint(&w, p->peak_reserved);
        else gs_jw_null(&w);
        gs_jw_key(&w, "predicted_retries");
        if (p && p->has_retries) gs_jw_uint(&w, p->retries);
        else gs_jw_null(&w);
        gs_jw_key(&w, "hook_error");
        if (r->hook_error) gs_jw_str(&w, r->hook_error);
        else gs_jw_null(&w);
        gs_jw_key(&w, "verdict");
        gs_jw_str(&w, gs_verify_judge(r, preds ? &preds[i] : NULL));
        gs_jw_object_end(&w);
    }
    gs_jw_finish_list(&w, out);
}

int gs_verify_settings(const gs_cli *c, FILE *out, uint64_t cap, const char *cap_words,
                       const char *const *specs, const gs_verify_prediction *preds, size_t n,
                       char *const *cmd)
{
    gs_verify_run *runs = g_new0(gs_verify_run, n);
    int rc = GS_EXIT_OK;
    for (size_t i = 0; i < n; i++) {
        if (c->progress) gs_cli_say("verify: %s (%zu of %zu)", specs[i], i + 1, n);
        GError *err = NULL;
        if (!gs_verify_one(specs[i], cap, cmd, &runs[i], &err)) gs_cli_usage_error("verify: %s", err->message);
        const char *v = gs_verify_judge(&runs[i], preds ? &preds[i] : NULL);
        if (g_str_has_prefix(v, "differs") || g_str_has_prefix(v, "unmeasured"))
            rc = GS_EXIT_DIFFERS;
    }
    if (c->fmt == GS_FMT_JSON) write_json(out, cap, cap_words, runs, preds, n);
    else write_table(out, cmd, cap, cap_words, runs, preds, n);
    for (size_t i = 0; i < n; i++) gs_verify_run_clear(&runs[i]);
    g_free(runs);
    return rc;
}

int gs_cmd_verify(int argc, char **argv)
{
    char **policies = NULL, *prediction = NULL;
    const GOptionEntry own[] = {
        {"policy", 'p', 0, G_OPTION_ARG_STRING_ARRAY, &policies,
         "A PyTorch setting to run the program under; repeat for several", "SETTING"},
        {"prediction", 0, 0, G_OPTION_ARG_FILENAME, &prediction,
         "What gpusim predicted: a whatif verdict (JSON) or a gpusim trace", "FILE"},
        {NULL, 0, 0, 0, NULL, NULL, NULL},
    };
    static const char *const formats[] = {"table", "json", NULL};
    gs_cli c;
    gs_cli_init(&c, "verify", "-- CMD [ARGS...] - run a program under each setting on the GPU",
                "Run your own program on the real GPU once per allocator setting, and put each "
                "run\nbeside what gpusim predicted for it.",
                verify_description,
                GS_CLI_CAPACITY | GS_CLI_DEVICE_TOTAL | GS_CLI_FORMAT | GS_CLI_OUTPUT | GS_CLI_QUIET,
                own, formats);
    gs_cli_parse(&c, &argc, &argv, 1, "-- CMD");
    int first = 1;
    if (first < argc && strcmp(argv[first], "--") == 0) first++;
    if (first >= argc) gs_cli_usage_error("verify: no program to run: gpusim verify [OPTIONS] -- CMD [ARGS...]");
    GPtrArray *specs = g_ptr_array_new_with_free_func(g_free);
    for (char **p = policies; p && *p; p++) g_ptr_array_add(specs, g_strdup(*p));
    GArray *preds = g_array_new(FALSE, TRUE, sizeof(gs_verify_prediction));
    uint64_t cap = c.cap;
    if (prediction) {
        /* told by content, from its first bytes (gs_trace_sniff): a trace, else a verdict */
        if (gs_trace_sniff(prediction) == GS_SNIFF_TRACE)
            predict_from_trace(&c, prediction, specs, preds, cap);
        else
            load_verdict(prediction, specs, preds, &cap, c.capacity != NULL);
    }
    if (!specs->len) g_ptr_array_add(specs, g_strdup("pytorch"));
    for (guint i = 0; i < specs->len; i++) {
        char *conf = NULL;
        if (!gs_verify_conf(specs->pdata[i], &conf))
            gs_cli_usage_error("verify: %s: verify runs PyTorch's own allocator (pytorch, "
                               "pytorch:KEY:VALUE,..., cuda-async)", (char *)specs->pdata[i]);
        g_free(conf);
        /* the keys and values as gpusim reads them, before a GPU run: a typo is caught here,
         * not in PyTorch's own error after the program's start-up */
        GError *perr = NULL;
        gs_policy *pol = gs_policy_new(specs->pdata[i], &perr);
        if (!pol) gs_cli_usage_error("verify: %s", perr->message);
        gs_policy_free(pol);
    }
    const char *const inputs[] = {prediction, NULL};
    gs_cli_check_output(&c, inputs, c.output, "--output", NULL);
    gs_cli_out out;
    gs_cli_open_output(&out, &c, inputs, c.output);
    int rc = gs_verify_settings(&c, out.f, cap, c.capacity ? "cap given" : prediction ? "the prediction's" : NULL,
                                (const char *const *)specs->pdata, preds->len ? (gs_verify_prediction *)(void *)preds->data : NULL,
                                specs->len, argv + first);
    gs_cli_close_output(&out);
    g_array_free(preds, TRUE);
    g_ptr_array_free(specs, TRUE);
    g_strfreev(policies);
    g_free(prediction);
    gs_cli_clear(&c);
    return rc;
}
