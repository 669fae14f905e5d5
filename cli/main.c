/* main.c - the gpusim command line.
 *
 *   gpusim replay TRACE... [--policy SPEC]... [--capacity SIZE] [--format table|csv|json] ...
 *   gpusim sweep TRACE --policy 'pytorch:max_split_size_mb:{64,128}' --capacity '{5.75,6.25}GiB'
 *   gpusim plot RESULT...
 *
 * Exit status: 0 when every report was produced (an OOM is a result, not a failure); 1 when a
 * replay stopped on a device error; 2 for bad usage or bad input (one line on stderr); 3 when
 * plots were asked for and gnuplot is missing or failed (the reports and the plots' data are
 * written all the same).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <errno.h>
#include <sys/stat.h>
#include <unistd.h>

#include <glib/gstdio.h>

#include "plot.h"
#include "report.h"
#include "validate.h"
#include "sweep.h"

#define EXIT_DEVICE 1
#define EXIT_USAGE 2
#define EXIT_PLOT 3

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
    "error, 2 bad usage or bad input, 3 --plot could not draw (gnuplot missing or failed; the\n"
    "reports and the plots' data are written all the same).";

static void usage_error(const char *fmt, ...) G_GNUC_PRINTF(1, 2);
static void usage_error(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("gpusim: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    exit(EXIT_USAGE);
}

static void progress(size_t done, size_t total, void *ud)
{
    fprintf(stderr, "\r%s: %zu/%zu events (%.0f%%)", (const char *)ud, done, total,
            100.0 * (double)done / (double)(total ? total : 1));
    fflush(stderr);
}

static void warn_lenient(const char *msg, void *ud)
{
    fprintf(stderr, "gpusim: warning: %s\n", msg);
}

/* "cupy, torch": a trace's client names, for messages. g_free it. */
static char *clients_list(const gs_trace *t)
{
    GString *s = g_string_new(NULL);
    for (guint k = 0; k < t->clients->len; k++)
        g_string_append_printf(s, "%s%s", k ? ", " : "", (const char *)t->clients->pdata[k]);
    return g_string_free(s, FALSE);
}

static char *policies_help(void)
{
    GString *s = g_string_new(NULL);
    for (const gs_policy_ops *const *r = gs_policy_registry(); *r; r++) {
        g_string_append_printf(s, "  %-10s %s\n", (*r)->name, (*r)->summary);
        char **lines = g_strsplit((*r)->keys_help, "\n", -1);
        for (char **l = lines; *l; l++)
            if (**l) g_string_append_printf(s, "      %s\n", *l);
        g_strfreev(lines);
    }
    return g_string_free(s, FALSE);
}

/* Write the report whole: to a temporary file beside path, then rename, so an interrupted run
 * never leaves a half-written report. "-" is stdout; an existing path that is not a regular file
 * (a symlink, a FIFO, /dev/null) is written in place, never replaced. */
static FILE *open_output(const char *path, char **tmp)
{
    *tmp = NULL;
    if (!path || strcmp(path, "-") == 0) return stdout;
    GStatBuf st;
    if (g_lstat(path, &st) == 0 && !S_ISREG(st.st_mode)) {
        FILE *f = fopen(path, "w");
        if (!f) usage_error("%s: cannot write: %s", path, g_strerror(errno));
        return f;
    }
    *tmp = g_strdup_printf("%s.XXXXXX", path);
    int fd = g_mkstemp(*tmp);
    if (fd < 0) usage_error("%s: cannot write: %s", path, g_strerror(errno));
    mode_t mask = umask(0);
    umask(mask);
    fchmod(fd, 0666 & ~mask); /* as if created by open(), not mkstemp's 0600 */
    return fdopen(fd, "w");
}

static void close_output(FILE *f, char *tmp, const char *path)
{
    if (f == stdout) {
        fflush(stdout);
        return;
    }
    if (fclose(f) != 0 || (tmp && rename(tmp, path) != 0)) {
        if (tmp) unlink(tmp);
        usage_error("%s: cannot write: %s", path, g_strerror(errno));
    }
    g_free(tmp);
}

/* Run gnuplot on what plotter wrote; FALSE (after one line on stderr) when it could not. */
static gboolean render_plots(gs_plotter *plotter)
{
    GError *err = NULL;
    size_t n = 0;
    if (gs_plotter_render(plotter, &n, &err)) return TRUE;
    fprintf(stderr, "gpusim: %s\n", err->message);
    g_error_free(err);
    return FALSE;
}

