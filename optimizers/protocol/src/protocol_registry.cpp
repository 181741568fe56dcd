// The registry's table: the built-in entries of algorithm_list.hpp, then register_algorithm's.
#include <fmt/format.h>

#include <algorithm>

#include "gossamer/core/error.hpp"
#include "gossamer/optimizers/protocol/registry.hpp"

namespace gossamer::proto {

// Each built-in entry is defined in its own folder (optimizers/protocols/<name>/src/).
#define GOSSAMER_ALGORITHM(name) Algorithm name##_algorithm();
#include "algorithm_list.hpp"
#undef GOSSAMER_ALGORITHM

namespace {

// Why `entry` cannot join `table`, or "".
std::string refusal(const std::vector<Algorithm>& table, const Algorithm& entry) {
    if (entry.name.empty()) return "an algorithm needs a name";
    const bool plain = std::all_of(entry.name.begin(), entry.name.end(), [](char c) {
        return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_';
    });
    if (!plain)
        return fmt::format("algorithm name \"{}\" has characters other than a-z, 0-9 and _",
                           entry.name);
    if (!entry.make) return fmt::format("algorithm {} has no factory", entry.name);
    for (const auto& a : table) {
        if (a.name == entry.name)
            return fmt::format("algorithm {} is registered already", entry.name);
        if ((a.defaults & entry.defaults & default_for_peer) != 0)
            return fmt::format("algorithm {} and {} are both the default for gossamer peer", a.name,
                               entry.name);
    }
    return "";
}

void add(std::vector<Algorithm>& t, Algorithm entry, std::string_view who) {
    if (const auto why = refusal(t, entry); !why.empty())
        throw Error(fmt::format("{}: {}", who, why));
    t.push_back(std::move(entry));
}

std::vector<Algorithm>& table() {
    static std::vector<Algorithm> t = [] {
        std::vector<Algorithm> built_in;
#define GOSSAMER_ALGORITHM(name) add(built_in, name##_algorithm(), "algorithm_list.hpp");
#include "algorithm_list.hpp"
#undef GOSSAMER_ALGORITHM
        return built_in;
    }();
    return t;
}

}  // namespace

const std::vector<Algorithm>& algorithms() {
    return table();
}

const Algorithm* find_algorithm(std::string_view name) noexcept {
    for (const auto& a : table())
        if (a.name == name) return &a;
    return nullptr;
}

const Algorithm& algorithm(std::string_view name) {
    if (const auto* a = find_algorithm(name)) return *a;
    std::string all;
    for (const auto& n : protocol_names()) all += (all.empty() ? "" : ", ") + n;
    throw ConfigError("", "algorithm", fmt::format("unknown algorithm \"{}\"", name),
                      "use one of " + all);
}

void register_algorithm(Algorithm entry) {
    add(table(), std::move(entry), "register_algorithm");
}

std::unique_ptr<Protocol> make_protocol(std::string_view name, const json::Node* options,
                                        PeerContext ctx) {
    return algorithm(name).make(options, std::move(ctx));
}

std::vector<std::string> protocol_names() {
    std::vector<std::string> names;
    for (const auto& a : table()) names.push_back(a.name);
    return names;
}

std::string default_algorithm() {
    for (const auto& a : table())
        if (a.defaults & default_for_peer) return a.name;
    return table().front().name;
}

std::string default_algorithms(DefaultIn command) {
    std::string list;
    for (const auto& a : table())
        if (a.defaults & command) list += (list.empty() ? "" : ",") + a.name;
    return list;
}

}  // namespace gossamer::proto
