/* cmd_whatif.c - gpusim whatif INPUT: from a run's snapshot (or trace) to "which setting saves
 * it, how much memory would it need, and what does it cost", in one command (sim/whatif.c finds
 * the minimum capacities, report/whatif.c writes the verdict).
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <glib/gstdio.h>

#include "cli.h"
#include "whatif.h"

static const char whatif_description[] =
    "INPUT is a PyTorch memory snapshot (NAME.pickle, NAME.pkl, either .gz, from\n"
    "torch.cuda.memory._dump_snapshot; converted on the fly with traces/convert.py, which reads a\n"
    "NAME.json beside it when there is one) or a gpusim trace.\n"
    "\n"
    "The cap is the memory the recorded run's allocator could reserve: --capacity when given\n"
    "(to ask: what if the job had this much?), else the run's own (its sibling JSON's, or\n"
    "--reference's), else the recorded setting's per_process_memory_fraction of the device or\n"
    "the limit the snapshot shows it met (a full device), the lower, else none.\n"
    "\n"
    "Every candidate setting is replayed at the cap: the recorded setting, PyTorch's default,\n"
    "expandable_segments:True, max_split_size_mb 64/128/256/512, roundup_power2_divisions:4,\n"
    "garbage_collection_threshold:0.8, and each --policy. Then each one's minimum capacity, the\n"
    "least memory at which the whole trace completes with no OOM (but at the requests the\n"
    "recorded program caught failing and went past, its oom events, which may fail again), is\n"
    "found by bisection to 2 MiB,\n"
    "verified by replays at the answer and one step below, the 8 steps on either side, and\n"
    "grids of capacities further below and above: a setting that fails at one of those larger\n"
    "than its minimum is marked '!' (no mark: none of them failed, not that none can).\n"
    "\n"
    "The verdict lists the settings, most memory saved first: outcome at the cap, minimum\n"
    "capacity, headroom at the cap (negative: short by that much), retries, device frees\n"
    "(num_device_free: each cudaFree, and each free block of an expandable segment whose pages\n"
    "were unmapped, not each page) and modelled device time, against the default's; then a\n"
    "recommendation in words.\n"
    "\n"
    "--plot DIR draws, with gnuplot, NAME-whatif (each setting's minimum capacity as a bar against\n"
    "the cap, coloured by its outcome at the cap, its modelled device time beside it) and, when the\n"
    "recorded setting fails at the cap, NAME-oom-map-K-SPEC: the address map at its first OOM, the\n"
    "failed request beside the largest free block of its pool. PNG and SVG, beside their .gp\n"
    "and .dat.\n"
    "\n"
    "Examples:\n"
    "  gpusim whatif oom_snapshot.pickle.gz\n"
    "  gpusim whatif traces/data/resnet50.gstrace.gz --capacity 5.75GiB\n"
    "  gpusim whatif run.pickle --policy 'pytorch:expandable_segments:True,max_split_size_mb:256' \\\n"
    "      --format json -o verdict.json\n"
    "  gpusim whatif traces/data/batch-alternate.gstrace.gz --capacity 5.875GiB --plot plots/\n"
    "\n"
    "The converter is $GPUSIM_CONVERT, else gpusim-convert beside gpusim, else the source tree's\n"
    "traces/convert.py (run with python3). It may run $GPUSIM_CONVERT_TIMEOUT seconds (0: no\n"
    "limit), by default 5 minutes and 4 s per MiB of the snapshot (a million entries, 51 MiB of\n"
    "gzip, convert in about 3.3 s of CPU): past it, it is killed and whatif says so, as it says\n"
    "which signal ended a converter that crashed. Its memory: $GPUSIM_CONVERT_MAX_MEMORY\n"
    "(gpusim-convert --help).\n"
    "Exit status: 0 verdict written, 2 bad usage or bad input (a snapshot the converter refuses),\n"
    "3 --plot could not draw (gnuplot missing or failed; the verdict and the plots' data are\n"
    "written all the same).";

/* The converter's command: argv to spawn, with the script's path if it is a Python file. */
static GPtrArray *converter_argv(void)
{
    GPtrArray *argv = g_ptr_array_new_with_free_func(g_free);
    const char *env = g_getenv("GPUSIM_CONVERT");
    char *exe = g_file_read_link("/proc/self/exe", NULL);
    char *dir = exe ? g_path_get_dirname(exe) : NULL;
    char *beside = dir ? g_build_filename(dir, "gpusim-convert", NULL) : NULL;
    char *script = NULL;
    if (env && *env) script = g_strdup(env);
    else if (beside && g_file_test(beside, G_FILE_TEST_IS_EXECUTABLE)) script = g_strdup(beside);
    else script = g_build_filename(GS_SOURCE_ROOT, "traces", "convert.py", NULL);
    if (g_str_has_suffix(script, ".py")) g_ptr_array_add(argv, g_strdup("python3"));
    g_ptr_array_add(argv, script);
    g_free(exe);
    g_free(dir);
    g_free(beside);
    return argv;
}

