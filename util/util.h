/* util.h - the small things every layer of gpusim shares, and nothing else: sizes as people write
 * them, "FILE:LINE: message", CSV fields, a strict JSON reader and JSON string literals, the
 * median of samples, and the output formats. It depends on GLib alone; every other folder may
 * include it, and it includes nothing of theirs.
 */
#ifndef GS_UTIL_H
#define GS_UTIL_H

#include <glib.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

G_BEGIN_DECLS

#define GS_KiB (UINT64_C(1) << 10)
#define GS_MiB (UINT64_C(1) << 20)
#define GS_GiB (UINT64_C(1) << 30)
/* The largest device memory gpusim simulates, wherever a size enters (a trace's header, a
 * reference, --device-total): 16 TiB, 80 times the largest GPU of 2026. A simulated device's
 * address window is 2^47 bytes (backends/simdevice.c), and an expandable segment reserves 1.125
 * times the device with a page table of one slot per 2 MiB; a larger size would not fit. */
#define GS_MAX_DEVICE_BYTES (UINT64_C(1) << 44)

/* The reports' formats: a table for people, CSV and JSON for scripts. */
typedef enum { GS_FMT_TABLE, GS_FMT_CSV, GS_FMT_JSON } gs_format;

/* ---- sizes (size.c): "18.2GiB", "512MiB", "4096", "1.5GB" (decimal units) ---- */
gboolean gs_parse_size(const char *s, uint64_t *out, GError **err);
/* A measured size: "5.453 GiB", "20.00 MiB", "512 B", for tables. g_free the result. */
char *gs_format_size(uint64_t bytes);
/* A capacity, a setting people type: "5.75GiB" (sep "") or "5.75 GiB" (sep " ") from 256 MiB
 * up, else "300MiB", else bytes; always exact (the text reads back as the same number of bytes),
 * in the largest of those units that is. g_free the result. */
char *gs_format_capacity(uint64_t bytes, const char *sep);

/* ---- messages about input (msg.c) ---- */
/* "NAME:LINE: message" from a printf format: how every reader (traces, JSON, CSV, calibration)
 * names the place of a problem. g_free the result. */
char *gs_located_vprintf(const char *name, size_t line, const char *fmt, va_list ap)
    G_GNUC_PRINTF(3, 0);
char *gs_located_printf(const char *name, size_t line, const char *fmt, ...) G_GNUC_PRINTF(3, 4);
/* Whether a terminal acts on c, or c reorders or breaks the text around it: the C0 and C1
 * controls, DEL, the bidirectional marks, embeddings and isolates, the line and paragraph
 * separators. Never shown raw, nor put in a file name. */
bool gs_unichar_hidden(gunichar c);
/* s with every such character written as \xNN (below 0x100) or \uNNNN, and every byte of no
 * valid UTF-8 sequence as \xNN: input quoted in a message (a line of a file, a setting, a file
 * name) leaves the message one line that a terminal only prints, not acts on (an escape
 * sequence, CSI 0x9b, a carriage return, a right-to-left override). gs_located_*printf apply
 * it to the whole message. g_free the result. */
char *gs_printable(const char *s);

/* ---- CSV (csv.c) ---- */
/* A CSV field for s: as it is, or quoted with inner quotes doubled when it holds a comma, a
 * quote or a line break (RFC 4180). g_free the result. */
char *gs_csv_quote(const char *s);
/* The same, appended to out. */
void gs_csv_field(GString *out, const char *s);
/* RFC 4180 records of s (len bytes, named path in messages): a GPtrArray of NULL-terminated
 * string vectors (blank lines skipped, a CR outside quotes dropped), and in lines (a GArray
 * of size_t) the line each record starts on, as a quoted field may hold line breaks. NULL and
 * err "PATH:LINE: message" (GS_TEXT_ERROR_FORMAT) when a quoted field never ends. */
GPtrArray *gs_csv_parse(const char *path, const char *s, size_t len, GArray *lines, GError **err);
/* The place of column name in a record of header names (NULL-terminated), or -1. */
int gs_csv_column(char **header, const char *name);

