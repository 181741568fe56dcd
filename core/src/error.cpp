#include "gossamer/core/error.hpp"

#include <fmt/format.h>

namespace gossamer {
namespace {

std::string format_config_error(const std::string& file, const std::string& path,
                                const std::string& what, const std::string& fix) {
    std::string out;
    if (!file.empty()) out += file + ": ";
    if (!path.empty()) out += path + ": ";
    out += what;
    if (!fix.empty()) out += "; " + fix;
    return out;
}

}  // namespace

ConfigError::ConfigError(std::string file, std::string path, std::string what, std::string fix)
    : Error(format_config_error(file, path, what, fix)),
      file_(std::move(file)),
      path_(std::move(path)),
      what_(std::move(what)),
      fix_(std::move(fix)) {}

PeerFailure::PeerFailure(int rank, const std::string& what)
    : Error(fmt::format("peer {} failed: {}", rank, what)), rank_(rank) {}

}  // namespace gossamer
