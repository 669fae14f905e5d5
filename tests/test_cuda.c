/* test_cuda.c - the CUDA backend on a real GPU: cudaMalloc/cudaFree and the driver's virtual
 * memory calls, OOM as GS_ERR_OOM, other errors with the call and CUDA's message, every byte
 * back at the end; and the core on real memory giving what the simulator gives on the same
 * trace, under the three PyTorch settings.
 *
 * Usage: test_cuda [TRACE_DATA_DIR]. Exit 77 (skip) where there is no usable GPU, as in CI. */
#include <string.h>

#include <cuda_runtime.h>

#include "report.h"
#include "validate.h"
#include "testutil.h"

static const char *data_dir;

static gs_backend *cuda_or_skip(void)
{
    char *msg = NULL;
    gs_backend *be = gs_cuda_backend_new(0, &msg);
    ck_assert_msg(be != NULL, "%s", msg);
    return be;
}

START_TEST(cuda_calls_round_trip_and_return_every_byte)
{
    gs_backend *be = cuda_or_skip();
    gs_devcalls calls = {0};
    uint64_t g = be->ops->granularity(be->state);
    ck_assert(g > 0 && (g & (g - 1)) == 0); /* queried from the driver: a power of two */
    uint64_t before = dev_free_bytes(be);
    uint64_t a, b, va, h1, h2;
    ck_assert_int_eq(gs_dev_malloc(be, &calls, 20 * MiB, &a), GS_OK);
    ck_assert_int_eq(gs_dev_malloc(be, &calls, 2 * MiB, &b), GS_OK);
    ck_assert_int_eq(gs_dev_touch(be, a, 20 * MiB), GS_OK);
    ck_assert_uint_le(dev_free_bytes(be), before - 22 * MiB);
    ck_assert_int_eq(gs_dev_va_reserve(be, &calls, 64 * g, &va), GS_OK);
    ck_assert_int_eq(gs_dev_page_create(be, &calls, 10 * g, &h1), GS_OK);
    ck_assert_int_eq(gs_dev_page_create(be, &calls, g, &h2), GS_OK);
    ck_assert(h1 && h2 && h1 != h2);
    ck_assert_int_eq(gs_dev_map(be, &calls, va, 10 * g, h1), GS_OK);
    ck_assert_int_eq(gs_dev_map(be, &calls, va + 10 * g, g, h2), GS_OK);
    ck_assert_int_eq(gs_dev_set_access(be, &calls, va, 11 * g, g), GS_OK);
    ck_assert_int_eq(gs_dev_touch(be, va, 11 * g), GS_OK); /* the mapping is usable memory */
    ck_assert_int_eq(gs_dev_unmap(be, &calls, va, 10 * g), GS_OK);
    ck_assert_int_eq(gs_dev_unmap(be, &calls, va + 10 * g, g), GS_OK);
    ck_assert_int_eq(gs_dev_page_release(be, &calls, h1, 10 * g), GS_OK);
    ck_assert_int_eq(gs_dev_page_release(be, &calls, h2, g), GS_OK);
    ck_assert_int_eq(gs_dev_va_release(be, &calls, va, 64 * g), GS_OK);
    ck_assert_int_eq(gs_dev_free(be, &calls, a, 20 * MiB), GS_OK);
    ck_assert_int_eq(gs_dev_free(be, &calls, b, 2 * MiB), GS_OK);
    ck_assert_uint_eq(dev_free_bytes(be), before);
    for (int k = 0; k < GS_CALL_COUNT; k++) {
        ck_assert_uint_eq(calls.failed[k], 0);
        if (calls.n[k]) ck_assert(calls.time_us[k] > 0); /* every call timed */
    }
    /* what is left at exit is returned by destroy: leave some of everything behind */
    ck_assert_int_eq(gs_dev_malloc(be, NULL, 4 * MiB, &a), GS_OK);
    ck_assert_int_eq(gs_dev_va_reserve(be, NULL, 4 * g, &va), GS_OK);
    ck_assert_int_eq(gs_dev_page_create(be, NULL, g, &h1), GS_OK);
    ck_assert_int_eq(gs_dev_map(be, NULL, va, g, h1), GS_OK);
    gs_backend_destroy(be);
    be = cuda_or_skip();
    ck_assert_uint_eq(dev_free_bytes(be), before);
    gs_backend_destroy(be);
}
END_TEST

