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

/* "gpusim: message" on stderr, one line whatever the message quotes (a file name may hold a
 * line break): gs_printable. Every message of the command line goes through it. */
static void vsay(const char *fmt, va_list ap)
{
    char *m = g_strdup_vprintf(fmt, ap), *line = gs_printable(m);
    fprintf(stderr, "gpusim: %s\n", line);
    g_free(line);
    g_free(m);
}

void gs_cli_say(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsay(fmt, ap);
    va_end(ap);
}

static G_GNUC_NORETURN void vfail(int rc, const char *fmt, va_list ap)
{
    vsay(fmt, ap);
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
           "Physical memory of the simulated device (default: from the trace, else 80GiB)",
           "SIZE")},
    {GS_CLI_FORMAT, ENTRY("format", 'f', G_OPTION_ARG_STRING, NULL, "FMT")},
    {GS_CLI_OUTPUT,
     ENTRY("output", 'o', G_OPTION_ARG_FILENAME,
           "Write the output to FILE (whole, via a temporary file) instead of stdout", "FILE")},
    {GS_CLI_CONTINUE, ENTRY("continue-on-oom", 0, G_OPTION_ARG_NONE,
                            "Count and skip OOMs instead of stopping at the first, as the program "
                            "would",
                            NULL)},
    {GS_CLI_LENIENT,
     ENTRY("lenient", 0, G_OPTION_ARG_NONE,
           "Turn trace errors such as a free of an unknown id into counted warnings", NULL)},
    {GS_CLI_CALIBRATION, ENTRY("calibration", 0, G_OPTION_ARG_FILENAME,
                               "Device-call latency table of the simulated device (CSV as "
                               "gpusim validate --save-calibration writes, e.g. "
                               "lab/results/h100-2026-11-22-validate/calibration-resnet50.csv; "
                               "default: built-in H100)",
                               "FILE")},
    {GS_CLI_QUIET, ENTRY("quiet", 'q', G_OPTION_ARG_NONE, "No progress on stderr", NULL)},
    {GS_CLI_FAIL_ON_OOM, ENTRY("fail-on-oom", 0, G_OPTION_ARG_NONE,
                               "Exit with status 4 when some result met an OOM (for scripts; the "
                               "report is written all the same)",
                               NULL)},
    {GS_CLI_JOBS, ENTRY("jobs", 'j', G_OPTION_ARG_INT,
                        "Replays run at once (default, or 0: one per processor)", "N")},
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
    case GS_CLI_JOBS: return &c->jobs;
    case GS_CLI_FAIL_ON_OOM: return &c->fail_on_oom;
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
            e.description = g_strdup_printf("Output: %s (default: %s, or by -o's name: .json, "
                                            ".csv)",
                                            list, formats[0]);
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
        if (total && size > GS_MAX_DEVICE_BYTES)
            gs_cli_usage_error("%s: '%s': more than gpusim simulates (16 TiB)", opt, *q);
        uint64_t *slot = total ? &c->dev[k].device_total : &c->dev[k].capacity;
        if (*slot) gs_cli_usage_error("%s: device %" G_GUINT64_FORMAT " named twice", opt, dev);
        *slot = size;
    }
    g_strfreev(parts);
}

/* GLib takes a short option's value only as the next argument: "-j4" is an unknown option,
 * and "-j" last takes what follows as its value. Where an argument glues a value to a short
 * option that takes one, words that say so (a literal or ""), for the parse error. */
static const char *glued_value(const gs_cli *c, int argc, char **argv)
{
    for (int i = 1; i < argc && strcmp(argv[i], "--") != 0; i++) {
        const char *a = argv[i];
        if (a[0] != '-' || a[1] == '-' || !a[1] || !a[2]) continue;
        for (const GOptionEntry *e = c->entries; e && e->long_name; e++)
            if (e->short_name == a[1] && e->arg != G_OPTION_ARG_NONE)
                return "; a short option's value goes after a space (-j 4, not -j4)";
    }
    return "";
}

/* Without --format, the output's name says the format where the command writes it (-o
 * out.json wrote a table into a file named .json, which a script then failed to read); else
 * the table. A name of a format the command does not write is refused (validate -o v.csv wrote
 * a table into v.csv, exit 0, where -f csv was refused): --format table writes the table there. */