/* The converter's time limit (docs/cli.md, "gpusim whatif"), in seconds, 0 for none:
 * $GPUSIM_CONVERT_TIMEOUT, else CONVERT_BASE_S and CONVERT_S_PER_MIB per MiB of the input. A
 * conversion costs about 0.5 s of CPU per MiB of gzip (BENCHMARKS.md, "Converting a large
 * snapshot"), so the default leaves room for a loaded machine, and still ends a converter that a
 * small input keeps busy for hours. */
#define CONVERT_BASE_S 300
#define CONVERT_S_PER_MIB 4
#define CONVERT_TIMEOUT_ENV "GPUSIM_CONVERT_TIMEOUT"
static unsigned convert_limit_s(const char *input)
{
    const char *env = g_getenv(CONVERT_TIMEOUT_ENV);
    if (env && *env) {
        char *end = NULL;
        errno = 0;
        guint64 v = g_ascii_strtoull(env, &end, 10);
        if (errno || end == env || *end || !g_ascii_isdigit(*env) || v > 10u * 365 * 86400)
            gs_cli_usage_error("$%s: '%s' is not a number of seconds (0: no limit)",
                               CONVERT_TIMEOUT_ENV, env);
        return (unsigned)v;
    }
    GStatBuf st;
    guint64 mib = g_stat(input, &st) == 0 ? (guint64)st.st_size >> 20 : 0;
    return (unsigned)MIN(CONVERT_BASE_S + CONVERT_S_PER_MIB * mib, (guint64)G_MAXINT / 1000);
}

static const char *signal_name(int sig)
{
    switch (sig) {
    case SIGSEGV: return "SIGSEGV";
    case SIGBUS: return "SIGBUS";
    case SIGABRT: return "SIGABRT";
    case SIGKILL: return "SIGKILL";
    case SIGTERM: return "SIGTERM";
    case SIGINT: return "SIGINT";
    case SIGHUP: return "SIGHUP";
    case SIGQUIT: return "SIGQUIT";
    case SIGPIPE: return "SIGPIPE";
    case SIGXCPU: return "SIGXCPU";
    case SIGXFSZ: return "SIGXFSZ";
    case SIGFPE: return "SIGFPE";
    case SIGILL: return "SIGILL";
    case SIGSYS: return "SIGSYS";
    case SIGTRAP: return "SIGTRAP";
    case SIGALRM: return "SIGALRM";
    default: return NULL;
    }
}

/* Runs the converter (argv) to its end or for limit_s seconds (0: no limit), its stderr into
 * err_text, its wait status into *status; past the limit it is killed (SIGKILL) and *timed_out
 * set. FALSE, with err set, when it cannot be started. g_spawn_sync waited without end: a
 * snapshot made to keep the converter busy (a few KiB can ask for hours) held whatif with it. */
static gboolean run_converter(char **argv, sigset_t *before, unsigned limit_s, GString *err_text,
                              gint *status, gboolean *timed_out, GError **err)
{
    GPid pid;
    gint fd = -1;
    /* the converter's C snapshot reader is this gpusim, unless the user named one: the same
     * build as the replays, whichever converter runs (docs/cli.md, "gpusim read-snapshot") */
    char **envp = g_get_environ();
    char *exe = g_file_read_link("/proc/self/exe", NULL);
    if (exe) envp = g_environ_setenv(envp, "GPUSIM_SNAPSHOT_READER", exe, FALSE);
    g_free(exe);
    /* the converter takes the signals whatif holds back (a Ctrl-C ends it at once) */
    gboolean started =
        g_spawn_async_with_pipes(NULL, argv, envp, G_SPAWN_SEARCH_PATH | G_SPAWN_DO_NOT_REAP_CHILD,
                                 gs_child_restore_mask, before, &pid, NULL, NULL, &fd, err);
    g_strfreev(envp);
    if (!started) return FALSE;
    (void)fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
    gint64 deadline = limit_s ? g_get_monotonic_time() + (gint64)limit_s * G_USEC_PER_SEC
                              : G_MAXINT64;
    gboolean open = TRUE, reaped = FALSE;
    *timed_out = FALSE;
    char buf[4096];
    while (!reaped) {
        gint64 now = g_get_monotonic_time();
        if (now >= deadline) {
            kill(pid, SIGKILL);
            while (waitpid(pid, status, 0) < 0 && errno == EINTR) {
            }
            *timed_out = TRUE;
            break;
        }
        /* a second at most between two looks at the child; 20 ms once its stderr is closed */
        int ms = (int)MIN((deadline - now + 999) / 1000, open ? 1000 : 20);
        if (open) {
            struct pollfd p = {.fd = fd, .events = POLLIN};
            if (poll(&p, 1, ms) > 0) {
                ssize_t n;
                while ((n = read(fd, buf, sizeof buf)) > 0) g_string_append_len(err_text, buf, n);
                if (n == 0 || (errno != EAGAIN && errno != EINTR)) open = FALSE;
            }
        } else {
            g_usleep((gulong)ms * 1000);
        }
        pid_t w = waitpid(pid, status, WNOHANG);
        reaped = w == pid || (w < 0 && errno == ECHILD);
    }
    ssize_t n; /* what it wrote last, before it ended */
    while (open && (n = read(fd, buf, sizeof buf)) > 0) g_string_append_len(err_text, buf, n);
    close(fd);
    g_spawn_close_pid(pid);
    return TRUE;
}

