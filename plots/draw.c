/* draw.c - the plotter (a directory and the scripts written to it), the names and labels the
 * plots share, and the pieces every gnuplot script is made of (trace.c chooses a trace's plots).
 *
 * Everything an image shows is in the .dat files beside its .gp script, in the units of its axes
 * (GiB, MiB, ms), so a user can re-plot or restyle them; the scripts name their data by relative
 * path and are run with the plot directory as the working directory. Every file is written whole
 * (a temporary file, then a rename), so a reader never sees half a script.
 */
#include <errno.h>
#include <string.h>

#include <glib/gstdio.h>

#include "plot-int.h"

G_DEFINE_QUARK(gs-plot-error-quark, gs_plot_error)

/* Okabe and Ito's colour-blind-safe palette, the yellow left out (unreadable on white). */
static const char *const palette[] = {"#0072B2", "#D55E00", "#009E73", "#CC79A7",
                                      "#E69F00", "#56B4E9", "#000000"};

const char *gs_plot_colour(size_t i) { return palette[i % G_N_ELEMENTS(palette)]; }

/* ---- the plotter: a directory and the scripts written to it ---- */

/* Whether dir could be made: it is a directory, or the nearest of its ancestors that exists is
 * one we may write in. (The directory itself is made at the first file written: a run that
 * fails first leaves no empty directory behind.) */
static gboolean dir_can_be_made(const char *dir, GError **err)
{
    char *d = g_strdup(dir);
    gboolean ok = TRUE;
    for (;;) {
        GStatBuf st;
        if (g_stat(d, &st) == 0) {
            if (!S_ISDIR(st.st_mode)) {
                g_set_error(err, GS_PLOT_ERROR, GS_PLOT_ERROR_IO, "%s: cannot create: %s is not a directory",
                            dir, d);
                ok = FALSE;
            } else if (strcmp(d, dir) != 0 && g_access(d, W_OK | X_OK) != 0) {
                int e = errno;
                g_set_error(err, GS_PLOT_ERROR, GS_PLOT_ERROR_IO, "%s: cannot create: %s: %s", dir, d,
                            g_strerror(e));
                ok = FALSE;
            }
            break;
        }
        if (errno != ENOENT) {
            int e = errno;
            g_set_error(err, GS_PLOT_ERROR, GS_PLOT_ERROR_IO, "%s: cannot create: %s", dir, g_strerror(e));
            ok = FALSE;
            break;
        }
        char *up = g_path_get_dirname(d);
        bool top = strcmp(up, d) == 0;
        g_free(d);
        d = up;
        if (top) break; /* "." or "/" that does not exist: let the first write say why */
    }
    g_free(d);
    return ok;
}

gs_plotter *gs_plotter_new(const char *dir, GError **err)
{
    if (!dir_can_be_made(dir, err)) return NULL;
    gs_plotter *p = g_new0(gs_plotter, 1);
    p->dir = g_strdup(dir);
    p->scripts = g_ptr_array_new_with_free_func(g_free);
    p->kept = g_array_new(FALSE, FALSE, sizeof(uint64_t));
    p->stems = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, g_free);
    p->written = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, g_free);
    p->notes = g_ptr_array_new_with_free_func(g_free);
    return p;
}

void gs_plotter_note(gs_plotter *p, char *msg) { g_ptr_array_add(p->notes, msg); }

const GPtrArray *gs_plotter_notes(const gs_plotter *p) { return p->notes; }

void gs_plotter_free(gs_plotter *p)
{
    if (!p) return;
    g_free(p->dir);
    g_ptr_array_free(p->scripts, TRUE);
    g_array_free(p->kept, TRUE);
    g_free(p->report);
    g_hash_table_destroy(p->stems);
    g_hash_table_destroy(p->written);
    g_free(p->result);
    g_free(p->owner);
    g_ptr_array_free(p->notes, TRUE);
    g_free(p);
}

void gs_plotter_keep(gs_plotter *p, const char *path)
{
    GStatBuf st;
    if (!path || g_stat(path, &st) != 0) return;
    uint64_t id[2] = {(uint64_t)st.st_dev, (uint64_t)st.st_ino};
    g_array_append_vals(p->kept, id, 2);
}

