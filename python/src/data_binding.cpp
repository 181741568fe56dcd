// gossamer._native data and reference training: Gossamer's data sets and shards as NumPy arrays
// (the same samples a built-in peer trains on), and the built-in peers of a training config, so
// Python code can be compared with them step for step (docs/library/python.md).
#include <fmt/format.h>
#include <pybind11/numpy.h>
#include <pybind11/stl.h>

#include <algorithm>

#include "bindings.hpp"
#include "gossamer/core/model.hpp"
#include "gossamer/core/sharding.hpp"
#include "gossamer/optimizers/local/local_trainer.hpp"
#include "gossamer/optimizers/local/training_config.hpp"
#include "gossamer/optimizers/local/training_worker.hpp"
#include "gossamer/peer/local.hpp"
#include "gossamer/topology/topology_file.hpp"

namespace gossamer::python {

optim::TrainingConfig config_from(const std::string& text) {
    return optim::parse_training_config(json::parse_text(text, "config"));
}

// Features as [N, C, H, W] for images and [N, F] otherwise; labels (or targets) as [N]. Text
// data: x holds the windows' token ids as int64 [N, context + 1] (the built-in stores them as
// floats, exact below 2^24) and "vocabulary" the characters of the ids (bytes as Latin-1).
py::dict arrays(const Dataset& d) {
    const auto n = static_cast<py::ssize_t>(d.size());
    py::dict out;
    if (!d.vocabulary.empty()) {
        py::array_t<std::int64_t> ids({n, static_cast<py::ssize_t>(d.features)});
        std::transform(d.x.begin(), d.x.end(), ids.mutable_data(),
                       [](float v) { return static_cast<std::int64_t>(v); });
        out["x"] = ids;
        out["vocabulary"] = py::reinterpret_steal<py::str>(PyUnicode_DecodeLatin1(
            d.vocabulary.data(), static_cast<py::ssize_t>(d.vocabulary.size()), nullptr));
    } else {
        std::vector<py::ssize_t> shape{n, d.features};
        if (d.height > 0 && d.width > 0 && d.channels * d.height * d.width == d.features)
            shape = {n, d.channels, d.height, d.width};
        py::array_t<float> x(shape);
        std::copy(d.x.begin(), d.x.end(), x.mutable_data());
        out["x"] = x;
    }
    if (d.classes > 0) {
        py::array_t<std::int64_t> y(n);
        std::copy(d.labels.begin(), d.labels.end(), y.mutable_data());
        out["y"] = y;
    } else {
        py::array_t<float> y(n);
        std::copy(d.targets.begin(), d.targets.end(), y.mutable_data());
        out["y"] = y;
    }
    out["classes"] = d.classes;
    out["name"] = d.name;
    return out;
}

py::list layers_of(const Model& model) {
    py::list out;
    for (const auto& l : model.layers()) out.append(py::make_tuple(l.name, l.offset, l.size));
    return out;
}

void bind_data(py::module_& m) {
    m.def(
        "load_data",
        [](const std::string& config) {
            const auto cfg = config_from(config);
            optim::TrainingData data;
            {
                py::gil_scoped_release unlocked;
                data = optim::load_training_data(cfg);
            }
            py::dict out;
            out["train"] = arrays(data.train);
            out["test"] = arrays(data.test);
            return out;
        },
        py::arg("config"));
    m.def(
        "shard",
        [](const std::string& config, int rank, int n, std::optional<int> epochs) {
            const auto cfg = config_from(config);
            if (epochs && *epochs < 1)
                throw ConfigError("", "epochs", fmt::format("{} epochs", *epochs),
                                  "give at least 1 epoch");
            const auto data = optim::load_training_data(cfg);
            if (n < 1 || rank < 0 || rank >= n)
                throw ConfigError("", "rank",
                                  fmt::format("rank {} is out of range for {} peers", rank, n),
                                  "give 0 <= rank < n");
            auto w =
                optim::make_training_worker(cfg, data.train, rank, n, epochs.value_or(cfg.epochs));
            py::dict out = arrays(*w.shard);
            const auto p = w.trainer->params();
            py::array_t<float> params(static_cast<py::ssize_t>(p.size()));
            std::copy(p.begin(), p.end(), params.mutable_data());
            out["params"] = params;
            out["layers"] = layers_of(w.trainer->model());  // [(name, offset, size)]
            out["model"] = w.trainer->model().describe();
            out["steps"] = w.inner_steps;  // local (inner) steps
            out["rounds"] = w.steps;       // protocol steps: rounds under "outer"
            out["batch_size"] = w.trainer->batch_size();
            // The trainer's batches (rows of the shard, step after step: BatchLoader's epoch
            // permutations, the tail of each epoch dropped) and learning rates, so that a
            // reference script (bench/ddp_ref.py) takes the built-in peer's very steps.
            const auto b = static_cast<std::int64_t>(w.trainer->batch_size());
            const auto per_epoch = w.trainer->batches_per_epoch();
            const auto seed = optim::LocalTrainer::batch_seed(cfg.seed, rank);
            py::array_t<std::int64_t> rows(
                {static_cast<py::ssize_t>(w.inner_steps), static_cast<py::ssize_t>(b)});
            py::array_t<double> lr(static_cast<py::ssize_t>(w.inner_steps));
            const auto schedule = optim::build_schedule(cfg, w.inner_steps);
            std::vector<std::int64_t> order;
            for (std::int64_t s = 0; s < w.inner_steps; ++s) {
                if (s % per_epoch == 0)
                    order = epoch_permutation(static_cast<std::int64_t>(w.shard->size()), seed,
                                              static_cast<std::uint64_t>(s / per_epoch));
                const auto first = (s % per_epoch) * b;
                std::copy(order.begin() + first, order.begin() + first + b,
                          rows.mutable_data() + s * b);
                lr.mutable_data()[s] = schedule.at(s);
            }
            out["batches"] = rows;
            out["lr"] = lr;
            return out;
        },
        py::arg("config"), py::arg("rank"), py::arg("n"), py::arg("epochs") = py::none());
    m.def(
        "train_builtin",
        [](const std::string& config, const std::string& topology, const std::string& algorithm,
           const std::string& options) {
            const auto cfg = config_from(config);
            const auto topo = topology::load_topology(topology);
            std::optional<json::Document> opts;
            if (!options.empty()) opts = json::parse_text(options, "options");
            std::optional<json::Node> node;
            if (opts) node.emplace(*opts);
            peer::LocalTrainingResult res;
            {
                py::gil_scoped_release unlocked;
                const auto data = optim::load_training_data(cfg);
                peer::LocalTraining job;
                job.algorithm = algorithm;
                job.algorithm_options = node ? &*node : nullptr;
                job.topology = topo.schedule;
                job.config = &cfg;
                job.train = &data.train;
                job.test = &data.test;
                job.epochs = cfg.epochs;
                res = peer::run_local_training(job);
            }
            py::dict out;
            out["loss"] = res.loss;
            out["accuracy"] = res.accuracy;
            std::vector<std::string> errors;
            for (const auto& o : res.peers) errors.push_back(o.error);
            out["errors"] = errors;
            return out;
        },
        py::arg("config"), py::arg("topology"), py::arg("algorithm"), py::arg("options") = "");
}

}  // namespace gossamer::python