/* Why the converter failed, in one line (NULL: it did not): the limit it ran past, the signal
 * that ended it, else its own last line on stderr. */
static char *converter_failure(const char *input, const GString *err_text, gint status,
                               gboolean timed_out, unsigned limit_s)
{
    if (timed_out)
        return g_strdup_printf("whatif: %s: the converter exceeded %u s, and was stopped "
                               "($%s sets the limit in seconds, 0 for none)",
                               input, limit_s, CONVERT_TIMEOUT_ENV);
    if (WIFSIGNALED(status)) {
        const char *name = signal_name(WTERMSIG(status));
        return name ? g_strdup_printf("whatif: %s: the converter was killed by %s", input, name)
                    : g_strdup_printf("whatif: %s: the converter was killed by signal %d", input,
                                      WTERMSIG(status));
    }
    if (WIFEXITED(status) && WEXITSTATUS(status) == 0) return NULL;
    char *text = g_strchomp(g_strdup(err_text->str));
    const char *last = strrchr(text, '\n');
    char *why = *text ? g_strdup_printf("whatif: %s", last ? last + 1 : text)
                      : g_strdup_printf("whatif: %s: the converter failed (exit status %d) and "
                                        "said nothing",
                                        input, WEXITSTATUS(status));
    g_free(text);
    return why;
}

/* The converter's folder and everything in it (a converter stopped while it wrote leaves its
 * temporary file there). */
static void remove_dir(const char *dir)
{
    GDir *d = g_dir_open(dir, 0, NULL);
    const char *name;
    while (d && (name = g_dir_read_name(d))) {
        char *p = g_build_filename(dir, name, NULL);
        g_unlink(p);
        g_free(p);
    }
    if (d) g_dir_close(d);
    g_rmdir(dir);
}

/* Convert the snapshot input in a temporary directory and load what the converter wrote: the
 * trace into *t, the reference into *ref. The directory is removed before this returns and on
 * every failure, which is one line naming input (a refusal is the converter's own line). The
 * stop signals are held back meanwhile (the converter takes them itself): one that came is
 * acted on after the removal, so neither an interrupt nor a failure leaves the directory, and
 * no converter is left running behind a gpusim that was stopped. */
static void load_snapshot(const gs_cli *c, const char *input, gs_trace **t, gs_reference **ref)
{
    unsigned limit_s = convert_limit_s(input);
    sigset_t before;
    gs_hold_stops(&before);
    GError *err = NULL;
    char *dir = g_dir_make_tmp("gpusim-whatif-XXXXXX", &err);
    if (!dir) gs_cli_usage_error("whatif: %s", err->message);
    /* the binary form, read once and removed: no gzip (a quarter of the converter's time on a
     * snapshot of 10^6 entries, docs/speed.md), no text to render and parse back (a fifth of a
     * conversion); text where the binary form cannot carry the trace (private pools' events) */
    char *trace = g_build_filename(dir, "trace.gsbin", NULL);
    char *text = g_build_filename(dir, "trace.gstrace", NULL);
    char *refp = g_build_filename(dir, "reference.json", NULL);
    GPtrArray *argv = converter_argv();
    g_ptr_array_add(argv, g_strdup("-o"));
    g_ptr_array_add(argv, g_strdup(trace));
    g_ptr_array_add(argv, g_strdup("--binary-or-text"));
    g_ptr_array_add(argv, g_strdup("--reference"));
    g_ptr_array_add(argv, g_strdup(refp));
    /* the bound is planned here, once: stored, it would cost the converter a rewrite of the
     * trace read once */
    g_ptr_array_add(argv, g_strdup("--no-bound"));
    g_ptr_array_add(argv, g_strdup("--")); /* the input's name is never an option */
    g_ptr_array_add(argv, g_strdup(input));
    g_ptr_array_add(argv, NULL);
    char *why = NULL;
    GString *err_text = g_string_new(NULL);
    gint status = 0;
    gboolean timed_out = FALSE;
    /* argv, no shell: a file name is never a command */
    if (!run_converter((char **)argv->pdata, &before, limit_s, err_text, &status, &timed_out,
                       &err)) {
        why = g_strdup_printf("whatif: cannot run the converter %s: %s",
                              (char *)argv->pdata[strcmp(argv->pdata[0], "python3") == 0],
                              err->message);
    } else if ((why = converter_failure(input, err_text, status, timed_out, limit_s))) {
        /* (said below, once the folder is gone) */
    } else {
        if (err_text->len) fputs(err_text->str, stderr); /* its warnings, as they are */
        if (!g_file_test(trace, G_FILE_TEST_EXISTS)) {
            g_free(trace);
            trace = g_strdup(text);
        }
        if (!g_file_test(trace, G_FILE_TEST_EXISTS) || !g_file_test(refp, G_FILE_TEST_EXISTS)) {
            why = g_strdup_printf("whatif: %s: the converter wrote no %s", input,
                                  g_file_test(trace, G_FILE_TEST_EXISTS) ? "reference" : "trace");
        } else {
            *t = gs_trace_load(trace, c->lenient ? GS_TRACE_LENIENT : 0, gs_cli_warn_lenient,
                               NULL, &err);
            if (*t && !(*ref = gs_reference_load(refp, &err))) {
                gs_trace_free(*t);
                *t = NULL;
            }
            if (!*t)
                why = g_strdup_printf("whatif: %s: what the converter wrote: %s", input, err->message);
        }
    }
    remove_dir(dir);
    /* a signal held back ends the run here, as it would have (a Ctrl-C also stops the
     * converter, which is then no failure to report) */
    gs_release_stops(&before);
    if (why) gs_cli_usage_error("%s", why);
    if ((*t)->n_warnings) gs_cli_say("%s: %zu problems skipped (--lenient)", input, (*t)->n_warnings);
    g_string_free(err_text, TRUE);
    g_free(trace);
    g_free(text);
    g_free(refp);
    g_free(dir);
    g_ptr_array_free(argv, TRUE);
}

