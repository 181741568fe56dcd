#include "alloc_bounds.hpp"

#include <fmt/format.h>

#include <cmath>
#include <fstream>
#include <sstream>
#include <stdexcept>

namespace gossamer::test {
namespace {

using Json = nlohmann::json;

[[noreturn]] void bad(const std::string& path, const std::string& what) {
    throw std::runtime_error(
        fmt::format("{}: {}; re-record it with {}", path, what, kRecordCommand));
}

AllocFigures figures_from(const Json& j, const std::string& path, const std::string& where) {
    if (!j.is_object()) bad(path, where + " must be an object of figures");
    AllocFigures f;
    for (const auto& name : alloc_figure_names()) {
        const auto it = j.find(name);
        if (it == j.end() || !it->is_number() || it->get<double>() < 0)
            bad(path, fmt::format("{}.{} must be a number >= 0", where, name));
        const double v = it->get<double>();
        if (name == "peak_bytes") f.peak_bytes = v;
        if (name == "allocated_bytes") f.allocated_bytes = v;
        if (name == "allocations") f.allocations = v;
    }
    return f;
}

Json figures_json(const AllocFigures& f) {
    Json j = Json::object();
    for (const auto& name : alloc_figure_names()) j[name] = figure(f, name);
    return j;
}

int positive_int(const Json& doc, const char* key, int fallback, const std::string& path,
                 const std::string& where) {
    const auto it = doc.find(key);
    if (it == doc.end()) return fallback;
    if (!it->is_number_integer() || it->get<long long>() < 1 || it->get<long long>() > 1 << 24)
        bad(path, fmt::format("{}{} must be an integer from 1 to 2^24", where, key));
    return it->get<int>();
}

std::string thousands(double v) {
    std::string digits = std::to_string(std::llround(v)), out;
    for (std::size_t i = 0; i < digits.size(); ++i) {
        if (i > 0 && (digits.size() - i) % 3 == 0 && digits[i - 1] != '-') out += ',';
        out += digits[i];
    }
    return out;
}

}  // namespace

const std::vector<std::string>& alloc_figure_names() {
    static const std::vector<std::string> names{"peak_bytes", "allocated_bytes", "allocations"};
    return names;
}

double figure(const AllocFigures& f, const std::string& name) {
    if (name == "peak_bytes") return f.peak_bytes;
    if (name == "allocated_bytes") return f.allocated_bytes;
    if (name == "allocations") return f.allocations;
    throw std::logic_error("no allocation figure " + name);
}

AllocBounds parse_alloc_bounds(const std::string& text, const std::string& path) {
    Json doc;
    try {
        doc = Json::parse(text);
    } catch (const Json::exception& e) {
        bad(path, fmt::format("not JSON ({})", e.what()));
    }
    if (!doc.is_object()) bad(path, "the document must be an object");
    AllocBounds b;
    b.peers = positive_int(doc, "peers", b.peers, path, "");
    b.steps = positive_int(doc, "steps", b.steps, path, "");
    if (auto it = doc.find("headroom"); it != doc.end()) {
        if (!it->is_number() || it->get<double>() < 0 || it->get<double>() > 1)
            bad(path, "headroom must be a number from 0 to 1");
        b.headroom = it->get<double>();
    }
    if (auto it = doc.find("recorded_with"); it != doc.end()) b.recorded_with = *it;
    const auto algos = doc.find("algorithms");
    if (algos == doc.end() || !algos->is_object())
        bad(path, "\"algorithms\" must be an object with one entry per algorithm");
    for (const auto& [name, j] : algos->items()) {
        const std::string where = "algorithms." + name;
        if (!j.is_object()) bad(path, where + " must be an object");
        AllocEntry e;
        e.peers = positive_int(j, "peers", b.peers, path, where + ".");
        e.why = j.value("why", "");
        e.topology = j.value("topology", "");
        if (j.contains("recorded") != j.contains("bound"))
            bad(path, where + " needs both \"recorded\" and \"bound\", or neither");
        if (j.contains("recorded")) {
            e.recorded = figures_from(j["recorded"], path, where + ".recorded");
            e.bound = figures_from(j["bound"], path, where + ".bound");
        }
        b.algorithms[name] = e;
    }
    return b;
}

AllocBounds load_alloc_bounds(const std::string& path) {
    std::ifstream in(path);
    if (!in) bad(path, "cannot be read");
    std::stringstream text;
    text << in.rdbuf();
    return parse_alloc_bounds(text.str(), path);
}

Json to_json(const AllocBounds& b) {
    Json doc = {{"about",
                 "the simulator's allocation guard: bytes per simulated peer in cost mode, "
                 "counted by test_sim_alloc (docs/operations/testing.md, \"Allocation guard\"); "
                 "bound = recorded x (1 + headroom)"},
                {"record", kRecordCommand},
                {"recorded_with", b.recorded_with},
                {"peers", b.peers},
                {"steps", b.steps},
                {"headroom", b.headroom},
                {"algorithms", Json::object()}};
    for (const auto& [name, e] : b.algorithms) {
        Json j = Json::object();
        if (e.peers != b.peers) j["peers"] = e.peers;
        if (!e.why.empty()) j["why"] = e.why;
        if (!e.topology.empty()) j["topology"] = e.topology;
        if (e.recorded) j["recorded"] = figures_json(*e.recorded);
        if (e.bound) j["bound"] = figures_json(*e.bound);
        doc["algorithms"][name] = j;
    }
    return doc;
}

std::vector<std::string> check_alloc(const std::string& algorithm, const AllocBounds& b,
                                     const AllocEntry& entry, const AllocFigures& measured) {
    std::vector<std::string> out;
    if (!entry.bound || !entry.recorded) {
        out.push_back(
            fmt::format("sim alloc guard: {} has no recorded bound in "
                        "tests/sim/alloc_bounds.json; record it with {}",
                        algorithm, kRecordCommand));
        return out;
    }
    for (const auto& name : alloc_figure_names()) {
        const double got = figure(measured, name), bound = figure(*entry.bound, name);
        if (got <= bound) continue;
        out.push_back(fmt::format(
            "sim alloc guard: {} ({} peers x {} steps, cost mode): {} {} per peer > bound {} "
            "(recorded {} + {:.0f}%); if the growth is intended, re-record with {}",
            algorithm, entry.peers, b.steps, name, thousands(got), thousands(bound),
            thousands(figure(*entry.recorded, name)), b.headroom * 100, kRecordCommand));
    }
    return out;
}

std::string improvement_note(const std::string& algorithm, const AllocEntry& entry,
                             const AllocFigures& measured, double headroom) {
    if (!entry.recorded) return "";
    std::string out;
    for (const auto& name : alloc_figure_names()) {
        const double got = figure(measured, name), was = figure(*entry.recorded, name);
        if (got < was * (1 - 2 * headroom))
            out += fmt::format("{}{} {} per peer, recorded {}", out.empty() ? "" : "; ", name,
                               thousands(got), thousands(was));
    }
    if (out.empty()) return "";
    return fmt::format(
        "sim alloc guard: {} fell well below its record ({}): re-record with {} "
        "to tighten the bound",
        algorithm, out, kRecordCommand);
}

AllocEntry record_entry(AllocEntry entry, const AllocFigures& measured, double headroom) {
    // One decimal is as exact as a figure per peer needs; the bound is a whole number.
    auto round1 = [](double v) { return std::round(v * 10) / 10; };
    AllocFigures rec{round1(measured.peak_bytes), round1(measured.allocated_bytes),
                     round1(measured.allocations)};
    AllocFigures bound{std::ceil(rec.peak_bytes * (1 + headroom)),
                       std::ceil(rec.allocated_bytes * (1 + headroom)),
                       std::ceil(rec.allocations * (1 + headroom))};
    entry.recorded = rec;
    entry.bound = bound;
    return entry;
}

}  // namespace gossamer::test
