/* backend.h - the device seam: what the allocator core asks of a GPU.
 *
 * A backend is an ops table (in the spirit of sqlite3_mem_methods / sqlite3_vfs) plus an opaque
 * state pointer. Device addresses are plain integers: the host never dereferences them, and all
 * allocator metadata lives in host memory, so the same core runs on the simulated heap
 * (backends/simdevice.c), on real memory (backends/cuda.c) or behind a fault injector
 * (backends/faulty.c).
 *
 * Contract for every method: result parameters are non-NULL; sizes are > 0; the return value is
 * a gs_status (GS_OK on success). GS_ERR_OOM is the one failure the allocator policies handle
 * (cudaErrorMemoryAllocation / CUDA_ERROR_OUT_OF_MEMORY); any other error is reported upward.
 *
 * Callers do not call the ops directly but through gs_dev_*() below, which time every call with
 * the backend's clock and count it by kind into a gs_devcalls record. The simulated device's
 * clock is virtual (each call advances it by the modelled latency); the CUDA backend's clock is
 * a monotonic host clock read around the real call.
 */
#ifndef GS_BACKEND_H
#define GS_BACKEND_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "util.h"


/* Status codes shared by every module (defined here because the backend is the lowest layer).
 * One X-macro list gives both the enum and gs_strerror(), so they cannot drift apart. */
#define GS_STATUS_LIST(X)                                                  \
    X(GS_OK, "success")                                                    \
    X(GS_ERR_OOM, "out of device memory")                                  \
    X(GS_ERR_LIMIT, "allocator memory limit reached")                      \
    X(GS_ERR_INVALID, "invalid argument")                                  \
    X(GS_ERR_UNSUPPORTED, "operation not supported by this backend")      \
    X(GS_ERR_DEVICE, "device error")                                       \
    X(GS_ERR_NOMEM, "out of host memory")

typedef enum {
#define GS_STATUS_ENUM(code, msg) code,
    GS_STATUS_LIST(GS_STATUS_ENUM)
#undef GS_STATUS_ENUM
} gs_status;

const char *gs_strerror(gs_status s);

#define GS_BACKEND_VERSION 1

/* Device call kinds, counted and timed separately in reports. */
#define GS_CALL_KINDS(X)                  \
    X(MALLOC, "cudaMalloc")               \
    X(FREE, "cudaFree")                   \
    X(VA_RESERVE, "cuMemAddressReserve")  \
    X(VA_RELEASE, "cuMemAddressFree")     \
    X(PAGE_CREATE, "cuMemCreate")         \
    X(PAGE_RELEASE, "cuMemRelease")       \
    X(MAP, "cuMemMap")                    \
    X(SET_ACCESS, "cuMemSetAccess")       \
    X(UNMAP, "cuMemUnmap")                \
    X(MEM_INFO, "cudaMemGetInfo")

typedef enum {
#define GS_CALL_ENUM(k, name) GS_CALL_##k,
    GS_CALL_KINDS(GS_CALL_ENUM)
#undef GS_CALL_ENUM
    GS_CALL_COUNT
} gs_call_kind;

const char *gs_call_name(gs_call_kind k);

/* Per-allocator record of device calls: how many of each kind (successful or not), how many
 * failed, and the time spent in them, in microseconds of the backend's clock. */
typedef struct {
    uint64_t n[GS_CALL_COUNT];
    uint64_t failed[GS_CALL_COUNT];
    double time_us[GS_CALL_COUNT];
} gs_devcalls;

double gs_devcalls_total_us(const gs_devcalls *c);
void gs_devcalls_add(gs_devcalls *into, const gs_devcalls *c);

/* One driver call of a batch (gs_dev_batch): a cuMemCreate, cuMemRelease, cuMemMap or cuMemUnmap,
 * with its op's arguments. */
typedef struct {
    gs_call_kind kind; /* GS_CALL_PAGE_CREATE, _PAGE_RELEASE, _MAP or _UNMAP */
    uint64_t va;       /* map, unmap: the range's start */
    uint64_t size;     /* map, unmap: the range's size; create, release: the page's */
    uint64_t *handle;  /* create: where its handle goes; release, map: the handle */
} gs_dev_call;

