/* cmd_validate.c - gpusim validate: each trace under each policy on the simulator and on a real
 * device, compared check by check (sim/validate.c judges, and writes the comparison).
 */
#include <string.h>

#include "cli.h"
#include "validate.h"

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

/* The device checked against: the GPU, or a second simulated device standing in for it. */
static gs_backend *checked_device(const char *backend, const gs_trace *t0, gs_calibration **stand_in)
{
    const char *name = backend ? backend : "cuda";
    if (strcmp(name, "sim") != 0 && strcmp(name, "cuda") != 0)
        gs_cli_usage_error("--backend: '%s' is not one of cuda, sim", name);
    gs_backend_config cfg = {0};
    if (strcmp(name, "sim") == 0) {
        *stand_in = gs_calibration_builtin();
        cfg.sim.total_bytes = t0->device_total; /* 0: the default */
        cfg.sim.cal = *stand_in;
    }
    gs_backend *be = NULL;
    char *msg = NULL;
    if (gs_backend_open(name, &cfg, &be, &msg) != GS_OK)
        gs_cli_fail(GS_EXIT_DEVICE, "validate: %s", msg);
    return be;
}

/* --save-calibration: a latency table from every timed call. */
static void save_calibration(const char *path, GArray *samples, const gs_calibration *cal)
{
    char *why = NULL;
    gs_calibration *base = cal ? NULL : gs_calibration_builtin();
    if (!gs_calibration_save(path, (gs_call_sample *)(void *)samples->data, samples->len,
                             cal ? cal : base, &why))
        gs_cli_usage_error("--save-calibration: %s", why);
    gs_calibration_free(base);
}

int gs_cmd_validate(int argc, char **argv)
{
    char **policies = NULL, *save_cal = NULL, *backend = NULL;
    int runs = 5;
    gboolean touch = FALSE;
    const GOptionEntry own[] = {
        {"policy", 'p', 0, G_OPTION_ARG_STRING_ARRAY, &policies,
         "Policy to validate; repeat for several (default: pytorch)", "SPEC"},
        {"runs", 'n', 0, G_OPTION_ARG_INT, &runs, "Timed runs on the GPU after the warm-up (default 5)",
         "N"},
        {"touch", 0, 0, G_OPTION_ARG_NONE, &touch,
         "Write each allocation once on the GPU, as a program would", NULL},
        {"backend", 'b', 0, G_OPTION_ARG_STRING, &backend,
         "The device checked against: cuda (default; device 0 of CUDA_VISIBLE_DEVICES), or sim: "
         "a second simulated device stands in for it (to try gpusim validate itself without a GPU)",
         "cuda|sim"},
        {"save-calibration", 0, 0, G_OPTION_ARG_FILENAME, &save_cal,
         "Write a latency table made from every timed call of the real runs (medians per call "
         "and size class; loads with --calibration)", "FILE"},
        {NULL, 0, 0, 0, NULL, NULL, NULL},
    };
    static const char *const formats[] = {"table", "json", NULL};
    gs_cli c;
    gs_cli_init(&c, "validate", "TRACE... - the simulator's prediction beside the real GPU",
                "Replay traces on the simulated device and on the real GPU and compare them, check "
                "by check.",
                validate_description,
                GS_CLI_CAPACITY | GS_CLI_FORMAT | GS_CLI_OUTPUT | GS_CLI_CALIBRATION | GS_CLI_QUIET,
                own, formats);
    gs_cli_parse(&c, &argc, &argv, 1, "TRACE");
    if (runs < 1 || runs > 1000) gs_cli_usage_error("--runs: %d is not between 1 and 1000", runs);
    GError *err = NULL;
    GPtrArray *pols = g_ptr_array_new_with_free_func((GDestroyNotify)gs_policy_free);
    for (char **p = policies; p && *p; p++) {
        gs_policy *pol = gs_policy_new(*p, &err);
        if (!pol) gs_cli_usage_error("--policy: %s", err->message);
        gs_cli_warn_policy(pol, c.cap > 0);
        g_ptr_array_add(pols, pol);
    }
    if (!pols->len) g_ptr_array_add(pols, gs_policy_new("pytorch", NULL));
    GPtrArray *traces = g_ptr_array_new_with_free_func((GDestroyNotify)gs_trace_free);
    for (int a = 1; a < argc; a++) {
        g_ptr_array_add(traces, gs_cli_load_trace(&c, argv[a]));
        gs_cli_check_replayable(traces->pdata[a - 1], argv[a]);
    }
    gs_calibration *stand_in_cal = NULL;
    gs_backend *dev = checked_device(backend, traces->pdata[0], &stand_in_cal);

    GArray *samples = save_cal ? gs_call_samples_new() : NULL;
    /* --save-calibration is written after every run: checked now, not after them */
    gs_cli_check_output(&c, (const char *const *)argv + 1, save_cal, "--save-calibration", NULL);
    if (save_cal && gs_cli_is_output(&c, save_cal))
        gs_cli_usage_error("--save-calibration and -o name one file (%s): the report would be lost",
                           save_cal);
    gs_cli_out output;
    gs_cli_open_output(&output, &c, (const char *const *)argv + 1, c.output);
    FILE *out = output.f;
    int rc = GS_EXIT_OK;
    bool first = true;
    if (c.fmt == GS_FMT_JSON) fputs("[\n", out);
    for (int a = 1; a < argc; a++) {
        const gs_trace *t = traces->pdata[a - 1];
        for (guint i = 0; i < pols->len; i++) {
            gs_validate_opts o = {
                .capacity = c.cap,
                .device_total = t->device_total,
                .cal = c.cal,
                .backend = dev,
                .runs = (unsigned)runs,
                .touch = touch,
                .samples = samples,
            };
            gs_validation v;
            if (!gs_validate_run(t, pols->pdata[i], &o, &v, &err))
                gs_cli_usage_error("%s", err->message);
            gs_validation_report(out, c.fmt, argv[a], t, &v, first);
            char *what = g_strdup_printf("%s [%s]", argv[a], v.sim.policy);
            gs_cli_warn_teardown(what, &v.sim);
            g_free(what);
            what = g_strdup_printf("%s [%s, on the device checked]", argv[a], v.real.policy);
            gs_cli_warn_teardown(what, &v.real);
            g_free(what);
            first = false;
            if (v.real.error != GS_OK) rc = GS_EXIT_DEVICE;
            else if (!gs_validation_ok(t, &v) && rc == GS_EXIT_OK) rc = GS_EXIT_DIFFERS;
            gs_validation_clear(&v);
        }
    }
    if (c.fmt == GS_FMT_JSON) fputs("\n]\n", out);
    gs_cli_close_output(&output);
    if (samples) {
        save_calibration(save_cal, samples, c.cal);
        g_array_free(samples, TRUE);
    }
    gs_backend_destroy(dev);
    gs_calibration_free(stand_in_cal);
    g_ptr_array_free(traces, TRUE);
    g_ptr_array_free(pols, TRUE);
    g_free(backend);
    g_strfreev(policies);
    g_free(save_cal);
    gs_cli_clear(&c);
    return rc;
}