void gs_plotter_keep_report(gs_plotter *p, const char *path)
{
    if (!path || strcmp(path, "-") == 0) return;
    g_free(p->report);
    p->report = g_canonicalize_filename(path, NULL);
    gs_plotter_keep(p, path); /* and by inode: a link to it */
}

gboolean gs_plotter_may_replace(const gs_plotter *p, const char *path, GError **err)
{
    if (p->report) {
        char *c = g_canonicalize_filename(path, NULL);
        gboolean same = strcmp(c, p->report) == 0;
        g_free(c);
        if (same) {
            g_set_error(err, GS_PLOT_ERROR, GS_PLOT_ERROR_IO,
                        "%s: that is the report (-o) of this run; not overwritten", path);
            return FALSE;
        }
    }
    GStatBuf st;
    if (g_stat(path, &st) != 0) return TRUE;
    for (guint i = 0; i + 1 < p->kept->len; i += 2)
        if (g_array_index(p->kept, uint64_t, i) == (uint64_t)st.st_dev &&
            g_array_index(p->kept, uint64_t, i + 1) == (uint64_t)st.st_ino) {
            g_set_error(err, GS_PLOT_ERROR, GS_PLOT_ERROR_IO,
                        "%s: an input of this run has that name; not overwritten", path);
            return FALSE;
        }
    return TRUE;
}

const char *gs_plotter_dir(const gs_plotter *p) { return p->dir; }

gboolean gs_plotter_make(gs_plotter *p, GError **err)
{
    if (p->made) return TRUE;
    if (g_mkdir_with_parents(p->dir, 0777) != 0) {
        int e = errno;
        g_set_error(err, GS_PLOT_ERROR, GS_PLOT_ERROR_IO, "%s: cannot create: %s", p->dir, g_strerror(e));
        return FALSE;
    }
    p->made = true;
    return TRUE;
}

/* gs_write_whole writes a temporary file beside the target and renames it: whole. */
gboolean gs_plotter_write(gs_plotter *p, const char *name, GString *text, GError **err)
{
    if (!gs_plotter_make(p, err)) return FALSE;
    /* a name another trace's plots have taken in this run would replace them: refused */
    const char *by = g_hash_table_lookup(p->written, name);
    if (by && g_strcmp0(by, p->owner) != 0) {
        char *who = gs_printable(by), *me = gs_printable(p->owner ? p->owner : "");
        g_set_error(err, GS_PLOT_ERROR, GS_PLOT_ERROR_IO,
                    "%s: a plot of %s and one of %s would both have this name; rename one of them",
                    name, who, me);
        g_free(who);
        g_free(me);
        return FALSE;
    }
    if (!by) g_hash_table_insert(p->written, g_strdup(name), g_strdup(p->owner ? p->owner : ""));
    char *path = g_build_filename(p->dir, name, NULL);
    if (!gs_plotter_may_replace(p, path, err)) {
        g_free(path);
        return FALSE;
    }
    GError *e = NULL;
    gboolean ok = gs_write_whole(path, text->str, text->len, &e);
    if (!ok) {
        g_set_error(err, GS_PLOT_ERROR, GS_PLOT_ERROR_IO, "%s", e->message);
        g_error_free(e);
    }
    g_free(path);
    return ok;
}

gboolean gs_plotter_add_script(gs_plotter *p, const char *stem, GString *g, GError **err)
{
    char *name = g_strdup_printf("%s.gp", stem);
    gboolean ok = gs_plotter_write(p, name, g, err);
    g_free(name);
    if (ok) g_ptr_array_add(p->scripts, g_strdup(stem));
    return ok;
}

/* ---- names and labels ---- */

#define FILE_PART 80

/* A name as a file-name part: letters, digits, '_', '.', '-' and '+' as they are (and, in a
 * name that is UTF-8, every non-ASCII character but those gs_unichar_hidden names), anything
 * else '-' (a policy spec:
 * pytorch:max_split_size_mb:128 -> pytorch-max_split_size_mb-128). A trace's or a saved
 * report's name can hold anything (a quote, a backquote, '$', a line break): none of it reaches
 * a file name, so the plots land in their directory under names that a shell and gnuplot take
 * literally. */