/* ---- files (file.c) ---- */
#define GS_TEXT_ERROR (gs_text_error_quark())
GQuark gs_text_error_quark(void);
typedef enum {
    GS_TEXT_ERROR_IO,  /* cannot open or read it: "PATH: strerror" */
    GS_TEXT_ERROR_NUL, /* it holds a NUL byte: "PATH: byte N: ..." */
    GS_TEXT_ERROR_FORMAT, /* its records are malformed: "PATH:LINE: ..." (gs_csv_parse) */
} gs_text_error_code;
/* The whole of path (a file or a pipe) in *text, NUL-terminated (g_free it), its length in *len;
 * FALSE and err (GS_TEXT_ERROR) when it cannot be read, or holds a NUL byte (no text file does,
 * and a reader of C strings would stop there without a word). */
gboolean gs_read_text(const char *path, char **text, size_t *len, GError **err);
/* The signals that stop a run from a terminal or a scheduler (SIGINT, SIGTERM, SIGHUP, SIGQUIT):
 * held back where an interrupt must not leave a temporary file or directory behind. */
void gs_stop_signals(sigset_t *set);
/* Whether a stop signal came while held back (gs_output_open holds them): a long writer asks
 * between its buffers and gives up (EINTR), so an interrupt acts without waiting for the end. */
bool gs_stop_pending(void);
/* A g_spawn child_setup: in the child, before its exec, the signal mask *before (a sigset_t*
 * saved where the stop signals were held back), so the program takes them: a blocked mask
 * survives exec, and GLib's spawn keeps it. */
void gs_child_restore_mask(gpointer before);
/* Hold the stop signals back (*before: the mask to give back) while a child runs and gpusim has
 * a temporary file or folder of its own to remove when it ends: a Ctrl-C, which the terminal
 * sends to the child too, ends the child; gpusim removes what it made, then gs_release_stops
 * lets the signal act. Holds nest (the inner release gives back the outer hold). */
void gs_hold_stops(sigset_t *before);
void gs_release_stops(const sigset_t *before);
/* A g_spawn child_setup: in the child, before its exec, the stop signals taken off the mask,
 * whatever holds of gpusim's were open when it was started (nested: gs_child_restore_mask
 * would give back an outer hold's mask). */
void gs_child_unblock_stops(gpointer ud);
/* A mkstemp template for a temporary file beside path: a short name of its own in path's
 * directory (path with a suffix could pass NAME_MAX: a name of 250 bytes is a valid output, one
 * 7 bytes longer is not). g_free it. */
char *gs_temp_beside(const char *path);
/* One writer for every whole output (gs_write_whole, gs_trace_save, the PyTorch library's
 * files): gs_output_open gives the descriptor to write path's new contents to, and
 * gs_output_commit puts them in place. An existing path that is not a regular file (a device,
 * a FIFO, a link, live or dangling) is written in place, through the link; otherwise the
 * contents go to a temporary file beside it (a short name, the mode open() would give) that
 * commit renames over path, so no reader sees half of it. *held: the stop signals, held back
 * from open to commit (an interrupt then leaves no temporary file). -1 and errno on failure. */
typedef struct {
    char *tmp;         /* the temporary file, or NULL when path is written in place */
    sigset_t before;   /* the signal mask to give back at commit */
} gs_output;
int gs_output_open(const char *path, gs_output *o);
/* Close fd and, e being 0 (no error so far), rename the temporary file over path; on an error
 * the temporary file is removed and path is as it was. Returns the first errno, or 0. */
int gs_output_commit(const char *path, gs_output *o, int fd, int e);
/* buf (len bytes) as the whole of path: through a temporary file beside it (a short name; the
 * mode open() would give), then a rename, the stop signals held meanwhile, so no reader sees
 * half of it and an interrupt leaves no temporary file; an existing path that is not a regular
 * file (a device, a FIFO, a link) is written in place instead. FALSE and err ("PATH: cannot
 * write: strerror", GS_TEXT_ERROR_IO) on failure, path as it was. */
gboolean gs_write_whole(const char *path, const char *buf, size_t len, GError **err);

