/* cmd_read_snapshot.c - gpusim read-snapshot: the converter's fast reader of a PyTorch memory
 * snapshot (traces/snapshot.c), run by traces/gsconvert as a child process. Plumbing, not a
 * command a user needs: its output is the converter's to read, and a snapshot it declines the
 * converter reads itself (docs/speed.md, "The snapshot reader in C").
 */
#include <unistd.h>

#include "cli.h"
#include "trace.h"

static const char read_snapshot_description[] =
    "Plumbing for gpusim-convert (traces/convert.py), which runs it on a PyTorch memory\n"
    "snapshot and reads its output: the snapshot's entries as the converter's event columns,\n"
    "and the rest of the snapshot as a small pickle (traces/snapshot.c says the layout).\n"
    "It reads only what it can read exactly as the converter's own reader does; anything else\n"
    "(a float time, an opcode no snapshot holds, a second reference to an entry, a damaged\n"
    "file) it declines, and the converter then reads the snapshot itself, with its own checks\n"
    "and messages. Set GPUSIM_SNAPSHOT_READER=none to make the converter always read it itself.\n"
    "Exit status: 0 written to stdout, 3 declined (one line on stderr saying why, nothing\n"
    "written), 2 bad usage.";

int gs_cmd_read_snapshot(int argc, char **argv)
{
    gint64 limit = 0;
    gboolean progress = FALSE;
    const GOptionEntry own[] = {
        {"max-memory", 0, 0, G_OPTION_ARG_INT64, &limit,
         "The conversion's memory limit in bytes: past half of it, decline", "BYTES"},
        {"progress", 0, 0, G_OPTION_ARG_NONE, &progress,
         "Every 65,536 entries, a line 'ENTRIES BYTES' on stderr (bytes of the file read)", NULL},
        {NULL, 0, 0, 0, NULL, NULL, NULL},
    };
    gs_cli c;
    gs_cli_init(&c, "read-snapshot", "SNAPSHOT - the converter's fast snapshot reader",
                "Read a PyTorch memory snapshot into the converter's columns, on stdout.",
                read_snapshot_description, 0, own, NULL);
    gs_cli_parse(&c, &argc, &argv, 1, "SNAPSHOT");
    if (argc != 2) gs_cli_usage_error("read-snapshot takes one SNAPSHOT (got %d)", argc - 1);
    GString *out = g_string_new(NULL);
    char *why = NULL;
    int rc = GS_EXIT_OK;
    if (limit < 0) gs_cli_usage_error("--max-memory must be 0 or more");
    if (!gs_snapshot_read(argv[1], (uint64_t)limit, progress ? stderr : NULL, out, &why)) {
        fprintf(stderr, "gpusim read-snapshot: declined: %s\n", why);
        rc = GS_EXIT_DECLINED;
    } else if (fwrite(out->str, 1, out->len, stdout) != out->len) {
        rc = GS_EXIT_DECLINED; /* a closed pipe: the converter reads it itself */
    }
    g_free(why);
    g_string_free(out, TRUE);
    gs_cli_clear(&c);
    return rc;
}
