/* cmd_replay.c - gpusim replay: traces replayed under one or more policies (and, for a trace
 * with several clients, arrangements), reported as a table, CSV or JSON, optionally plotted.
 */
#include <stdlib.h>
#include <string.h>

#include <errno.h>

#include "cli.h"

static const char replay_summary[] =
    "Replay recorded allocation traces through allocator policies on a simulated GPU and\n"
    "compare peak memory, fragmentation, allocation retries, OOMs and device time.";

static const char replay_description[] =
    "Policies (SPEC is NAME or NAME:CONF, CONF in PYTORCH_CUDA_ALLOC_CONF syntax):\n"
    "%s\n"
    "SIZE accepts 18.2GiB, 512MiB, 6.25GiB, 4096 (bytes); K/M/G/T mean KiB/MiB/GiB/TiB,\n"
    "kB/MB/GB/TB are decimal; a fraction needs a unit.\n"
    "--capacity is the memory the allocator may reserve: PyTorch's per-process memory fraction\n"
    "times the device total. Without it there is no limit (and, as in PyTorch, no garbage\n"
    "collection); the device itself has --device-total bytes (default: the trace's\n"
    "device_total_bytes header, else 80GiB).\n"
    "\n"
    "Several GPUs in one process: a trace whose events name several devices replays each on\n"
    "its own allocator and simulated device, as PyTorch keeps one per device; the reports\n"
    "give the totals and a row (CSV), or an object under \"devices\" (JSON), per device.\n"
    "--capacity and --device-total take one SIZE for every device or DEV=SIZE,... (a plain\n"
    "SIZE in the list is for the devices it does not name): --capacity 0=20GiB,1=18GiB.\n"
    "\n"
    "Failed requests: an 'oom' event (trace version 2, from traces/convert.py) is a request\n"
    "that failed in the recorded run. Where the program went on, the replay counts the OOM\n"
    "and goes on too; where the trace ends with it, the program died there, and \"survived\"\n"
    "means a replay gets that far (the rest of the program is not in the trace). The reports\n"
    "say so, and say when the recording started mid-run (synthesized allocations: approximate\n"
    "results).\n"
    "\n"
    "Several libraries on one GPU: a trace whose events name several clients (torch, cupy,\n"
    "...) replays with --clients separate (an allocator per client: they compete for the\n"
    "device's memory, as PyTorch and CuPy do in one process), shared (one allocator serves\n"
    "every client, as RMM's PyTorch and CuPy hooks do) or cooperative (an allocator per\n"
    "client; one the device refuses asks the others to release their cached segments and\n"
    "tries again). Give several, or a list, to compare them. --policy NAME=SPEC sets client\n"
    "NAME's policy (separate, cooperative); a plain --policy SPEC applies to every other\n"
    "client and to the shared allocator. --capacity limits each allocator; the device's\n"
    "memory (--device-total) is what they share. Reports add each client's numbers and, at\n"
    "the first OOM, what every client held reserved and cached. A trace with one client\n"
    "replays as always.\n"
    "\n"
    "Examples:\n"
    "  gpusim replay traces/data/resnet50.gstrace.gz --policy pytorch \\\n"
    "      --policy pytorch:max_split_size_mb:128 --capacity 5.75GiB\n"
    "  gpusim replay trace.gstrace --policy 'pytorch:roundup_power2_divisions:[256:1,>:4]' --format json\n"
    "  gpusim replay ref_input.gstrace.gz --reference run.ref.json     # real run vs simulated\n"
    "  gpusim replay traces/data/dataframe-then-torch.gstrace.gz \\\n"
    "      --clients separate,shared,cooperative --policy pytorch --policy cupy=cupy\n"
    "  gpusim replay traces/data/resnet50.gstrace.gz -p pytorch -p pytorch:expandable_segments:True \\\n"
    "      --plot plots/ --format json -o run.json   # plots; 'gpusim plot run.json' redraws them\n"
    "\n"
    "--plot DIR draws, with gnuplot, per trace: NAME-timeline (allocated and reserved memory over\n"
    "the trace, retries and OOMs marked), NAME-bars (the policies compared) and NAME-map-K-POLICY\n"
    "(the address space at peak reserved), each as .png and .svg beside its .gp script and .dat\n"
    "data (run 'gnuplot NAME.gp' in DIR to redraw). gnuplot is $GPUSIM_GNUPLOT, else gnuplot.\n"
    "\n"
    "Exit status: 0 reports written (OOM outcomes included), 1 a replay stopped on a device\n"
    "error, 2 bad usage, bad input or the host out of memory, 3 --plot could not draw (gnuplot\n"
    "missing or failed; the reports and the plots' data are written all the same), 4 with\n"
    "--fail-on-oom: some result met an OOM (the report is written all the same).";

