// The link is measured first, by `bench transport`'s code (two forked processes, each with its
// own UCX worker), so that fork() happens before BLAS starts threads; then the local step of the
// config's worker, built as a real peer builds it (optim::make_training_worker).
#include "calibrate.hpp"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <ctime>
#include <filesystem>
#include <fstream>

#include "gossamer/core/blas.hpp"
#include "gossamer/core/cluster.hpp"
#include "gossamer/core/error.hpp"
#include "gossamer/optimizers/local/training_config.hpp"
#include "gossamer/optimizers/local/training_worker.hpp"
#include "transport.hpp"

namespace gossamer::bench {

CalibrateReport run_calibrate(const CalibrateOptions& o) {
    CalibrateReport r;
    // Everything the user wrote is checked before anything is measured or written.
    auto cfg = optim::load_training_config(o.config);
    r.config = o.config;
    r.batch = cfg.batch_size;
    r.steps = o.steps;
    r.threads = o.threads;
    r.peer_errors = o.peer_errors;
    r.out = o.out;

    if (o.progress) o.progress("link bandwidth and latency");
    TransportBenchOptions t;
    t.sizes = {o.link_bytes};
    t.bytes_per_size = 64 * o.link_bytes;
    t.latency_iterations = 2000;
    t.repeats = 1;
    t.reference = false;
    t.peer_errors = o.peer_errors;
    const auto link = run_transport(t);
    r.bandwidth = link.bandwidth.at(0).gossamer * 1e9;
    r.latency = link.latency_us * 1e-6;

    if (o.progress) o.progress(fmt::format("loading {}", cfg.data.name));
    set_blas_threads(o.threads);
    const auto data = optim::load_training_data(cfg);
    auto worker = optim::make_training_worker(cfg, data.train, 0, o.peers, 1);
    r.model = worker.trainer->model().describe();
    if (o.progress) o.progress(fmt::format("{} local steps", o.warmup + o.steps));
    std::vector<double> times;
    for (int s = 0; s < o.warmup + o.steps; ++s) {
        const auto t0 = std::chrono::steady_clock::now();
        worker.trainer->step();
        const double dt =
            std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        if (s >= o.warmup) times.push_back(dt);
    }
    std::sort(times.begin(), times.end());
    r.step_median = times[times.size() / 2];
    r.step_min = times.front();
    r.step_p90 = times[std::min(times.size() - 1, times.size() * 9 / 10)];

    char host[256] = "this host";
    ::gethostname(host, sizeof(host) - 1);
    const std::time_t now = std::time(nullptr);
    char when[32];
    std::strftime(when, sizeof(when), "%Y-%m-%d %H:%M UTC", std::gmtime(&now));
    r.cluster = {
        {"version", 1},
        {"name", "calibrated"},
        {"description",
         fmt::format("gossamer bench calibrate on {} at {}: median local step of {} ({}, batch "
                     "{}, {} BLAS thread(s)) over {} steps; link: UCX between two local "
                     "processes ({}), {} MiB messages and 8-byte one-way latency",
                     host, when, o.config, r.model, r.batch, o.threads, o.steps,
                     o.peer_errors ? "TCP loopback" : "shared memory", o.link_bytes >> 20)},
        {"defaults", {{"base_time", r.step_median}}},
        {"network", {{"latency", r.latency}, {"bandwidth", r.bandwidth}}}};
    if (o.out.empty()) return r;
    // Written beside, checked by the loader `gossamer sim` uses, then moved into place: a
    // failure leaves no half-written file.
    const std::string tmp = o.out + ".tmp";
    {
        std::ofstream f(tmp);
        f << r.cluster.dump(2) << "\n";
        if (!f)
            throw ConfigError("", "--out", fmt::format("cannot write {}", tmp),
                              "name a file in a writable folder");
    }
    try {
        load_cluster(tmp, 2);
    } catch (...) {
        std::filesystem::remove(tmp);
        throw;
    }
    std::filesystem::rename(tmp, o.out);
    return r;
}

json::Json CalibrateReport::to_json() const {
    json::Json j = {{"config", config},
                    {"model", model},
                    {"batch", batch},
                    {"threads", threads},
                    {"steps", steps},
                    {"step_time_median_s", step_median},
                    {"step_time_min_s", step_min},
                    {"step_time_p90_s", step_p90},
                    {"link_bandwidth_bytes_per_s", bandwidth},
                    {"link_latency_s", latency},
                    {"ucx_error_handling", peer_errors ? "peer" : "none"},
                    {"cluster", cluster}};
    if (!out.empty()) j["out"] = out;
    return j;
}

std::string CalibrateReport::to_text() const {
    std::string s = fmt::format(
        "local step ({}, batch {}, {} BLAS thread(s)): median {:.3f} ms over {} steps (min "
        "{:.3f}, p90 {:.3f})\n"
        "link between two local UCX processes ({}): {:.3f} GB/s, {:.2f} us one way\n",
        model, batch, threads, step_median * 1e3, steps, step_min * 1e3, step_p90 * 1e3,
        peer_errors ? "TCP loopback" : "shared memory", bandwidth / 1e9, latency * 1e6);
    s += out.empty() ? "no cluster file written (--out FILE writes one)\n"
                     : fmt::format(
                           "wrote {} (base_time {:.6f} s, latency {:.3g} s, bandwidth "
                           "{:.4g} B/s)\n",
                           out, step_median, latency, bandwidth);
    return s;
}

}  // namespace gossamer::bench
