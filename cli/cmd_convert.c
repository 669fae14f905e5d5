/* cmd_convert.c - gpusim convert: a trace from one form into another (text, gzip text, binary),
 * through the reader and the writer of traces/, so the output is exactly the trace the input
 * was: text -> binary -> text gives back the bytes gs_trace_save writes. One addition, unless
 * --no-bound: the offline planner's figures (sim/bound.h) as three header entries, since the
 * planner can cost more than the replay itself (BENCHMARKS.md, "End to end") and a trace is
 * converted once and replayed many times.
 */
#include "bound.h"
#include "cli.h"

static const char convert_description[] =
    "The form of OUT (-o, required: a file, never stdout) is chosen by its name: NAME.gsbin is\n"
    "the binary format (loads at memory speed: a read and one checking pass), NAME.gstrace.gz\n"
    "gzip-compressed text, any other name plain text. The input's form is recognised by its\n"
    "first bytes, whatever its name.\n"
    "Both readers are equally strict; --lenient applies to a text input only (a binary trace\n"
    "is always checked strictly: the writer only writes valid traces). A trace with top user\n"
    "frames ('# frame N:' lines) stays text: the binary format does not carry them, and\n"
    "converting one to .gsbin is refused.\n"
    "\n"
    "Examples:\n"
    "  gpusim convert traces/data/resnet50.gstrace.gz -o resnet50.gsbin\n"
    "  gpusim convert resnet50.gsbin -o resnet50.gstrace      # the same text gpusim writes\n"
    "  gpusim replay resnet50.gsbin -p pytorch                # any command reads either form\n"
    "\n"
    "To convert a PyTorch memory snapshot, use gpusim-convert (traces/convert.py), which writes\n"
    "the binary format too when its output ends in .gsbin.\n"
    "\n"
    "The output's header gains the trace's offline bound (offline_bytes_by_device, with\n"
    "offline_planner and offline_events, docs/trace-format.md): the figure every replay reports\n"
    "as offline_bytes, whose planner can take longer than the replay. Replays of the output take\n"
    "it from there instead of planning again, as long as the trace has offline_events events (a\n"
    "trace cut from it plans again); --no-bound leaves the header as it was.\n"
    "Exit status: 0 written, 2 bad usage or bad input (one line on stderr, nothing written).";

int gs_cmd_convert(int argc, char **argv)
{
    gboolean no_bound = FALSE;
    const GOptionEntry own[] = {
        GS_CLI_NO_BOUND_OPTION(no_bound),
        {NULL, 0, 0, 0, NULL, NULL, NULL},
    };
    gs_cli c;
    gs_cli_init(&c, "convert", "TRACE - convert a trace between text and binary",
                "Read a trace (text, gzip text or binary) and write it in the form OUT's name says.",
                convert_description, GS_CLI_OUTPUT | GS_CLI_LENIENT | GS_CLI_QUIET, own, NULL);
    gs_cli_parse(&c, &argc, &argv, 1, "TRACE");
    if (argc != 2) gs_cli_usage_error("convert takes one TRACE (got %d)", argc - 1);
    if (!c.output || g_strcmp0(c.output, "-") == 0) /* an empty name: gs_cli_parse */
        gs_cli_usage_error("convert needs -o OUT (a file: NAME.gsbin, NAME.gstrace.gz or "
                           "NAME.gstrace)");
    const char *const inputs[] = {argv[1], NULL};
    gs_cli_refuse_input(&c, inputs, c.output, "--output");
    gs_trace *t = gs_cli_load_trace(&c, argv[1]);
    if (!no_bound) gs_bound_plan_and_store(t);
    GError *err = NULL;
    if (!gs_trace_save(t, c.output, &err)) gs_cli_usage_error("%s", err->message);
    gs_trace_free(t);
    gs_cli_clear(&c);
    return GS_EXIT_OK;
}
