/* cmd_write_rows.c - gpusim write-rows: the converter's writer of the binary format
 * (traces/rows.c), run by traces/gsconvert as a child process with the trace's columns on its
 * standard input. Plumbing, not a command a user needs: what it declines the converter writes
 * itself (docs/speed.md, "The binary trace written in C").
 */
#include <unistd.h>

#include "bound.h"
#include "cli.h"
#include "trace.h"

static const char write_rows_description[] =
    "Plumbing for gpusim-convert (traces/convert.py), which runs it to write a binary trace\n"
    "(NAME.gsbin) and sends it the trace's columns on standard input (traces/rows.c says the\n"
    "layout). The bytes are those the converter's own encoder (traces/gsbin.py) writes from the\n"
    "same columns; what that encoder would not take so (allocations not numbered in order, a\n"
    "device past 32 bits) it declines, and the converter then writes the trace itself.\n"
    "As gpusim convert, it stores the trace's offline bound in the header unless --no-bound.\n"
    "Exit status: 0 written, 3 declined (one line on stderr saying why, OUT untouched), 2 bad\n"
    "usage or OUT not written.";

int gs_cmd_write_rows(int argc, char **argv)
{
    gboolean no_bound = FALSE;
    const GOptionEntry own[] = {
        GS_CLI_NO_BOUND_OPTION(no_bound),
        {NULL, 0, 0, 0, NULL, NULL, NULL},
    };
    gs_cli c;
    gs_cli_init(&c, "write-rows", "OUT - the converter's writer of binary traces",
                "Write the binary trace whose columns come on standard input to OUT.",
                write_rows_description, 0, own, NULL);
    gs_cli_parse(&c, &argc, &argv, 1, "OUT");
    if (argc != 2) gs_cli_usage_error("write-rows takes one OUT (got %d)", argc - 1);
    if (!g_str_has_suffix(argv[1], GS_TRACE_BINARY_SUFFIX))
        gs_cli_usage_error("write-rows writes NAME" GS_TRACE_BINARY_SUFFIX " (got %s)", argv[1]);
    char *why = NULL;
    gs_trace *t = gs_trace_read_rows(stdin, &why);
    if (!t) {
        fprintf(stderr, "gpusim write-rows: declined: %s\n", why);
        g_free(why);
        gs_cli_clear(&c);
        return GS_EXIT_DECLINED;
    }
    if (!no_bound) gs_bound_plan_and_store(t); /* as gpusim convert stores it */
    GError *err = NULL;
    int rc = GS_EXIT_OK;
    if (!gs_trace_save(t, argv[1], &err)) {
        /* a trace the binary reader would refuse is declined (the converter's encoder then says
         * why); an output that cannot be written is an error */
        bool declined = err->code == GS_TRACE_ERROR_FORMAT;
        fprintf(stderr, "gpusim write-rows: %s%s\n", declined ? "declined: " : "", err->message);
        g_error_free(err);
        rc = declined ? GS_EXIT_DECLINED : GS_EXIT_USAGE;
    }
    gs_trace_free(t);
    gs_cli_clear(&c);
    return rc;
}
