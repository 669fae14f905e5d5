/* replay.c - a harness without libFuzzer: main() runs LLVMFuzzerTestOneInput once on each file
 * named, and on each file of each directory named (a corpus), in name order. Every build makes
 * one per harness (fuzz_NAME_replay) and `meson test` runs it on the harness's corpus in
 * tests/fuzz/corpus/NAME, so every input that ever found a bug stays a regression test (under
 * the ASan build too). Exit 0 when every input ran; a broken promise aborts. */
#include "fuzz.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int by_name(gconstpointer a, gconstpointer b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static size_t run_file(const char *path)
{
    char *data = NULL;
    gsize len = 0;
    GError *e = NULL;
    if (!g_file_get_contents(path, &data, &len, &e)) {
        fprintf(stderr, "%s\n", e->message);
        exit(2);
    }
    /* An exact-size copy, as libFuzzer hands it over, so a read past the end is caught. */
    uint8_t *copy = g_memdup2(data, len ? len : 1);
    g_free(data);
    LLVMFuzzerTestOneInput(copy, len);
    g_free(copy);
    return 1;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: %s FILE|DIR...\n", argv[0]);
        return 2;
    }
    size_t n = 0;
    for (int i = 1; i < argc; i++) {
        if (!g_file_test(argv[i], G_FILE_TEST_IS_DIR)) {
            n += run_file(argv[i]);
            continue;
        }
        GError *e = NULL;
        GDir *d = g_dir_open(argv[i], 0, &e);
        if (!d) {
            fprintf(stderr, "%s\n", e->message);
            return 2;
        }
        GPtrArray *names = g_ptr_array_new_with_free_func(g_free);
        const char *name;
        while ((name = g_dir_read_name(d))) g_ptr_array_add(names, g_build_filename(argv[i], name, NULL));
        g_dir_close(d);
        g_ptr_array_sort(names, by_name);
        for (guint k = 0; k < names->len; k++) {
            if (getenv("GS_FUZZ_VERBOSE")) fprintf(stderr, "%s\n", (char *)names->pdata[k]);
            n += run_file(names->pdata[k]);
        }
        g_ptr_array_free(names, TRUE);
    }
    printf("%s: %zu inputs, no failure\n", argv[0], n);
    return n ? 0 : 1;
}
