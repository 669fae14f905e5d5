/* common.c - the options several commands share, and the helpers every command uses.
 *
 * The shared options are one table (shared[] below): each has one help text, and gs_cli_parse
 * checks each in one place, so `--capacity 12parsecs` is the same one-line error in every
 * command that takes it.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <glib/gstdio.h>

#include "cli.h"

static G_GNUC_NORETURN void vfail(int rc, const char *fmt, va_list ap)
{
    fputs("gpusim: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    exit(rc);
}

void gs_cli_usage_error(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vfail(GS_EXIT_USAGE, fmt, ap);
}

void gs_cli_fail(int rc, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vfail(rc, fmt, ap);
}

/* The shared options: flag, entry (arg_data filled in by gs_cli_init). */
typedef struct {
    unsigned flag;
    GOptionEntry e;
} shared_option;

#define ENTRY(long_, short_, arg, help, meta) {long_, short_, 0, arg, NULL, help, meta}
static const shared_option shared[] = {
    {GS_CLI_CAPACITY, ENTRY("capacity", 'c', G_OPTION_ARG_STRING,
                            "Memory the allocator may reserve (default: no limit)", "SIZE")},
    {GS_CLI_DEVICE_TOTAL,
     ENTRY("device-total", 0, G_OPTION_ARG_STRING,
           "Physical memory of the simulated device (default: from the trace, else 80GiB)", "SIZE")},
    {GS_CLI_FORMAT, ENTRY("format", 'f', G_OPTION_ARG_STRING, NULL, "FMT")},
    {GS_CLI_OUTPUT, ENTRY("output", 'o', G_OPTION_ARG_FILENAME,
                          "Write the output to FILE (whole, via a temporary file) instead of stdout",
                          "FILE")},
    {GS_CLI_CONTINUE, ENTRY("continue-on-oom", 0, G_OPTION_ARG_NONE,
                            "Count and skip OOMs instead of stopping at the first, as the program "
                            "would", NULL)},
    {GS_CLI_LENIENT, ENTRY("lenient", 0, G_OPTION_ARG_NONE,
                           "Turn trace errors such as a free of an unknown id into counted warnings",
                           NULL)},
    {GS_CLI_CALIBRATION, ENTRY("calibration", 0, G_OPTION_ARG_FILENAME,
                               "Device-call latency table of the simulated device (CSV as "
                               "bench/results/*/calibration-*.csv; default: built-in H100)",
                               "FILE")},
    {GS_CLI_QUIET, ENTRY("quiet", 'q', G_OPTION_ARG_NONE, "No progress on stderr", NULL)},
};
#undef ENTRY

static void *shared_slot(gs_cli *c, unsigned flag)
{
    switch (flag) {
    case GS_CLI_CAPACITY: return &c->capacity;
    case GS_CLI_DEVICE_TOTAL: return &c->device_total;
    case GS_CLI_FORMAT: return &c->format;
    case GS_CLI_OUTPUT: return &c->output;
    case GS_CLI_CONTINUE: return &c->continue_on_oom;
    case GS_CLI_LENIENT: return &c->lenient;
    case GS_CLI_CALIBRATION: return &c->calibration;
    case GS_CLI_QUIET: return &c->quiet;
    }
    g_assert_not_reached();
}

void gs_cli_init(gs_cli *c, const char *cmd, const char *params, const char *summary,
                 const char *description, unsigned want, const GOptionEntry *own,
                 const char *const *formats)
{
    memset(c, 0, sizeof *c);
    c->cmd = cmd;
    c->want = want;
    c->formats = formats;
    size_t n_own = 0;
    while (own && own[n_own].long_name) n_own++;
    c->entries = g_new0(GOptionEntry, n_own + G_N_ELEMENTS(shared) + 1);
    size_t n = 0;
    for (size_t i = 0; i < n_own; i++) c->entries[n++] = own[i];
    for (size_t i = 0; i < G_N_ELEMENTS(shared); i++) {
        if (!(want & shared[i].flag)) continue;
        GOptionEntry e = shared[i].e;
        e.arg_data = shared_slot(c, shared[i].flag);
        if (shared[i].flag == GS_CLI_FORMAT) {
            char *list = g_strjoinv(", ", (char **)formats);
            /* kept for the context's lifetime: freed in gs_cli_clear */
            e.description = g_strdup_printf("Output: %s (default: %s)", list, formats[0]);
            g_free(list);
        }
        c->entries[n++] = e;
    }
    c->ctx = g_option_context_new(params);
    g_option_context_set_summary(c->ctx, summary);
    g_option_context_set_description(c->ctx, description);
    g_option_context_add_main_entries(c->ctx, c->entries, NULL);
}

