/* cli.h - what the commands of the gpusim program share: the exit codes, the options several
 * commands take (one table, one help text each, parsed and checked in one place), writing the
 * output whole, progress, and drawing plots. Each command is its own file (cmd_*.c); main.c is
 * the table of commands.
 */
#ifndef GS_CLI_H
#define GS_CLI_H

#include <glib.h>
#include <stdbool.h>
#include <stdio.h>

#include "plot.h"
#include "report.h"

G_BEGIN_DECLS

/* Exit status, the same for every command (each --help says which apply). An OOM is a result,
 * not a failure. */
enum {
    GS_EXIT_OK = 0,
    GS_EXIT_DEVICE = 1,   /* a replay stopped on a device error, or there is no device */
    GS_EXIT_USAGE = 2,    /* bad usage or bad input: one line on stderr, nothing written */
    GS_EXIT_PLOT = 3,     /* replay, sweep, plot: gnuplot missing or failed (data written) */
    GS_EXIT_DIFFERS = 3,  /* validate: some check is beyond its tolerance */
    GS_EXIT_OOM = 4,      /* replay, sweep with --fail-on-oom: some result met an OOM */
    GS_EXIT_DECLINED = 3, /* read-snapshot, write-rows: what it leaves to the converter */
};

/* The options several commands share. A command asks for the ones it takes (gs_cli_want) and
 * adds its own entries; gs_cli_parse checks them all and fills the parsed fields. */
enum {
    GS_CLI_CAPACITY = 1u << 0,     /* -c SIZE, parsed into cap */
    GS_CLI_DEVICE_TOTAL = 1u << 1, /* --device-total SIZE, parsed into total */
    GS_CLI_CALIBRATION = 1u << 2,  /* --calibration FILE, loaded into cal */
    GS_CLI_OUTPUT = 1u << 3,       /* -o FILE */
    GS_CLI_QUIET = 1u << 4,        /* -q */
    GS_CLI_LENIENT = 1u << 5,      /* --lenient */
    GS_CLI_CONTINUE = 1u << 6,     /* --continue-on-oom */
    GS_CLI_FORMAT = 1u << 7,       /* -f FMT, one of the command's formats, into fmt */
    GS_CLI_JOBS = 1u << 8,         /* -j N, replays at once, into jobs (0: one per processor) */
    GS_CLI_FAIL_ON_OOM = 1u << 9,  /* --fail-on-oom: exit GS_EXIT_OOM when a result met one */
    GS_CLI_PER_DEVICE = 1u << 10,   /* --capacity and --device-total also take DEV=SIZE,... */
};

typedef struct {
    /* as given on the command line (NULL when absent) */
    char *capacity, *device_total, *calibration, *output, *format;
    gboolean quiet, lenient, continue_on_oom;
    gint jobs;
    gboolean fail_on_oom;
    /* parsed by gs_cli_parse */
    uint64_t cap;                   /* 0: no limit */
    uint64_t total;                 /* 0: the trace's, else GS_DEFAULT_DEVICE_TOTAL */
    gs_calibration *cal;            /* NULL: the built-in table */
    /* GS_CLI_PER_DEVICE: the devices named in DEV=SIZE lists (capacity or device_total 0 where
     * not named); cap and total then hold a plain SIZE of the list, if any, else 0 */
    gs_device_opts *dev;
    size_t n_dev;
    gs_format fmt;
    bool progress;                  /* show progress: not -q, and stderr is a terminal */
    /* what the command takes */
    const char *cmd;
    unsigned want;
    const char *const *formats;     /* NULL-terminated, in gs_format order of GS_FMT_* values */
    GOptionContext *ctx;
    GOptionEntry *entries;
} gs_cli;

/* Start a command: its name, its parameters line ("TRACE... - replay allocation traces"), its
 * summary and description for --help, the shared options it takes and its own entries
 * (NULL-terminated; may be NULL). formats: for GS_CLI_FORMAT, e.g. {"table", "json", NULL}. */
void gs_cli_init(gs_cli *c, const char *cmd, const char *params, const char *summary,
                 const char *description, unsigned want, const GOptionEntry *own,
                 const char *const *formats);
/* Parse argv (removing the options), check the shared options and fill the parsed fields; a
 * usage error exits 2 with one line. min_args: the positional arguments needed. */
void gs_cli_parse(gs_cli *c, int *argc, char ***argv, int min_args, const char *what);
void gs_cli_clear(gs_cli *c);

