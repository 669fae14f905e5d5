/* test_backend.c - the simulated device (pages, placement, reference addresses), the latency
 * model, and the fault injector. */
#include <glib/gstdio.h>
#include <math.h>

#include "testutil.h"

START_TEST(sim_fails_when_pages_run_out)
{
    gs_sim_config sc = {.total_bytes = 10 * MiB};
    gs_backend *be = gs_sim_backend_new(&sc);
    gs_devcalls calls = {0};
    uint64_t a, b, c, fr, tot;
    ck_assert_int_eq(gs_dev_malloc(be, &calls, 3 * MiB, &a), GS_OK); /* takes 2 pages */
    ck_assert_int_eq(gs_dev_mem_info(be, &calls, &fr, &tot), GS_OK);
    ck_assert_uint_eq(fr, 6 * MiB);
    ck_assert_uint_eq(tot, 10 * MiB);
    ck_assert_int_eq(gs_dev_malloc(be, &calls, 6 * MiB, &b), GS_OK);
    ck_assert_int_eq(gs_dev_malloc(be, &calls, 1, &c), GS_ERR_OOM);
    ck_assert_uint_eq(calls.failed[GS_CALL_MALLOC], 1);
    ck_assert_uint_eq(calls.n[GS_CALL_MALLOC], 3);
    ck_assert_uint_eq(a % (2 * MiB), 0);
    ck_assert(b + 6 * MiB <= a || a + 4 * MiB <= b); /* no overlap */
    ck_assert_int_eq(gs_dev_free(be, &calls, a), GS_OK);
    ck_assert_int_eq(gs_dev_free(be, &calls, a), GS_ERR_INVALID); /* double free */
    ck_assert_int_eq(gs_dev_malloc(be, &calls, 4 * MiB, &c), GS_OK);
    gs_backend_destroy(be);
}
END_TEST

START_TEST(sim_model_places_downward_and_reuses_chunk_slack)
{
    gs_sim_config sc = {.total_bytes = 80 * GiB};
    gs_backend *be = gs_sim_backend_new(&sc);
    uint64_t a, b, c, d;
    ck_assert_int_eq(gs_dev_malloc(be, NULL, 20 * MiB, &a), GS_OK);
    ck_assert_int_eq(gs_dev_malloc(be, NULL, 2 * MiB, &b), GS_OK);
    ck_assert_uint_eq(b, a + 20 * MiB); /* the 12 MiB left in a's 32 MiB chunk */
    ck_assert_int_eq(gs_dev_malloc(be, NULL, 50 * MiB, &c), GS_OK);
    ck_assert_uint_eq(c, a - 64 * MiB); /* next chunk below, rounded to 32 MiB */
    ck_assert_int_eq(gs_dev_free(be, NULL, a), GS_OK);
    ck_assert_int_eq(gs_dev_malloc(be, NULL, 16 * MiB, &d), GS_OK);
    /* a's freed range merged with c's 14 MiB slack below it: one 34 MiB hole, used from its low end */
    ck_assert_uint_eq(d, c + 50 * MiB);
    gs_backend_destroy(be);
}
END_TEST

START_TEST(sim_follows_script_until_sizes_diverge)
{
    uint64_t addrs[] = {0x7f5000000000, 0x7f5000200000, 0x7f5000400000};
    uint64_t sizes[] = {2 * MiB, 20 * MiB, 2 * MiB};
    gs_sim_config sc = {.total_bytes = 80 * GiB, .script_addrs = addrs, .script_sizes = sizes,
                        .script_n = 3};
    gs_backend *be = gs_sim_backend_new(&sc);
    uint64_t a, b, c;
    ck_assert_int_eq(gs_dev_malloc(be, NULL, 2 * MiB, &a), GS_OK);
    ck_assert_uint_eq(a, addrs[0]);
    ck_assert_int_eq(gs_dev_malloc(be, NULL, 20 * MiB, &b), GS_OK);
    ck_assert_uint_eq(b, addrs[1]);
    ck_assert_int_eq(gs_dev_malloc(be, NULL, 4 * MiB, &c), GS_OK); /* size differs: model */
    ck_assert_uint_ne(c, addrs[2]);
    ck_assert_uint_eq(gs_sim_script_used(be), 2);
    gs_backend_destroy(be);
}
END_TEST

START_TEST(sim_clock_advances_by_calibrated_latency)
{
    gs_calibration *cal = gs_calibration_builtin();
    gs_sim_config sc = {.total_bytes = 80 * GiB, .cal = cal};
    gs_backend *be = gs_sim_backend_new(&sc);
    gs_devcalls calls = {0};
    uint64_t a;
    ck_assert_int_eq(gs_dev_malloc(be, &calls, 2 * MiB, &a), GS_OK);
    ck_assert_double_eq_tol(calls.time_us[GS_CALL_MALLOC], 49.41, 1e-9); /* the table's median */
    ck_assert_int_eq(gs_dev_free(be, &calls, a), GS_OK);
    ck_assert_double_eq_tol(calls.time_us[GS_CALL_FREE], 45.72, 1e-9); /* cudaFree_touched */
    ck_assert_double_eq_tol(gs_devcalls_total_us(&calls), 49.41 + 45.72, 1e-9);
    gs_backend_destroy(be);
    gs_calibration_free(cal);
}
END_TEST

