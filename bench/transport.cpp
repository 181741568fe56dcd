// Two threads, each the communication thread of its own UCX context and worker (spinning), as
// two peers on one host would be. Bandwidth: rank 0 keeps `window` sends of one buffer in flight;
// rank 1 recycles every payload and answers the last with an 8-byte ack, which stops the clock.
// Latency: 8-byte ping-pong, each leg from the send call to the receive callback on the other
// communication thread; half the round trip, as ucx_perftest reports it.
#include "transport.hpp"

#include <fmt/format.h>
#include <pthread.h>
#include <sched.h>

#include <algorithm>
#include <atomic>
#include <barrier>
#include <cstdlib>
#include <map>
#include <mutex>
#include <thread>

#include "gossamer/core/error.hpp"
#include "gossamer/core/units.hpp"
#include "gossamer/transport/ucx.hpp"
#include "perftest.hpp"

namespace gossamer::bench {
namespace {

namespace tr = transport;
using namespace std::chrono_literals;

struct Pair {
    std::unique_ptr<tr::UcxTransport> t[2];
};

// Puts rank r's thread on its own CPU, as two peer processes would be spread: two spinning
// threads that the scheduler lets share one CPU pass each message only once per time slice.
void pin_to_cpu(int r) {
    const unsigned n = std::thread::hardware_concurrency();
    if (n < 2) return;
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(static_cast<unsigned>(r) % n, &set);
    pthread_setaffinity_np(pthread_self(), sizeof(set), &set);
}

// Runs body(rank, transport) on two threads with connected transports created on them.
void on_two_threads(bool peer_errors, const std::function<void(int, tr::UcxTransport&)>& body) {
    std::map<int, std::vector<std::byte>> addresses;
    std::mutex mu;
    std::barrier sync(2);
    std::exception_ptr error;
    auto run = [&](int r) {
        pin_to_cpu(r);
        try {
            tr::UcxOptions o;
            o.rank = r;
            o.size = 2;
            o.job_id = 0xbe7c;
            o.mode = tr::ProgressMode::spin;
            o.errors = peer_errors ? tr::ErrorHandling::peer : tr::ErrorHandling::none;
            o.default_timeout = 30s;
            auto t = tr::make_ucx_transport(o);
            {
                std::lock_guard lock(mu);
                addresses[r] = t->address();
            }
            sync.arrive_and_wait();
            t->connect(addresses);
            body(r, *t);
            sync.arrive_and_wait();
        } catch (...) {
            std::lock_guard lock(mu);
            error = std::current_exception();
        }
    };
    {
        std::jthread other(run, 1);
        run(0);
    }
    if (error) std::rethrow_exception(error);
}

tr::Message to(int peer, std::uint64_t elements) {
    tr::Message m;
    m.kind = tr::MessageKind::model_delta;
    m.receiver = peer;
    m.elements = elements;
    return m;
}

void require(bool ok, std::string_view what) {
    if (!ok) throw Error(fmt::format("bench transport: {} timed out", what));
}

// Seconds for `iterations` messages of `bytes` from rank 0 to rank 1 (after a warm-up).
double bandwidth_seconds(bool peer_errors, std::size_t bytes, int iterations, int window) {
    double seconds = 0;
    const std::size_t floats = bytes / sizeof(float);
    on_two_threads(peer_errors, [&](int rank, tr::UcxTransport& t) {
        int received = 0;
        bool acked = false;
        std::vector<float> ack(2);
        const int warm = std::max(2, std::min(iterations / 10, 50));
        t.on_receive([&](tr::Message&& m) {
            if (rank == 0) {
                acked = true;
                return;
            }
            t.recycle(std::move(m.payload));
            if (++received == warm || received == warm + iterations)
                t.send(to(0, ack.size()), std::as_bytes(std::span(ack)), nullptr);
        });
        if (rank == 1) {
            require(tr::progress_until(t, [&] { return received == warm + iterations; }, 120s),
                    "receiving");
            return;
        }
        std::vector<float> buf(floats, 1.0f);
        const auto payload = std::as_bytes(std::span<const float>(buf));
        int in_flight = 0;
        auto done = [&](const tr::Status& s) {
            if (!s.ok()) throw Error("bench transport: " + s.reason);
            --in_flight;
        };
        auto blast = [&](int count) {
            acked = false;
            for (int sent = 0; sent < count;) {
                while (in_flight < window && sent < count) {
                    ++in_flight;
                    ++sent;
                    t.send(to(1, floats), payload, done);
                }
                t.progress();
            }
            require(tr::progress_until(t, [&] { return acked && in_flight == 0; }, 120s),
                    "sending");
        };
        blast(warm);
        const auto t0 = tr::Clock::now();
        blast(iterations);
        seconds = std::chrono::duration<double>(tr::Clock::now() - t0).count();
    });
    return seconds;
}

void latency(bool peer_errors, int iterations, double& one_way_us, double& completion_us) {
    on_two_threads(peer_errors, [&](int rank, tr::UcxTransport& t) {
        std::vector<float> word(2, 0.0f);  // 8 bytes
        const auto payload = std::as_bytes(std::span<const float>(word));
        int got = 0;
        tr::Clock::time_point sent_at;
        double completion = 0;
        auto done = [&](const tr::Status&) {
            completion += std::chrono::duration<double>(tr::Clock::now() - sent_at).count();
        };
        auto ping = [&] {
            sent_at = tr::Clock::now();
            t.send(to(1 - rank, 2), payload, done);
        };
        t.on_receive([&](tr::Message&& m) {
            t.recycle(std::move(m.payload));
            ++got;
            if (rank == 1 || got < 2 * iterations) ping();
        });
        if (rank == 1) {
            require(tr::progress_until(t, [&] { return got == 2 * iterations; }, 120s), "pong");
            return;
        }
        ping();  // the first `iterations` round trips warm up
        require(tr::progress_until(t, [&] { return got == iterations; }, 120s), "ping");
        completion = 0;
        const auto t0 = tr::Clock::now();
        ping();
        require(tr::progress_until(t, [&] { return got == 2 * iterations; }, 120s), "ping");
        const double s = std::chrono::duration<double>(tr::Clock::now() - t0).count();
        one_way_us = s / (2.0 * iterations) * 1e6;
        completion_us = completion / iterations * 1e6;
    });
}

}  // namespace

TransportReport run_transport(const TransportBenchOptions& options) {
    TransportReport r;
    r.peer_errors = options.peer_errors;
    r.repeats = options.repeats;
    const std::string extra = options.peer_errors ? "-e" : "";
    if (const char* tls = std::getenv("UCX_TLS")) r.ucx_tls = tls;
    auto sizes = options.sizes;
    if (sizes.empty())
        for (std::size_t s = 4096; s <= (64u << 20); s *= 4) sizes.push_back(s);
    // Each side runs `repeats` times, alternated, and its best run counts: on shared CPUs a run
    // is slow whenever the scheduler parks one of the two spinning sides.
    auto reference = [&](const std::string& test, std::size_t bytes, int iterations,
                         bool higher_is_better) {
        double best = 0;
        if (!options.reference || !r.reference_error.empty()) return best;
        auto ref = run_perftest(options.perftest, test, bytes, iterations, extra);
        if (!ref.ok) {
            r.reference_error = ref.error;
            return best;
        }
        return higher_is_better ? ref.value * 1048576.0 / 1e9 : ref.value;  // MiB/s -> GB/s
    };
    for (auto bytes : sizes) {
        if (options.progress) options.progress(fmt::format("bandwidth {}", format_bytes(bytes)));
        BandwidthRow row;
        row.bytes = bytes;
        row.iterations = static_cast<int>(
            std::clamp<std::size_t>(options.bytes_per_size / bytes, 20, 20000));
        row.target = bytes >= (1u << 20) ? 0.9 : 0.0;
        row.window = static_cast<int>(
            std::clamp<std::size_t>(options.window_bytes / bytes, 1, options.window));
        for (int k = 0; k < options.repeats; ++k) {
            const double s =
                bandwidth_seconds(options.peer_errors, bytes, row.iterations, row.window);
            row.gossamer =
                std::max(row.gossamer, static_cast<double>(bytes) * row.iterations / s / 1e9);
            row.reference =
                std::max(row.reference, reference("ucp_am_bw", bytes, row.iterations, true));
        }
        r.bandwidth.push_back(row);
    }
    if (options.progress) options.progress("latency");
    r.latency_us = r.send_completion_us = r.reference_latency_us = 1e300;
    for (int k = 0; k < options.repeats; ++k) {
        double one_way = 0, completion = 0;
        latency(options.peer_errors, options.latency_iterations, one_way, completion);
        r.latency_us = std::min(r.latency_us, one_way);
        r.send_completion_us = std::min(r.send_completion_us, completion);
        const double ref = reference("ucp_am_lat", 8, options.latency_iterations, false);
        if (ref > 0) r.reference_latency_us = std::min(r.reference_latency_us, ref);
    }
    if (r.reference_latency_us == 1e300) r.reference_latency_us = 0;
    return r;
}

json::Json TransportReport::to_json() const {
    json::Json j = {{"backend", "ucx"},
                    {"ucx_tls", ucx_tls},
                    {"error_handling", peer_errors ? "peer" : "none"},
                    {"repeats", repeats},
                    {"statistic", "best"},
                    {"reference", "ucx_perftest ucp_am_bw / ucp_am_lat"},
                    {"bandwidth", json::Json::array()}};
    for (const auto& b : bandwidth) {
        json::Json row = {{"bytes", b.bytes},
                          {"iterations", b.iterations},
                          {"window", b.window},
                          {"gossamer_gb_per_s", b.gossamer}};
        if (b.reference > 0) {
            row["reference_gb_per_s"] = b.reference;
            row["ratio"] = b.gossamer / b.reference;
        }
        if (b.target > 0) row["target_ratio_min"] = b.target;
        j["bandwidth"].push_back(row);
    }
    j["latency"] = {{"bytes", 8},
                    {"gossamer_us", latency_us},
                    {"send_completion_us", send_completion_us},
                    {"target_ratio_max", latency_target}};
    if (reference_latency_us > 0) {
        j["latency"]["reference_us"] = reference_latency_us;
        j["latency"]["ratio"] = latency_us / reference_latency_us;
    }
    if (!reference_error.empty()) j["reference_error"] = reference_error;
    return j;
}

std::string TransportReport::to_text() const {
    std::string out = fmt::format(
        "UCX backend, two threads with their own workers (spinning), beside ucx_perftest "
        "ucp_am_bw/ucp_am_lat{} on localhost; UCX_TLS={}; UCX error handling {}; best of {}\n",
        peer_errors ? " -e" : "", ucx_tls.empty() ? "(UCX's choice)" : ucx_tls,
        peer_errors ? "peer" : "none", repeats);
    out += fmt::format("{:>9} {:>6} {:>17} {:>19} {:>6} {:>7}\n", "size", "iters",
                       "gossamer [GB/s]", "ucx_perftest [GB/s]", "ratio", "target");
    for (const auto& b : bandwidth) {
        const double ratio = b.reference > 0 ? b.gossamer / b.reference : 0;
        out += fmt::format("{:>9} {:>6} {:>17.2f} {:>19} {:>6} {:>7}  {}\n",
                           format_bytes(static_cast<double>(b.bytes)), b.iterations, b.gossamer,
                           b.reference > 0 ? fmt::format("{:.2f}", b.reference) : "-",
                           b.reference > 0 ? fmt::format("{:.2f}", ratio) : "-",
                           b.target > 0 ? fmt::format(">= {:.1f}", b.target) : "",
                           b.target > 0 && b.reference > 0
                               ? (ratio >= b.target ? "ok" : "BELOW TARGET")
                               : "");
    }
    const double lr = reference_latency_us > 0 ? latency_us / reference_latency_us : 0;
    out += fmt::format(
        "latency, 8 bytes one way: {:.2f} us (ucx_perftest {}; ratio {}; target <= {:.1f}) {}\n",
        latency_us,
        reference_latency_us > 0 ? fmt::format("{:.2f} us", reference_latency_us) : "-",
        lr > 0 ? fmt::format("{:.2f}", lr) : "-", latency_target,
        lr > 0 ? (lr <= latency_target ? "ok" : "ABOVE TARGET") : "");
    out += fmt::format("send call -> send-completion callback, 8 bytes: {:.2f} us\n",
                       send_completion_us);
    if (!reference_error.empty()) out += "reference not measured: " + reference_error + "\n";
    return out;
}

}  // namespace gossamer::bench
