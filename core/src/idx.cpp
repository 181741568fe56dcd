#include "gossamer/core/idx.hpp"

#include <fmt/format.h>
#include <zlib.h>

#include <array>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <limits>

#include "gossamer/core/error.hpp"
#include "gossamer/core/file_io.hpp"

namespace gossamer {
namespace {

constexpr const char* kIdxFix = "check that it is a complete, uncorrupted IDX file";
constexpr const char* kInstallFix =
    "install it with `apt-get install dataset-fashion-mnist` or set GOSSAMER_DATA_DIR to the "
    "folder that holds it";
// Far above any real data set; stops a corrupt header from asking for terabytes.
constexpr std::int64_t kMaxIdxBytes = std::int64_t{1} << 36;

// Owns a gzFile so that every error path closes it.
class GzReader {
  public:
    explicit GzReader(const std::string& path) : path_(path) {
        errno = 0;
        file_ = gzopen(path.c_str(), "rb");
        if (!file_) {
            const int err = errno;
            throw ConfigError(
                path, "",
                fmt::format("cannot open file: {}", err ? std::strerror(err) : "out of memory"),
                "check the path and its permissions");
        }
        gzbuffer(file_, 1 << 17);
    }
    ~GzReader() { gzclose(file_); }
    GzReader(const GzReader&) = delete;
    GzReader& operator=(const GzReader&) = delete;

    // Reads up to n bytes; returns how many arrived (fewer only at the end of the data).
    // A damaged gzip stream (bad CRC, cut short) is an error, not a short read.
    std::int64_t read(void* out, std::int64_t n) {
        auto* p = static_cast<unsigned char*>(out);
        std::int64_t done = 0;
        while (done < n) {
            const auto chunk = static_cast<unsigned>(std::min<std::int64_t>(n - done, 1 << 30));
            const int got = gzread(file_, p + done, chunk);
            if (got < 0) fail_stream();
            if (got == 0) break;
            done += got;
        }
        int code = Z_OK;
        gzerror(file_, &code);
        if (code != Z_OK && code != Z_STREAM_END) fail_stream();
        return done;
    }

  private:
    [[noreturn]] void fail_stream() {
        int code = Z_OK;
        const char* msg = gzerror(file_, &code);
        throw ConfigError(path_, "",
                          fmt::format("corrupt or truncated gzip data ({})",
                                      code == Z_ERRNO ? std::strerror(errno) : msg),
                          kIdxFix);
    }

