/* capture.c - a program's requests to the caching allocator captured on the CPU, with none of a
 * GPU's memory: the user's unmodified Python program run once under the capture hook
 * (torch/capture/sitecustomize.py), which runs it on fake tensors and writes the requests as a
 * gpusim trace (docs/capture.md).
 */
#include <string.h>
#include <sys/wait.h>

#include <glib/gstdio.h>

#include "cli.h"

bool gs_capture_run(char *const *cmd, const gs_capture_opts *o, GError **err)
{
    char *hook = gs_cli_hook_dir("capture", "GPUSIM_CAPTURE_HOOK");
    char **env = gs_cli_env_python_path(g_get_environ(), hook);
    env = g_environ_setenv(env, "GPUSIM_CAPTURE_OUT", o->trace, TRUE);
    /* CUDA_VISIBLE_DEVICES is left as it is: PyTorch 2.11's fake CUDA tensors need a CUDA
     * device to exist (its device guard asks the driver; with none, view and copy operations
     * fail: docs/capture.md), though the capture puts none of the program's tensors in its
     * memory. */
    if (o->device_total) {
        char total[32];
        g_snprintf(total, sizeof total, "%" G_GUINT64_FORMAT, o->device_total);
        env = g_environ_setenv(env, "GPUSIM_CAPTURE_DEVICE_TOTAL", total, TRUE);
    }
    g_unlink(o->trace); /* a trace there afterwards is this run's */
    gint status = 0;
    GError *spawn_err = NULL;
    bool ok = g_spawn_sync(NULL, (char **)cmd, env,
                           G_SPAWN_SEARCH_PATH | G_SPAWN_CHILD_INHERITS_STDIN,
                           gs_cli_child_output_to_stderr, NULL, NULL, NULL, &status, &spawn_err);
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
    g_strfreev(env);
    g_free(hook);
    return ok;
}