static int cmd_replay(int argc, char **argv)
{
    char **policies = NULL, *capacity = NULL, *device_total = NULL, *format = NULL;
    char *backend = NULL, *calibration = NULL, *reference = NULL, *output = NULL;
    char **clients = NULL;
    char *plot_dir = NULL;
    gboolean continue_on_oom = FALSE, lenient = FALSE, no_ref_addrs = FALSE, quiet = FALSE;
    gboolean touch = FALSE;
    GOptionEntry entries[] = {
        {"policy", 'p', 0, G_OPTION_ARG_STRING_ARRAY, &policies,
         "Policy to replay under; repeat to compare several (default: pytorch). NAME=SPEC: "
         "the policy of the trace's client NAME (several clients)", "[NAME=]SPEC"},
        {"clients", 0, 0, G_OPTION_ARG_STRING_ARRAY, &clients,
         "Traces with several clients: separate (an allocator each, the default), shared (one "
         "for all), cooperative (an allocator each; on OOM the others release their cache); "
         "repeat or list with commas to compare", "MODE[,MODE]"},
        {"capacity", 'c', 0, G_OPTION_ARG_STRING, &capacity,
         "Memory the allocator may reserve (default: no limit)", "SIZE"},
        {"device-total", 0, 0, G_OPTION_ARG_STRING, &device_total,
         "Physical memory of the simulated device (default: from the trace, else 80GiB)", "SIZE"},
        {"backend", 'b', 0, G_OPTION_ARG_STRING, &backend,
         "Device: sim (default), or cuda: the same allocator on the real GPU's memory "
         "(device 0 of CUDA_VISIBLE_DEVICES)", "sim|cuda"},
        {"touch", 0, 0, G_OPTION_ARG_NONE, &touch,
         "With --backend cuda: write each allocation once, as a program would", NULL},
        {"format", 'f', 0, G_OPTION_ARG_STRING, &format,
         "Output: table (default), csv (one row per policy), json (one object per trace; an "
         "array of them for several traces)", "FMT"},
        {"output", 'o', 0, G_OPTION_ARG_FILENAME, &output,
         "Write the report to FILE (whole, via a temporary file) instead of stdout", "FILE"},
        {"continue-on-oom", 0, 0, G_OPTION_ARG_NONE, &continue_on_oom,
         "Count and skip OOMs instead of stopping at the first, as the program would", NULL},
        {"lenient", 0, 0, G_OPTION_ARG_NONE, &lenient,
         "Turn trace errors such as a free of an unknown id into counted warnings", NULL},
        {"calibration", 0, 0, G_OPTION_ARG_FILENAME, &calibration,
         "Device-call latency table (CSV as in shared/calibration/; default: built-in H100)", "FILE"},
        {"reference", 'r', 0, G_OPTION_ARG_FILENAME, &reference,
         "What the real allocator did (traces/convert.py --reference): compare with it, place "
         "segments at its addresses, and default --policy and --capacity to its run's",
         "REF.json"},
        {"no-reference-addresses", 0, 0, G_OPTION_ARG_NONE, &no_ref_addrs,
         "With --reference: place segments by the driver model, not the real addresses", NULL},
        {"quiet", 'q', 0, G_OPTION_ARG_NONE, &quiet, "No progress on stderr", NULL},
        {"plot", 0, 0, G_OPTION_ARG_FILENAME, &plot_dir,
         "Also draw plots into DIR with gnuplot (timeline, bars, address map at peak; PNG and "
         "SVG beside their data); --format json then carries their data too", "DIR"},
        {NULL, 0, 0, 0, NULL, NULL, NULL},
    };
    GOptionContext *ctx = g_option_context_new("TRACE... - replay allocation traces");
    g_option_context_set_summary(ctx, replay_summary);
    char *ph = policies_help();
    char *desc = g_strdup_printf(replay_description, ph);
    g_free(ph);
    g_option_context_set_description(ctx, desc);
    g_option_context_add_main_entries(ctx, entries, NULL);
    GError *err = NULL;
    if (!g_option_context_parse(ctx, &argc, &argv, &err))
        usage_error("%s (try 'gpusim replay --help')", err->message);
    if (argc < 2) usage_error("replay: no TRACE given (try 'gpusim replay --help')");

    gs_format fmt = GS_FMT_TABLE;
    if (format) {
        if (strcmp(format, "table") == 0) fmt = GS_FMT_TABLE;
        else if (strcmp(format, "csv") == 0) fmt = GS_FMT_CSV;
        else if (strcmp(format, "json") == 0) fmt = GS_FMT_JSON;
        else usage_error("--format: '%s' is not one of table, csv, json", format);
    }
    bool on_cuda = backend && strcmp(backend, "cuda") == 0;
    if (backend && !on_cuda && strcmp(backend, "sim") != 0)
        usage_error("--backend: '%s' is not one of sim, cuda", backend);
#ifndef GS_HAVE_CUDA
    if (on_cuda)
        usage_error("--backend cuda: this gpusim was built without the CUDA Toolkit "
                    "(meson -Dcuda=enabled says why)");
#endif
    if (touch && !on_cuda) usage_error("--touch needs --backend cuda");
    uint64_t cap = 0, total = 0;
    if (capacity && !gs_parse_size(capacity, &cap, &err)) usage_error("--capacity: %s", err->message);
    if (device_total && !gs_parse_size(device_total, &total, &err))
        usage_error("--device-total: %s", err->message);
    gs_calibration *cal = NULL;
    if (calibration) {
        char *msg = NULL;
        cal = gs_calibration_load(calibration, &msg);
        if (!cal) usage_error("--calibration: %s", msg);
    }
    gs_reference *ref = NULL;
    if (reference) {
        ref = gs_reference_load(reference, &err);
        if (!ref) usage_error("%s", err->message);
        if (!capacity) cap = ref->cap_bytes;
        if (!device_total) total = ref->device_total;
    }

    /* Parse every policy before replaying anything: a typo in the last one should not cost a
     * long replay of the first. NAME=SPEC assigns a policy to one client (a '=' before any ':'
     * cannot be part of a spec); the others are compared, each applied to every client. */
    GPtrArray *pols = g_ptr_array_new_with_free_func((GDestroyNotify)gs_policy_free);
    GPtrArray *assigned = g_ptr_array_new_with_free_func((GDestroyNotify)gs_policy_free);
    GPtrArray *assigned_to = g_ptr_array_new_with_free_func(g_free);
    for (char **p = policies; p && *p; p++) {
        const char *eq = strchr(*p, '='), *colon = strchr(*p, ':');
        bool named = eq && (!colon || eq < colon);
        gs_policy *pol = gs_policy_new(named ? eq + 1 : *p, &err);
        if (!pol) usage_error("--policy: %s", err->message);
        if (!named) {
            g_ptr_array_add(pols, pol);
            continue;
        }
        char *name = g_strndup(*p, (size_t)(eq - *p));
        if (!*name) usage_error("--policy %s: no client NAME before '='", *p);
        for (guint i = 0; i < assigned_to->len; i++)
            if (strcmp(assigned_to->pdata[i], name) == 0)
                usage_error("--policy %s: client '%s' has a policy already", *p, name);
        g_ptr_array_add(assigned, pol);
        g_ptr_array_add(assigned_to, name);
    }
    if (pols->len == 0) {
        char *spec = ref && ref->allocator_conf && *ref->allocator_conf
                         ? g_strdup_printf("pytorch:%s", ref->allocator_conf)
                         : g_strdup("pytorch");
        gs_policy *pol = gs_policy_new(spec, &err);
        if (!pol) usage_error("policy of the reference run: %s", err->message);
        g_ptr_array_add(pols, pol);
        g_free(spec);
    }
    GArray *modes = g_array_new(FALSE, FALSE, sizeof(gs_clients_mode));
    for (char **c = clients; c && *c; c++) {
        char **parts = g_strsplit(*c, ",", -1);
        for (char **m = parts; *m; m++) {
            gs_clients_mode mode;
            if (!gs_clients_mode_parse(g_strstrip(*m), &mode))
                usage_error("--clients: '%s' is not one of separate, shared, cooperative", *m);
            g_array_append_val(modes, mode);
        }
        g_strfreev(parts);
    }
    if (modes->len == 0) {
        gs_clients_mode mode = GS_CLIENTS_SEPARATE;
        g_array_append_val(modes, mode);
    }

    if (no_ref_addrs && !ref) usage_error("--no-reference-addresses needs --reference");
    /* Load every trace before writing anything: a bad second trace must not leave half a
     * report behind. */
    GPtrArray *traces = g_ptr_array_new_with_free_func((GDestroyNotify)gs_trace_free);
    bool any_clients = false;
    for (int a = 1; a < argc; a++) {
        gs_trace *t = gs_trace_load(argv[a], lenient ? GS_TRACE_LENIENT : 0, warn_lenient, NULL, &err);
        if (!t) usage_error("%s", err->message);
        if (t->n_warnings)
            fprintf(stderr, "gpusim: %s: %zu problems skipped (--lenient)\n", argv[a], t->n_warnings);
        for (guint i = 0; i < assigned_to->len; i++) {
            bool found = false;
            for (guint k = 0; k < t->clients->len; k++)
                found |= strcmp(t->clients->pdata[k], assigned_to->pdata[i]) == 0;
            if (!found) {
                char *names = clients_list(t);
                usage_error("--policy %s=...: %s has no client '%s' (its clients: %s)",
                            (char *)assigned_to->pdata[i], argv[a],
                            (char *)assigned_to->pdata[i], names);
            }
        }
        any_clients |= t->clients->len > 1;
        g_ptr_array_add(traces, t);
    }

    gs_backend *dev = NULL;
#ifdef GS_HAVE_CUDA
    if (on_cuda) {
        char *msg = NULL;
        dev = gs_cuda_backend_new(0, &msg);
        if (!dev) {
            fprintf(stderr, "gpusim: --backend cuda: %s\n", msg);
            exit(EXIT_DEVICE);
        }
    }
#endif

    gs_plotter *plotter = NULL;
    if (plot_dir && !(plotter = gs_plotter_new(plot_dir, &err))) usage_error("--plot: %s", err->message);
    char *tmp = NULL;
    FILE *out = open_output(output, &tmp);
    bool show_progress = !quiet && isatty(STDERR_FILENO);
    int rc = 0;
    if (fmt == GS_FMT_JSON && argc > 2) fputs("[\n", out);
    for (int a = 1; a < argc; a++) {
        const gs_trace *t = traces->pdata[a - 1];
        /* The client policies of this trace, by its client index (NULL: the compared one). */
        const gs_policy **cpol = g_new0(const gs_policy *, t->clients->len);
        for (guint k = 0; k < t->clients->len; k++)
            for (guint i = 0; i < assigned_to->len; i++)
                if (strcmp(t->clients->pdata[k], assigned_to->pdata[i]) == 0)
                    cpol[k] = assigned->pdata[i];
        /* One client: the arrangements are all the same, and its NAME=SPEC, if any, is the
         * policy. Several: every arrangement under every compared policy. */
        bool multi = t->clients->len > 1;
        guint nmodes = multi ? modes->len : 1;
        guint npols = !multi && cpol[0] ? 1 : pols->len;
        guint n = nmodes * npols;
        gs_result *rs = g_new0(gs_result, n);
        const gs_reference **refs = ref ? g_new0(const gs_reference *, n) : NULL;
        gs_plot_series **series = plotter ? g_new0(gs_plot_series *, n) : NULL;
        for (guint i = 0; i < n; i++) {
            const gs_policy *pol = !multi && cpol[0] ? cpol[0] : pols->pdata[i % npols];
            char *label = g_strdup_printf("%s [%s]", argv[a], pol->spec);
            gs_replay_opts o = {
                .capacity = cap,
                .device_total = total ? total : t->device_total,
                .cal = cal,
                .continue_on_oom = continue_on_oom,
                .ref = no_ref_addrs ? NULL : ref,
                .progress = show_progress ? progress : NULL,
                .progress_ud = label,
                .backend = dev,
                .touch = touch,
                .clients = g_array_index(modes, gs_clients_mode, i / npols),
                .client_policy = cpol,
            };
            if (series) {
                o.observe = gs_plot_observe;
                o.observe_ud = series[i] = gs_plot_series_new(t->n);
            }
            gs_replay_run(t, pol, &o, &rs[i], NULL);
            if (series && fmt == GS_FMT_JSON) rs[i].json_extra = gs_plot_series_json(series[i]);
            if (show_progress && t->n >= (1u << 20)) fputs("\r\033[K", stderr);
            if (rs[i].error != GS_OK) rc = EXIT_DEVICE;
            if (refs) refs[i] = ref;
            g_free(label);
        }
        if (fmt == GS_FMT_JSON && a > 1) fputs(",\n", out);
        gs_report_ex(out, fmt, argv[a], t, rs, n, refs, a == 1, any_clients);
        if (plotter) {
            gs_plot_run *runs = g_new0(gs_plot_run, n);
            for (guint i = 0; i < n; i++) gs_plot_run_from_result(&runs[i], &rs[i], series[i]);
            if (!gs_plot_trace(plotter, argv[a], runs, n, &err))
                usage_error("--plot: %s", err->message);
            for (guint i = 0; i < n; i++) gs_plot_run_clear(&runs[i]); /* and the series */
            g_free(runs);
            g_free(series);
        }
        for (guint i = 0; i < n; i++) gs_result_clear(&rs[i]);
        g_free(rs);
        g_free(refs);
        g_free(cpol);
    }
    g_ptr_array_free(traces, TRUE);
    if (fmt == GS_FMT_JSON && argc > 2) fputs("]\n", out);
    close_output(out, tmp, output);
    gs_backend_destroy(dev);
    if (plotter && !render_plots(plotter)) rc = EXIT_PLOT;
    gs_plotter_free(plotter);
    g_free(plot_dir);

    g_ptr_array_free(pols, TRUE);
    g_ptr_array_free(assigned, TRUE);
    g_ptr_array_free(assigned_to, TRUE);
    g_array_free(modes, TRUE);
    g_strfreev(clients);
    gs_reference_free(ref);
    gs_calibration_free(cal);
    g_strfreev(policies);
    g_free(capacity);
    g_free(device_total);
    g_free(format);
    g_free(backend);
    g_free(calibration);
    g_free(reference);
    g_free(output);
    g_free(desc);
    g_option_context_free(ctx);
    return rc;
}

