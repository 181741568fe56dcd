#include "args.hpp"

#include <fmt/format.h>

#include <charconv>
#include <cmath>

#include "gossamer/core/json.hpp"

namespace gossamer::cli {

std::optional<std::string> ParsedArgs::value(const std::string& name) const {
    auto it = values.find(name);
    if (it == values.end()) return std::nullopt;
    return it->second;
}

std::int64_t ParsedArgs::integer(const std::string& name, std::int64_t fallback, std::int64_t lo,
                                 std::int64_t hi) const {
    auto v = value(name);
    if (!v) return fallback;
    std::int64_t out = 0;
    auto [ptr, ec] = std::from_chars(v->data(), v->data() + v->size(), out);
    if (ec != std::errc() || ptr != v->data() + v->size())
        throw UsageError(fmt::format("--{}: \"{}\" is not an integer", name, *v));
    if (out < lo || out > hi)
        throw UsageError(
            fmt::format("--{}: {} is out of range; use a value from {} to {}", name, out, lo, hi));
    return out;
}

double ParsedArgs::number(const std::string& name, double fallback) const {
    auto v = value(name);
    if (!v) return fallback;
    double out = 0;
    auto [ptr, ec] = std::from_chars(v->data(), v->data() + v->size(), out);
    if (ec != std::errc() || ptr != v->data() + v->size() || !std::isfinite(out))
        throw UsageError(fmt::format("--{}: \"{}\" is not a finite number", name, *v));
    return out;
}

ArgParser::ArgParser(std::string command, std::string usage, std::string summary,
                     std::vector<OptionSpec> options, std::size_t positional, bool variadic)
    : command_(std::move(command)),
      usage_(std::move(usage)),
      summary_(std::move(summary)),
      options_(std::move(options)),
      positional_(positional),
      variadic_(variadic) {}

void ArgParser::fail(const std::string& what) const {
    throw UsageError(fmt::format("{}: {}; see '{} --help'", command_, what, command_));
}

const OptionSpec* ArgParser::find(const std::string& name) const {
    for (const auto& o : options_)
        if (o.name == name) return &o;
    return nullptr;
}

ParsedArgs ArgParser::parse(const std::vector<std::string>& args) const {
    ParsedArgs out;
    for (std::size_t i = 0; i < args.size(); ++i) {
        const std::string& a = args[i];
        if (a == "--help" || a == "-h") {
            out.help = true;
            return out;
        }
        if (a.rfind("--", 0) != 0 || a == "--") {
            if (a.size() > 1 && a[0] == '-' && a != "-")
                fail(fmt::format("unknown option '{}'", a));
            out.positional.push_back(a);
            continue;
        }
        std::string name = a.substr(2), value;
        bool inline_value = false;
        if (auto eq = name.find('='); eq != std::string::npos) {
            value = name.substr(eq + 1);
            name = name.substr(0, eq);
            inline_value = true;
        }
        const OptionSpec* spec = find(name);
        if (!spec) {
            std::vector<std::string> names;
            for (const auto& o : options_) names.push_back(o.name);
            auto near = json::closest(name, names);
            fail(near ? fmt::format("unknown option '--{}' (did you mean '--{}'?)", name, *near)
                      : fmt::format("unknown option '--{}'", name));
        }
        // Every option at most once: a repeated one would silently take the last value, and
        // a script that adds a second --out or --config meant something else
        // (docs/operations/cli.md).
        if (out.flags.count(name) || out.values.count(name))
            fail(fmt::format("option '--{}' is given twice; give it once", name));
        if (spec->metavar.empty()) {
            if (inline_value) fail(fmt::format("option '--{}' takes no value", name));
            out.flags.insert(name);
            continue;
        }
        if (!inline_value) {
            if (i + 1 >= args.size()) fail(fmt::format("option '--{}' needs a value", name));
            value = args[++i];
        }
        // "--config=" or --config "": an empty value names no file, no number, no list.
        if (value.empty())
            fail(fmt::format("option '--{}' has an empty value; write --{} {}", name, name,
                             spec->metavar));
        out.values[name] = value;
    }
    if (out.positional.size() < positional_)
        fail(fmt::format("missing argument{} ({})", positional_ > 1 ? "s" : "", usage_));
    if (!variadic_ && out.positional.size() > positional_)
        fail(fmt::format("unexpected argument '{}'", out.positional[positional_]));
    return out;
}

std::string ArgParser::help() const {
    std::string out = fmt::format("usage: {} {}\n\n{}\n", command_, usage_, summary_);
    if (!options_.empty()) out += "\noptions:\n";
    for (const auto& o : options_) {
        std::string left = "--" + o.name + (o.metavar.empty() ? "" : " " + o.metavar);
        out += fmt::format("  {:<24} {}\n", left, o.help);
    }
    out += fmt::format("  {:<24} {}\n", "--help", "show this help");
    return out;
}

std::string printable(std::string_view text) {
    std::string out;
    out.reserve(text.size());
    for (std::size_t i = 0; i < text.size(); ++i) {
        const auto c = static_cast<unsigned char>(text[i]);
        if (c < 0x20 || c == 0x7f) {
            out += fmt::format("\\x{:02x}", c);
        } else if (c == 0xc2 && i + 1 < text.size() &&
                   static_cast<unsigned char>(text[i + 1]) >= 0x80 &&
                   static_cast<unsigned char>(text[i + 1]) <= 0x9f) {
            out += fmt::format("\\u{:04x}", static_cast<unsigned char>(text[++i]));
        } else {
            out += static_cast<char>(c);
        }
    }
    return out;
}

std::size_t trace_limit_bytes(const ParsedArgs& a) {
    const double mb = a.number("trace-limit", 64);
    if (!(mb >= 0.01) || mb > 1e6)
        throw UsageError(
            fmt::format("--trace-limit: {} is not a size in MB between 0.01 and 1000000", mb));
    return static_cast<std::size_t>(mb * 1e6);
}

}  // namespace gossamer::cli
