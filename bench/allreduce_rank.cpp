// One rank of `gossamer bench allreduce`: the ring all-reduce is proto::AllreduceProtocol, the
// object a training peer runs, driven by a small loop over the UCX transport (what
// peer::Driver's communication loop does, without a compute thread: the "gradient" is the
// rank's input vector and a step takes no time). The exchange is one gossip round of the
// one-peer exponential graph: send x to one peer, receive one x, mix them.
#include "allreduce_rank.hpp"

#include <fmt/format.h>

#include <array>
#include <cmath>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <functional>
#include <map>
#include <thread>

#include "allreduce.hpp"
#include "gossamer/core/error.hpp"
#include "gossamer/core/mixing.hpp"
#include "gossamer/optimizers/protocols/allreduce/allreduce.hpp"
#include "gossamer/topology/generators.hpp"
#include "gossamer/transport/ucx.hpp"

namespace gossamer::bench {
namespace {

namespace tr = transport;
using Clock = std::chrono::steady_clock;

double since(Clock::time_point t0) {
    return std::chrono::duration<double>(Clock::now() - t0).count();
}

// Rank r's input: (r + 1) + (i mod 1024). Every partial sum is an integer below 2^24, so the
// sum is exact in fp32 whatever the order, and its average is one correctly rounded division.
float input(int rank, std::size_t i) {
    return static_cast<float>(rank + 1) + static_cast<float>(i % 1024);
}

// The "gradient" is the rank's input; apply_gradient (called by the protocol with the averaged
// all-reduce buffer) only remembers where the result is, so nothing but the protocol is timed.
class BenchWorker final : public proto::LocalWorker {
  public:
    BenchWorker(int rank, std::size_t floats) : g_(floats) {
        for (std::size_t i = 0; i < floats; ++i) g_[i] = input(rank, i);
        // For the test that the result check can fail: one wrong input on the last rank.
        if (const char* c = std::getenv("GOSSAMER_BENCH_CORRUPT_RANK"); c && std::atoi(c) == rank)
            g_.back() += 1.0f;
    }
    std::size_t size() const override { return g_.size(); }
    bool math() const override { return true; }
    std::span<float> params() override { return {}; }
    double compute_gradient(std::span<const float>) override { return 0.0; }
    std::span<const float> gradient() const override { return g_; }
    void apply_gradient(std::span<float>, std::span<const float> g) override {
        result_ = g;
        ++steps_;
    }
    std::int64_t steps() const override { return steps_; }
    std::span<const float> result() const { return result_; }

  private:
    std::vector<float> g_;
    std::span<const float> result_;
    std::int64_t steps_ = 0;
};

// The transport's callbacks only queue; the loops below handle one event at a time.
class Comm {
  public:
    Comm(tr::UcxTransport& t, int rank, int n, std::chrono::milliseconds timeout)
        : t_(t), rank_(rank), n_(n), timeout_(timeout) {
        t_.on_receive([this](tr::Message&& m) {
            if (m.kind != tr::MessageKind::control) return arrived.push_back(std::move(m));
            ++synced_;
            t_.recycle(std::move(m.payload));
        });
        t_.on_peer_failed([this](const tr::Status& s) {
            if (failure.empty()) failure = s.reason;
        });
    }
    ~Comm() {
        t_.on_receive([&t = t_](tr::Message&& m) { t.recycle(std::move(m.payload)); });
        t_.on_peer_failed([](const tr::Status&) {});
    }
    Comm(const Comm&) = delete;
    Comm& operator=(const Comm&) = delete;
    // Sends `header` with `payload`; its completion lands in `completed`.
    void send(const tr::Message& header, std::span<const float> payload, std::uint64_t id) {
        t_.send(header, std::as_bytes(payload), [this, id](const tr::Status& s) {
            if (!s.ok() && failure.empty()) failure = s.reason;
            completed.push_back(id);
        });
    }
    // Every rank tells every other one it is here and waits to hear from all: the ranks start
    // an operation within one message latency of each other, as after MPI_Barrier. (The
    // parent's barrier before it releases the ranks one pipe write after the other.)
    void sync() {
        static const std::array<float, 2> word{};
        ++rounds_;
        for (int p = 0; p < n_; ++p) {
            if (p == rank_) continue;
            tr::Message h;
            h.kind = tr::MessageKind::control;
            h.receiver = p;
            h.round = rounds_;
            h.elements = word.size();
            ++sync_sends_;
            t_.send(h, std::as_bytes(std::span(word)), [this](const tr::Status& s) {
                if (!s.ok() && failure.empty()) failure = s.reason;
                --sync_sends_;
            });
        }
        run([] { return false; }, [&] { return synced_ >= rounds_ * (n_ - 1) && sync_sends_ == 0; },
            [&] { return fmt::format("rank {}: start of operation {}", rank_, rounds_); });
    }
    // Progresses until handle() (called for each queued event, false when none) and done()
    // say so; throws after the timeout, or when a peer failed.
    template <class Handle, class Done>
    void run(Handle handle, Done done, const std::function<std::string()>& what) {
        const auto deadline = Clock::now() + timeout_;
        for (unsigned idle = 0; !done();) {
            if (!failure.empty()) throw Error(fmt::format("{}: {}", what(), failure));
            if (handle()) continue;
            // The clock costs more than a poll here: read it every 64th idle turn.
            if ((++idle & 63u) == 0 && Clock::now() > deadline)
                throw Timeout(fmt::format(
                    "{}: not done within {:.1f} s ({} messages received, {} sent; {} dropped by "
                    "header checks)",
                    what(), timeout_.count() / 1000.0, t_.counters().messages_received,
                    t_.counters().messages_sent, t_.drops().total()));
            t_.wait(std::chrono::milliseconds(5));
        }
    }
    tr::UcxTransport& transport() { return t_; }
    std::deque<tr::Message> arrived;
    std::deque<std::uint64_t> completed;
    std::string failure;