    std::string path_;
    gzFile file_ = nullptr;
};

const char* idx_type_name(int type) {
    switch (type) {
        case 0x08:
            return "uint8";
        case 0x09:
            return "int8";
        case 0x0B:
            return "int16";
        case 0x0C:
            return "int32";
        case 0x0D:
            return "float32";
        case 0x0E:
            return "float64";
        default:
            return nullptr;
    }
}

std::string shape_text(const std::vector<std::int64_t>& dims) {
    std::string out;
    for (auto d : dims) out += (out.empty() ? "" : " x ") + std::to_string(d);
    return out.empty() ? "a scalar" : out;
}

// A .gz file, or its uncompressed twin when only that exists.
std::string pick_file(const std::filesystem::path& dir, const std::string& stem) {
    const auto gz = dir / (stem + ".gz");
    if (!std::filesystem::exists(gz) && std::filesystem::exists(dir / stem))
        return (dir / stem).string();
    if (!std::filesystem::exists(gz))
        throw ConfigError(gz.string(), "", "Fashion-MNIST file not found", kInstallFix);
    return gz.string();
}

}  // namespace

IdxTensor read_idx(const std::string& path) {
    if (!std::filesystem::exists(path))
        throw ConfigError(path, "", "file not found", "check the path");
    // gzopen would wait for ever on a FIFO and read a device to its end.
    check_input_file(path, {"file", "IDX data files", static_cast<std::uint64_t>(kMaxIdxBytes)});
    GzReader in(path);

    std::array<unsigned char, 4> magic{};
    const auto got = in.read(magic.data(), 4);
    if (got < 4)
        throw ConfigError(
            path, "", fmt::format("truncated header: {} of 4 magic-number bytes", got), kIdxFix);
    const std::uint32_t magic_value = (std::uint32_t{magic[0]} << 24) |
                                      (std::uint32_t{magic[1]} << 16) |
                                      (std::uint32_t{magic[2]} << 8) | magic[3];
    const int rank = magic[3];
    if (magic[0] != 0 || magic[1] != 0 || !idx_type_name(magic[2]) || rank < 1 || rank > 8)
        throw ConfigError(path, "",
                          fmt::format("bad magic number 0x{:08X}, not an IDX file "
                                      "(expected 0x000008NN with NN the number of dimensions)",
                                      magic_value),
                          kIdxFix);
    if (magic[2] != 0x08)
        throw ConfigError(path, "",
                          fmt::format("IDX element type {} is not supported (only uint8)",
                                      idx_type_name(magic[2])),
                          "convert the file to uint8");

    IdxTensor t;
    std::int64_t total = 1;
    for (int i = 0; i < rank; ++i) {
        std::array<unsigned char, 4> b{};
        if (in.read(b.data(), 4) < 4)
            throw ConfigError(path, "",
                              fmt::format("truncated header: {} dimensions announced, file ends "
                                          "after {}",
                                          rank, i),
                              kIdxFix);
        const std::int64_t d = (std::int64_t{b[0]} << 24) | (std::int64_t{b[1]} << 16) |
                               (std::int64_t{b[2]} << 8) | b[3];
        t.dims.push_back(d);
        if (d != 0 && total > kMaxIdxBytes / d)
            throw ConfigError(path, "", "implausible dimensions (more than 64 GiB of data)",
                              kIdxFix);
        total *= d;
    }

    t.data.resize(static_cast<std::size_t>(total));
    const auto n = in.read(t.data.data(), total);
    if (n < total)
        throw ConfigError(path, "",
                          fmt::format("truncated data: header says {} ({} bytes), file holds {}",
                                      shape_text(t.dims), total, n),
                          kIdxFix);
    unsigned char extra = 0;
    if (in.read(&extra, 1) != 0)
        throw ConfigError(
            path, "",
            fmt::format("unexpected bytes after the {} values the header announces", total),
            kIdxFix);
    return t;
}

std::string fashion_mnist_dir(const std::string& dir) {
    if (!dir.empty()) return dir;
    if (const char* env = std::getenv("GOSSAMER_DATA_DIR"); env && *env) return env;
    return "/usr/share/datasets/fashion-mnist";
}

Dataset load_fashion_mnist(const std::string& dir, std::string_view split) {
    if (split != "train" && split != "test")
        throw ConfigError("", "split", fmt::format("unknown Fashion-MNIST split \"{}\"", split),
                          "use \"train\" or \"test\"");
    const std::filesystem::path root = fashion_mnist_dir(dir);
    const std::string prefix = split == "train" ? "train" : "t10k";
    const std::string images_file = pick_file(root, prefix + "-images-idx3-ubyte");
    const std::string labels_file = pick_file(root, prefix + "-labels-idx1-ubyte");

    IdxTensor images = read_idx(images_file);
    if (images.dims.size() != 3 || images.dims[1] != 28 || images.dims[2] != 28)
        throw ConfigError(images_file, "",
                          fmt::format("wrong dimensions: expected N x 28 x 28 images, found {}",
                                      shape_text(images.dims)),
                          "use the Fashion-MNIST image file");
    IdxTensor labels = read_idx(labels_file);
    if (labels.dims.size() != 1)
        throw ConfigError(labels_file, "",
                          fmt::format("wrong dimensions: expected a vector of N labels, found {}",
                                      shape_text(labels.dims)),
                          "use the Fashion-MNIST label file");
    const std::int64_t count = images.dims[0];
    if (labels.dims[0] != count)
        throw ConfigError(labels_file, "",
                          fmt::format("count mismatch: {} labels for the {} images of {}",
                                      labels.dims[0], count, images_file),
                          "use the image and label files of the same split");

    Dataset out;
    out.name = "fashion-mnist/" + std::string(split);
    out.features = 28 * 28;
    out.classes = 10;
    out.channels = 1;
    out.height = 28;
    out.width = 28;
    out.labels.resize(static_cast<std::size_t>(count));
    for (std::int64_t i = 0; i < count; ++i) {
        const int label = labels.data[static_cast<std::size_t>(i)];
        if (label >= 10)
            throw ConfigError(
                labels_file, "",
                fmt::format("label {} of sample {} is out of range [0, 10)", label, i), kIdxFix);
        out.labels[static_cast<std::size_t>(i)] = label;
    }
    // One table lookup per pixel instead of a divide and a subtract.
    std::array<float, 256> table{};
    for (int v = 0; v < 256; ++v)
        table[v] = (static_cast<float>(v) / 255.0f - kFashionMnistMean) / kFashionMnistStd;
    out.x.resize(images.data.size());
    for (std::size_t i = 0; i < images.data.size(); ++i) out.x[i] = table[images.data[i]];
    return out;
}

}  // namespace gossamer
