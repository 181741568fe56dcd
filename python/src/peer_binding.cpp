// gossamer._native.Peer: gossamer::Peer over a Python buffer (a NumPy view of the torch tensor
// that the model's parameters view). The GIL is released while the peer joins, steps, finishes
// or leaves: those calls wait for the network and for the other peers (threads of this process
// under the inproc transport, which need the GIL for their own loops).
#include <fmt/format.h>
#include <pybind11/stl.h>

#include <chrono>
#include <memory>

#include "bindings.hpp"
#include "gossamer/core/error.hpp"
#include "gossamer/peer.hpp"

namespace gossamer::python {
namespace {

struct Job {
    std::shared_ptr<InprocJob> job;
    int n = 0;
};

std::chrono::milliseconds millis(double seconds, const char* name) {
    if (!(seconds > 0))
        throw ConfigError("", name, fmt::format("{} s is not a positive time", seconds),
                          "give a timeout above 0 seconds");
    return std::chrono::milliseconds(static_cast<std::int64_t>(seconds * 1000.0 + 0.5));
}

// The flat fp32 vector behind `params`: one-dimensional, contiguous, writable.
std::span<float> flat_floats(const py::buffer& params) {
    const py::buffer_info info = params.request(true);
    if (info.format != py::format_descriptor<float>::format() || info.ndim != 1 ||
        (info.size > 1 && info.strides[0] != static_cast<py::ssize_t>(sizeof(float))))
        throw ConfigError("", "params", "the parameters are not one contiguous float32 vector",
                          "hand over a 1-D float32 buffer (gossamer.torch.flatten does)");
    return {static_cast<float*>(info.ptr), static_cast<std::size_t>(info.size)};
}

// Device memory (PeerOptions::device other than "cpu"): a (pointer, count) pair, as
// gossamer.Peer passes a CUDA tensor's data_ptr() and numel().
std::span<float> device_floats(const py::object& params, const std::string& device) {
    if (!py::isinstance<py::tuple>(params) || py::len(params) != 2)
        throw ConfigError("", "params",
                          fmt::format("device \"{}\" takes (pointer, count) of float32 device "
                                      "memory",
                                      device),
                          "hand over a CUDA tensor (gossamer.Peer passes its data_ptr() and "
                          "numel())");
    const auto t = params.cast<py::tuple>();
    const auto ptr = t[0].cast<std::uintptr_t>();
    const auto count = t[1].cast<std::size_t>();
    if (ptr == 0 || ptr % alignof(float) != 0)
        throw ConfigError("", "params", "the device pointer is null or not float-aligned",
                          "hand over a float32 CUDA tensor");
    return {reinterpret_cast<float*>(ptr), count};
}

class PyPeer {
  public:
    PyPeer(py::object params, PeerOptions options, std::vector<Partition> layout)
        : buffer_(params) {
        const auto p = options.device == "cpu" ? flat_floats(params.cast<py::buffer>())
                                               : device_floats(params, options.device);
        PartitionLayout parts =
            layout.empty() ? PartitionLayout::whole(p.size()) : PartitionLayout(layout, p.size());
        py::gil_scoped_release unlocked;
        peer_ = std::make_unique<Peer>(std::move(options), p, std::move(parts));
    }
    ~PyPeer() { close(); }

    bool step(double loss) {
        py::gil_scoped_release unlocked;
        return live().step(loss);
    }
    PeerMetrics finish() {
        py::gil_scoped_release unlocked;
        return live().finish();
    }
    // Leaves the job as the C++ destructor does (waits for the others after the last step).
    void close() {
        if (!peer_) return;
        if (PyGILState_Check()) {
            py::gil_scoped_release unlocked;
            peer_.reset();
        } else {
            peer_.reset();
        }
    }
    Peer& live() {
        if (!peer_) throw Error("the peer was closed; create a new gossamer.Peer");
        return *peer_;
    }

