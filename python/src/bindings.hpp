#pragma once
// The parts of the gossamer._native module, each defined in its own file (module.cpp calls them).
#include <pybind11/pybind11.h>

#include <string>

#include "gossamer/core/dataset.hpp"
#include "gossamer/core/json.hpp"
#include "gossamer/core/model.hpp"
#include "gossamer/optimizers/local/training_config.hpp"

namespace gossamer::python {

namespace py = pybind11;

void bind_errors(py::module_& m);
void bind_registry(py::module_& m);  ///< algorithms(), default_algorithm()
void bind_peer(py::module_& m);
void bind_topology(py::module_& m);
void bind_data(py::module_& m);
void bind_model(py::module_& m);  ///< loss_and_gradient(): the built-in model from Python

/// A training config from its JSON text (ConfigError at "config..." when it is wrong).
optim::TrainingConfig config_from(const std::string& text);
/// A data set as NumPy arrays: {"x", "y", "classes", "name"} (+ "vocabulary" for text).
py::dict arrays(const Dataset& d);
/// A model's layers as [(name, offset, size)].
py::list layers_of(const Model& model);

/// A Python value (dict, list, number, str, None) as JSON text, through Python's json module.
std::string to_json_text(const py::handle& value);
/// JSON as the Python value json.loads makes of it.
py::object from_json(const json::Json& value);

}  // namespace gossamer::python
