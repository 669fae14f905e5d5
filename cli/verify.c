/* verify.c - a verdict checked on the real GPU with the user's own program (gpusim verify,
 * whatif --verify): the program run once per setting under PyTorch's own allocator, unmodified,
 * through a start-up hook (torch/verify/sitecustomize.py) that applies the cap as a memory
 * fraction and reports the allocator's statistics at exit; each run beside its prediction.
 */
#include <errno.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <glib/gstdio.h>

#include "cli.h"

bool gs_verify_conf(const char *spec, char **conf)
{
    if (strcmp(spec, "pytorch") == 0) {
        *conf = g_strdup("");
        return true;
    }
    if (g_str_has_prefix(spec, "pytorch:")) {
        *conf = g_strdup(spec + strlen("pytorch:"));
        return true;
    }
    /* pytorch@2.12[:CONF]: the release names what the prediction emulates; the run is the
     * installed PyTorch's, under CONF */
    if (g_str_has_prefix(spec, "pytorch@")) {
        const char *colon = strchr(spec, ':');
        *conf = g_strdup(colon ? colon + 1 : "");
        return true;
    }
    if (strcmp(spec, "cuda-async") == 0) { /* PyTorch's own cudaMallocAsync backend */
        *conf = g_strdup("backend:cudaMallocAsync");
        return true;
    }
    return false;
}

/* The largest of a device statistic over the devices of the hook's report. */
static bool stat_of(const gs_json *devs, const char *key, uint64_t *out)
{
    bool any = false;
    *out = 0;
    for (size_t i = 0; devs && devs->type == GS_JSON_OBJECT && i < devs->n; i++) {
        uint64_t v;
        if (gs_json_uint(gs_json_get(devs->items[i], key), &v)) {
            *out = MAX(*out, v);
            any = true;
        }
    }
    return any;
}

static void read_report(const char *path, gs_verify_run *r)
{
    GError *err = NULL;
    gs_json *j = gs_json_load(path, &err);
    if (!j) {
        g_clear_error(&err);
        return;
    }
    const gs_json *v = gs_json_get(j, "format");
    if (!v || v->type != GS_JSON_STRING || strcmp(v->str, "gpusim-verify 1") != 0) {
        gs_json_free(j);
        return;
    }
    r->reported = true;
    if ((v = gs_json_get(j, "outcome")) && v->type == GS_JSON_STRING)
        g_strlcpy(r->outcome, v->str, sizeof r->outcome);
    if ((v = gs_json_get(j, "died_of")) && v->type == GS_JSON_STRING)
        r->died_of = g_strdup(v->str);
    if ((v = gs_json_get(j, "hook_error")) && v->type == GS_JSON_STRING)
        r->hook_error = g_strdup(v->str);
    gs_json_double(gs_json_get(j, "wall_s"), &r->program_s);
    gs_json_uint(gs_json_get(j, "limit_bytes"), &r->limit);
    const gs_json *devs = gs_json_get(j, "devices");
    r->has_stats = stat_of(devs, "reserved_bytes.all.peak", &r->peak_reserved);
    stat_of(devs, "allocated_bytes.all.peak", &r->peak_allocated);
    stat_of(devs, "num_alloc_retries", &r->retries);
    stat_of(devs, "num_ooms", &r->ooms);
    stat_of(devs, "num_device_alloc", &r->device_allocs);
    stat_of(devs, "num_device_free", &r->device_frees);
    gs_json_free(j);
}