START_TEST(cuda_oom_is_an_oom_and_other_errors_say_what_failed)
{
    gs_backend *be = cuda_or_skip();
    uint64_t fr, tot, a, h;
    ck_assert_int_eq(gs_dev_mem_info(be, NULL, &fr, &tot), GS_OK);
    uint64_t g = be->ops->granularity(be->state);
    ck_assert_int_eq(gs_dev_malloc(be, NULL, 2 * tot, &a), GS_ERR_OOM);
    ck_assert_int_eq(gs_dev_page_create(be, NULL, (2 * tot) / g * g, &h), GS_ERR_OOM);
    ck_assert_int_eq(gs_dev_malloc(be, NULL, 2 * MiB, &a), GS_OK); /* no sticky error left */
    ck_assert_int_eq(gs_dev_free(be, NULL, a, 2 * MiB), GS_OK);
    /* not a multiple of the granularity: CUDA_ERROR_INVALID_VALUE, not an OOM. (cuMemUnmap of
     * a range with nothing mapped is no use here: driver 580.159 returns success for it.) */
    ck_assert_int_eq(gs_dev_page_create(be, NULL, g + 4096, &h), GS_ERR_DEVICE);
    const char *msg = gs_dev_last_error(be);
    ck_assert_ptr_nonnull(msg);
    ck_assert_msg(strstr(msg, "cuMemCreate") && strstr(msg, "bytes"), "%s", msg);
    gs_backend_destroy(be);
}
END_TEST

/* A cudaMalloc while a stream is captured into a CUDA graph, in torch.cuda.graph's default
 * (global) mode, which forbids the thread one: the backend makes it in relaxed mode, as
 * PyTorch's allocator does, so a capture's first requests get memory (under `gpusim run` they
 * failed with "operation not permitted when stream is capturing"), and the capture survives. */
START_TEST(cuda_malloc_during_a_capture)
{
    gs_backend *be = cuda_or_skip();
    cudaStream_t st;
    ck_assert_int_eq(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking), cudaSuccess);
    ck_assert_int_eq(cudaStreamBeginCapture(st, cudaStreamCaptureModeGlobal), cudaSuccess);
    uint64_t a = 0;
    gs_status r = gs_dev_malloc(be, NULL, 16 * MiB, &a);
    enum cudaStreamCaptureStatus status;
    ck_assert_int_eq(cudaStreamIsCapturing(st, &status), cudaSuccess);
    cudaGraph_t g = NULL;
    cudaError_t end = cudaStreamEndCapture(st, &g);
    ck_assert_msg(r == GS_OK, "%s", gs_dev_last_error(be));
    ck_assert_int_eq(status, cudaStreamCaptureStatusActive); /* not invalidated */
    ck_assert_int_eq(end, cudaSuccess);
    ck_assert_int_eq(cudaGraphDestroy(g), cudaSuccess);
    /* the thread's mode is global again: a cudaMalloc of its own in a capture still fails */
    ck_assert_int_eq(cudaStreamBeginCapture(st, cudaStreamCaptureModeGlobal), cudaSuccess);
    void *p = NULL;
    ck_assert_int_ne(cudaMalloc(&p, MiB), cudaSuccess);
    (void)cudaStreamEndCapture(st, &g);
    (void)cudaGetLastError();
    ck_assert_int_eq(gs_dev_free(be, NULL, a, 16 * MiB), GS_OK);
    ck_assert_int_eq(cudaStreamDestroy(st), cudaSuccess);
    gs_backend_destroy(be);
}
END_TEST

