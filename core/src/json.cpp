#include "gossamer/core/json.hpp"

#include <fmt/format.h>

#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>
#include <unordered_set>
#include <vector>

#include "gossamer/core/error.hpp"
#include "gossamer/core/file_io.hpp"

namespace gossamer::json {
namespace {

std::string join(std::initializer_list<std::string_view> items) {
    std::string out;
    for (auto s : items) {
        if (!out.empty()) out += ", ";
        out += s;
    }
    return out;
}

// nlohmann reports a byte offset just past the error; users want line and column.
std::pair<std::size_t, std::size_t> line_column(std::string_view text, std::size_t byte) {
    std::size_t line = 1, col = 1;
    byte = std::min(byte, text.size() + 1);
    for (std::size_t i = 0; i + 1 < byte && i < text.size(); ++i) {
        if (text[i] == '\n') {
            ++line;
            col = 1;
        } else {
            ++col;
        }
    }
    return {line, col};
}

std::string parse_error_reason(const std::string& what) {
    // "[json.exception.parse_error.101] parse error at line 1, column 5: syntax error while
    // parsing value - invalid literal; last read: 'tru,'" -> keep what follows the last ": ".
    auto pos = what.find(": syntax error");
    if (pos != std::string::npos) return what.substr(pos + 2);
    if (what.rfind("[json.exception.", 0) == 0 && (pos = what.find("] ")) != std::string::npos)
        return what.substr(pos + 2);
    return what;
}

// Follows the parser's events to know the JSON path of each key, and refuses a key that appears
// twice in one object: nlohmann would keep the last one silently, so a typo-free but repeated
// "weights" or "peers" would quietly change what a user's file means.
class DuplicateKeyCheck {
  public:
    explicit DuplicateKeyCheck(const std::string& label) : label_(label) {}

    bool operator()(int /*depth*/, Json::parse_event_t event, Json& parsed) {
        switch (event) {
            case Json::parse_event_t::object_start:
            case Json::parse_event_t::array_start:
                enter_element();
                frames_.push_back(Frame{event == Json::parse_event_t::object_start, {}, {}, 0});
                break;
            case Json::parse_event_t::object_end:
            case Json::parse_event_t::array_end:
                if (!frames_.empty()) frames_.pop_back();
                break;
            case Json::parse_event_t::key:
                on_key(parsed.get<std::string>());
                break;
            case Json::parse_event_t::value:
                enter_element();
                break;
        }
        return true;
    }

  private:
    struct Frame {
        bool object = false;
        std::unordered_set<std::string> keys;
        std::string key;        // the member being read (objects)
        std::size_t count = 0;  // elements seen so far (arrays)
    };

    // A value starts: in an array it is the next element.
    void enter_element() {
        if (!frames_.empty() && !frames_.back().object) ++frames_.back().count;
    }

    void on_key(std::string key) {
        auto& top = frames_.back();
        if (!top.keys.insert(key).second) {
            std::string path;
            for (std::size_t i = 0; i + 1 < frames_.size(); ++i) {
                const auto& f = frames_[i];
                if (f.object)
                    path += (path.empty() ? "" : ".") + f.key;
                else
                    path += fmt::format("[{}]", f.count - 1);
            }
            path += (path.empty() ? "" : ".") + key;
            throw ConfigError(label_, path, fmt::format("duplicate key \"{}\"", key),
                              "keep only one of the two (JSON objects take each key once)");
        }
        top.key = std::move(key);
    }

