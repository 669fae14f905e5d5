/* cmd_predict.c - gpusim predict [WHATIF OPTIONS] [--trace FILE] -- CMD ARGS: the program's
 * requests captured on the CPU (capture.c), then whatif's verdict on them, run as a child
 * gpusim so that the capture's temporary trace is removed whatever whatif says of its options.
 */
#include <string.h>
#include <sys/wait.h>

#include <glib/gstdio.h>

#include "cli.h"

static const char predict_help[] =
    "usage: gpusim predict [WHATIF OPTIONS] [--trace FILE] -- CMD [ARGS...]\n"
    "\n"
    "Which allocator setting lets a PyTorch program fit, before it has run on its GPU: CMD (a\n"
    "Python program, run as given: no shell) runs once on the CPU under gpusim's capture, with\n"
    "fake CUDA tensors that have the real sizes and no memory, and the requests PyTorch's caching\n"
    "allocator would have been asked are replayed by gpusim whatif under each setting. The\n"
    "program is not edited: a start-up hook (torch/capture/sitecustomize.py) is put first on its\n"
    "PYTHONPATH. No tensor of the program is put in a GPU's memory, but PyTorch (2.11) needs a\n"
    "CUDA device to be there for its fake CUDA tensors, and each distinct operation (operator,\n"
    "shapes, dtypes) is run once on it, on made-up inputs, to learn what its real kernel asks\n"
    "the allocator for beside its outputs (cuDNN's workspaces, a reduction's buffers, a fused\n"
    "kernel's intermediates): one operation's memory at a time, never the program's\n"
    "($GPUSIM_CAPTURE_PROBE_BUDGET bytes at most; default half the device's free memory). A\n"
    "probe that kills the program makes a capture again without probing that operator. Its\n"
    "output goes to standard error; the verdict is gpusim whatif's, marked as a prediction from\n"
    "a capture.\n"
    "\n"
    "What a capture cannot know is said in the verdict (and in the trace's header): values read\n"
    "back from the GPU (.item(), a tensor in an if) are 0 in the capture, so a program that\n"
    "steers by them takes the path of 0; a shape that depends on values is taken at its\n"
    "largest; with --no-probe, cuDNN's workspaces and other kernels' own requests are not in it.\n"
    "docs/capture.md says how the capture works and how close it came to real runs\n"
    "(BENCHMARKS.md, 'Predictions from a CPU capture').\n"
    "\n"
    "Options:\n"
    "  --trace FILE     keep the captured trace in FILE (.gz: compressed), for gpusim whatif,\n"
    "                   replay or verify --prediction later (written once the capture\n"
    "                   succeeded: a failed one leaves FILE as it was)\n"
    "  --capacity C     the cap to judge at (the device's memory, or a memory fraction's bytes)\n"
    "  --device-total B the device's memory, as the program is told it (default 80 GiB)\n"
    "  --no-probe       run no operation on the device: none of its memory is used, and what\n"
    "                   kernels ask for beside their outputs is missing from the prediction\n"
    "  --verify         then run CMD on the real GPU under the top settings (gpusim verify)\n"
    "  and every other option of gpusim whatif (gpusim whatif --help): -p, --format, -o, --plot\n"
    "\n"
    "Examples:\n"
    "  gpusim predict --capacity 40GiB -- python3 train.py --batch 32\n"
    "  gpusim predict --trace train.gstrace --format json -o verdict.json -- python3 train.py\n"
    "  gpusim verify --prediction verdict.json --capacity 40GiB -- python3 train.py   (on the GPU)\n"
    "\n"
    "Exit status: whatif's (0 verdict written), 2 bad usage, or a program that failed under the\n"
    "capture (its exit status and output are shown).\n";

/* The value of an option at argv[*i] ("--name V" or "--name=V"), advancing *i past it; NULL
 * when argv[*i] is not that option. */
static const char *option_value(char **argv, int end, int *i, const char *name)
{
    size_t n = strlen(name);
    if (strncmp(argv[*i], name, n) != 0) return NULL;
    if (argv[*i][n] == '=') return argv[*i] + n + 1;
    if (argv[*i][n] != '\0') return NULL;
    if (*i + 1 >= end) gs_cli_usage_error("predict: %s needs a value", name);
    return argv[++*i];
}

