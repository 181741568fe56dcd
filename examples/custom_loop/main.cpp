// Your own training loop in a gossip job, with gossamer::Peer (docs/library/api.md).
//
// This program owns everything Gossamer usually provides: a one-hidden-layer network written by
// hand, its synthetic data (each peer's shard drawn around a different centre, so the peers
// disagree unless they talk), and its own optimizer (SGD with momentum). Gossamer only joins the
// job and runs the algorithm's communication after each local step.
//
//   custom_loop --topology ring4.json --threads                 # every peer as a thread
//   custom_loop --topology ring4.json --rank 2 --algorithm sgp  # one peer of a real job (UCX)
//
// Options: --algorithm NAME (dpsgd), --steps N (300), --rank R (or OMPI_COMM_WORLD_RANK,
// PMI_RANK, SLURM_PROCID), --threads, --average (every peer ends with the exact average of all
// models). Exit status: 0 done, 1 the job failed, 2 bad input.
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <gossamer/peer.hpp>
#include <mutex>
#include <random>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace {

constexpr int kIn = 8, kHidden = 16;
constexpr std::size_t kHiddenParams = kHidden * (kIn + 1);    // W1, b1
constexpr std::size_t kParams = kHiddenParams + kHidden + 1;  // + w2, b2

struct Sample {
    float x[kIn];
    float y;  // 0 or 1
};

// The labels come from one fixed rule; peer `rank` sees inputs around its own centre.
std::vector<Sample> make_data(int count, double centre, unsigned seed) {
    std::mt19937 rng(seed);
    std::normal_distribution<double> normal(0.0, 1.0);
    std::vector<Sample> out(static_cast<std::size_t>(count));
    for (auto& s : out) {
        double a = 0, b = 0;
        for (int k = 0; k < kIn; ++k) {
            s.x[k] = static_cast<float>(normal(rng) + (k == 0 ? centre : 0.0));
            a += (k % 2 ? 1.0 : -1.0) * s.x[k];
            b += s.x[k] * 0.3;
        }
        s.y = std::sin(a) + b > 0 ? 1.0f : 0.0f;
    }
    return out;
}

// Binary cross-entropy of the network p = [W1 (kHidden x kIn), b1, w2, b2] on samples
// [first, first + count); with `grad` non-empty, also its gradient.
double loss(const std::vector<float>& p, const std::vector<Sample>& data, std::size_t first,
            std::size_t count, std::vector<float>* grad, int* correct = nullptr) {
    const float* w1 = p.data();
    const float* b1 = w1 + kHidden * kIn;
    const float* w2 = w1 + kHiddenParams;
    const float b2 = p[kParams - 1];
    if (grad) grad->assign(kParams, 0.0f);
    double total = 0;
    for (std::size_t i = first; i < first + count; ++i) {
        const Sample& s = data[i % data.size()];
        float h[kHidden];
        double z = b2;
        for (int j = 0; j < kHidden; ++j) {
            double a = b1[j];
            for (int k = 0; k < kIn; ++k) a += w1[j * kIn + k] * s.x[k];
            h[j] = static_cast<float>(std::tanh(a));
            z += w2[j] * h[j];
        }
        const double prob = 1.0 / (1.0 + std::exp(-z));
        total += -(s.y * std::log(prob + 1e-12) + (1 - s.y) * std::log(1 - prob + 1e-12));
        if (correct) *correct += (prob > 0.5) == (s.y > 0.5f);
        if (!grad) continue;
        const auto dz = static_cast<float>((prob - s.y) / static_cast<double>(count));
        float* g = grad->data();
        for (int j = 0; j < kHidden; ++j) {
            g[kHiddenParams + j] += dz * h[j];
            const float da = dz * w2[j] * (1 - h[j] * h[j]);
            for (int k = 0; k < kIn; ++k) g[j * kIn + k] += da * s.x[k];
            g[kHidden * kIn + j] += da;
        }
        g[kParams - 1] += dz;
    }
    return total / static_cast<double>(count);
}

std::mutex print_mutex;

struct Args {
    gossamer::PeerOptions peer;
    bool threads = false;
};

