#include "gossamer/core/checkpoint_file.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <unistd.h>
#include <zlib.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "gossamer/core/error.hpp"
#include "gossamer/core/file_io.hpp"
#include "gossamer/core/model_file.hpp"
#include "gossamer/core/state_io.hpp"

namespace gossamer {
namespace {

constexpr char kMagic[8] = {'G', 'S', 'M', 'R', 'C', 'K', 'P', 'T'};

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

void save_checkpoint_file(const std::string& path, const CheckpointHeader& h,
                          std::span<const char> state) {
    StateWriter w;
    w.u64(0);  // the magic number, overwritten below
    w.u32(kCheckpointVersion);
    w.u64(h.job_id);
    w.string(h.algorithm);
    w.u32(static_cast<std::uint32_t>(h.rank));
    w.u32(static_cast<std::uint32_t>(h.n));
    w.i64(h.step);
    w.string(h.model);
    w.u64(h.layout.total());
    w.u64(h.layout.count());
    for (const auto& p : h.layout.partitions()) {
        w.string(p.name);
        w.u64(p.offset);
        w.u64(p.size);
    }
    w.u64(h.settings);
    w.u64(state.size());
    std::vector<char> bytes = w.bytes();
    std::memcpy(bytes.data(), kMagic, sizeof kMagic);
    bytes.insert(bytes.end(), state.begin(), state.end());
    const std::uint32_t crc = crc32_of(bytes.data(), bytes.size());
    const auto* c = reinterpret_cast<const char*>(&crc);
    bytes.insert(bytes.end(), c, c + sizeof crc);

    write_file_atomically(path, std::string_view(bytes.data(), bytes.size()), "checkpoint");
}

CheckpointFile load_checkpoint_file(const std::string& path) {
    std::error_code ec;
    if (std::filesystem::is_directory(path, ec))
        throw ConfigError(path, "", "is a folder, not a checkpoint",
                          "give the file itself, e.g. OUT/checkpoint-0-100.state");
    return parse_checkpoint_file(path, read_input_file(path, kCheckpointInput));
}

CheckpointFile parse_checkpoint_file(std::string_view label, std::string_view bytes) {
    const std::string path(label);
    if (bytes.size() < sizeof kMagic || std::memcmp(bytes.data(), kMagic, sizeof kMagic) != 0)
        throw ConfigError(path, "", "not a Gossamer checkpoint (bad magic number)",
                          "give a .state file written by gossamer peer --checkpoint-every");
    if (bytes.size() < sizeof kMagic + sizeof(std::uint32_t))
        throw ConfigError(path, "", "truncated checkpoint (while reading its checksum)",
                          "the file is incomplete; resume from another step");
    // The checksum first: a torn or corrupt file is named as such, whatever field it broke.
    const std::size_t covered = bytes.size() - sizeof(std::uint32_t);
    std::uint32_t stored;
    std::memcpy(&stored, bytes.data() + covered, sizeof stored);
    StateReader r(path, bytes.substr(0, covered));
    r.u64("magic");
    const auto version = r.u32("version");
    if (version != kCheckpointVersion)
        throw ConfigError(
            path, "",
            fmt::format("checkpoint version {} is not supported (this build reads {})", version,
                        kCheckpointVersion),
            "use a matching gossamer version");
    if (crc32_of(bytes.data(), covered) != stored)
        throw ConfigError(path, "", "checksum mismatch: the checkpoint is truncated or corrupt",
                          "resume from another step, or start the job afresh");
    CheckpointFile f;
    auto& h = f.header;
    h.job_id = r.u64("job id");
    h.algorithm = r.string("algorithm");
    h.rank = static_cast<int>(r.u32("rank"));
    h.n = static_cast<int>(r.u32("peer count"));
    if (h.rank < 0 || h.n < 1 || h.rank >= h.n)
        r.fail(fmt::format("rank {} of {} peers is out of range", h.rank, h.n));
    h.step = r.i64("step");
    if (h.step < 0) r.fail(fmt::format("step {} is negative", h.step));
    h.model = r.string("model description");
    const auto total = r.u64("parameter count");
    const auto parts = r.count("partition count", covered);
    std::vector<Partition> layout;
    for (std::uint64_t i = 0; i < parts; ++i) {
        Partition p;
        p.name = r.string("partition name");
        p.offset = r.u64("partition offset");
        p.size = r.u64("partition size");
        layout.push_back(std::move(p));
    }
    try {
        h.layout = PartitionLayout(std::move(layout), total);
    } catch (const PartitionError& e) {
        r.fail(fmt::format("invalid partition layout: {}", e.what()));
    }
    h.settings = r.u64("settings digest");
    const auto n = r.count("state length", covered);
    const std::string_view state = r.bytes(n, "state");
    f.state.assign(state.begin(), state.end());
    r.finish();
    return f;
}

std::string checkpoint_mismatch(const CheckpointHeader& got, const CheckpointHeader& want) {
    if (got.job_id != want.job_id)
        return fmt::format("job id: checkpoint {}, job {}", got.job_id, want.job_id);
    if (got.algorithm != want.algorithm)
        return fmt::format("algorithm: checkpoint {}, job {}", got.algorithm, want.algorithm);
    if (got.n != want.n) return fmt::format("peers: checkpoint {}, job {}", got.n, want.n);
    if (got.rank != want.rank)
        return fmt::format("rank: checkpoint {}, job {}", got.rank, want.rank);
    if (got.model != want.model)
        return fmt::format("model: checkpoint {}, job {}", got.model, want.model);
    if (!(got.layout == want.layout))
        return fmt::format("layout: checkpoint {}, job {}", got.layout.describe(),
                           want.layout.describe());
    if (got.settings != want.settings)
        return fmt::format(
            "settings digest: checkpoint {:016x}, job {:016x} (another topology, "
            "algorithm option, data or optimizer)",
            got.settings, want.settings);
    return "";
}

}  // namespace gossamer
