/* test_backend.c - the simulated device (pages, placement, reference addresses, virtual
 * memory), the latency model, and the fault injector. */
#include <glib/gstdio.h>
#include <math.h>

#include "testutil.h"

START_TEST(sim_fails_when_pages_run_out)
{
    gs_sim_config sc = {.total_bytes = 10 * MiB}; /* 5 pages, one of them never handed out */
    gs_backend *be = gs_sim_backend_new(&sc);
    gs_devcalls calls = {0};
    uint64_t a, b, c, fr, tot;
    ck_assert_int_eq(gs_dev_malloc(be, &calls, 3 * MiB, &a), GS_OK); /* takes 2 pages */
    ck_assert_int_eq(gs_dev_mem_info(be, &calls, &fr, &tot), GS_OK);
    ck_assert_uint_eq(fr, 6 * MiB);
    ck_assert_uint_eq(tot, 10 * MiB);
    ck_assert_int_eq(gs_dev_malloc(be, &calls, 6 * MiB, &b), GS_ERR_OOM); /* all 3 free pages */
    ck_assert_int_eq(gs_dev_malloc(be, &calls, 4 * MiB, &b), GS_OK);
    ck_assert_int_eq(gs_dev_malloc(be, &calls, 1, &c), GS_ERR_OOM); /* a page, the last one */
    ck_assert_uint_eq(calls.failed[GS_CALL_MALLOC], 2);
    ck_assert_uint_eq(calls.n[GS_CALL_MALLOC], 4);
    ck_assert_uint_eq(a % (2 * MiB), 0);
    ck_assert(b + 4 * MiB <= a || a + 4 * MiB <= b); /* no overlap */
    ck_assert_int_eq(gs_dev_free(be, &calls, a, 3 * MiB), GS_OK);
    ck_assert_int_eq(gs_dev_free(be, &calls, a, 3 * MiB), GS_ERR_INVALID); /* double free */
    ck_assert_int_eq(gs_dev_malloc(be, &calls, 2 * MiB, &c), GS_OK);
    gs_backend_destroy(be);
}
END_TEST

/* The driver's placement rules (backends/simdevice.c), one by one, as offsets from X. */
START_TEST(sim_model_follows_the_driver_rules)
{
    gs_sim_config sc = {.total_bytes = 80 * GiB};
    gs_backend *be = gs_sim_backend_new(&sc);
    const uint64_t x = gs_sim_origin(be);
    uint64_t a, b, c, d, e, f, g;
    ck_assert_int_eq(gs_dev_malloc(be, NULL, 20 * MiB, &a), GS_OK);
    ck_assert_uint_eq(a, x + 74 * MiB); /* the context's 24 MiB gap (rule 5) */
    ck_assert_int_eq(gs_dev_malloc(be, NULL, 2 * MiB, &b), GS_OK);
    ck_assert_uint_eq(b, x); /* its other gap, lower (rules 2, 5) */
    ck_assert_int_eq(gs_dev_malloc(be, NULL, 20 * MiB, &c), GS_OK);
    ck_assert_uint_eq(c, x - 446 * MiB); /* a new 32 MiB range at T - 32 MiB (rule 3) */
    ck_assert_int_eq(gs_dev_malloc(be, NULL, 2 * MiB, &d), GS_OK);
    ck_assert_uint_eq(d, c + 20 * MiB); /* the lowest gap in a live range (rule 2) */
    ck_assert_int_eq(gs_dev_malloc(be, NULL, 50 * MiB, &e), GS_OK);
    ck_assert_uint_eq(e, c - 64 * MiB); /* V = 64 MiB, below the lowest range (rule 3) */
    ck_assert_int_eq(gs_dev_free(be, NULL, e, 50 * MiB), GS_OK);
    ck_assert_int_eq(gs_dev_malloc(be, NULL, 50 * MiB, &f), GS_OK);
    ck_assert_uint_eq(f, e); /* the bottom range went: the carved space shrank (rule 4) */
    ck_assert_int_eq(gs_dev_free(be, NULL, c, 20 * MiB), GS_OK);
    ck_assert_int_eq(gs_dev_free(be, NULL, d, 2 * MiB), GS_OK);
    /* c's range is a 32 MiB hole now, no larger than a 20 MiB request's range needs: unused */
    ck_assert_int_eq(gs_dev_malloc(be, NULL, 20 * MiB, &g), GS_OK);
    ck_assert_uint_eq(g, f - 32 * MiB);
    ck_assert_int_eq(gs_dev_free(be, NULL, g, 20 * MiB), GS_OK);
    ck_assert_int_eq(gs_dev_free(be, NULL, f, 50 * MiB), GS_OK);
    /* f's range was the bottom: the carved space shrinks to c's hole, and past it */
    ck_assert_int_eq(gs_dev_malloc(be, NULL, 20 * MiB, &g), GS_OK);
    ck_assert_uint_eq(g, c);
    /* the H200's rule: a range for a multiple of 512 MiB on a 512 MiB boundary */
    gs_backend_destroy(be);
    sc.align_512m = true;
    sc.origin = UINT64_C(0x7f0000000000) + 30 * MiB;
    be = gs_sim_backend_new(&sc);
    ck_assert_int_eq(gs_dev_malloc(be, NULL, 512 * MiB, &a), GS_OK);
    ck_assert_uint_eq(a % (512 * MiB), 0);
    ck_assert_uint_eq(a, UINT64_C(0x7f0000000000) - 1024 * MiB);
    ck_assert_int_eq(gs_dev_malloc(be, NULL, 20 * MiB, &b), GS_OK);
    ck_assert_uint_eq(b, sc.origin + 74 * MiB);
    /* the VA skipped for the alignment is a hole, whose top the next new range takes (rule 3) */
    ck_assert_int_eq(gs_dev_malloc(be, NULL, 20 * MiB, &c), GS_OK);
    ck_assert_uint_eq(c, sc.origin - 446 * MiB);
    ck_assert(c > a + 512 * MiB);
    gs_backend_destroy(be);
}
END_TEST

