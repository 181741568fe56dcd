// Two processes (this one and a forked helper), each one spinning communication thread of its
// own UCX context and worker, as two peers on one host would be. Bandwidth: rank 0 keeps `window`
// sends of one buffer in flight; rank 1 recycles every payload and answers the last with an 8-byte
// ack, which stops the clock. Latency: 8-byte ping-pong, each leg from the send call to the receive
// callback on the other communication thread; half the round trip, as ucx_perftest reports it.
#include "transport.hpp"

#include <fmt/format.h>
#include <pthread.h>
#include <sched.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <map>
#include <thread>

#include "gossamer/core/error.hpp"
#include "gossamer/core/log.hpp"
#include "gossamer/core/units.hpp"
#include "gossamer/transport/ucx.hpp"
#include "perftest.hpp"
#include "ranks.hpp"

namespace gossamer::bench {
namespace {

namespace tr = transport;
using namespace std::chrono_literals;

// From this size on the reference is also run with eager forced: below it UCX sends eager by
// itself (its rendezvous threshold is about 8 KiB over shared memory, 20 KiB over TCP here).
constexpr std::size_t kEagerTried = std::size_t{8} << 10;

std::unique_ptr<tr::UcxTransport> make_transport(int rank, bool peer_errors) {
    tr::UcxOptions o;
    o.rank = rank;
    o.size = 2;
    o.job_id = 0xbe7c;
    o.mode = tr::ProgressMode::spin;
    o.errors = peer_errors ? tr::ErrorHandling::peer : tr::ErrorHandling::none;
    o.default_timeout = 30s;
    return tr::make_ucx_transport(o);
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

// One measurement, as both processes see it.
struct Request {
    int kind = 0;  // 0 bandwidth, 1 latency, 2 quit
    std::uint64_t bytes = 0;
    int iterations = 0;
    int window = 0;
    int peer_errors = 1;
};
struct Result {
    double seconds = 0, one_way_us = 0, completion_us = 0;
};

// Rank 0 sends `iterations` messages of `bytes` to rank 1 (after a warm-up); seconds.
void bandwidth(const Request& q, int rank, tr::UcxTransport& t, Result& out) {
    const std::size_t floats = q.bytes / sizeof(float);
    const int iterations = q.iterations, window = q.window;
    {
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
            require(tr::progress_until(
                        t, [&] { return received == warm + iterations; }, 120s),
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
            require(tr::progress_until(
                        t, [&] { return acked && in_flight == 0; }, 120s),
                    "sending");
        };
        blast(warm);
        const auto t0 = tr::Clock::now();
        blast(iterations);
        out.seconds = std::chrono::duration<double>(tr::Clock::now() - t0).count();
    }
}

// 8-byte ping-pong; rank 0 measures.
void latency(const Request& q, int rank, tr::UcxTransport& t, Result& out) {
    const int iterations = q.iterations;
    {
        std::vector<float> word(2, 0.0f);  // 8 bytes
        const auto payload = std::as_bytes(std::span<const float>(word));
        int got = 0;
        tr::Clock::time_point sent_at, t0;
        double completion = 0;
        auto done = [&](const tr::Status&) {
            completion += std::chrono::duration<double>(tr::Clock::now() - sent_at).count();
        };
        auto ping = [&] {
            sent_at = tr::Clock::now();
            t.send(to(1 - rank, 2), payload, done);
        };
        // The first `iterations` round trips warm up; the clock runs over the next ones.
        t.on_receive([&](tr::Message&& m) {
            t.recycle(std::move(m.payload));
            ++got;
            if (rank == 0 && got == iterations) {
                t0 = tr::Clock::now();
                completion = 0;
            }
            if (rank == 1 || got < 2 * iterations) ping();
        });
        if (rank == 0) ping();
        require(tr::progress_until(
                    t, [&] { return got >= 2 * iterations; }, 120s),
                "ping-pong");
        if (rank == 1) return;
        const double s = std::chrono::duration<double>(tr::Clock::now() - t0).count();
        out.one_way_us = s / (2.0 * iterations) * 1e6;
        out.completion_us = completion / iterations * 1e6;
    }
}

// Creates rank `rank`'s transport, swaps address blobs over the pipes, connects, runs the
// request's role, then tells the other side it is done and waits for its word.
Result run_role(const Request& q, int rank, int in, int out) {
    auto t = make_transport(rank, q.peer_errors != 0);
    const auto mine = t->address();
    const std::uint64_t len = mine.size();
    write_all(out, &len, sizeof(len));
    write_all(out, mine.data(), mine.size());
    std::uint64_t their_len = 0;
    read_all(in, &their_len, sizeof(their_len));
    std::vector<std::byte> theirs(their_len);
    read_all(in, theirs.data(), theirs.size());
    t->connect({{1 - rank, theirs}});
    Result r;
    char ok = 1;
    try {
        (q.kind == 0 ? bandwidth : latency)(q, rank, *t, r);
    } catch (...) {
        ok = 0;
    }
    write_all(out, &ok, 1);
    char other = 0;
    read_all(in, &other, 1);
    if (!ok || !other) throw Error("bench transport: a run failed or timed out");
    return r;
}

// Rank 1 lives in a process forked before this one touches UCX, and serves requests until
// told to quit: the same two-process layout as ucx_perftest's server and client.
class Helper {
  public:
    Helper() {
        int down[2], up[2];
        if (::pipe(down) != 0 || ::pipe(up) != 0) throw Error("bench transport: pipe failed");
        pid_ = ::fork();
        if (pid_ < 0) throw Error("bench transport: fork failed");
        if (pid_ == 0) {
            ::close(down[1]);
            ::close(up[0]);
            pin_to_cpu(1);
            int status = 0;
            try {
                for (Request q;;) {
                    read_all(down[0], &q, sizeof(q));
                    if (q.kind == 2) break;
                    run_role(q, 1, down[0], up[1]);
                }
            } catch (...) {
                status = 1;
            }
            ::_exit(status);
        }
        ::close(down[0]);
        ::close(up[1]);
        to_ = down[1];
        from_ = up[0];
        sched_getaffinity(0, sizeof(saved_), &saved_);
        pin_to_cpu(0);
    }
    ~Helper() {
        Request quit;
        quit.kind = 2;
        try {
            write_all(to_, &quit, sizeof(quit));
        } catch (...) {
        }
        ::close(to_);
        ::close(from_);
        int status = 0;
        ::waitpid(pid_, &status, 0);
        pthread_setaffinity_np(pthread_self(), sizeof(saved_), &saved_);
    }
    Result run(const Request& q) {
        write_all(to_, &q, sizeof(q));
        return run_role(q, 0, from_, to_);
    }

  private:
    pid_t pid_ = -1;
    int to_ = -1, from_ = -1;
    cpu_set_t saved_{};
};

}  // namespace

TransportReport run_transport(const TransportBenchOptions& options) {
    const log::QuietScope quiet;  // the teardown races by design (log.hpp)
    Helper helper;
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
                         bool higher_is_better, const std::string& env = {}) {
        double best = 0;
        if (!options.reference || !r.reference_error.empty()) return best;
        auto ref = run_perftest(options.perftest, test, bytes, iterations, extra, env);
        if (!ref.ok) {
            r.reference_error = ref.error;
            return best;
        }
        return higher_is_better ? ref.value * 1048576.0 / 1e9 : ref.value;  // MiB/s -> GB/s
    };
    // The reference runs with UCX's choice of protocol and, where that may be a rendezvous, with
    // eager forced (UCX_RNDV_THRESH=inf, as our eager rule forces it for our row): the better of
    // the two counts, so that our row never meets a reference weaker than UCX can be.
    auto bandwidth_reference = [&](BandwidthRow& row) {
        const double chosen = reference("ucp_am_bw", row.bytes, row.iterations, true);
        if (chosen > row.reference) {
            row.reference = chosen;
            row.reference_protocol = "ucx";
        }
        if (row.bytes < kEagerTried) return;
        const double eager =
            reference("ucp_am_bw", row.bytes, row.iterations, true, "UCX_RNDV_THRESH=inf");
        if (eager > row.reference) {
            row.reference = eager;
            row.reference_protocol = "eager";
        }
    };
    for (auto bytes : sizes) {
        if (options.progress) options.progress(fmt::format("bandwidth {}", format_bytes(bytes)));
        BandwidthRow row;
        row.bytes = bytes;
        row.iterations =
            static_cast<int>(std::clamp<std::size_t>(options.bytes_per_size / bytes, 20, 20000));
        row.target = bytes >= (1u << 20) ? 0.9 : 0.0;
        row.window = static_cast<int>(
            std::clamp<std::size_t>(options.window_bytes / bytes, 1, options.window));
        for (int k = 0; k < options.repeats; ++k) {
            Request q;
            q.bytes = bytes;
            q.iterations = row.iterations;
            q.window = row.window;
            q.peer_errors = options.peer_errors;
            const double s = helper.run(q).seconds;
            row.gossamer =
                std::max(row.gossamer, static_cast<double>(bytes) * row.iterations / s / 1e9);
            bandwidth_reference(row);
        }
        r.bandwidth.push_back(row);
    }
    if (options.progress) options.progress("latency");
    r.latency_us = r.send_completion_us = r.reference_latency_us = 1e300;
    for (int k = 0; k < options.repeats; ++k) {
        Request q;
        q.kind = 1;
        q.iterations = options.latency_iterations;
        q.peer_errors = options.peer_errors;
        const auto res = helper.run(q);
        r.latency_us = std::min(r.latency_us, res.one_way_us);
        r.send_completion_us = std::min(r.send_completion_us, res.completion_us);
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
                    {"reference",
                     "ucx_perftest ucp_am_bw / ucp_am_lat; bandwidth: the better of UCX's "
                     "protocol choice and eager (UCX_RNDV_THRESH=inf)"},
                    {"bandwidth", json::Json::array()}};
    for (const auto& b : bandwidth) {
        json::Json row = {{"bytes", b.bytes},
                          {"iterations", b.iterations},
                          {"window", b.window},
                          {"gossamer_gb_per_s", b.gossamer}};
        if (b.reference > 0) {
            row["reference_gb_per_s"] = b.reference;
            row["reference_protocol"] = b.reference_protocol;
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
        "UCX backend, two processes with their own workers (spinning), beside ucx_perftest "
        "ucp_am_bw/ucp_am_lat{} on localhost (bandwidth: the better of UCX's protocol and "
        "eager); UCX_TLS={}; UCX error handling {}; best of {}\n",
        peer_errors ? " -e" : "", ucx_tls.empty() ? "(UCX's choice)" : ucx_tls,
        peer_errors ? "peer" : "none", repeats);
    out += fmt::format("{:>9} {:>6} {:>17} {:>19} {:>6} {:>7}\n", "size", "iters",
                       "gossamer [GB/s]", "ucx_perftest [GB/s]", "ratio", "target");
    for (const auto& b : bandwidth) {
        const double ratio = b.reference > 0 ? b.gossamer / b.reference : 0;
        out += fmt::format(
            "{:>9} {:>6} {:>17.2f} {:>19} {:>6} {:>7}  {}\n",
            format_bytes(static_cast<double>(b.bytes)), b.iterations, b.gossamer,
            b.reference > 0 ? fmt::format("{:.2f} {:>5}", b.reference, b.reference_protocol) : "-",
            b.reference > 0 ? fmt::format("{:.2f}", ratio) : "-",
            b.target > 0 ? fmt::format(">= {:.1f}", b.target) : "",
            b.target > 0 && b.reference > 0 ? (ratio >= b.target ? "ok" : "BELOW TARGET") : "");
    }
    const double lr = reference_latency_us > 0 ? latency_us / reference_latency_us : 0;
    out += fmt::format(
        "latency, 8 bytes one way: {:.2f} us (ucx_perftest {}; ratio {}; target <= {:.1f}) {}\n",
        latency_us, reference_latency_us > 0 ? fmt::format("{:.2f} us", reference_latency_us) : "-",
        lr > 0 ? fmt::format("{:.2f}", lr) : "-", latency_target,
        lr > 0 ? (lr <= latency_target ? "ok" : "ABOVE TARGET") : "");
    out += fmt::format("send call -> send-completion callback, 8 bytes: {:.2f} us\n",
                       send_completion_us);
    if (!reference_error.empty()) out += "reference not measured: " + reference_error + "\n";
    return out;
}

}  // namespace gossamer::bench