static const char validate_description[] =
    "Replays each TRACE under each policy twice over: on the simulated device, as 'gpusim replay'\n"
    "does, and on the real GPU (the same core and policy on cudaMalloc/cudaFree and the driver's\n"
    "virtual-memory calls). The real side replays once to warm up, asking the driver at every new\n"
    "peak how much memory it has lost (the driver's view of peak reserved), then --runs more\n"
    "times, timed; its times are the medians of those runs.\n"
    "\n"
    "Checks and their tolerances (a row beyond its tolerance says DIFFERS):\n"
    "  outcome, peak reserved and peak allocated, alloc retries, device calls by kind: equal\n"
    "  peak reserved as the driver sees it: within 2% of the allocator's count\n"
    "  modelled device time: within 25% of the measured median, in total and for every call\n"
    "    kind that takes at least 10% of the measured total\n"
    "  host time per alloc/free (the allocator's own, device calls excluded): shown, not judged\n"
    "\n"
    "Examples:\n"
    "  gpusim validate traces/data/resnet50.gstrace.gz --policy pytorch \\\n"
    "      --policy pytorch:expandable_segments:True --touch\n"
    "  gpusim validate traces/data/gpt2.gstrace.gz --runs 9 --format json -o gpt2.validate.json\n"
    "  gpusim validate traces/data/resnet50.gstrace.gz --save-calibration my-gpu.csv\n"
    "      # then: gpusim replay ... --calibration my-gpu.csv\n"
    "\n"
    "Exit status: 0 every check within tolerance, 3 some check differs, 1 the device failed or\n"
    "there is no GPU, 2 bad usage or bad input.";

