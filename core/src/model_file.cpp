#include "gossamer/core/model_file.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <unistd.h>
#include <zlib.h>

#include <bit>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <vector>

#include "gossamer/core/error.hpp"
#include "gossamer/core/file_io.hpp"

namespace gossamer {
namespace {

static_assert(std::endian::native == std::endian::little, "the model file is little-endian");
constexpr char kMagic[8] = {'G', 'S', 'M', 'R', 'M', 'O', 'D', 'L'};

class Writer {
  public:
    template <typename T>
    void put(const T& v) {
        const auto* p = reinterpret_cast<const char*>(&v);
        bytes_.insert(bytes_.end(), p, p + sizeof(T));
    }
    void put_bytes(const void* data, std::size_t n) {
        const auto* p = static_cast<const char*>(data);
        bytes_.insert(bytes_.end(), p, p + n);
    }
    void put_string(std::string_view s) {
        put(static_cast<std::uint32_t>(s.size()));
        put_bytes(s.data(), s.size());
    }
    std::vector<char>& bytes() { return bytes_; }

  private:
    std::vector<char> bytes_;
};

class Reader {
  public:
    Reader(const std::string& path, std::string_view bytes) : path_(path), bytes_(bytes) {}
    template <typename T>
    T get(const char* what) {
        T v;
        std::memcpy(&v, take(sizeof(T), what), sizeof(T));
        return v;
    }
    const char* take(std::size_t n, const char* what) {
        if (n > bytes_.size() - pos_)
            throw ConfigError(path_, "",
                              fmt::format("truncated model file (while reading {})", what),
                              "the file is incomplete; write it again");
        const char* p = bytes_.data() + pos_;
        pos_ += n;
        return p;
    }
    std::string get_string(const char* what) {
        const auto n = get<std::uint32_t>(what);
        return std::string(take(n, what), n);
    }
    std::size_t position() const { return pos_; }

  private:
    const std::string& path_;
    std::string_view bytes_;
    std::size_t pos_ = 0;
};

std::uint32_t crc32_of(const char* data, std::size_t n) {
    uLong crc = crc32(0L, Z_NULL, 0);
    while (n > 0) {
        const auto chunk = static_cast<uInt>(std::min<std::size_t>(n, 1u << 30));
        crc = crc32(crc, reinterpret_cast<const Bytef*>(data), chunk);
        data += chunk;
        n -= chunk;
    }
    return static_cast<std::uint32_t>(crc);
}

}  // namespace

void save_model_file(const std::string& path, std::string_view model, std::int64_t step,
                     const PartitionLayout& layout, std::span<const float> params) {
    if (params.size() != layout.total())
        throw Error(fmt::format("{}: {} parameters but the layout covers {}", path, params.size(),
                                layout.total()));
    Writer w;
    w.put_bytes(kMagic, sizeof kMagic);
    w.put(kModelFileVersion);
    w.put(static_cast<std::int64_t>(step));
    w.put_string(model);
    w.put(static_cast<std::uint64_t>(params.size()));
    w.put(static_cast<std::uint32_t>(layout.count()));
    for (const auto& p : layout.partitions()) {
        w.put_string(p.name);
        w.put(static_cast<std::uint64_t>(p.offset));
        w.put(static_cast<std::uint64_t>(p.size));
    }
    w.put_bytes(params.data(), params.size_bytes());
    w.put(crc32_of(w.bytes().data(), w.bytes().size()));

    write_file_atomically(path, std::string_view(w.bytes().data(), w.bytes().size()), "model file");
}

ModelFile load_model_file(const std::string& path) {
    std::error_code ec;
    if (std::filesystem::is_directory(path, ec))
        throw ConfigError(path, "", "is a folder, not a model file",
                          "give the file itself, e.g. OUT/model.bin or OUT/checkpoint-STEP.bin");
    return parse_model_file(path, read_input_file(path, kModelInput));
}

ModelFile parse_model_file(std::string_view label, std::string_view bytes) {
    const std::string path(label);
    Reader r(path, bytes);
    if (bytes.size() < sizeof kMagic || std::memcmp(bytes.data(), kMagic, sizeof kMagic) != 0)
        throw ConfigError(path, "", "not a Gossamer model file (bad magic number)",
                          "give a file written by gossamer train");
    r.take(sizeof kMagic, "magic");
    const auto version = r.get<std::uint32_t>("version");
    if (version != kModelFileVersion)
        throw ConfigError(
            path, "",
            fmt::format("model file version {} is not supported (this build reads {})", version,
                        kModelFileVersion),
            "use a matching gossamer version");
    ModelFile f;
    f.step = r.get<std::int64_t>("step");
    f.model = r.get_string("model description");
    const auto count = r.get<std::uint64_t>("parameter count");
    const auto parts = r.get<std::uint32_t>("partition count");
    std::vector<Partition> layout;
    for (std::uint32_t i = 0; i < parts; ++i) {
        Partition p;
        p.name = r.get_string("partition name");
        p.offset = r.get<std::uint64_t>("partition offset");
        p.size = r.get<std::uint64_t>("partition size");
        layout.push_back(std::move(p));
    }
    if (count > bytes.size() / sizeof(float))
        throw ConfigError(path, "", "truncated model file (while reading parameters)",
                          "the file is incomplete; write it again");
    const char* values = r.take(count * sizeof(float), "parameters");
    const std::size_t covered = r.position();
    const auto stored = r.get<std::uint32_t>("checksum");
    if (r.position() != bytes.size())
        throw ConfigError(path, "", "trailing bytes after the checksum", "the file is corrupt");
    if (crc32_of(bytes.data(), covered) != stored)
        throw ConfigError(path, "", "checksum mismatch: the file is corrupt",
                          "write it again or use another copy");
    try {
        f.layout = PartitionLayout(std::move(layout), count);
    } catch (const PartitionError& e) {
        throw ConfigError(path, "", fmt::format("invalid partition layout: {}", e.what()),
                          "the file is corrupt");
    }
    f.params = ParamVector(count);
    std::memcpy(f.params.data(), values, count * sizeof(float));
    return f;
}

}  // namespace gossamer
