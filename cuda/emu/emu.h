/* The CPU emulator: the subset of CUDA that the kernels in cuda/ use, run on the host so that every
 * kernel is tested on machines without a GPU (cuda/device.cuh includes this file when the compiler is
 * not nvcc).
 *
 * Model. A launch runs its blocks one after another; inside a block every CUDA thread is a fiber
 * (ucontext) with its own stack, and a thread runs until it reaches a synchronisation point
 * (__syncthreads, __syncwarp, a warp shuffle, vote or matrix product), where it waits for the threads
 * the point names. Threads are resumed in forward, reverse or random order (emu::set_order, or the
 * environment: KVL_EMU_ORDER=forward|reverse|random, KVL_EMU_SEED=n); blocks follow the same order.
 *
 * Faults it detects, each stopping the launch with a report that names kernel, block, thread and
 * source line (the launch then returns cudaErrorLaunchFailure, and cudaGetErrorString gives the report):
 *   - a __syncthreads that some thread of the block never reaches (it exited, or waits elsewhere);
 *   - a warp collective whose mask names a lane that does not arrive (exited, absent, or waiting
 *     elsewhere), omits the caller, or differs between the lanes; a shuffle reading a lane outside it;
 *   - shared memory read before any thread of the block wrote it (it starts poisoned), indexed out of
 *     its bounds, or raced on: a read or write of a byte another thread wrote, or a write of a byte
 *     another thread read, with no barrier between them (__syncthreads, or __syncwarp within a warp).
 *   - a vector access to global memory (uint4, uint2, float4, uint32_t … through KVL_GLOBAL_AS in
 *     cuda/device.cuh) at an address that is not a multiple of the type's alignment, which faults on the GPU;
 *   - a read or write of shared bytes that a cp.async still in flight will write: the copy lands only when
 *     its thread's cp.async.wait_group (or wait_all) retires the group it was committed in, and counts as
 *     that thread's write at that moment, so other threads still need a barrier after the wait; a
 *     cp.async whose size is not 4, 8 or 16 (only 16 for .cg), or whose addresses are not multiples of it;
 *   - an ldmatrix whose row addresses (row r of matrix i from lane 8i + r; lanes 0-7 for .x1, 0-15 for
 *     .x2, all 32 for .x4) are not 16-byte aligned shared addresses with 16 bytes inside their array,
 *     or that not all 32 lanes execute.
 * Shared memory is only reached through emu::smem_ptr (KVL_SHARED in cuda/device.cuh), which is how
 * each access is checked. Global memory is plain host memory: an address sanitizer build catches
 * out-of-bounds accesses there.
 *
 * Launches the GPU refuses are refused here too (the launch returns the GPU's error, cudaGetErrorString
 * gives the reason): more than 48 KB of dynamic shared memory for a kernel that has not raised
 * cudaFuncAttributeMaxDynamicSharedMemorySize to that size, more than 48 KB of __shared__ arrays (a
 * fault, where ptxas would refuse the kernel), and more static plus dynamic shared memory
 * than one block of the modelled architecture may have (sm_80: 163 KB, sm_90: 227 KB; CUDA C++
 * Programming Guide, "Compute Capabilities", table of technical specifications). The modelled
 * architecture is sm_80, the smallest the build targets, or KVL_EMU_ARCH=80|90, or emu::set_arch.
 *
 * One host thread drives the emulator; launches are synchronous, as on a GPU with KVL_CUDA_SYNC=1.
 * KVL_EMU_DEVICE=none or =broken makes cudaGetDeviceCount answer as a machine without a GPU does
 * (cudaErrorNoDevice) or one whose driver is older than the runtime (cudaErrorInsufficientDriver), so
 * that what a program does then can be tried here. */
#ifndef KVL_EMU_H
#define KVL_EMU_H

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>

/* ---- qualifiers and builtin types -------------------------------------------------------------- */

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __launch_bounds__(...)
#define __align__(n) alignas(n)