    const std::string& label_;
    std::vector<Frame> frames_;
};

}  // namespace

Document parse_text(std::string_view text, std::string label) {
    try {
        DuplicateKeyCheck check(label);
        auto value = std::make_shared<Json>(Json::parse(text.begin(), text.end(), std::ref(check)));
        return Document{std::move(label), std::move(value)};
    } catch (const Json::parse_error& e) {
        if (text.find_first_not_of(" \t\r\n") == std::string_view::npos)
            throw ConfigError(std::move(label), "", "the file is empty (no JSON value)",
                              "write a JSON object into it");
        auto [line, col] = line_column(text, e.byte);
        throw ConfigError(fmt::format("{}:{}:{}", label, line, col), "",
                          "invalid JSON: " + parse_error_reason(e.what()),
                          "fix the syntax at that position");
    } catch (const Json::exception& e) {
        // e.g. out_of_range 406: a number too large for a double (1e999).
        throw ConfigError(std::move(label), "", "invalid JSON: " + parse_error_reason(e.what()),
                          "use finite numbers within the range of a double");
    }
}

Document load_file(const std::string& path) {
    std::error_code ec;
    if (std::filesystem::is_directory(path, ec))
        throw ConfigError(path, "", "is a directory, not a JSON file",
                          "give the path of the JSON file inside it");
    return parse_text(read_input_file(path, kJsonInput), path);
}

Node::Node(const Document& doc)
    : Node(std::make_shared<const Document>(doc), doc.root.get(), std::string()) {}

Node::Node(std::shared_ptr<const Document> doc, const Json* value, std::string path)
    : doc_(std::move(doc)), value_(value), path_(std::move(path)) {}

void Node::fail(const std::string& what, const std::string& fix) const {
    throw ConfigError(doc_->file, path(), what, fix);
}

std::string Node::type_name() const {
    if (value_->is_number_integer()) return "an integer";
    if (value_->is_number()) return "a number";
    if (value_->is_string()) return fmt::format("the string \"{}\"", value_->get<std::string>());
    if (value_->is_object()) return "an object";
    if (value_->is_array()) return "an array";
    if (value_->is_boolean()) return "a boolean";
    return "null";
}

void Node::expect_object(std::initializer_list<std::string_view> allowed) const {
    if (!value_->is_object()) fail("expected an object, found " + type_name());
    std::vector<std::string> names(allowed.begin(), allowed.end());
    for (const auto& item : value_->items()) {
        bool known = false;
        for (auto a : allowed) known = known || (item.key() == a);
        if (known) continue;
        auto near = closest(item.key(), names);
        std::string fix =
            near ? fmt::format("did you mean \"{}\"? allowed keys: {}", *near, join(allowed))
                 : fmt::format("allowed keys: {}", join(allowed));
        Node(doc_, &item.value(), path_.empty() ? item.key() : path_ + "." + item.key())
            .fail(fmt::format("unknown key \"{}\"", item.key()), fix);
    }
}

bool Node::has(std::string_view key) const {
    return value_->is_object() && value_->find(key) != value_->end();
}

std::optional<Node> Node::find(std::string_view key) const {
    if (!value_->is_object()) fail("expected an object, found " + type_name());
    auto it = value_->find(key);
    if (it == value_->end()) return std::nullopt;
    std::string sub = path_.empty() ? std::string(key) : path_ + "." + std::string(key);
    return Node(doc_, &*it, std::move(sub));
}

Node Node::at(std::string_view key) const {
    auto n = find(key);
    if (!n) fail(fmt::format("missing key \"{}\"", key), fmt::format("add \"{}\"", key));
    return *n;
}

void Node::expect_array(std::size_t min_size) const {
    if (!value_->is_array()) fail("expected an array, found " + type_name());
    if (value_->size() < min_size)
        fail(fmt::format("expected at least {} element{}, found {}", min_size,
                         min_size == 1 ? "" : "s", value_->size()));
}

std::size_t Node::size() const {
    expect_array();
    return value_->size();
}

Node Node::operator[](std::size_t i) const {
    expect_array();
    if (i >= value_->size())
        fail(fmt::format("expected at least {} elements, found {}", i + 1, value_->size()));
    return Node(doc_, &(*value_)[i], fmt::format("{}[{}]", path_, i));
}

std::vector<Node> Node::elements() const {
    std::vector<Node> out;
    for (std::size_t i = 0, n = size(); i < n; ++i) out.push_back((*this)[i]);
    return out;
}

std::int64_t Node::as_int(std::int64_t lo, std::int64_t hi) const {
    std::int64_t v = 0;
    if (value_->is_number_unsigned()) {
        auto u = value_->get<std::uint64_t>();
        if (u > static_cast<std::uint64_t>(INT64_MAX)) fail("integer too large");
        v = static_cast<std::int64_t>(u);
    } else if (value_->is_number_integer()) {
        v = value_->get<std::int64_t>();
    } else {
        fail("expected an integer, found " + type_name());
    }
    if (v < lo || v > hi) {
        if (hi == INT64_MAX)
            fail(fmt::format("{} is out of range", v), fmt::format("use a value >= {}", lo));
        fail(fmt::format("{} is out of range", v),
             fmt::format("use a value from {} to {}", lo, hi));
    }
    return v;
}

double Node::as_double() const {
    if (!value_->is_number()) fail("expected a number, found " + type_name());
    double v = value_->get<double>();
    if (!std::isfinite(v)) fail("expected a finite number", "use a finite value");
    return v;
}

bool Node::as_bool() const {
    if (!value_->is_boolean()) fail("expected true or false, found " + type_name());
    return value_->get<bool>();
}

std::string Node::as_string() const {
    if (!value_->is_string()) fail("expected a string, found " + type_name());
    return value_->get<std::string>();
}

std::string Node::as_enum(std::initializer_list<std::string_view> choices) const {
    std::string s = as_string();
    for (auto c : choices)
        if (s == c) return s;
    auto near = closest(s, std::vector<std::string>(choices.begin(), choices.end()));
    fail(fmt::format("unknown value \"{}\"", s),
         near ? fmt::format("did you mean \"{}\"? use one of {}", *near, join(choices))
              : fmt::format("use one of {}", join(choices)));
}

std::size_t edit_distance(std::string_view a, std::string_view b) {
    std::vector<std::size_t> prev(b.size() + 1), cur(b.size() + 1);
    for (std::size_t j = 0; j <= b.size(); ++j) prev[j] = j;
    for (std::size_t i = 1; i <= a.size(); ++i) {
        cur[0] = i;
        for (std::size_t j = 1; j <= b.size(); ++j) {
            std::size_t sub = prev[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1);
            cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, sub});
        }
        std::swap(prev, cur);
    }
    return prev[b.size()];
}

std::optional<std::string> closest(std::string_view word, const std::vector<std::string>& choices) {
    std::optional<std::string> best;
    std::size_t best_d = SIZE_MAX;
    for (const auto& c : choices) {
        std::size_t d = edit_distance(word, c);
        if (d < best_d) {
            best_d = d;
            best = c;
        }
    }
    // A likely typo: at most a third of the word changed (and at least one edit allowed).
    if (best && best_d <= std::max<std::size_t>(2, word.size() / 3)) return best;
    return std::nullopt;
}

}  // namespace gossamer::json