static char *file_part(const char *s)
{
    bool utf8 = g_utf8_validate(s, -1, NULL);
    GString *g = g_string_sized_new(strlen(s));
    for (const char *c = s; *c;) {
        if (g_ascii_isalnum(*c) || strchr("_.-+", *c)) {
            g_string_append_c(g, *c++);
        } else if (!utf8 || (unsigned char)*c < 0x80) {
            g_string_append_c(g, '-');
            c++;
        } else { /* a character: kept, unless a terminal or a bidi reorder acts on it */
            const char *next = g_utf8_next_char(c);
            if (gs_unichar_hidden(g_utf8_get_char(c))) g_string_append_c(g, '-');
            else g_string_append_len(g, c, next - c);
            c = next;
        }
    }
    char *f = g_string_free(g, FALSE);
    /* At most FILE_PART bytes (a whole character): a plot's name holds two parts and a few
     * words, and a file system refuses a name above 255 bytes (a saved report's trace name
     * of 300 characters made `gpusim plot` fail on its own output). */
    if (strlen(f) > FILE_PART) {
        char *end = f + FILE_PART;
        if (utf8) end = g_utf8_find_prev_char(f, end + 1);
        *end = '\0';
    }
    return f;
}

char *gs_plot_file_part(const char *s) { return file_part(s); }

char *gs_plot_stem(const char *trace)
{
    char *base = g_path_get_basename(trace);
    static const char *const exts[] = {".gz",   ".gstrace", ".gsbin",  ".trace", ".csv",
                                       ".json", ".txt",     ".pickle", ".pkl"};
    for (bool cut = true; cut;) {
        cut = false;
        for (size_t i = 0; i < G_N_ELEMENTS(exts); i++) {
            size_t n = strlen(base), k = strlen(exts[i]);
            if (n > k && strcmp(base + n - k, exts[i]) == 0) {
                base[n - k] = '\0';
                cut = true;
            }
        }
    }
    char *stem = file_part(base);
    g_free(base);
    /* a name of nothing, or one that starts with '.' ("", ".", ".."), would make hidden files
     * (".-bars.png"): such a stem starts with '-' instead, or is "trace" */
    if (!*stem) {
        g_free(stem);
        stem = g_strdup("trace");
    } else if (*stem == '.') {
        *stem = '-';
    }
    return stem;
}

/* Whether long is short, a '-' and a word that is not a number: then short's plots and long's
 * can share a name (run's OOM map, run-oom-map-1-pytorch, is run-oom's map). No plot's kind
 * after its stem starts with a number (bars, timeline, map-K-, oom-map-K-, snapshot-K-, sweep,
 * whatif, frontier, matrix), so "run-2", the second "run", takes none of run's names. */
static bool stem_extends(const char *longer, const char *shorter)
{
    size_t n = strlen(shorter);
    if (strncmp(longer, shorter, n) != 0 || longer[n] != '-') return false;
    const char *w = longer + n + 1;
    size_t digits = strspn(w, "0123456789");
    return !(digits && (w[digits] == '\0' || w[digits] == '-'));
}

/* Whether a stem another owner than owner took extends stem or is extended by it, or (same)
 * is stem itself. */
static bool stem_meets(GHashTable *claims, const char *stem, const char *owner, bool same)
{
    GHashTableIter it;
    gpointer k, v;
    g_hash_table_iter_init(&it, claims);
    while (g_hash_table_iter_next(&it, &k, &v))
        if (strcmp(v, owner) != 0 &&
            ((same && strcmp(k, stem) == 0) || stem_extends(k, stem) || stem_extends(stem, k)))
            return true;
    return false;
}