#define EXIT_DIFFERS 3

static int cmd_validate(int argc, char **argv)
{
    char **policies = NULL, *capacity = NULL, *format = NULL, *output = NULL;
    char *calibration = NULL, *save_cal = NULL, *backend = NULL;
    int runs = 5;
    gboolean touch = FALSE;
    GOptionEntry entries[] = {
        {"policy", 'p', 0, G_OPTION_ARG_STRING_ARRAY, &policies,
         "Policy to validate; repeat for several (default: pytorch)", "SPEC"},
        {"capacity", 'c', 0, G_OPTION_ARG_STRING, &capacity,
         "Memory the allocator may reserve (default: no limit)", "SIZE"},
        {"runs", 'n', 0, G_OPTION_ARG_INT, &runs, "Timed runs on the GPU after the warm-up (default 5)",
         "N"},
        {"touch", 0, 0, G_OPTION_ARG_NONE, &touch,
         "Write each allocation once on the GPU, as a program would", NULL},
        {"format", 'f', 0, G_OPTION_ARG_STRING, &format, "Output: table (default) or json", "FMT"},
        {"output", 'o', 0, G_OPTION_ARG_FILENAME, &output,
         "Write the comparison to FILE (whole, via a temporary file) instead of stdout", "FILE"},
        {"calibration", 0, 0, G_OPTION_ARG_FILENAME, &calibration,
         "The simulator's latency table (default: built-in H100)", "FILE"},
        {"backend", 'b', 0, G_OPTION_ARG_STRING, &backend,
         "The device checked against: cuda (default; device 0 of CUDA_VISIBLE_DEVICES), or sim: "
         "a second simulated device stands in for it (to try gpusim validate itself without a GPU)",
         "cuda|sim"},
        {"save-calibration", 0, 0, G_OPTION_ARG_FILENAME, &save_cal,
         "Write a latency table made from every timed call of the real runs (medians per call "
         "and size class; loads with --calibration)", "FILE"},
        {NULL, 0, 0, 0, NULL, NULL, NULL},
    };
    GOptionContext *ctx =
        g_option_context_new("TRACE... - the simulator's prediction beside the real GPU");
    g_option_context_set_summary(ctx, "Replay traces on the simulated device and on the real GPU "
                                      "and compare them, check by check.");
    g_option_context_set_description(ctx, validate_description);
    g_option_context_add_main_entries(ctx, entries, NULL);
    GError *err = NULL;
    if (!g_option_context_parse(ctx, &argc, &argv, &err))
        usage_error("%s (try 'gpusim validate --help')", err->message);
    if (argc < 2) usage_error("validate: no TRACE given (try 'gpusim validate --help')");
    if (runs < 1 || runs > 1000) usage_error("--runs: %d is not between 1 and 1000", runs);
    gs_format fmt = GS_FMT_TABLE;
    if (format && strcmp(format, "json") == 0) fmt = GS_FMT_JSON;
    else if (format && strcmp(format, "table") != 0)
        usage_error("--format: '%s' is not one of table, json", format);
    uint64_t cap = 0;
    if (capacity && !gs_parse_size(capacity, &cap, &err)) usage_error("--capacity: %s", err->message);
    gs_calibration *cal = NULL;
    if (calibration) {
        char *msg = NULL;
        cal = gs_calibration_load(calibration, &msg);
        if (!cal) usage_error("--calibration: %s", msg);
    }
    GPtrArray *pols = g_ptr_array_new_with_free_func((GDestroyNotify)gs_policy_free);
    for (char **p = policies; p && *p; p++) {
        gs_policy *pol = gs_policy_new(*p, &err);
        if (!pol) usage_error("--policy: %s", err->message);
        g_ptr_array_add(pols, pol);
    }
    if (!pols->len) g_ptr_array_add(pols, gs_policy_new("pytorch", NULL));
    GPtrArray *traces = g_ptr_array_new_with_free_func((GDestroyNotify)gs_trace_free);
    for (int a = 1; a < argc; a++) {
        gs_trace *t = gs_trace_load(argv[a], 0, NULL, NULL, &err);
        if (!t) usage_error("%s", err->message);
        g_ptr_array_add(traces, t);
    }
    bool on_sim = backend && strcmp(backend, "sim") == 0;
    if (backend && !on_sim && strcmp(backend, "cuda") != 0)
        usage_error("--backend: '%s' is not one of cuda, sim", backend);
    gs_backend *dev = NULL;
    gs_calibration *stand_in_cal = NULL;
    if (on_sim) {
        const gs_trace *t0 = traces->pdata[0];
        stand_in_cal = gs_calibration_builtin();
        gs_sim_config sc = {.total_bytes = t0->device_total ? t0->device_total : 80 * GS_GiB,
                            .cal = stand_in_cal};
        dev = gs_sim_backend_new(&sc);
    } else {
#ifdef GS_HAVE_CUDA
        char *msg = NULL;
        dev = gs_cuda_backend_new(0, &msg);
        if (!dev) {
            fprintf(stderr, "gpusim: validate: %s\n", msg);
            exit(EXIT_DEVICE);
        }
#else
        fprintf(stderr, "gpusim: validate: this gpusim was built without the CUDA Toolkit\n");
        exit(EXIT_DEVICE);
#endif
    }
    GArray *samples = save_cal ? gs_call_samples_new() : NULL;
    char *tmp = NULL;
    FILE *out = open_output(output, &tmp);
    int rc = 0;
    bool first = true;
    if (fmt == GS_FMT_JSON) fputs("[\n", out);
    for (int a = 1; a < argc; a++) {
        const gs_trace *t = traces->pdata[a - 1];
        for (guint i = 0; i < pols->len; i++) {
            gs_validate_opts o = {
                .capacity = cap,
                .device_total = t->device_total,
                .cal = cal,
                .backend = dev,
                .runs = (unsigned)runs,
                .touch = touch,
                .samples = samples,
            };
            gs_validation v;
            if (!gs_validate_run(t, pols->pdata[i], &o, &v, &err)) usage_error("%s", err->message);
            gs_validation_report(out, fmt, argv[a], t, &v, first);
            first = false;
            if (v.real.error != GS_OK) rc = EXIT_DEVICE;
            else if (!gs_validation_ok(t, &v) && rc == 0) rc = EXIT_DIFFERS;
            gs_validation_clear(&v);
        }
    }
    if (fmt == GS_FMT_JSON) fputs("\n]\n", out);
    close_output(out, tmp, output);
    if (samples) {
        char *why = NULL;
        gs_calibration *base = cal ? NULL : gs_calibration_builtin();
        if (!gs_calibration_save(save_cal, (gs_call_sample *)(void *)samples->data, samples->len,
                                 cal ? cal : base, &why))
            usage_error("--save-calibration: %s", why);
        gs_calibration_free(base);
        g_array_free(samples, TRUE);
    }
    gs_backend_destroy(dev);
    gs_calibration_free(stand_in_cal);
    g_ptr_array_free(traces, TRUE);
    g_ptr_array_free(pols, TRUE);
    gs_calibration_free(cal);
    g_free(backend);
    g_strfreev(policies);
    g_free(capacity);
    g_free(format);
    g_free(output);
    g_free(calibration);
    g_free(save_cal);
    g_option_context_free(ctx);
    return rc;
}

