/* What every kernel header includes first: the CUDA toolkit under nvcc or the CPU emulator (cuda/emu/)
 * under the host C++ compiler, and the few spellings that differ between them. A kernel written with
 * these compiles unchanged both ways.
 *
 *   CUDA_CHECK(call)          in a function returning int: a failed call returns KVL_ECUDA, with
 *                             kvl_error() naming the call, file and line (and the emulator's fault)
 *   CUBLAS_CHECK(call)        the same for a cuBLAS call (the emulator runs its subset as loops)
 *   kvl_cublas_handle(&h)     the current device's cuBLAS handle, created on first use and kept: creating
 *                             one synchronises the device, which once per call would cost every layer
 *   KVL_LAUNCH(k, g, b, s, …) launch kernel k on grid g, blocks b, s bytes of dynamic shared memory;
 *                             returns the launch's cudaError_t (put it in CUDA_CHECK); with
 *                             KVL_CUDA_SYNC=1 it also waits for the kernel, so that a fault in it is
 *                             reported at its own launch (file, line, kernel) and not at a later call
 *   KVL_GLOBAL_AS(T, p)       global memory at p seen as T (uint4, uint2, float4, uint32_t …) for a
 *                             vector load or store; the emulator faults where p is not aligned to T
 *   KVL_SHARED(T, name, n)    a __shared__ array T name[n], one per block
 *   KVL_DYNAMIC_SHARED(T, p)  p points at the launch's dynamic shared memory
 *   kvl_smem<T>               the type a device function takes a shared array as
 *   KVL_SMEM_AS(U, p)         the same shared bytes seen as U
 *   KVL_UNROLL                unroll the loop that follows
 *   kvl_cp_async_ca<N>(d, s[, n])   cp.async.ca of N (4, 8, 16) bytes from global s to shared d, of
 *   kvl_cp_async_cg(d, s[, n])      which only the first n are read (the rest zeros); .cg: 16, past L1
 *   kvl_cp_async_commit()     cp.async.commit_group;  kvl_cp_async_wait<N>(): cp.async.wait_group N;
 *   kvl_cp_async_wait_all()   cp.async.wait_all (sm_80+; the emulator faults on a read before the wait)
 *   kvl_ldmatrix_x{1,2,4}[_trans](r, p)
 *                             ldmatrix.sync.aligned.m8n8.x{1,2,4}[.trans].shared.b16: p is the row this
 *                             lane addresses (row l % 8 of matrix l / 8), r[i] its part of matrix i
 *
 * In the emulator a __shared__ array declared the plain way would be a local of each fiber, one per
 * thread; the macros give one per block and route every access through the emulator's checks. */
#ifndef KVL_DEVICE_CUH
#define KVL_DEVICE_CUH

#include <stddef.h>
#include <stdint.h>

#ifdef __CUDACC__
#include <cuda_bf16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>
#include <cublas_v2.h>
/* the toolkit's header leaves parameters unused in its host code */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-parameter"
#include <cuda_fp4.h>
#pragma GCC diagnostic pop
#else
#include "emu/emu.h"
#endif

/* The C headers of formats/ and ref/ declare C functions and use _Static_assert. */
#ifndef _Static_assert
#define _Static_assert static_assert
#endif
extern "C" {
#include "status.h"
}
#include "device.h"

#define CUDA_CHECK(...)                                                                                   \
    do {                                                                                                  \
        cudaError_t kvl_e_ = (__VA_ARGS__);                                                               \
        if (kvl_e_ != cudaSuccess)                                                                        \
            return kvl_fail(KVL_ECUDA, "%s:%d: %s: %s", __FILE__, __LINE__, #__VA_ARGS__,                 \
                            cudaGetErrorString(kvl_e_));                                                  \
    } while (0)

#define CUBLAS_CHECK(...)                                                                                  \
    do {                                                                                                   \
        cublasStatus_t kvl_s_ = (__VA_ARGS__);                                                             \
        if (kvl_s_ != CUBLAS_STATUS_SUCCESS)                                                               \
            return kvl_fail(KVL_ECUDA, "%s:%d: %s: cuBLAS status %d", __FILE__, __LINE__, #__VA_ARGS__,    \
                            static_cast<int>(kvl_s_));                                                     \
    } while (0)

