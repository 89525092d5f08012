/* The device, from C: whether there is one (a GPU, or the CPU emulator in a build without nvcc),
 * buffers on it, timing, and the emulator's thread orders. Every twin in cuda/ takes device buffers
 * made with kvl_cuda_alloc. Functions that return int give KVL_OK or KVL_ECUDA, with kvl_error()
 * naming the failed call, its file and line (and, in the emulator, the fault report). */
#ifndef KVL_DEVICE_H
#define KVL_DEVICE_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Status of a failed CUDA call (status.h's codes run from 0 down to -4). */
#define KVL_ECUDA (-16)

/* GPUs visible to the CUDA runtime, 0 when it finds none, or KVL_ECUDA (kvl_error() names the error) when
 * the runtime fails otherwise, as with a driver older than it; the emulator is one. */
int kvl_cuda_device_count(void);
/* "NVIDIA H200", "CPU emulator (fibers)", or "none" */
const char *kvl_cuda_device_name(void);
int kvl_cuda_emulated(void);
/* Streaming multiprocessors of device 0 (the emulator reports an H200's 132); 1 when it cannot be read. */
int kvl_cuda_sm_count(void);

/* The orders a test runs its kernels in: forward, reverse and random in the emulator, one on a GPU.
 * kvl_cuda_use_order(k) selects the k-th (k < kvl_cuda_n_orders()) and returns its name. */
size_t kvl_cuda_n_orders(void);
const char *kvl_cuda_use_order(size_t k);
/* KVL_CUDA_SYNC=1 in the environment: every launch waits for its kernel (read once). The emulator's
 * launches always do. */
int kvl_cuda_sync_launches(void);
/* Emulator fault reports go to kvl_error() only, not to stderr (for tests that provoke them). */
void kvl_cuda_quiet_faults(int quiet);

int kvl_cuda_alloc(void **p, size_t bytes);
void kvl_cuda_free(void *p);
int kvl_cuda_upload(void *dst, const void *src, size_t bytes);   /* host → device */
int kvl_cuda_download(void *dst, const void *src, size_t bytes); /* device → host */
int kvl_cuda_copy(void *dst, const void *src, size_t bytes);     /* device → device */
int kvl_cuda_fill(void *p, int byte, size_t bytes);
int kvl_cuda_sync(void);

/* A device scratch buffer that grows on demand (a cache keeps one for its calls' temporaries). */
typedef struct {
    void *p;
    size_t bytes;
} kvl_workspace;
/* w holds at least `bytes` (its old contents are not kept). */
int kvl_workspace_reserve(kvl_workspace *w, size_t bytes);
void kvl_workspace_free(kvl_workspace *w);

/* Untimed calls before the timed ones (clocks up, caches and cuBLAS's heuristics settled). */
#define KVL_CUDA_WARMUP 3

/* *ms = the median milliseconds of reps ≥ 1 calls of run(arg), each timed alone with CUDA events, after
 * KVL_CUDA_WARMUP untimed calls and with the L2 cache flushed before each (outside the timed region); run
 * returns KVL_OK or an error, which stops the timing and is returned. */
int kvl_cuda_time(double *ms, int (*run)(void *arg), void *arg, int reps);

#ifdef __cplusplus
}
#endif

#endif
