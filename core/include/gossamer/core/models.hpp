#pragma once
/// The built-in models and the factory that builds a model from a config.
///
///   {"name": "softmax"}                                  multiclass logistic regression
///   {"name": "linear"}                                   least squares (mean squared error)
///   {"name": "mlp", "hidden": [256, 128]}                ReLU MLP, softmax cross-entropy head
///   {"name": "cnn", "channels": [16, 32], "kernel": 5}   conv-ReLU-pool stages + linear head
///
/// Every config may also say "input": the expected features per sample, checked against the
/// data. Architectures and parameter layouts are described in docs/modules/models.md.

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "gossamer/core/dataset.hpp"
#include "gossamer/core/model.hpp"

namespace gossamer {
namespace json {
class Node;
}

namespace models {

/// What a model needs to know about the data it will see.
struct DataShape {
    std::string name;                         ///< the data set's name, for error messages
    int features = 0;                         ///< values per sample
    int classes = 0;                          ///< number of classes; 0 for regression (targets)
    int channels = 1, height = 0, width = 0;  ///< image shape; height = width = 0 when flat
};

/// The shape of a loaded data set.
DataShape shape_of(const Dataset& data);

/// Softmax (multinomial logistic) regression: one layer "fc", features -> classes (>= 2).
/// Throws gossamer::Error for non-positive sizes (as do the other constructors below).
std::unique_ptr<Model> softmax_regression(int features, int classes);

/// Linear regression y = w.x + b with loss mean (y - target)^2: one layer "fc", features -> 1.
std::unique_ptr<Model> linear_regression(int features);

/// Multilayer perceptron: layers "fc1".."fcN", ReLU after each hidden layer, softmax
/// cross-entropy on the output.
std::unique_ptr<Model> mlp(int features, const std::vector<int>& hidden, int classes);

/// Convolutional network for channels x height x width images (CHW, row-major).
struct CnnSpec {
    int channels = 1, height = 28, width = 28;  ///< input image shape
    std::vector<int> filters = {16, 32};        ///< output channels of each conv stage
    int kernel = 5;                             ///< odd kernel size ('same' padding k/2)
    int classes = 10;
};
/// Stages "conv1".."convS" (k x k convolution, stride 1, 'same' zero padding, ReLU, 2x2 max-pool
/// with stride 2 that drops an odd last row/column), then a linear layer "fc" to the classes
/// with softmax cross-entropy. Throws gossamer::Error for an even kernel, non-positive sizes or
/// an image that pooling would shrink below 1x1.
std::unique_ptr<Model> cnn(const CnnSpec& spec);

/// Builds a model from its config node (an object with "name"); sizes it for `data`. Throws
/// ConfigError naming the JSON path for an unknown name (suggesting the closest), unknown keys,
/// non-positive sizes, an "input" that differs from data.features, a model that does not fit
/// the data (e.g. "cnn" on data without an image shape, "linear" on classification data).
std::unique_ptr<Model> make_model(const json::Node& node, const DataShape& data);

/// A user model constructor for make_model: gets the config node (already known to be an object
/// whose "name" is the registered name) and the data shape; reports bad configs with node.fail.
using ModelFactory =
    std::function<std::unique_ptr<Model>(const json::Node& node, const DataShape& data)>;

/// Makes `name` usable in configs. Thread-safe; throws gossamer::Error when the name is taken
/// (built-in names included).
void register_model(const std::string& name, ModelFactory factory);

/// The names make_model accepts: the built-ins, then registered ones in registration order.
std::vector<std::string> model_names();

}  // namespace models
}  // namespace gossamer