typedef struct gs_backend_ops {
    int version;      /* GS_BACKEND_VERSION */
    const char *name; /* "sim", "cuda", "faulty" */

    /* cudaMalloc / cudaFree semantics. */
    gs_status (*malloc)(void *st, uint64_t size, uint64_t *addr);
    gs_status (*free)(void *st, uint64_t addr);

    /* The driver's virtual-memory calls (cuMemAddressReserve, cuMemAddressFree, cuMemCreate,
     * cuMemRelease, cuMemMap, cuMemSetAccess, cuMemUnmap). NULL on a backend without VMM
     * support (the wrappers then return GS_ERR_UNSUPPORTED). Sizes and addresses are multiples
     * of granularity(). A handle is physical memory of one page_create, never 0; it is mapped
     * whole (offset 0). page_create is the call that runs out of memory (GS_ERR_OOM). unmap
     * must cover whole mappings; page_release of a handle still mapped frees its memory when
     * the last mapping goes, as the driver does. */
    gs_status (*va_reserve)(void *st, uint64_t size, uint64_t *va);
    gs_status (*va_release)(void *st, uint64_t va, uint64_t size);
    gs_status (*page_create)(void *st, uint64_t size, uint64_t *handle);
    gs_status (*page_release)(void *st, uint64_t handle);
    gs_status (*map)(void *st, uint64_t va, uint64_t size, uint64_t handle);
    gs_status (*set_access)(void *st, uint64_t va, uint64_t size);
    gs_status (*unmap)(void *st, uint64_t va, uint64_t size);
    uint64_t (*granularity)(void *st); /* the physical page: 2 MiB on current GPUs */

    gs_status (*mem_info)(void *st, uint64_t *free_bytes, uint64_t *total_bytes);
    double (*now_us)(void *st); /* the backend's clock, microseconds */
    /* Optional. Write [addr, addr+size) once, as a program would (real memory only). */
    gs_status (*touch)(void *st, uint64_t addr, uint64_t size);
    /* Optional. What the last GS_ERR_DEVICE/GS_ERR_INVALID was: call, size, the driver's words. */
    const char *(*last_error)(void *st);
    /* Optional. Makes calls c[0..n) in order, each as its own op above would, and stops after
     * the first that fails (returning its status); *made: the calls made, that one included.
     * Each call is counted into calls as the wrappers count it (n, failed) and its time, the
     * clock after it less the clock before, added to time_us[its kind] as it is made, so the
     * sums are those of single calls to the last bit. A call of a kind gs_dev_call does not
     * name fails with GS_ERR_INVALID, neither counted nor timed. An expandable segment maps
     * and unmaps pages by the hundreds, and a simulated call is a few stores: the wrappers'
     * indirect calls and clock reads cost more than the call. */
    gs_status (*batch)(void *st, const gs_dev_call *c, size_t n, size_t *made,
                       gs_devcalls *calls);
    /* Returns everything still allocated, mapped or reserved. */
    void (*destroy)(void *st);
} gs_backend_ops;

/* Optional observer of every timed call: kind, the bytes it concerned, its time on the backend's
 * clock and its status. `gpusim validate --save-calibration` uses it to build a latency table
 * from the calls a replay really made. */
typedef void (*gs_call_observer)(void *ud, gs_call_kind k, uint64_t size, double us, gs_status st);

typedef struct gs_backend {
    const gs_backend_ops *ops;
    void *state;
    gs_call_observer observe; /* NULL: none */
    void *observe_ud;
} gs_backend;

/* Timed, counted wrappers. calls may be NULL (the call is then neither timed nor counted).
 * gs_dev_free and gs_dev_page_release take the size of what they give back only for the record
 * (the observer, the cost of the call); the backend knows it already. */
gs_status gs_dev_malloc(gs_backend *be, gs_devcalls *calls, uint64_t size, uint64_t *addr);
gs_status gs_dev_free(gs_backend *be, gs_devcalls *calls, uint64_t addr, uint64_t size);
gs_status gs_dev_mem_info(gs_backend *be, gs_devcalls *calls, uint64_t *free_b, uint64_t *total);
gs_status gs_dev_va_reserve(gs_backend *be, gs_devcalls *calls, uint64_t size, uint64_t *va);
gs_status gs_dev_va_release(gs_backend *be, gs_devcalls *calls, uint64_t va, uint64_t size);
gs_status gs_dev_page_create(gs_backend *be, gs_devcalls *calls, uint64_t size, uint64_t *handle);
gs_status gs_dev_page_release(gs_backend *be, gs_devcalls *calls, uint64_t handle,
                              uint64_t size);
