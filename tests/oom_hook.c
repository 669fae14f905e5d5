/* oom_hook.c - a stand-in for libgpusim_torch_oom.so in test_pluggable (GPUSIM_TORCH_OOM): where
 * the real one throws torch.OutOfMemoryError through gpusim_malloc, this one keeps the message
 * and jumps back to the test, which set gpusim_test_oom_jmp; it too leaves gpusim_malloc without
 * returning. */
#include <setjmp.h>
#include <string.h>

__attribute__((visibility("default"))) jmp_buf gpusim_test_oom_jmp;
__attribute__((visibility("default"))) char gpusim_test_oom_msg[1024];
__attribute__((visibility("default"), noreturn)) void gpusim_torch_raise_oom(const char *msg);

void gpusim_torch_raise_oom(const char *msg)
{
    strncpy(gpusim_test_oom_msg, msg, sizeof gpusim_test_oom_msg - 1);
    longjmp(gpusim_test_oom_jmp, 1);
}