struct uint3 {
    unsigned x, y, z;
};

struct dim3 {
    unsigned x, y, z;
    dim3(unsigned x_ = 1, unsigned y_ = 1, unsigned z_ = 1) : x(x_), y(y_), z(z_) {}
};

struct alignas(8) float2 {
    float x, y;
};
struct alignas(16) float4 {
    float x, y, z, w;
};
struct alignas(8) uint2 {
    unsigned x, y;
};
struct alignas(16) uint4 {
    unsigned x, y, z, w;
};
inline float2 make_float2(float x, float y) { return float2{x, y}; }
inline float4 make_float4(float x, float y, float z, float w) { return float4{x, y, z, w}; }

/* ---- the runtime API subset -------------------------------------------------------------------- */

enum cudaError_t {
    cudaSuccess = 0,
    cudaErrorInvalidValue = 1,
    cudaErrorMemoryAllocation = 2,
    cudaErrorInvalidConfiguration = 9,
    cudaErrorInvalidDevicePointer = 17,
    cudaErrorInsufficientDriver = 35,
    cudaErrorNoDevice = 100,
    cudaErrorLaunchFailure = 719,
};
typedef cudaError_t cudaError;

enum cudaMemcpyKind {
    cudaMemcpyHostToHost = 0,
    cudaMemcpyHostToDevice = 1,
    cudaMemcpyDeviceToHost = 2,
    cudaMemcpyDeviceToDevice = 3,
};

enum cudaFuncAttribute { cudaFuncAttributeMaxDynamicSharedMemorySize = 8 };

struct cudaDeviceProp {
    char name[256];
    int multiProcessorCount;
    size_t sharedMemPerBlockOptin;
    int l2CacheSize;
};

typedef struct emu_event *cudaEvent_t;

cudaError_t cudaMalloc(void **p, size_t bytes);
template <typename T> cudaError_t cudaMalloc(T **p, size_t bytes)
{
    return cudaMalloc(reinterpret_cast<void **>(p), bytes);
}
cudaError_t cudaFree(void *p);
cudaError_t cudaMemcpy(void *dst, const void *src, size_t bytes, cudaMemcpyKind kind);
cudaError_t cudaMemset(void *p, int value, size_t bytes);
cudaError_t cudaDeviceSynchronize(void);
cudaError_t cudaGetLastError(void);
cudaError_t cudaPeekAtLastError(void);
const char *cudaGetErrorString(cudaError_t e);
cudaError_t cudaGetDeviceCount(int *n);
cudaError_t cudaGetDeviceProperties(cudaDeviceProp *prop, int device);
cudaError_t cudaEventCreate(cudaEvent_t *e);
cudaError_t cudaEventDestroy(cudaEvent_t e);
cudaError_t cudaEventRecord(cudaEvent_t e, int stream = 0);
cudaError_t cudaEventSynchronize(cudaEvent_t e);
cudaError_t cudaEventElapsedTime(float *ms, cudaEvent_t start, cudaEvent_t stop);
/* ---- the cuBLAS subset (cublas_v2.h) the twins call, as plain loops on the host ------------------------
 * Column-major, host-side α and β, float sums in the order of k. */
typedef struct emu_cublas *cublasHandle_t;
enum cublasStatus_t { CUBLAS_STATUS_SUCCESS = 0, CUBLAS_STATUS_ALLOC_FAILED = 3, CUBLAS_STATUS_INVALID_VALUE = 7 };
enum cublasOperation_t { CUBLAS_OP_N = 0, CUBLAS_OP_T = 1 };
cublasStatus_t cublasCreate(cublasHandle_t *h);
cublasStatus_t cublasDestroy(cublasHandle_t h);
/* C_i = α·op(A_i)·op(B_i) + β·C_i for i < batch, op(A_i) m×k, op(B_i) k×n, A_i = A + i·strideA (B, C alike) */
cublasStatus_t cublasSgemmStridedBatched(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n,
                                         int k, const float *alpha, const float *A, int lda, long long strideA,
                                         const float *B, int ldb, long long strideB, const float *beta, float *C,
                                         int ldc, long long strideC, int batch);