/* The --policy arguments: the compared policies, and NAME=SPEC assignments to clients. */
typedef struct {
    GPtrArray *compared;     /* gs_policy*: each applied to every client */
    GPtrArray *assigned;     /* gs_policy*: the policy of client assigned_to[i] */
    GPtrArray *assigned_to;  /* char*: client names */
    bool defaulted;          /* no plain --policy given: compared holds the default */
} policy_args;

/* Parse every policy before replaying anything: a typo in the last one should not cost a long
 * replay of the first. NAME=SPEC assigns a policy to one client (a '=' before any ':' cannot be
 * part of a spec). Without a compared policy: the reference run's, else pytorch. */
static void parse_policies(policy_args *pa, char **specs, const gs_reference *ref)
{
    GError *err = NULL;
    pa->compared = g_ptr_array_new_with_free_func((GDestroyNotify)gs_policy_free);
    pa->assigned = g_ptr_array_new_with_free_func((GDestroyNotify)gs_policy_free);
    pa->assigned_to = g_ptr_array_new_with_free_func(g_free);
    for (char **given = specs; given && *given; given++) {
        const char *spec = gs_policy_strip_env(*given), *const *p = &spec;
        const char *eq = strchr(*p, '='), *colon = strchr(*p, ':');
        bool named = eq && (!colon || eq < colon);
        /* checked before anything is allocated: a usage error exits at once */
        if (named && eq == *p) gs_cli_usage_error("--policy %s: no client NAME before '='", *p);
        size_t nlen = named ? (size_t)(eq - *p) : 0;
        for (guint i = 0; named && i < pa->assigned_to->len; i++) {
            const char *other = pa->assigned_to->pdata[i];
            if (strlen(other) == nlen && strncmp(other, *p, nlen) == 0)
                gs_cli_usage_error("--policy %s: client '%s' has a policy already", *p, other);
        }
        gs_policy *pol = gs_policy_new(named ? eq + 1 : *p, &err);
        if (!pol) gs_cli_usage_error("--policy: %s", err->message);
        g_ptr_array_add(named ? pa->assigned : pa->compared, pol);
        if (named) g_ptr_array_add(pa->assigned_to, g_strndup(*p, nlen));
    }
    pa->defaulted = pa->compared->len == 0;
    if (pa->compared->len == 0) {
        char *spec = ref && ref->allocator_conf && *ref->allocator_conf
                         ? g_strdup_printf("pytorch:%s", ref->allocator_conf)
                         : g_strdup("pytorch");
        gs_policy *pol = gs_policy_new(spec, &err);
        if (!pol) gs_cli_usage_error("policy of the reference run: %s", err->message);
        g_ptr_array_add(pa->compared, pol);
        g_free(spec);
    }
}

static void policy_args_clear(policy_args *pa)
{
    g_ptr_array_free(pa->compared, TRUE);
    g_ptr_array_free(pa->assigned, TRUE);
    g_ptr_array_free(pa->assigned_to, TRUE);
}

