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
    GS_EXIT_DEVICE = 1,  /* a replay stopped on a device error, or there is no device */
    GS_EXIT_USAGE = 2,   /* bad usage or bad input: one line on stderr, nothing written */
    GS_EXIT_PLOT = 3,    /* replay, sweep, plot: gnuplot missing or failed (data written) */
    GS_EXIT_DIFFERS = 3, /* validate: some check is beyond its tolerance */
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
    GS_CLI_PER_DEVICE = 1u << 8,   /* --capacity and --device-total also take DEV=SIZE,... */
};

typedef struct {
    /* as given on the command line (NULL when absent) */
    char *capacity, *device_total, *calibration, *output, *format;
    gboolean quiet, lenient, continue_on_oom;
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
/* One line "gpusim: ..." on stderr, exit status rc. */
G_GNUC_NORETURN void gs_cli_fail(int rc, const char *fmt, ...) G_GNUC_PRINTF(2, 3);

/* Open the device called name ("sim", "cuda") with cfg; exits 2 for a name that is not a
 * backend, 1 for a device that cannot start. */
gs_backend *gs_cli_open_device(const char *name, const gs_backend_config *cfg, const char *who);

/* Output written whole: to a temporary file beside path, renamed at gs_cli_close_output. NULL or
 * "-" is stdout. */
FILE *gs_cli_open_output(const char *path, char **tmp);
void gs_cli_close_output(FILE *f, char *tmp, const char *path);

/* Progress callbacks (ud: the label). */
void gs_cli_progress(size_t done, size_t total, void *ud);
void gs_cli_warn_lenient(const char *msg, void *ud);
/* Load a trace as the shared options say (--lenient), or exit 2 with FILE:LINE. */
gs_trace *gs_cli_load_trace(const gs_cli *c, const char *path);
/* The registered policies and their keys, for --help. g_free it. */
char *gs_cli_policies_help(void);
/* Run gnuplot on what plotter wrote; FALSE (after one line on stderr) when it could not. */
gboolean gs_cli_render_plots(gs_plotter *plotter);

/* The commands (cmd_*.c): argv[0] is the command's name. */
int gs_cmd_replay(int argc, char **argv);
int gs_cmd_validate(int argc, char **argv);
int gs_cmd_sweep(int argc, char **argv);
int gs_cmd_plot(int argc, char **argv);

G_END_DECLS

#endif
