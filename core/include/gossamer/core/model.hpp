#pragma once
/// The model interface: loss and gradient over a flat parameter vector.
///
/// A model owns no parameters. It describes a layout (parameter_count(), layers()) and computes,
/// for parameters held elsewhere (a ParamVector, a peer's replica, a received buffer), the mean
/// loss over a batch and its gradient. Built-in models are in models.hpp; to plug in your own,
/// derive from Model and implement the pure virtual functions (see docs/modules/models.md).
///
/// Thread safety: a model keeps scratch buffers between calls, so one model object serves one
/// thread at a time. Give each thread its own object (clone()); the objects share nothing.

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "gossamer/core/dataset.hpp"
#include "gossamer/core/partition.hpp"

namespace gossamer {

/// A layer's parameters: a named contiguous range of the parameter vector (weights, then bias).
/// A model's layers, in order from the input to the output, are its default partitions.
using Layer = Partition;

/// Which layers a backward pass must compute gradients for; index = position in Model::layers()
/// (0 = nearest the input). The backward pass stops below the lowest layer that is needed, so
/// layers beneath it cost nothing; a layer that is not needed but lies above a needed one is
/// back-propagated through without computing its own gradient. The gradient entries of layers
/// that are not needed are left untouched (not zeroed).
class LayerMask {
  public:
    /// Every layer.
    LayerMask() = default;
    static LayerMask all() { return {}; }
    /// Layers `first` and above (towards the output): "stop the backward pass at `first`".
    static LayerMask from(std::size_t first);
    /// Exactly the layers with need[i] true; a vector shorter than the layer count means false
    /// for the layers past its end.
    static LayerMask only(std::vector<bool> need);
    /// No layer: loss only, the gradient is not written.
    static LayerMask none() { return only({}); }

    bool needs(std::size_t layer) const noexcept;
    /// The lowest needed layer among `layer_count` layers, or nullopt when none is needed.
    std::optional<std::size_t> lowest(std::size_t layer_count) const noexcept;

  private:
    std::size_t first_ = 0;
    bool explicit_ = false;
    std::vector<bool> need_;
};

/// Sums over one batch, from Model::forward.
struct BatchStats {
    double loss_sum = 0;       ///< sum of the per-sample losses (not the mean)
    std::int64_t correct = 0;  ///< samples whose predicted class equals the label (classifiers)
};

/// The result of Model::evaluate over a whole data set.
struct EvalResult {
    double loss = 0;                 ///< mean per-sample loss
    std::optional<double> accuracy;  ///< fraction correct in [0, 1]; nullopt for regression
    std::int64_t samples = 0;        ///< samples evaluated
};

/// The interface every model implements. Parameters are float32, laid out as layers() says.
class Model {
  public:
    virtual ~Model() = default;

    /// Short name of the architecture, as in a config ("mlp", "cnn", ...).
    virtual std::string name() const = 0;
    /// One line for logs, e.g. "mlp 784-256-128-10 (235146 parameters)".
    virtual std::string describe() const = 0;
    /// Length of the parameter vector, in floats.
    virtual std::size_t parameter_count() const = 0;
    /// The layers from input to output; their ranges cover [0, parameter_count()) exactly once.
    virtual std::span<const Layer> layers() const = 0;
    /// Features per input sample (Batch::features must equal it).
    virtual int input_features() const = 0;
    /// Number of classes, or 0 for a regression model (which reads Batch::targets).
    virtual int classes() const = 0;

    /// Writes initial parameters: He-normal weights for layers followed by a ReLU, Glorot-uniform
    /// weights for the output layer, zero biases. Deterministic: the same seed gives the same
    /// values on every run (bit-identical wherever the C math library is the same).
    /// `params.size()` must equal parameter_count().
    virtual void init(std::span<float> params, std::uint64_t seed) const = 0;

    /// Mean loss over the batch; writes the gradient of that mean into the entries of `grad` that
    /// belong to layers in `need` and leaves every other entry untouched. `params` and `grad`
    /// have parameter_count() elements and must not overlap; the batch needs labels (classifier)
    /// or targets (regression) and batch.size >= 1.
    virtual double loss_and_gradient(std::span<const float> params, const Batch& batch,
                                     std::span<float> grad, const LayerMask& need = {}) = 0;

    /// Forward pass only: the summed loss and the number of correct predictions.
    virtual BatchStats forward(std::span<const float> params, const Batch& batch) = 0;

    /// Mean loss and accuracy over `data`, in batches of `batch_size` samples (the last may be
    /// smaller). Built on forward(); an empty data set gives loss 0 and 0 samples.
    virtual EvalResult evaluate(std::span<const float> params, const Dataset& data,
                                int batch_size = 256);

    /// Multiply-adds the backward passes of loss_and_gradient() have performed so far, one
    /// counter per layer (index as layers()): the weight-gradient products of a needed layer
    /// plus the products that propagate the error through the layer to the one below. Counted
    /// where the kernels are called, so a masked pass shows the work it really skipped. Empty
    /// when the model does not count (the default).
    virtual std::span<const std::uint64_t> backward_macs() const { return {}; }

    /// A new model of the same architecture with its own scratch buffers (for another thread).
    virtual std::unique_ptr<Model> clone() const = 0;

    /// The default partitions: one per layer.
    PartitionLayout default_partitions() const { return PartitionLayout::per_layer(layers()); }

  protected:
    /// For implementers: throw gossamer::Error unless `params` has parameter_count() elements
    /// and the batch fits this model (size, features, labels or targets) ...
    void check_batch(std::span<const float> params, const Batch& batch) const;
    /// ... and unless `grad` has parameter_count() elements.
    void check_gradient(std::span<const float> grad) const;
};

}  // namespace gossamer
