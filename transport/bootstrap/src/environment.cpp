#include "gossamer/bootstrap/environment.hpp"

#include <fmt/format.h>
#include <unistd.h>

#include <charconv>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include "gossamer/core/error.hpp"
#include "gossamer/core/file_io.hpp"
#include "gossamer/core/log.hpp"
#include "wire.hpp"

namespace gossamer::bootstrap {
namespace {

std::string range_text(int n) {
    return n == 1 ? "the only rank is 0" : "ranks run from 0 to " + std::to_string(n - 1);
}

// `source` names where the value came from ("--rank", "SLURM_PROCID"); `text` is its value.
int parse_rank(const std::string& source, const std::string& text, int n) {
    int value = 0;
    const char* end = text.data() + text.size();
    auto [ptr, ec] = std::from_chars(text.data(), end, value);
    if (text.empty() || ec != std::errc() || ptr != end)
        throw ConfigError("", source, "'" + text + "' is not an integer rank",
                          "set it to a rank from 0 to " + std::to_string(n - 1));
    if (value < 0 || value >= n)
        throw ConfigError("", source,
                          "rank " + text + " is out of range for " + std::to_string(n) +
                              " peers in the topology file (" + range_text(n) + ")",
                          "start as many processes as the topology file has peers");
    return value;
}

}  // namespace

int discover_rank(std::optional<int> explicit_rank, int n) {
    if (n <= 0) throw ConfigError("", "--rank", "the topology has no peers", "");
    if (explicit_rank) return parse_rank("--rank", std::to_string(*explicit_rank), n);
    for (const char* name : kRankVariables) {
        if (const char* value = std::getenv(name)) return parse_rank(name, value, n);
    }
    throw ConfigError("", "--rank", "no rank given and none found in the environment",
                      "pass --rank R, or start the peers with mpirun (OMPI_COMM_WORLD_RANK), a "
                      "PMI launcher (PMI_RANK) or srun (SLURM_PROCID)");
}

std::string job_token(const std::string& token_file) {
    if (!token_file.empty()) {
        if (::access(token_file.c_str(), R_OK) != 0)
            throw ConfigError(token_file, "", "cannot read the job token file",
                              "check the path and its permissions");
        // A regular file of at most two bytes past the handshake's limit (a newline may end
        // it): a FIFO, a device or a huge file is refused instead of read to its end.
        static constexpr InputKind kTokenInput{"the job token file", "job token files",
                                               wire::kMaxToken + 2};
        std::string token = read_input_file(token_file, kTokenInput);
        if (!token.empty() && token.back() == '\n') token.pop_back();
        if (!token.empty() && token.back() == '\r') token.pop_back();
        if (token.empty())
            throw ConfigError(token_file, "", "the job token file is empty",
                              "write the job's token into it");
        if (token.size() > wire::kMaxToken)
            throw ConfigError(token_file, "",
                              fmt::format("the job token is longer than {} bytes", wire::kMaxToken),
                              "use a shorter token, e.g. 32 random hex digits");
        return token;
    }
    if (const char* value = std::getenv(kTokenVariable)) return value;
    log::warn(
        "no job token ({} is not set and no token file is configured): any process "
        "that knows the topology can join this job",
        kTokenVariable);
    return {};
}

bool tokens_equal(const std::string& a, const std::string& b) noexcept {
    // Every byte of the longer string is visited whatever the contents; only lengths leak.
    std::size_t length = a.size() > b.size() ? a.size() : b.size();
    unsigned diff = a.size() == b.size() ? 0u : 1u;
    for (std::size_t i = 0; i < length; ++i) {
        unsigned char x = i < a.size() ? static_cast<unsigned char>(a[i]) : 0;
        unsigned char y = i < b.size() ? static_cast<unsigned char>(b[i]) : 0;
        diff |= static_cast<unsigned>(x ^ y);
    }
    return diff == 0;
}

}  // namespace gossamer::bootstrap