/* A trace of several clients on which no candidate completes with each on a cache of its own:
 * the arrangements under which the recorded setting completes with no cap ("shared,
 * cooperative"), for the verdict to say; NULL when some candidate completes, the trace has one
 * client, or none does. Two more replays at most. */
static char *other_arrangements(const GPtrArray *rows, const gs_trace *t, const gs_whatif_opts *o)
{
    if (t->clients->len < 2) return NULL;
    const gs_whatif_row *rec = NULL;
    for (guint i = 0; i < rows->len; i++) {
        const gs_whatif_row *r = rows->pdata[i];
        if (r->search.found) return NULL;
        if (r->recorded) rec = r;
    }
    if (!rec) return NULL;
    GString *s = g_string_new(NULL);
    for (gs_clients_mode m = GS_CLIENTS_SHARED; m < GS_CLIENTS_COUNT; m++) {
        gs_replay_opts ro = {.device_total = o->device_total, .cal = o->cal, .clients = m};
        gs_result r;
        if (gs_replay_run(t, rec->pol, &ro, &r, NULL) && !r.oom && r.error == GS_OK)
            g_string_append_printf(s, "%s%s", s->len ? " or " : "", gs_clients_mode_name(m));
        gs_result_clear(&r);
    }
    return s->len ? g_string_free(s, FALSE) : (g_string_free(s, TRUE), NULL);
}

/* The candidates (the recorded setting the reference's, else the trace's), each checked against
 * the release the trace was recorded with, or exit 2. */
static GPtrArray *candidates(const gs_trace *t, const gs_reference *ref, char **policies,
                             const char *input)
{
    const char *conf = ref && ref->allocator_conf ? ref->allocator_conf
                                                  : gs_trace_get_meta(t, "allocator_conf");
    GError *err = NULL;
    GPtrArray *rows = gs_whatif_candidates(conf, (const char *const *)policies, &err);
    if (!rows) gs_cli_usage_error("whatif: %s: %s", input, err->message);
    for (guint i = 0; i < rows->len; i++)
        gs_cli_check_release(((gs_whatif_row *)rows->pdata[i])->pol, t, input);
    return rows;
}

/* The verdict where -o says, with the arrangements that complete where none of the separate
 * caches does (other_arrangements). */
static void write_verdict(const gs_cli *c, const char *const *inputs, const gs_trace *t,
                          const GPtrArray *rows, const gs_whatif_opts *o, gs_whatif_cap *wc)
{
    gs_cli_out out;
    gs_cli_open_output(&out, c, inputs, c->output);
    char *arrangements = o->clients == GS_CLIENTS_SEPARATE ? other_arrangements(rows, t, o) : NULL;
    wc->clients_complete = arrangements;
    gs_whatif_report(out.f, c->fmt, inputs[0], t, rows, wc);
    gs_cli_close_output(&out);
    wc->clients_complete = NULL;
    g_free(arrangements);
}

static void whatif_progress(size_t done, size_t total, void *ud)
{
    gs_cli_progress_line(ud, done, total, "settings");
}