gs_status gs_dev_map(gs_backend *be, gs_devcalls *calls, uint64_t va, uint64_t size, uint64_t handle);
/* page: the size of each mapping in the range. cuMemSetAccess costs per mapping, so the
 * observer is told the time per mapping and the mapping's size. */
gs_status gs_dev_set_access(gs_backend *be, gs_devcalls *calls, uint64_t va, uint64_t size,
                            uint64_t page);
gs_status gs_dev_unmap(gs_backend *be, gs_devcalls *calls, uint64_t va, uint64_t size);
/* Calls c[0..n) in order, stopping after the first that fails: its status (GS_OK if none did)
 * and, in *made, the calls made. Timed and counted as the wrappers above would, to the bit:
 * through the backend's batch op where it has one, else (or while an observer listens, or
 * calls is NULL) one wrapper call at a time. A call of a kind gs_dev_call does not name
 * fails with GS_ERR_INVALID, neither counted nor timed. */
gs_status gs_dev_batch(gs_backend *be, gs_devcalls *calls, const gs_dev_call *c, size_t n,
                       size_t *made);
bool gs_dev_has_vmm(const gs_backend *be);
/* Not counted as device calls: touching is the program's work, not the allocator's. */
gs_status gs_dev_touch(gs_backend *be, uint64_t addr, uint64_t size);
const char *gs_dev_last_error(const gs_backend *be); /* NULL when the backend keeps none */
void gs_backend_destroy(gs_backend *be);

/* ---- Calibration: device-call latency as a function of size (backends/calibration.c) ----
 * Loaded from a CSV "op,size_bytes,median_us,..." (the format of docs/fidelity.md §4), or the
 * built-in H100 table. Latency is interpolated linearly in size between measured points and
 * held at the first point below the smallest size; above the largest it follows the last two points'
 * slope (costs such as cudaFree grow with size), unless that slope is negative. */
typedef struct gs_calibration gs_calibration;

gs_calibration *gs_calibration_builtin(void);
/* The built-in table as CSV text (the format above), as it was measured: every row, those the
 * model does not use included. */
const char *gs_calibration_builtin_csv(void);
/* The longest latency a table may give one call, in microseconds (a thousand seconds): with
 * sizes below 2^64, the model then stays finite for any call, however it extrapolates. */
#define GS_CALIBRATION_MAX_US 1e9
/* NULL and a message in *errmsg (g_free it) on a bad file: "FILE:LINE: message". A row per
 * call and size: a second row for the same call and size is an error. */
gs_calibration *gs_calibration_load(const char *path, char **errmsg);
double gs_calibration_us(const gs_calibration *c, gs_call_kind k, uint64_t size);
void gs_calibration_free(gs_calibration *c);

/* One timed call, as the observer saw it: the material of a measured table. */
typedef struct {
    gs_call_kind kind;
    uint64_t size;
    double us;
} gs_call_sample;

/* Write a latency table (the CSV above, written whole) from measured calls: one row per call
 * kind and power-of-two size class, with the class's median size and the median, 10th and 90th
 * percentile time. Kinds with no sample keep the rows of base (the model they would replace),
 * so the table is complete. Sorts samples. FALSE and *errmsg (g_free it) if it cannot write. */
bool gs_calibration_save(const char *path, gs_call_sample *samples, size_t n,
                         const gs_calibration *base, char **errmsg);

/* ---- The simulated device (backends/simdevice.c) ----
 * total: physical bytes of the device; physical memory is handed out in 2 MiB pages that may be
 * placed anywhere, so a cudaMalloc fails only when the free pages (less the one the driver
 * keeps back) cannot cover it; requests up to 1 MiB share pages, as the driver packs them.
 * Addresses follow the driver's placement rules measured on the H100 and H200 (simdevice.c,
 * docs/fidelity.md §6, "The simulated driver"). cal: latency model (owned by the caller, must
 * outlive the backend; NULL = no time). */
