// gossamer._native.Topology: load, generate and analyse topology files with the same code as
// `gossamer topo show|gen|matrix` (so the numbers agree with the CLI's).
#include <fmt/format.h>
#include <pybind11/stl.h>

#include <fstream>
#include <sstream>

#include "bindings.hpp"
#include "gossamer/core/error.hpp"
#include "gossamer/topology/analysis.hpp"
#include "gossamer/topology/topology_file.hpp"

namespace gossamer::python {
namespace {

namespace topo = topology;

struct PyTopology {
    topo::Topology topology;
    std::string text;  // the file's JSON: written by save(), given to peers
};

PyTopology load(const std::string& path) {
    PyTopology t{topo::load_topology(path), {}};
    std::ifstream in(path);
    std::ostringstream s;
    s << in.rdbuf();
    t.text = s.str();
    return t;
}

PyTopology generate(const std::string& family, int n, const std::string& weights,
                    std::uint64_t seed, int rows, int cols, double p, const std::string& host,
                    int base_port) {
    std::string families;
    for (auto f : topo::family_names()) families += (families.empty() ? "" : ", ") + std::string(f);
    if (!topo::is_family(family))
        throw ConfigError("", "family", fmt::format("unknown family \"{}\"", family),
                          "use one of " + families);
    const auto rule = topo::parse_weight_rule(weights);
    if (!rule || *rule == topo::WeightRule::explicit_weights)
        throw ConfigError("", "weights", fmt::format("unknown rule \"{}\"", weights),
                          "use uniform, metropolis_hastings, max_degree or push_sum");
    topo::FamilySpec s;
    s.family = family;
    s.n = n;
    s.weights = *rule;
    s.seed = seed;
    s.rows = rows;
    s.cols = cols;
    s.p = p;
    const auto doc = topo::family_topology_json(s, topo::LocalPeers{host, base_port});
    const std::string text = doc.dump(2);
    return {topo::parse_topology(json::parse_text(text, "gossamer.Topology.generate")), text};
}

}  // namespace

void bind_topology(py::module_& m) {
    py::class_<PyTopology>(m, "Topology")
        .def_static("load", &load, py::arg("path"))
        .def_static("generate", &generate, py::arg("family"), py::arg("n"),
                    py::arg("weights") = "uniform", py::arg("seed") = 1, py::arg("rows") = 0,
                    py::arg("cols") = 0, py::arg("p") = 0.0, py::arg("host") = "127.0.0.1",
                    py::arg("base_port") = 29500)
        .def_static("families",
                    [] {
                        std::vector<std::string> out;
                        for (auto f : topo::family_names()) out.emplace_back(f);
                        return out;
                    })
        .def_property_readonly("n", [](const PyTopology& t) { return t.topology.n(); })
        .def_property_readonly("source", [](const PyTopology& t) { return t.topology.source; })
        .def_property_readonly("description",
                               [](const PyTopology& t) { return t.topology.schedule->describe(); })
        .def_property_readonly("period",
                               [](const PyTopology& t) { return t.topology.schedule->period(); })
        .def_property_readonly("json_text", [](const PyTopology& t) { return t.text; })
        .def("__repr__",
             [](const PyTopology& t) {
                 return fmt::format("<gossamer.Topology {} from {}>",
                                    t.topology.schedule->describe(), t.topology.source);
             })
        .def(
            "analyse",
            [](const PyTopology& t, std::uint64_t model_bytes, std::int64_t max_rounds,
               std::int64_t samples, std::uint64_t seed, bool text) -> py::object {
                topo::AnalysisOptions o;
                o.model_bytes = model_bytes;
                o.max_rounds = max_rounds;
                o.sample_rounds = samples;
                o.seed = seed;
                topo::Report r;
                {
                    py::gil_scoped_release unlocked;  // a large graph takes seconds
                    r = topo::analyse(*t.topology.schedule, o);
                }
                if (text) return py::str(topo::to_text(r));
                return from_json(topo::to_json(r));
            },
            py::arg("model_bytes") = 4u << 20, py::arg("max_rounds") = 1'000'000,
            py::arg("samples") = 256, py::arg("seed") = 1, py::arg("text") = false)
        .def(
            "matrix",
            [](const PyTopology& t, std::int64_t round) {
                if (round < 0)
                    throw ConfigError("", "round", fmt::format("round {} is negative", round),
                                      "give a round of 0 or more");
                const auto r = t.topology.schedule->at(round);
                const int n = t.topology.n();
                std::vector<std::vector<double>> w(
                    static_cast<std::size_t>(n), std::vector<double>(static_cast<std::size_t>(n)));
                for (int i = 0; i < n; ++i)
                    for (const auto& e : r->weights.row(i))
                        w[static_cast<std::size_t>(i)][static_cast<std::size_t>(e.col)] = e.weight;
                return w;
            },
            py::arg("round") = 0);
}

}  // namespace gossamer::python
