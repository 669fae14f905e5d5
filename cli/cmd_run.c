/* cmd_run.c - gpusim run [-p SETTING] [--capacity C] [--trace FILE] [--stats FILE] -- CMD ARGS:
 * the user's unmodified Python program on gpusim's allocator (libgpusim_torch.so) on real
 * memory, for PyTorch and CuPy alike, through a start-up hook (torch/run/sitecustomize.py).
 */
#include <string.h>
#include <sys/wait.h>

#include <glib/gstdio.h>

#include "cli.h"

static const char run_description[] =
    "Runs CMD (a Python program, run as given: no shell) with gpusim's allocator in place of\n"
    "PyTorch's and CuPy's own, on the real GPU: a start-up hook gpusim puts on the child's\n"
    "PYTHONPATH (torch/run/sitecustomize.py) waits for the program's own `import torch` or\n"
    "`import cupy` and, before the program's next line, makes libgpusim_torch.so the allocator\n"
    "(PyTorch's CUDAPluggableAllocator, torch.cuda.empty_cache() wired to gpusim's; CuPy's\n"
    "cupy.cuda.set_allocator). The program is not edited; an OOM is raised as PyTorch raises its\n"
    "own (torch.OutOfMemoryError, from libgpusim_torch_oom.so beside the library). A\n"
    "sitecustomize of your own still runs.\n"
    "\n"
    "SETTING is any gpusim policy (gpusim replay --help lists them): pytorch:KEY:VALUE,..., stitch,\n"
    "cupy, ... The library is $GPUSIM_TORCH_LIB, else the one beside gpusim (a build tree), else\n"
    "the installed one. gpusim exits with the program's exit status (128 + N for signal N).\n"
    "\n"
    "Two libraries in one process (PyTorch and CuPy) are two clients of gpusim's allocator,\n"
    "arranged as --clients says: separate (default: each its own heap, as their own pools),\n"
    "shared (one heap serves both, as RMM's hooks do) or cooperative (each its own; one the\n"
    "device refuses asks the other to release its cache first). -p NAME=SETTING gives one\n"
    "client its own setting (-p cupy=cupy: CuPy's pool); the trace names each request's client,\n"
    "and gpusim replay --clients replays it to the same statistics.\n"
    "\n"
    "Examples:\n"
    "  gpusim run -p stitch --stats stats.json -- python3 train.py --steps 50\n"
    "  gpusim run -p pytorch:expandable_segments:True --capacity 20GiB --trace run.gstrace -- \\\n"
    "      python3 train.py\n"
    "  gpusim replay run.gstrace -p pytorch -p stitch      (the recorded requests, replayed)\n"
    "  gpusim run --clients cooperative -p pytorch -p cupy=cupy --trace two.gstrace -- \\\n"
    "      python3 etl_then_train.py\n"
    "  gpusim replay two.gstrace --clients separate,shared,cooperative -p pytorch -p cupy=cupy\n"
    "\n"
    "--trace and --stats are checked before the program starts (a directory that is not there\n"
    "fails at once, not after the run). The library writes them when the program exits; one\n"
    "that was not written then (the program made no request through gpusim's allocator: it\n"
    "imported neither torch nor cupy; or the writing failed, said above) is said on stderr.\n"
    "\n"
    "Exit status: the program's; 1 when it exited 0 but a --trace or --stats file was not\n"
    "written; 2 for bad usage or a program that cannot be started.";

/* A file the library writes as the program exits (--trace, --stats), as it was before the run:
 * after it, a regular file that is not there, or is the one it was, was not written (the
 * library writes a new file in its place; one that is not a regular file, written in place,
 * is not checked). */
typedef struct {
    const char *flag, *path;
    bool existed, regular;
    GStatBuf st;
} run_output;

static void note_output(run_output *o, const char *flag, const char *path)
{
    o->flag = flag;
    o->path = path && *path ? path : NULL;
    o->existed = o->path && g_stat(o->path, &o->st) == 0;
    o->regular = !o->existed || S_ISREG(o->st.st_mode);
}

static bool output_missing(const run_output *o)
{
    if (!o->path || !o->regular) return false;
    GStatBuf now;
    if (g_stat(o->path, &now) != 0) return true;
    return o->existed && now.st_ino == o->st.st_ino && now.st_dev == o->st.st_dev &&
           now.st_mtime == o->st.st_mtime && now.st_size == o->st.st_size;
}

