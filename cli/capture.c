/* capture.c - a program's requests to the caching allocator captured on the CPU, with none of a
 * GPU's memory: the user's unmodified Python program run once under the capture hook
 * (torch/capture/sitecustomize.py), which runs it on fake tensors and writes the requests as a
 * gpusim trace (docs/capture.md).
 */
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <glib/gstdio.h>

#include "cli.h"

/* The operator a capture was probing on the device when it died (probe.py writes its name to
 * the mark file before each probe and empties it after), or NULL. Only a name in PyTorch's
 * operator alphabet is taken: it goes back into the environment and onto the terminal. */
static char *probing_when_killed(const char *mark)
{
    char *s = NULL;
    if (!g_file_get_contents(mark, &s, NULL, NULL)) return NULL;
    g_strstrip(s);
    size_t n = strlen(s);
    bool ok = n > 0 && n <= 200;
    for (size_t i = 0; ok && i < n; i++) ok = g_ascii_isalnum(s[i]) || s[i] == '_' || s[i] == '.';
    if (!ok) g_clear_pointer(&s, g_free);
    return s;
}

bool gs_capture_run(char *const *cmd, const gs_capture_opts *o, GError **err)
{
    char *hook = gs_cli_hook_dir("capture", "GPUSIM_CAPTURE_HOOK");
    char **env = gs_cli_env_python_path(g_get_environ(), hook);
    env = g_environ_setenv(env, "GPUSIM_CAPTURE_OUT", o->trace, TRUE);
    /* CUDA_VISIBLE_DEVICES is left as it is: PyTorch 2.11's fake CUDA tensors need a CUDA
     * device to exist (its device guard asks the driver; with none, view and copy operations
     * fail: docs/capture.md), and the probes run one operation at a time on it. */
    if (o->device_total) {
        char total[32];
        g_snprintf(total, sizeof total, "%" G_GUINT64_FORMAT, o->device_total);
        env = g_environ_setenv(env, "GPUSIM_CAPTURE_DEVICE_TOTAL", total, TRUE);
    }
    char *mark = NULL;
    sigset_t before; /* the mark file is removed before a Ctrl-C acts (the program takes it) */
    gs_hold_stops(&before);
    if (o->no_probe) {
        env = g_environ_setenv(env, "GPUSIM_CAPTURE_PROBE", "0", TRUE);
    } else {
        gint fd = g_file_open_tmp("gpusim-probe-XXXXXX", &mark, NULL);
        if (fd >= 0) {
            close(fd);
            env = g_environ_setenv(env, "GPUSIM_CAPTURE_PROBE_MARK", mark, TRUE);
        }
    }
    /* the user's own list of operators not to probe is kept, and added to */
    GString *skip = g_string_new(g_environ_getenv(env, "GPUSIM_CAPTURE_PROBE_SKIP"));
    gint status = 0;
    GError *spawn_err = NULL;
    bool ok;
    for (int rerun = 0;; rerun++) {
        g_unlink(o->trace); /* a trace there afterwards is this run's */
        ok = g_spawn_sync(NULL, (char **)cmd, env,
                          G_SPAWN_SEARCH_PATH | G_SPAWN_CHILD_INHERITS_STDIN,
                          gs_cli_child_output_to_stderr, NULL, NULL, NULL, &status, &spawn_err);
        /* a probe that took the process down (a kernel that read an argument the probe made
         * up, on the host): the program is captured again with that operator's meta function
         * alone, and the trace's header says so (probe.py) */
        char *op = ok && status != 0 && mark && rerun < GS_CAPTURE_PROBE_RERUNS
                       ? probing_when_killed(mark)
                       : NULL;
        if (!op) break;
        if (!o->quiet)
            gs_cli_say("capture: %s died (%s %d) while %s was probed on the device: capturing "
                       "again without probing it",
                       cmd[0], WIFSIGNALED(status) ? "signal" : "exit status",
                       WIFSIGNALED(status) ? WTERMSIG(status) : WEXITSTATUS(status), op);
        if (skip->len) g_string_append_c(skip, ',');
        g_string_append(skip, op);
        env = g_environ_setenv(env, "GPUSIM_CAPTURE_PROBE_SKIP", skip->str, TRUE);
        g_free(op);
    }
    if (!ok) {
        g_propagate_prefixed_error(err, spawn_err, "cannot run %s: ", cmd[0]);
    } else if (WIFSIGNALED(status)) {
        g_set_error(err, G_FILE_ERROR, G_FILE_ERROR_FAILED,
                    "%s was killed by signal %d (%s) under the capture: no prediction", cmd[0],
                    WTERMSIG(status), g_strsignal(WTERMSIG(status)));
        ok = false;
    } else if (WEXITSTATUS(status) != 0) {
        g_set_error(err, G_FILE_ERROR, G_FILE_ERROR_FAILED,
                    "%s failed under the capture (exit status %d; its output is above): no "
                    "prediction from a run that did not finish",
                    cmd[0], WEXITSTATUS(status));
        ok = false;
    } else if (!g_file_test(o->trace, G_FILE_TEST_IS_REGULAR)) {
        g_set_error(err, G_FILE_ERROR, G_FILE_ERROR_FAILED,
                    "%s wrote no capture: is it a Python program that imports torch (run as "
                    "python3 PROGRAM, so that Python loads the hook)?",
                    cmd[0]);
        ok = false;
    }
    if (mark) g_unlink(mark);
    gs_release_stops(&before);
    g_free(mark);
    g_string_free(skip, TRUE);
    g_strfreev(env);
    g_free(hook);
    return ok;
}