  private:
    tr::UcxTransport& t_;
    int rank_, n_;
    std::chrono::milliseconds timeout_;
    std::int64_t rounds_ = 0, synced_ = 0;
    int sync_sends_ = 0;
};

// warmup + iterations all-reduces of `bytes`; seconds each.
std::vector<double> time_allreduce(const RankJob& job, int rank, std::size_t bytes, Comm& comm,
                                   const RankChannel& channel) {
    const std::size_t floats = bytes / sizeof(float);
    const int total = job.warmup + job.iterations;
    BenchWorker worker(rank, floats);
    proto::PeerContext ctx;
    ctx.rank = rank;
    ctx.n = job.n;
    ctx.worker = &worker;
    ctx.max_steps = total;
    proto::AllreduceOptions o;
    o.chunks = job.chunks > 0 ? job.chunks : chunks_for(bytes, job.n);
    proto::AllreduceProtocol protocol(ctx, o);
    // As peer::Driver does: sends read the protocol's memory, all-gather chunks land in place.
    protocol.enable_zero_copy();
    comm.transport().on_place(
        [&](const tr::Message& h) { return std::as_writable_bytes(protocol.receive_into(h)); });
    struct Unplace {
        tr::UcxTransport& t;
        ~Unplace() { t.on_place({}); }
    } unplace{comm.transport()};
    const auto start = Clock::now();
    std::map<std::uint64_t, tr::Message> in_flight;  // the transport reads these payloads
    bool ready = false;
    auto apply = [&](proto::Actions& a) {
        for (auto& s : a.sends) {
            auto& m = in_flight.emplace(s.id, std::move(s.msg)).first->second;
            comm.send(m, s.borrowed.empty() ? std::span<const float>(m.payload) : s.borrowed, s.id);
        }
        ready = ready || a.start_step || a.done;
    };
    auto handle = [&] {
        proto::Actions a;
        if (!comm.completed.empty()) {
            const auto id = comm.completed.front();
            comm.completed.pop_front();
            // As a driver should: the sent payload goes back to the transport's receive pool.
            auto it = in_flight.find(id);
            if (it == in_flight.end())
                throw Error(fmt::format("rank {}: completion of unknown send {}", rank, id));
            if (!it->second.payload.empty())
                comm.transport().recycle(std::move(it->second.payload));
            in_flight.erase(it);
            protocol.send_completed(since(start), id, true, a);
        } else if (!comm.arrived.empty()) {
            tr::Message m = std::move(comm.arrived.front());
            comm.arrived.pop_front();
            protocol.message_arrived(since(start), std::move(m), a);
        } else {
            return false;
        }
        apply(a);
        return true;
    };
    {
        proto::Actions a;
        protocol.start(0.0, a);
        if (!a.start_step) throw Error("allreduce: the protocol did not start a step");
    }
    std::vector<double> times;
    for (int it = 0; it < total; ++it) {
        channel.barrier(job.timeout, [&] { comm.transport().progress(); });
        comm.sync();
        const auto t0 = Clock::now();
        ready = false;
        proto::Actions a;
        protocol.step_finished(since(start), 0.0, a);
        apply(a);
        comm.run(
            handle, [&] { return ready && in_flight.empty(); },
            [&] {
                return fmt::format(
                    "rank {}: all-reduce {} of {} bytes ({}, {} of its sends in flight, {} "
                    "messages held for later)",
                    rank, it, bytes, ready ? "result complete" : "result incomplete",
                    in_flight.size(), protocol.buffered());
            });
        times.push_back(since(t0));
        const auto r = worker.result();
        if (r.size() != floats)
            throw Error(fmt::format("rank {}: all-reduce {} of {} bytes returned {} values", rank,
                                    it, bytes, r.size()));
        const std::size_t sum0 = static_cast<std::size_t>(job.n) * (job.n + 1) / 2;
        for (std::size_t i = 0; i < floats; ++i) {
            const float want =
                static_cast<float>(sum0 + job.n * (i % 1024)) / static_cast<float>(job.n);
            if (r[i] != want)
                throw Error(
                    fmt::format("rank {}: WRONG RESULT: all-reduce {} of {} bytes gave "
                                "{} at element {}, expected the average {}",
                                rank, it, bytes, r[i], i, want));
        }
    }
    return times;
}

// warmup + iterations rounds of the one-peer exponential exchange; seconds each.
std::vector<double> time_exchange(const RankJob& job, int rank, std::size_t bytes, Comm& comm,
                                  const RankChannel& channel) {
    const std::size_t floats = bytes / sizeof(float);
    std::vector<float> x(floats);
    for (std::size_t i = 0; i < floats; ++i) x[i] = input(rank, i);
    // x_r[i] = a_r + (i mod 1024) on every rank, so the expected values need a_r only.
    std::vector<double> a(static_cast<std::size_t>(job.n));
    for (int r = 0; r < job.n; ++r) a[static_cast<std::size_t>(r)] = r + 1;
    std::vector<double> times;
    for (int t = 0; t < job.warmup + job.iterations; ++t) {
        const auto g = topology::one_peer_exponential(job.n, t);
        const int to = g.out_neighbors(rank)[0], from = g.in_neighbors(rank)[0];
        const std::string what =
            fmt::format("rank {}: exchange round {} of {} bytes", rank, t, bytes);
        channel.barrier(job.timeout, [&] { comm.transport().progress(); });
        comm.sync();
        const auto t0 = Clock::now();
        tr::Message h;
        h.kind = tr::MessageKind::full_model;
        h.receiver = to;
        h.round = t;
        h.elements = floats;
        bool sent = false;
        comm.send(h, x, 0);
        auto handle = [&] {
            if (comm.completed.empty()) return false;
            comm.completed.pop_front();
            sent = true;
            return true;
        };
        comm.run(
            handle, [&] { return sent && !comm.arrived.empty(); }, [&] { return what; });
        tr::Message m = std::move(comm.arrived.front());
        comm.arrived.pop_front();
        if (m.sender != from || m.round != t || m.payload.size() != floats)
            throw Error(
                fmt::format("{}: got round {} with {} values from rank {}, expected "
                            "round {} with {} from rank {}",
                            what, m.round, m.payload.size(), m.sender, t, floats, from));
        const MixTerm term{m.payload, 0.5f};
        mix(x, 0.5f, std::span(&term, 1));
        times.push_back(since(t0));
        const double want = a[static_cast<std::size_t>(from)];
        for (std::size_t i = 0; i < floats; ++i) {
            const double v = want + static_cast<double>(i % 1024);
            if (std::abs(m.payload[i] - v) > 1e-4 * (1 + v))
                throw Error(fmt::format("{}: WRONG VALUE {} at element {}, expected {}", what,
                                        m.payload[i], i, v));
        }
        comm.transport().recycle(std::move(m.payload));
        std::vector<double> next(a.size());
        for (int r = 0; r < job.n; ++r)
            next[static_cast<std::size_t>(r)] =
                0.5 * a[static_cast<std::size_t>(r)] +
                0.5 * a[static_cast<std::size_t>(g.in_neighbors(r)[0])];
        a = next;
    }
    return times;
}

}  // namespace

void run_rank(const RankJob& job, RankChannel& channel) {
    const int rank = channel.rank();
    // As mpirun binds its processes to cores when they do not outnumber them.
    if (static_cast<unsigned>(job.n) <= std::thread::hardware_concurrency()) pin_to_cpu(rank);
    tr::UcxOptions o;
    o.rank = rank;
    o.size = job.n;
    o.job_id = 0xa11e;
    o.mode = tr::ProgressMode::automatic;  // blocks on the event fd when ranks outnumber cores
    o.local_peers = job.n;
    o.errors = job.peer_errors ? tr::ErrorHandling::peer : tr::ErrorHandling::none;
    o.default_timeout = job.timeout;
    auto t = tr::make_ucx_transport(o);
    const auto mine = t->address();
    channel.send('A', mine.data(), mine.size());
    const Frame all = channel.receive(job.timeout);
    std::map<int, std::vector<std::byte>> addresses;
    for (std::size_t at = 0, r = 0; at < all.data.size(); ++r) {
        std::uint64_t len = 0;
        std::memcpy(&len, all.data.data() + at, sizeof(len));
        at += sizeof(len);
        const auto* p = all.data.data() + at;
        addresses[static_cast<int>(r)] = std::vector<std::byte>(p, p + len);
        at += len;
    }
    t->connect(addresses);
    // For the test that a dead rank is reported, not waited for.
    if (const char* k = std::getenv("GOSSAMER_BENCH_KILL_RANK"); k && std::atoi(k) == rank)
        ::raise(SIGKILL);
    Comm comm(*t, rank, job.n, job.timeout);
    std::vector<double> times;
    for (const auto bytes : job.sizes) {
        const auto ar = time_allreduce(job, rank, bytes, comm, channel);
        times.insert(times.end(), ar.begin(), ar.end());
        if (!job.exchange) continue;
        const auto ex = time_exchange(job, rank, bytes, comm, channel);
        times.insert(times.end(), ex.begin(), ex.end());
    }
    // Every rank is done sending once the parent has everybody's times.
    channel.send('T', times.data(), times.size() * sizeof(double));
    channel.barrier(job.timeout, [&] { comm.transport().progress(); });
}

}  // namespace gossamer::bench