/* libgpusim_torch.so: $GPUSIM_TORCH_LIB, beside gpusim (build/), else the installed one
 * (GS_LIBDIR, relative to the prefix: BINDIR/../LIBDIR). NULL when none is there. */
static char *torch_lib(void)
{
    const char *env = g_getenv("GPUSIM_TORCH_LIB");
    if (env && *env) return g_strdup(env);
    char *exe = g_file_read_link("/proc/self/exe", NULL);
    char *dir = exe ? g_path_get_dirname(exe) : NULL;
    g_free(exe);
    if (!dir) return NULL;
    char *tries[] = {g_build_filename(dir, "libgpusim_torch.so", NULL),
                     g_build_filename(dir, "..", GS_LIBDIR, "libgpusim_torch.so", NULL)};
    char *found = NULL;
    for (size_t i = 0; i < G_N_ELEMENTS(tries); i++) {
        if (!found && g_file_test(tries[i], G_FILE_TEST_IS_REGULAR)) found = tries[i];
        else g_free(tries[i]);
    }
    g_free(dir);
    return found;
}

/* The -p arguments into env as the library reads them: SETTING as GPUSIM_POLICY (one at most;
 * default pytorch), NAME=SETTING as GPUSIM_POLICY_<NAME>. Each setting is read here as the
 * library will read it, so a typo stops gpusim before the program starts, not after. */
static char **run_policies(char **env, char **policies)
{
    const char *plain = NULL;
    for (char **p = policies; p && *p; p++) {
        const char *eq = strchr(*p, '='), *colon = strchr(*p, ':');
        bool named = eq && (!colon || eq < colon);
        const char *spec = named ? eq + 1 : *p;
        GError *err = NULL;
        gs_policy *pol = gs_policy_new(spec, &err);
        /* and at the release the library emulates (no trace says one): a key of a newer one
         * is refused now, not at the program's first request */
        gs_policy *rel = pol ? gs_policy_at_release(pol, NULL, &err) : NULL;
        if (err) gs_cli_usage_error("run: %s", err->message);
        gs_policy_free(rel);
        gs_policy_free(pol);
        if (!named) {
            if (plain)
                gs_cli_usage_error("run: -p %s: a setting was given already (%s); "
                                   "NAME=SETTING gives a client its own",
                                   *p, plain);
            plain = *p;
            continue;
        }
        char *name = g_strndup(*p, (gsize)(eq - *p));
        for (const char *c = name; *c || c == name; c++)
            if (!*c || !(g_ascii_islower(*c) || g_ascii_isdigit(*c) || *c == '_'))
                gs_cli_usage_error("run: -p %s: a client name is a-z, 0-9 and _ (torch, cupy)", *p);
        char *up = g_ascii_strup(name, -1), *var = g_strconcat("GPUSIM_POLICY_", up, NULL);
        env = g_environ_setenv(env, var, spec, TRUE);
        g_free(var);
        g_free(up);
        g_free(name);
    }
    return g_environ_setenv(env, "GPUSIM_POLICY", plain ? plain : "pytorch", TRUE);
}