/* ---- gpusim sweep ---- */

static const char sweep_description[] =
    "Each brace list in --policy or --capacity is a parameter of the grid, named by the key in\n"
    "front of it (max_split_size_mb, garbage_collection_threshold, ...) or 'capacity'; several\n"
    "--policy templates add a 'policy' parameter. Cells are the product of the lists, the first\n"
    "list outermost; they run in parallel (-j), and the CSV has one row per cell, in grid order:\n"
    "cell, one column per parameter, then the columns of 'gpusim replay --format csv'.\n"
    "\n"
    "Examples:\n"
    "  gpusim sweep traces/data/resnet50.gstrace.gz \\\n"
    "      --policy 'pytorch:max_split_size_mb:{64,128,256,512}' --capacity '{5.75,6.25}GiB' \\\n"
    "      -o sweep.csv --plot plots/        # 8 cells; plots/resnet50-sweep.png\n"
    "  gpusim sweep trace.gstrace -p 'pytorch:garbage_collection_threshold:{0.5,0.7,0.9}' \\\n"
    "      -p pytorch:expandable_segments:True --capacity 20GiB -j 4\n"
    "  gpusim plot sweep.csv                  # redraw the sweep's plot from its CSV\n"
    "\n"
    "--plot DIR draws NAME-sweep (.png, .svg, with its .gp and .dat): peak reserved, waste,\n"
    "retries and modelled device time against the first parameter, one line per value of the\n"
    "others, OOM cells marked. A progress line goes to stderr when it is a terminal.\n"
    "\n"
    "Exit status: 0 the CSV was written (OOM outcomes included), 1 a cell stopped on a device\n"
    "error, 2 bad usage or bad input, 3 --plot could not draw (the CSV is written anyway).";

