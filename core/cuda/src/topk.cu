// Top-k on the device: radix select of the k-th largest magnitude, then an order-preserving
// compaction (docs/operations/gpu.md, "Top-k").
//
// Keys are the magnitude's float bits (sign cleared; NaN mapped to +inf's bits), whose unsigned
// order is the order of magnitudes. Four passes of 8 bits each build a 256-bin histogram of the
// keys that share the prefix found so far; one thread then picks the bin where the k-th largest
// falls. After the passes, T is the k-th largest key and `need` says how many keys equal to T
// are kept: the lowest-index ones, which is the CPU's tie rule (magnitude down, index up). The
// compaction counts kept keys per tile of kTile values, scans the counts, and writes each kept
// (index, value) at its rank, so indices come out ascending with no sort.
#include <cstdint>

#include "check.cuh"
#include "gossamer/cuda/compress.hpp"

namespace gossamer::cuda {
namespace {

constexpr int kThreads = 256;
constexpr int kPerThread = 16;
constexpr std::size_t kTile = std::size_t{kThreads} * kPerThread;
constexpr int kBins = 256;
// Workspace words: histogram, state, then two counters per tile.
constexpr std::size_t kState = kBins;  // prefix, need, bad index flag
constexpr std::size_t kTiles = kBins + 4;

std::size_t tiles_of(std::size_t n) {
    return (n + kTile - 1) / kTile;
}

__device__ __forceinline__ std::uint32_t key_of(float v) {
    const std::uint32_t bits = __float_as_uint(v) & 0x7fffffffu;
    return bits > 0x7f800000u ? 0x7f800000u : bits;  // NaN counts as infinite
}

__global__ void histogram_kernel(const float* x, std::size_t n, std::uint32_t* ws, int shift) {
    __shared__ std::uint32_t bins[kBins];
    for (int b = threadIdx.x; b < kBins; b += blockDim.x) bins[b] = 0;
    __syncthreads();
    const std::uint32_t prefix = ws[kState];
    const int high = shift + 8;  // bits above this pass, already fixed in prefix
    const std::size_t stride = std::size_t{gridDim.x} * blockDim.x;
    for (std::size_t i = std::size_t{blockIdx.x} * blockDim.x + threadIdx.x; i < n; i += stride) {
        const std::uint32_t key = key_of(__ldg(x + i));
        const bool counted = high >= 32 || (key >> high) == (prefix >> high);
        // Lanes with the same bin add once (magnitudes crowd into few bins in the first pass).
        const std::uint32_t bin = counted ? (key >> shift) & 0xffu : kBins;
        const unsigned peers = __match_any_sync(__activemask(), bin);
        if (counted && (threadIdx.x & 31u) == static_cast<unsigned>(__ffs(peers) - 1))
            atomicAdd(&bins[bin], static_cast<std::uint32_t>(__popc(peers)));
    }
    __syncthreads();
    for (int b = threadIdx.x; b < kBins; b += blockDim.x)
        if (bins[b]) atomicAdd(&ws[b], bins[b]);
}

// One thread: walks the bins from the top until the count reaches `need`, fixes those 8 bits of
// the prefix, keeps the rest of `need` for the next pass and clears the histogram.
__global__ void select_kernel(std::uint32_t* ws, int shift) {
    std::uint32_t need = ws[kState + 1], above = 0;
    int b = kBins - 1;
    for (; b > 0 && above + ws[b] < need; --b) above += ws[b];
    ws[kState] |= static_cast<std::uint32_t>(b) << shift;
    ws[kState + 1] = need - above;
    for (int i = 0; i < kBins; ++i) ws[i] = 0;
}

// Exclusive scan of two counters over the block (blockDim.x a multiple of 32, <= 1024); also
// returns the block totals.
__device__ void block_scan2(std::uint32_t a, std::uint32_t b, std::uint32_t& ea, std::uint32_t& eb,
                            std::uint32_t& ta, std::uint32_t& tb) {
    __shared__ std::uint32_t wa[32], wb[32], totals[2];
    const unsigned lane = threadIdx.x & 31u, warp = threadIdx.x / 32, warps = blockDim.x / 32;
    std::uint32_t ia = a, ib = b;
#pragma unroll
    for (int o = 1; o < 32; o *= 2) {
        const std::uint32_t ua = __shfl_up_sync(0xffffffffu, ia, o);
        const std::uint32_t ub = __shfl_up_sync(0xffffffffu, ib, o);
        if (lane >= static_cast<unsigned>(o)) ia += ua, ib += ub;
    }
    if (lane == 31) wa[warp] = ia, wb[warp] = ib;
    __syncthreads();
    if (warp == 0) {
        std::uint32_t va = lane < warps ? wa[lane] : 0, vb = lane < warps ? wb[lane] : 0;
        const std::uint32_t sa = va, sb = vb;
#pragma unroll
        for (int o = 1; o < 32; o *= 2) {
            const std::uint32_t ua = __shfl_up_sync(0xffffffffu, va, o);
            const std::uint32_t ub = __shfl_up_sync(0xffffffffu, vb, o);
            if (lane >= static_cast<unsigned>(o)) va += ua, vb += ub;
        }
        if (lane < warps) wa[lane] = va - sa, wb[lane] = vb - sb;  // exclusive per warp
        if (lane == warps - 1) totals[0] = va, totals[1] = vb;
    }
    __syncthreads();
    ea = wa[warp] + ia - a;
    eb = wb[warp] + ib - b;
    ta = totals[0];
    tb = totals[1];
    __syncthreads();
}

// Starts a selection: histogram zero, prefix 0, `need` k, no bad index.
__global__ void init_kernel(std::uint32_t* ws, std::uint32_t k) {
    ws[threadIdx.x] = 0;
    if (threadIdx.x < 4) ws[kState + threadIdx.x] = threadIdx.x == 1 ? k : 0;
}

// This thread's run of kPerThread consecutive values from `begin` (16-byte loads when x is
// aligned and the run is whole); returns how many are inside the vector.
__device__ int load_run(const float* x, std::size_t begin, std::size_t n, bool vec,
                        float (&v)[kPerThread]) {
    if (begin >= n) return 0;
    if (vec && begin + kPerThread <= n) {
#pragma unroll
        for (int j = 0; j < kPerThread; j += 4) {
            const float4 q = __ldg(reinterpret_cast<const float4*>(x + begin + j));
            v[j] = q.x, v[j + 1] = q.y, v[j + 2] = q.z, v[j + 3] = q.w;
        }
        return kPerThread;
    }
    const int count = static_cast<int>(min(n - begin, std::size_t{kPerThread}));
    for (int j = 0; j < count; ++j) v[j] = __ldg(x + begin + j);
    return count;
}

// Counts of keys above T and equal to T among the first `count` values.
__device__ void count_run(const float (&v)[kPerThread], int count, std::uint32_t t,
                          std::uint32_t& gt, std::uint32_t& eq) {
    gt = eq = 0;
#pragma unroll
    for (int j = 0; j < kPerThread; ++j) {
        const std::uint32_t key = key_of(v[j]);
        gt += j < count && key > t;
        eq += j < count && key == t;
    }
}

__global__ void count_kernel(const float* x, std::size_t n, std::uint32_t* ws, bool vec) {
    const std::uint32_t t = ws[kState];
    float v[kPerThread];
    const int count =
        load_run(x, blockIdx.x * kTile + std::size_t{threadIdx.x} * kPerThread, n, vec, v);
    std::uint32_t gt, eq, ea, eb, ta, tb;
    count_run(v, count, t, gt, eq);
    block_scan2(gt, eq, ea, eb, ta, tb);
    if (threadIdx.x == 0) {
        ws[kTiles + 2 * std::size_t{blockIdx.x}] = ta;
        ws[kTiles + 2 * std::size_t{blockIdx.x} + 1] = tb;
    }
}

// One block of 1024 threads: exclusive scan of the per-tile counters, in place.
__global__ void scan_tiles_kernel(std::uint32_t* ws, std::size_t tiles) {
    std::uint32_t carry_a = 0, carry_b = 0;
    for (std::size_t base = 0; base < tiles; base += blockDim.x) {
        const std::size_t i = base + threadIdx.x;
        const std::uint32_t a = i < tiles ? ws[kTiles + 2 * i] : 0;
        const std::uint32_t b = i < tiles ? ws[kTiles + 2 * i + 1] : 0;
        std::uint32_t ea, eb, ta, tb;
        block_scan2(a, b, ea, eb, ta, tb);
        if (i < tiles) ws[kTiles + 2 * i] = carry_a + ea, ws[kTiles + 2 * i + 1] = carry_b + eb;
        carry_a += ta;
        carry_b += tb;
    }
}

__global__ void write_kernel(const float* x, std::size_t n, std::size_t k, std::uint32_t* ws,
                             std::uint32_t* out, bool vec) {
    const std::uint32_t t = ws[kState], need = ws[kState + 1];
    const std::size_t begin = blockIdx.x * kTile + std::size_t{threadIdx.x} * kPerThread;
    float vals[kPerThread];
    const int count = load_run(x, begin, n, vec, vals);
    std::uint32_t gt, eq, ea, eb, ta, tb;
    count_run(vals, count, t, gt, eq);
    block_scan2(gt, eq, ea, eb, ta, tb);
    std::uint32_t gt_before = ws[kTiles + 2 * std::size_t{blockIdx.x}] + ea;
    std::uint32_t eq_before = ws[kTiles + 2 * std::size_t{blockIdx.x} + 1] + eb;
    for (int j = 0; j < count; ++j) {
        const float v = vals[j];
        const std::uint32_t key = key_of(v);
        std::size_t pos = k;  // not kept
        if (key > t) {
            pos = gt_before + min(eq_before, need);
            ++gt_before;
        } else if (key == t) {
            if (eq_before < need) pos = gt_before + eq_before;
            ++eq_before;
        }
        if (pos < k) {
            out[pos] = static_cast<std::uint32_t>(begin + j);
            out[k + pos] = __float_as_uint(v);
        }
    }
}

__global__ void decode_kernel(const std::uint32_t* in, std::size_t k, std::size_t n, float* y,
                              std::uint32_t* bad) {
    const std::size_t stride = std::size_t{gridDim.x} * blockDim.x;
    for (std::size_t i = std::size_t{blockIdx.x} * blockDim.x + threadIdx.x; i < k; i += stride) {
        const std::uint32_t j = in[i];
        if (j < n)
            y[j] = __fadd_rn(y[j], __uint_as_float(in[k + i]));
        else
            atomicExch(bad, 1u), atomicMax(bad + 1, j);  // the flag, and the largest bad index
    }
}

}  // namespace

std::uint32_t* TopKWorkspace::scratch() {
    if (buffer_.size() == 0) buffer_ = DeviceBuffer(4 * (kTiles + 2 * tiles_of(capacity_)));
    return buffer_.as<std::uint32_t>();
}

void topk_encode(const float* x, std::size_t n, std::size_t k, std::byte* out, TopKWorkspace& ws,
                 void* stream) {
    if (n >= (std::size_t{1} << 32))
        throw Error("cuda::topk_encode: vectors of 2^32 values or more are not supported");
    if (k < 1 || k > n)
        throw Error("cuda::topk_encode: k = " + std::to_string(k) +
                    " is outside [1, n = " + std::to_string(n) + "]");
    if (n > ws.capacity())
        throw Error("cuda::topk_encode: " + std::to_string(n) + " values but the workspace holds " +
                    std::to_string(ws.capacity()));
    if (!x || !out) throw Error("cuda::topk_encode: a null pointer");
    if (reinterpret_cast<std::uintptr_t>(out) % 4)
        throw Error("cuda::topk_encode: the output is not 4-byte aligned");
    const auto s = detail::as_stream(stream);
    std::uint32_t* w = ws.scratch();
    init_kernel<<<1, kBins, 0, s>>>(w, static_cast<std::uint32_t>(k));
    const unsigned grid = detail::grid_for(n);
    for (int shift = 24; shift >= 0; shift -= 8) {
        histogram_kernel<<<grid, kThreads, 0, s>>>(x, n, w, shift);
        select_kernel<<<1, 1, 0, s>>>(w, shift);
    }
    const auto tiles = static_cast<unsigned>(tiles_of(n));
    const bool vec = detail::aligned16(x);
    count_kernel<<<tiles, kThreads, 0, s>>>(x, n, w, vec);
    scan_tiles_kernel<<<1, 1024, 0, s>>>(w, tiles);
    write_kernel<<<tiles, kThreads, 0, s>>>(x, n, k, w, reinterpret_cast<std::uint32_t*>(out), vec);
    detail::check_launch("cuda::topk_encode");
}

void topk_decode_add(const std::byte* in, std::size_t k, std::size_t n, float* y, TopKWorkspace& ws,
                     void* stream) {
    if (k == 0) return;
    if (!in || !y) throw Error("cuda::topk_decode_add: a null pointer");
    const auto s = detail::as_stream(stream);
    std::uint32_t* bad = ws.scratch() + kState + 2;
    detail::check(cudaMemsetAsync(bad, 0, 8, s), "cuda::topk_decode_add: cudaMemsetAsync");
    decode_kernel<<<detail::grid_for(k), kThreads, 0, s>>>(
        reinterpret_cast<const std::uint32_t*>(in), k, n, y, bad);
    detail::check_launch("cuda::topk_decode_add");
    synchronize(stream);
    std::uint32_t flag[2] = {};
    copy_to_host(flag, bad, sizeof flag);
    if (flag[0])
        throw Error("cuda::topk_decode_add: index " + std::to_string(flag[1]) + " of a " +
                    std::to_string(n) + "-value vector");
}

}  // namespace gossamer::cuda
