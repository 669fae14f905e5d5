/* fuzz_plot_saved.c - `gpusim plot RESULT` (plots/saved.c: gs_plot_saved): the CSV reader of a
 * saved replay or sweep report, the JSON one with its timeline and address map, and the plots'
 * data files and gnuplot scripts written from them (gnuplot itself is not run).
 *
 * Promises checked for every input:
 *   - gs_plot_saved either writes plots or fails with one line naming the file;
 *   - everything it writes lands in the plot directory, under a name of letters, digits and
 *     "_ . - +" only;
 *   - no gnuplot script written can run a command: every backquote lies inside a single-quoted
 *     string (gnuplot substitutes `...` everywhere else), and no single-quoted string spans a
 *     line break.
 */
#include "fuzz.h"

#include <string.h>

#include "plot.h"

static void check_script(const char *path)
{
    char *text = NULL;
    gsize len = 0;
    GS_FUZZ_CHECK(g_file_get_contents(path, &text, &len, NULL), "cannot read %s", path);
    enum { CODE, SINGLE, DOUBLE } st = CODE;
    size_t line = 1;
    for (gsize i = 0; i < len; i++) {
        char c = text[i];
        if (c == '\n') {
            GS_FUZZ_CHECK(st == CODE, "%s:%zu: a quoted string spans a line break", path, line);
            line++;
            continue;
        }
        switch (st) {
        case CODE:
            GS_FUZZ_CHECK(c != '`', "%s:%zu: a backquote outside quotes", path, line);
            if (c == '\'') st = SINGLE;
            else if (c == '"') st = DOUBLE;
            else if (c == '#') { /* a comment, to the end of the line */
                while (i + 1 < len && text[i + 1] != '\n') {
                    GS_FUZZ_CHECK(text[i + 1] != '`', "%s:%zu: a backquote in a comment", path, line);
                    i++;
                }
            }
            break;
        case SINGLE:
            if (c == '\'') st = CODE;
            break;
        case DOUBLE:
            GS_FUZZ_CHECK(c != '`', "%s:%zu: a backquote in a double-quoted string", path, line);
            if (c == '\\' && i + 1 < len && text[i + 1] != '\n') i++;
            else if (c == '"') st = CODE;
            break;
        }
    }
    GS_FUZZ_CHECK(st == CODE, "%s: a string never closed", path);
    g_free(text);
}

static void check_dir(const char *dir)
{
    GDir *d = g_dir_open(dir, 0, NULL);
    GS_FUZZ_CHECK(d != NULL, "cannot list %s", dir);
    const char *name;
    while ((name = g_dir_read_name(d))) {
        GS_FUZZ_CHECK(strspn(name, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                                   "0123456789_.-+") == strlen(name) ||
                          g_utf8_validate(name, -1, NULL),
                      "a plot file named '%s'", name);
        char *p = g_build_filename(dir, name, NULL);
        GS_FUZZ_CHECK(g_file_test(p, G_FILE_TEST_IS_REGULAR), "%s is not a plain file", p);
        if (g_str_has_suffix(name, ".gp")) check_script(p);
        g_free(p);
    }
    g_dir_close(d);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *path = gs_fuzz_file(data, size);
    const char *dir = gs_fuzz_dir();
    GError *e = NULL;
    gs_plotter *p = gs_plotter_new(dir, &e);
    GS_FUZZ_CHECK(p != NULL, "plotter: %s", e ? e->message : "?");
    gs_plotter_keep(p, path);
    if (!gs_plot_saved(p, path, &e)) {
        gs_fuzz_check_error(e, e && e->domain == GS_JSON_ERROR ? GS_JSON_ERROR : GS_PLOT_ERROR,
                            path);
        g_error_free(e);
    } else {
        GS_FUZZ_CHECK(e == NULL, "plots and an error");
    }
    check_dir(dir);
    gs_plotter_free(p);
    return 0;
}
