/* file.c - a whole file as text: what every reader of a small input (a calibration table, a saved
 * report, a sweep's shard, a reference) starts from. */
#include "util.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <unistd.h>

G_DEFINE_QUARK(gs-text-error-quark, gs_text_error)

gboolean gs_read_text(const char *path, char **text, size_t *len, GError **err)
{
    /* open/read, not g_file_get_contents: its messages quote the name in curly quotes and are
     * not "FILE: message" */
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    GString *g = g_string_new(NULL);
    int e = 0;
    if (fd < 0) e = errno;
    while (!e) {
        char buf[65536];
        ssize_t r = read(fd, buf, sizeof buf);
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) e = errno;
        if (r <= 0) break;
        g_string_append_len(g, buf, r);
    }
    if (fd >= 0) close(fd);
    if (e) {
        g_set_error(err, GS_TEXT_ERROR, GS_TEXT_ERROR_IO, "%s: %s", path, g_strerror(e));
        g_string_free(g, TRUE);
        return FALSE;
    }
    /* a NUL would end every field read from here on early (C strings): the file is refused, not
     * silently cut (a calibration's rows after one were dropped) */
    const char *nul = memchr(g->str, '\0', g->len);
    if (nul) {
        char *shown = gs_printable(path);
        if (g->len >= 2 && (unsigned char)g->str[0] == 0x1f && (unsigned char)g->str[1] == 0x8b)
            g_set_error(err, GS_TEXT_ERROR, GS_TEXT_ERROR_NUL,
                        "%s: gzip-compressed: not a text file (a trace?)", shown);
        else
            g_set_error(err, GS_TEXT_ERROR, GS_TEXT_ERROR_NUL,
                        "%s: byte %zu: a NUL byte: not a text file", shown, (size_t)(nul - g->str));
        g_free(shown);
        g_string_free(g, TRUE);
        return FALSE;
    }
    *len = g->len;
    *text = g_string_free(g, FALSE);
    return TRUE;
}
