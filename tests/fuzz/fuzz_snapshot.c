/* fuzz_snapshot.c - the converter's snapshot reader in C (traces/snapshot.c, pickle.c: gpusim
 * read-snapshot), on any bytes.
 *
 * Promises checked for every input:
 *   - gs_snapshot_read either writes its output or declines with one printable line saying why,
 *     and writes nothing then;
 *   - what it writes is laid out as snapshot.c says, to the last byte: each device's frames
 *     are without NUL, each row's action is one of the converter's codes, only a free
 *     is deferred, its frame is one of its device's, its entry number below the device's count
 *     and above the row before's; each device's trace rows (snaprows.c) at most one an event,
 *     their times from 0 and never going back, each alloc numbered in turn, every allocator
 *     event at one of them; the rest of the snapshot is a pickle of its stated length
 *     that starts with PROTO 4 and ends with STOP.
 * Whether the rows are the ones the converter's own reader makes is tests/test_fastread.py's
 * and tests/fuzz/diff_convert.py --fast's question (the reader is Python).
 */
#include "fuzz.h"

#include <string.h>

static size_t take(const GString *o, size_t *pos, size_t n)
{
    GS_FUZZ_CHECK(*pos + n <= o->len, "the output ends early at %zu (+%zu of %zu)", *pos, n,
                  (size_t)o->len);
    size_t at = *pos;
    *pos += n;
    return at;
}

static uint64_t u(const GString *o, size_t *pos, size_t n)
{
    uint64_t v = 0;
    memcpy(&v, o->str + take(o, pos, n), n); /* (native order, little-endian here) */
    return v;
}

/* A device's rows, made by build_trace's pass in C (traces/snaprows.c): at most a row an event,
 * times from 0 and never going back, the converter's row codes, each alloc numbered in turn,
 * each allocator event at a row of the trace. */
static void check_rows(const GString *o, size_t *pos, uint32_t d, uint64_t events, uint32_t nframes)
{
    uint8_t made = (uint8_t)u(o, pos, 1);
    GS_FUZZ_CHECK(made <= 1, "device %u: rows flag %u", d, made);
    if (!made) return;
    uint64_t n = u(o, pos, 8);
    GS_FUZZ_CHECK(n <= events,
                  "device %u: %" G_GUINT64_FORMAT " rows of %" G_GUINT64_FORMAT " events", d, n,
                  events);
    size_t t_at = take(o, pos, 8 * n);
    const uint8_t *op = (const uint8_t *)o->str + take(o, pos, n);
    take(o, pos, 8 * n); /* stream */
    size_t id_at = take(o, pos, 8 * n);
    take(o, pos, 8 * n); /* size */
    size_t frame_at = take(o, pos, 4 * n);
    uint64_t prev_t = 0, allocs = 0;
    int64_t least = 0; /* the lowest id a free named (-k: the k-th synthesized block) */
    for (uint64_t r = 0; r < n; r++) {
        uint64_t t;
        int64_t id;
        uint32_t f;
        memcpy(&t, o->str + t_at + 8 * r, 8);
        memcpy(&id, o->str + id_at + 8 * r, 8);
        memcpy(&f, o->str + frame_at + 4 * r, 4);
        GS_FUZZ_CHECK(op[r] <= 3, "device %u row %" G_GUINT64_FORMAT ": op %u", d, r, op[r]);
        GS_FUZZ_CHECK(r ? t >= prev_t : t == 0,
                      "device %u row %" G_GUINT64_FORMAT ": time %" G_GUINT64_FORMAT
                      " after %" G_GUINT64_FORMAT,
                      d, r, t, prev_t);
        GS_FUZZ_CHECK(f <= nframes, "device %u row %" G_GUINT64_FORMAT ": frame %u", d, r, f);
        if (op[r] == 0)
            GS_FUZZ_CHECK(id == (int64_t)++allocs,
                          "device %u row %" G_GUINT64_FORMAT ": alloc %" G_GINT64_FORMAT, d, r, id);
        if (op[r] == 1 || op[r] == 2) { /* a free names an alloc before it, or a synthesized one */
            GS_FUZZ_CHECK(id && id <= (int64_t)allocs && f == 0,
                          "device %u row %" G_GUINT64_FORMAT ": free of %" G_GINT64_FORMAT
                          " (frame %u) after %" G_GUINT64_FORMAT " allocs",
                          d, r, id, f, allocs);
            least = id < least ? id : least;
        }
        prev_t = t;
    }
    uint64_t counts[8];
    for (int k = 0; k < 8; k++) counts[k] = u(o, pos, 8);
    GS_FUZZ_CHECK(counts[0] == allocs && counts[6] == prev_t && counts[7] <= 1,
                  "device %u: the pass's counts", d);
    uint64_t synth = u(o, pos, 8);
    take(o, pos, 16 * synth);
    GS_FUZZ_CHECK(least >= -(int64_t)synth,
                  "device %u: a free of block %" G_GINT64_FORMAT " of %" G_GUINT64_FORMAT
                  " synthesized",
                  d, least, synth);
    uint64_t pending = u(o, pos, 8);
    take(o, pos, 32 * pending);
    uint64_t live = u(o, pos, 8);
    take(o, pos, 8 * live);
    GS_FUZZ_CHECK(live <= allocs && pending <= allocs + synth, "device %u: blocks left open", d);
    uint64_t segments = u(o, pos, 8);
    take(o, pos, 8 * segments);
    uint64_t nev = u(o, pos, 8);
    for (uint64_t k = 0; k < nev; k++) {
        uint8_t a = (uint8_t)u(o, pos, 1);
        take(o, pos, 16); /* addr, size */
        uint64_t seq = u(o, pos, 8);
        GS_FUZZ_CHECK(a >= 3 && a <= 7 && seq <= n,
                      "device %u: allocator event %u at row %" G_GUINT64_FORMAT, d, a, seq);
    }
}