static gs_format output_format_by_name(const gs_cli *c)
{
    static const struct {
        const char *suffix, *name;
        gs_format fmt;
    } by_name[] = {{".json", "json", GS_FMT_JSON}, {".csv", "csv", GS_FMT_CSV}};
    for (size_t k = 0; c->output && k < G_N_ELEMENTS(by_name); k++) {
        size_t n = strlen(c->output), m = strlen(by_name[k].suffix);
        if (n <= m || g_ascii_strcasecmp(c->output + n - m, by_name[k].suffix) != 0) continue;
        for (size_t i = 0; c->formats && c->formats[i]; i++)
            if (strcmp(c->formats[i], by_name[k].name) == 0) return by_name[k].fmt;
        if (c->formats) {
            char *list = g_strjoinv(", ", (char **)c->formats), *shown = gs_printable(c->output);
            gs_cli_usage_error("-o %s: a name of %s, which %s does not write (%s); --format table "
                               "writes the table there",
                               shown, by_name[k].name, c->cmd, list);
        }
    }
    return GS_FMT_TABLE;
}

/* An empty file or folder name given to an option ("-o ''", a shell variable unset) is refused
 * by the option's name: it had reached the writer as "gpusim: : cannot write". */
static void check_no_empty_names(const gs_cli *c)
{
    for (const GOptionEntry *e = c->entries; e && e->long_name; e++) {
        if (e->arg == G_OPTION_ARG_FILENAME) {
            const char *v = *(char **)e->arg_data;
            if (v && !*v) gs_cli_usage_error("--%s: an empty name", e->long_name);
        } else if (e->arg == G_OPTION_ARG_FILENAME_ARRAY) {
            for (char **v = *(char ***)e->arg_data; v && *v; v++)
                if (!**v) gs_cli_usage_error("--%s: an empty name", e->long_name);
        }
    }
}

void gs_cli_parse(gs_cli *c, int *argc, char ***argv, int min_args, const char *what)
{
    GError *err = NULL;
    if (!g_option_context_parse(c->ctx, argc, argv, &err)) {
        const char *hint = glued_value(c, *argc, *argv);
        gs_cli_usage_error("%s%s (try 'gpusim %s --help')", err->message, hint, c->cmd);
    }
    /* "--" ends the options (replay -- -odd-name.gstrace): GLib leaves it among the arguments
     * when one after it starts with '-' */
    for (int i = 1; i < *argc; i++)
        if (strcmp((*argv)[i], "--") == 0) {
            memmove(&(*argv)[i], &(*argv)[i + 1], (size_t)(*argc - i) * sizeof **argv);
            (*argc)--;
            break;
        }
    check_no_empty_names(c);
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
        c->fmt = output_format_by_name(c);
    }
    if ((c->want & GS_CLI_CAPACITY) && c->capacity)
        device_sizes(c, "--capacity", c->capacity, &c->cap, false);
    if (c->device_total) device_sizes(c, "--device-total", c->device_total, &c->total, true);
    if (c->total > GS_MAX_DEVICE_BYTES)
        gs_cli_usage_error("--device-total: '%s' is more than gpusim simulates (16 TiB)",
                           c->device_total);
    if (c->calibration) {
        char *msg = NULL;
        if (!(c->cal = gs_calibration_load(c->calibration, &msg)))
            gs_cli_usage_error("--calibration: %s", msg);
    }
    if (c->jobs < 0) gs_cli_usage_error("--jobs: %d is not a number of threads", c->jobs);
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

/* ---- output ---- */

/* The input among inputs (NULL-terminated) and --calibration that is the file st describes, or
 * NULL. */
static const char *input_like(const gs_cli *c, const char *const *inputs, const GStatBuf *st)
{
    GStatBuf in;
    for (const char *const *i = inputs; i && *i; i++)
        if (g_stat(*i, &in) == 0 && in.st_dev == st->st_dev && in.st_ino == st->st_ino) return *i;
    if (c && c->calibration && g_stat(c->calibration, &in) == 0 && in.st_dev == st->st_dev &&
        in.st_ino == st->st_ino)
        return c->calibration;
    return NULL;
}

