// gossamer::Peer: the user's thread (constructor, step, finish) and the communication thread
// that joins the job and runs the driver over the protocol (docs/library/api.md).
#include <fmt/format.h>

#include <atomic>
#include <cmath>
#include <thread>
#include <utility>

#include "api_connect.hpp"
#include "api_outer.hpp"
#include "api_worker.hpp"
#include "gossamer/bootstrap/environment.hpp"
#include "gossamer/core/error.hpp"
#include "gossamer/core/log.hpp"
#include "gossamer/core/trace.hpp"
#include "gossamer/optimizers/local/multirate.hpp"
#include "gossamer/optimizers/protocol/questions.hpp"
#include "gossamer/optimizers/protocol/registry.hpp"
#include "gossamer/peer.hpp"
#include "gossamer/peer/average.hpp"
#include "gossamer/peer/driver.hpp"
#include "gossamer/peer/settings.hpp"

namespace gossamer {

using api::Clock;

namespace {

double seconds(Clock::duration d) {
    return std::chrono::duration<double>(d).count();
}

// An option's JSON text as a Document whose errors name the option.
std::optional<json::Document> option_json(const std::string& text, const char* name) {
    if (text.empty()) return std::nullopt;
    return json::parse_text(text, fmt::format("PeerOptions::{}", name));
}

void check_options(const PeerOptions& o, std::size_t params, const PartitionLayout& layout) {
    const auto positive = [](std::chrono::milliseconds t, const char* name) {
        if (t.count() <= 0)
            throw ConfigError("", fmt::format("PeerOptions::{}", name),
                              fmt::format("{} ms is not a positive time", t.count()),
                              "give a timeout above 0");
    };
    positive(o.join_timeout, "join_timeout");
    positive(o.step_timeout, "step_timeout");
    positive(o.stall_timeout, "stall_timeout");
    positive(o.run_timeout, "run_timeout");
    if (o.steps < 1)
        throw ConfigError("", "PeerOptions::steps", fmt::format("{} local steps", o.steps),
                          "give the number of local steps this peer takes (1 or more)");
    if (params == 0)
        throw ConfigError("", "params", "the parameter vector is empty",
                          "hand over the model's parameters as one flat fp32 vector");
    if (layout.total() != params)
        throw ConfigError("", "layout",
                          fmt::format("the partitions cover {} parameters, the vector has {}",
                                      layout.total(), params),
                          "give partitions that cover the parameter vector exactly once");
    if (!(o.eval_interval >= 0) || !std::isfinite(o.eval_interval))
        throw ConfigError("", "PeerOptions::eval_interval",
                          fmt::format("{} s is not a time >= 0", o.eval_interval),
                          "give seconds between evaluation points, or 0 for none");
    // The timeline is written when the job ends: a path that cannot be written fails now.
    if (!o.trace_path.empty()) trace::check_writable(o.trace_path, "PeerOptions::trace_path");
    if (o.trace_limit < 10'000)
        throw ConfigError("", "PeerOptions::trace_limit",
                          fmt::format("{} bytes is too small for a timeline", o.trace_limit),
                          "give 10000 bytes or more (the default is 64 MB)");
    if (o.transport == PeerTransport::inproc && !o.inproc)
        throw ConfigError("", "PeerOptions::inproc", "the inproc transport needs a job",
                          "set it to make_inproc_job(n), shared by the n peers");
    if (o.outer) api::check_outer_options(*o.outer);
}

}  // namespace

int peer_count(const std::string& topology_file) {
    return topology::load_topology(topology_file).n();
}

struct Peer::Impl {
    PeerOptions options;
    topology::Topology topology;
    int rank = 0;
    std::span<float> params;
    PartitionLayout layout;
    std::vector<bootstrap::Setting> settings;  // what the handshake compares
    std::optional<json::Document> algorithm_options;
    std::unique_ptr<api::UserWorker> worker;
    /// PeerOptions::outer (not the identity): the outer layer around `worker`, which the
    /// protocol drives; else null and the protocol drives `worker`.
    std::unique_ptr<proto::LocalWorker> outer;
    std::unique_ptr<proto::Protocol> protocol;
    std::atomic<bool> leave{false};
    bool closed = false;  // finish() ran (user thread)
    std::jthread comm;