/* Once everything is freed the device places as it did when fresh (a second run in a process). */
START_TEST(sim_empty_device_places_as_fresh)
{
    gs_sim_config sc = {.total_bytes = 80 * GiB};
    gs_backend *be = gs_sim_backend_new(&sc);
    uint64_t a[3], b[3];
    const uint64_t sizes[3] = {20 * MiB, 2 * MiB, 50 * MiB};
    for (int i = 0; i < 3; i++) ck_assert_int_eq(gs_dev_malloc(be, NULL, sizes[i], &a[i]), GS_OK);
    for (int i = 0; i < 3; i++) ck_assert_int_eq(gs_dev_free(be, NULL, a[i], sizes[i]), GS_OK);
    for (int i = 0; i < 3; i++) {
        ck_assert_int_eq(gs_dev_malloc(be, NULL, sizes[i], &b[i]), GS_OK);
        ck_assert_uint_eq(b[i], a[i]);
    }
    gs_backend_destroy(be);
}
END_TEST

/* Two simulated devices never share an address (under the PyTorch library's sim
 * backend two devices' blocks had the same addresses, and a free named the wrong heap): device
 * d's cudaMallocs and reservations lie in [d * 2^47, (d + 1) * 2^47), device 0's where they
 * always were; gs_backend_open names the device. */
START_TEST(sim_devices_have_disjoint_address_windows)
{
    const uint64_t span = UINT64_C(1) << 47;
    uint64_t a[3], va[3];
    for (int d = 0; d < 3; d++) {
        gs_backend_config bc = {.device = d, .sim = {.total_bytes = 8 * GiB}};
        gs_backend *be = NULL;
        ck_assert_int_eq(gs_backend_open("sim", &bc, &be, NULL), GS_OK);
        ck_assert_int_eq(gs_dev_malloc(be, NULL, 20 * MiB, &a[d]), GS_OK);
        ck_assert_int_eq(gs_dev_va_reserve(be, NULL, 40 * MiB, &va[d]), GS_OK);
        ck_assert_uint_eq(a[d] / span, (uint64_t)d);
        ck_assert_uint_eq(va[d] / span, (uint64_t)d);
        ck_assert_uint_eq(a[d] % span, a[0] % span); /* the same layout, moved */
        gs_backend_destroy(be);
    }
    ck_assert_uint_lt(a[0], span); /* device 0 keeps the layout below 2^47 (test_driver) */
    gs_backend_config bad = {.device = -1};
    gs_backend *be = NULL;
    char *msg = NULL;
    ck_assert_int_eq(gs_backend_open("sim", &bad, &be, &msg), GS_ERR_DEVICE);
    ck_assert_ptr_nonnull(strstr(msg, "-1"));
    g_free(msg);
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
    ck_assert_int_eq(gs_dev_free(be, &calls, a, 2 * MiB), GS_OK);
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

/* The built-in table is compiled, not parsed: it must model exactly what its CSV text does (the
 * measurement as written), to the bit, at every size the table names, next to them, between
 * them and beyond them. */
START_TEST(calibration_builtin_is_its_csv)
{
    char *dir = g_dir_make_tmp("gs-cal-XXXXXX", NULL);
    char *path = g_build_filename(dir, "builtin.csv", NULL);
    const char *csv = gs_calibration_builtin_csv();
    ck_assert(g_file_set_contents(path, csv, -1, NULL));
    char *msg = NULL;
    gs_calibration *parsed = gs_calibration_load(path, &msg);
    ck_assert_msg(parsed != NULL, "%s", msg);
    gs_calibration *built = gs_calibration_builtin();
    GArray *sizes = g_array_new(FALSE, FALSE, sizeof(uint64_t));
    uint64_t fixed[] = {0, 1, 3 * MiB, 100 * GiB, UINT64_MAX};
    g_array_append_vals(sizes, fixed, G_N_ELEMENTS(fixed));
    for (const char *l = csv; (l = strchr(l, '\n')) != NULL;) {
        l++;
        const char *f = strchr(l, ',');
        if (!f) break;
        uint64_t v = g_ascii_strtoull(f + 1, NULL, 10);
        uint64_t near[] = {v - 1, v, v + 1, v + v / 3};
        g_array_append_vals(sizes, near, G_N_ELEMENTS(near));
    }
    ck_assert_uint_gt(sizes->len, 300);
    for (int k = 0; k < GS_CALL_COUNT; k++)
        for (guint i = 0; i < sizes->len; i++) {
            uint64_t n = g_array_index(sizes, uint64_t, i);
            double a = gs_calibration_us(parsed, (gs_call_kind)k, n);
            double b = gs_calibration_us(built, (gs_call_kind)k, n);
            ck_assert_msg(memcmp(&a, &b, sizeof a) == 0, "%s of %" G_GUINT64_FORMAT " bytes: %.17g "
                          "parsed, %.17g compiled", gs_call_name((gs_call_kind)k), n, a, b);
        }
    g_array_free(sizes, TRUE);
    gs_calibration_free(built);
    gs_calibration_free(parsed);
    g_unlink(path);
    g_rmdir(dir);
    g_free(path);
    g_free(dir);
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
    ck_assert_int_eq(gs_dev_free(be, NULL, a, 2 * MiB), GS_OK); /* frees are not counted */
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
            else gs_dev_free(be, NULL, a, 2 * MiB);
        }
        gs_backend_destroy(be);
    }
    ck_assert_int_eq(fails[0], fails[1]);
    /* binomial(1000, 0.3): mean 300, sd 14.5; the seed makes it one fixed draw */
    ck_assert_int_gt(fails[0], 230);
    ck_assert_int_lt(fails[0], 370);
}
END_TEST

/* The observer sees every counted call with the bytes it concerned and the time it was charged. */
typedef struct {
    int n;
    gs_call_kind kind[8];
    uint64_t size[8];
    double us[8];
    gs_status st[8];
} seen_calls;

static void record_call(void *ud, gs_call_kind k, uint64_t size, double us, gs_status st)
{
    seen_calls *s = ud;
    ck_assert_int_lt(s->n, 8);
    s->kind[s->n] = k;
    s->size[s->n] = size;
    s->us[s->n] = us;
    s->st[s->n++] = st;
}