/* --plot: the survival chart, and the address map at the recorded setting's first OOM at the
 * cap (one more replay of it, recorded). Returns GS_EXIT_PLOT when gnuplot could not draw. */
static int plot_whatif(gs_plotter *pl, const char *input, const gs_trace *t, const GPtrArray *rows,
                       const gs_whatif_opts *o, const char *cap_words, const char *assumption)
{
    const gs_whatif_row *dflt = gs_whatif_default(rows), *rec = NULL;
    gs_plot_whatif_row *pr = g_new0(gs_plot_whatif_row, rows->len);
    gs_trace_caveats cv;
    gs_trace_get_caveats(t, &cv);
    bool lower_bound = cv.dies; /* minima of a dying trace: to get that far */
    size_t rec_k = 0;
    for (guint i = 0; i < rows->len; i++) {
        const gs_whatif_row *r = rows->pdata[i];
        double us = gs_devcalls_total_us(&r->at_cap.calls);
        pr[i] = (gs_plot_whatif_row){
            .policy = r->pol->spec,
            .recorded = r->recorded,
            .outcome = gs_whatif_outcome(r),
            .found = r->search.found,
            .lower_bound = lower_bound,
            .min_capacity = r->search.min_capacity,
            .fails_above = r->search.fails_above,
            .device_us = us,
            .vs_default = gs_whatif_vs_default(r, dflt), /* the table's, '-' where it has none */
        };
        if (r->recorded) {
            rec = r;
            rec_k = i + 1;
        }
    }
    GError *err = NULL;
    if (!gs_plot_whatif(pl, input, o->capacity, cap_words, o->device_total, pr, rows->len,
                        assumption, &err))
        gs_cli_usage_error("--plot: %s", err->message);
    g_free(pr);
    if (rec && rec->at_cap.oom) {
        gs_plot_series *s = gs_plot_series_new(t->n);
        gs_replay_opts ro = {.capacity = o->capacity, .device_total = o->device_total, .cal = o->cal,
                             .observe = gs_plot_observe, .observe_ud = s};
        gs_result r;
        (void)gs_replay_run(t, rec->pol, &ro, &r, NULL);
        gs_plot_run run;
        gs_plot_run_from_result(&run, &r, s);
        if (!gs_plot_oom_map(pl, input, rec_k, &run, &err))
            gs_cli_usage_error("--plot: %s", err->message);
        gs_plot_run_clear(&run); /* and the series */
        gs_result_clear(&r);
    }
    return gs_cli_render_plots(pl) ? GS_EXIT_OK : GS_EXIT_PLOT;
}

/* INPUT: a snapshot, converted (its reference with it), or a trace and its --reference. */
static void load_input(const gs_cli *c, const char *input, const char *reference, gs_trace **t,
                       gs_reference **ref)
{
    GError *err = NULL;
    if (gs_cli_is_snapshot(input)) {
        if (reference) gs_cli_usage_error("--reference: a snapshot carries its own (and its NAME.json)");
        if (!g_file_test(input, G_FILE_TEST_EXISTS))
            gs_cli_usage_error("%s: no such file", input);
        if (!g_file_test(input, G_FILE_TEST_IS_REGULAR)) /* (the converter reads it in passes) */
            gs_cli_usage_error("%s: a snapshot to convert must be a file, not a pipe: save it "
                               "first, or convert it with gpusim-convert", input);
        load_snapshot(c, input, t, ref);
    } else {
        *t = gs_cli_load_trace(c, input);
        if (reference && !(*ref = gs_reference_load(reference, &err)))
            gs_cli_usage_error("%s", err->message);
        if (*ref) gs_cli_check_reference(*ref, *t, input);
    }
    gs_cli_check_replayable(*t, input);
}

/* A run of several devices whose limits differ (a memory fraction per device): whatif replays
 * every device at one cap, so its verdict would be drawn for all of them at device 0's; refused
 * unless --capacity says which one cap to ask at (gpusim replay -r replays each device at its
 * own). */
static void refuse_device_limits(const char *input, const gs_reference *ref)
{
    if (!ref || ref->n_devices < 2) return;
    uint64_t first = gs_reference_limit(ref->devices[0], NULL);
    for (size_t k = 1; k < ref->n_devices; k++) {
        if (gs_reference_limit(ref->devices[k], NULL) == first) continue;
        GString *each = g_string_new(NULL);
        for (size_t j = 0; j < ref->n_devices; j++) {
            uint64_t lim = gs_reference_limit(ref->devices[j], NULL);
            char *sz = lim ? gs_format_capacity(lim, " ") : g_strdup("none");
            g_string_append_printf(each, "%s%u: %s", j ? ", " : "", ref->device_ids[j], sz);
            g_free(sz);
        }
        gs_cli_usage_error("whatif: %s: the run's devices had different limits (device %s); "
                           "whatif replays every device at one cap: give it with --capacity "
                           "(gpusim replay -r replays each device at its own)",
                           input, each->str);
    }
}