/* gpusim whatif on the trace, with the options given, as a child: its exit status. */
static int run_whatif(GPtrArray *args)
{
    char *self = g_file_read_link("/proc/self/exe", NULL);
    if (!self) gs_cli_usage_error("predict: cannot find gpusim itself (/proc/self/exe)");
    g_ptr_array_insert(args, 0, self);
    g_ptr_array_insert(args, 1, (char *)"whatif");
    g_ptr_array_add(args, NULL);
    gint status = 0;
    GError *err = NULL;
    fflush(stdout);
    bool ran = g_spawn_sync(NULL, (char **)args->pdata, NULL, G_SPAWN_CHILD_INHERITS_STDIN,
                            gs_child_unblock_stops, NULL, NULL, NULL, &status, &err);
    g_free(self);
    if (!ran) { /* said, and returned: the caller has a folder to remove */
        gs_cli_say("predict: cannot run gpusim whatif: %s", err->message);
        g_error_free(err);
        return GS_EXIT_USAGE;
    }
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

/* The capture's trace as --trace's FILE, whole (gs_write_whole). */
static bool copy_trace(const char *from, const char *to, GError **err)
{
    char *buf = NULL;
    gsize len = 0;
    bool ok = g_file_get_contents(from, &buf, &len, err) && gs_write_whole(to, buf, len, err);
    g_free(buf);
    return ok;
}

/* whatif's options (all but predict's own), checked by whatif itself before the program is
 * captured, which can take minutes and the GPU: a bad one is its one line and exit 2 now. The
 * file --trace names must be writable too. */
static int check_whatif_usage(const GPtrArray *args, const char *keep, bool verify)
{
    int e = keep ? gs_cli_output_errno(keep) : 0;
    if (e) gs_cli_usage_error("predict: --trace %s: cannot write: %s", keep, g_strerror(e));
    /* whatif's report into the trace kept would replace it (whatif, given the capture, cannot
     * tell them one file before the trace is there) */
    for (guint i = 0; keep && i < args->len; i++) {
        const char *a = args->pdata[i], *v = NULL;
        if ((strcmp(a, "-o") == 0 || strcmp(a, "--output") == 0) && i + 1 < args->len)
            v = args->pdata[i + 1];
        else if (g_str_has_prefix(a, "--output=")) v = a + strlen("--output=");
        char *ck = v ? g_canonicalize_filename(keep, NULL) : NULL;
        char *cv = v ? g_canonicalize_filename(v, NULL) : NULL;
        bool same = v && strcmp(ck, cv) == 0;
        g_free(ck);
        g_free(cv);
        if (same) gs_cli_usage_error("predict: --trace %s and -o %s are one file", keep, v);
    }
    GPtrArray *check = g_ptr_array_new();
    for (guint i = 0; i < args->len; i++) g_ptr_array_add(check, args->pdata[i]);
    g_ptr_array_add(check, (char *)"--check-usage");
    g_ptr_array_add(check, (char *)"/dev/null"); /* (an INPUT: not read) */
    if (verify) {                                /* (and a program for --verify, not run) */
        g_ptr_array_add(check, (char *)"--");
        g_ptr_array_add(check, (char *)"true");
    }
    int rc = run_whatif(check);
    g_ptr_array_free(check, TRUE);
    return rc;
}

int gs_cmd_predict(int argc, char **argv)
{
    int dash = 1;
    while (dash < argc && strcmp(argv[dash], "--") != 0) dash++;
    for (int i = 1; i < dash; i++)
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            fputs(predict_help, stdout);
            return GS_EXIT_OK;
        }
    if (dash >= argc - 1)
        gs_cli_usage_error("predict: give the program after --: gpusim predict [OPTIONS] -- "
                           "python3 train.py [ARGS]");
    GPtrArray *args = g_ptr_array_new();
    gs_capture_opts o = {0};
    const char *keep = NULL, *v;
    bool verify = false, quiet = false;
    for (int i = 1; i < dash; i++) {
        if ((v = option_value(argv, dash, &i, "--trace"))) {
            keep = v;
            continue;
        }
        if ((v = option_value(argv, dash, &i, "--device-total"))) {
            GError *err = NULL;
            if (!gs_parse_size(v, &o.device_total, &err))
                gs_cli_usage_error("predict: --device-total: %s", err->message);
            g_ptr_array_add(args, (char *)"--device-total");
            g_ptr_array_add(args, (char *)v);
            continue;
        }
        if (strcmp(argv[i], "--no-probe") == 0) {
            o.no_probe = true;
            continue;
        }
        verify |= strcmp(argv[i], "--verify") == 0;
        quiet |= strcmp(argv[i], "--quiet") == 0 || strcmp(argv[i], "-q") == 0;
        g_ptr_array_add(args, argv[i]);
    }
    int checked = check_whatif_usage(args, keep, verify);
    if (checked != GS_EXIT_OK) {
        g_ptr_array_free(args, TRUE);
        return checked;
    }
    GError *err = NULL;
    /* The capture goes to a folder of gpusim's own, removed before a Ctrl-C acts (the program
     * and whatif take it themselves); --trace's FILE is written from it only once the capture
     * succeeded, by the rule of every output (docs/cli.md): a failed capture leaves it as it
     * was, and a FILE that is no regular file (a FIFO, a device) is written in place. */
    sigset_t before;
    gs_hold_stops(&before);
    char *dir = g_dir_make_tmp("gpusim-predict-XXXXXX", &err);
    if (!dir) gs_cli_usage_error("predict: %s", err->message);
    char *trace = g_build_filename(dir,
                                   keep && g_str_has_suffix(keep, ".gz") ? "capture.gstrace.gz"
                                                                         : "capture.gstrace",
                                   NULL);
    o.trace = trace;
    o.quiet = quiet;
    if (!quiet)
        gs_cli_say("predict: capturing %s on the CPU (%s)...", argv[dash + 1],
                   o.no_probe ? "no GPU memory used"
                              : "each distinct operation probed once on the device");
    bool ok = gs_capture_run(&argv[dash + 1], &o, &err) && (!keep || copy_trace(trace, keep, &err));
    int rc = GS_EXIT_USAGE;
    /* A Ctrl-C the program caught (it exited 0 all the same), or a stop signal sent to gpusim
     * alone, is held: no verdict is drawn after it (with --verify, runs on the GPU); it acts
     * once the folder is gone. */
    if (ok && gs_stop_pending()) ok = false, err = NULL;
    GStatBuf st;
    if (ok) {
        /* the verdict names the trace kept, where it is a file (whatif reads it again) */
        g_ptr_array_add(args, keep && g_stat(keep, &st) == 0 && S_ISREG(st.st_mode) ? (char *)keep
                                                                                    : trace);
        if (verify) /* whatif --verify runs the program after its -- on the real GPU */
            for (int i = dash; i < argc; i++) g_ptr_array_add(args, argv[i]);
        rc = run_whatif(args);
    }
    g_unlink(trace);
    g_rmdir(dir);
    gs_release_stops(&before);
    g_free(trace);
    g_free(dir);
    g_ptr_array_free(args, TRUE);
    if (!ok && err) gs_cli_usage_error("predict: %s", err->message);
    return rc;
}