START_TEST(calibration_interpolates_and_extrapolates)
{
    gs_calibration *cal = gs_calibration_builtin();
    /* between 1 GiB (200.48) and 4 GiB (633.88): linear in size */
    double mid = gs_calibration_us(cal, GS_CALL_MALLOC, 2 * GiB + GiB / 2);
    ck_assert_double_eq_tol(mid, 200.48 + (633.88 - 200.48) * 0.5, 1e-6);
    ck_assert_double_eq_tol(gs_calibration_us(cal, GS_CALL_MALLOC, 1), 48.87, 1e-9);
    /* beyond 16 GiB cudaFree keeps growing along the last slope */
    double f16 = gs_calibration_us(cal, GS_CALL_FREE, 16 * GiB);
    double f32 = gs_calibration_us(cal, GS_CALL_FREE, 32 * GiB);
    ck_assert_double_eq_tol(f16, 13956.67, 1e-6);
    ck_assert(f32 > f16);
    ck_assert_double_eq_tol(gs_calibration_us(cal, GS_CALL_SET_ACCESS, 2 * MiB), 30.55, 1e-9);
    gs_calibration_free(cal);
}
END_TEST

START_TEST(calibration_load_rejects_bad_file)
{
    char *dir = g_dir_make_tmp("gs-cal-XXXXXX", NULL);
    char *path = g_build_filename(dir, "cal.csv", NULL);
    g_file_set_contents(path, "op,size_bytes,median_us\ncudaMalloc,512,10\ncudaFree,abc,3\n", -1, NULL);
    char *msg = NULL;
    ck_assert_ptr_null(gs_calibration_load(path, &msg));
    ck_assert_msg(strstr(msg, ":3:") != NULL, "message: %s", msg);
    g_free(msg);
    g_file_set_contents(path, "op,size_bytes,median_us\ncudaMalloc,512,10\ncudaMalloc,1024,20\n", -1, NULL);
    gs_calibration *cal = gs_calibration_load(path, &msg);
    ck_assert_ptr_nonnull(cal);
    ck_assert_double_eq_tol(gs_calibration_us(cal, GS_CALL_MALLOC, 768), 15.0, 1e-9);
    ck_assert_double_eq_tol(gs_calibration_us(cal, GS_CALL_FREE, 768), 0.0, 1e-9);
    gs_calibration_free(cal);
    ck_assert_ptr_null(gs_calibration_load("/nonexistent/cal.csv", &msg));
    g_free(msg);
    g_unlink(path);
    g_rmdir(dir);
    g_free(path);
    g_free(dir);
}
END_TEST

START_TEST(faulty_fails_nth_masked_call_only)
{
    gs_sim_config sc = {.total_bytes = 80 * GiB};
    gs_faulty_config fc = {.mask = 1u << GS_CALL_MALLOC, .fail_nth = 2, .status = GS_ERR_DEVICE};
    gs_backend *be = gs_faulty_backend_new(gs_sim_backend_new(&sc), &fc);
    uint64_t a, b, c;
    ck_assert_int_eq(gs_dev_malloc(be, NULL, 2 * MiB, &a), GS_OK);
    ck_assert_int_eq(gs_dev_free(be, NULL, a), GS_OK); /* frees are not counted */
    ck_assert_int_eq(gs_dev_malloc(be, NULL, 2 * MiB, &b), GS_ERR_DEVICE);
    ck_assert_int_eq(gs_dev_malloc(be, NULL, 2 * MiB, &c), GS_OK);
    ck_assert_uint_eq(gs_faulty_injected(be), 1);
    gs_backend_destroy(be);
}
END_TEST

START_TEST(faulty_probability_is_seeded)
{
    int fails[2] = {0, 0};
    for (int run = 0; run < 2; run++) {
        gs_sim_config sc = {.total_bytes = 80 * GiB};
        gs_faulty_config fc = {.mask = 1u << GS_CALL_MALLOC, .probability = 0.3, .seed = 42};
        gs_backend *be = gs_faulty_backend_new(gs_sim_backend_new(&sc), &fc);
        for (int i = 0; i < 1000; i++) {
            uint64_t a;
            if (gs_dev_malloc(be, NULL, 2 * MiB, &a) != GS_OK) fails[run]++;
            else gs_dev_free(be, NULL, a);
        }
        gs_backend_destroy(be);
    }
    ck_assert_int_eq(fails[0], fails[1]);
    /* binomial(1000, 0.3): mean 300, sd 14.5; the seed makes it one fixed draw */
    ck_assert_int_gt(fails[0], 230);
    ck_assert_int_lt(fails[0], 370);
}
END_TEST

START_TEST(strerror_names_every_status)
{
    ck_assert_str_eq(gs_strerror(GS_OK), "success");
    ck_assert_str_eq(gs_strerror(GS_ERR_OOM), "out of device memory");
    ck_assert_str_eq(gs_call_name(GS_CALL_MALLOC), "cudaMalloc");
    ck_assert_str_eq(gs_call_name(GS_CALL_UNMAP), "cuMemUnmap");
}
END_TEST

static Suite *backend_suite(void)
{
    Suite *s = suite_create("backend");
    TCase *tc = tcase_create("sim");
    tcase_add_test(tc, sim_fails_when_pages_run_out);
    tcase_add_test(tc, sim_model_places_downward_and_reuses_chunk_slack);
    tcase_add_test(tc, sim_follows_script_until_sizes_diverge);
    tcase_add_test(tc, sim_clock_advances_by_calibrated_latency);
    tcase_add_test(tc, calibration_interpolates_and_extrapolates);
    tcase_add_test(tc, calibration_load_rejects_bad_file);
    tcase_add_test(tc, faulty_fails_nth_masked_call_only);
    tcase_add_test(tc, faulty_probability_is_seeded);
    tcase_add_test(tc, strerror_names_every_status);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) { return run_suite(backend_suite()); }