/* The cap, and where it comes from (docs/cli.md, "The limit a run met"): --capacity; the run's
 * cap (its NAME.json); the limit it met where it died, from the snapshot (the device was full);
 * else none (0). A run that died with none of these is refused: its verdict would be drawn at a
 * limit it never had. */
static uint64_t whatif_cap(const gs_cli *c, const char *input, const gs_trace *t,
                           const gs_reference *ref, uint64_t total, bool total_known,
                           const GPtrArray *rows, const char **cap_words)
{
    const char *limit_source = NULL;
    uint64_t limit = gs_reference_limit(ref, &limit_source);
    if (!c->capacity) refuse_device_limits(input, ref);
    /* the limit a snapshot shows is the dying device's: the others' are not known (it was
     * applied to every device, and a device that never failed died in the replay) */
    if (!c->capacity && ref && ref->n_devices > 1 && ref->limit_bytes && limit == ref->limit_bytes)
        gs_cli_usage_error("whatif: %s: the snapshot shows the limit one device met (%s), not the "
                           "other devices': whatif replays every device at one cap: give it with "
                           "--capacity (gpusim replay -r replays each device at its own)",
                           input, limit_source);
    /* the recorded setting's own limit (per_process_memory_fraction x the device), where the
     * run's cap is not known otherwise: its limit met at a death, if lower, is the other's */
    uint64_t own = 0;
    const gs_whatif_row *rec = gs_whatif_recorded(rows);
    if (rec && !(ref && ref->cap_bytes)) own = gs_replay_own_limit(t, rec->pol, total);
    if (own && (!limit || own < limit)) {
        limit = own;
        limit_source = "the recorded setting's per_process_memory_fraction";
        /* a fraction of a device nothing names is a fraction of a guess (it was said as the
         * run's cap: 40 GiB for 0.5 of an H100's 79.18 GiB, 30 GiB off on an H200; 8 TiB where
         * the guess was the largest device): refused, as a death with no limit is */
        if (!total_known && !c->capacity)
            gs_cli_usage_error("whatif: %s: the recorded setting's per_process_memory_fraction "
                               "is a fraction of the device's memory, which nothing here says: "
                               "give --device-total (the GPU's memory) or --capacity",
                               input);
    }
    uint64_t cap = c->capacity ? c->cap : limit;
    *cap_words = c->capacity ? "cap given" : limit ? limit_source : NULL;
    gs_trace_caveats cv;
    gs_trace_get_caveats(t, &cv);
    char *lo = ref && ref->limit_max ? gs_format_size(ref->limit_min) : NULL;
    char *hi = lo ? gs_format_size(ref->limit_max) : NULL;
    if (!cap && !cv.fatal_oom && lo)
        gs_cli_say("warning: %s: the run caught OOMs under a limit the snapshot does not tell (a "
                   "memory fraction?), between %s and %s: the verdict is drawn with no cap; give "
                   "--capacity for one at the run's limit", input, lo, hi);
    if (!cap && cv.fatal_oom) {
        char *range = lo ? g_strdup_printf(" (the snapshot puts it between %s and %s)", lo, hi)
                         : NULL;
        g_free(lo); /* (before the exit: nothing the leak checker would call lost) */
        g_free(hi);
        gs_cli_usage_error("whatif: %s: the recorded run died of an OOM at event %zu, but nothing "
                           "says what limit it met: no NAME.json beside it with its cap, and the "
                           "device had room for the request then (a memory fraction, or a limit "
                           "of its own?); give it with --capacity%s",
                           input, cv.fatal_oom_event, range ? range : "");
    }
    g_free(lo);
    g_free(hi);
    if (cap && cap > total) { /* the device limits every replay: headroom against more is none */
        char *cw = gs_format_capacity(cap, " "), *tw = gs_format_capacity(total, " ");
        gs_cli_say("warning: %s %s is more than the device's %s: the cap is the device's memory",
                   c->capacity ? "--capacity" : "the recorded cap", cw, tw);
        g_free(cw);
        g_free(tw);
        cap = total;
        *cap_words = "device memory";
    }
    return cap;
}

/* --assume-repeat N: t continued by its period (p; NULL when none was found, no_period saying
 * why), or a refusal in one line. t is freed; *assumption names the continuation. */
static gs_trace *assume_repeat(const char *input, gs_trace *t, int n, const gs_trace_period *p,
                               const char *no_period, const char **assumption)
{
    if (n < 1 || n > 100000)
        gs_cli_usage_error("--assume-repeat: %d is not a number of repetitions from 1 to 100000", n);
    gs_trace_caveats cv;
    gs_trace_get_caveats(t, &cv);
    if (!cv.fatal_oom)
        gs_cli_usage_error("--assume-repeat: %s does not end where its run died: there is nothing "
                           "to see past", input);
    if (!p) gs_cli_usage_error("--assume-repeat: %s: %s", input, no_period);
    const char *why = NULL;
    gs_trace *t2 = gs_trace_assume_repeat(t, p, (unsigned)n, &why);
    if (!t2) gs_cli_usage_error("--assume-repeat: %s: %s", input, why);
    gs_trace_free(t);
    *assumption = gs_trace_get_meta(t2, "assumed_repeat");
    return t2;
}

