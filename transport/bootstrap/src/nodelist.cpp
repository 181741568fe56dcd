// Slurm's compressed host lists (SLURM_JOB_NODELIST): names separated by commas, each a mix of
// literal text and bracket groups of numbers and ranges. Several groups in one name give every
// combination, as Slurm's own hostlist does for multi-dimensional names.
#include <fmt/format.h>

#include <cctype>
#include <cstdint>

#include "gossamer/bootstrap/launcher.hpp"
#include "gossamer/core/error.hpp"

namespace gossamer::bootstrap {
namespace {

class Parser {
  public:
    Parser(std::string_view list, const std::string& source, std::size_t max_hosts)
        : list_(list), source_(source), max_(max_hosts) {}

    std::vector<std::string> run() {
        if (list_.empty()) fail("it is empty");
        std::vector<std::string> hosts;
        std::size_t start = 0;
        int depth = 0;
        for (std::size_t i = 0; i <= list_.size(); ++i) {
            const char c = i < list_.size() ? list_[i] : ',';
            if (c == '[') {
                if (depth > 0) fail(fmt::format("a '[' inside brackets at position {}", i + 1));
                ++depth;
            } else if (c == ']') {
                if (depth == 0) fail(fmt::format("a ']' without '[' at position {}", i + 1));
                --depth;
            } else if (c == ',' && depth == 0) {
                name(list_.substr(start, i - start), start, hosts);
                start = i + 1;
            }
        }
        if (depth > 0) fail("a '[' is never closed");
        return hosts;
    }

  private:
    [[noreturn]] void fail(const std::string& why) const {
        throw ConfigError("", source_, fmt::format("'{}' is not a Slurm node list: {}", list_, why),
                          "expect names like node[01-04,07],gpu1 (as Slurm sets it)");
    }

    // One name with its bracket groups, expanded into `out` (each group's values in order).
    void name(std::string_view text, std::size_t at, std::vector<std::string>& out) {
        if (text.empty()) fail(fmt::format("an empty name at position {}", at + 1));
        std::vector<std::vector<std::string>> parts;
        std::size_t i = 0;
        while (i < text.size()) {
            if (text[i] == '[') {
                const auto close = text.find(']', i);
                parts.push_back(group(text.substr(i + 1, close - i - 1), at + i + 1));
                i = close + 1;
                continue;
            }
            const auto next = text.find('[', i);
            const auto literal =
                text.substr(i, next == std::string_view::npos ? text.npos : next - i);
            for (char c : literal)
                if (std::isspace(static_cast<unsigned char>(c)) ||
                    std::iscntrl(static_cast<unsigned char>(c)))
                    fail(fmt::format("a blank or control character in '{}'", text));
            parts.push_back({std::string(literal)});
            i += literal.size();
        }
        std::size_t count = 1;
        for (const auto& p : parts) {
            count *= p.size();
            if (count + out.size() > max_) fail(fmt::format("more than {} hosts", max_));
        }
        std::vector<std::string> names{""};
        for (const auto& p : parts) {
            std::vector<std::string> longer;
            longer.reserve(names.size() * p.size());
            for (const auto& prefix : names)
                for (const auto& v : p) longer.push_back(prefix + v);
            names = std::move(longer);
        }
        out.insert(out.end(), names.begin(), names.end());
    }

    // "01-04,07" -> 01 02 03 04 07; padding from the lower bound's width.
    std::vector<std::string> group(std::string_view text, std::size_t at) {
        if (text.empty()) fail(fmt::format("empty brackets at position {}", at));
        std::vector<std::string> values;
        std::size_t start = 0;
        for (std::size_t i = 0; i <= text.size(); ++i) {
            if (i < text.size() && text[i] != ',') continue;
            const auto item = text.substr(start, i - start);
            if (item.empty()) fail(fmt::format("an empty range in '[{}]'", text));
            const auto dash = item.find('-');
            const auto lo_text = item.substr(0, dash);
            const auto hi_text = dash == item.npos ? lo_text : item.substr(dash + 1);
            const auto lo = number(lo_text, text), hi = number(hi_text, text);
            if (hi < lo) fail(fmt::format("the range {} runs backwards", item));
            if (hi - lo + 1 + values.size() > max_) fail(fmt::format("more than {} hosts", max_));
            for (auto v = lo; v <= hi; ++v)
                values.push_back(fmt::format("{:0{}}", v, lo_text.size()));
            start = i + 1;
        }
        return values;
    }

    std::uint64_t number(std::string_view digits, std::string_view group) const {
        if (digits.empty() || digits.size() > 18)
            fail(fmt::format("'{}' in '[{}]' is not a number", digits, group));
        std::uint64_t v = 0;
        for (char c : digits) {
            if (c < '0' || c > '9')
                fail(fmt::format("'{}' in '[{}]' is not a number", digits, group));
            v = v * 10 + static_cast<std::uint64_t>(c - '0');
        }
        return v;
    }

    std::string_view list_;
    const std::string& source_;
    std::size_t max_;
};

}  // namespace

std::vector<std::string> expand_nodelist(std::string_view list, const std::string& source,
                                         std::size_t max_hosts) {
    return Parser(list, source, max_hosts).run();
}

}  // namespace gossamer::bootstrap