void gs_cli_refuse_input(const gs_cli *c, const char *const *inputs, const char *path,
                         const char *flag)
{
    GStatBuf st;
    if (!path || g_stat(path, &st) != 0) return; /* not there yet: nothing to overwrite */
    const char *in = input_like(c, inputs, &st);
    if (in)
        gs_cli_usage_error("%s %s: that is %s, an input of this run; not overwritten", flag, path,
                           in);
}

void gs_cli_check_stdout(void)
{
    errno = 0;
    if (fflush(stdout) != 0 || ferror(stdout)) {
        int e = errno;
        gs_cli_usage_error("standard output: cannot write: %s",
                           e ? g_strerror(e) : "write error");
    }
}

bool gs_cli_same_file(const char *a, const char *b)
{
    GStatBuf sa, sb;
    if (g_stat(a, &sa) == 0 && g_stat(b, &sb) == 0)
        return sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
    char *ca = g_canonicalize_filename(a, NULL), *cb = g_canonicalize_filename(b, NULL);
    bool same = strcmp(ca, cb) == 0;
    g_free(ca);
    g_free(cb);
    return same;
}

bool gs_cli_is_output(const gs_cli *c, const char *path)
{
    return c->output && strcmp(c->output, "-") != 0 && gs_cli_same_file(path, c->output);
}

/* 0 when path can be written as gs_cli_open_output writes it (in place when it exists and is not
 * a regular file, else whole through its directory), or the errno that says why not. plot_dir
 * (NULL: none) is --plot's directory, not made yet: path's directory may be it. */
static int output_error(const char *path, const char *plot_dir)
{
    GStatBuf st;
    if (g_lstat(path, &st) == 0 && !S_ISREG(st.st_mode)) return 0;
    char *dir = g_path_get_dirname(path);
    int e = access(dir, W_OK | X_OK) == 0 ? 0 : errno;
    if (e == ENOENT && plot_dir && gs_cli_same_file(dir, plot_dir)) e = 0;
    g_free(dir);
    return e;
}

int gs_cli_output_errno(const char *path)
{
    return output_error(path, NULL);
}

void gs_cli_check_output(const gs_cli *c, const char *const *inputs, const char *path,
                         const char *flag, const char *plot_dir)
{
    if (!path || strcmp(path, "-") == 0) return;
    gs_cli_refuse_input(c, inputs, path, flag);
    int e = output_error(path, plot_dir);
    if (e) gs_cli_usage_error("%s %s: cannot write: %s", flag, path, g_strerror(e));
}

void gs_cli_open_output(gs_cli_out *o, const gs_cli *c, const char *const *inputs, const char *path)
{
    memset(o, 0, sizeof *o);
    GStatBuf st;
    if (!path || strcmp(path, "-") == 0) {
        const char *in = fstat(STDOUT_FILENO, &st) == 0 && S_ISREG(st.st_mode)
                             ? input_like(c, inputs, &st) : NULL;
        if (in) gs_cli_usage_error("standard output is %s, an input of this run; not overwritten", in);
        o->f = stdout;
        return;
    }
    gs_cli_refuse_input(c, inputs, path, "--output");
    o->path = path;
    /* An existing path that is not a regular file (a symlink, a FIFO, /dev/null) is written in
     * place, never replaced. */
    if (g_lstat(path, &st) == 0 && !S_ISREG(st.st_mode)) {
        if (!(o->f = fopen(path, "w"))) gs_cli_usage_error("%s: cannot write: %s", path, g_strerror(errno));
        o->in_place = true;
        return;
    }
    int e = output_error(path, NULL); /* fail now, not after the run */
    if (e) gs_cli_usage_error("%s: cannot write: %s", path, g_strerror(e));
    if (!(o->f = open_memstream(&o->buf, &o->len)))
        gs_cli_usage_error("%s: cannot write: %s", path, g_strerror(errno));
}

