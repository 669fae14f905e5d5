/* nomem.c - the host out of memory: one line and exit 2, with what is finished written first.
 *
 * GLib aborts the process when g_malloc fails (exit 133 after "GLib-ERROR ... failed to
 * allocate N bytes"), so under a memory limit (ulimit -v, a batch system's address-space cap) a
 * replay crashed where an error belonged, and a sweep lost every cell it had finished. Before
 * it aborts, GLib reports the failure through g_log in its own domain "GLib" at level ERROR
 * (gmem.c), and g_log hands that to the handler set for the domain, newest first: the guard
 * below is such a handler. The few allocations gpusim makes without GLib (the core's block
 * slabs, the reader's hash table, zlib's state) fail with g_error in the default domain in the
 * same words, "failed to allocate", which is what the guard looks for there too. It says one line,
 * lets its finisher write what is complete (the sweep's finished cells), and exits 2, bad input for
 * this machine's memory.
 *
 * The finisher runs while memory is short: the guard holds a reserve, allocated when the
 * finisher is set and freed before the finisher runs, so that writing a few thousand report
 * rows has room. Allocations fail in any thread: the first to fail handles it; the others wait
 * for its exit, allocating nothing more meanwhile. A failure inside the finisher itself comes
 * back here from the same thread (GLib marks it a recursion): the process then exits at once.
 */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"

enum { RESERVE_BYTES = 16 << 20 };

static void handle(const gchar *domain, GLogLevelFlags level, const gchar *message, gpointer ud)
{
    gs_cli_nomem *g = ud;
    const char *what = message ? strstr(message, "failed to allocate") : NULL;
    if (!what) { /* another fatal GLib error: GLib's own words, then its abort */
        g_log_default_handler(domain, level, message, NULL);
        return;
    }
    if (!g_atomic_int_compare_and_exchange(&g->entered, 0, 1)) {
        if (g->owner == g_thread_self()) _exit(GS_EXIT_USAGE); /* the finisher ran out too */
        for (;;) pause(); /* the first thread's exit ends this one */
    }
    g->owner = g_thread_self();
    g_free(g->reserve);
    g->reserve = NULL;
    /* plain stdio on stderr (unbuffered): gs_cli_say allocates */
    fprintf(stderr, "gpusim: out of memory: %s: %s\n", g->what, what);
    if (g->finish) g->finish(g->ud);
    fflush(NULL);
    _exit(GS_EXIT_USAGE);
}

void gs_cli_nomem_arm(gs_cli_nomem *g, const char *what)
{
    memset(g, 0, sizeof *g);
    g->what = what;
    GLogLevelFlags levels = G_LOG_LEVEL_ERROR | G_LOG_FLAG_FATAL;
    g->handler = g_log_set_handler("GLib", levels, handle, g);
    g->own_handler = g_log_set_handler(NULL, levels, handle, g);
}

void gs_cli_nomem_finisher(gs_cli_nomem *g, gs_cli_nomem_fn finish, void *ud)
{
    g_free(g->reserve);
    g->reserve = finish ? g_malloc(RESERVE_BYTES) : NULL;
    g->ud = ud;
    g->finish = finish;
}

void gs_cli_nomem_disarm(gs_cli_nomem *g)
{
    g_log_remove_handler("GLib", g->handler);
    g_log_remove_handler(NULL, g->own_handler);
    g_free(g->reserve);
    g->reserve = NULL;
}
