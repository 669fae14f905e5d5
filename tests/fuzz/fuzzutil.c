/* fuzzutil.c - the scratch file and directory of the harnesses, and their failure report. */
#include "fuzz.h"

#include <glib/gstdio.h>

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char *scratch_dir;  /* this process's directory */
static char *scratch_file; /* the input, for readers that take a path */

void gs_fuzz_fail(const char *file, int line, const char *cond, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "%s:%d: broken promise: %s: ", file, line, cond);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    fflush(stderr);
    abort();
}

/* Removes the plain files (and empty directories) under dir, and dir itself when top. */
static void empty_dir(const char *dir, gboolean top)
{
    GDir *d = g_dir_open(dir, 0, NULL);
    if (d) {
        const char *name;
        while ((name = g_dir_read_name(d))) {
            char *p = g_build_filename(dir, name, NULL);
            if (g_file_test(p, G_FILE_TEST_IS_DIR) && !g_file_test(p, G_FILE_TEST_IS_SYMLINK))
                empty_dir(p, TRUE);
            else
                g_unlink(p);
            g_free(p);
        }
        g_dir_close(d);
    }
    if (top) g_rmdir(dir);
}

static void cleanup(void)
{
    if (scratch_dir) empty_dir(scratch_dir, TRUE);
}

/* GLib's critical warnings are programmer errors (a g_return_if_fail that failed): for the
 * harnesses they are crashes, like a sanitizer's report. */
__attribute__((constructor)) static void fuzz_init(void)
{
    g_log_set_always_fatal(G_LOG_LEVEL_ERROR | G_LOG_LEVEL_CRITICAL | G_LOG_LEVEL_WARNING);
    const char *base = g_file_test("/dev/shm", G_FILE_TEST_IS_DIR) && access("/dev/shm", W_OK) == 0
                           ? "/dev/shm" : g_get_tmp_dir();
    char *tmpl = g_build_filename(base, "gs-fuzz-XXXXXX", NULL);
    scratch_dir = g_mkdtemp(tmpl);
    if (!scratch_dir) {
        fprintf(stderr, "fuzz: cannot make a directory under %s: %s\n", base, g_strerror(errno));
        exit(2);
    }
    /* The input file lives beside the directory's other contents, which gs_fuzz_dir() empties:
     * in a subdirectory of its own. */
    char *in = g_build_filename(scratch_dir, "in", NULL);
    g_mkdir(in, 0700);
    scratch_file = g_build_filename(in, "input", NULL);
    g_free(in);
    atexit(cleanup);
}

const char *gs_fuzz_file(const uint8_t *data, size_t size)
{
    int fd = open(scratch_file, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0) gs_fuzz_fail(__FILE__, __LINE__, "open", "%s: %s", scratch_file, g_strerror(errno));
    for (size_t done = 0; done < size;) {
        ssize_t w = write(fd, data + done, size - done);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) gs_fuzz_fail(__FILE__, __LINE__, "write", "%s: %s", scratch_file, g_strerror(errno));
        done += (size_t)w;
    }
    close(fd);
    return scratch_file;
}

static char *out_dir;

const char *gs_fuzz_dir(void)
{
    if (!out_dir) {
        out_dir = g_build_filename(scratch_dir, "out", NULL);
        g_mkdir(out_dir, 0700);
    }
    empty_dir(out_dir, FALSE);
    return out_dir;
}

char *gs_fuzz_path(const char *name)
{
    return g_build_filename(scratch_dir, name, NULL);
}

void gs_fuzz_check_error(const GError *e, GQuark domain, const char *name)
{
    GS_FUZZ_CHECK(e != NULL, "failed without an error");
    GS_FUZZ_CHECK(e->domain == domain, "error in domain %s: %s", g_quark_to_string(e->domain),
                  e->message);
    GS_FUZZ_CHECK(e->message && g_str_has_prefix(e->message, name) &&
                      e->message[strlen(name)] == ':',
                  "error '%s' does not start with '%s:'", e->message, name);
    /* One line, and nothing a terminal would act on: input quoted in a message is escaped. */
    for (const char *c = e->message; *c; c++)
        GS_FUZZ_CHECK((unsigned char)*c >= 0x20 && *c != 0x7f,
                      "error with control byte 0x%02x at offset %td: '%s'", (unsigned char)*c,
                      c - e->message, e->message);
}
