/* file.c - a whole file as text: what every reader of a small input (a calibration table, a saved
 * report, a sweep's shard, a reference) starts from; and a whole output written so that no
 * reader ever sees half of it. */
#include "util.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <string.h>
#include <sys/stat.h>
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
        /* an input without end (/dev/zero) is judged by its first NUL, not read to the end */
        if (memchr(buf, '\0', (size_t)r)) break;
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

/* All of buf into fd; 0 or the errno. */
static int write_all(int fd, const char *buf, size_t len)
{
    for (size_t done = 0; done < len;) {
        ssize_t n = write(fd, buf + done, len - done);
        if (n < 0 && errno != EINTR) return errno;
        if (n > 0) done += (size_t)n;
    }
    return 0;
}

void gs_stop_signals(sigset_t *set)
{
    sigemptyset(set);
    sigaddset(set, SIGINT);
    sigaddset(set, SIGTERM);
    sigaddset(set, SIGHUP);
    sigaddset(set, SIGQUIT);
}

bool gs_stop_pending(void)
{
    sigset_t stop, pending;
    gs_stop_signals(&stop);
    if (sigpending(&pending) != 0) return false;
    for (int s = 1; s < NSIG; s++)
        if (sigismember(&stop, s) == 1 && sigismember(&pending, s) == 1) return true;
    return false;
}

/* sigprocmask: the child of a fork may call only async-signal-safe functions */
void gs_child_restore_mask(gpointer before)
{
    sigprocmask(SIG_SETMASK, before, NULL);
}

void gs_hold_stops(sigset_t *before)
{
    sigset_t stop;
    gs_stop_signals(&stop);
    pthread_sigmask(SIG_BLOCK, &stop, before);
}

void gs_release_stops(const sigset_t *before)
{
    pthread_sigmask(SIG_SETMASK, before, NULL);
}

/* sigemptyset, sigaddset and sigprocmask: async-signal-safe, as a forked child needs */
void gs_child_unblock_stops(gpointer ud)
{
    (void)ud;
    sigset_t stop;
    gs_stop_signals(&stop);
    sigprocmask(SIG_UNBLOCK, &stop, NULL);
}

char *gs_temp_beside(const char *path)
{
    char *dir = g_path_get_dirname(path);
    char *tmp = g_build_filename(dir, ".gpusim-XXXXXX", NULL);
    g_free(dir);
    return tmp;
}

/* A FIFO opened for writing waits for a reader: with the stop signals held that wait could not
 * be interrupted (gpusim predict --trace FIFO with no reader ignored a Ctrl-C, and only SIGKILL
 * ended it, its temporary folder left behind). So it is opened without waiting, again every 50
 * ms until a reader comes or a stop signal is pending (EINTR); then it blocks as a file does. */
static int open_fifo(const char *path)
{
    for (;;) {
        int fd = open(path, O_WRONLY | O_NONBLOCK | O_CLOEXEC);
        if (fd >= 0) {
            int fl = fcntl(fd, F_GETFL);
            if (fl >= 0) (void)fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
            return fd;
        }
        if (errno != ENXIO) return -1;
        if (gs_stop_pending()) {
            errno = EINTR;
            return -1;
        }
        g_usleep(50 * 1000);
    }
}

int gs_output_open(const char *path, gs_output *o)
{
    gs_hold_stops(&o->before);
    o->tmp = NULL;
    struct stat st;
    bool there = lstat(path, &st) == 0;
    int fd;
    if (there && S_ISFIFO(st.st_mode)) {
        fd = open_fifo(path);
    } else if (there && !S_ISREG(st.st_mode)) {
        /* a device, a FIFO, a link (/dev/stdout): written in place, never replaced by a rename
         * (as root that would turn /dev/full into a regular file; a link would become a file,
         * its target never written) */
        fd = open(path, O_WRONLY | O_TRUNC | O_CREAT | O_CLOEXEC, 0666);
    } else {
        o->tmp = gs_temp_beside(path);
        fd = g_mkstemp_full(o->tmp, O_WRONLY | O_CLOEXEC, 0600);
        mode_t mask = umask(0);
        umask(mask);
        if (fd >= 0 && fchmod(fd, 0666 & ~mask) != 0) { /* as if created by open(), not 0600 */
            int e = errno;
            close(fd);
            unlink(o->tmp);
            errno = e;
            fd = -1;
        }
    }
    if (fd < 0) {
        int e = errno;
        g_free(o->tmp);
        o->tmp = NULL;
        gs_release_stops(&o->before);
        errno = e;
    }
    return fd;
}

int gs_output_commit(const char *path, gs_output *o, int fd, int e)
{
    if (fd >= 0 && close(fd) != 0 && !e) e = errno;
    if (o->tmp) {
        /* a stop signal held back meanwhile ends the run at the unmask below: the file it was
         * to replace stays as it was (it was replaced, then the run exited 130) */
        if (!e && gs_stop_pending()) e = EINTR;
        if (!e && rename(o->tmp, path) != 0) e = errno;
        if (e) unlink(o->tmp);
        g_free(o->tmp);
        o->tmp = NULL;
    }
    gs_release_stops(&o->before);
    return e;
}

gboolean gs_write_whole(const char *path, const char *buf, size_t len, GError **err)
{
    gs_output o;
    int fd = gs_output_open(path, &o);
    int e = fd < 0 ? errno : write_all(fd, buf, len);
    if (fd >= 0) e = gs_output_commit(path, &o, fd, e);
    if (e) {
        char *shown = gs_printable(path);
        g_set_error(err, GS_TEXT_ERROR, GS_TEXT_ERROR_IO, "%s: cannot write: %s", shown,
                    g_strerror(e));
        g_free(shown);
    }
    return e == 0;
}