int kvl_cublas_handle(cublasHandle_t *h);

#ifdef __CUDACC__

template <typename... P, typename... A>
inline cudaError_t kvl_launch(const char *name, void (*kernel)(P...), dim3 grid, dim3 block, size_t smem, A... args)
{
    (void)name;
    kernel<<<grid, block, smem>>>(static_cast<P>(args)...);
    const cudaError_t e = cudaGetLastError();
    return e == cudaSuccess && kvl_cuda_sync_launches() ? cudaDeviceSynchronize() : e;
}

#define KVL_GLOBAL_AS(T, p) reinterpret_cast<T *>(p)

template <typename T> using kvl_smem = T *;
#define KVL_SHARED(T, name, n) __shared__ T name[n]
#define KVL_DYNAMIC_SHARED(T, name)                                  \
    extern __shared__ __align__(16) unsigned char kvl_dynamic_smem_[]; \
    kvl_smem<T> name = reinterpret_cast<T *>(kvl_dynamic_smem_)
#define KVL_SMEM_AS(U, p) reinterpret_cast<U *>(p)

#else

template <typename... P, typename... A>
inline cudaError_t kvl_launch(const char *name, void (*kernel)(P...), dim3 grid, dim3 block, size_t smem, A... args)
{
    return ::emu::launch(name, reinterpret_cast<void (*)(void)>(kernel), grid, block, smem,
                         [=] { kernel(static_cast<P>(args)...); });
}

#define KVL_GLOBAL_AS(T, p) ::emu::global_as<T>(::emu::site{__FILE__, __LINE__}, p)

template <typename T> using kvl_smem = ::emu::smem_ptr<T>;
#define KVL_SHARED(T, name, n)                    \
    static const char kvl_smem_key_##name = 0;    \
    kvl_smem<T> name(::emu::static_shared(&kvl_smem_key_##name, #name, sizeof(T) * (n)), 0)
#define KVL_DYNAMIC_SHARED(T, name) kvl_smem<T> name(::emu::dynamic_shared(#name), 0)
#define KVL_SMEM_AS(U, p) (p).template as<U>()

#endif

/* Unroll the loop that follows (nvcc's #pragma unroll; GCC spells it differently). */
#ifdef __CUDACC__
#define KVL_UNROLL _Pragma("unroll")
#else
#define KVL_UNROLL _Pragma("GCC unroll 8")
#endif

/* ---- asynchronous copies and matrix loads (sm_80+) ------------------------------------------------
 * PTX ISA, "Data Movement and Conversion Instructions: cp.async" and "Warp Level Matrix Load
 * Instruction: ldmatrix"; the emulator's model of each is in emu/emu.h. */
#ifdef __CUDACC__
template <typename T> __device__ __forceinline__ unsigned kvl_shared_address(const T *p)
{
    return static_cast<unsigned>(__cvta_generic_to_shared(p));
}
template <int N, typename T>
__device__ __forceinline__ void kvl_cp_async_ca(T *dst, const void *src, unsigned src_bytes = N)
{
    asm volatile("cp.async.ca.shared.global [%0], [%1], %2, %3;\n" ::"r"(kvl_shared_address(dst)), "l"(src), "n"(N),
                 "r"(src_bytes)
                 : "memory");
}
template <typename T> __device__ __forceinline__ void kvl_cp_async_cg(T *dst, const void *src, unsigned src_bytes = 16)
{
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(kvl_shared_address(dst)), "l"(src),
                 "r"(src_bytes)
                 : "memory");
}
__device__ __forceinline__ void kvl_cp_async_commit(void) { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
template <int N> __device__ __forceinline__ void kvl_cp_async_wait(void)
{
    asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}
__device__ __forceinline__ void kvl_cp_async_wait_all(void) { asm volatile("cp.async.wait_all;\n" ::: "memory"); }

/* r[0 … count) from the rows p of each lane; .trans (suffix) hands out the transposed matrices */
#define KVL_LDMATRIX_ASM_1(suffix)                                                                             \
    asm volatile("ldmatrix.sync.aligned.m8n8.x1" suffix ".shared.b16 {%0}, [%1];\n"                            \
                 : "=r"(r[0])                                                                                  \
                 : "r"(kvl_shared_address(p)))
#define KVL_LDMATRIX_ASM_2(suffix)                                                                             \
    asm volatile("ldmatrix.sync.aligned.m8n8.x2" suffix ".shared.b16 {%0, %1}, [%2];\n"                        \
                 : "=r"(r[0]), "=r"(r[1])                                                                      \
                 : "r"(kvl_shared_address(p)))
#define KVL_LDMATRIX_ASM_4(suffix)                                                                             \
    asm volatile("ldmatrix.sync.aligned.m8n8.x4" suffix ".shared.b16 {%0, %1, %2, %3}, [%4];\n"                \
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])                                              \
                 : "r"(kvl_shared_address(p)))
