// The device rows of `gossamer bench mix`: each kernel, then a cudaMemcpy of the same bytes,
// alternated three times; the best of each counts.
#include "mix_device.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstdint>
#include <numeric>
#include <vector>

#include "gossamer/core/error.hpp"
#ifdef GOSSAMER_HAVE_CUDA
#include "gossamer/cuda/compress.hpp"
#include "gossamer/cuda/kernels.hpp"
#include "gossamer/cuda/runtime.hpp"
#include "gossamer/cuda/staging.hpp"
#endif
#ifdef GOSSAMER_HAVE_UCX
#include "gossamer/transport/ucx.hpp"
#endif

namespace gossamer::bench {

bool cuda_built() noexcept {
#ifdef GOSSAMER_HAVE_CUDA
    return true;
#else
    return false;
#endif
}

json::Json MixDeviceReport::to_json() const {
    json::Json rows_json = json::Json::array();
    for (const auto& r : rows) {
        json::Json j = {{"kernel", r.kernel},
                        {"bytes_per_call", r.bytes},
                        {"gb_per_s", r.gb_per_s},
                        {"memcpy_gb_per_s", r.memcpy_gb_per_s},
                        {"ratio", r.memcpy_gb_per_s > 0 ? r.gb_per_s / r.memcpy_gb_per_s : 0.0},
                        {"ns_per_element", r.ns_per_element}};
        if (r.target > 0) j["target"] = r.target;
        rows_json.push_back(j);
    }
    return {{"device", device},
            {"transfer_path", transfer_path},
            {"transfer_evidence", transfer_evidence},
            {"bytes_per_buffer", bytes},
            {"repeats", repeats},
            {"rows", rows_json}};
}

std::string MixDeviceReport::to_text() const {
    std::string out =
        fmt::format("{}; buffers of {} MiB, {} calls per timing\ntransfer path: {} ({})\n", device,
                    bytes >> 20, repeats, transfer_path, transfer_evidence);
    out += fmt::format("{:<18} {:>11} {:>14} {:>7} {:>8} {:>10}\n", "kernel", "[GB/s]",
                       "memcpy [GB/s]", "ratio", "target", "[ns/elem]");
    for (const auto& r : rows) {
        const double ratio = r.gb_per_s / r.memcpy_gb_per_s;
        out += fmt::format(
            "{:<18} {:>11.1f} {:>14.1f} {:>7.2f} {:>8} {:>10.4f}{}\n", r.kernel, r.gb_per_s,
            r.memcpy_gb_per_s, ratio, r.target > 0 ? fmt::format(">= {:.1f}", r.target) : "-",
            r.ns_per_element, r.target > 0 && ratio < r.target ? "  below target" : "");
    }
    return out;
}

#ifdef GOSSAMER_HAVE_CUDA
namespace {

using Work = std::function<void()>;

// The path a device buffer takes to a peer, from UCP's own answer (ucp_context_query) where this
// build has the UCX backend. The nvcc-only build of scripts/gpu_check.sh has no UCX library:
// there `ucx_info -d` tells what a build on this machine would find.
void find_transfer_path(MixDeviceReport& report) {
#ifdef GOSSAMER_HAVE_UCX
    try {
        const auto types = transport::query_ucx_memory_types();
        report.transfer_path = transport::device_transfer_path(types);
        report.transfer_evidence = "UCP memory types: " + types.names;
    } catch (const TransportError& e) {
        report.transfer_path = "unknown";
        report.transfer_evidence = e.what();
    }
#else
    const auto support = cuda::probe_ucx_memory();
    report.transfer_path = cuda::transfer_path(support);
    report.transfer_evidence = fmt::format(
        "no UCX backend in this build to ask UCP; ucx_info -d: {}",
        support.cuda ? support.evidence : std::string("no CUDA memory domain or transport"));
#endif
}

double time_of(const Work& work, int repeats) {
    auto call = [](void* c) { (*static_cast<const Work*>(c))(); };
    return cuda::seconds_per_call(call, const_cast<Work*>(&work), repeats);
}

// Best of three alternations of the kernel and a copy moving the same bytes (a copy of B/2
// bytes reads and writes B).
MixDeviceRow measure(const std::string& name, double bytes, std::size_t n, const Work& work,
                     const cuda::DeviceBuffer& a, const cuda::DeviceBuffer& b, int repeats,
                     double target) {
    const auto half = std::min(static_cast<std::size_t>(bytes / 2), a.size());
    const Work copy = [&] { cuda::copy_device(b.data(), a.data(), half); };
    double best_kernel = 1e30, best_copy = 1e30;
    for (int round = 0; round < 3; ++round) {
        best_kernel = std::min(best_kernel, time_of(work, repeats));
        best_copy = std::min(best_copy, time_of(copy, repeats));
    }
    return {name,
            bytes,
            bytes / best_kernel * 1e-9,
            2.0 * static_cast<double>(half) / best_copy * 1e-9,
            best_kernel / static_cast<double>(n) * 1e9,
            target};
}

}  // namespace

MixDeviceReport run_mix_device(const MixDeviceOptions& o) {
    if (o.device != "cuda")
        throw ConfigError("", "--device", fmt::format("unknown device '{}'", o.device),
                          "use cpu or cuda");
    if (cuda::device_count() == 0)
        throw ConfigError(
            "", "--device", cuda::device_description(),
            "run on a machine with an NVIDIA GPU and its driver, or use --device cpu");
    MixDeviceReport report;
    report.device = cuda::device_description();
    find_transfer_path(report);
    report.bytes = o.bytes ? o.bytes : std::size_t{256} << 20;
    report.repeats = o.repeats;
    const std::size_t n = report.bytes / sizeof(float), S = n * sizeof(float);
    constexpr int kTerms = 8;
    std::vector<cuda::DeviceBuffer> buf;
    for (int i = 0; i < kTerms + 2; ++i) {
        buf.emplace_back(S);
        cuda::fill_zero(buf.back().data(), S);
    }
    {  // values with a spread of magnitudes, so top-k and int8 do real work
        std::vector<float> host(n);
        for (std::size_t i = 0; i < n; ++i)
            host[i] = static_cast<float>((i * 2654435761u) % 1000003u) * 1e-6f - 0.5f;
        for (int i = 0; i < kTerms + 1; ++i) cuda::copy_to_device(buf[i].data(), host.data(), S);
    }
    // Copy buffers large enough for the biggest row: mix with 8 terms moves 10 S.
    const cuda::DeviceBuffer copy_a(5 * S), copy_b(5 * S);
    float* x = buf[0].as<float>();
    float* out = buf[kTerms + 1].as<float>();
    std::vector<cuda::DeviceTerm> terms;
    for (int j = 1; j <= kTerms; ++j) terms.push_back({buf[j].as<float>(), 1.0f / 16});
    const double s = static_cast<double>(S);
    auto row = [&](const std::string& name, double bytes, const Work& w, double target) {
        if (o.progress) o.progress("bench mix --device cuda: " + name);
        report.rows.push_back(measure(name, bytes, n, w, copy_a, copy_b, o.repeats, target));
    };
    for (int k : {1, 2, 4, 8}) {
        const std::span<const cuda::DeviceTerm> t(terms.data(), static_cast<std::size_t>(k));
        row(
            fmt::format("mix k={}", k), (k + 2) * s, [&, t] { cuda::mix(x, 0.5f, t, n); }, 0.8);
    }
    const float* y = terms[0].data;
    row(
        "delta", 3 * s, [&] { cuda::delta(out, x, y, n); }, 0.8);
    row(
        "push-sum share", 2 * s, [&] { cuda::scale_copy(out, 0.5f, x, n); }, 0.8);
    row(
        "de-bias", 2 * s, [&] { cuda::debias(out, x, 0.75, n); }, 0.8);
    auto* wire = reinterpret_cast<std::byte*>(out);
    row(
        "fp16 encode", 1.5 * s, [&] { cuda::fp16_encode(x, n, wire, nullptr); }, 0.8);
    row(
        "fp16 decode_add", 2.5 * s, [&] { cuda::fp16_decode_add(wire, n, buf[2].as<float>()); },
        0.8);
    constexpr std::size_t kBlock = 256;
    const double int8_wire = s / 4 + s / kBlock;
    row(
        "int8 encode", s + int8_wire, [&] { cuda::int8_encode(x, n, kBlock, 7, wire); }, 0.8);
    row(
        "int8 decode_add", int8_wire + 2 * s,
        [&] { cuda::int8_decode_add(wire, n, kBlock, buf[2].as<float>()); }, 0.8);
    const std::size_t k = std::max<std::size_t>(1, n / 100);
    cuda::TopKWorkspace ws(n);
    row(
        "topk encode 1%", s + 8.0 * k, [&] { cuda::topk_encode(x, n, k, wire, ws); }, 0);
    std::vector<std::uint32_t> idx(k);
    for (std::size_t i = 0; i < k; ++i) idx[i] = static_cast<std::uint32_t>(i * (n / k));
    const cuda::DeviceBuffer d_idx(4 * k);
    cuda::copy_to_device(d_idx.data(), idx.data(), 4 * k);
    const auto* ip = d_idx.as<std::uint32_t>();
    row(
        "randomk gather 1%", 12.0 * k, [&] { cuda::gather(x, ip, k, out); }, 0);
    cuda::synchronize();
    return report;
}
#else
MixDeviceReport run_mix_device(const MixDeviceOptions& o) {
    if (o.device != "cuda")
        throw ConfigError("", "--device", fmt::format("unknown device '{}'", o.device),
                          "use cpu or cuda");
    throw ConfigError("", "--device", "this build has no CUDA support",
                      "configure with -DGOSSAMER_USE_CUDA=ON on a machine with the CUDA toolkit");
}
#endif

}  // namespace gossamer::bench
