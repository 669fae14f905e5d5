/* main.c - the gpusim program: a table of commands (as git's git.c), each in its own file.
 *
 *   gpusim replay TRACE... [--policy SPEC]... [--capacity SIZE] [--format table|csv|json] ...
 *   gpusim validate TRACE... --policy SPEC...
 *   gpusim sweep TRACE --policy 'pytorch:max_split_size_mb:{64,128}' --capacity '{5.75,6.25}GiB'
 *   gpusim plot RESULT...
 *
 * Exit status (cli.h): 0 when every report was produced (an OOM is a result, not a failure); 1
 * when a replay stopped on a device error; 2 for bad usage or bad input (one line on stderr); 3
 * when plots were asked for and gnuplot is missing or failed (the reports and the plots' data are
 * written all the same), or, for validate, when a check differs.
 */
#include <errno.h>
#include <fcntl.h>
#include <unistd.h>
#include <string.h>

#include "cli.h"

/* a command a line */
/* clang-format off */
static const struct {
    const char *name;
    int (*run)(int argc, char **argv);
} commands[] = {
    {"replay", gs_cmd_replay},
    {"validate", gs_cmd_validate},
    {"sweep", gs_cmd_sweep},
    {"plot", gs_cmd_plot},
    {"whatif", gs_cmd_whatif},
    {"frontier", gs_cmd_frontier},
    {"convert", gs_cmd_convert},
    {"verify", gs_cmd_verify},
    {"predict", gs_cmd_predict},
    {"run", gs_cmd_run},
    {"read-snapshot", gs_cmd_read_snapshot},
    {"write-rows", gs_cmd_write_rows},
};
/* clang-format on */

static const char main_help[] =
    "usage: gpusim COMMAND [OPTIONS]\n"
    "\n"
    "gpusim replays GPU memory-allocation traces through allocator policies (PyTorch's caching\n"
    "allocator and its settings) on a simulated device, to find which policy would have saved a\n"
    "run from 'CUDA out of memory' and what it would cost.\n"
    "\n"
    "Commands:\n"
    "  replay TRACE...   replay traces under one or more policies and compare them\n"
    "  validate TRACE... replay on the simulator and on the real GPU, side by side\n"
    "  sweep TRACE       replay one trace over a grid of settings ({64,128} lists), in parallel\n"
    "  plot RESULT...    draw the plots of a saved report (also: replay/sweep --plot DIR)\n"
    "  whatif INPUT      which setting would have saved this run (a snapshot or a trace), and at\n"
    "                    what cost: minimum capacity, retries, device time per setting\n"
    "  frontier TRACE... every setting of every family as memory against device time, and\n"
    "                    the Pareto front of the two (gpusim's own policy marked)\n"
    "  convert TRACE     a trace into another form: text, gzip text, or binary (-o NAME.gsbin),\n"
    "                    which loads at memory speed\n"
    "  verify -- CMD     run your program on the real GPU under each setting, beside gpusim's\n"
    "                    prediction for it (PyTorch's own allocator, unmodified program)\n"
    "  predict -- CMD    which setting lets your program fit, before it runs on a GPU: its\n"
    "                    requests captured on the CPU (fake tensors), then whatif's verdict\n"
    "  run -- CMD        run your program, unmodified, on gpusim's allocator on the real GPU\n"
    "                    (PyTorch and CuPy; --trace records its requests)\n"
    "  read-snapshot S   plumbing for gpusim-convert: its fast reader of a PyTorch snapshot\n"
    "  write-rows OUT    plumbing for gpusim-convert: its writer of binary traces\n"
    "  help [COMMAND]    this text, or a command's options (as 'gpusim COMMAND --help')\n"
    "  version           print the version\n"
    "\n"
    "Traces are gpusim's text format, or its binary one (docs/trace-format.md); convert a\n"
    "PyTorch memory snapshot with\n"
    "  gpusim-convert snapshot.pickle -o trace.gstrace.gz     (or -o trace.gsbin)\n"
    "(in a source tree: python3 traces/convert.py snapshot.pickle -o trace.gstrace.gz).\n";

/* What went to stdout must have got there: a full disk or a closed pipe is an error, not exit 0
 * with the report lost. */
/* stdout_closed_at_start: the program started with no standard output (finish's one exception). */
static int finish(int rc, bool stdout_closed_at_start)
{
    gs_cli_check_stdout();
    /* a closing error is a lost write, except where standard output was closed from the start
     * and nothing was written to it (the report went to -o): EBADF then says only that */
    int e = fclose(stdout) != 0 ? errno : 0;
    if (e && !(e == EBADF && stdout_closed_at_start))
        gs_cli_usage_error("standard output: cannot write: %s", g_strerror(e));
    return rc;
}

int main(int argc, char **argv)
{
    bool closed = fcntl(STDOUT_FILENO, F_GETFD) == -1 && errno == EBADF;
    if (argc < 2) {
        fputs(main_help, stderr);
        return GS_EXIT_USAGE;
    }
    const char *cmd = argv[1];
    char *help_argv[] = {NULL, NULL, "--help", NULL};
    bool help = strcmp(cmd, "help") == 0 || strcmp(cmd, "--help") == 0 || strcmp(cmd, "-h") == 0;
    if (help && argc > 2 && argv[2][0] != '-') { /* "gpusim help replay": "gpusim replay --help" */
        cmd = argv[2];
        help_argv[0] = argv[0];
        help_argv[1] = argv[2];
        argc = 3;
        argv = help_argv;
    }
    for (size_t i = 0; i < G_N_ELEMENTS(commands); i++)
        if (strcmp(cmd, commands[i].name) == 0) {
            /* the command's argv[0], which GLib's usage line names: "gpusim replay [OPTION...]" */
            char *prog = g_strdup_printf("gpusim %s", cmd);
            char **args = g_new(char *, argc + 1);
            memcpy(args, argv, sizeof *args * (size_t)argc);
            args[argc] = NULL;
            args[1] = prog;
            gs_cli_nomem nomem; /* out of host memory: one line and exit 2, not GLib's abort */
            gs_cli_nomem_arm(&nomem, cmd);
            int rc = commands[i].run(argc - 1, args + 1);
            gs_cli_nomem_disarm(&nomem);
            g_free(args);
            g_free(prog);
            return finish(rc, closed);
        }
    if (help && (argv != help_argv || strcmp(cmd, "help") == 0 || strcmp(cmd, "version") == 0)) {
        fputs(main_help, stdout);
        return finish(GS_EXIT_OK, closed);
    }
    if (strcmp(cmd, "version") == 0 || strcmp(cmd, "--version") == 0) {
        printf("gpusim %s\n", GS_VERSION);
        return finish(GS_EXIT_OK, closed);
    }
    /* the list from the table, so a command added is a command named (on the stack: the
     * error exits, and the leak checker would call a heap list lost) */
    char names[512] = "";
    for (size_t i = 0; i < G_N_ELEMENTS(commands); i++) {
        g_strlcat(names, commands[i].name, sizeof names);
        g_strlcat(names, ", ", sizeof names);
    }
    gs_cli_usage_error("unknown command '%s' (commands: %shelp, version)", cmd, names);
}