void gs_cli_close_output(gs_cli_out *o)
{
    if (o->f == stdout) {
        gs_cli_check_stdout();
        return;
    }
    if (o->in_place) {
        int e = ferror(o->f) ? EIO : 0;
        if (fclose(o->f) != 0 && !e) e = errno;
        if (e) gs_cli_usage_error("%s: cannot write: %s", o->path, g_strerror(e));
        return;
    }
    if (fclose(o->f) != 0) gs_cli_usage_error("%s: cannot write: %s", o->path, g_strerror(errno));
    GError *e = NULL;
    if (!gs_write_whole(o->path, o->buf, o->len, &e)) gs_cli_usage_error("%s", e->message);
    free(o->buf);
    o->buf = NULL;
}

void gs_cli_warn_teardown(const char *what, const gs_result *r)
{
    if (r->teardown_failures)
        gs_cli_say("warning: %s: %zu device call%s failed while the allocator gave its memory "
                   "back at the end (left on the device)",
                   what, r->teardown_failures, r->teardown_failures == 1 ? "" : "s");
}

void gs_cli_progress_line(const char *label, size_t done, size_t total, const char *unit)
{
    char *p = gs_printable(label); /* once a second or less: the copy costs nothing */
    fprintf(stderr, "\r\033[K%s: %zu/%zu %s (%.0f%%)", p, done, total, unit,
            100.0 * (double)done / (double)(total ? total : 1));
    fflush(stderr);
    g_free(p);
}

void gs_cli_progress(size_t done, size_t total, void *ud)
{
    gs_cli_progress_line(ud, done, total, "events");
}

void gs_cli_warn_lenient(const char *msg, void *ud)
{
    gs_cli_say("warning: %s", msg);
}

void gs_cli_warn_policy(const gs_policy *p, bool has_limit)
{
    if (!p->ops->warnings) return;
    GPtrArray *w = g_ptr_array_new_with_free_func(g_free);
    p->ops->warnings(p->cfg, has_limit, w);
    for (guint i = 0; i < w->len; i++)
        gs_cli_say("warning: %s: %s", p->spec, (char *)w->pdata[i]);
    g_ptr_array_free(w, TRUE);
}

int gs_cli_oom_status(const gs_cli *c, int rc, const gs_result *rs, size_t n)
{
    if (rc != GS_EXIT_OK || !c->fail_on_oom) return rc;
    for (size_t i = 0; i < n; i++)
        if (rs[i].oom) return GS_EXIT_OOM;
    return rc;
}

/* A PyTorch memory snapshot (torch.cuda.memory._dump_snapshot): a pickle, maybe gzipped. A
 * regular file by what it holds (gs_trace_sniff: a trace named x.pickle.gz is a trace, a
 * snapshot named oom.snapshot.gz a snapshot); a pipe, or a file that is neither, by its name. */
bool gs_cli_is_snapshot(const char *path)
{
    gs_trace_sniffed s = gs_trace_sniff(path);
    if (s != GS_SNIFF_UNKNOWN) return s == GS_SNIFF_PICKLE;
    return g_str_has_suffix(path, ".pickle") || g_str_has_suffix(path, ".pickle.gz") ||
           g_str_has_suffix(path, ".pkl") || g_str_has_suffix(path, ".pkl.gz");
}

void gs_cli_check_replayable(const gs_trace *t, const char *path)
{
    uint32_t *ids = NULL;
    size_t nd = gs_trace_devices(t, &ids);
    g_free(ids);
    if (nd > 1 && t->clients->len > 1)
        gs_cli_usage_error("%s: a trace with several devices (%zu) and several clients (%u) is "
                           "not supported",
                           path, nd, t->clients->len);
}