static void sweep_progress(size_t done, size_t total, void *ud)
{
    fprintf(stderr, "\r\033[K%s: %zu/%zu cells", (const char *)ud, done, total);
    fflush(stderr);
}

static int cmd_sweep(int argc, char **argv)
{
    char **policies = NULL, *capacity = NULL, *device_total = NULL, *calibration = NULL;
    char *output = NULL, *plot_dir = NULL;
    gint jobs = 0;
    gboolean continue_on_oom = FALSE, lenient = FALSE, quiet = FALSE;
    GOptionEntry entries[] = {
        {"policy", 'p', 0, G_OPTION_ARG_STRING_ARRAY, &policies,
         "Policy template with brace lists, e.g. 'pytorch:max_split_size_mb:{64,128}'; repeat "
         "for several (default: pytorch)", "SPEC"},
        {"capacity", 'c', 0, G_OPTION_ARG_STRING, &capacity,
         "Memory the allocator may reserve, with brace lists, e.g. '{5.75,6.25}GiB' "
         "(default: no limit)", "SIZE"},
        {"jobs", 'j', 0, G_OPTION_ARG_INT, &jobs,
         "Cells replayed at once (default: one per processor)", "N"},
        {"output", 'o', 0, G_OPTION_ARG_FILENAME, &output,
         "Write the CSV to FILE (whole, via a temporary file) instead of stdout", "FILE"},
        {"plot", 0, 0, G_OPTION_ARG_FILENAME, &plot_dir,
         "Also plot the sweep into DIR with gnuplot", "DIR"},
        {"device-total", 0, 0, G_OPTION_ARG_STRING, &device_total,
         "Physical memory of the simulated device (default: from the trace, else 80GiB)", "SIZE"},
        {"continue-on-oom", 0, 0, G_OPTION_ARG_NONE, &continue_on_oom,
         "Count and skip OOMs instead of stopping a cell at its first", NULL},
        {"lenient", 0, 0, G_OPTION_ARG_NONE, &lenient,
         "Turn trace errors such as a free of an unknown id into counted warnings", NULL},
        {"calibration", 0, 0, G_OPTION_ARG_FILENAME, &calibration,
         "Device-call latency table (default: built-in H100)", "FILE"},
        {"quiet", 'q', 0, G_OPTION_ARG_NONE, &quiet, "No progress on stderr", NULL},
        {NULL, 0, 0, 0, NULL, NULL, NULL},
    };
    GOptionContext *ctx = g_option_context_new("TRACE - replay one trace over a grid of settings");
    g_option_context_set_summary(ctx,
        "Replay a trace under every combination of policy settings and capacities written as\n"
        "brace lists, in parallel, and write one CSV row per combination.");
    g_option_context_set_description(ctx, sweep_description);
    g_option_context_add_main_entries(ctx, entries, NULL);
    GError *err = NULL;
    if (!g_option_context_parse(ctx, &argc, &argv, &err))
        usage_error("%s (try 'gpusim sweep --help')", err->message);
    if (argc < 2) usage_error("sweep: no TRACE given (try 'gpusim sweep --help')");
    if (argc > 2) usage_error("sweep: one TRACE at a time (got %d)", argc - 1);
    if (jobs < 0) usage_error("--jobs: %d is not a number of threads", jobs);
    uint64_t total = 0;
    if (device_total && !gs_parse_size(device_total, &total, &err))
        usage_error("--device-total: %s", err->message);
    gs_sweep *sw = gs_sweep_new((const char *const *)policies, capacity, &err);
    if (!sw) usage_error("%s", err->message);
    gs_calibration *cal = NULL;
    if (calibration) {
        char *msg = NULL;
        if (!(cal = gs_calibration_load(calibration, &msg))) usage_error("--calibration: %s", msg);
    } else {
        cal = gs_calibration_builtin(); /* one table, read by every cell */
    }
    gs_trace *t = gs_trace_load(argv[1], lenient ? GS_TRACE_LENIENT : 0, warn_lenient, NULL, &err);
    if (!t) usage_error("%s", err->message);
    gs_plotter *plotter = NULL;
    if (plot_dir && !(plotter = gs_plotter_new(plot_dir, &err))) usage_error("--plot: %s", err->message);

    size_t n = sw->cells->len;
    gs_result *rs = g_new0(gs_result, n);
    gs_replay_opts o = {
        .device_total = total ? total : t->device_total,
        .cal = cal,
        .continue_on_oom = continue_on_oom,
    };
    bool show_progress = !quiet && isatty(STDERR_FILENO);
    if (!gs_sweep_run(sw, t, &o, (unsigned)jobs, show_progress ? sweep_progress : NULL, argv[1],
                      rs, &err))
        usage_error("%s", err->message);
    if (show_progress) fputs("\r\033[K", stderr);
    int rc = 0;
    for (size_t i = 0; i < n; i++)
        if (rs[i].error != GS_OK) rc = EXIT_DEVICE;

    char *tmp = NULL;
    FILE *out = open_output(output, &tmp);
    gs_sweep_csv(out, sw, argv[1], t, rs);
    close_output(out, tmp, output);
    if (plotter) {
        gs_plot_run *runs = g_new0(gs_plot_run, n);
        const char **values = g_new0(const char *, n * sw->params->len + 1);
        for (size_t i = 0; i < n; i++) {
            const gs_sweep_cell *c = &g_array_index(sw->cells, gs_sweep_cell, i);
            gs_plot_run_from_result(&runs[i], &rs[i], NULL);
            for (guint k = 0; k < sw->params->len; k++) values[i * sw->params->len + k] = c->values[k];
        }
        if (!gs_plot_sweep(plotter, argv[1], (const char *const *)sw->params->pdata,
                           sw->params->len, values, runs, n, &err))
            usage_error("--plot: %s", err->message);
        if (!render_plots(plotter)) rc = EXIT_PLOT;
        for (size_t i = 0; i < n; i++) gs_plot_run_clear(&runs[i]);
        g_free(runs);
        g_free(values);
        gs_plotter_free(plotter);
    }
    for (size_t i = 0; i < n; i++) gs_result_clear(&rs[i]);
    g_free(rs);
    gs_trace_free(t);
    gs_sweep_free(sw);
    gs_calibration_free(cal);
    g_strfreev(policies);
    g_free(capacity);
    g_free(device_total);
    g_free(calibration);
    g_free(output);
    g_free(plot_dir);
    g_option_context_free(ctx);
    return rc;
}

