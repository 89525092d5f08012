/* The device from C (device.h): thin wrappers over the runtime API, each call checked. */
#include "device.cuh"

#include "device.h"

#include <stdlib.h>
#include <string.h>

extern "C" {
#include "timing.h"
}

int kvl_cuda_device_count(void)
{
    int n = 0;
    const cudaError_t e = cudaGetDeviceCount(&n);
    cudaGetLastError(); /* the error is returned here, not left for the next call */
    if (e == cudaErrorNoDevice) return 0;
    if (e != cudaSuccess)
        return kvl_fail(KVL_ECUDA, "cudaGetDeviceCount: %s (error %d): the CUDA runtime cannot use this machine's "
                        "driver", cudaGetErrorString(e), static_cast<int>(e));
    return n;
}

const char *kvl_cuda_device_name(void)
{
    static cudaDeviceProp prop;
    if (kvl_cuda_device_count() <= 0 || cudaGetDeviceProperties(&prop, 0) != cudaSuccess) return "none";
    return prop.name;
}

int kvl_cuda_sm_count(void)
{
    static int n = 0;
    cudaDeviceProp prop;
    if (n == 0) n = cudaGetDeviceProperties(&prop, 0) == cudaSuccess && prop.multiProcessorCount > 0
                        ? prop.multiProcessorCount : 1;
    return n;
}

/* One handle per device (the runtime numbers them from 0), never destroyed: the process ends them. */
int kvl_cublas_handle(cublasHandle_t *h)
{
    static cublasHandle_t handles[16];
    int device = 0;
#ifdef __CUDACC__
    CUDA_CHECK(cudaGetDevice(&device));
#endif
    if (device < 0 || device >= 16) return kvl_fail(KVL_ECUDA, "kvl_cublas_handle: device %d of at most 16", device);
    if (!handles[device]) CUBLAS_CHECK(cublasCreate(&handles[device]));
    *h = handles[device];
    return KVL_OK;
}

int kvl_cuda_emulated(void)
{
#ifdef __CUDACC__
    return 0;
#else
    return 1;
#endif
}

size_t kvl_cuda_n_orders(void) { return kvl_cuda_emulated() ? 3 : 1; }

const char *kvl_cuda_use_order(size_t k)
{
#ifdef __CUDACC__
    (void)k;
    return "gpu";
#else
    static const char *const names[] = {"forward", "reverse", "random"};
    static const emu::order orders[] = {emu::FORWARD, emu::REVERSE, emu::RANDOM};
    k = k < 3 ? k : 2;
    emu::set_order(orders[k], 0x5EED0000u + k);
    return names[k];
#endif
}

int kvl_cuda_sync_launches(void)
{
    static int sync = -1;
    if (sync < 0) {
        const char *v = getenv("KVL_CUDA_SYNC");
        sync = v && strcmp(v, "1") == 0;
    }
    return sync;
}

void kvl_cuda_quiet_faults(int quiet)
{
#ifdef __CUDACC__
    (void)quiet;
#else
    emu::set_quiet(quiet);
#endif
}

int kvl_cuda_alloc(void **p, size_t bytes)
{
    *p = NULL;
    CUDA_CHECK(cudaMalloc(p, bytes ? bytes : 1));
    return KVL_OK;
}

void kvl_cuda_free(void *p)
{
    if (p) cudaFree(p);
}

int kvl_cuda_upload(void *dst, const void *src, size_t bytes)
{
    CUDA_CHECK(cudaMemcpy(dst, src, bytes, cudaMemcpyHostToDevice));
    return KVL_OK;
}

int kvl_cuda_download(void *dst, const void *src, size_t bytes)
{
    CUDA_CHECK(cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToHost));
    return KVL_OK;
}

int kvl_cuda_copy(void *dst, const void *src, size_t bytes)
{
    CUDA_CHECK(cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToDevice));
    return KVL_OK;
}

int kvl_cuda_fill(void *p, int byte, size_t bytes)
{
    CUDA_CHECK(cudaMemset(p, byte, bytes));
    return KVL_OK;
}

int kvl_cuda_sync(void)
{
    CUDA_CHECK(cudaDeviceSynchronize());
    return KVL_OK;
}

int kvl_workspace_reserve(kvl_workspace *w, size_t bytes)
{
    if (bytes <= w->bytes) return KVL_OK;
    kvl_workspace_free(w);
    CUDA_CHECK(cudaMalloc(&w->p, bytes));
    w->bytes = bytes;
    return KVL_OK;
}

void kvl_workspace_free(kvl_workspace *w)
{
    if (w->p) cudaFree(w->p);
    w->p = NULL;
    w->bytes = 0;
}

/* Write a device buffer of twice the L2 cache, so that the next call finds none of its data there (the
 * buffer is kept for the process's life). */
static int flush_l2(void)
{
    static void *buf = NULL;
    static size_t bytes = 0;
    if (!buf) {
        cudaDeviceProp prop;
        CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
        bytes = 2 * static_cast<size_t>(prop.l2CacheSize);
        if (bytes == 0) return KVL_OK;
        CUDA_CHECK(cudaMalloc(&buf, bytes));
    }
    CUDA_CHECK(cudaMemset(buf, 0x5A, bytes));
    return KVL_OK;
}

/* t[reps] = milliseconds of each call, timed alone after the warm-up calls; the events are the caller's. */
static int time_calls(double *t, cudaEvent_t start, cudaEvent_t stop, int (*run)(void *), void *arg, int reps)
{
    int rc = KVL_OK;
    for (int i = 0; i < KVL_CUDA_WARMUP && rc == KVL_OK; i++) rc = run(arg);
    for (int i = 0; i < reps && rc == KVL_OK; i++) {
        if ((rc = flush_l2()) != KVL_OK) break;
        CUDA_CHECK(cudaEventRecord(start));
        if ((rc = run(arg)) != KVL_OK) break;
        CUDA_CHECK(cudaEventRecord(stop));
        CUDA_CHECK(cudaEventSynchronize(stop));
        float ms = 0.0f;
        CUDA_CHECK(cudaEventElapsedTime(&ms, start, stop));
        t[i] = ms;
    }
    return rc;
}

int kvl_cuda_time(double *ms, int (*run)(void *arg), void *arg, int reps)
{
    if (reps < 1) return kvl_fail(KVL_EINVAL, "kvl_cuda_time: %d repetitions, at least 1", reps);
    double *t = static_cast<double *>(malloc(static_cast<size_t>(reps) * sizeof *t));
    if (!t) return kvl_fail(KVL_ENOMEM, "kvl_cuda_time: out of memory for %d times", reps);
    cudaEvent_t start, stop;
    int rc = KVL_OK;
    if (cudaEventCreate(&start) != cudaSuccess) rc = kvl_fail(KVL_ECUDA, "kvl_cuda_time: cudaEventCreate failed");
    if (rc == KVL_OK && cudaEventCreate(&stop) != cudaSuccess) {
        cudaEventDestroy(start);
        rc = kvl_fail(KVL_ECUDA, "kvl_cuda_time: cudaEventCreate failed");
    }
    if (rc == KVL_OK) {
        rc = time_calls(t, start, stop, run, arg, reps);
        cudaEventDestroy(start);
        cudaEventDestroy(stop);
    }
    if (rc == KVL_OK) *ms = kvl_median(t, static_cast<size_t>(reps));
    free(t);
    return rc;
}
