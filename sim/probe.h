/* probe.h - one setting's replays at many caps, each started from a checkpoint of its uncapped
 * replay.
 *
 * A replay under a cap C is the uncapped replay, event for event, until a growth would take the
 * reserved bytes past C (or a limit check asks for more than C: gs_heap_limit_asked), for a
 * policy that reads the limit nowhere else (gs_policy_ops.blind_to_limit). whatif's search
 * replays each setting at 20-50 caps, and that shared stretch is a large part of each replay on
 * traces whose peak rises late. gs_probes replays the trace uncapped, noting where that peak
 * rises; gs_probes_plan replays it again as the trunk and leaves checkpoints along the way,
 * each a forked process stopped before an event that holds the replay as it was there (its
 * memory shared with the replay that went on until either writes a page, as Redis's background
 * save keeps its snapshot). A replay at C asks the latest checkpoint whose peak is within C to
 * fork once more; that copy sets its heap's limit to C, replays on from there, and sends back
 * what it found.
 *
 * A cap at or above all the uncapped replay asked for, with no growth refused on the way, needs
 * no replay at all: it never binds.
 *
 * fork copies only the calling thread, and a lock another thread held would stay held in the
 * copy: gs_probes_plan must be called where the process has one thread (whatif searches in a
 * process of its own per setting, sim/whatif.c). The checkpoints are gone by gs_probes_free.
 */
#ifndef GS_PROBE_H
#define GS_PROBE_H

#include <glib.h>

#include "replay.h"

G_BEGIN_DECLS

/* The trunk's checkpoints: one before the event where each of GS_PROBE_CHECKPOINTS caps spread
 * over the search's range first binds (fewer where several bind at one event). Each is a process
 * whose own memory is the pages the trunk wrote after it was made, and each probe's copy of a
 * page it writes costs a page fault: a second replay and the forks pay only on long traces
 * (GS_PROBE_MIN_EVENTS) whose probes would share, on average, at least 1/GS_PROBE_MIN_SHARE of
 * the trace with it (BENCHMARKS.md, "whatif from checkpoints"). */
#define GS_PROBE_CHECKPOINTS 8
#define GS_PROBE_MIN_EVENTS ((size_t)1 << 16)
#define GS_PROBE_MIN_SHARE 8
/* What a page of the heap a probe may write costs it (the fork's copy, its fault), in replayed
 * events: checkpoints pay only where the probes share more than that many events per page.
 * On the million-entry synthetic snapshot (70,000 live blocks, 14,000 segments: about 4,000
 * pages by state_pages in probe.c), probes sharing 423,000 events each saved nothing on the H100
 * host (31.2 s of CPU against 32.3) and cost twice the CPU on the development VM: about 70
 * events a page there; twice that for a margin, as the VM's faults are dearer still. */
#define GS_PROBE_FAULT_EVENTS 200

typedef struct {
    bool completes; /* no OOM and no device error */
    bool replayed;  /* false: known without a replay (the cap never binds) */
    size_t start;   /* the event the replay started at: its checkpoint's, or 0 */
    size_t events;  /* events it replayed, from start */
    bool oom;
    size_t first_oom_event; /* (oom) */
    int64_t peak_reserved;  /* reserved bytes' peak */
    uint64_t device_allocs; /* num_device_alloc */
    uint64_t retries;       /* num_alloc_retries */
    /* every capacity in [same_lo, same_hi) replays as this one (gs_result's; 0, 0: unknown) */
    uint64_t same_lo, same_hi;
} gs_probe_result;

typedef struct gs_probes gs_probes;

/* Replay t under p with no cap (o as given otherwise: no capacity, reference, backend or
 * observers), its result into *uncapped (gs_result_clear it), noting where its reserved bytes
 * rise. With checkpoints false, or a policy not blind to the limit, a trace of several
 * allocators or a heap with a limit of its own, every probe is a replay from the start. */
gs_probes *gs_probes_new(const gs_trace *t, const gs_policy *p, const gs_replay_opts *o,
                         bool checkpoints, gs_result *uncapped);
/* The probes to come are at caps in (lo, hi]: replay the trace again as the trunk, leaving its
 * checkpoints, if that pays (above). The trunk stops at its last checkpoint. Returns the events
 * that replay made (0: none made). A growth refused on the way (the device's memory) leaves no
 * checkpoint after it. */
size_t gs_probes_plan(gs_probes *pr, uint64_t lo, uint64_t hi);
/* The replay at capacity (bytes, > 0): from the latest checkpoint that applies, else from the
 * first event; none when the cap cannot bind. */
void gs_probes_run(gs_probes *pr, uint64_t capacity, gs_probe_result *out);
/* Whether gs_probes_plan may fork on t (long enough for checkpoints): a caller with several
 * threads searches such a trace in a process of its own. */
bool gs_probes_may_fork(const gs_trace *t);
/* Checkpoints alive. */
unsigned gs_probes_checkpoints(const gs_probes *pr);
void gs_probes_free(gs_probes *pr);

G_END_DECLS

#endif