// One peer: its data, its model (the same initial values on every peer), its loop.
void train(const gossamer::PeerOptions& options) {
    std::vector<float> params(kParams);
    std::mt19937 init(42);  // the same seed everywhere: every peer starts from the same model
    std::normal_distribution<float> normal(0.0f, 0.5f);
    for (auto& v : params) v = normal(init);
    const gossamer::PartitionLayout layout(
        {{"hidden", 0, kHiddenParams}, {"output", kHiddenParams, kParams - kHiddenParams}},
        kParams);

    gossamer::Peer peer(options, params, layout);  // joins; params hold the first point
    const int rank = peer.rank();
    const auto data = make_data(2000, 1.5 * (rank - (peer.size() - 1) / 2.0), 100u + rank);
    const auto test = make_data(1000, 0.0, 7);  // the same test set on every peer
    const double initial = loss(params, test, 0, test.size(), nullptr);
    std::vector<float> grad, velocity(kParams, 0.0f);
    const std::size_t batch = 32;
    std::size_t next = 0;
    double l = 0;
    do {
        l = loss(params, data, next, batch, &grad);
        next += batch;
        for (std::size_t k = 0; k < kParams; ++k) {  // SGD with momentum: the user's optimizer
            velocity[k] = 0.9f * velocity[k] + grad[k];
            params[k] -= 0.05f * velocity[k];
        }
        const auto done = options.steps - peer.steps_left() + 1;
        if (done % 100 == 0) {
            std::lock_guard lock(print_mutex);
            std::printf("rank %d step %lld loss %.4f\n", rank, static_cast<long long>(done), l);
        }
    } while (peer.step(l));  // gossip; params now hold the next point (the final model at the end)
    const gossamer::PeerMetrics m = peer.finish();

    int correct = 0;
    const double test_loss = loss(params, test, 0, test.size(), nullptr, &correct);
    double checksum = 0;
    for (float v : params) checksum += v;
    std::lock_guard lock(print_mutex);
    std::printf(
        "rank %d: %lld steps, test loss %.4f -> %.4f, accuracy %.3f, model checksum %.6f; %s: %lld "
        "rounds, %llu bytes sent, %llu received, waited %.3f s, computed %.3f s, failed peers "
        "%zu\n",
        rank, static_cast<long long>(m.steps), initial, test_loss, correct / 1000.0, checksum,
        m.algorithm.c_str(), static_cast<long long>(m.rounds),
        static_cast<unsigned long long>(m.bytes_sent),
        static_cast<unsigned long long>(m.bytes_received), m.wait_seconds, m.compute_seconds,
        m.failed_peers.size());
}

int usage(const std::string& why) {
    std::fprintf(stderr,
                 "custom_loop: %s (usage: custom_loop --topology FILE [--rank R] "
                 "[--algorithm NAME] [--steps N] [--threads] [--average])\n",
                 why.c_str());
    return 2;
}

// The whole of `text` as an integer; throws std::invalid_argument otherwise.
long long integer(const std::string& text) {
    std::size_t used = 0;
    const long long v = std::stoll(text, &used);
    if (used != text.size()) throw std::invalid_argument(text);
    return v;
}

}  // namespace

int main(int argc, char** argv) {
    Args a;
    a.peer.steps = 300;
    for (int i = 1; i < argc; ++i) {
        const std::string arg = argv[i];
        const bool has_value = i + 1 < argc;
        try {
            if (arg == "--threads") {
                a.threads = true;
            } else if (arg == "--average") {
                a.peer.exact_average = true;  // every peer ends with the survivors' mean model
            } else if (!has_value) {
                return usage("unknown option or missing value: " + arg);
            } else if (arg == "--topology") {
                a.peer.topology = argv[++i];
            } else if (arg == "--rank") {
                const long long rank = integer(argv[++i]);
                if (rank < 0 || rank > 1'000'000) return usage("--rank needs a rank from 0");
                a.peer.rank = static_cast<int>(rank);
            } else if (arg == "--algorithm") {
                a.peer.algorithm = argv[++i];
            } else if (arg == "--steps") {
                a.peer.steps = integer(argv[++i]);
            } else {
                return usage("unknown option: " + arg);
            }
        } catch (const std::logic_error&) {
            return usage(arg + " needs an integer, not \"" + argv[i] + "\"");
        }
    }
    if (a.peer.topology.empty()) return usage("--topology is required");
    try {
        if (!a.threads) {
            train(a.peer);
            return 0;
        }
        // Every peer of the topology file as a thread of this process (in-process transport).
        const int n = gossamer::peer_count(a.peer.topology);
        auto job = gossamer::make_inproc_job(n);
        std::vector<std::exception_ptr> errors(static_cast<std::size_t>(n));
        std::vector<std::thread> threads;
        for (int r = 0; r < n; ++r)
            threads.emplace_back([&, r] {
                gossamer::PeerOptions o = a.peer;
                o.rank = r;
                o.transport = gossamer::PeerTransport::inproc;
                o.inproc = job;
                try {
                    train(o);
                } catch (...) {
                    errors[static_cast<std::size_t>(r)] = std::current_exception();
                }
            });
        for (auto& t : threads) t.join();
        for (const auto& e : errors)
            if (e) std::rethrow_exception(e);
    } catch (const gossamer::ConfigError& e) {
        std::fprintf(stderr, "custom_loop: %s\n", e.what());
        return 2;
    } catch (const std::exception& e) {
        std::fprintf(stderr, "custom_loop: %s\n", e.what());
        return 1;
    }
    return 0;
}