namespace emu {
/* The kernel `key` may be launched with up to `bytes` of dynamic shared memory (at most the modelled
 * architecture's per-block limit). */
cudaError_t set_max_dynamic_shared(void (*key)(void), int bytes);
} /* namespace emu */

template <typename F> cudaError_t cudaFuncSetAttribute(F kernel, cudaFuncAttribute attr, int value)
{
    if (attr != cudaFuncAttributeMaxDynamicSharedMemorySize) return cudaErrorInvalidValue;
    return ::emu::set_max_dynamic_shared(reinterpret_cast<void (*)(void)>(kernel), value);
}

namespace emu {

/* Largest static plus dynamic shared memory of one block on any modelled architecture (sm_90's opt-in
 * limit); shared_limit() is the modelled one's. */
constexpr size_t SHARED_BYTES = 227 * 1024;
/* Dynamic shared memory a kernel gets without raising cudaFuncAttributeMaxDynamicSharedMemorySize, and
 * the most static shared memory ptxas lets a kernel declare. */
constexpr size_t DEFAULT_DYNAMIC_SHARED = 48 * 1024;
/* Most threads in a block. */
constexpr unsigned MAX_THREADS = 1024;

enum order { FORWARD, REVERSE, RANDOM };

/* Choose the order threads and blocks are resumed in; the seed drives RANDOM. */
void set_order(order o, uint64_t seed);
order current_order(void);
/* Model sm_80 or sm_90 (another value is refused with -1); arch() is the modelled one. */
int set_arch(int sm);
int arch(void);
/* Static plus dynamic shared memory one block of the modelled architecture may have. */
size_t shared_limit(void);
/* Reports of faults are printed on stderr unless quiet. */
void set_quiet(int quiet);
/* The report of the most recent fault ("" if none). */
const char *last_fault(void);

/* A place in the source, for reports. */
struct site {
    const char *file;
    int line;
};

/* ---- the running thread ------------------------------------------------------------------------- */

const uint3 &thread_idx(void);
const uint3 &block_idx(void);
const dim3 &block_dim(void);
const dim3 &grid_dim(void);

void syncthreads(site s);
void syncwarp(site s, unsigned mask);
[[noreturn]] void fault(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* ---- warp collectives ----------------------------------------------------------------------------
 * A lane deposits `in` and waits until every lane of `mask` has arrived at the same collective; the
 * last to arrive runs `combine` once over all of them, which writes each lane's `out`. */
constexpr size_t COLLECTIVE_BYTES = 48;
struct lane_data {
    unsigned char in[COLLECTIVE_BYTES], out[COLLECTIVE_BYTES];
};
/* data[32], indexed by lane; `lanes` = the mask; returns 0, or writes a fault message and returns -1 */
typedef int (*combine_fn)(lane_data *data, unsigned lanes, char *msg, size_t msg_cap);
void collective(site s, const char *what, unsigned mask, const void *in, size_t in_bytes, void *out,
                size_t out_bytes, combine_fn combine);

enum shfl_kind { SHFL_IDX, SHFL_UP, SHFL_DOWN, SHFL_XOR };
uint64_t shfl(site s, shfl_kind kind, unsigned mask, uint64_t bits, int arg, int width);

template <typename T> T shfl_as(site s, shfl_kind kind, unsigned mask, T var, int arg, int width)
{
    static_assert(sizeof(T) <= sizeof(uint64_t), "a shuffle moves at most 8 bytes");
    uint64_t bits = 0;
    std::memcpy(&bits, &var, sizeof var);
    bits = shfl(s, kind, mask, bits, arg, width);
    T r;
    std::memcpy(&r, &bits, sizeof r);
    return r;
}

unsigned ballot(site s, unsigned mask, int predicate);

/* D[16][8] = A[16][16]·B[16][8] + C of PTX mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32, with
 * the fragment layout of the PTX ISA ("Matrix Fragments for mma.m16n8k16 with floating point type"). */
void mma_bf16_m16n8k16(site s, float d[4], const uint32_t a[4], const uint32_t b[2], const float c[4]);

/* ---- the launch ------------------------------------------------------------------------------------
 * `kernel` is the launch as written (KVL_LAUNCH's text); reports name the kernel by its text up to the
 * first comma outside template brackets. `key` is the kernel function, which cudaFuncSetAttribute names. */

cudaError_t launch(const char *kernel, void (*key)(void), dim3 grid, dim3 block, size_t dynamic_smem,
                   std::function<void()> body);

/* ---- global memory ---------------------------------------------------------------------------------
 * p seen as T for one vector access: a fault where p is not aligned to T, as the GPU's ld/st.global.v2
 * and .v4 (and every access wider than a byte) require. */
[[noreturn]] void misaligned_global(site s, const void *p, size_t bytes, size_t align);
template <typename T, typename P> T *global_as(site s, P *p)
{
    if (reinterpret_cast<uintptr_t>(p) % alignof(T) != 0) misaligned_global(s, p, sizeof(T), alignof(T));
    return reinterpret_cast<T *>(p);
}

/* ---- shared memory --------------------------------------------------------------------------------
 * One array per block: every thread of the block gets the same storage. Accesses go through smem_ref,
 * which checks bounds, poison and races against the byte-level record kept for the block. */
struct smem_array {
    const char *name;
    unsigned char *base;
    size_t bytes;
};

void smem_read(const smem_array *a, const void *p, size_t bytes);
void smem_write(const smem_array *a, const void *p, size_t bytes);
/* byte position pos of a (an element of elem_bytes) is outside it or misaligned */
[[noreturn]] void smem_out_of_bounds(const smem_array *a, ptrdiff_t pos, size_t elem_bytes);

/* The static array `name` of `bytes` declared at `key` (one key per declaration). */
const smem_array *static_shared(const void *key, const char *name, size_t bytes);
/* The launch's dynamic shared memory. */
const smem_array *dynamic_shared(const char *name);

template <typename T> class smem_ref {
  public:
    smem_ref(T *p, const smem_array *a) : p_(p), a_(a) {}
    operator T() const
    {
        smem_read(a_, p_, sizeof(T));
        return *p_;
    }
    smem_ref &operator=(const T &v)
    {
        smem_write(a_, p_, sizeof(T));
        *p_ = v;
        return *this;
    }
    smem_ref &operator=(const smem_ref &o) { return *this = static_cast<T>(o); }
    smem_ref &operator+=(const T &v) { return *this = static_cast<T>(*this) + v; }
    smem_ref &operator-=(const T &v) { return *this = static_cast<T>(*this) - v; }
    smem_ref &operator*=(const T &v) { return *this = static_cast<T>(*this) * v; }
    smem_ref &operator|=(const T &v) { return *this = static_cast<T>(*this) | v; }

  private:
    T *p_;
    const smem_array *a_;
};

template <typename T> class smem_ptr {
  public:
    smem_ptr(const smem_array *a, ptrdiff_t offset) : a_(a), offset_(offset) {}
    smem_ref<T> operator[](ptrdiff_t i) const { return smem_ref<T>(at(i), a_); }
    smem_ptr operator+(ptrdiff_t k) const { return smem_ptr(a_, offset_ + k * static_cast<ptrdiff_t>(sizeof(T))); }
    /* A view of the same bytes as another element type (the pointer cast kernels do on the GPU). */
    template <typename U> smem_ptr<U> as() const { return smem_ptr<U>(a_, offset_); }
    /* the array and the byte offset in it, for the primitives that address shared memory themselves */
    const smem_array *array() const { return a_; }
    ptrdiff_t offset() const { return offset_; }

  private:
    T *at(ptrdiff_t i) const
    {
        const ptrdiff_t pos = offset_ + i * static_cast<ptrdiff_t>(sizeof(T));
        if (pos < 0 || pos + static_cast<ptrdiff_t>(sizeof(T)) > static_cast<ptrdiff_t>(a_->bytes) ||
            pos % static_cast<ptrdiff_t>(alignof(T)) != 0)
            smem_out_of_bounds(a_, pos, sizeof(T));
        return reinterpret_cast<T *>(a_->base + pos);
    }
    const smem_array *a_;
    ptrdiff_t offset_;
};

/* ---- asynchronous copies and matrix loads (sm_80+) -------------------------------------------------
 * cp.async.{ca,cg}.shared.global [a + offset], [src], bytes, src_bytes: bytes (4, 8, 16; .cg only 16)
 * copied from global memory, the last bytes − src_bytes of them zeros; pending in the calling thread
 * until a wait retires the group it is committed in. */
enum cp_async_cache { CP_ASYNC_CA, CP_ASYNC_CG };
void cp_async(site s, cp_async_cache cache, const smem_array *a, ptrdiff_t offset, const void *src, unsigned bytes,
              unsigned src_bytes);
/* cp.async.commit_group: the thread's uncommitted copies become one group */
void cp_async_commit(site s);
/* cp.async.wait_group n: every committed group of the thread but the n most recent lands */
void cp_async_wait(site s, unsigned n);
/* cp.async.wait_all: commit_group, then wait_group 0 */
void cp_async_wait_all(site s);
/* ldmatrix.sync.aligned.m8n8.x{count}[.trans].shared.b16: r[i] (i < count) of lane l holds elements
 * (l / 4, 2(l % 4)) and (l / 4, 2(l % 4) + 1) of matrix i (of its transpose with .trans), lower one in
 * the low half; row r of matrix i is the 16 bytes at the address lane 8i + r passes (a + offset). */
void ldmatrix(site s, unsigned count, bool trans, uint32_t *r, const smem_array *a, ptrdiff_t offset);

} /* namespace emu */

/* ---- builtin variables and intrinsics, as kernels spell them ------------------------------------- */

#define threadIdx (::emu::thread_idx())
#define blockIdx (::emu::block_idx())
#define blockDim (::emu::block_dim())
#define gridDim (::emu::grid_dim())
#define warpSize 32

#define __syncthreads() ::emu::syncthreads(::emu::site{__FILE__, __LINE__})
#define __syncwarp(...) ::emu::syncwarp(::emu::site{__FILE__, __LINE__}, ::emu::warp_mask_or_all(__VA_ARGS__))
#define __shfl_sync(mask, var, lane, ...) \
    ::emu::shfl_as(::emu::site{__FILE__, __LINE__}, ::emu::SHFL_IDX, mask, var, lane, ::emu::width_or_32(__VA_ARGS__))
#define __shfl_up_sync(mask, var, delta, ...)                                                           \
    ::emu::shfl_as(::emu::site{__FILE__, __LINE__}, ::emu::SHFL_UP, mask, var, static_cast<int>(delta), \
                   ::emu::width_or_32(__VA_ARGS__))
#define __shfl_down_sync(mask, var, delta, ...)                                                          \
    ::emu::shfl_as(::emu::site{__FILE__, __LINE__}, ::emu::SHFL_DOWN, mask, var, static_cast<int>(delta), \
                   ::emu::width_or_32(__VA_ARGS__))
#define __shfl_xor_sync(mask, var, lane_mask, ...)                                               \
    ::emu::shfl_as(::emu::site{__FILE__, __LINE__}, ::emu::SHFL_XOR, mask, var, lane_mask,      \
                   ::emu::width_or_32(__VA_ARGS__))
#define __ballot_sync(mask, pred) ::emu::ballot(::emu::site{__FILE__, __LINE__}, mask, (pred) ? 1 : 0)
#define __any_sync(mask, pred) (::emu::ballot(::emu::site{__FILE__, __LINE__}, mask, (pred) ? 1 : 0) != 0u)
#define __all_sync(mask, pred) (::emu::ballot(::emu::site{__FILE__, __LINE__}, mask, (pred) ? 1 : 0) == (mask))

namespace emu {
inline int width_or_32(void) { return 32; }
inline int width_or_32(int w) { return w; }
inline unsigned warp_mask_or_all(void) { return 0xFFFFFFFFu; }
inline unsigned warp_mask_or_all(unsigned m) { return m; }
} /* namespace emu */

inline void __threadfence(void) {}
template <typename T> inline T __ldg(const T *p) { return *p; }

inline unsigned __float_as_uint(float x)
{
    unsigned u;
    std::memcpy(&u, &x, sizeof u);
    return u;
}
inline float __uint_as_float(unsigned u)
{
    float x;
    std::memcpy(&x, &u, sizeof x);
    return x;
}
inline int __float_as_int(float x) { return static_cast<int>(__float_as_uint(x)); }
inline float __int_as_float(int i) { return __uint_as_float(static_cast<unsigned>(i)); }
inline int __popc(unsigned x) { return __builtin_popcount(x); }

/* Atomics: one host thread runs every fiber and a fiber is never interrupted between two
 * synchronisation points, so a plain read-modify-write is atomic here. */
template <typename T> inline T atomicAdd(T *p, T v)
{
    T old = *p;
    *p = old + v;
    return old;
}
template <typename T> inline T atomicMax(T *p, T v)
{
    T old = *p;
    *p = old < v ? v : old;
    return old;
}
template <typename T> inline T atomicOr(T *p, T v)
{
    T old = *p;
    *p = old | v;
    return old;
}

/* ---- number formats: cuda_fp8.h, cuda_fp4.h and cuda_bf16.h, on the host ----------------------------
 * Implemented through formats/ with the results the GPU's cvt instructions give: NaN becomes the
 * canonical positive NaN (E4M3 and E5M2 0x7F, bf16 0x7FFF) and E2M1 maps NaN to +6 (0x7). */
typedef unsigned char __nv_fp8_storage_t;
typedef unsigned short __nv_fp8x2_storage_t;
typedef unsigned char __nv_fp4x2_storage_t;
enum __nv_saturation_t { __NV_NOSAT, __NV_SATFINITE };
enum __nv_fp8_interpretation_t { __NV_E4M3, __NV_E5M2 };
enum __nv_fp4_interpretation_t { __NV_E2M1 };
enum cudaRoundMode { cudaRoundNearest, cudaRoundZero, cudaRoundPosInf, cudaRoundMinInf };

__nv_fp8_storage_t __nv_cvt_float_to_fp8(float x, __nv_saturation_t sat, __nv_fp8_interpretation_t fmt);
__nv_fp8x2_storage_t __nv_cvt_float2_to_fp8x2(float2 x, __nv_saturation_t sat, __nv_fp8_interpretation_t fmt);
__nv_fp4x2_storage_t __nv_cvt_float2_to_fp4x2(float2 x, __nv_fp4_interpretation_t fmt, cudaRoundMode mode);

struct __nv_bfloat16 {
    unsigned short bits;
};
__nv_bfloat16 __float2bfloat16_rn(float x);
inline float __bfloat162float(__nv_bfloat16 b) { return __uint_as_float(static_cast<unsigned>(b.bits) << 16); }
inline unsigned short __bfloat16_as_ushort(__nv_bfloat16 b) { return b.bits; }
inline __nv_bfloat16 __ushort_as_bfloat16(unsigned short u) { return __nv_bfloat16{u}; }

#endif
