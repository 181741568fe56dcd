#pragma once
/// IDX files (the MNIST / Fashion-MNIST tensor format) and the Fashion-MNIST loader.
///
/// An IDX file is a big-endian header (two zero bytes, a type byte, a rank byte, then one uint32
/// per dimension) followed by the values in row-major order. Files may be gzip-compressed or
/// plain: both are read through zlib. Only unsigned-byte tensors (type 0x08) are supported.
/// Every error is a ConfigError whose file() is the offending file and whose message is one line.

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "gossamer/core/dataset.hpp"

namespace gossamer {

/// A uint8 tensor read from an IDX file.
struct IdxTensor {
    std::vector<std::int64_t> dims;  ///< e.g. {60000, 28, 28}; empty for a scalar
    std::vector<std::uint8_t> data;  ///< product(dims) values, row-major
};

/// Reads a (gzipped or plain) uint8 IDX file.
/// Throws ConfigError naming `path` when the file is missing or unreadable, when the magic number
/// is wrong or the type is not uint8, when the data are truncated, or when bytes follow the data.
IdxTensor read_idx(const std::string& path);

/// Fashion-MNIST training statistics of pixel/255, used to standardise every split.
inline constexpr float kFashionMnistMean = 0.2860f;
inline constexpr float kFashionMnistStd = 0.3530f;

/// Where Fashion-MNIST is read from: `dir` when non-empty, else $GOSSAMER_DATA_DIR when set and
/// non-empty, else /usr/share/datasets/fashion-mnist (Debian's dataset-fashion-mnist package).
std::string fashion_mnist_dir(const std::string& dir = {});

/// Loads a Fashion-MNIST split ("train": 60000 samples, "test": 10000) from
/// fashion_mnist_dir(dir): {train,t10k}-{images-idx3,labels-idx1}-ubyte.gz.
/// Features are (pixel/255 - kFashionMnistMean) / kFashionMnistStd; classes = 10, channels = 1,
/// height = width = 28, labels in [0, 10).
/// Throws ConfigError for an unknown split, a missing file (with the install hint), a corrupt file
/// (see read_idx), images that are not N x 28 x 28, labels that are not a vector of N values in
/// [0, 10), or image and label counts that differ.
Dataset load_fashion_mnist(const std::string& dir = {}, std::string_view split = "train");

}  // namespace gossamer