char *gs_plot_stem_claim(GHashTable *claims, const char *trace, const char *owner)
{
    if (!owner) owner = trace;
    char *base = gs_plot_stem(trace);
    const char *had = g_hash_table_lookup(claims, base);
    if (had && strcmp(had, owner) == 0) return base; /* the same owner: the same stem */
    /* A stem that extends another's ("run-oom" after "run") has its '-'s as '_' ("run_oom"),
     * then, like a stem another owner took, "-2", "-3", ... after it until none is shared. */
    if (stem_meets(claims, base, owner, false)) g_strdelimit(base, "-", '_');
    char *stem = g_strdup(base);
    for (unsigned n = 2; stem_meets(claims, stem, owner, true); n++) {
        g_free(stem);
        stem = g_strdup_printf("%s-%u", base, n);
    }
    if (!g_hash_table_lookup(claims, stem))
        g_hash_table_insert(claims, g_strdup(stem), g_strdup(owner));
    g_free(base);
    return stem;
}

char *gs_plotter_stem(gs_plotter *p, const char *trace)
{
    /* a saved report's traces are its own: two reports of one trace draw apart */
    char *owner = p->result ? g_strdup_printf("%s (in %s)", trace, p->result) : g_strdup(trace);
    g_free(p->owner);
    p->owner = owner;
    return gs_plot_stem_claim(p->stems, trace, owner);
}

void gs_plotter_set_result(gs_plotter *p, const char *path)
{
    g_free(p->result);
    p->result = g_strdup(path);
}

/* "capacity 5.75 GiB" as a title shows it; "no capacity limit" for 0. */
char *gs_plot_cap_words(uint64_t cap)
{
    if (!cap) return g_strdup("no capacity limit");
    char *s = gs_format_capacity(cap, " ");
    char *w = g_strdup_printf("capacity %s", s);
    g_free(s);
    return w;
}

/* A policy's label in legends: its spec, and its capacity when runs differ in it. */
char *gs_plot_run_label(const gs_plot_run *r, bool with_cap)
{
    if (!with_cap) return g_strdup(r->policy);
    if (!r->capacity) return g_strdup_printf("%s, no limit", r->policy);
    char *s = gs_format_capacity(r->capacity, " ");
    char *l = g_strdup_printf("%s @%s", r->policy, s);
    g_free(s);
    return l;
}

bool gs_plot_same_capacity(const gs_plot_run *runs, size_t n)
{
    for (size_t i = 1; i < n; i++)
        if (runs[i].capacity != runs[0].capacity) return false;
    return true;
}

/* ---- the pieces of a script ---- */

/* A gnuplot string literal that substitutes nothing: single-quoted (gnuplot runs `backquoted`
 * text inside double quotes as a shell command, and a title can come from a file name or a
 * saved report someone sent). A quote or a line break cannot be inside one: each is a
 * double-quoted piece of its own, joined by gnuplot's string concatenation ('it'."'".'s',
 * 'line 1'."\n".'line 2'; gnuplot 5.4 misreads '' written for a quote at the start of a string
 * or after another); any other control character becomes '?'. */
void gs_gp_str(GString *g, const char *s)
{
    /* bytes that are no UTF-8 (a Latin-1 file name) as U+FFFD: gnuplot wrote them raw into
     * every SVG, which no XML reader then opened; the names of files are never such (file_part) */
    char *valid = g_utf8_validate(s, -1, NULL) ? NULL : g_utf8_make_valid(s, -1);
    g_string_append_c(g, '\'');
    for (const char *c = valid ? valid : s; *c; c++) {
        if (*c == '\n') g_string_append(g, "'.\"\\n\".'");
        else if (*c == '\'') g_string_append(g, "'.\"'\".'");
        else if ((unsigned char)*c < 0x20 || *c == 0x7f) g_string_append_c(g, '?');
        else g_string_append_c(g, *c);
    }
    g_string_append_c(g, '\'');
    g_free(valid);
}

char *gs_gp_lit(const char *s)
{
    GString *g = g_string_new(NULL);
    gs_gp_str(g, s);
    return g_string_free(g, FALSE);
}

/* Text in a .dat file's comment or column: one line, whatever s holds (a line break in a name
 * would start a data row), each control character written as '?'. */
void gs_dat_text(GString *g, const char *s)
{
    for (; *s; s++)
        g_string_append_c(g, (unsigned char)*s < 0x20 || *s == 0x7f ? '?' : *s);
}