    mutable std::mutex metrics_mutex;
    PeerMetrics metrics;  // under metrics_mutex
    Clock::time_point returned = Clock::now();
    Clock::time_point first_point = Clock::now();  // the evaluation points' clock starts here
    std::int64_t last_tick = -1, due_tick = -1;    // user thread
    std::mutex evals_mutex;
    std::vector<json::Json> eval_lines;  // recorded, not yet written (under evals_mutex)

    void run_comm();
    peer::AverageResult average(api::Connection& conn, std::span<const float> x, double mass,
                                std::vector<transport::Message>& early);
    void snapshot(const transport::Transport* t, const peer::DriverResult* r);
    [[noreturn]] void rethrow_end();
};

void Peer::Impl::snapshot(const transport::Transport* t, const peer::DriverResult* r) {
    // Communication thread: the protocol is only read here.
    const auto& st = protocol->stats();
    std::lock_guard lock(metrics_mutex);
    auto& m = metrics;
    m.rounds = st.rounds;
    m.bytes_sent = st.bytes_sent;
    m.bytes_received = st.bytes_received;
    m.messages_sent = st.messages_sent;
    m.messages_received = st.messages_received;
    m.partition_bytes_sent = st.partition_bytes_sent;
    m.mass = protocol->mass();
    m.mass_lost = st.mass_lost;
    m.edges = protocol->edge_report();
    if (r) {
        m.failed_peers = r->failed_peers;
    } else if (t) {
        m.failed_peers.clear();
        for (int p = 0; p < t->size(); ++p)
            if (p != rank && t->peer_failed(p)) m.failed_peers.push_back(p);
    }
}

// The exact average of (x, mass) over the survivors (peer/average.hpp), on the communication
// thread: the final model with exact_average, else one float as the job's end barrier.
peer::AverageResult Peer::Impl::average(api::Connection& conn, std::span<const float> x,
                                        double mass, std::vector<transport::Message>& early) {
    conn.poll();
    const std::vector<int> survivors = conn.survivors();
    peer::AverageOptions o;
    o.timeout = std::chrono::duration_cast<transport::Duration>(options.run_timeout);
    o.poll = [&conn] { conn.poll(); };
    auto avg = peer::exact_average(conn.transport(), survivors, x, mass, early, o);
    std::lock_guard lock(metrics_mutex);
    if (x.size() == params.size()) metrics.average_of = survivors;
    return avg;
}

void Peer::Impl::run_comm() {
    std::unique_ptr<api::Connection> conn;
    bool finished = false;
    try {
        api::JoinRequest req{rank, &topology, &options, params.size(), layout, settings};
        conn = options.transport == PeerTransport::inproc ? api::join_inproc(*options.inproc, req)
                                                          : api::join_ucx(req);
        peer::DriverOptions d;
        d.stall_timeout = options.stall_timeout;
        d.run_timeout = options.run_timeout;
        d.watchdog = std::min(d.watchdog, options.stall_timeout);
        d.metrics_path = options.metrics_path;
        d.trace_path = options.trace_path;
        d.trace_limit = options.trace_limit;
        d.clock_offset = conn->clock_offset();
        d.settle = options.exact_average;  // only a mass-weighted average needs the last shares
        d.poll = [this, c = conn.get()] {
            if (leave) throw Error(fmt::format("rank {} left the job early", rank));
            c->poll();
        };
        std::vector<transport::Message> early;  // the exact average's, while training
        d.intercept = [&early](transport::Message& m) {
            if (!peer::is_average_message(m)) return false;
            early.push_back(std::move(m));
            return true;
        };
        d.extra_metrics = [this] {
            std::lock_guard lock(evals_mutex);
            return std::exchange(eval_lines, {});
        };
        const transport::Transport* t = &conn->transport();
        d.on_step = [this, t](const peer::StepRecord&) { snapshot(t, nullptr); };
        proto::LocalWorker& driven = outer ? static_cast<proto::LocalWorker&>(*outer)
                                           : static_cast<proto::LocalWorker&>(*worker);
        peer::Driver driver(*protocol, driven, conn->transport(), d);
        const peer::DriverResult r = driver.run();
        snapshot(t, &r);
        finished = !r.failed;
        std::vector<float> final_model(params.size());
        protocol->current_model(final_model);
        if (finished && options.exact_average)
            final_model = average(*conn, final_model, protocol->mass(), early).model;
        {
            std::lock_guard lock(metrics_mutex);
            metrics.finished = finished;
        }
        worker->end(finished ? std::move(final_model) : std::vector<float>{}, nullptr);
        if (finished && !options.exact_average) {
            // The end barrier (the exact average is one too): no peer closes its endpoints while
            // another still waits for its last messages, which a UCX peer's goodbye can overtake.
            const float one = 1.0f;
            average(*conn, std::span(&one, 1), 1.0, early);
        }
        conn->close(finished, Clock::now() + options.run_timeout);
    } catch (...) {
        const auto error = std::current_exception();
        if (worker->ended() && !worker->error()) {  // after the last step: leaving late
            try {
                std::rethrow_exception(error);
            } catch (const std::exception& e) {
                log::warn("rank {}: {}", rank, e.what());
            }
            return;
        }
        worker->end({}, error);
        try {
            if (conn && !finished) conn->close(false, Clock::now());
        } catch (...) {  // leaving anyway; the job's error is what the user sees
        }
    }
}

void Peer::Impl::rethrow_end() {
    if (auto e = worker->error()) std::rethrow_exception(e);
    throw Error(fmt::format("gossamer::Peer rank {}: step() after the last step ({} steps)", rank,
                            options.steps));
}

std::string default_algorithm() {
    return proto::default_algorithm();
}

Peer::Peer(PeerOptions options, std::span<float> params, PartitionLayout layout)
    : impl_(std::make_unique<Impl>()) {
    Impl& m = *impl_;
    if (layout.count() == 0 && !params.empty()) layout = PartitionLayout::whole(params.size());
    check_options(options, params.size(), layout);
    m.topology = topology::load_topology(options.topology);
    m.rank = bootstrap::discover_rank(options.rank, m.topology.n());
    optim::Multirate rates(layout);
    if (const auto doc = option_json(options.partitions, "partitions")) {
        rates = optim::parse_multirate(json::Node(*doc), layout);
        proto::check_multirate_algorithm(rates, options.algorithm);
    }
    m.algorithm_options = option_json(options.algorithm_options, "algorithm_options");
    using peer::SettingSource;
    peer::add_topology_settings(m.settings, m.topology, SettingSource::api);
    peer::add_algorithm_settings(m.settings, options.algorithm,
                                 m.algorithm_options ? m.algorithm_options->root.get() : nullptr,
                                 SettingSource::api);
    peer::add_partition_settings(m.settings, rates, SettingSource::api);
    peer::add_final_average_setting(m.settings, options.exact_average);
    peer::add_outer_setting(m.settings, options.outer, "PeerOptions::outer");
    m.worker = std::make_unique<api::UserWorker>(params, std::move(rates),
                                                 api::make_peer_device(options.device));
    std::optional<json::Node> node;
    if (m.algorithm_options) node.emplace(*m.algorithm_options);
    // The outer layer (docs/library/api.md, "Outer rounds"): one protocol step per round.
    m.outer = api::make_outer_worker(options, *m.worker, layout, node ? &*node : nullptr);
    const std::int64_t protocol_steps =
        m.outer ? optim::outer_rounds(options.steps, *options.outer) : options.steps;
    proto::LocalWorker* driven = m.outer ? static_cast<proto::LocalWorker*>(m.outer.get())
                                         : static_cast<proto::LocalWorker*>(m.worker.get());
    proto::PeerContext ctx{m.rank, m.topology.n(), m.topology.schedule, driven, protocol_steps};
    m.protocol = proto::make_protocol(options.algorithm, node ? &*node : nullptr, ctx);
    m.params = params;
    m.layout = std::move(layout);
    m.metrics.rank = m.rank;
    m.metrics.n = m.topology.n();
    m.metrics.algorithm = options.algorithm;
    m.options = std::move(options);
    m.comm = std::jthread([&m] { m.run_comm(); });
    // The first point: all peers joined and the protocol asked for its first local step.
    const auto wake =
        m.worker->wait_point(Clock::now() + m.options.join_timeout + std::chrono::seconds(5) +
                             m.options.stall_timeout);  // the bootstrap's io_timeout: 5 s
    if (wake == api::UserWorker::Wake::point) {
        m.returned = m.first_point = Clock::now();
        return;
    }
    m.leave = true;
    m.worker->skip_rest();
    m.comm.join();
    if (auto e = m.worker->error()) std::rethrow_exception(e);
    throw Timeout(
        fmt::format("gossamer::Peer rank {}: the job did not start its first step "
                    "within join_timeout + stall_timeout",
                    m.rank));
}

Peer::~Peer() {
    if (!impl_ || !impl_->comm.joinable()) return;
    Impl& m = *impl_;
    if (!m.worker->ended()) {
        m.leave = true;  // an early exit: the others see this peer fail
        m.worker->skip_rest();
    }
    m.comm.join();
}

bool Peer::step(double loss) {
    Impl& m = *impl_;
    const auto called = Clock::now();
    if (m.closed || !m.worker->hand_over(loss)) m.rethrow_end();
    const auto wake = m.worker->wait_point(called + m.options.step_timeout);
    const auto back = Clock::now();
    {
        std::lock_guard lock(m.metrics_mutex);
        m.metrics.steps = m.worker->handed();
        m.metrics.loss = loss;
        m.metrics.compute_seconds += seconds(called - m.returned);
        m.metrics.wait_seconds += seconds(back - called);
    }
    m.returned = back;
    switch (wake) {
        case api::UserWorker::Wake::point:
            return true;
        case api::UserWorker::Wake::ended:
            if (auto e = m.worker->error()) std::rethrow_exception(e);
            return false;
        case api::UserWorker::Wake::timeout:
            break;
    }
    throw Timeout(fmt::format(
        "gossamer::Peer rank {}: step {} got no next point within {:.1f} s "
        "(PeerOptions::step_timeout); the {} communication is still waiting",
        m.rank, m.worker->handed(), seconds(m.options.step_timeout), m.options.algorithm));
}

PeerMetrics Peer::finish() {
    Impl& m = *impl_;
    if (!m.closed) {
        m.closed = true;
        m.worker->skip_rest();
        // The remaining steps take no time; then the driver ends and the job's end barrier
        // (bounded by run_timeout) lets the thread go.
        if (m.worker->wait_point(Clock::now() + m.options.run_timeout) ==
            api::UserWorker::Wake::timeout) {
            m.leave = true;
        }
        m.comm.join();
    }
    if (auto e = m.worker->error()) std::rethrow_exception(e);
    return metrics();
}

bool Peer::evaluation_due() {
    Impl& m = *impl_;
    if (!(m.options.eval_interval > 0) || m.closed) return false;
    const auto tick = static_cast<std::int64_t>(
        std::floor(seconds(Clock::now() - m.first_point) / m.options.eval_interval));
    if (tick <= m.last_tick) return false;
    m.due_tick = tick;
    return true;
}

void Peer::record_evaluation(double accuracy, double loss) {
    Impl& m = *impl_;
    if (m.due_tick < 0)
        throw Error(
            fmt::format("gossamer::Peer rank {}: record_evaluation() without a point due; "
                        "call it after evaluation_due() returned true",
                        m.rank));
    json::Json line = {{"rank", m.rank},
                       {"eval", m.due_tick},
                       {"time", static_cast<double>(m.due_tick) * m.options.eval_interval},
                       {"at", seconds(Clock::now() - m.first_point)},
                       {"accuracy", accuracy},
                       {"loss", loss}};
    m.last_tick = m.due_tick;
    m.due_tick = -1;
    std::lock_guard lock(m.evals_mutex);
    m.eval_lines.push_back(std::move(line));
}

PeerMetrics Peer::metrics() const {
    std::lock_guard lock(impl_->metrics_mutex);
    return impl_->metrics;
}

int Peer::rank() const noexcept {
    return impl_->rank;
}

int Peer::size() const noexcept {
    return impl_->topology.n();
}

std::int64_t Peer::steps_left() const noexcept {
    return impl_->options.steps - impl_->worker->handed();
}

}  // namespace gossamer
