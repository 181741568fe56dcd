// Names, addresses and rates of the lab (spec.hpp).
#include "gossamer/lab/spec.hpp"

#include <fmt/format.h>

#include <cctype>
#include <charconv>
#include <cmath>
#include <set>
#include <utility>

#include "gossamer/core/error.hpp"

namespace gossamer::lab {

void validate(const LabSpec& spec, const std::string& what) {
    const int n = static_cast<int>(spec.peers.size());
    if (n < 1)
        throw ConfigError("", what, "a lab needs at least one peer", "give one or more peers");
    if (n > kMaxPeers)
        throw ConfigError("", what, fmt::format("{} peers do not fit in one lab", n),
                          fmt::format("use at most {} peers (one /24 per job)", kMaxPeers));
    auto bad_rate = [](double r) { return !std::isfinite(r) || r < 0.0; };
    for (int i = 0; i < n; ++i) {
        if (bad_rate(spec.peers[i].uplink) || bad_rate(spec.peers[i].downlink))
            throw ConfigError("", what, fmt::format("peer {}: a cap is negative or not finite", i),
                              "give caps in bits/s > 0, or 0 for none");
    }
    std::set<std::pair<int, int>> seen;
    for (const auto& l : spec.links) {
        const auto name = fmt::format("link {} -> {}", l.from, l.to);
        if (l.from < 0 || l.from >= n || l.to < 0 || l.to >= n)
            throw ConfigError("", what, name + ": a peer is out of range",
                              fmt::format("peers run from 0 to {}", n - 1));
        if (l.from == l.to) throw ConfigError("", what, name + ": a link to itself", "drop it");
        if (!std::isfinite(l.bits_per_s) || l.bits_per_s <= 0.0)
            throw ConfigError("", what, name + ": the cap must be > 0 bits/s",
                              "give a positive rate");
        if (!seen.insert({l.from, l.to}).second)
            throw ConfigError("", what, name + ": listed twice", "give each link once");
    }
}

std::string job_name(int slot) {
    return fmt::format("{}{}", kPrefix, slot);
}
std::string lab_netns(int slot) {
    return job_name(slot) + "-lab";
}
std::string peer_netns(int slot, int peer) {
    return fmt::format("{}-p{}", job_name(slot), peer);
}
std::string bridge_device(int slot) {
    return job_name(slot) + "br";
}
std::string peer_device(int slot, int peer) {
    return fmt::format("{}p{}", job_name(slot), peer);
}
std::string bridge_port(int slot, int peer) {
    return fmt::format("{}b{}", job_name(slot), peer);
}
std::string peer_address(int slot, int peer) {
    return fmt::format("10.213.{}.{}", slot, peer + 1);
}
std::string subnet(int slot) {
    return fmt::format("10.213.{}.0/24", slot);
}

namespace {

std::optional<int> parse_small(std::string_view digits, int limit) {
    if (digits.empty() || digits.size() > 3) return std::nullopt;
    int v = 0;
    const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), v);
    if (ec != std::errc() || end != digits.data() + digits.size() || v < 0 || v >= limit)
        return std::nullopt;
    if (digits.size() > 1 && digits[0] == '0') return std::nullopt;  // one spelling per slot
    return v;
}

}  // namespace

std::optional<int> parse_job(std::string_view name) {
    if (name.substr(0, kPrefix.size()) == kPrefix) name.remove_prefix(kPrefix.size());
    return parse_small(name, kSlots);
}

std::optional<int> slot_of_netns(std::string_view name) {
    if (name.substr(0, kPrefix.size()) != kPrefix) return std::nullopt;
    name.remove_prefix(kPrefix.size());
    const auto dash = name.find('-');
    if (dash == std::string_view::npos) return std::nullopt;
    const auto slot = parse_small(name.substr(0, dash), kSlots);
    if (!slot) return std::nullopt;
    const auto rest = name.substr(dash + 1);
    if (rest == "lab") return slot;
    if (rest.size() >= 2 && rest[0] == 'p' && parse_small(rest.substr(1), kMaxPeers)) return slot;
    return std::nullopt;
}

std::optional<double> parse_rate(std::string_view text) {
    std::string lower;
    for (char c : text) lower += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    double scale = 1.0;
    std::string_view s = lower;
    const std::pair<std::string_view, double> units[] = {
        {"gbit", 1e9}, {"mbit", 1e6}, {"kbit", 1e3}, {"bit", 1.0}};
    for (const auto& [unit, factor] : units) {
        if (s.size() > unit.size() && s.substr(s.size() - unit.size()) == unit) {
            s.remove_suffix(unit.size());
            scale = factor;
            break;
        }
    }
    double v = 0.0;
    const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
    if (s.empty() || ec != std::errc() || end != s.data() + s.size()) return std::nullopt;
    v *= scale;
    if (!std::isfinite(v) || v <= 0.0) return std::nullopt;
    return v;
}

std::string format_rate(double bits_per_s) {
    if (bits_per_s <= 0.0) return "unlimited";
    if (bits_per_s >= 1e9) return fmt::format("{:.3g} Gbit/s", bits_per_s / 1e9);
    if (bits_per_s >= 1e6) return fmt::format("{:.3g} Mbit/s", bits_per_s / 1e6);
    if (bits_per_s >= 1e3) return fmt::format("{:.3g} kbit/s", bits_per_s / 1e3);
    return fmt::format("{:.3g} bit/s", bits_per_s);
}

}  // namespace gossamer::lab