/* The script's frame: draw once as PNG and once as SVG; gpusim passes
 * out='.gpusim-render-XXXXXX/STEM' (render.c) so the images, too, are written whole and renamed. */
void gs_gp_begin(GString *g, const char *stem, const char *what, int w, int h)
{
    g_string_append_printf(g,
        "# %s.gp - %s, written by gpusim.\n"
        "# Draw it again (PNG and SVG): cd into this directory, then: gnuplot %s.gp\n"
        "if (!exists(\"out\")) out = ",
        stem, what, stem);
    gs_gp_str(g, stem);
    g_string_append_printf(g,
        "\n"
        "do for [fmt in \"png svg\"] {\n"
        "reset\n"
        "if (fmt eq \"png\") { set terminal pngcairo size %d,%d noenhanced font 'Sans,11' background '#ffffff' }\n"
        "if (fmt eq \"svg\") { set terminal svg size %d,%d noenhanced font 'Sans,11' background '#ffffff' }\n"
        "set output out.'.'.fmt\n",
        w, h, w, h);
}

void gs_gp_end(GString *g)
{
    g_string_append(g, "set output\n}\n");
}

/* The legend is a plot of its own: NaN draws nothing, so only the key shows. */
void gs_gp_legend_strip(GString *g, double y, double h, const char *const *labels,
                        size_t n, const char *extra)
{
    g_string_append_printf(g,
        "set origin 0,%.3f\nset size 1,%.3f\nunset title\nunset border\nunset tics\nunset xlabel\n"
        "unset ylabel\nunset grid\nset xrange [0:1]\nset yrange [0:1]\nset style fill solid 0.9 noborder\n"
        "set key center center horizontal Left reverse maxrows 2 samplen 2 spacing 1.3 width 2\n",
        y, h);
    for (size_t i = 0; i < n; i++) {
        g_string_append_printf(g, "%sNaN with boxes lc rgb '%s' title ", i ? ", \\\n     " : "plot ",
                               gs_plot_colour(i));
        gs_gp_str(g, labels[i]);
    }
    if (extra) g_string_append(g, extra);
    g_string_append_c(g, '\n');
}

long gs_plot_text_chars(const char *label)
{
    if (g_utf8_validate(label, -1, NULL)) return g_utf8_strlen(label, -1);
    char *valid = g_utf8_make_valid(label, -1);
    long n = g_utf8_strlen(valid, -1);
    g_free(valid);
    return n;
}

char *gs_plot_fit_text(const char *label, long fit)
{
    /* the label comes from a file: where it is not UTF-8, the character walk below would run
     * past its end (a lead byte claims continuation bytes the string lacks) */
    char *valid = g_utf8_make_valid(label, -1);
    long n = g_utf8_strlen(valid, -1);
    if (n <= fit) return valid;
    long head = (fit - 1) / 2, tail = fit - 1 - head;
    const char *tail_at = g_utf8_offset_to_pointer(valid, n - tail);
    char *h = g_utf8_substring(valid, 0, head);
    char *r = g_strconcat(h, "\u2026", tail_at, NULL);
    g_free(h);
    g_free(valid);
    return r;
}

void gs_plot_files_begin(gs_plot_files *f, gs_plotter *p, const char *trace, const char *kind)
{
    char *stem0 = gs_plotter_stem(p, trace);
    f->stem = g_strdup_printf("%s-%s", stem0, kind);
    f->datname = g_strdup_printf("%s.dat", f->stem);
    f->dat_lit = gs_gp_lit(f->datname);
    f->dat = g_string_new(NULL);
    f->g = g_string_new(NULL);
    g_free(stem0);
}

gboolean gs_plot_files_finish(gs_plot_files *f, gs_plotter *p, GError **err)
{
    gboolean ok = gs_plotter_write(p, f->datname, f->dat, err) &&
                  gs_plotter_add_script(p, f->stem, f->g, err);
    g_string_free(f->dat, TRUE);
    g_string_free(f->g, TRUE);
    g_free(f->dat_lit);
    g_free(f->datname);
    g_free(f->stem);
    return ok;
}
