// gossamer._native: Gossamer's C++ API for Python (docs/library/python.md). Exceptions keep the C++
// one-line messages, so Python users see what the CLI prints after "error: ".
#include <pybind11/pybind11.h>

#include "bindings.hpp"
#include "gossamer/core/error.hpp"
#include "gossamer/core/partition.hpp"
#include "gossamer/optimizers/protocol/registry.hpp"

namespace gossamer::python {

std::string to_json_text(const py::handle& value) {
    return py::module_::import("json").attr("dumps")(value).cast<std::string>();
}

py::object from_json(const json::Json& value) {
    return py::module_::import("json").attr("loads")(value.dump());
}

void bind_errors(py::module_& m) {
    // The hierarchy: Error (RuntimeError) > ConfigError (also ValueError), PeerFailure (.rank),
    // Timeout (also TimeoutError), TransportError, Diverged (this peer's loss or model became
    // NaN or infinite: docs/operations/reliability.md).
    static py::exception<Error> error(m, "Error", PyExc_RuntimeError);
    static py::object config = py::reinterpret_steal<py::object>(PyErr_NewExceptionWithDoc(
        "gossamer.ConfigError", "A file or option is wrong (the CLI exits 2 on it).",
        py::make_tuple(error, py::handle(PyExc_ValueError)).ptr(), nullptr));
    static py::object timeout = py::reinterpret_steal<py::object>(PyErr_NewExceptionWithDoc(
        "gossamer.Timeout", "A blocking wait ran past its deadline.",
        py::make_tuple(error, py::handle(PyExc_TimeoutError)).ptr(), nullptr));
    static py::exception<PeerFailure> failure(m, "PeerFailure", error.ptr());
    static py::exception<TransportError> transport(m, "TransportError", error.ptr());
    static py::exception<Diverged> diverged(m, "Diverged", error.ptr());
    m.attr("ConfigError") = config;
    m.attr("Timeout") = timeout;
    py::register_exception_translator([](std::exception_ptr p) {
        try {
            if (p) std::rethrow_exception(p);
        } catch (const ConfigError& e) {
            PyErr_SetString(config.ptr(), e.what());
        } catch (const TopologyError& e) {
            PyErr_SetString(config.ptr(), e.what());
        } catch (const PartitionError& e) {
            PyErr_SetString(config.ptr(), e.what());
        } catch (const Timeout& e) {
            PyErr_SetString(timeout.ptr(), e.what());
        } catch (const PeerFailure& e) {
            py::object exc = py::reinterpret_borrow<py::object>(failure.ptr())(e.what());
            exc.attr("rank") = e.rank();
            PyErr_SetObject(failure.ptr(), exc.ptr());
        } catch (const TransportError& e) {
            PyErr_SetString(transport.ptr(), e.what());
        } catch (const Diverged& e) {
            PyErr_SetString(diverged.ptr(), e.what());
        } catch (const Error& e) {
            PyErr_SetString(error.ptr(), e.what());
        }
    });
}

void bind_registry(py::module_& m) {
    m.def(
        "algorithms",
        [] {
            py::list out;
            for (const auto& a : proto::algorithms()) out.append(py::make_tuple(a.name, a.summary));
            return out;
        },
        "The registered algorithms, [(name, summary), ...] in registry order.");
    m.def("default_algorithm", &proto::default_algorithm,
          "The registry's default algorithm (gossamer peer's default).");
}

}  // namespace gossamer::python

PYBIND11_MODULE(_native, m) {
    m.doc() = "Gossamer's C++ core: peers, topologies, data (use the gossamer package)";
    gossamer::python::bind_errors(m);
    gossamer::python::bind_registry(m);
    gossamer::python::bind_topology(m);
    gossamer::python::bind_peer(m);
    gossamer::python::bind_data(m);
    gossamer::python::bind_model(m);
}