bool gs_verify_one(const char *spec, uint64_t cap, char *const *cmd, gs_verify_run *r,
                   GError **err)
{
    memset(r, 0, sizeof *r);
    r->spec = g_strdup(spec);
    char *conf = NULL;
    if (!gs_verify_conf(spec, &conf)) {
        g_set_error(err, G_OPTION_ERROR, G_OPTION_ERROR_BAD_VALUE,
                    "%s: verify runs PyTorch's own allocator, under a PYTORCH_CUDA_ALLOC_CONF "
                    "(settings pytorch, pytorch:KEY:VALUE,..., cuda-async); this is gpusim's "
                    "model of another allocator",
                    spec);
        return false;
    }
    /* a Ctrl-C ends the program (the terminal sends it to both), and then gpusim, once its
     * folder is gone */
    sigset_t before;
    gs_hold_stops(&before);
    char *dir = g_dir_make_tmp("gpusim-verify-XXXXXX", err);
    if (!dir) {
        gs_release_stops(&before);
        g_free(conf);
        return false;
    }
    char *out = g_build_filename(dir, "run.json", NULL);
    char *hook = gs_cli_hook_dir("verify", "GPUSIM_VERIFY_HOOK");
    char **env = gs_cli_env_python_path(g_get_environ(), hook);
    env = g_environ_setenv(env, "PYTORCH_CUDA_ALLOC_CONF", conf, TRUE);
    env = g_environ_setenv(env, "GPUSIM_VERIFY_OUT", out, TRUE);
    if (cap) {
        char capb[32];
        g_snprintf(capb, sizeof capb, "%" G_GUINT64_FORMAT, cap);
        env = g_environ_setenv(env, "GPUSIM_VERIFY_CAP", capb, TRUE);
    } else {
        env = g_environ_unsetenv(env, "GPUSIM_VERIFY_CAP");
    }
    gint64 t0 = g_get_monotonic_time();
    gint status = 0;
    GError *spawn_err = NULL;
    /* argv, no shell: the user's command is run as given */
    bool ran = g_spawn_sync(NULL, (char **)cmd, env,
                            G_SPAWN_SEARCH_PATH | G_SPAWN_CHILD_INHERITS_STDIN,
                            gs_cli_child_output_to_stderr, NULL, NULL, NULL, &status, &spawn_err);
    r->wall_s = (double)(g_get_monotonic_time() - t0) / 1e6;
    bool ok = true;
    if (!ran) {
        g_propagate_prefixed_error(err, spawn_err, "cannot run %s: ", cmd[0]);
        ok = false;
    } else {
        r->exit_status = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
        r->signal = WIFSIGNALED(status) ? WTERMSIG(status) : 0;
        read_report(out, r);
        /* The program's own word first: it died of the OOM (its exit status is Python's 1 then),
         * or it failed otherwise: an exit status other than 0 (sys.exit(3), a script that is
         * not there), a signal, or no report at all. */
        if (!r->reported || r->signal || (r->exit_status != 0 && strcmp(r->outcome, "oom") != 0))
            g_strlcpy(r->outcome, "error", sizeof r->outcome);
    }
    g_unlink(out);
    char *tmp = g_strdup_printf("%s.tmp", out);
    g_unlink(tmp);
    g_free(tmp);
    g_rmdir(dir);
    gs_release_stops(&before);
    g_strfreev(env);
    g_free(hook);
    g_free(out);
    g_free(dir);
    g_free(conf);
    return ok;
}

void gs_verify_run_clear(gs_verify_run *r)
{
    g_free(r->spec);
    g_free(r->died_of);
    g_free(r->hook_error);
    memset(r, 0, sizeof *r);
}

/* ---- the prediction ---- */

void gs_verify_predict(const gs_result *r, gs_verify_prediction *p)
{
    memset(p, 0, sizeof *p);
    p->have = true;
    g_strlcpy(p->outcome, gs_result_outcome(r), sizeof p->outcome);
    p->peak_reserved = (uint64_t)r->stats.reserved_bytes[GS_STAT_ALL].peak;
    p->has_retries = strcmp(p->outcome, "ok") == 0;
    p->retries = r->stats.num_alloc_retries;
}

const char *gs_verify_judge(const gs_verify_run *r, const gs_verify_prediction *p)
{
    if (!p || !p->have) return "-";
    /* a run that measured nothing is no evidence either way: it agrees with nothing */
    if (r->hook_error) return "unmeasured: the cap was not set";
    bool real_oom = strcmp(r->outcome, "oom") == 0, real_ok = strcmp(r->outcome, "ok") == 0;
    if (!real_oom && !real_ok) return "differs (the run failed otherwise)";
    if (!r->has_stats) return "unmeasured: PyTorch used no CUDA memory";
    if (strcmp(p->outcome, "survived") == 0)
        return real_ok ? "agrees (as far as the trace goes)"
                       : "differs: died after the recorded death";
    if (strcmp(p->outcome, "oom") == 0) return real_oom ? "agrees" : "differs: completed";
    if (real_oom) return "differs: died";
    if (p->has_retries && r->has_stats && p->retries != r->retries) return "differs: retries";
    return "agrees";
}
