#include "gossamer/bootstrap/settings.hpp"

#include <fmt/format.h>

namespace gossamer::bootstrap {
namespace {

// One line, no control characters, at most kMaxValueChars (a description, never a payload).
std::string one_line(std::string s) {
    for (char& c : s)
        if (static_cast<unsigned char>(c) < 0x20) c = ' ';
    if (s.size() > kMaxValueChars) s = s.substr(0, kMaxValueChars - 3) + "...";
    return s;
}

const Setting* find(std::span<const Setting> list, const std::string& field) {
    for (const auto& s : list)
        if (s.field == field) return &s;
    return nullptr;
}

}  // namespace

Setting make_setting(std::string field, std::string_view canonical, std::string value,
                     std::string fix) {
    return make_setting(std::move(field), Digest().text(canonical).value(), std::move(value),
                        std::move(fix));
}

Setting make_setting(std::string field, std::uint64_t digest, std::string value, std::string fix) {
    return {std::move(field), digest, one_line(std::move(value)), std::move(fix)};
}

std::optional<SettingMismatch> compare_settings(std::span<const Setting> theirs,
                                                std::span<const Setting> mine) {
    std::optional<SettingMismatch> first;
    auto differ = [&](const std::string& field, const Setting* t, const Setting* m) {
        if (first) {
            first->also.push_back(field);
            return;
        }
        std::string a = t ? t->value : "nothing", b = m ? m->value : "nothing";
        if (t && m && a == b) {  // the same words for different values: show the digests
            a += fmt::format(" (digest {:016x})", t->digest);
            b += fmt::format(" (digest {:016x})", m->digest);
        }
        first = SettingMismatch{field, std::move(a), std::move(b), m ? m->fix : t->fix, {}};
    };
    for (const auto& m : mine) {
        const Setting* t = find(theirs, m.field);
        if (!t || t->digest != m.digest) differ(m.field, t, &m);
    }
    for (const auto& t : theirs)
        if (!find(mine, t.field)) differ(t.field, &t, nullptr);
    return first;
}

std::string mismatch_text(const SettingMismatch& m, int their_rank, int my_rank) {
    // "epochs differ", "topology graph differs"
    const bool plural = m.field.ends_with('s') && !m.field.ends_with("ss");
    std::string out =
        fmt::format("{} {}: rank {} has {}, rank {} has {}", m.field, plural ? "differ" : "differs",
                    their_rank, m.theirs, my_rank, m.mine);
    if (!m.fix.empty()) out += "; " + m.fix;
    if (!m.also.empty()) {
        std::string also;
        for (const auto& f : m.also) also += (also.empty() ? "" : ", ") + f;
        out += fmt::format(" (also differ: {})", also);
    }
    return out;
}

}  // namespace gossamer::bootstrap
