#pragma once
/// What a peer learns from its environment before the bootstrap starts: its rank and the job
/// token. Both throw ConfigError (one line naming the variable or file, exit status 2 in the CLI).

#include <optional>
#include <string>

namespace gossamer::bootstrap {

/// The variables consulted for the rank, in this order, after an explicit --rank.
inline constexpr const char* kRankVariables[] = {"OMPI_COMM_WORLD_RANK", "PMI_RANK",
                                                 "SLURM_PROCID"};
/// The variable holding the job token.
inline constexpr const char* kTokenVariable = "GOSSAMER_JOB_TOKEN";

/// This peer's rank among `n` peers: `explicit_rank` when given (--rank), else the first set
/// variable of kRankVariables. Throws ConfigError when none is set, or when the value is not an
/// integer or not in [0, n); the message names the option or variable and its value.
int discover_rank(std::optional<int> explicit_rank, int n);

/// The job token: the contents of `token_file` when it is not empty (one trailing newline
/// stripped), else $GOSSAMER_JOB_TOKEN, else "" (every peer without a token matches every other;
/// a warning says so). Throws ConfigError when the file cannot be read or is empty.
std::string job_token(const std::string& token_file = {});

/// True when a and b are equal, in time that depends only on their lengths, not their contents.
bool tokens_equal(const std::string& a, const std::string& b) noexcept;

}  // namespace gossamer::bootstrap