/* --clients, repeated or comma-separated; separate when absent. */
static GArray *parse_modes(char **args)
{
    GArray *modes = g_array_new(FALSE, FALSE, sizeof(gs_clients_mode));
    for (char **c = args; c && *c; c++) {
        char **parts = g_strsplit(*c, ",", -1);
        for (char **m = parts; *m; m++) {
            gs_clients_mode mode;
            if (!gs_clients_mode_parse(g_strstrip(*m), &mode))
                gs_cli_usage_error("--clients: '%s' is not one of separate, shared, cooperative", *m);
            g_array_append_val(modes, mode);
        }
        g_strfreev(parts);
    }
    if (modes->len == 0) {
        gs_clients_mode mode = GS_CLIENTS_SEPARATE;
        g_array_append_val(modes, mode);
    }
    return modes;
}

/* "cupy, torch": a trace's client names, for messages. g_free it. */
static char *clients_list(const gs_trace *t)
{
    GString *s = g_string_new(NULL);
    for (guint k = 0; k < t->clients->len; k++)
        g_string_append_printf(s, "%s%s", k ? ", " : "", (const char *)t->clients->pdata[k]);
    return g_string_free(s, FALSE);
}

static int cmp_device(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return (x > y) - (x < y);
}

/* The first device named by --capacity or --device-total DEV=SIZE that none of the traces has
 * (c->n_dev if every one is in some trace). What it allocates is freed before it returns, so a
 * usage error after it leaves nothing behind that only a register held. */
static size_t unseen_device(const gs_cli *c, const GPtrArray *traces)
{
    if (!c->n_dev) return 0;
    bool *seen = g_new0(bool, c->n_dev);
    for (guint a = 0; a < traces->len; a++) {
        uint32_t *ids = NULL; /* ascending */
        size_t nd = gs_trace_devices(traces->pdata[a], &ids);
        for (size_t k = 0; k < c->n_dev; k++)
            seen[k] |= bsearch(&c->dev[k].device, ids, nd, sizeof *ids, cmp_device) != NULL;
        g_free(ids);
    }
    size_t k = 0;
    while (k < c->n_dev && seen[k]) k++;
    g_free(seen);
    return k;
}

/* Every NAME of a NAME=SPEC must be a client of the trace. */
static void check_assigned(const policy_args *pa, const gs_trace *t, const char *path)
{
    for (guint i = 0; i < pa->assigned_to->len; i++) {
        const char *name = pa->assigned_to->pdata[i];
        bool found = false;
        for (guint k = 0; k < t->clients->len; k++) found |= strcmp(t->clients->pdata[k], name) == 0;
        if (!found) {
            char *names = clients_list(t);
            gs_cli_usage_error("--policy %s=...: %s has no client '%s' (its clients: %s)", name, path,
                               name, names);
        }
    }
}

/* What every replay of this command shares. */
typedef struct {
    const gs_cli *c;
    const policy_args *pa;
    const GArray *modes;
    const gs_reference *ref;
    bool ref_addresses;
    gs_backend *dev;          /* NULL: a simulated device per replay */
    bool touch;
    gs_plotter *plotter;      /* NULL: no plots */
    unsigned columns;         /* CSV column groups some trace needs (GS_REPORT_*) */
    const char *export_dir;   /* --export-snapshot: NULL when not asked */
    const char *const *inputs; /* the traces and --reference, NULL-terminated: no snapshot's name */
    GHashTable *export_stems; /* the snapshots' name stems taken (gs_plot_stem_claim) */
} replay_ctx;

/* Both observers of a replay with --plot and --export-snapshot. */
typedef struct {
    void *series, *rec;
} both_observers;

static void observe_both(const gs_heap *h, const gs_event *e, size_t index, void *ud)
{
    const both_observers *b = ud;
    gs_plot_observe(h, e, index, b->series);
    gs_snapshot_observe(h, e, index, b->rec);
}

/* DIR/STEM-snapshot-K-SPEC.pickle: named as the plots' maps are (gs_plot_file_part), so every
 * name stays inside DIR and means nothing to a shell. */