gs_trace *gs_cli_load_trace(const gs_cli *c, const char *path)
{
    GError *err = NULL;
    if (gs_cli_is_snapshot(path))
        gs_cli_usage_error("%s is a PyTorch memory snapshot, not a gpusim trace: convert it with "
                           "'gpusim-convert %s -o TRACE.gstrace.gz' (traces/convert.py in the source "
                           "tree), or ask 'gpusim whatif %s', which converts it itself",
                           path, path, path);
    gs_trace *t = gs_trace_load(path, c->lenient ? GS_TRACE_LENIENT : 0, gs_cli_warn_lenient,
                                NULL, &err);
    if (!t) gs_cli_usage_error("%s", err->message);
    if (t->n_warnings)
        gs_cli_say("%s: %zu problems skipped (--lenient)", path, t->n_warnings);
    /* plain pytorch follows the release the trace names: say so when that is not the one it
     * emulates */
    const char *rec = gs_trace_get_meta(t, "pytorch_version");
    unsigned r = gs_pytorch_release_parse(rec), as = gs_pytorch_release_of_trace(rec);
    if (rec && !r)
        gs_cli_say("warning: %s: pytorch_version '%s' names no PyTorch 2.x release; plain "
                   "pytorch replays it as 2.%d",
                   path, rec, GS_PYTORCH_FIRST);
    else if (rec && r != as)
        gs_cli_say("warning: %s: recorded with PyTorch %s; gpusim emulates 2.%d to 2.%d, and "
                   "plain pytorch replays it as 2.%u%s",
                   path, rec, GS_PYTORCH_FIRST, GS_PYTORCH_LAST, as,
                   r < as ? " (the same allocator as 2.9 and 2.10)" : "");
    return t;
}

void gs_cli_check_reference(const gs_reference *ref, const gs_trace *t, const char *path)
{
    char *warning = NULL, *why = gs_reference_mismatch(ref, t, &warning);
    if (why) gs_cli_usage_error("--reference: %s (%s): not this trace's run", why, path);
    if (warning)
        gs_cli_say("warning: --reference: %s (%s): another recording? Its cap and addresses are "
                   "applied all the same",
                   warning, path);
    g_free(warning);
}

void gs_cli_check_release(const gs_policy *p, const gs_trace *t, const char *path)
{
    GError *err = NULL;
    gs_policy *q = gs_policy_at_release(p, gs_trace_get_meta(t, "pytorch_version"), &err);
    if (err) gs_cli_usage_error("%s: %s", path, err->message);
    gs_policy_free(q);
}

char *gs_cli_policies_help(void)
{
    GString *s = g_string_new(NULL);
    for (const gs_policy_ops *const *r = gs_policy_registry(); *r; r++) {
        /* names up to 11 characters ("preallocate") keep the summaries in one column */
        g_string_append_printf(s, "  %-11s %s\n", (*r)->name, (*r)->summary);
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
    const GPtrArray *notes = gs_plotter_notes(plotter);
    for (guint i = 0; i < notes->len; i++)
        gs_cli_say("warning: --plot: %s", (const char *)notes->pdata[i]);
    GError *err = NULL;
    size_t n = 0;
    if (gs_plotter_render(plotter, &n, &err)) return TRUE;
    gs_cli_say("%s", err->message);
    g_error_free(err);
    return FALSE;
}

uint64_t gs_cli_unknown_device_total(const gs_trace *t, uint64_t cap, const gs_reference *ref)
{
    uint64_t live = 0;
    if (!gs_trace_read_peak_live(t, &live)) return GS_MAX_DEVICE_BYTES;
    uint64_t need = MAX(cap, gs_reference_limit(ref, NULL));
    need = MAX(need, 2 * live);
    return need <= GS_DEFAULT_DEVICE_TOTAL ? GS_DEFAULT_DEVICE_TOTAL : GS_MAX_DEVICE_BYTES;
}

gs_clients_mode gs_cli_clients_mode(const char *cmd, const char *arg)
{
    gs_clients_mode mode = GS_CLIENTS_SEPARATE;
    if (arg && !gs_clients_mode_parse(arg, &mode))
        gs_cli_usage_error("%s: --clients: '%s' is not one of separate, shared, cooperative", cmd,
                           arg);
    return mode;
}

gs_plotter *gs_cli_plotter(const gs_cli *c, const char *const *inputs, const char *plot_dir)
{
    if (!plot_dir) return NULL;
    GError *err = NULL;
    gs_plotter *p = gs_plotter_new(plot_dir, &err);
    if (!p) gs_cli_usage_error("--plot: %s", err->message);
    for (const char *const *in = inputs; *in; in++) gs_plotter_keep(p, *in);
    gs_plotter_keep(p, c->calibration);
    return p;
}
