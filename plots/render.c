/* render.c - running gnuplot on the scripts a plotter wrote: NAME.png and NAME.svg beside each.
 *
 * gnuplot runs in the plot directory (the scripts name their data relative to it) and draws to
 * a temporary name passed as out='.gpusim-render-XXXXXX/NAME', in a folder of its own that
 * g_mkdtemp makes (mode 0700, a name no one can plant a link at beforehand); the images are
 * renamed into place only when it succeeds, so a failed run leaves no half image behind.
 */
#include <errno.h>
#include <signal.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <glib/gstdio.h>

#include "plot-int.h"

static gboolean render_in(const gs_plotter *p, const char *prog, const char *stem,
                          const char *tmpdir, const sigset_t *before, GError **err);

/* An interrupt (a stop signal: util.h) while an image is drawn is held back until its temporary
 * folder is gone, and then ends the run with the old images in place: it had left the folder
 * behind with a half-drawn PNG in it. */
static gboolean render_one(const gs_plotter *p, const char *prog, const char *stem, GError **err)
{
    const char *dir = p->dir;
    sigset_t before;
    gs_hold_stops(&before);
    char *tmpdir = g_build_filename(dir, ".gpusim-render-XXXXXX", NULL);
    gboolean ok;
    if (!g_mkdtemp(tmpdir)) {
        int en = errno;
        g_set_error(err, GS_PLOT_ERROR, GS_PLOT_ERROR_IO, "%s: cannot make a folder to draw in: %s",
                    dir, g_strerror(en));
        ok = FALSE;
    } else {
        ok = render_in(p, prog, stem, tmpdir, &before, err);
        g_rmdir(tmpdir);
    }
    g_free(tmpdir);
    gs_release_stops(&before);
    return ok;
}

/* gnuplot on stem's script, drawing into tmpdir; the images renamed into place if it drew them
 * and no stop signal is pending. */
static gboolean render_in(const gs_plotter *p, const char *prog, const char *stem,
                          const char *tmpdir, const sigset_t *before, GError **err)
{
    const char *dir = p->dir;
    char *base = g_path_get_basename(tmpdir);
    char *tmp = g_strdup_printf("%s/%s", base, stem); /* relative to dir, where gnuplot runs */
    g_free(base);
    char *lit = gs_gp_lit(tmp), *e = g_strdup_printf("out=%s", lit);
    char *script = g_strdup_printf("%s.gp", stem);
    char *arg = g_strdup_printf("./%s", script); /* never read as an option, whatever the stem */
    char *argv[] = {(char *)prog, (char *)"-e", e, arg, NULL};
    char *serr = NULL;
    int status = 0;
    GError *se = NULL;
    /* gnuplot takes the stop signals held back here: an interrupt stops a hung gnuplot too */
    gboolean ok = g_spawn_sync(dir, argv, NULL, G_SPAWN_STDOUT_TO_DEV_NULL, gs_child_restore_mask,
                               (gpointer)before, NULL, &serr, &status, &se);
    if (!ok) {
        g_set_error(err, GS_PLOT_ERROR, GS_PLOT_ERROR_GNUPLOT, "%s: %s", prog, se->message);
        g_error_free(se);
    } else if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        /* gnuplot's last line names the problem */
        char *msg = g_strstrip(g_strdup(serr ? serr : ""));
        char *nl = strrchr(msg, '\n');
        g_set_error(err, GS_PLOT_ERROR, GS_PLOT_ERROR_GNUPLOT, "gnuplot failed on %s/%s (exit %d): %s",
                    dir, script, WIFEXITED(status) ? WEXITSTATUS(status) : -1,
                    nl ? nl + 1 : *msg ? msg : "no message");
        g_free(msg);
        ok = FALSE;
    }
    if (ok && gs_stop_pending()) {
        g_set_error(err, GS_PLOT_ERROR, GS_PLOT_ERROR_IO, "%s/%s: interrupted", dir, script);
        ok = FALSE;
    }
    static const char *const exts[] = {"png", "svg"};
    for (size_t i = 0; i < G_N_ELEMENTS(exts); i++) {
        char *from = g_strdup_printf("%s/%s.%s", dir, tmp, exts[i]);
        char *to = g_strdup_printf("%s/%s.%s", dir, stem, exts[i]);
        if (ok && !gs_plotter_may_replace(p, to, err)) ok = FALSE;
        if (ok && g_rename(from, to) != 0) {
            int en = errno;
            g_set_error(err, GS_PLOT_ERROR, GS_PLOT_ERROR_IO, "%s: cannot write: %s", to, g_strerror(en));
            ok = FALSE;
        }
        g_unlink(from); /* left behind only on failure */
        g_free(from);
        g_free(to);
    }
    g_free(serr);
    g_free(arg);
    g_free(script);
    g_free(lit);
    g_free(e);
    g_free(tmp);
    return ok;
}

gboolean gs_plotter_render(gs_plotter *p, size_t *n_images, GError **err)
{
    const char *want = g_getenv("GPUSIM_GNUPLOT");
    if (!want || !*want) want = "gnuplot";
    char *prog = g_find_program_in_path(want);
    if (!prog) {
        g_set_error(err, GS_PLOT_ERROR, GS_PLOT_ERROR_NO_GNUPLOT,
                    "no images: '%s' not found (install gnuplot, e.g. apt-get install gnuplot-nox, "
                    "or name it in GPUSIM_GNUPLOT); the data and gnuplot scripts are in %s",
                    want, p->dir);
        return FALSE;
    }
    gboolean ok = TRUE;
    size_t n = 0;
    for (guint i = 0; ok && i < p->scripts->len; i++) {
        ok = render_one(p, prog, p->scripts->pdata[i], err);
        if (ok) n += 2;
    }
    if (n_images) *n_images = n;
    g_free(prog);
    return ok;
}
