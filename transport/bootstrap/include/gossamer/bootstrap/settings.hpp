#pragma once
/// What else the peers of a job must agree on (docs/modules/bootstrap.md, "What the handshake
/// compares"): one Setting per field, a digest of its value and a short description. The
/// bootstrap compares them field by field, so a refusal names the field and both sides' values;
/// it does not know what the fields mean (peer/settings.hpp makes them).

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "gossamer/core/digest.hpp"

namespace gossamer::bootstrap {

/// One field every peer of a job must agree on.
struct Setting {
    std::string field;         ///< "topology graph", "algorithm", "epochs": names it in a refusal
    std::uint64_t digest = 0;  ///< of the value's canonical form; equal digests agree
    std::string value;         ///< one short line: "ring (n = 4) in ring4.json", "dpsgd"
    std::string fix;           ///< how to make the peers agree; stays on this peer (not sent)
};

/// Settings are digested with core's FNV-1a Digest, fed piece by piece.
using gossamer::Digest;

/// A setting whose digest is that of `canonical` (the value's canonical text). `value` is
/// cut to one line of at most kMaxValueChars.
Setting make_setting(std::string field, std::string_view canonical, std::string value,
                     std::string fix);
/// The same with a digest computed by the caller (a Digest fed piece by piece).
Setting make_setting(std::string field, std::uint64_t digest, std::string value, std::string fix);
inline constexpr std::size_t kMaxValueChars = 160;

/// The first field where two peers differ. A field that one side does not send differs too
/// (its value reads "nothing").
struct SettingMismatch {
    std::string field;
    std::string theirs, mine;       ///< the descriptions (equal texts get their digests appended)
    std::string fix;                ///< `mine`'s fix
    std::vector<std::string> also;  ///< the other fields that differ, in order
};

/// Compares the settings a peer sent (`theirs`) against this peer's (`mine`), in `mine`'s
/// order; nullopt when every field agrees.
std::optional<SettingMismatch> compare_settings(std::span<const Setting> theirs,
                                                std::span<const Setting> mine);

/// One line: "topology graph differs: rank 2 has complete (n = 4), rank 0 has ring (n = 4);
/// start every peer with the same topology file (also differ: epochs)".
std::string mismatch_text(const SettingMismatch& m, int their_rank, int my_rank);

}  // namespace gossamer::bootstrap
