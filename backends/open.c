/* open.c - the one place a device is built by name, from the backends compiled in.
 *
 * Callers (the command line, the replay engine, the PyTorch library) name a device and give one
 * config; which backends exist is decided here, at build time (GS_HAVE_CUDA), so nothing above
 * this file tests GS_HAVE_CUDA or repeats the default device size.
 */
#include <string.h>

#include "backend.h"

typedef struct {
    const char *name;
    const char *help;
    /* NULL when not compiled in: the name is known, so the message can say why. */
    gs_backend *(*open)(const gs_backend_config *cfg, char **errmsg);
    const char *missing; /* why it is not compiled in */
} backend_entry;

static gs_backend *open_sim(const gs_backend_config *cfg, char **errmsg)
{
    gs_sim_config sc = cfg->sim;
    if (!sc.total_bytes) sc.total_bytes = GS_DEFAULT_DEVICE_TOTAL;
    if (cfg->device < 0 || (unsigned)cfg->device >= GS_SIM_MAX_DEVICES) {
        *errmsg = g_strdup_printf("simulated device %d: not between 0 and %u", cfg->device,
                                  GS_SIM_MAX_DEVICES - 1);
        return NULL;
    }
    if (sc.total_bytes > GS_MAX_DEVICE_BYTES) {
        *errmsg = g_strdup_printf("simulated device of %" G_GUINT64_FORMAT
                                  " bytes: more than gpusim simulates (16 TiB)", sc.total_bytes);
        return NULL;
    }
    sc.device = (uint32_t)cfg->device;
    return gs_sim_backend_new(&sc);
}

#ifdef GS_HAVE_CUDA
static gs_backend *open_cuda(const gs_backend_config *cfg, char **errmsg)
{
    return gs_cuda_backend_new(cfg->device, errmsg);
}
#else
#define open_cuda NULL
#endif

static const backend_entry backends[] = {
    {"sim", "the simulated device (pages, placement, virtual memory, modelled latencies)",
     open_sim, NULL},
    {"cuda", "the real GPU: cudaMalloc/cudaFree and the driver's virtual-memory calls", open_cuda,
     "this gpusim was built without the CUDA Toolkit (meson -Dcuda=enabled says why)"},
};

gs_status gs_backend_open(const char *name, const gs_backend_config *cfg, gs_backend **out,
                          char **errmsg)
{
    static const gs_backend_config none = {0};
    *out = NULL;
    for (size_t i = 0; i < G_N_ELEMENTS(backends); i++) {
        const backend_entry *b = &backends[i];
        if (strcmp(name, b->name) != 0) continue;
        if (!b->open) {
            if (errmsg) *errmsg = g_strdup(b->missing);
            return GS_ERR_UNSUPPORTED;
        }
        char *msg = NULL;
        *out = b->open(cfg ? cfg : &none, &msg);
        if (*out) return GS_OK;
        if (errmsg) *errmsg = msg;
        else g_free(msg);
        return GS_ERR_DEVICE;
    }
    if (errmsg) {
        GString *s = g_string_new(NULL);
        g_string_append_printf(s, "'%s' is not one of ", name);
        for (size_t i = 0; i < G_N_ELEMENTS(backends); i++)
            g_string_append_printf(s, "%s%s", i ? ", " : "", backends[i].name);
        *errmsg = g_string_free(s, FALSE);
    }
    return GS_ERR_INVALID;
}

bool gs_backend_compiled_in(const char *name)
{
    for (size_t i = 0; i < G_N_ELEMENTS(backends); i++)
        if (strcmp(name, backends[i].name) == 0) return backends[i].open != NULL;
    return false;
}
