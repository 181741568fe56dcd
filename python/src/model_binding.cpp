// gossamer._native model: the built-in model of a training config evaluated from Python, its mean
// loss and gradient for given parameters and rows of the config's data, so that a Python twin
// (python/gossamer/models_torch.py) can be compared with it number for number
// (docs/library/python.md, "The GPT's PyTorch twin").
#include <fmt/format.h>
#include <pybind11/numpy.h>
#include <pybind11/stl.h>

#include <optional>
#include <vector>

#include "bindings.hpp"
#include "gossamer/optimizers/local/local_trainer.hpp"
#include "gossamer/optimizers/local/training_worker.hpp"

namespace gossamer::python {
namespace {

using FloatArray = py::array_t<float, py::array::c_style | py::array::forcecast>;
using IndexArray = py::array_t<std::int64_t, py::array::c_style | py::array::forcecast>;

// The rows' samples of `set` as one batch (copies: rows may repeat and come in any order).
struct Gathered {
    std::vector<float> x, targets;
    std::vector<std::int32_t> labels;
    Batch batch;
};

Gathered gather(const Dataset& set, std::span<const std::int64_t> rows) {
    Gathered g;
    const auto f = static_cast<std::size_t>(set.features);
    g.x.reserve(rows.size() * f);
    for (const auto r : rows) {
        const auto* first = set.x.data() + static_cast<std::size_t>(r) * f;
        g.x.insert(g.x.end(), first, first + f);
        if (set.classes > 0)
            g.labels.push_back(set.labels[static_cast<std::size_t>(r)]);
        else
            g.targets.push_back(set.targets[static_cast<std::size_t>(r)]);
    }
    g.batch.size = static_cast<int>(rows.size());
    g.batch.features = set.features;
    g.batch.x = g.x.data();
    g.batch.labels = set.classes > 0 ? g.labels.data() : nullptr;
    g.batch.targets = set.classes > 0 ? nullptr : g.targets.data();
    return g;
}

py::tuple loss_and_gradient(const std::string& config, const FloatArray& params,
                            const IndexArray& rows, std::optional<int> rank, std::optional<int> n,
                            const std::string& split) {
    const auto cfg = config_from(config);
    if (split != "train" && split != "test")
        throw ConfigError("", "split", fmt::format("unknown split \"{}\"", split),
                          "use \"train\" or \"test\"");
    if (rank.has_value() != n.has_value())
        throw ConfigError("", rank ? "n" : "rank", "rank and n come together",
                          "give both (rows of peer rank's shard of n) or neither (rows of the "
                          "whole split)");
    if (rank && split == "test")
        throw ConfigError("", "split", "a peer's shard is of the training split",
                          "leave split \"train\" with rank and n");
    if (rows.ndim() != 1 || rows.size() < 1)
        throw ConfigError("", "rows",
                          fmt::format("{} dimension(s), {} rows", rows.ndim(), rows.size()),
                          "give a 1-D sequence of at least one row index");
    if (params.ndim() != 1)
        throw ConfigError("", "params", fmt::format("{} dimensions", params.ndim()),
                          "give the flat parameter vector (1-D)");
    const std::span<const float> p(params.data(), static_cast<std::size_t>(params.size()));
    const std::span<const std::int64_t> r(rows.data(), static_cast<std::size_t>(rows.size()));
    double loss = 0;
    std::vector<float> grad;
    {
        py::gil_scoped_release unlocked;
        const auto data = optim::load_training_data(cfg);
        std::optional<optim::TrainingWorker> worker;
        const Dataset* set = split == "test" ? &data.test : &data.train;
        if (rank) {
            if (*n < 1 || *rank < 0 || *rank >= *n)
                throw ConfigError("", "rank",
                                  fmt::format("rank {} is out of range for {} peers", *rank, *n),
                                  "give 0 <= rank < n");
            worker.emplace(optim::make_training_worker(cfg, data.train, *rank, *n, cfg.epochs));
            set = worker->shard.get();
        }
        auto model = optim::build_model(cfg, data.train);
        if (p.size() != model->parameter_count())
            throw ConfigError("", "params",
                              fmt::format("{} values, but the model ({}) has {}", p.size(),
                                          model->describe(), model->parameter_count()),
                              "give the config's own parameters (gossamer.shard(...)[\"params\"])");
        for (std::size_t i = 0; i < r.size(); ++i)
            if (r[i] < 0 || r[i] >= set->size())
                throw ConfigError("", fmt::format("rows[{}]", i),
                                  fmt::format("row {} is out of range: the {} has {} samples", r[i],
                                              rank ? "shard" : split + " split", set->size()),
                                  "give rows in [0, samples)");
        const auto g = gather(*set, r);
        grad.assign(model->parameter_count(), 0.0f);
        loss = model->loss_and_gradient(p, g.batch, grad);
    }
    py::array_t<float> out(static_cast<py::ssize_t>(grad.size()));
    std::copy(grad.begin(), grad.end(), out.mutable_data());
    return py::make_tuple(loss, out);
}

}  // namespace

void bind_model(py::module_& m) {
    m.def("loss_and_gradient", &loss_and_gradient, py::arg("config"), py::arg("params"),
          py::arg("rows"), py::arg("rank") = py::none(), py::arg("n") = py::none(),
          py::arg("split") = "train");
    m.def(
        "model_layers",
        [](const std::string& config) {
            const auto cfg = config_from(config);
            const auto data = optim::load_training_data(cfg);
            return layers_of(*optim::build_model(cfg, data.train));
        },
        py::arg("config"));
}

}  // namespace gossamer::python
