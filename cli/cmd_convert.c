/* cmd_convert.c - gpusim convert: a trace from one form into another (text, gzip text, binary),
 * through the reader and the writer of traces/, so the output is exactly the trace the input
 * was: text -> binary -> text gives back the bytes gs_trace_save writes.
 */
#include "cli.h"

static const char convert_description[] =
    "The form of OUT is chosen by its name: NAME.gsbin is the binary format (loads at memory\n"
    "speed: a read and one checking pass), NAME.gstrace.gz gzip-compressed text, any other\n"
    "name plain text. The input's form is recognised by its first bytes, whatever its name.\n"
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
    "Exit status: 0 written, 2 bad usage or bad input (one line on stderr, nothing written).";

int gs_cmd_convert(int argc, char **argv)
{
    gs_cli c;
    gs_cli_init(&c, "convert", "TRACE - convert a trace between text and binary",
                "Read a trace (text, gzip text or binary) and write it in the form OUT's name says.",
                convert_description, GS_CLI_OUTPUT | GS_CLI_LENIENT, NULL, NULL);
    gs_cli_parse(&c, &argc, &argv, 1, "TRACE");
    if (argc != 2) gs_cli_usage_error("convert takes one TRACE (got %d)", argc - 1);
    if (!c.output || !*c.output || g_strcmp0(c.output, "-") == 0)
        gs_cli_usage_error("convert needs -o OUT (a file: NAME.gsbin, NAME.gstrace.gz or "
                           "NAME.gstrace)");
    const char *const inputs[] = {argv[1], NULL};
    gs_cli_refuse_input(&c, inputs, c.output, "--output");
    gs_trace *t = gs_cli_load_trace(&c, argv[1]);
    GError *err = NULL;
    if (!gs_trace_save(t, c.output, &err)) gs_cli_usage_error("%s", err->message);
    gs_trace_free(t);
    gs_cli_clear(&c);
    return GS_EXIT_OK;
}