/* A SIZE, or (GS_CLI_PER_DEVICE) a list DEV=SIZE,... with at most one plain SIZE for the devices
 * it does not name; each named device's size goes to c->dev (its device_total when total). */
static void device_sizes(gs_cli *c, const char *opt, const char *arg, uint64_t *all, bool total)
{
    GError *err = NULL;
    if (!strchr(arg, '=')) {
        if (!gs_parse_size(arg, all, &err)) gs_cli_usage_error("%s: %s", opt, err->message);
        return;
    }
    if (!(c->want & GS_CLI_PER_DEVICE))
        gs_cli_usage_error("%s: sizes per device (DEV=SIZE) apply to gpusim replay only", opt);
    char **parts = g_strsplit(arg, ",", -1);
    bool plain = false;
    for (char **q = parts; *q; q++) {
        const char *eq = strchr(*q, '=');
        uint64_t dev = 0, size = 0;
        if (!eq) {
            if (plain) gs_cli_usage_error("%s: '%s' has two sizes for every device", opt, arg);
            plain = true;
            if (!gs_parse_size(*q, all, &err)) gs_cli_usage_error("%s: %s", opt, err->message);
            continue;
        }
        char *num = g_strndup(*q, (size_t)(eq - *q));
        bool ok = g_ascii_string_to_unsigned(num, 10, 0, UINT32_MAX, &dev, NULL);
        g_free(num);
        if (!ok) gs_cli_usage_error("%s: '%s': expected DEVICE=SIZE, DEVICE a number", opt, *q);
        if (!gs_parse_size(eq + 1, &size, &err)) gs_cli_usage_error("%s: %s", opt, err->message);
        size_t k = 0;
        while (k < c->n_dev && c->dev[k].device != dev) k++;
        if (k == c->n_dev) {
            c->dev = g_renew(gs_device_opts, c->dev, c->n_dev + 1);
            c->dev[c->n_dev++] = (gs_device_opts){.device = (uint32_t)dev};
        }
        uint64_t *slot = total ? &c->dev[k].device_total : &c->dev[k].capacity;
        if (*slot) gs_cli_usage_error("%s: device %" G_GUINT64_FORMAT " named twice", opt, dev);
        *slot = size;
    }
    g_strfreev(parts);
}

void gs_cli_parse(gs_cli *c, int *argc, char ***argv, int min_args, const char *what)
{
    GError *err = NULL;
    if (!g_option_context_parse(c->ctx, argc, argv, &err))
        gs_cli_usage_error("%s (try 'gpusim %s --help')", err->message, c->cmd);
    if (*argc - 1 < min_args)
        gs_cli_usage_error("%s: no %s given (try 'gpusim %s --help')", c->cmd, what, c->cmd);
    if (c->format) {
        int i = 0;
        while (c->formats[i] && strcmp(c->formats[i], c->format) != 0) i++;
        if (!c->formats[i]) {
            char *list = g_strjoinv(", ", (char **)c->formats);
            gs_cli_usage_error("--format: '%s' is not one of %s", c->format, list);
        }
        c->fmt = strcmp(c->format, "json") == 0  ? GS_FMT_JSON
                 : strcmp(c->format, "csv") == 0 ? GS_FMT_CSV
                                                 : GS_FMT_TABLE;
    } else {
        c->fmt = GS_FMT_TABLE;
    }
    if ((c->want & GS_CLI_CAPACITY) && c->capacity)
        device_sizes(c, "--capacity", c->capacity, &c->cap, false);
    if (c->device_total) device_sizes(c, "--device-total", c->device_total, &c->total, true);
    if (c->calibration) {
        char *msg = NULL;
        if (!(c->cal = gs_calibration_load(c->calibration, &msg)))
            gs_cli_usage_error("--calibration: %s", msg);
    }
    c->progress = !c->quiet && isatty(STDERR_FILENO);
}