/* --verify: the recorded setting and the two best others that get through at the cap (in the
 * verdict's order), run for real, each beside its row; the table on stdout after the verdict. */
static int verify_top(const gs_cli *c, const GPtrArray *rows, uint64_t cap, char *const *cmd)
{
    const char *specs[3];
    gs_verify_prediction preds[3];
    size_t n = 0;
    for (int pass = 0; pass < 3 && n < 3; pass++)
        for (guint i = 0; i < rows->len && n < 3; i++) {
            const gs_whatif_row *r = rows->pdata[i];
            char *conf = NULL;
            bool torch = gs_verify_conf(r->pol->spec, &conf);
            g_free(conf);
            const char *oc = gs_whatif_outcome(r);
            bool through = strcmp(oc, "ok") == 0 || strcmp(oc, "survived") == 0;
            /* pass 0: the recorded setting; 1: the best that get through; 2: the rest */
            bool take = torch && (pass == 0 ? r->recorded : !r->recorded && (pass == 2 || through));
            for (size_t k = 0; take && k < n; k++) take = strcmp(specs[k], r->pol->spec) != 0;
            if (!take) continue;
            specs[n] = r->pol->spec;
            gs_verify_predict(&r->at_cap, &preds[n++]);
        }
    fputc('\n', stdout);
    gs_cli table = *c; /* the verdict may be JSON in a file: the runs are a table on stdout */
    table.fmt = GS_FMT_TABLE;
    return gs_verify_settings(&table, stdout, cap, "the verdict's", specs, preds, n, cmd);
}

static const char full_replays_help[] =
    "Replay every capacity a search tries from the trace's first event, the caps that cannot "
    "bind and those another replay answers for too, not from checkpoints of the uncapped "
    "replay: the same answers at more cost (for comparison)";

/* --check-usage (hidden; gpusim predict's: its whatif's options checked before the program is
 * captured): the options parsed, and the settings too (a candidate list with no recorded
 * setting); INPUT is not read. */
static int checked_usage(gs_cli *c, char **policies)
{
    GError *err = NULL;
    GPtrArray *rows = gs_whatif_candidates(NULL, (const char *const *)policies, &err);
    if (!rows) gs_cli_usage_error("whatif: %s", err->message);
    gs_whatif_rows_free(rows);
    g_strfreev(policies);
    gs_cli_clear(c);
    return GS_EXIT_OK;
}

/* One INPUT, and a program after it only with --verify, which needs one. */
static void check_args(int argc, bool verify)
{
    if (argc > 2 && !verify)
        gs_cli_usage_error("whatif: one INPUT at a time (got %d; a program to run after -- needs "
                           "--verify)",
                           argc - 1);
    if (verify && argc < 3)
        gs_cli_usage_error(
            "whatif: --verify runs your program: gpusim whatif INPUT --verify -- CMD [ARGS...]");
}