static char *snapshot_path(const replay_ctx *x, const char *trace, size_t k, const char *policy)
{
    const char *dir = x->export_dir;
    char *stem = gs_plot_stem_claim(x->export_stems, trace, NULL), *pol = gs_plot_file_part(policy);
    char *name = g_strdup_printf("%s-snapshot-%zu-%s.pickle", stem, k, pol);
    char *path = g_build_filename(dir, name, NULL);
    g_free(stem);
    g_free(pol);
    g_free(name);
    return path;
}

/* The settings of each device of a trace with several: --capacity and --device-total DEV=SIZE
 * first; else, for the limit, the reference run's device's (when --capacity is not given);
 * for the memory, the trace's device_total_bytes_by_device (when --device-total is not). */
static gs_device_opts *device_opts(const replay_ctx *x, const gs_trace *t, size_t *n)
{
    uint32_t *ids = NULL;
    *n = gs_trace_devices(t, &ids);
    gs_device_opts *d = g_new0(gs_device_opts, *n);
    uint64_t *totals = g_new0(uint64_t, *n ? *n : 1);
    gs_trace_device_totals(t, ids, *n, totals); /* (the header's list read once) */
    for (size_t k = 0; k < *n; k++) {
        d[k].device = ids[k];
        for (size_t i = 0; i < x->c->n_dev; i++)
            if (x->c->dev[i].device == ids[k]) d[k] = x->c->dev[i];
        const gs_reference *dref = gs_reference_device(x->ref, ids[k]);
        if (!d[k].capacity && !x->c->capacity && dref) d[k].capacity = dref->cap_bytes;
        if (!d[k].device_total && !x->c->device_total) d[k].device_total = totals[k];
    }
    g_free(totals);
    g_free(ids);
    return d;
}

/* A cap above the memory of the device it limits limits nothing: the device refuses first.
 * Said once per trace and device, as whatif says it (the replay goes on at that cap). */
static void warn_cap_above_device(const gs_cli *c, const gs_trace *t, const char *path,
                                  const gs_device_opts *dev, size_t n_dev)
{
    for (size_t k = 0; k < MAX(n_dev, (size_t)1); k++) {
        uint64_t cap = n_dev && dev[k].capacity ? dev[k].capacity : c->cap;
        uint64_t total = n_dev && dev[k].device_total ? dev[k].device_total
                         : c->total                   ? c->total
                         : t->device_total            ? t->device_total
                                                      : GS_DEFAULT_DEVICE_TOTAL;
        if (!cap || cap <= total) continue;
        char *cw = gs_format_capacity(cap, " "), *tw = gs_format_capacity(total, " ");
        gs_cli_say("warning: %s: the cap of %s is more than device %u's %s: the device refuses "
                   "first",
                   path, cw, n_dev ? dev[k].device : 0, tw);
        g_free(cw);
        g_free(tw);
    }
}

/* Replay one trace under every compared policy (times every arrangement, with several clients)
 * and write its report; plots too. Returns GS_EXIT_DEVICE if a replay stopped on a device error,
 * GS_EXIT_OOM if one met an OOM and --fail-on-oom was given. */