/* One line "gpusim: ..." on stderr, exit 2. */
G_GNUC_NORETURN void gs_cli_usage_error(const char *fmt, ...) G_GNUC_PRINTF(1, 2);
/* "gpusim: MESSAGE" on stderr, made one line (gs_printable): a warning or a note that is no
 * error ("warning: ..." for warnings). */
void gs_cli_say(const char *fmt, ...) G_GNUC_PRINTF(1, 2);
/* One line "gpusim: ..." on stderr, exit status rc. */
G_GNUC_NORETURN void gs_cli_fail(int rc, const char *fmt, ...) G_GNUC_PRINTF(2, 3);

/* Open the device called name ("sim", "cuda") with cfg; exits 2 for a name that is not a
 * backend, 1 for a device that cannot start. */
gs_backend *gs_cli_open_device(const char *name, const gs_backend_config *cfg, const char *who);

/* A command's output: stdout, or a file written whole. The report goes to memory; the file
 * appears, through a temporary file beside it and a rename, only when gs_cli_close_output has
 * the whole report, so a run killed or failed before that leaves nothing behind. */
typedef struct {
    FILE *f;            /* where the report is written */
    const char *path;   /* NULL: stdout */
    char *buf;          /* a file's report, in memory (open_memstream) */
    size_t len;
    bool in_place;      /* path exists and is not a regular file (a FIFO, /dev/null): written
                         * there directly, never replaced */
} gs_cli_out;

/* 0 when path can be written as gs_cli_open_output writes it, or the errno that says why not
 * (for a path a child writes, where no gs_cli is at hand: gpusim predict's --trace). */
int gs_cli_output_errno(const char *path);
/* Open the output named by path (NULL or "-": stdout). Refused, exit 2 with one line, before
 * anything runs: a path that is one of the command's inputs (the same file, by device and inode,
 * through any link: the traces in inputs, NULL-terminated, and --calibration), and stdout
 * redirected to one of them. */
void gs_cli_open_output(gs_cli_out *o, const gs_cli *c, const char *const *inputs, const char *path);
/* gs_cli_open_output's checks of path (what flag names: "--output", or another file the
 * command writes), made before anything runs and before --plot's directory plot_dir (NULL:
 * none) is made: a command refused for them leaves no directory behind and wastes no run.
 * path's directory may be plot_dir. */
void gs_cli_check_output(const gs_cli *c, const char *const *inputs, const char *path,
                         const char *flag, const char *plot_dir);
/* Whether a and b name one file: by device and inode when both exist, else by their canonical
 * names (what a command is about to write). */
bool gs_cli_same_file(const char *a, const char *b);
/* Whether path is the file of c's report (-o; "-", stdout, is none). */
bool gs_cli_is_output(const gs_cli *c, const char *path);
/* Write it: checks every write (a full disk, a closed pipe: one line, exit 2, the target left as
 * it was). */
void gs_cli_close_output(gs_cli_out *o);
/* Exit 2 with one line when path (what the command writes, named by flag) is one of its
 * inputs, as gs_cli_open_output does. */
void gs_cli_refuse_input(const gs_cli *c, const char *const *inputs, const char *path,
                         const char *flag);
/* Flush and check stdout: one line and exit 2 if anything written to it was lost. */
void gs_cli_check_stdout(void);

/* One warning line on stderr when r's allocator could not give everything back at the end
 * (gs_result.teardown_failures): what: "TRACE [POLICY]". Nothing otherwise. */
void gs_cli_warn_teardown(const char *what, const gs_result *r);
/* The progress line on stderr (a terminal: the caller checks): "LABEL: DONE/TOTAL UNIT (P%)",
 * over the line before. The label (a trace's file name) is printed through gs_printable, so a
 * name holding an escape sequence is shown, not acted on. */
void gs_cli_progress_line(const char *label, size_t done, size_t total, const char *unit);
/* Progress callbacks (ud: the label). */
void gs_cli_progress(size_t done, size_t total, void *ud);
void gs_cli_warn_lenient(const char *msg, void *ud);
/* One warning line on stderr per setting of p that does nothing, or is known to misbehave with
 * another (the policy's warnings hook). */
void gs_cli_warn_policy(const gs_policy *p, bool has_limit);
/* The exit status of a command whose results are rs (n): rc as it stands, or GS_EXIT_OOM when
 * --fail-on-oom was given and some result met an OOM (a device error or a plot failure, already
 * in rc, comes first). */
int gs_cli_oom_status(const gs_cli *c, int rc, const gs_result *rs, size_t n);
/* The host out of memory (nomem.c): armed, a failed g_malloc anywhere in the process is one
 * line on stderr, "gpusim: out of memory: WHAT: failed to allocate N bytes", then the finisher
 * (if set: it writes what is complete, the sweep's finished cells) and exit 2, instead of
 * GLib's abort. Guards nest: the newest armed one handles. */
