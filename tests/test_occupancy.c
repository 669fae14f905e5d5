/* test_occupancy.c - the occupancy index of the offline planner (sim/occupancy.h): its lowest
 * free offset over a window of slots against a scan of every range taken, on hand-made cases
 * and on random windows, offsets and sizes (ranges that overlap among themselves too). */
#include "testutil.h"

#include "occupancy.h"

typedef struct {
    size_t lo, hi;
    uint64_t off, size;
} rect;

/* The lowest y such that [y, y + size) meets no rect whose slots meet [lo, hi): raised past
 * any rect in the way until none is. */
static uint64_t scan_lowest(const rect *r, size_t n, size_t lo, size_t hi, uint64_t size)
{
    uint64_t y = 0;
    for (bool again = true; again;) {
        again = false;
        for (size_t i = 0; i < n; i++)
            if (r[i].lo < hi && lo < r[i].hi && r[i].off < y + size && y < r[i].off + r[i].size) {
                y = r[i].off + r[i].size;
                again = true;
            }
    }
    return y;
}

/* Three slots: a range over slot 0 is no obstacle to a window of slots 1-2; one over 0-1 is;
 * touching ranges leave no gap between them, and a gap of the request's size is taken. */
START_TEST(windows_and_gaps)
{
    gs_occupancy *o = gs_occupancy_new(3);
    ck_assert_uint_eq(gs_occupancy_lowest(o, 0, 3, 10), 0);
    gs_occupancy_take(o, 0, 1, 0, 10);
    ck_assert_uint_eq(gs_occupancy_lowest(o, 1, 3, 10), 0);
    ck_assert_uint_eq(gs_occupancy_lowest(o, 0, 2, 10), 10);
    gs_occupancy_take(o, 0, 2, 10, 5); /* [10, 15) over slots 0-1 */
    gs_occupancy_take(o, 1, 2, 20, 5); /* [20, 25) over slot 1: a gap of 5 at 15 */
    ck_assert_uint_eq(gs_occupancy_lowest(o, 1, 2, 5), 0);
    ck_assert_uint_eq(gs_occupancy_lowest(o, 0, 2, 5), 15);
    ck_assert_uint_eq(gs_occupancy_lowest(o, 0, 2, 6), 25);
    gs_occupancy_take(o, 2, 3, 15, 5); /* slot 2 only: the gap stays for a window of 0-1 */
    ck_assert_uint_eq(gs_occupancy_lowest(o, 0, 2, 5), 15);
    ck_assert_uint_eq(gs_occupancy_lowest(o, 0, 3, 5), 25);
    gs_occupancy_take(o, 0, 3, 15, 5); /* fills it: [0, 25) is taken over slots 0-1 */
    ck_assert_uint_eq(gs_occupancy_lowest(o, 0, 2, 1), 25);
    ck_assert_uint_eq(gs_occupancy_lowest(o, 1, 2, 10), 0); /* [0, 10) is slot 0's alone */
    gs_occupancy_free(o);
}
END_TEST

/* Random rectangles, most at the lowest free offset (as the planner places them), some
 * anywhere (overlapping others): every answer is the scan's. Slots from 1 (a tree of one
 * leaf) to 300, windows of every width. */
START_TEST(random_against_a_scan)
{
    GRand *r = g_rand_new_with_seed(1717);
    enum { RECTS = 120 };
    rect *rs = g_new(rect, RECTS);
    for (int k = 0; k < 400; k++) {
        size_t slots = (size_t)g_rand_int_range(r, 1, k % 2 ? 20 : 300);
        gs_occupancy *o = gs_occupancy_new(slots);
        size_t n = 0;
        for (int j = 0; j < RECTS; j++) {
            size_t lo = (size_t)g_rand_int_range(r, 0, (gint32)slots);
            size_t hi = lo + (size_t)g_rand_int_range(r, 1, (gint32)(slots - lo) + 1);
            uint64_t size = (uint64_t)g_rand_int_range(r, 1, 9) * (k % 3 ? 1 : 512);
            uint64_t want = scan_lowest(rs, n, lo, hi, size);
            uint64_t got = gs_occupancy_lowest(o, lo, hi, size);
            ck_assert_msg(got == want,
                          "set %d, rect %d: [%zu, %zu) size %" G_GUINT64_FORMAT
                          ": %" G_GUINT64_FORMAT ", the scan says %" G_GUINT64_FORMAT,
                          k, j, lo, hi, size, got, want);
            uint64_t off = g_rand_int_range(r, 0, 4) ? want
                                                     : (uint64_t)g_rand_int_range(r, 0, 40) * size;
            gs_occupancy_take(o, lo, hi, off, size);
            rs[n++] = (rect){lo, hi, off, size};
        }
        gs_occupancy_free(o);
    }
    g_free(rs);
    g_rand_free(r);
}
END_TEST

static Suite *occupancy_suite(void)
{
    Suite *s = suite_create("occupancy");
    TCase *tc = tcase_create("occupancy");
    tcase_add_test(tc, windows_and_gaps);
    tcase_add_test(tc, random_against_a_scan);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return run_suite(occupancy_suite());
}