  private:
    py::object buffer_;  // keeps the parameter memory alive while the peer writes into it
    std::unique_ptr<Peer> peer_;
};

// outer={...} (JSON text of the dict): read as the training config's "outer" section, so the
// error lines are the config's ("outer.steps: 0 inner steps per round; ...").
optim::OuterOptions outer_options(const std::string& text) {
    const auto doc = json::parse_text("{\"outer\": " + text + "}", "");
    return *optim::find_outer_options(json::Node(doc));
}

py::dict metrics_dict(const PeerMetrics& m) {
    py::dict d;
    d["rank"] = m.rank;
    d["n"] = m.n;
    d["algorithm"] = m.algorithm;
    d["steps"] = m.steps;
    d["rounds"] = m.rounds;
    d["bytes_sent"] = m.bytes_sent;
    d["bytes_received"] = m.bytes_received;
    d["messages_sent"] = m.messages_sent;
    d["messages_received"] = m.messages_received;
    d["partition_bytes_sent"] = m.partition_bytes_sent;
    d["loss"] = m.loss;
    d["compute_seconds"] = m.compute_seconds;
    d["wait_seconds"] = m.wait_seconds;
    d["mass"] = m.mass;
    d["mass_lost"] = m.mass_lost;
    d["failed_peers"] = m.failed_peers;
    d["edges"] = from_json(m.edges);
    d["finished"] = m.finished;
    d["average_of"] = m.average_of;
    return d;
}

}  // namespace

void bind_peer(py::module_& m) {
    py::class_<Job>(m, "InprocJob", "N peers as threads of this process (transport='inproc')")
        .def(py::init([](int n) {
                 return Job{make_inproc_job(n), n};
             }),
             py::arg("n"))
        .def_readonly("n", &Job::n);
    m.def("peer_count", &peer_count, py::arg("topology"),
          "The number of peers of a topology file.");
    m.def(
        "outer_describe", [](const std::string& text) { return outer_options(text).describe(); },
        py::arg("outer"),
        "The outer options (JSON text of the \"outer\" keys) in one line, "
        "\"H=8 nesterov lr=0.7 momentum=0.9\"; ConfigError as gossamer.Peer(outer=...).");

    py::class_<PyPeer>(m, "Peer")
        .def(py::init([](py::object params, std::string topology, std::optional<int> rank,
                         std::string algorithm, std::string options, std::string partitions,
                         std::vector<std::tuple<std::string, std::size_t, std::size_t>> layout,
                         std::int64_t steps, std::string transport, const Job* job,
                         std::string token_file, std::uint64_t job_id, double join_timeout,
                         double step_timeout, double stall_timeout, double run_timeout,
                         std::string metrics_path, bool exact_average, std::string device,
                         double eval_interval, std::string trace_path, double trace_limit,
                         std::string outer) {
                 PeerOptions o;
                 o.topology = std::move(topology);
                 o.rank = rank;
                 o.algorithm = std::move(algorithm);
                 o.algorithm_options = std::move(options);
                 o.partitions = std::move(partitions);
                 o.steps = steps;
                 if (transport == "inproc") {
                     o.transport = PeerTransport::inproc;
                     if (job) o.inproc = job->job;
                 } else if (transport != "ucx") {
                     throw ConfigError("", "transport",
                                       fmt::format("unknown transport \"{}\"", transport),
                                       "use ucx or inproc");
                 }
                 o.token_file = std::move(token_file);
                 o.job_id = job_id;
                 o.join_timeout = millis(join_timeout, "join_timeout");
                 o.step_timeout = millis(step_timeout, "step_timeout");
                 o.stall_timeout = millis(stall_timeout, "stall_timeout");
                 o.run_timeout = millis(run_timeout, "run_timeout");
                 o.metrics_path = std::move(metrics_path);
                 o.exact_average = exact_average;
                 o.device = std::move(device);
                 o.eval_interval = eval_interval;
                 o.trace_path = std::move(trace_path);
                 if (!(trace_limit >= 0) || trace_limit > 1e15)
                     throw ConfigError("", "trace_limit",
                                       fmt::format("{} is not a size in bytes", trace_limit),
                                       "give bytes, e.g. 64e6 (the default)");
                 o.trace_limit = static_cast<std::size_t>(trace_limit);
                 if (!outer.empty()) o.outer = outer_options(outer);
                 std::vector<Partition> parts;
                 for (auto& [name, offset, size] : layout) parts.push_back({name, offset, size});
                 return std::make_unique<PyPeer>(params, std::move(o), std::move(parts));
             }),
             py::arg("params"), py::arg("topology"), py::arg("rank"), py::arg("algorithm"),
             py::arg("options"), py::arg("partitions"), py::arg("layout"), py::arg("steps"),
             py::arg("transport"), py::arg("job").none(true), py::arg("token_file"),
             py::arg("job_id"), py::arg("join_timeout"), py::arg("step_timeout"),
             py::arg("stall_timeout"), py::arg("run_timeout"), py::arg("metrics_path"),
             py::arg("exact_average"), py::arg("device") = "cpu", py::arg("eval_interval") = 0.0,
             py::arg("trace_path") = "", py::arg("trace_limit") = 64e6, py::arg("outer") = "")
        .def("step", &PyPeer::step, py::arg("loss"))
        .def("finish", [](PyPeer& p) { return metrics_dict(p.finish()); })
        .def("close", &PyPeer::close)
        .def("evaluation_due", [](PyPeer& p) { return p.live().evaluation_due(); })
        .def(
            "record_evaluation",
            [](PyPeer& p, double accuracy, double loss) {
                p.live().record_evaluation(accuracy, loss);
            },
            py::arg("accuracy"), py::arg("loss"))
        .def("metrics", [](PyPeer& p) { return metrics_dict(p.live().metrics()); })
        .def_property_readonly("rank", [](PyPeer& p) { return p.live().rank(); })
        .def_property_readonly("size", [](PyPeer& p) { return p.live().size(); })
        .def_property_readonly("steps_left", [](PyPeer& p) { return p.live().steps_left(); });
}

}  // namespace gossamer::python