typedef void (*gs_cli_nomem_fn)(void *ud);
typedef struct {
    const char *what;           /* the command, or the work: "sweep of TRACE" */
    guint handler, own_handler; /* g_log_set_handler's: GLib's domain, the default one */
    void *reserve;              /* freed before the finisher runs, so that it has room */
    gs_cli_nomem_fn finish;
    void *ud;
    gint entered; /* the first failing thread handles, the others wait */
    GThread *owner;
} gs_cli_nomem;
void gs_cli_nomem_arm(gs_cli_nomem *g, const char *what);
void gs_cli_nomem_finisher(gs_cli_nomem *g, gs_cli_nomem_fn finish, void *ud);
void gs_cli_nomem_disarm(gs_cli_nomem *g);
/* The simulated device of a run whose device's size nothing says (whatif, frontier). Its size
 * is no promise (a verdict says "with no cap" or names the cap's source, never this size), but
 * the cost model charges an expandable segment's address reservation by the device's size: the
 * usual 80 GiB (GS_DEFAULT_DEVICE_TOTAL) when it has room for cap, the reference's limit (ref
 * may be NULL) and twice the trace's live peak, else as large as gpusim simulates, so that no
 * search is cut short by a guess. */
uint64_t gs_cli_unknown_device_total(const gs_trace *t, uint64_t cap, const gs_reference *ref);
/* --clients MODE of command cmd (NULL: separate), or exit 2. */
gs_clients_mode gs_cli_clients_mode(const char *cmd, const char *arg);
/* --plot DIR's plotter (NULL without DIR), or exit 2: its directory is checked now, made later
 * (gs_plotter_make), and it never writes over inputs (NULL-terminated) or the calibration. */
gs_plotter *gs_cli_plotter(const gs_cli *c, const char *const *inputs, const char *plot_dir);
/* Is path a PyTorch memory snapshot (by its name or its first bytes)? */
bool gs_cli_is_snapshot(const char *path);
/* Load a trace as the shared options say (--lenient), or exit 2 with FILE:LINE. */
gs_trace *gs_cli_load_trace(const gs_cli *c, const char *path);
/* Exit 2 where trace t (read from path) is one no replay takes: several devices and several
 * clients together (sim/devices.c refuses them). Every command that replays checks it before
 * its first replay, so none reports a verdict made of refused replays. */
void gs_cli_check_replayable(const gs_trace *t, const char *path);
/* A usage error, before anything is replayed, when p names no release and a key of its needs a
 * newer release than the one trace t (read from path) was recorded with (gs_policy_at_release). */
/* --reference REF against the trace at path: exit 2 where REF cannot be its run (another set
 * of devices, a death at an event it does not have); a warning where REF names another
 * recording (gs_reference_mismatch). */
void gs_cli_check_reference(const gs_reference *ref, const gs_trace *t, const char *path);
void gs_cli_check_release(const gs_policy *p, const gs_trace *t, const char *path);
/* The registered policies and their keys, for --help. g_free it. */
char *gs_cli_policies_help(void);
/* Run gnuplot on what plotter wrote; FALSE (after one line on stderr) when it could not. */
gboolean gs_cli_render_plots(gs_plotter *plotter);

/* A start-up hook's folder (torch/NAME: sitecustomize.py, put first on a child's PYTHONPATH):
 * $ENV_VAR, else the installed one (DATADIR/gpusim/NAME beside the bin/ gpusim is in), else the
 * source tree's. g_free it. (hooks.c) */
char *gs_cli_hook_dir(const char *name, const char *env_var);
/* env with dir put first on its PYTHONPATH (env is consumed, as g_environ_setenv does). */
char **gs_cli_env_python_path(char **env, const char *dir);
/* A child's setup (g_spawn's child_setup): its standard output goes to gpusim's standard error,
 * so gpusim's own output stays the report; it takes the stop signals gpusim holds back
 * (gs_child_unblock_stops). */
void gs_cli_child_output_to_stderr(gpointer ud);

/* ---- gpusim predict (capture.c): a program's requests captured without a GPU ---- */
typedef struct {
    uint64_t device_total; /* the device the program is told of (0: the capture's default) */
    const char *trace;     /* where the capture writes its trace: a temporary file of the
                            * caller's (removed before each run), never the user's own */
    bool no_probe;         /* no operation run on the device (torch/capture's probe.py) */
    bool quiet;            /* no line said of a capture run again */
} gs_capture_opts;
/* Run cmd (argv) under the capture hook (torch/capture), its output on stderr. A run killed by
 * a signal while an operation was being probed on the device runs again without probing that
 * operator (GS_CAPTURE_PROBE_RERUNS times at most). False (err: one line) when it could not be
 * started, failed, or wrote no trace. */