/* ---- JSON (json.c) ----
 * A small strict reader, for reference files written by traces/convert.py (--reference) and for
 * saved gpusim results. Numbers keep their text so 64-bit integers survive exactly
 * (gs_json_int parses them). */
#define GS_JSON_ERROR (gs_json_error_quark())
GQuark gs_json_error_quark(void);
typedef enum {
    GS_JSON_ERROR_IO,     /* cannot open or read the file */
    GS_JSON_ERROR_FORMAT, /* not JSON ("NAME:LINE: message") */
} gs_json_error_code;

typedef enum { GS_JSON_NULL, GS_JSON_BOOL, GS_JSON_NUMBER, GS_JSON_STRING, GS_JSON_ARRAY,
               GS_JSON_OBJECT } gs_json_type;

typedef struct gs_json gs_json;
struct gs_json {
    gs_json_type type;
    char *str;          /* STRING: the decoded text; NUMBER: the literal as written */
    gboolean b;         /* BOOL */
    size_t n;           /* ARRAY/OBJECT: number of items */
    gs_json **items;    /* ARRAY/OBJECT: the values */
    char **keys;        /* OBJECT: the keys, parallel to items */
};

/* Parse a whole document; NULL and err ("NAME:LINE: message", GS_JSON_ERROR_FORMAT) on error. */
gs_json *gs_json_parse(const char *name, const char *text, size_t len, GError **err);
gs_json *gs_json_load(const char *path, GError **err);
void gs_json_free(gs_json *j);
const gs_json *gs_json_get(const gs_json *obj, const char *key); /* NULL if absent/not object */
/* Number as integer / double; return FALSE if j is not a number (or not an exact integer). */
gboolean gs_json_int(const gs_json *j, int64_t *out);
gboolean gs_json_uint(const gs_json *j, uint64_t *out);
gboolean gs_json_double(const gs_json *j, double *out);

/* ---- the JSON writer (jsonw.c) ----
 * One place decides what valid JSON is: strings escaped, bytes that are not UTF-8 written as
 * U+FFFD, non-finite numbers as null, separators between items. Layout is the caller's: items
 * are separated by ", ", or by the text given to gs_jw_break for the next one (",\n   "). */
typedef struct {
    GString *out;
    unsigned depth;     /* containers open (at most 63) */
    uint64_t nonempty;  /* bit d: the container at depth d has an item */
    bool after_key;     /* the next value is a key's: no separator */
    const char *brk;    /* the separator before the next item, if not ", " */
} gs_jw;

void gs_jw_init(gs_jw *w, GString *out);
void gs_jw_object(gs_jw *w);
void gs_jw_object_end(gs_jw *w);
void gs_jw_array(gs_jw *w);
void gs_jw_array_end(gs_jw *w);
void gs_jw_key(gs_jw *w, const char *key);
void gs_jw_str(gs_jw *w, const char *s);    /* NULL: "" */
void gs_jw_int(gs_jw *w, int64_t v);
void gs_jw_uint(gs_jw *w, uint64_t v);
/* fmt: a printf format of one double ("%.6f"); null when v is not finite. */
void gs_jw_num(gs_jw *w, const char *fmt, double v);
void gs_jw_bool(gs_jw *w, bool v);
void gs_jw_null(gs_jw *w);
/* A value already written as JSON (a nested document). */
void gs_jw_raw(gs_jw *w, const char *json);
/* The separator before the next item, instead of ", " (e.g. ",\n   "). */
void gs_jw_break(gs_jw *w, const char *sep);
/* Text outside the item structure (a newline before a closing bracket). */
void gs_jw_text(gs_jw *w, const char *text);
/* The end of a document whose last member is a list of objects a line each (a report's
 * "results"): "\n]}\n" after the list, the whole written to out and w's buffer freed. */
void gs_jw_finish_list(gs_jw *w, FILE *out);

/* s as a JSON string literal, appended to out / written to out. */
void gs_json_escape(GString *out, const char *s);
void gs_json_str(FILE *out, const char *s);

/* ---- samples (stats.c) ---- */
/* The median of n values (0 for none). Sorts v in place, so percentiles can be read after. */
double gs_median(double *v, size_t n);

G_END_DECLS

#endif
