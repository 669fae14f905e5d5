/* size.c - parse sizes the way people write them: "18.2GiB", "512MiB", "6.25 GiB", "4096".
 *
 * Binary units (KiB, MiB, GiB, TiB; also K, M, G, T) are powers of 1024; decimal units (kB, MB,
 * GB, TB) are powers of 1000. A fraction is exact in decimal arithmetic, rounded down to whole
 * bytes: "6.25GiB" is 6710886400 bytes. The result must be > 0 and fit in 64 bits.
 */
#include <string.h>

#include "util.h"


static gboolean bad(GError **err, const char *s, const char *why)
{
    g_set_error(err, g_quark_from_static_string("gs-size-error"), 0,
                "bad size '%s': %s (examples: 18.2GiB, 512MiB, 4096)", s, why);
    return FALSE;
}

gboolean gs_parse_size(const char *s, uint64_t *out, GError **err)
{
    static const struct {
        const char *name;
        uint64_t mult;
    } units[] = {
        {"", 1},
        {"B", 1},
        {"K", UINT64_C(1) << 10}, {"KiB", UINT64_C(1) << 10}, {"kB", 1000}, {"KB", 1000},
        {"M", UINT64_C(1) << 20}, {"MiB", UINT64_C(1) << 20}, {"MB", 1000000},
        {"G", UINT64_C(1) << 30}, {"GiB", UINT64_C(1) << 30}, {"GB", 1000000000},
        {"T", UINT64_C(1) << 40}, {"TiB", UINT64_C(1) << 40}, {"TB", UINT64_C(1000000000000)},
    };
    const char *p = s;
    uint64_t whole = 0, frac = 0, frac_div = 1;
    if (!g_ascii_isdigit(*p) && *p != '.') return bad(err, s, "not a number");
    for (; g_ascii_isdigit(*p); p++) {
        if (whole > (UINT64_MAX - 9) / 10) return bad(err, s, "too large");
        whole = whole * 10 + (uint64_t)(*p - '0');
    }
    if (*p == '.') {
        p++;
        if (!g_ascii_isdigit(*p)) return bad(err, s, "no digits after '.'");
        for (; g_ascii_isdigit(*p); p++) {
            if (frac_div >= UINT64_C(1000000000000)) continue; /* beyond 12 digits: ignored */
            frac = frac * 10 + (uint64_t)(*p - '0');
            frac_div *= 10;
        }
    }
    while (*p == ' ') p++;
    for (size_t i = 0; i < G_N_ELEMENTS(units); i++) {
        if (strcmp(p, units[i].name) != 0) continue;
        if (frac && units[i].mult == 1)
            return bad(err, s, "a fraction needs a unit (did you mean GiB?)");
        uint64_t m = units[i].mult;
        if (whole && m > UINT64_MAX / whole) return bad(err, s, "too large");
        uint64_t v = whole * m;
        /* frac/frac_div * m without overflow: frac < frac_div <= 1e12, m <= 2^40 */
        unsigned __int128 f = (unsigned __int128)frac * m / frac_div;
        if (v > UINT64_MAX - (uint64_t)f) return bad(err, s, "too large");
        v += (uint64_t)f;
        if (v == 0) return bad(err, s, "must be more than 0 bytes");
        *out = v;
        return TRUE;
    }
    return bad(err, s, "unknown unit");
}

char *gs_format_size(uint64_t b)
{
    if (b >= GS_GiB) return g_strdup_printf("%.3f GiB", (double)b / (double)GS_GiB);
    if (b >= GS_MiB) return g_strdup_printf("%.2f MiB", (double)b / (double)GS_MiB);
    if (b >= 1024) return g_strdup_printf("%.2f KiB", (double)b / 1024.0);
    return g_strdup_printf("%" G_GUINT64_FORMAT " B", b);
}

/* "%g" of b in unit u, if it reads back as exactly b; else NULL. */
static char *exact_in(uint64_t b, uint64_t unit, const char *name, const char *sep)
{
    char num[32];
    g_snprintf(num, sizeof num, "%g", (double)b / (double)unit);
    char *s = g_strdup_printf("%s%s", num, name);
    uint64_t back = 0;
    if (gs_parse_size(s, &back, NULL) && back == b) {
        g_free(s);
        return g_strdup_printf("%s%s%s", num, sep, name);
    }
    g_free(s);
    return NULL;
}

char *gs_format_capacity(uint64_t b, const char *sep)
{
    char *s = NULL;
    if (b >= GS_GiB / 4 && (s = exact_in(b, GS_GiB, "GiB", sep))) return s;
    if (b >= GS_MiB && (s = exact_in(b, GS_MiB, "MiB", sep))) return s;
    return g_strdup_printf("%" G_GUINT64_FORMAT "%sB", b, sep);
}
