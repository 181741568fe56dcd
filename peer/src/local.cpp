#include "gossamer/peer/local.hpp"

#include <barrier>
#include <chrono>
#include <thread>

#include "gossamer/core/error.hpp"
#include "gossamer/core/file_io.hpp"
#include "gossamer/optimizers/local/training_worker.hpp"
#include "gossamer/optimizers/protocol/registry.hpp"
#include "gossamer/transport/inproc.hpp"

namespace gossamer::peer {

std::vector<PeerOutcome> run_inproc_peers(const std::vector<proto::Protocol*>& protocols,
                                          const std::vector<proto::LocalWorker*>& workers,
                                          const std::function<DriverOptions(int rank)>& options) {
    const int n = static_cast<int>(protocols.size());
    auto fabric = transport::make_inproc_fabric(n);
    std::barrier sync(n);
    std::vector<PeerOutcome> out(static_cast<std::size_t>(n));
    std::vector<std::jthread> threads;
    for (int r = 0; r < n; ++r)
        threads.emplace_back([&, r] {
            const auto i = static_cast<std::size_t>(r);
            transport::TransportOptions o;
            o.rank = r;
            o.size = n;
            o.job_id = 7;
            o.default_timeout = transport::Duration(5000);
            auto t = transport::make_inproc_transport(fabric, o);
            sync.arrive_and_wait();  // all joined before anyone sends (the bootstrap's job)
            PeerOutcome& me = out[i];
            const auto t0 = std::chrono::steady_clock::now();
            bool gone = false;
            try {
                Driver d(*protocols[i], *workers[i], *t, options ? options(r) : DriverOptions{});
                me.result = d.run();
            } catch (const PeerFailure& e) {
                me.error = e.what();
                me.failed_rank = e.rank();
            } catch (const Diverged& e) {
                me.error = e.what();
                me.diverged = true;
            } catch (const IoError& e) {  // its metrics could not be written (a full disk)
                me.error = e.what();
                gone = true;
            } catch (const std::exception& e) {
                me.error = e.what();
            }
            me.seconds =
                std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
            if ((me.result && me.result->failed) || me.diverged || gone) {
                // The emulated crash, a peer that diverged or could not write: it leaves the
                // fabric now, so the others see it fail instead of waiting for it.
                t.reset();
                sync.arrive_and_drop();
                return;
            }
            sync.arrive_and_wait();
        });
    threads.clear();  // joins
    return out;
}

LocalTrainingResult run_local_training(const LocalTraining& job) {
    if (!job.topology || !job.config || !job.train || !job.test)
        throw Error("run_local_training: a topology, a config and data are needed");
    const int n = job.topology->n();
    std::vector<optim::TrainingWorker> workers;
    std::vector<std::unique_ptr<proto::Protocol>> owned;
    std::vector<proto::Protocol*> protocols;
    std::vector<proto::LocalWorker*> locals;
    for (int r = 0; r < n; ++r) {
        workers.push_back(optim::make_training_worker(*job.config, *job.train, r, n, job.epochs));
        auto& w = workers.back();
        proto::PeerContext ctx{r, n, job.topology, &w.protocol_worker(), w.steps, job.cluster};
        ctx.value_bound = job.config->value_bound;  // docs/operations/reliability.md
        owned.push_back(proto::make_protocol(job.algorithm, job.algorithm_options, ctx));
        protocols.push_back(owned.back().get());
        locals.push_back(&w.protocol_worker());
    }
    LocalTrainingResult res;
    std::function<DriverOptions(int)> options = job.options;
    if (job.attach)
        options = [&](int r) {
            DriverOptions o = job.options ? job.options(r) : DriverOptions{};
            job.attach(r, *protocols[static_cast<std::size_t>(r)], o);
            return o;
        };
    res.peers = run_inproc_peers(protocols, locals, options);
    // The mass-weighted average of the survivors' models, as the simulator evaluates it.
    const auto model = optim::build_model(*job.config, *job.train);
    const std::size_t size = model->parameter_count();
    std::vector<double> mean(size, 0.0);
    std::vector<float> x(size);
    double total = 0;
    for (int r = 0; r < n; ++r) {
        const auto& p = res.peers[static_cast<std::size_t>(r)];
        if (!p.result || p.result->failed) continue;
        const auto* proto = protocols[static_cast<std::size_t>(r)];
        proto->current_model(x);
        const double w = proto->mass();
        for (std::size_t k = 0; k < size; ++k) mean[k] += w * x[k];
        total += w;
    }
    if (!(total > 0)) return res;
    for (std::size_t k = 0; k < size; ++k) x[k] = static_cast<float>(mean[k] / total);
    const EvalResult e = model->evaluate(x, *job.test, 1000);
    res.loss = e.loss;
    res.accuracy = e.accuracy;
    return res;
}

}  // namespace gossamer::peer