#define KVL_LDMATRIX_(count, name, suffix)                                                                    \
    template <typename T> __device__ __forceinline__ void name(uint32_t r[count], const T *p)                 \
    {                                                                                                        \
        KVL_LDMATRIX_ASM_##count(suffix);                                                                    \
    }
KVL_LDMATRIX_(1, kvl_ldmatrix_x1, "")
KVL_LDMATRIX_(2, kvl_ldmatrix_x2, "")
KVL_LDMATRIX_(4, kvl_ldmatrix_x4, "")
KVL_LDMATRIX_(1, kvl_ldmatrix_x1_trans, ".trans")
KVL_LDMATRIX_(2, kvl_ldmatrix_x2_trans, ".trans")
KVL_LDMATRIX_(4, kvl_ldmatrix_x4_trans, ".trans")
#else
/* The emulator's calls, each given the place it is written at for its reports. */
struct kvl_emu_at {
    ::emu::site s;
    template <int N, typename T> void cp_async_ca(kvl_smem<T> dst, const void *src, unsigned src_bytes = N) const
    {
        ::emu::cp_async(s, ::emu::CP_ASYNC_CA, dst.array(), dst.offset(), src, N, src_bytes);
    }
    template <typename T> void cp_async_cg(kvl_smem<T> dst, const void *src, unsigned src_bytes = 16) const
    {
        ::emu::cp_async(s, ::emu::CP_ASYNC_CG, dst.array(), dst.offset(), src, 16, src_bytes);
    }
    void cp_async_commit(void) const { ::emu::cp_async_commit(s); }
    template <int N> void cp_async_wait(void) const { ::emu::cp_async_wait(s, N); }
    void cp_async_wait_all(void) const { ::emu::cp_async_wait_all(s); }
    template <unsigned count, bool trans, typename T> void ldmatrix(uint32_t *r, kvl_smem<T> p) const
    {
        ::emu::ldmatrix(s, count, trans, r, p.array(), p.offset());
    }
};
#define KVL_EMU_AT ::kvl_emu_at{::emu::site{__FILE__, __LINE__}}
#define kvl_cp_async_ca KVL_EMU_AT.cp_async_ca
#define kvl_cp_async_cg KVL_EMU_AT.cp_async_cg
#define kvl_cp_async_commit KVL_EMU_AT.cp_async_commit
#define kvl_cp_async_wait KVL_EMU_AT.cp_async_wait
#define kvl_cp_async_wait_all KVL_EMU_AT.cp_async_wait_all
#define kvl_ldmatrix_x1 KVL_EMU_AT.ldmatrix<1, false>
#define kvl_ldmatrix_x2 KVL_EMU_AT.ldmatrix<2, false>
#define kvl_ldmatrix_x4 KVL_EMU_AT.ldmatrix<4, false>
#define kvl_ldmatrix_x1_trans KVL_EMU_AT.ldmatrix<1, true>
#define kvl_ldmatrix_x2_trans KVL_EMU_AT.ldmatrix<2, true>
#define kvl_ldmatrix_x4_trans KVL_EMU_AT.ldmatrix<4, true>
#endif

/* KVL_LAUNCH(kernel, grid, block, smem, args…); the whole expression is passed as text so that a
 * kernel with template arguments keeps its commas (the emulator names the kernel from it). */
#define KVL_LAUNCH(...) kvl_launch(#__VA_ARGS__, __VA_ARGS__)

/* ⌈a / b⌉ */
__host__ __device__ inline size_t kvl_div_up(size_t a, size_t b) { return (a + b - 1) / b; }

#endif
