/* fuzz.h - what the libFuzzer harnesses of tests/fuzz/ share.
 *
 * Each harness is one file defining LLVMFuzzerTestOneInput. It is linked twice: with libFuzzer
 * (-Dfuzz=enabled, clang: fuzz_NAME, which mutates its inputs), and with replay.c's main()
 * (every build: fuzz_NAME_replay, which runs each file of a corpus once, as the regression test
 * `meson test fuzz-NAME`). A harness reports a broken promise by GS_FUZZ_CHECK, which prints the
 * input's failed condition and aborts: libFuzzer counts that as a crash and keeps the input.
 */
#ifndef GS_FUZZ_H
#define GS_FUZZ_H

#include <glib.h>
#include <stddef.h>
#include <stdint.h>

#include "trace.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* A condition every input must satisfy: abort (a crash, for libFuzzer) when it does not. */
#define GS_FUZZ_CHECK(cond, ...)                                                          \
    do {                                                                                  \
        if (!(cond)) gs_fuzz_fail(__FILE__, __LINE__, #cond, __VA_ARGS__);                \
    } while (0)

G_NORETURN void gs_fuzz_fail(const char *file, int line, const char *cond, const char *fmt, ...)
    G_GNUC_PRINTF(4, 5);

/* The readers that take a path get the input through a file: data written to a scratch file
 * of this process (under /dev/shm when it is there, else $TMPDIR), whose path is returned. The
 * same path every call; the file is removed at exit. */
const char *gs_fuzz_file(const uint8_t *data, size_t size);
/* A scratch directory of this process, empty on return (what earlier calls wrote there is
 * removed); removed at exit. */
const char *gs_fuzz_dir(void);
/* A path in the scratch directory. g_free it. */
char *gs_fuzz_path(const char *name);

/* An error from a reader: set, in the domain given, and a message that starts with the name
 * the input was given, then ':' (the "FILE:LINE: message" promise). */
void gs_fuzz_check_error(const GError *e, GQuark domain, const char *name);

/* fuzzcheck.c: a trace is well formed as trace.h promises (every event's client, stream and
 * slot exist, frees carry their allocation's size, a free_done follows a free marked deferred,
 * slots in the order of the allocs); two traces are the same (events, ids, clients, streams,
 * device total, header entries; what says which). Both abort through GS_FUZZ_CHECK. */
void gs_fuzz_check_trace(const gs_trace *t);
void gs_fuzz_check_same(const gs_trace *a, const gs_trace *b, const char *what);

#endif
