/* hooks.c - where gpusim's start-up hooks live, and how a child Python finds them: verify's
 * (torch/verify) and the capture's (torch/capture), each a folder with a sitecustomize.py that
 * Python imports before the user's unmodified program when the folder is first on PYTHONPATH.
 */
#include <unistd.h>

#include "cli.h"

char *gs_cli_hook_dir(const char *name, const char *env_var)
{
    const char *env = g_getenv(env_var);
    if (env && *env) return g_strdup(env);
    char *exe = g_file_read_link("/proc/self/exe", NULL);
    char *dir = exe ? g_path_get_dirname(exe) : NULL;
    char *installed = dir ? g_build_filename(dir, "..", "share", "gpusim", name, NULL) : NULL;
    g_free(exe);
    g_free(dir);
    char *probe = installed ? g_build_filename(installed, "sitecustomize.py", NULL) : NULL;
    bool there = probe && g_file_test(probe, G_FILE_TEST_IS_REGULAR);
    g_free(probe);
    if (there) return installed;
    g_free(installed);
    return g_build_filename(GS_SOURCE_ROOT, "torch", name, NULL);
}

char **gs_cli_env_python_path(char **env, const char *dir)
{
    const char *pp = g_environ_getenv(env, "PYTHONPATH");
    char *path = pp && *pp ? g_strdup_printf("%s:%s", dir, pp) : g_strdup(dir);
    env = g_environ_setenv(env, "PYTHONPATH", path, TRUE);
    g_free(path);
    return env;
}

void gs_cli_child_output_to_stderr(gpointer ud)
{
    gs_child_unblock_stops(ud);
    dup2(STDERR_FILENO, STDOUT_FILENO);
}