static void check_output(const GString *o)
{
    size_t pos = 0;
    GS_FUZZ_CHECK(o->len >= 8 && memcmp(o->str, "GSSNAP02", 8) == 0, "no magic");
    pos = 8;
    uint32_t ndev = (uint32_t)u(o, &pos, 4);
    uint64_t all = 0;
    for (uint32_t d = 0; d < ndev; d++) {
        uint64_t entries = u(o, &pos, 8), rows = u(o, &pos, 8);
        all += entries;
        GS_FUZZ_CHECK(rows <= entries,
                      "device %u: %" G_GUINT64_FORMAT " rows of %" G_GUINT64_FORMAT " entries", d,
                      rows, entries);
        uint8_t program = (uint8_t)u(o, &pos, 1);
        GS_FUZZ_CHECK(program <= 1, "program flag %u", program);
        uint32_t nframes = (uint32_t)u(o, &pos, 4);
        for (uint32_t f = 0; f < nframes; f++) {
            uint32_t n = (uint32_t)u(o, &pos, 4);
            const char *s = o->str + take(o, &pos, n);
            GS_FUZZ_CHECK(memchr(s, 0, n) == NULL, "a NUL in frame %u of device %u", f, d);
        }
        const uint8_t *action = (const uint8_t *)o->str + take(o, &pos, rows);
        const uint8_t *deferred = (const uint8_t *)o->str + take(o, &pos, rows);
        take(o, &pos, 8 * rows * 4); /* stream, addr, size, time_us */
        size_t where_at = take(o, &pos, 8 * rows), frame_at = take(o, &pos, 4 * rows);
        uint64_t prev = 0;
        for (uint64_t r = 0; r < rows; r++) {
            uint64_t w;
            uint32_t f;
            memcpy(&w, o->str + where_at + 8 * r, 8);
            memcpy(&f, o->str + frame_at + 4 * r, 4);
            GS_FUZZ_CHECK(action[r] <= 7, "row %" G_GUINT64_FORMAT ": action %u", r, action[r]);
            GS_FUZZ_CHECK(deferred[r] <= (action[r] == 1),
                          "row %" G_GUINT64_FORMAT ": deferred %u for action %u", r, deferred[r],
                          action[r]);
            GS_FUZZ_CHECK(f <= nframes, "row %" G_GUINT64_FORMAT ": frame %u of %u", r, f, nframes);
            GS_FUZZ_CHECK(w < entries && (r == 0 || w > prev),
                          "row %" G_GUINT64_FORMAT ": entry %" G_GUINT64_FORMAT
                          " after %" G_GUINT64_FORMAT,
                          r, w, prev);
            prev = w;
        }
        check_rows(o, &pos, d, rows, nframes);
    }
    GS_FUZZ_CHECK(all > 0, "an output with no entries");
    uint32_t nstreams = (uint32_t)u(o, &pos, 4);
    take(o, &pos, 8 * (size_t)nstreams);
    uint32_t npools = (uint32_t)u(o, &pos, 4);
    for (uint32_t k = 0; k < npools; k++) {
        int64_t a = (int64_t)u(o, &pos, 8), b = (int64_t)u(o, &pos, 8);
        uint64_t count = u(o, &pos, 8);
        GS_FUZZ_CHECK((a || b) && count > 0,
                      "pool (%" G_GINT64_FORMAT ", %" G_GINT64_FORMAT ") with %" G_GUINT64_FORMAT
                      " allocations",
                      a, b, count);
    }
    uint64_t n = u(o, &pos, 8);
    size_t at = take(o, &pos, n);
    GS_FUZZ_CHECK(pos == o->len, "%zu bytes after the rest", (size_t)o->len - pos);
    GS_FUZZ_CHECK(n >= 3 && memcmp(o->str + at, "\x80\x04", 2) == 0 && o->str[at + n - 1] == '.',
                  "the rest is no pickle");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *path = gs_fuzz_file(data, size);
    GString *out = g_string_new(NULL);
    char *why = NULL;
    if (gs_snapshot_read(path, 0, NULL, out, &why)) {
        GS_FUZZ_CHECK(why == NULL, "an output and a reason");
        check_output(out);
    } else {
        GS_FUZZ_CHECK(why && *why, "declined without a reason");
        GS_FUZZ_CHECK(out->len == 0, "declined after writing %zu bytes", (size_t)out->len);
        for (const char *c = why; *c; c++)
            GS_FUZZ_CHECK((unsigned char)*c >= 0x20 && *c != 0x7f, "reason with byte 0x%02x",
                          (unsigned char)*c);
    }
    g_free(why);
    g_string_free(out, TRUE);
    return 0;
}