int gs_cmd_whatif(int argc, char **argv)
{
    char **policies = NULL, *reference = NULL, *plot_dir = NULL, *clients = NULL;
    gboolean verify = FALSE, full_replays = FALSE, check_usage = FALSE;
    gint assume = G_MININT; /* not given */
    const GOptionEntry own[] = {
        {"policy", 'p', 0, G_OPTION_ARG_STRING_ARRAY, &policies,
         "A setting to try besides the standard ones; repeat for several", "SPEC"},
        {"reference", 'r', 0, G_OPTION_ARG_FILENAME, &reference,
         "For a gpusim trace: the reference file of its run (traces/convert.py --reference), "
         "for the recorded setting and cap",
         "REF.json"},
        {"plot", 0, 0, G_OPTION_ARG_FILENAME, &plot_dir,
         "Also draw the verdict into DIR with gnuplot (the minimum capacity per setting; the "
         "address map at the recorded setting's first OOM)",
         "DIR"},
        {"assume-repeat", 0, 0, G_OPTION_ARG_INT, &assume,
         "For a run that died: assume the program goes on as it went, its last complete period "
         "of requests (found in the trace) repeated N more times past the death; the verdict is "
         "labelled with it",
         "N"},
        {"clients", 0, 0, G_OPTION_ARG_STRING, &clients,
         "A trace of several clients: separate (an allocator each, the default), shared (one "
         "for all) or cooperative (an allocator each; on OOM the others release their cache)",
         "MODE"},
        {"full-replays", 0, 0, G_OPTION_ARG_NONE, &full_replays, full_replays_help, NULL},
        {"check-usage", 0, G_OPTION_FLAG_HIDDEN, G_OPTION_ARG_NONE, &check_usage, NULL, NULL},
        {"verify", 0, 0, G_OPTION_ARG_NONE, &verify,
         "Then run the program given after -- on the real GPU under the recorded setting and the "
         "two best others, at the cap, beside the verdict (gpusim verify)",
         NULL},
        {NULL, 0, 0, 0, NULL, NULL, NULL},
    };
    static const char *const formats[] = {"table", "csv", "json", NULL};
    gs_cli c;
    gs_cli_init(&c, "whatif", "INPUT - which allocator setting saves this run, at what cost",
                "Replay a run's trace under the standard allocator settings at the cap it had, find "
                "each one's\nminimum capacity, and say which setting saves the run and what it costs.",
                whatif_description,
                GS_CLI_CAPACITY | GS_CLI_DEVICE_TOTAL | GS_CLI_FORMAT | GS_CLI_OUTPUT |
                    GS_CLI_CALIBRATION | GS_CLI_QUIET | GS_CLI_JOBS,
                own, formats);
    gs_cli_parse(&c, &argc, &argv, 1, "INPUT");
    check_args(argc, verify);
    const char *input = argv[1];
    gs_clients_mode mode = gs_cli_clients_mode("whatif", clients);
    const char *const inputs[] = {input, reference, NULL};
    gs_cli_check_output(&c, inputs, c.output, "--output", plot_dir);
    if (check_usage) return checked_usage(&c, policies);
    GError *perr = NULL;
    /* a directory that cannot be made fails now, before the replays */
    gs_plotter *plotter = gs_cli_plotter(&c, inputs, plot_dir);
    gs_trace *t = NULL;
    gs_reference *ref = NULL;
    load_input(&c, input, reference, &t, &ref);

    GPtrArray *rows = candidates(t, ref, policies, input);
    /* the inputs are read and the settings known: the plot directory is made now, so -o may
     * name a file in it */
    if (plotter && !gs_plotter_make(plotter, &perr)) gs_cli_usage_error("--plot: %s", perr->message);
    /* The device's memory when something says it; else none is guessed: the replays run on a
     * simulated device as large as gpusim simulates, and no search goes above what a setting
     * reserves with no cap (sim/whatif.h). */
    uint64_t known_total = c.total ? c.total
                           : t->device_total ? t->device_total
                           : ref && ref->device_total ? ref->device_total
                                                      : 0;
    uint64_t total = known_total ? known_total
                                 : gs_cli_unknown_device_total(t, c.capacity ? c.cap : 0, ref);
    const char *cap_words = NULL, *no_period = NULL;
    uint64_t cap = whatif_cap(&c, input, t, ref, total, known_total != 0, rows, &cap_words);
    /* A dying trace: its period, for the verdict's next steps and --assume-repeat. */
    gs_trace_caveats cv;
    gs_trace_get_caveats(t, &cv);
    gs_trace_period period = {0};
    bool has_period = cv.fatal_oom && gs_trace_find_period(t, &period, &no_period);
    const char *assumption = NULL;
    if (assume != G_MININT)
        t = assume_repeat(input, t, assume, has_period ? &period : NULL, no_period, &assumption);
    gs_whatif_opts o = {
        .capacity = cap,
        .device_total = total,
        /* the recorded run at its own limit replays with its own segment addresses */
        .ref = !c.capacity && !assumption && ref && ref->seg_addrs->len ? ref : NULL,
        .cal = c.cal,
        .clients = mode,
        .jobs = (unsigned)c.jobs,
        .full_replays = full_replays,
        .progress = c.progress ? whatif_progress : NULL,
        .progress_ud = (void *)input,
    };
    gs_whatif_run(rows, t, &o);
    if (c.progress) fputs("\r\033[K", stderr);
    gs_whatif_sort(rows);
    gs_whatif_cap wc = {.capacity = cap,
                        .device_total = known_total,
                        .source = cap_words,
                        .assumption = assumption,
                        .period = has_period ? period.period : 0,
                        .no_period = cv.fatal_oom && !has_period ? no_period : NULL};
    write_verdict(&c, inputs, t, rows, &o, &wc);
    int rc = GS_EXIT_OK;
    if (verify) rc = verify_top(&c, rows, cap, argv + 2);
    if (plotter) {
        gs_plotter_keep_report(plotter, c.output); /* the verdict just written is no plot */
        int prc = plot_whatif(plotter, input, t, rows, &o, cap_words ? cap_words : "no cap",
                              assumption);
        if (rc == GS_EXIT_OK) rc = prc;
        gs_plotter_free(plotter);
    }

    g_free(clients);
    gs_whatif_rows_free(rows);
    gs_reference_free(ref);
    gs_trace_free(t);
    g_strfreev(policies);
    g_free(reference);
    g_free(plot_dir);
    gs_cli_clear(&c);
    return rc;
}
