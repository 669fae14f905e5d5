/* reference.h - a reference file (traces/convert.py --reference, docs/trace-format.md): what
 * the real allocator did in a recorded run (its setting, cap, outcome, segment addresses and
 * memory_stats), for a replay to use and compare against. Errors are GS_TRACE_ERROR_FORMAT
 * (content), or gs_json_load's own (a file that is no JSON).
 */
#ifndef GS_REFERENCE_H
#define GS_REFERENCE_H

#include <glib.h>
#include <stdbool.h>
#include <stdint.h>

#include "trace.h"

G_BEGIN_DECLS

/* What a reference file (traces/convert.py --reference) says the real allocator did. With
 * several devices, the file's "devices" object holds one such reference per device (devices,
 * device_ids), and the top level is the run as a whole (its outcome; memory_stats of device 0
 * as PyTorch's memory_stats() gives by default). */
typedef struct gs_reference {
    char *path;
    char *source;            /* the recording it came from, as a trace's header says it
                              * ("pytorch-snapshot NAME"); NULL if unknown */
    char *allocator_conf;    /* PYTORCH_CUDA_ALLOC_CONF of the real run */
    uint64_t device_total;   /* 0 if unknown */
    uint64_t cap_bytes;      /* PyTorch's truncated limit; 0 if the run had no cap */
    char *outcome;           /* "ok", "oom", or NULL if unknown */
    GArray *seg_addrs;       /* uint64_t: address of each segment_alloc, in order */
    GArray *seg_sizes;       /* uint64_t: its size */
    GHashTable *stats;       /* char* -> int64_t*: the run's torch.cuda.memory_stats(), or NULL */
    uint64_t peak_reserved;  /* from the segment events */
    uint64_t n_segment_alloc;
    uint64_t n_device_free;  /* segment_free and segment_unmap events */
    /* The limit the run met where it died, from the snapshot (traces/gsconvert/build.py's limit_at_death):
     * limit_bytes when the device was full then (what the allocator held plus the device's
     * free bytes), with limit_source in words; else 0, and when the run died, limit_min and
     * limit_max bound what stopped it (a memory fraction: the device had room). */
    uint64_t limit_bytes;
    char *limit_source;
    uint64_t limit_min, limit_max; /* 0, 0: no range known */
    bool has_outcome_event;  /* the run died: at trace event outcome_event */
    size_t outcome_event;
    size_t n_devices;        /* 0: a one-device run */
    uint32_t *device_ids;    /* n_devices, ascending */
    struct gs_reference **devices;
} gs_reference;

gs_reference *gs_reference_load(const char *path, GError **err);
void gs_reference_free(gs_reference *r);
/* A memory_stats value; FALSE if the reference has no such key. */
gboolean gs_reference_stat(const gs_reference *r, const char *key, int64_t *out);
/* The limit the recorded run's allocator had: the run's cap (cap_bytes, its NAME.json's), or the
 * limit it met where it died (limit_bytes: the device was full) where that is lower or the only
 * one; 0 when neither is known. *source (optional):
 * where it comes from, in words ("recorded cap", "device full at the OOM"), else NULL. */
uint64_t gs_reference_limit(const gs_reference *r, const char **source);
/* The reference of one device of a several-device run; NULL if it has none. */
const gs_reference *gs_reference_device(const gs_reference *r, uint32_t device);

/* Whether r can be t's run: NULL, or why not in words (g_free it). Not when r's devices are not
 * t's (a reference of one device for a trace of several, or another set of them), or r's run
 * died at an event t does not have. *warning (g_free it; NULL: none): r names another recording
 * than t's header does (the converter writes both from the same snapshot's name), so its cap
 * and addresses may be another run's. */
char *gs_reference_mismatch(const gs_reference *r, const gs_trace *t, char **warning);

G_END_DECLS

#endif