void gs_cli_clear(gs_cli *c)
{
    for (GOptionEntry *e = c->entries; e && e->long_name; e++)
        if (e->arg_data == &c->format) g_free((char *)e->description);
    g_free(c->entries);
    g_option_context_free(c->ctx);
    gs_calibration_free(c->cal);
    g_free(c->dev);
    g_free(c->capacity);
    g_free(c->device_total);
    g_free(c->calibration);
    g_free(c->output);
    g_free(c->format);
}

gs_backend *gs_cli_open_device(const char *name, const gs_backend_config *cfg, const char *who)
{
    gs_backend *be = NULL;
    char *msg = NULL;
    gs_status st = gs_backend_open(name, cfg, &be, &msg);
    if (st == GS_ERR_INVALID) gs_cli_usage_error("--backend: %s", msg);
    if (st != GS_OK) gs_cli_fail(GS_EXIT_DEVICE, "%s: %s", who, msg);
    return be;
}

/* Write the output whole: to a temporary file beside path, then rename, so an interrupted run
 * never leaves a half-written report. "-" is stdout; an existing path that is not a regular file
 * (a symlink, a FIFO, /dev/null) is written in place, never replaced. */
FILE *gs_cli_open_output(const char *path, char **tmp)
{
    *tmp = NULL;
    if (!path || strcmp(path, "-") == 0) return stdout;
    GStatBuf st;
    if (g_lstat(path, &st) == 0 && !S_ISREG(st.st_mode)) {
        FILE *f = fopen(path, "w");
        if (!f) gs_cli_usage_error("%s: cannot write: %s", path, g_strerror(errno));
        return f;
    }
    *tmp = g_strdup_printf("%s.XXXXXX", path);
    int fd = g_mkstemp(*tmp);
    if (fd < 0) gs_cli_usage_error("%s: cannot write: %s", path, g_strerror(errno));
    mode_t mask = umask(0);
    umask(mask);
    fchmod(fd, 0666 & ~mask); /* as if created by open(), not mkstemp's 0600 */
    return fdopen(fd, "w");
}

void gs_cli_close_output(FILE *f, char *tmp, const char *path)
{
    if (f == stdout) {
        fflush(stdout);
        return;
    }
    if (fclose(f) != 0 || (tmp && rename(tmp, path) != 0)) {
        if (tmp) unlink(tmp);
        gs_cli_usage_error("%s: cannot write: %s", path, g_strerror(errno));
    }
    g_free(tmp);
}

void gs_cli_progress(size_t done, size_t total, void *ud)
{
    fprintf(stderr, "\r%s: %zu/%zu events (%.0f%%)", (const char *)ud, done, total,
            100.0 * (double)done / (double)(total ? total : 1));
    fflush(stderr);
}

void gs_cli_warn_lenient(const char *msg, void *ud)
{
    fprintf(stderr, "gpusim: warning: %s\n", msg);
}

gs_trace *gs_cli_load_trace(const gs_cli *c, const char *path)
{
    GError *err = NULL;
    gs_trace *t = gs_trace_load(path, c->lenient ? GS_TRACE_LENIENT : 0, gs_cli_warn_lenient,
                                NULL, &err);
    if (!t) gs_cli_usage_error("%s", err->message);
    if (t->n_warnings)
        fprintf(stderr, "gpusim: %s: %zu problems skipped (--lenient)\n", path, t->n_warnings);
    return t;
}

char *gs_cli_policies_help(void)
{
    GString *s = g_string_new(NULL);
    for (const gs_policy_ops *const *r = gs_policy_registry(); *r; r++) {
        g_string_append_printf(s, "  %-10s %s\n", (*r)->name, (*r)->summary);
        char *keys = gs_policy_keys_help(*r);
        char **lines = g_strsplit(keys, "\n", -1);
        g_free(keys);
        for (char **l = lines; *l; l++)
            if (**l) g_string_append_printf(s, "      %s\n", *l);
        g_strfreev(lines);
    }
    return g_string_free(s, FALSE);
}

gboolean gs_cli_render_plots(gs_plotter *plotter)
{
    GError *err = NULL;
    size_t n = 0;
    if (gs_plotter_render(plotter, &n, &err)) return TRUE;
    fprintf(stderr, "gpusim: %s\n", err->message);
    g_error_free(err);
    return FALSE;
}
