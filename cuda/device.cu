/* The device from C (device.h): thin wrappers over the runtime API, each call checked. */
#include "device.cuh"

#include "device.h"

#include <stdlib.h>
#include <string.h>

int kvl_cuda_device_count(void)
{
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess) {
        cudaGetLastError(); /* no driver: not an error worth keeping */
        return 0;
    }
    return n;
}

const char *kvl_cuda_device_name(void)
{
    static cudaDeviceProp prop;
    if (kvl_cuda_device_count() == 0 || cudaGetDeviceProperties(&prop, 0) != cudaSuccess) return "none";
    return prop.name;
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

/* The events are made and destroyed here; a failure in between still destroys them. */
static int time_between(double *ms, cudaEvent_t start, cudaEvent_t stop, int (*run)(void *), void *arg, int reps)
{
    int rc = run(arg);
    if (rc != KVL_OK) return rc;
    CUDA_CHECK(cudaDeviceSynchronize());
    CUDA_CHECK(cudaEventRecord(start));
    for (int i = 0; i < reps; i++)
        if ((rc = run(arg)) != KVL_OK) return rc;
    CUDA_CHECK(cudaEventRecord(stop));
    CUDA_CHECK(cudaEventSynchronize(stop));
    float total = 0.0f;
    CUDA_CHECK(cudaEventElapsedTime(&total, start, stop));
    *ms = reps > 0 ? total / reps : 0.0;
    return KVL_OK;
}

int kvl_cuda_time(double *ms, int (*run)(void *arg), void *arg, int reps)
{
    cudaEvent_t start, stop;
    CUDA_CHECK(cudaEventCreate(&start));
    CUDA_CHECK(cudaEventCreate(&stop));
    int rc = time_between(ms, start, stop, run, arg, reps);
    cudaEventDestroy(start);
    cudaEventDestroy(stop);
    return rc;
}
