#pragma once
// The address blob a peer hands to the others: a UCX worker address inside a small frame (magic,
// rank, job id, length, FNV-1a checksum), so that a truncated, corrupted or misrouted blob is
// refused with a clear line before UCX parses a byte of it.
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace gossamer::transport::ucx_blob {

std::vector<std::byte> frame(std::uint64_t job_id, int rank, std::span<const std::byte> address);

struct Unframed {
    bool ok = false;
    std::string error;  // why not
    std::vector<std::byte> address;
};

Unframed unframe(std::span<const std::byte> blob, std::uint64_t job_id, int rank);

}  // namespace gossamer::transport::ucx_blob