typedef struct {
    uint64_t total_bytes;
    uint64_t reserved_bytes;       /* taken by others at start (CUDA context, other processes) */
    const gs_calibration *cal;
    /* X, the address a fresh context gives its first 2 MiB cudaMalloc (0: a default); every
     * placement is relative to it. align_512m: the H200's rule, a range for a whole multiple
     * of 512 MiB starts on a 512 MiB boundary of the address. */
    uint64_t origin;
    bool align_512m;
    /* Optional address script: the n-th cudaMalloc gets addrs[n] if sizes[n] equals the
     * requested size (reference-address mode; see docs/fidelity.md §1.3). Once a size differs,
     * the script is abandoned and the placement model takes over. Not copied. */
    const uint64_t *script_addrs;
    const uint64_t *script_sizes;
    size_t script_n;
    /* Which simulated device: its addresses lie in [device * 2^47, (device + 1) * 2^47), so two
     * devices never hand out the same address (device 0 is the layout below the 2^47 line that
     * every report shows). Below GS_SIM_MAX_DEVICES. */
    uint32_t device;
} gs_sim_config;
#define GS_SIM_MAX_DEVICES 65536u

gs_backend *gs_sim_backend_new(const gs_sim_config *cfg);
/* Does a device of total bytes place like the H200 measured (align_512m)? Devices larger than
 * an H100's 80 GiB: the H200 is the one measured; the H100's rules are the rest. */
static inline bool gs_sim_h200_like(uint64_t total) { return total > 96 * GS_GiB; }
/* How many cudaMallocs took their address from the script (reference-address mode). */
size_t gs_sim_script_used(const gs_backend *be);
/* The device's X (gs_sim_config.origin): placements as offsets from it are the driver's. */
uint64_t gs_sim_origin(const gs_backend *be);

/* ---- The real device (backends/cuda.c, built when meson finds the CUDA Toolkit; GS_HAVE_CUDA)
 * device: the CUDA device index. NULL and *errmsg (g_free it) when there is no usable device or
 * driver; the binary itself runs without either. */
gs_backend *gs_cuda_backend_new(int device, char **errmsg);

/* ---- Opening a device by name (backends/open.c) ---- */

/* The simulated device's memory when neither the trace nor the user says: an H100's 80 GiB. */
#define GS_DEFAULT_DEVICE_TOTAL (80 * GS_GiB)

typedef struct {
    int device;         /* cuda: the CUDA device index; sim: the simulated device's (its
                         * address window, gs_sim_config.device) */
    gs_sim_config sim;  /* sim: its config; total_bytes 0 means GS_DEFAULT_DEVICE_TOTAL */
} gs_backend_config;

/* Build the device called name ("sim", or "cuda" where built with the CUDA Toolkit); cfg may be
 * NULL (the defaults). GS_OK and *out; GS_ERR_INVALID for a name that is no backend,
 * GS_ERR_UNSUPPORTED for one not compiled in, GS_ERR_DEVICE when the device cannot start (no
 * GPU, no driver); then *errmsg (may be NULL; g_free it) says why in words. */
gs_status gs_backend_open(const char *name, const gs_backend_config *cfg, gs_backend **out,
                          char **errmsg);
/* Is the backend name compiled into this build? */
bool gs_backend_compiled_in(const char *name);

/* ---- Fault injection (backends/faulty.c) ----
 * Wraps any backend. Fails the nth call (1-based, counting only the kinds in mask) with status,
 * or each such call with probability p (seeded, reproducible). The inner backend is owned. */
typedef struct {
    uint32_t mask;       /* bit (1u << gs_call_kind) for each kind that may fail; 0 = all */
    uint64_t fail_nth;   /* 0 = off */
    double probability;  /* 0 = off */
    uint64_t seed;
    gs_status status;    /* what the failed call returns, e.g. GS_ERR_OOM or GS_ERR_DEVICE */
} gs_faulty_config;

gs_backend *gs_faulty_backend_new(gs_backend *inner, const gs_faulty_config *cfg);
uint64_t gs_faulty_injected(const gs_backend *be);
/* Calls of the masked kinds so far, failed or not (with fail_nth 0: how many a run makes, the
 * range of fail_nth worth trying). */
uint64_t gs_faulty_calls(const gs_backend *be);

#endif