START_TEST(observer_sees_kind_size_time_and_status)
{
    gs_calibration *cal = gs_calibration_builtin();
    gs_sim_config sc = {.total_bytes = 4 * MiB, .cal = cal};
    gs_backend *be = gs_sim_backend_new(&sc);
    seen_calls seen = {0};
    be->observe = record_call;
    be->observe_ud = &seen;
    gs_devcalls calls = {0};
    uint64_t a, b, h, va;
    ck_assert_int_eq(gs_dev_malloc(be, &calls, 2 * MiB, &a), GS_OK);
    ck_assert_int_eq(gs_dev_malloc(be, &calls, 4 * MiB, &b), GS_ERR_OOM);
    ck_assert_int_eq(gs_dev_free(be, &calls, a, 2 * MiB), GS_OK);
    ck_assert_int_eq(gs_dev_va_reserve(be, &calls, 8 * MiB, &va), GS_OK);
    ck_assert_int_eq(gs_dev_page_create(be, &calls, 2 * MiB, &h), GS_OK);
    ck_assert_int_eq(gs_dev_page_release(be, &calls, h, 2 * MiB), GS_OK);
    ck_assert_int_eq(gs_dev_malloc(be, NULL, 2 * MiB, &a), GS_OK); /* not counted: not seen */
    ck_assert_int_eq(seen.n, 6);
    const gs_call_kind kinds[] = {GS_CALL_MALLOC, GS_CALL_MALLOC, GS_CALL_FREE,
                                  GS_CALL_VA_RESERVE, GS_CALL_PAGE_CREATE, GS_CALL_PAGE_RELEASE};
    const uint64_t sizes[] = {2 * MiB, 4 * MiB, 2 * MiB, 8 * MiB, 2 * MiB, 2 * MiB};
    double total = 0;
    for (int i = 0; i < 6; i++) {
        ck_assert_int_eq(seen.kind[i], kinds[i]);
        ck_assert_uint_eq(seen.size[i], sizes[i]);
        ck_assert_int_eq(seen.st[i], i == 1 ? GS_ERR_OOM : GS_OK);
        total += seen.us[i];
    }
    ck_assert_double_eq_tol(seen.us[0], 49.41, 1e-9);
    ck_assert_double_eq_tol(total, gs_devcalls_total_us(&calls), 1e-9);
    gs_backend_destroy(be);
    gs_calibration_free(cal);
}
END_TEST