/* The same trace through the same core and policy, on the simulator and on the GPU: the
 * allocator's decisions do not depend on the device, so its statistics agree exactly, and the
 * driver gets every byte back. */
START_TEST(cuda_replay_matches_the_simulator)
{
    static const char *const specs[] = {"pytorch", "pytorch:max_split_size_mb:128",
                                        "pytorch:expandable_segments:True"};
    char *path = g_build_filename(data_dir, "resnet50.gstrace.gz", NULL);
    GError *err = NULL;
    gs_trace *t = gs_trace_load(path, 0, NULL, NULL, &err);
    ck_assert_msg(t != NULL, "%s", err ? err->message : "");
    gs_backend *be = cuda_or_skip();
    for (size_t i = 0; i < G_N_ELEMENTS(specs); i++) {
        gs_policy *p = gs_policy_new(specs[i], &err);
        ck_assert_ptr_nonnull(p);
        gs_replay_opts sim = {.device_total = t->device_total};
        gs_replay_opts real = {.backend = be, .touch = true};
        gs_result rs, rr;
        ck_assert(gs_replay_run(t, p, &sim, &rs, &err));
        ck_assert_msg(gs_replay_run(t, p, &real, &rr, &err), "%s", err ? err->message : "");
        printf("%-34s sim peak reserved %" G_GINT64_FORMAT ", real %" G_GINT64_FORMAT
               "; device calls %.2f ms modelled, %.2f ms measured\n",
               specs[i], rs.stats.reserved_bytes[GS_STAT_ALL].peak,
               rr.stats.reserved_bytes[GS_STAT_ALL].peak, gs_devcalls_total_us(&rs.calls) / 1e3,
               gs_devcalls_total_us(&rr.calls) / 1e3);
        ck_assert_msg(rr.error == GS_OK, "%s: %s", specs[i], rr.error_msg ? rr.error_msg : "");
        ck_assert(!rr.oom);
        ck_assert_int_eq(rr.stats.reserved_bytes[GS_STAT_ALL].peak,
                         rs.stats.reserved_bytes[GS_STAT_ALL].peak);
        ck_assert_int_eq(rr.stats.allocated_bytes[GS_STAT_ALL].peak,
                         rs.stats.allocated_bytes[GS_STAT_ALL].peak);
        ck_assert_uint_eq(rr.stats.num_device_alloc, rs.stats.num_device_alloc);
        for (int k = 0; k < GS_CALL_COUNT; k++)
            if (k != GS_CALL_MEM_INFO) ck_assert_uint_eq(rr.calls.n[k], rs.calls.n[k]);
        ck_assert_uint_eq(rr.dev_free_after, rr.dev_free_before);
        gs_result_clear(&rs);
        gs_result_clear(&rr);
        gs_policy_free(p);
    }
    gs_backend_destroy(be);
    gs_trace_free(t);
    g_free(path);
}
END_TEST

int main(int argc, char **argv)
{
    data_dir = argc > 1 ? argv[1] : "traces/data";
    char *msg = NULL;
    gs_backend *probe = gs_cuda_backend_new(0, &msg);
    if (!probe) {
        printf("SKIP: %s\n", msg);
        g_free(msg);
        return 77;
    }
    gs_backend_destroy(probe);
    Suite *s = suite_create("cuda");
    TCase *tc = tcase_create("device");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, cuda_calls_round_trip_and_return_every_byte);
    tcase_add_test(tc, cuda_oom_is_an_oom_and_other_errors_say_what_failed);
    tcase_add_test(tc, cuda_malloc_during_a_capture);
    tcase_add_test(tc, cuda_replay_matches_the_simulator);
    suite_add_tcase(s, tc);
    return run_suite_forking(s, false); /* one CUDA context for the process */
}