/* ---- gpusim plot ---- */

static const char plot_description[] =
    "RESULT is a report of 'gpusim replay --format json|csv' or the CSV of 'gpusim sweep'. JSON\n"
    "saved from a replay run with --plot carries the timeline and the address map, and gives\n"
    "every plot again; a replay's CSV (or JSON without them) gives the comparison bars; a sweep's\n"
    "CSV gives the sweep's plot. Each plot is NAME.png and NAME.svg beside NAME.gp and its .dat.\n"
    "\n"
    "Examples:\n"
    "  gpusim replay traces/data/resnet50.gstrace.gz -p pytorch -p pytorch:expandable_segments:True \\\n"
    "      --format json -o run.json --plot plots/\n"
    "  gpusim plot run.json -o other-plots/\n"
    "  gpusim sweep trace.gstrace -p 'pytorch:max_split_size_mb:{64,128}' -o sweep.csv\n"
    "  gpusim plot sweep.csv                   # plots beside sweep.csv\n"
    "\n"
    "gnuplot is $GPUSIM_GNUPLOT, else gnuplot in PATH.\n"
    "Exit status: 0 plots drawn, 2 bad usage or a RESULT that is not a gpusim report, 3 gnuplot\n"
    "missing or failed (the data files and scripts are written anyway).";