START_TEST(median_of_odd_even_and_none)
{
    double odd[] = {5, 1, 3}, even[] = {4, 1, 3, 2};
    ck_assert_double_eq(gs_median(odd, 3), 3);
    ck_assert_double_eq(odd[0], 1); /* sorted in place */
    ck_assert_double_eq(odd[2], 5);
    ck_assert_double_eq(gs_median(even, 4), 2.5);
    ck_assert_double_eq(gs_median(NULL, 0), 0);
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

/* ---- the simulated device's virtual memory (cuMem*) ---- */

static gs_backend *vmm_device(uint64_t total)
{
    gs_sim_config sc = {.total_bytes = total};
    return gs_sim_backend_new(&sc);
}

START_TEST(vmm_reserve_create_map_access_unmap_release)
{
    gs_backend *be = vmm_device(1 * GiB);
    gs_devcalls calls = {0};
    ck_assert(gs_dev_has_vmm(be));
    ck_assert_uint_eq(be->ops->granularity(be->state), 2 * MiB);
    uint64_t va, h1, h2;
    ck_assert_int_eq(gs_dev_va_reserve(be, &calls, 64 * MiB, &va), GS_OK);
    ck_assert_uint_eq(va % (2 * MiB), 0);
    ck_assert_uint_eq(dev_used_bytes(be), 0); /* address space only */
    ck_assert_int_eq(gs_dev_page_create(be, &calls, 20 * MiB, &h1), GS_OK);
    ck_assert_int_eq(gs_dev_page_create(be, &calls, 2 * MiB, &h2), GS_OK);
    ck_assert(h1 != 0 && h2 != 0 && h1 != h2);
    ck_assert_uint_eq(dev_used_bytes(be), 22 * MiB); /* physical memory is taken at create */
    ck_assert_int_eq(gs_dev_map(be, &calls, va, 20 * MiB, h1), GS_OK);
    ck_assert_int_eq(gs_dev_map(be, &calls, va + 20 * MiB, 2 * MiB, h2), GS_OK);
    ck_assert_int_eq(gs_dev_set_access(be, &calls, va, 22 * MiB, 2 * MiB), GS_OK); /* across both */
    ck_assert_int_eq(gs_dev_unmap(be, &calls, va, 22 * MiB), GS_OK);     /* both at once */
    ck_assert_uint_eq(dev_used_bytes(be), 22 * MiB); /* unmapped, not yet released */
    ck_assert_int_eq(gs_dev_page_release(be, &calls, h1, 20 * MiB), GS_OK);
    ck_assert_int_eq(gs_dev_page_release(be, &calls, h2, 2 * MiB), GS_OK);
    ck_assert_uint_eq(dev_used_bytes(be), 0);
    ck_assert_int_eq(gs_dev_va_release(be, &calls, va, 64 * MiB), GS_OK);
    /* every call counted by kind, none failed */
    ck_assert_uint_eq(calls.n[GS_CALL_VA_RESERVE], 1);
    ck_assert_uint_eq(calls.n[GS_CALL_PAGE_CREATE], 2);
    ck_assert_uint_eq(calls.n[GS_CALL_MAP], 2);
    ck_assert_uint_eq(calls.n[GS_CALL_SET_ACCESS], 1);
    ck_assert_uint_eq(calls.n[GS_CALL_UNMAP], 1);
    ck_assert_uint_eq(calls.n[GS_CALL_PAGE_RELEASE], 2);
    ck_assert_uint_eq(calls.n[GS_CALL_VA_RELEASE], 1);
    for (int k = 0; k < GS_CALL_COUNT; k++) ck_assert_uint_eq(calls.failed[k], 0);
    gs_backend_destroy(be);
}
END_TEST

START_TEST(vmm_map_over_a_mapped_page_is_refused)
{
    gs_backend *be = vmm_device(1 * GiB);
    uint64_t va, h1, h2;
    ck_assert_int_eq(gs_dev_va_reserve(be, NULL, 40 * MiB, &va), GS_OK);
    ck_assert_int_eq(gs_dev_page_create(be, NULL, 20 * MiB, &h1), GS_OK);
    ck_assert_int_eq(gs_dev_page_create(be, NULL, 20 * MiB, &h2), GS_OK);
    ck_assert_int_eq(gs_dev_map(be, NULL, va, 20 * MiB, h1), GS_OK);
    /* overlapping the first mapping by its last 2 MiB page */
    ck_assert_int_eq(gs_dev_map(be, NULL, va + 18 * MiB, 20 * MiB, h2), GS_ERR_INVALID);
    /* the same handle twice in one place */
    ck_assert_int_eq(gs_dev_map(be, NULL, va, 20 * MiB, h1), GS_ERR_INVALID);
    /* a size other than the handle's, a misaligned address, outside the reservation */
    ck_assert_int_eq(gs_dev_map(be, NULL, va + 20 * MiB, 2 * MiB, h2), GS_ERR_INVALID);
    ck_assert_int_eq(gs_dev_map(be, NULL, va + 21 * MiB, 20 * MiB, h2), GS_ERR_INVALID);
    ck_assert_int_eq(gs_dev_map(be, NULL, va + 40 * MiB, 20 * MiB, h2), GS_ERR_INVALID);
    ck_assert_int_eq(gs_dev_map(be, NULL, va + 20 * MiB, 20 * MiB, h2), GS_OK);
    ck_assert_int_eq(gs_dev_map(be, NULL, va, 20 * MiB, 12345), GS_ERR_INVALID); /* no such handle */
    /* a reservation with mappings cannot be freed */
    ck_assert_int_eq(gs_dev_va_release(be, NULL, va, 40 * MiB), GS_ERR_INVALID);
    gs_backend_destroy(be);
}
END_TEST

START_TEST(vmm_mappings_across_a_granule_chunk)
{
    /* The device keeps each 2 MiB granule's mapping in tables of 1 GiB: a mapping across the
     * boundary is seen from both sides, unmapped whole from either table, and a second
     * reservation has tables of its own, clean (taken from those of a reservation released):
     * one mapping over the whole of it, across three tables, is taken. */
    gs_backend *be = vmm_device(4 * GiB);
    uint64_t va, vb, h1, h2, h3, h4;
    ck_assert_int_eq(gs_dev_va_reserve(be, NULL, 2 * GiB, &va), GS_OK);
    ck_assert_int_eq(gs_dev_page_create(be, NULL, 20 * MiB, &h1), GS_OK);
    ck_assert_int_eq(gs_dev_page_create(be, NULL, 20 * MiB, &h2), GS_OK);
    /* mapped above the boundary: a mapping from below it that reaches it is refused */
    ck_assert_int_eq(gs_dev_map(be, NULL, va + 1 * GiB, 20 * MiB, h1), GS_OK);
    ck_assert_int_eq(gs_dev_map(be, NULL, va + 1 * GiB - 10 * MiB, 20 * MiB, h2), GS_ERR_INVALID);
    ck_assert_int_eq(gs_dev_unmap(be, NULL, va + 1 * GiB, 20 * MiB), GS_OK);
    uint64_t at = va + 1 * GiB - 10 * MiB; /* half below the boundary, half above */
    ck_assert_int_eq(gs_dev_map(be, NULL, at, 20 * MiB, h1), GS_OK);
    ck_assert_int_eq(gs_dev_map(be, NULL, at + 18 * MiB, 20 * MiB, h2), GS_ERR_INVALID);
    ck_assert_int_eq(gs_dev_map(be, NULL, at - 18 * MiB, 20 * MiB, h2), GS_ERR_INVALID);
    ck_assert_int_eq(gs_dev_map(be, NULL, at + 20 * MiB, 20 * MiB, h2), GS_OK);
    ck_assert_int_eq(gs_dev_unmap(be, NULL, at + 10 * MiB, 20 * MiB), GS_ERR_INVALID);
    ck_assert_int_eq(gs_dev_unmap(be, NULL, at, 40 * MiB), GS_OK); /* both, in one call */
    ck_assert_int_eq(gs_dev_map(be, NULL, at + 10 * MiB, 20 * MiB, h1), GS_OK);
    ck_assert_int_eq(gs_dev_unmap(be, NULL, at + 10 * MiB, 20 * MiB), GS_OK);
    ck_assert_int_eq(gs_dev_va_release(be, NULL, va, 2 * GiB), GS_OK);
    ck_assert_int_eq(gs_dev_va_reserve(be, NULL, 3 * GiB, &vb), GS_OK);
    ck_assert_int_eq(gs_dev_page_create(be, NULL, 20 * MiB, &h3), GS_OK);
    ck_assert_int_eq(gs_dev_set_access(be, NULL, vb + 1 * GiB - 10 * MiB, 20 * MiB, 20 * MiB),
                     GS_ERR_INVALID); /* nothing mapped there in the new one */
    ck_assert_int_eq(gs_dev_map(be, NULL, vb + 1 * GiB - 10 * MiB, 20 * MiB, h3), GS_OK);
    ck_assert_int_eq(gs_dev_map(be, NULL, vb + 1 * GiB - 10 * MiB, 20 * MiB, h1), GS_ERR_INVALID);
    ck_assert_int_eq(gs_dev_unmap(be, NULL, vb + 1 * GiB - 10 * MiB, 20 * MiB), GS_OK);
    ck_assert_int_eq(gs_dev_page_create(be, NULL, 3 * GiB, &h4), GS_OK);
    ck_assert_int_eq(gs_dev_map(be, NULL, vb, 3 * GiB, h4), GS_OK);
    ck_assert_int_eq(gs_dev_set_access(be, NULL, vb, 3 * GiB, 3 * GiB), GS_OK);
    ck_assert_int_eq(gs_dev_map(be, NULL, vb + 2 * GiB + 4 * MiB, 20 * MiB, h3), GS_ERR_INVALID);
    ck_assert_int_eq(gs_dev_unmap(be, NULL, vb, 3 * GiB), GS_OK);
    ck_assert_int_eq(gs_dev_page_release(be, NULL, h4, 3 * GiB), GS_OK);
    ck_assert_int_eq(gs_dev_page_release(be, NULL, h1, 20 * MiB), GS_OK);
    ck_assert_int_eq(gs_dev_page_release(be, NULL, h2, 20 * MiB), GS_OK);
    ck_assert_int_eq(gs_dev_page_release(be, NULL, h3, 20 * MiB), GS_OK);
    ck_assert_uint_eq(dev_used_bytes(be), 0);
    gs_backend_destroy(be);
}
END_TEST
START_TEST(vmm_unmap_of_an_unmapped_range_is_refused)
{
    gs_backend *be = vmm_device(1 * GiB);
    uint64_t va, h;
    ck_assert_int_eq(gs_dev_va_reserve(be, NULL, 60 * MiB, &va), GS_OK);
    ck_assert_int_eq(gs_dev_unmap(be, NULL, va, 20 * MiB), GS_ERR_INVALID); /* nothing mapped */
    ck_assert_int_eq(gs_dev_set_access(be, NULL, va, 2 * MiB, 2 * MiB), GS_ERR_INVALID);
    ck_assert_int_eq(gs_dev_page_create(be, NULL, 20 * MiB, &h), GS_OK);
    ck_assert_int_eq(gs_dev_map(be, NULL, va + 20 * MiB, 20 * MiB, h), GS_OK);
    /* a range reaching past the mapping, and part of the mapping, are both refused whole */
    ck_assert_int_eq(gs_dev_unmap(be, NULL, va + 20 * MiB, 40 * MiB), GS_ERR_INVALID);
    ck_assert_int_eq(gs_dev_unmap(be, NULL, va + 20 * MiB, 2 * MiB), GS_ERR_INVALID);
    ck_assert_int_eq(gs_dev_set_access(be, NULL, va, 40 * MiB, 20 * MiB), GS_ERR_INVALID);
    ck_assert_int_eq(gs_dev_set_access(be, NULL, va + 20 * MiB, 20 * MiB, 20 * MiB), GS_OK);
    ck_assert_int_eq(gs_dev_unmap(be, NULL, va + 20 * MiB, 20 * MiB), GS_OK);
    ck_assert_int_eq(gs_dev_unmap(be, NULL, va + 20 * MiB, 20 * MiB), GS_ERR_INVALID); /* twice */
    ck_assert_int_eq(gs_dev_page_release(be, NULL, h, 20 * MiB), GS_OK);
    ck_assert_int_eq(gs_dev_page_release(be, NULL, h, 20 * MiB), GS_ERR_INVALID); /* twice */
    ck_assert_int_eq(gs_dev_va_release(be, NULL, va, 20 * MiB), GS_ERR_INVALID); /* wrong size */
    ck_assert_int_eq(gs_dev_va_release(be, NULL, va, 60 * MiB), GS_OK);
    gs_backend_destroy(be);
}
END_TEST

START_TEST(vmm_running_out_of_handles)
{
    /* cuMemCreate is where physical memory runs out; the reservation is only address space */
    gs_backend *be = vmm_device(8 * MiB);
    uint64_t va, h[5], extra;
    ck_assert_int_eq(gs_dev_va_reserve(be, NULL, 1 * GiB, &va), GS_OK);
    for (int i = 0; i < 4; i++) ck_assert_int_eq(gs_dev_page_create(be, NULL, 2 * MiB, &h[i]), GS_OK);
    ck_assert_int_eq(gs_dev_page_create(be, NULL, 2 * MiB, &h[4]), GS_ERR_OOM);
    ck_assert_int_eq(gs_dev_malloc(be, NULL, 2 * MiB, &extra), GS_ERR_OOM); /* one pool of pages */
    ck_assert_int_eq(gs_dev_page_release(be, NULL, h[0], 2 * MiB), GS_OK);
    ck_assert_int_eq(gs_dev_page_create(be, NULL, 2 * MiB, &h[4]), GS_OK);
    ck_assert_int_eq(gs_dev_page_create(be, NULL, 3 * MiB, &extra), GS_ERR_INVALID); /* not granular */
    gs_backend_destroy(be);
}
END_TEST

START_TEST(vmm_handles_found_across_compactions)
{
    /* The simulated device finds a handle by its number from the end of its array; holes and
     * compactions (more holes than live handles) move the live ones down. Release them in an
     * order that compacts several times, each exactly once, and a handle it never made not at
     * all. */
    enum { N = 300 };
    gs_backend *be = vmm_device(1 * GiB);
    uint64_t h[N];
    for (int i = 0; i < N; i++) ck_assert_int_eq(gs_dev_page_create(be, NULL, 2 * MiB, &h[i]), GS_OK);
    for (int pass = 0; pass < 3; pass++) /* every third from 0, then from 1, then 2 */
        for (int i = pass; i < N; i += 3) {
            ck_assert_int_eq(gs_dev_page_release(be, NULL, h[i], 2 * MiB), GS_OK);
            ck_assert_int_eq(gs_dev_page_release(be, NULL, h[i], 2 * MiB), GS_ERR_INVALID);
            if (i + 3 < N) { /* a later one is still there; an earlier released one is not */
                uint64_t extra;
                ck_assert_int_eq(gs_dev_page_create(be, NULL, 2 * MiB, &extra), GS_OK);
                ck_assert_int_eq(gs_dev_page_release(be, NULL, extra, 2 * MiB), GS_OK);
            }
        }
    ck_assert_uint_eq(dev_used_bytes(be), 0);
    ck_assert_int_eq(gs_dev_page_release(be, NULL, h[N - 1] + 1000, 2 * MiB), GS_ERR_INVALID);
    ck_assert_int_eq(gs_dev_page_release(be, NULL, 0, 2 * MiB), GS_ERR_INVALID);
    gs_backend_destroy(be);
}
END_TEST

/* The reference for a batch: its calls one wrapper call at a time, stopping after the first that
 * fails, as gs_dev_batch promises to behave. */
static gs_status batch_by_singles(gs_backend *be, gs_devcalls *calls, const gs_dev_call *c,
                                  size_t n, size_t *made)
{
    gs_status st = GS_OK;
    size_t i = 0;
    while (i < n && st == GS_OK) {
        const gs_dev_call *x = &c[i++];
        switch (x->kind) {
        case GS_CALL_PAGE_CREATE: st = gs_dev_page_create(be, calls, x->size, x->handle); break;
        case GS_CALL_PAGE_RELEASE: st = gs_dev_page_release(be, calls, *x->handle, x->size); break;
        case GS_CALL_MAP: st = gs_dev_map(be, calls, x->va, x->size, *x->handle); break;
        case GS_CALL_UNMAP: st = gs_dev_unmap(be, calls, x->va, x->size); break;
        default: st = GS_ERR_INVALID; break; /* not a batch's call: not made, not counted */
        }
    }
    *made = i;
    return st;
}

/* Device b's handles are device a's (both fresh, numbered alike); c's handle pointers point into
 * ha, and are moved to hb for b. */
static void batch_both(gs_backend *a, gs_devcalls *ca, gs_backend *b, gs_devcalls *cb,
                       gs_dev_call *c, size_t n, uint64_t *ha, uint64_t *hb, gs_status want,
                       size_t want_made)
{
    gs_dev_call cb_calls[64];
    ck_assert_uint_le(n, 64);
    for (size_t i = 0; i < n; i++) {
        cb_calls[i] = c[i];
        cb_calls[i].handle = hb + (c[i].handle - ha);
    }
    size_t ma = 0, mb = 0;
    ck_assert_int_eq(gs_dev_batch(a, ca, c, n, &ma), want);
    ck_assert_int_eq(batch_by_singles(b, cb, cb_calls, n, &mb), want);
    ck_assert_uint_eq(ma, want_made);
    ck_assert_uint_eq(mb, want_made);
    for (int i = 0; i < 32; i++) ck_assert_uint_eq(ha[i], hb[i]);
    for (int k = 0; k < GS_CALL_COUNT; k++) {
        ck_assert_uint_eq(ca->n[k], cb->n[k]);
        ck_assert_uint_eq(ca->failed[k], cb->failed[k]);
        ck_assert(ca->time_us[k] == cb->time_us[k]); /* to the bit */
    }
    ck_assert(a->ops->now_us(a->state) == b->ops->now_us(b->state));
    ck_assert_uint_eq(dev_used_bytes(a), dev_used_bytes(b));
}

/* A batch (the simulated device's own op) makes the calls, the statuses, the handles, the counts
 * and the times, to the bit, that the same calls made one at a time make: a run of cuMemCreates
 * up to the one that finds no memory, maps, releases across a compaction, unmaps and releases
 * interleaved, and a call that fails in the middle of a batch. */
START_TEST(vmm_batch_matches_single_calls)
{
    gs_calibration *cal = gs_calibration_builtin();
    gs_sim_config sc = {.total_bytes = 100 * MiB, .cal = cal}; /* 12 pages of 8 MiB */
    gs_backend *a = gs_sim_backend_new(&sc), *b = gs_sim_backend_new(&sc);
    gs_devcalls ca = {0}, cb = {0};
    uint64_t ha[32] = {0}, hb[32] = {0}, va, vb;
    ck_assert_int_eq(gs_dev_va_reserve(a, &ca, 1 * GiB, &va), GS_OK);
    ck_assert_int_eq(gs_dev_va_reserve(b, &cb, 1 * GiB, &vb), GS_OK);
    ck_assert_uint_eq(va, vb);
    const uint64_t pg = 8 * MiB;
    gs_dev_call c[64];
    size_t n = 0;
    /* 20 creates: 12 find memory, the 13th does not */
    for (int i = 0; i < 20; i++) c[n++] = (gs_dev_call){GS_CALL_PAGE_CREATE, 0, pg, &ha[i]};
    batch_both(a, &ca, b, &cb, c, n, ha, hb, GS_ERR_OOM, 13);
    ha[12] = hb[12] = 0;
    /* map 0..7; then the first four released while mapped (kept until unmapped), 8..11 released
     * outright, and a release of 8 again fails */
    n = 0;
    for (int i = 0; i < 8; i++) c[n++] = (gs_dev_call){GS_CALL_MAP, va + i * pg, pg, &ha[i]};
    for (int i = 0; i < 4; i++) c[n++] = (gs_dev_call){GS_CALL_PAGE_RELEASE, 0, pg, &ha[i]};
    for (int i = 8; i < 12; i++) c[n++] = (gs_dev_call){GS_CALL_PAGE_RELEASE, 0, pg, &ha[i]};
    c[n++] = (gs_dev_call){GS_CALL_PAGE_RELEASE, 0, pg, &ha[8]};
    c[n++] = (gs_dev_call){GS_CALL_PAGE_RELEASE, 0, pg, &ha[9]}; /* not made */
    batch_both(a, &ca, b, &cb, c, n, ha, hb, GS_ERR_INVALID, n - 1);
    /* creates again (the four released outright), then unmap and release interleaved: the
     * released-while-mapped ones go with their unmap; an unmap of a page not mapped fails */
    n = 0;
    for (int i = 12; i < 18; i++) c[n++] = (gs_dev_call){GS_CALL_PAGE_CREATE, 0, pg, &ha[i]};
    for (int i = 0; i < 4; i++) c[n++] = (gs_dev_call){GS_CALL_UNMAP, va + i * pg, pg, &ha[i]};
    for (int i = 4; i < 8; i++) {
        c[n++] = (gs_dev_call){GS_CALL_UNMAP, va + i * pg, pg, &ha[i]};
        c[n++] = (gs_dev_call){GS_CALL_PAGE_RELEASE, 0, pg, &ha[i]};
    }
    c[n++] = (gs_dev_call){GS_CALL_UNMAP, va + 20 * pg, pg, &ha[0]};
    batch_both(a, &ca, b, &cb, c, n, ha, hb, GS_ERR_OOM, 5);
    /* the same without the creates that no longer fit: 12..15 made, 16 fails ... */
    n = 0;
    for (int i = 0; i < 4; i++) c[n++] = (gs_dev_call){GS_CALL_UNMAP, va + i * pg, pg, &ha[i]};
    for (int i = 4; i < 8; i++) {
        c[n++] = (gs_dev_call){GS_CALL_UNMAP, va + i * pg, pg, &ha[i]};
        c[n++] = (gs_dev_call){GS_CALL_PAGE_RELEASE, 0, pg, &ha[i]};
    }
    c[n++] = (gs_dev_call){GS_CALL_UNMAP, va + 20 * pg, pg, &ha[0]};
    batch_both(a, &ca, b, &cb, c, n, ha, hb, GS_ERR_INVALID, n);
    /* every page made back: the rest of the handles, then a batch of nothing */
    n = 0;
    for (int i = 12; i < 16; i++) c[n++] = (gs_dev_call){GS_CALL_PAGE_RELEASE, 0, pg, &ha[i]};
    batch_both(a, &ca, b, &cb, c, n, ha, hb, GS_OK, n);
    batch_both(a, &ca, b, &cb, c, 0, ha, hb, GS_OK, 0);
    ck_assert_uint_eq(dev_used_bytes(a), 0); /* a cudaMemGetInfo each: the clocks stay alike */
    ck_assert_uint_eq(dev_used_bytes(b), 0);
    /* a call of another kind stops the batch, uncounted */
    uint64_t creates = ca.n[GS_CALL_PAGE_CREATE];
    n = 0;
    c[n++] = (gs_dev_call){GS_CALL_PAGE_CREATE, 0, pg, &ha[20]};
    c[n++] = (gs_dev_call){GS_CALL_MALLOC, 0, pg, &ha[21]};
    c[n++] = (gs_dev_call){GS_CALL_PAGE_CREATE, 0, pg, &ha[22]};
    batch_both(a, &ca, b, &cb, c, n, ha, hb, GS_ERR_INVALID, 2);
    ck_assert_uint_eq(ca.n[GS_CALL_PAGE_CREATE], creates + 1);
    ck_assert_uint_eq(ca.n[GS_CALL_MALLOC] + ca.failed[GS_CALL_MALLOC], 0);
    ck_assert_uint_eq(ha[22], 0);
    n = 0;
    c[n++] = (gs_dev_call){GS_CALL_PAGE_RELEASE, 0, pg, &ha[20]};
    batch_both(a, &ca, b, &cb, c, n, ha, hb, GS_OK, 1);
    /* a run of creates whose size changes partway; creates of no size and of a size not a
     * whole number of granules; releases of handle 0, of one never made, and of one released
     * while mapped, again */
    n = 0;
    for (int i = 23; i < 27; i++)
        c[n++] = (gs_dev_call){GS_CALL_PAGE_CREATE, 0, i == 25 ? 2 * pg : pg, &ha[i]};
    batch_both(a, &ca, b, &cb, c, n, ha, hb, GS_OK, n);
    c[0] = (gs_dev_call){GS_CALL_PAGE_CREATE, 0, 0, &ha[27]};
    batch_both(a, &ca, b, &cb, c, 1, ha, hb, GS_ERR_INVALID, 1);
    c[0] = (gs_dev_call){GS_CALL_PAGE_CREATE, 0, 3 * MiB, &ha[27]};
    batch_both(a, &ca, b, &cb, c, 1, ha, hb, GS_ERR_INVALID, 1);
    c[0] = (gs_dev_call){GS_CALL_PAGE_RELEASE, 0, pg, &ha[27]}; /* handle 0 */
    batch_both(a, &ca, b, &cb, c, 1, ha, hb, GS_ERR_INVALID, 1);
    ha[28] = hb[28] = 999999;
    c[0] = (gs_dev_call){GS_CALL_PAGE_RELEASE, 0, pg, &ha[28]};
    batch_both(a, &ca, b, &cb, c, 1, ha, hb, GS_ERR_INVALID, 1);
    ha[28] = hb[28] = 0;
    n = 0;
    c[n++] = (gs_dev_call){GS_CALL_MAP, va, pg, &ha[23]};
    c[n++] = (gs_dev_call){GS_CALL_PAGE_RELEASE, 0, pg, &ha[23]};
    c[n++] = (gs_dev_call){GS_CALL_PAGE_RELEASE, 0, pg, &ha[23]};
    batch_both(a, &ca, b, &cb, c, n, ha, hb, GS_ERR_INVALID, 3);
    n = 0;
    c[n++] = (gs_dev_call){GS_CALL_UNMAP, va, pg, &ha[23]};
    for (int i = 24; i < 27; i++) c[n++] = (gs_dev_call){GS_CALL_PAGE_RELEASE, 0, pg, &ha[i]};
    batch_both(a, &ca, b, &cb, c, n, ha, hb, GS_OK, n);
    ck_assert_uint_gt(ca.n[GS_CALL_PAGE_CREATE], 0);
    /* An observer hears every call of a batch, one at a time. */
    seen_calls seen = {0};
    a->observe = record_call;
    a->observe_ud = &seen;
    n = 0;
    for (int i = 0; i < 3; i++) c[n++] = (gs_dev_call){GS_CALL_PAGE_CREATE, 0, pg, &ha[i]};
    size_t made;
    ck_assert_int_eq(gs_dev_batch(a, &ca, c, n, &made), GS_OK);
    ck_assert_uint_eq(made, 3);
    ck_assert_int_eq(seen.n, 3);
    ck_assert_int_eq(seen.kind[2], GS_CALL_PAGE_CREATE);
    gs_backend_destroy(a);
    gs_backend_destroy(b);
    gs_calibration_free(cal);
}
END_TEST

START_TEST(vmm_release_while_mapped_frees_at_unmap)
{
    gs_backend *be = vmm_device(1 * GiB);
    uint64_t va, h;
    ck_assert_int_eq(gs_dev_va_reserve(be, NULL, 20 * MiB, &va), GS_OK);
    ck_assert_int_eq(gs_dev_page_create(be, NULL, 20 * MiB, &h), GS_OK);
    ck_assert_int_eq(gs_dev_map(be, NULL, va, 20 * MiB, h), GS_OK);
    ck_assert_int_eq(gs_dev_page_release(be, NULL, h, 20 * MiB), GS_OK);
    ck_assert_uint_eq(dev_used_bytes(be), 20 * MiB); /* the mapping keeps the memory alive */
    ck_assert_int_eq(gs_dev_unmap(be, NULL, va, 20 * MiB), GS_OK);
    ck_assert_uint_eq(dev_used_bytes(be), 0);
    gs_backend_destroy(be);
}
END_TEST

START_TEST(vmm_calls_cost_their_calibrated_latency)
{
    gs_calibration *cal = gs_calibration_builtin();
    gs_sim_config sc = {.total_bytes = 1 * GiB, .cal = cal};
    gs_backend *be = gs_sim_backend_new(&sc);
    gs_devcalls calls = {0};
    uint64_t va, h;
    ck_assert_int_eq(gs_dev_va_reserve(be, &calls, 20 * MiB, &va), GS_OK);
    ck_assert_int_eq(gs_dev_page_create(be, &calls, 20 * MiB, &h), GS_OK);
    ck_assert_int_eq(gs_dev_map(be, &calls, va, 20 * MiB, h), GS_OK);
    ck_assert_int_eq(gs_dev_set_access(be, &calls, va, 20 * MiB, 20 * MiB), GS_OK);
    ck_assert_int_eq(gs_dev_unmap(be, &calls, va, 20 * MiB), GS_OK);
    ck_assert_int_eq(gs_dev_page_release(be, &calls, h, 20 * MiB), GS_OK);
    /* the built-in H100 table's 20 MiB rows (docs/fidelity.md §4; and for create,
     * unmap and release the project's own measurement in a replay) */
    ck_assert(fabs(calls.time_us[GS_CALL_VA_RESERVE] - 1.21) < 1e-9);
    ck_assert(fabs(calls.time_us[GS_CALL_PAGE_CREATE] - 11.58) < 1e-9);
    ck_assert(fabs(calls.time_us[GS_CALL_MAP] - 1.31) < 1e-9);
    ck_assert(fabs(calls.time_us[GS_CALL_SET_ACCESS] - 29.84) < 1e-9);
    ck_assert(fabs(calls.time_us[GS_CALL_UNMAP] - 20.82) < 1e-9);
    ck_assert(fabs(calls.time_us[GS_CALL_PAGE_RELEASE] - 21.63) < 1e-9);
    gs_backend_destroy(be);
    gs_calibration_free(cal);
}
END_TEST

/* cuMemSetAccess is charged per mapping in its range (four 20 MiB handles cost four times one),
 * and the observer is told the time per mapping with the mapping's size. */
START_TEST(vmm_set_access_costs_per_mapping)
{
    gs_calibration *cal = gs_calibration_builtin();
    gs_sim_config sc = {.total_bytes = 1 * GiB, .cal = cal};
    gs_backend *be = gs_sim_backend_new(&sc);
    seen_calls seen = {0};
    gs_devcalls calls = {0};
    uint64_t va, h[4];
    ck_assert_int_eq(gs_dev_va_reserve(be, NULL, 80 * MiB, &va), GS_OK);
    for (int i = 0; i < 4; i++) {
        ck_assert_int_eq(gs_dev_page_create(be, NULL, 20 * MiB, &h[i]), GS_OK);
        ck_assert_int_eq(gs_dev_map(be, NULL, va + (uint64_t)i * 20 * MiB, 20 * MiB, h[i]), GS_OK);
    }
    be->observe = record_call;
    be->observe_ud = &seen;
    ck_assert_int_eq(gs_dev_set_access(be, &calls, va, 80 * MiB, 20 * MiB), GS_OK);
    ck_assert_double_eq_tol(calls.time_us[GS_CALL_SET_ACCESS], 4 * 29.84, 1e-9);
    ck_assert_uint_eq(calls.n[GS_CALL_SET_ACCESS], 1);
    ck_assert_int_eq(seen.n, 1);
    ck_assert_int_eq(seen.kind[0], GS_CALL_SET_ACCESS);
    ck_assert_uint_eq(seen.size[0], 20 * MiB);
    ck_assert_double_eq_tol(seen.us[0], 29.84, 1e-9);
    gs_backend_destroy(be);
    gs_calibration_free(cal);
}
END_TEST

START_TEST(faulty_forwards_and_fails_vmm_calls)
{
    gs_faulty_config fc = {.mask = 1u << GS_CALL_PAGE_CREATE, .fail_nth = 2, .status = GS_ERR_OOM};
    gs_backend *be = gs_faulty_backend_new(vmm_device(1 * GiB), &fc);
    ck_assert(gs_dev_has_vmm(be));
    uint64_t va, h1, h2;
    ck_assert_int_eq(gs_dev_va_reserve(be, NULL, 40 * MiB, &va), GS_OK);
    ck_assert_int_eq(gs_dev_page_create(be, NULL, 20 * MiB, &h1), GS_OK);
    ck_assert_int_eq(gs_dev_page_create(be, NULL, 20 * MiB, &h2), GS_ERR_OOM);
    ck_assert_uint_eq(gs_faulty_injected(be), 1);
    ck_assert_uint_eq(dev_used_bytes(be), 20 * MiB); /* the failed call never reached the device */
    ck_assert_int_eq(gs_dev_map(be, NULL, va, 20 * MiB, h1), GS_OK);
    ck_assert_int_eq(gs_dev_unmap(be, NULL, va, 20 * MiB), GS_OK);
    ck_assert_int_eq(gs_dev_page_release(be, NULL, h1, 20 * MiB), GS_OK);
    ck_assert_int_eq(gs_dev_va_release(be, NULL, va, 40 * MiB), GS_OK);
    gs_backend_destroy(be);
}
END_TEST

static Suite *backend_suite(void)
{
    Suite *s = suite_create("backend");
    TCase *tc = tcase_create("sim");
    tcase_add_test(tc, sim_fails_when_pages_run_out);
    tcase_add_test(tc, sim_model_follows_the_driver_rules);
    tcase_add_test(tc, sim_empty_device_places_as_fresh);
    tcase_add_test(tc, sim_follows_script_until_sizes_diverge);
    tcase_add_test(tc, sim_devices_have_disjoint_address_windows);
    tcase_add_test(tc, sim_clock_advances_by_calibrated_latency);
    tcase_add_test(tc, calibration_interpolates_and_extrapolates);
    tcase_add_test(tc, calibration_builtin_is_its_csv);
    tcase_add_test(tc, calibration_load_rejects_bad_file);
    tcase_add_test(tc, faulty_fails_nth_masked_call_only);
    tcase_add_test(tc, faulty_probability_is_seeded);
    tcase_add_test(tc, strerror_names_every_status);
    tcase_add_test(tc, median_of_odd_even_and_none);
    tcase_add_test(tc, observer_sees_kind_size_time_and_status);
    suite_add_tcase(s, tc);
    TCase *tv = tcase_create("vmm");
    tcase_add_test(tv, vmm_reserve_create_map_access_unmap_release);
    tcase_add_test(tv, vmm_map_over_a_mapped_page_is_refused);
    tcase_add_test(tv, vmm_unmap_of_an_unmapped_range_is_refused);
    tcase_add_test(tv, vmm_mappings_across_a_granule_chunk);
    tcase_add_test(tv, vmm_running_out_of_handles);
    tcase_add_test(tv, vmm_handles_found_across_compactions);
    tcase_add_test(tv, vmm_batch_matches_single_calls);
    tcase_add_test(tv, vmm_release_while_mapped_frees_at_unmap);
    tcase_add_test(tv, vmm_calls_cost_their_calibrated_latency);
    tcase_add_test(tv, vmm_set_access_costs_per_mapping);
    tcase_add_test(tv, faulty_forwards_and_fails_vmm_calls);
    suite_add_tcase(s, tv);
    return s;
}

int main(void) { return run_suite(backend_suite()); }