static int replay_trace(const replay_ctx *x, FILE *out, const char *path, const gs_trace *t,
                        bool first)
{
    const gs_cli *c = x->c;
    /* The client policies of this trace, by its client index (NULL: the compared one). */
    const gs_policy **cpol = g_new0(const gs_policy *, t->clients->len);
    for (guint k = 0; k < t->clients->len; k++)
        for (guint i = 0; i < x->pa->assigned_to->len; i++)
            if (strcmp(t->clients->pdata[k], x->pa->assigned_to->pdata[i]) == 0)
                cpol[k] = x->pa->assigned->pdata[i];
    /* One client: the arrangements are all the same, and its NAME=SPEC, if any, is the policy.
     * Several: every arrangement under every compared policy. None (a trace with a header and
     * no events): the compared policies, each replaying nothing. */
    bool multi = t->clients->len > 1;
    const gs_policy *only = t->clients->len == 1 ? cpol[0] : NULL;
    guint nmodes = multi ? x->modes->len : 1;
    guint npols = only ? 1 : x->pa->compared->len;
    guint n = nmodes * npols;
    gs_result *rs = g_new0(gs_result, n);
    const gs_reference **refs = x->ref ? g_new0(const gs_reference *, n) : NULL;
    gs_plot_series **series = x->plotter ? g_new0(gs_plot_series *, n) : NULL;
    int rc = GS_EXIT_OK;
    size_t n_dev = 0;
    gs_device_opts *dev = device_opts(x, t, &n_dev);
    warn_cap_above_device(c, t, path, dev, n_dev);
    gs_bound *bound = gs_bound_compute(t); /* once for every policy's replay */
    for (guint i = 0; i < n; i++) {
        const gs_policy *pol = only ? only : x->pa->compared->pdata[i % npols];
        char *label = g_strdup_printf("%s [%s]", path, pol->spec);
        gs_replay_opts o = {
            .capacity = c->cap,
            .device_total = c->total ? c->total : t->device_total,
            .cal = c->cal,
            .continue_on_oom = c->continue_on_oom,
            .ref = x->ref_addresses ? x->ref : NULL,
            .progress = c->progress ? gs_cli_progress : NULL,
            .progress_ud = label,
            .backend = x->dev,
            .touch = x->touch,
            .clients = g_array_index(x->modes, gs_clients_mode, i / npols),
            .client_policy = cpol,
            .devices = n_dev > 1 ? dev : NULL,
            .n_devices = n_dev > 1 ? n_dev : 0,
            .bound = bound,
        };
        if (n_dev == 1 && dev[0].capacity) o.capacity = dev[0].capacity;
        if (n_dev == 1 && dev[0].device_total) o.device_total = dev[0].device_total;
        if (series) {
            o.observe = gs_plot_observe;
            o.observe_ud = series[i] = gs_plot_series_new(t->n);
        }
        gs_snapshot_rec *rec = x->export_dir ? gs_snapshot_rec_new(t) : NULL;
        both_observers both = {.series = o.observe_ud, .rec = rec};
        if (rec) {
            o.observe = series ? observe_both : gs_snapshot_observe;
            o.observe_ud = series ? (void *)&both : (void *)rec;
            o.observe_alloc = gs_snapshot_observe_alloc;
            o.observe_end = gs_snapshot_observe_end;
            o.observe_reserve = gs_snapshot_observe_reserve;
            o.export_ud = rec;
        }
        GError *err = NULL;
        if (!gs_replay_run(t, pol, &o, &rs[i], &err)) /* checked when loading: not reached */
            gs_cli_usage_error("%s: %s", path, err->message);
        gs_cli_warn_teardown(label, &rs[i]);
        if (rec) {
            char *sp = snapshot_path(x, path, i + 1, pol->spec);
            /* never an input (a calibration named like a snapshot), nor the report being made */
            gs_cli_refuse_input(c, x->inputs, sp, "--export-snapshot");
            if (gs_cli_is_output(c, sp))
                gs_cli_usage_error("--export-snapshot %s: that is the report (-o) of this run; "
                                   "not overwritten", sp);
            if (!gs_snapshot_write(rec, sp, path, pol->spec, o.capacity,
                                   o.device_total ? o.device_total : GS_DEFAULT_DEVICE_TOTAL, &err))
                gs_cli_usage_error("--export-snapshot: %s", err->message);
            g_free(sp);
            gs_snapshot_rec_free(rec);
        }
        if (series && c->fmt == GS_FMT_JSON) rs[i].json_extra = gs_plot_series_json(series[i]);
        if (c->progress && t->n >= (1u << 20)) fputs("\r\033[K", stderr);
        if (rs[i].error != GS_OK) rc = GS_EXIT_DEVICE;
        if (refs) refs[i] = x->ref;
        g_free(label);
    }
    rc = gs_cli_oom_status(c, rc, rs, n);
    if (c->fmt == GS_FMT_JSON && !first) fputs(",\n", out);
    gs_report_ex(out, c->fmt, path, t, rs, n, refs, first, x->columns);
    if (x->plotter) {
        GError *err = NULL;
        gs_plot_run *runs = g_new0(gs_plot_run, n);
        for (guint i = 0; i < n; i++) gs_plot_run_from_result(&runs[i], &rs[i], series[i]);
        if (!gs_plot_trace(x->plotter, path, runs, n, &err))
            gs_cli_usage_error("--plot: %s", err->message);
        for (guint i = 0; i < n; i++) gs_plot_run_clear(&runs[i]); /* and the series */
        g_free(runs);
        g_free(series);
    }
    for (guint i = 0; i < n; i++) gs_result_clear(&rs[i]);
    g_free(rs);
    g_free(refs);
    g_free(cpol);
    g_free(dev);
    gs_bound_free(bound);
    return rc;
}