#define GS_CAPTURE_PROBE_RERUNS 4
bool gs_capture_run(char *const *cmd, const gs_capture_opts *o, GError **err);

/* ---- gpusim verify (verify.c): a setting tried on the real GPU with the user's program ---- */
typedef struct {
    char *spec;                 /* the setting */
    char outcome[16];           /* "ok", "oom" (died of torch.OutOfMemoryError), "error" */
    char *died_of;              /* the uncaught exception's type, or NULL */
    char *hook_error;           /* why the start-up hook could not set the cap, or NULL */
    bool reported;              /* the start-up hook wrote its report (a Python program) */
    bool has_stats;             /* with the allocator's statistics (CUDA was used) */
    int exit_status;            /* the program's (128 + N: killed by signal N) */
    int signal;                 /* the signal that killed it, or 0 */
    double wall_s;              /* as gpusim measured it, start to exit */
    double program_s;           /* as the hook measured it, Python's start-up to exit */
    uint64_t limit;             /* the limit PyTorch enforced (the fraction's bytes); 0: none */
    uint64_t peak_reserved, peak_allocated, retries, ooms, device_allocs, device_frees;
} gs_verify_run;

/* What a whatif verdict (or a replay of the trace) predicted for one setting. */
typedef struct {
    bool have;
    char outcome[16];           /* "ok", "survived", "oom", "error" */
    bool has_retries;           /* retries to judge: the trace completes (not of a dying one) */
    uint64_t retries;
    uint64_t peak_reserved;
} gs_verify_prediction;
/* What a replay predicts (its outcome, peak reserved, and its retries where it completes a
 * trace: a dying trace's are those up to its death, not the program's). */
void gs_verify_predict(const gs_result *r, gs_verify_prediction *p);

/* The PYTORCH_CUDA_ALLOC_CONF of a setting PyTorch itself runs ("pytorch", "pytorch:KEYS",
 * "cuda-async"); false for gpusim's models of other allocators. *conf: g_free it. */
bool gs_verify_conf(const char *spec, char **conf);
/* Run cmd (argv, NULL-terminated) once under spec at cap (0: none), its output on stderr; false
 * (err) only when it cannot be started or spec is no PyTorch setting. */
bool gs_verify_one(const char *spec, uint64_t cap, char *const *cmd, gs_verify_run *r,
                   GError **err);
void gs_verify_run_clear(gs_verify_run *r);
/* The verdict in words: "agrees", "agrees (as far as the trace goes)", "differs: ...", or "-"
 * without a prediction. */
const char *gs_verify_judge(const gs_verify_run *r, const gs_verify_prediction *p);
/* Run every spec (preds: one each, entries may have have false; may be NULL) and write the
 * table, CSV or JSON to out; the exit status: GS_EXIT_OK, GS_EXIT_DIFFERS when a verdict
 * differs, GS_EXIT_USAGE when a run could not start. (cmd_verify.c) */
int gs_verify_settings(const gs_cli *c, FILE *out, uint64_t cap, const char *cap_words,
                       const char *const *specs, const gs_verify_prediction *preds, size_t n,
                       char *const *cmd);

/* The commands (cmd_*.c): argv[0] is "gpusim COMMAND", which GLib's usage line shows. */
int gs_cmd_replay(int argc, char **argv);
int gs_cmd_validate(int argc, char **argv);
int gs_cmd_sweep(int argc, char **argv);
int gs_cmd_plot(int argc, char **argv);
int gs_cmd_whatif(int argc, char **argv);
int gs_cmd_frontier(int argc, char **argv);
int gs_cmd_convert(int argc, char **argv);
int gs_cmd_verify(int argc, char **argv);
int gs_cmd_predict(int argc, char **argv);
int gs_cmd_run(int argc, char **argv);
/* The option of the commands that write a trace (convert, write-rows): var, a gboolean, says
 * not to store the offline bound in the output's header. */
#define GS_CLI_NO_BOUND_OPTION(var)                                       \
    {                                                                     \
        "no-bound", 0, 0, G_OPTION_ARG_NONE, &(var),                      \
            "Do not store the offline bound in the output's header", NULL \
    }

int gs_cmd_read_snapshot(int argc, char **argv);
int gs_cmd_write_rows(int argc, char **argv);

G_END_DECLS

#endif
