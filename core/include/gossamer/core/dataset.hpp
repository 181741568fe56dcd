#pragma once
/// In-memory data sets and the mini-batches models consume.
///
/// Features are float32, row-major (sample i occupies x[i*features .. (i+1)*features)).
/// Classification sets carry int32 labels in [0, classes); regression sets carry float targets.

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

namespace gossamer {

struct Dataset {
    std::string name;                         ///< e.g. "fashion-mnist/train", "logreg-synthetic"
    int features = 0;                         ///< values per sample (784 for 28x28 images)
    int classes = 0;                          ///< number of classes; 0 for regression
    int channels = 1, height = 0, width = 0;  ///< image shape when known (features = c*h*w)
    std::vector<float> x;                     ///< size() * features values
    std::vector<std::int32_t> labels;         ///< classification: one label per sample
    std::vector<float> targets;               ///< regression: one target per sample
    /// Text data (docs/modules/data.md, "Text"): the characters of token ids 0..V-1, in order;
    /// empty for other data. Each sample is then a window of `features` = context + 1 token
    /// ids stored as floats in x (exact up to 2^24), classes = V, and the label is the window's
    /// last token (the character after the context).
    std::string vocabulary;
    std::int64_t size() const {
        return features ? static_cast<std::int64_t>(x.size()) / features : 0;
    }
};

/// The first `samples` samples of `set` (all of them when it has fewer): the same evaluation
/// subset on every peer, real or simulated.
inline Dataset first_samples(const Dataset& set, std::int64_t samples) {
    Dataset d = set;
    const auto keep = static_cast<std::size_t>(std::clamp<std::int64_t>(samples, 0, set.size()));
    d.x.resize(keep * static_cast<std::size_t>(set.features));
    if (!d.labels.empty()) d.labels.resize(keep);
    if (!d.targets.empty()) d.targets.resize(keep);
    return d;
}

/// A view of `size` contiguous samples (the caller owns the memory).
struct Batch {
    int size = 0;
    int features = 0;
    const float* x = nullptr;              ///< size * features values
    const std::int32_t* labels = nullptr;  ///< size labels, or null for regression
    const float* targets = nullptr;        ///< size targets, or null for classification
};

}  // namespace gossamer
