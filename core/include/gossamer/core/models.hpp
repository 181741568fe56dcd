#pragma once
/// The built-in models and the factory that builds a model from a config.
///
///   {"name": "softmax"}                                  multiclass logistic regression
///   {"name": "linear"}                                   least squares (mean squared error)
///   {"name": "mlp", "hidden": [256, 128]}                ReLU MLP, softmax cross-entropy head
///   {"name": "cnn", "channels": [16, 32], "kernel": 5}   conv-ReLU-pool stages + linear head
///   {"name": "gpt", "layers": 2, "heads": 4, "width": 128, "context": 64}
///                                                        character-level transformer (text data)
///
/// Every config may also say "input": the expected features per sample, checked against the
/// data. Architectures and parameter layouts are described in docs/modules/models.md.

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
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
    std::string vocabulary;                   ///< text data: the characters of the token ids
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

/// A decoder-only transformer over characters (GPT-2's layout, pre-LayerNorm, untied head).
struct GptSpec {
    int vocab = 0;       ///< characters (token ids 0..vocab-1), >= 2
    int context = 64;    ///< tokens per window (positions), >= 1
    int layers = 2;      ///< transformer blocks, >= 1
    int heads = 4;       ///< attention heads; must divide width
    int width = 128;     ///< model width (embedding size), >= 1
    std::string digest;  ///< 8 hex digits of the vocabulary, shown by describe() ("" = none)
};

/// The GPT. Input: samples of context + 1 token ids stored as floats; positions 0..context-1
/// are the input and positions 1..context the targets. Loss: cross-entropy per character,
/// averaged over positions and samples (nats per character). forward()'s `correct` counts the
/// samples whose last position predicts the last token (the label).
///
/// Layers (partitions), in this order, each a contiguous range laid out as listed:
///   "embed":  wte [vocab x width], wpe [context x width]
///   "block1".."blockL": ln1.weight [width], ln1.bias [width],
///             attn.qkv.weight [3 width x width], attn.qkv.bias [3 width],
///             attn.proj.weight [width x width], attn.proj.bias [width],
///             ln2.weight [width], ln2.bias [width],
///             mlp.fc.weight [4 width x width], mlp.fc.bias [4 width],
///             mlp.proj.weight [width x 4 width], mlp.proj.bias [width]
///   "head":   lnf.weight [width], lnf.bias [width], out.weight [vocab x width], out.bias [vocab]
/// Matrices are row-major [out x in] (torch.nn.Linear's weight). qkv's rows are q, then k, then
/// v; head h uses rows h*d..(h+1)*d of each, d = width / heads. Attention is causal, scaled by
/// 1/sqrt(d); LayerNorm eps 1e-5; GELU is the exact erf form (torch.nn.GELU()); no dropout.
/// init(): embeddings and weights N(0, 0.02), the two proj weights N(0, 0.02/sqrt(2 layers)),
/// biases 0, LayerNorm weights 1 (GPT-2's).
class LanguageModel : public Model {
  public:
    /// Tokens per window.
    virtual int context() const = 0;
    /// Characters in the vocabulary (= classes()).
    virtual int vocabulary_size() const = 0;
    /// Next-token logits after `tokens` (1..context ids in [0, vocab)): writes vocab floats to
    /// `logits`. Throws Error for an empty or too long sequence or an id out of range.
    virtual void next_logits(std::span<const float> params, std::span<const std::int32_t> tokens,
                             std::span<float> logits) = 0;
};

/// Throws gossamer::Error for sizes out of range or heads not dividing width.
std::unique_ptr<LanguageModel> gpt(const GptSpec& spec);

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