static int cmd_plot(int argc, char **argv)
{
    char *dir = NULL;
    GOptionEntry entries[] = {
        {"output", 'o', 0, G_OPTION_ARG_FILENAME, &dir,
         "Write the plots into DIR (default: the directory of each RESULT)", "DIR"},
        {NULL, 0, 0, 0, NULL, NULL, NULL},
    };
    GOptionContext *ctx = g_option_context_new("RESULT... - plot saved results");
    g_option_context_set_summary(ctx, "Draw gpusim's plots from a saved report, with gnuplot.");
    g_option_context_set_description(ctx, plot_description);
    g_option_context_add_main_entries(ctx, entries, NULL);
    GError *err = NULL;
    if (!g_option_context_parse(ctx, &argc, &argv, &err))
        usage_error("%s (try 'gpusim plot --help')", err->message);
    if (argc < 2) usage_error("plot: no RESULT given (try 'gpusim plot --help')");
    int rc = 0;
    for (int a = 1; a < argc; a++) {
        char *d = dir ? g_strdup(dir) : g_path_get_dirname(argv[a]);
        gs_plotter *p = gs_plotter_new(d, &err);
        g_free(d);
        gboolean ok = p && gs_plot_saved(p, argv[a], &err);
        if (ok && !render_plots(p)) rc = EXIT_PLOT;
        gs_plotter_free(p);
        if (!ok) usage_error("%s", err->message);
        if (rc) break;
    }
    g_free(dir);
    g_option_context_free(ctx);
    return rc;
}

static const char main_help[] =
    "usage: gpusim COMMAND [OPTIONS]\n"
    "\n"
    "gpusim replays GPU memory-allocation traces through allocator policies (PyTorch's caching\n"
    "allocator and its settings) on a simulated device, to find which policy would have saved a\n"
    "run from 'CUDA out of memory' and what it would cost.\n"
    "\n"
    "Commands:\n"
    "  replay TRACE...   replay traces under one or more policies and compare them\n"
    "  validate TRACE... replay on the simulator and on the real GPU, side by side\n"
    "  sweep TRACE       replay one trace over a grid of settings ({64,128} lists), in parallel\n"
    "  plot RESULT...    draw the plots of a saved report (also: replay/sweep --plot DIR)\n"
    "  help              this text; 'gpusim COMMAND --help' for a command's options\n"
    "  version           print the version\n"
    "\n"
    "Traces are gpusim's text format (see traces/trace.h); convert a PyTorch memory snapshot with\n"
    "  python3 traces/convert.py snapshot.pickle -o trace.gstrace.gz\n";

int main(int argc, char **argv)
{
    if (argc < 2) {
        fputs(main_help, stderr);
        return EXIT_USAGE;
    }
    const char *cmd = argv[1];
    if (strcmp(cmd, "replay") == 0) return cmd_replay(argc - 1, argv + 1);
    if (strcmp(cmd, "validate") == 0) return cmd_validate(argc - 1, argv + 1);
    if (strcmp(cmd, "sweep") == 0) return cmd_sweep(argc - 1, argv + 1);
    if (strcmp(cmd, "plot") == 0) return cmd_plot(argc - 1, argv + 1);
    if (strcmp(cmd, "help") == 0 || strcmp(cmd, "--help") == 0 || strcmp(cmd, "-h") == 0) {
        fputs(main_help, stdout);
        return 0;
    }
    if (strcmp(cmd, "version") == 0 || strcmp(cmd, "--version") == 0) {
        printf("gpusim %s\n", GS_VERSION);
        return 0;
    }
    usage_error("unknown command '%s' (commands: replay, validate, sweep, plot, help, version)",
                cmd);
}