int gs_cmd_replay(int argc, char **argv)
{
    char **policies = NULL, **clients = NULL, *backend = NULL, *reference = NULL, *plot_dir = NULL,
         *export_dir = NULL;
    gboolean no_ref_addrs = FALSE, touch = FALSE;
    const GOptionEntry own[] = {
        {"policy", 'p', 0, G_OPTION_ARG_STRING_ARRAY, &policies,
         "Policy to replay under; repeat to compare several (default: pytorch). NAME=SPEC: "
         "the policy of the trace's client NAME (several clients)", "[NAME=]SPEC"},
        {"clients", 0, 0, G_OPTION_ARG_STRING_ARRAY, &clients,
         "Traces with several clients: separate (an allocator each, the default), shared (one "
         "for all), cooperative (an allocator each; on OOM the others release their cache); "
         "repeat or list with commas to compare", "MODE[,MODE]"},
        {"backend", 'b', 0, G_OPTION_ARG_STRING, &backend,
         "Device: sim (default), or cuda: the same allocator on the real GPU's memory "
         "(device 0 of CUDA_VISIBLE_DEVICES)", "sim|cuda"},
        {"touch", 0, 0, G_OPTION_ARG_NONE, &touch,
         "With --backend cuda: write each allocation once, as a program would", NULL},
        {"reference", 'r', 0, G_OPTION_ARG_FILENAME, &reference,
         "What the real allocator did (traces/convert.py --reference): compare with it, place "
         "segments at its addresses, and default --policy and --capacity to its run's",
         "REF.json"},
        {"no-reference-addresses", 0, 0, G_OPTION_ARG_NONE, &no_ref_addrs,
         "With --reference: place segments by the driver model, not the real addresses", NULL},
        {"plot", 0, 0, G_OPTION_ARG_FILENAME, &plot_dir,
         "Also draw plots into DIR with gnuplot (timeline, bars, address map at peak; PNG and "
         "SVG beside their data); --format json then carries their data too", "DIR"},
        {"export-snapshot", 0, 0, G_OPTION_ARG_FILENAME, &export_dir,
         "Also write each simulated run as a PyTorch memory snapshot (the pickle of "
         "torch.cuda.memory._snapshot()) for pytorch.org/memory_viz: DIR/TRACE-snapshot-K-"
         "POLICY.pickle", "DIR"},
        {NULL, 0, 0, 0, NULL, NULL, NULL},
    };
    static const char *const formats[] = {"table", "csv", "json", NULL};
    char *ph = gs_cli_policies_help();
    char *desc = g_strdup_printf(replay_description, ph);
    g_free(ph);
    gs_cli c;
    gs_cli_init(&c, "replay", "TRACE... - replay allocation traces", replay_summary, desc,
                GS_CLI_CAPACITY | GS_CLI_DEVICE_TOTAL | GS_CLI_FORMAT | GS_CLI_OUTPUT |
                    GS_CLI_CONTINUE | GS_CLI_LENIENT | GS_CLI_CALIBRATION | GS_CLI_QUIET |
                    GS_CLI_PER_DEVICE | GS_CLI_FAIL_ON_OOM,
                own, formats);
    gs_cli_parse(&c, &argc, &argv, 1, "TRACE");

    const char *dev_name = backend ? backend : "sim";
    bool on_cuda = strcmp(dev_name, "cuda") == 0;
    if (strcmp(dev_name, "sim") != 0 && !on_cuda)
        gs_cli_usage_error("--backend: '%s' is not one of sim, cuda", backend);
    if (on_cuda && !gs_backend_compiled_in("cuda"))
        gs_cli_usage_error("--backend cuda: this gpusim was built without the CUDA Toolkit "
                           "(meson -Dcuda=enabled says why)");
    if (touch && !on_cuda) gs_cli_usage_error("--touch needs --backend cuda");
    GError *err = NULL;
    gs_reference *ref = NULL;
    if (reference) {
        ref = gs_reference_load(reference, &err);
        if (!ref) gs_cli_usage_error("%s", err->message);
        if (!c.capacity && !ref->n_devices) c.cap = ref->cap_bytes;
        if (!c.device_total) c.total = ref->device_total;
    }
    policy_args pa;
    parse_policies(&pa, policies, ref);
    GArray *modes = parse_modes(clients);
    /* a client's own policy is for the modes with an allocator per client: given alone with
     * shared alone, the shared allocator would run the default, the setting silently dropped
     * (beside a plain --policy it is the shared one's, as the same words run every mode) */
    bool per_client = false;
    for (guint i = 0; i < modes->len; i++)
        per_client |= g_array_index(modes, gs_clients_mode, i) != GS_CLIENTS_SHARED;
    if (pa.assigned->len && pa.defaulted && !per_client)
        gs_cli_usage_error("--policy %s=...: --clients shared has one allocator for every client, "
                           "which would run %s; give its policy as --policy SPEC",
                           (const char *)pa.assigned_to->pdata[0],
                           ref ? "the reference run's setting" : "the default");
    if (no_ref_addrs && !ref) gs_cli_usage_error("--no-reference-addresses needs --reference");

    /* Load every trace before writing anything: a bad second trace must not leave half a
     * report behind. */
    GPtrArray *traces = g_ptr_array_new_with_free_func((GDestroyNotify)gs_trace_free);
    replay_ctx x = {.c = &c,
                    .pa = &pa,
                    .modes = modes,
                    .ref = ref,
                    .ref_addresses = !no_ref_addrs,
                    .touch = touch};
    for (int a = 1; a < argc; a++) {
        gs_trace *t = gs_cli_load_trace(&c, argv[a]);
        if (ref) gs_cli_check_reference(ref, t, argv[a]);
        check_assigned(&pa, t, argv[a]);
        for (guint i = 0; i < pa.compared->len; i++)
            gs_cli_check_release(pa.compared->pdata[i], t, argv[a]);
        for (guint i = 0; i < pa.assigned->len; i++)
            gs_cli_check_release(pa.assigned->pdata[i], t, argv[a]);
        x.columns |= gs_report_columns(t);
        gs_cli_check_replayable(t, argv[a]);
        uint32_t *ids = NULL;
        size_t nd = gs_trace_devices(t, &ids);
        g_free(ids);
        if (nd > 1 && on_cuda)
            gs_cli_usage_error("%s: a trace with several devices replays on the simulated "
                               "device only", argv[a]);
        if (nd > 1 && plot_dir)
            gs_cli_usage_error("%s: --plot draws one device's heap; this trace has %zu devices",
                               argv[a], nd);
        if (export_dir && (nd > 1 || t->clients->len > 1))
            gs_cli_usage_error("%s: --export-snapshot writes one allocator's run; this trace has "
                               "several %s", argv[a], nd > 1 ? "devices" : "clients");
        g_ptr_array_add(traces, t);
    }
    /* the settings' warnings once every trace has taken them (a key refused at a trace's
     * release is refused, not first warned of) */
    for (guint i = 0; i < pa.compared->len; i++)
        gs_cli_warn_policy(pa.compared->pdata[i], c.cap > 0);
    for (guint i = 0; i < pa.assigned->len; i++)
        gs_cli_warn_policy(pa.assigned->pdata[i], c.cap > 0);
    /* a size for a device no trace has would be ignored: a typo, most likely */
    size_t unseen = unseen_device(&c, traces);
    if (unseen < c.n_dev)
        gs_cli_usage_error("%s: device %" G_GUINT32_FORMAT " is in no trace given",
                           c.dev[unseen].capacity ? "--capacity" : "--device-total",
                           c.dev[unseen].device);
    if (on_cuda) x.dev = gs_cli_open_device("cuda", NULL, "--backend cuda");
    /* -o must not be an input: the traces, --reference (and --calibration, which the cli knows) */
    GPtrArray *inputs = g_ptr_array_new();
    for (int a = 1; a < argc; a++) g_ptr_array_add(inputs, argv[a]);
    if (reference) g_ptr_array_add(inputs, reference);
    g_ptr_array_add(inputs, NULL);
    gs_cli_check_output(&c, (const char *const *)inputs->pdata, c.output, "--output", plot_dir);
    /* the traces are read and -o can be written: the directory is made now, so -o may name a
     * file in it */
    if (plot_dir && !((x.plotter = gs_plotter_new(plot_dir, &err)) && gs_plotter_make(x.plotter, &err)))
        gs_cli_usage_error("--plot: %s", err->message);
    for (int a = 1; x.plotter && a < argc; a++) gs_plotter_keep(x.plotter, argv[a]);
    if (x.plotter) gs_plotter_keep(x.plotter, reference);
    if (x.plotter) gs_plotter_keep(x.plotter, c.calibration);
    if (x.plotter) gs_plotter_keep_report(x.plotter, c.output);
    if (export_dir) {
        if (g_mkdir_with_parents(export_dir, 0777) != 0)
            gs_cli_usage_error("--export-snapshot: %s: %s", export_dir, g_strerror(errno));
        x.export_dir = export_dir;
        x.export_stems = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, g_free);
    }

    gs_cli_out o;
    gs_cli_open_output(&o, &c, (const char *const *)inputs->pdata, c.output);
    x.inputs = (const char *const *)inputs->pdata;
    FILE *out = o.f;
    int rc = GS_EXIT_OK;
    /* JSON is an array of one object per trace, however many traces: one shape, so a script
     * reads every report the same way (docs/cli.md, "One JSON shape"). */
    if (c.fmt == GS_FMT_JSON) fputs("[\n", out);
    for (int a = 1; a < argc; a++) {
        int trc = replay_trace(&x, out, argv[a], traces->pdata[a - 1], a == 1);
        if (trc == GS_EXIT_DEVICE || (trc == GS_EXIT_OOM && rc == GS_EXIT_OK)) rc = trc;
    }
    if (c.fmt == GS_FMT_JSON) fputs("]\n", out);
    gs_cli_close_output(&o);
    gs_backend_destroy(x.dev);
    if (x.plotter && !gs_cli_render_plots(x.plotter)) rc = GS_EXIT_PLOT;

    gs_plotter_free(x.plotter);
    g_ptr_array_free(inputs, TRUE);
    if (x.export_stems) g_hash_table_destroy(x.export_stems);
    g_ptr_array_free(traces, TRUE);
    policy_args_clear(&pa);
    g_array_free(modes, TRUE);
    gs_reference_free(ref);
    g_strfreev(policies);
    g_strfreev(clients);
    g_free(plot_dir);
    g_free(export_dir);
    g_free(backend);
    g_free(reference);
    g_free(desc);
    gs_cli_clear(&c);
    return rc;
}