int gs_cmd_run(int argc, char **argv)
{
    char **policies = NULL, *trace = NULL, *stats = NULL, *backend = NULL, *clients = NULL;
    char *device_total = NULL;
    const GOptionEntry own[] = {
        {"policy", 'p', 0, G_OPTION_ARG_STRING_ARRAY, &policies,
         "gpusim's allocator setting (default: pytorch); NAME=SETTING: client NAME's own "
         "(torch, cupy)",
         "SETTING"},
        {"clients", 0, 0, G_OPTION_ARG_STRING, &clients,
         "How PyTorch and CuPy share the device: separate (default), shared, cooperative", "MODE"},
        {"device-total", 0, 0, G_OPTION_ARG_STRING, &device_total,
         "--backend sim: the simulated device's memory (default 80GiB)", "SIZE"},
        {"trace", 0, 0, G_OPTION_ARG_FILENAME, &trace,
         "Record the program's requests as a gpusim trace in FILE (.gz: compressed), written at "
         "exit",
         "FILE"},
        {"stats", 0, 0, G_OPTION_ARG_FILENAME, &stats,
         "Write the allocator's statistics to FILE at exit (gpusim replay's JSON)", "FILE"},
        {"backend", 0, 0, G_OPTION_ARG_STRING, &backend,
         "cuda (default): the real GPU; sim: the simulated device (no GPU; its pointers are no "
         "memory: for tests)",
         "NAME"},
        {NULL, 0, 0, 0, NULL, NULL, NULL},
    };
    gs_cli c;
    gs_cli_init(&c, "run", "-- CMD [ARGS...] - run a program on gpusim's allocator",
                "Run your own Python program, unmodified, with gpusim's allocator in place of "
                "PyTorch's\nand CuPy's, on the real GPU.",
                run_description, GS_CLI_CAPACITY, own, NULL);
    gs_cli_parse(&c, &argc, &argv, 1, "-- CMD");
    int first = 1;
    if (first < argc && strcmp(argv[first], "--") == 0) first++;
    if (first >= argc)
        gs_cli_usage_error("run: no program to run: gpusim run [OPTIONS] -- CMD [ARGS...]");
    GError *err = NULL;
    if (backend && strcmp(backend, "cuda") != 0 && strcmp(backend, "sim") != 0)
        gs_cli_usage_error("run: --backend: '%s': expected cuda or sim", backend);
    (void)gs_cli_clients_mode("run", clients); /* checked now; the library reads the name */
    uint64_t total = 0;
    if (device_total && (!gs_parse_size(device_total, &total, &err) || !total))
        gs_cli_usage_error("run: --device-total: %s", err ? err->message : "must not be 0");
    if (device_total && (!backend || strcmp(backend, "sim") != 0))
        gs_cli_usage_error("run: --device-total is the simulated device's (--backend sim); the "
                           "GPU's is its own");
    const char *const no_inputs[] = {NULL};
    gs_cli_check_output(&c, no_inputs, trace, "--trace", NULL);
    gs_cli_check_output(&c, no_inputs, stats, "--stats", NULL);
    char *lib = torch_lib();
    if (!lib)
        gs_cli_usage_error("run: libgpusim_torch.so not found beside gpusim or where it is "
                           "installed; name it with GPUSIM_TORCH_LIB");
    char *hook = gs_cli_hook_dir("run", "GPUSIM_RUN_HOOK");
    char **env = gs_cli_env_python_path(g_get_environ(), hook);
    env = g_environ_setenv(env, "GPUSIM_RUN_LIB", lib, TRUE);
    env = run_policies(env, policies);
    char capb[32] = "";
    if (c.capacity) g_snprintf(capb, sizeof capb, "%" G_GUINT64_FORMAT, c.cap);
    const char *const vars[][2] = {{"GPUSIM_CAPACITY", capb},
                                   {"GPUSIM_TRACE", trace},
                                   {"GPUSIM_STATS", stats},
                                   {"GPUSIM_BACKEND", backend},
                                   {"GPUSIM_CLIENTS", clients},
                                   {"GPUSIM_DEVICE_TOTAL", device_total}};
    for (size_t i = 0; i < G_N_ELEMENTS(vars); i++)
        env = vars[i][1] && *vars[i][1] ? g_environ_setenv(env, vars[i][0], vars[i][1], TRUE)
                                        : g_environ_unsetenv(env, vars[i][0]);
    run_output outs[2];
    note_output(&outs[0], "--trace", trace);
    note_output(&outs[1], "--stats", stats);
    gint status = 0;
    bool ran = g_spawn_sync(NULL, argv + first, env,
                            G_SPAWN_SEARCH_PATH | G_SPAWN_CHILD_INHERITS_STDIN, NULL, NULL, NULL,
                            NULL, &status, &err);
    g_strfreev(env);
    g_free(hook);
    g_free(lib);
    g_strfreev(policies);
    g_free(clients);
    g_free(device_total);
    g_free(backend);
    gs_cli_clear(&c);
    if (!ran) gs_cli_usage_error("run: cannot run %s: %s", argv[first], err->message);
    int rc = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    for (size_t i = 0; i < G_N_ELEMENTS(outs); i++) {
        if (!output_missing(&outs[i])) continue;
        gs_cli_say("run: %s %s was not written: the program made no request through gpusim's "
                   "allocator (it imported neither torch nor cupy?), or writing it failed (above)",
                   outs[i].flag, outs[i].path);
        if (rc == 0) rc = 1;
    }
    g_free(trace);
    g_free(stats);
    return rc;
}
