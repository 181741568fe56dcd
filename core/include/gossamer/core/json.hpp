#pragma once
/// JSON loading with errors that point at the offending value.
///
/// Every loader in Gossamer reads its file through Document and Node: a Node knows the file and
/// the JSON path it came from, so a wrong type, a missing key or an unknown key becomes one
/// ConfigError line such as
///   "ring.json: graph.edges[3][1]: rank 9 is out of range; ranks run from 0 to 7".

#include <cstdint>
#include <initializer_list>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace gossamer::json {

using Json = nlohmann::json;

/// A parsed file. The Json value is shared so that Nodes stay valid when Documents are copied.
struct Document {
    std::string file;                  ///< label used in error messages (usually the path)
    std::shared_ptr<const Json> root;  ///< the parsed value
};

/// Reads and parses a file. Throws ConfigError naming the file for a missing or unreadable file,
/// and the line and column for invalid JSON.
Document load_file(const std::string& path);

/// Parses text; `label` stands in for the file name in errors.
Document parse_text(std::string_view text, std::string label);

/// A value inside a Document, with its JSON path. Cheap to copy.
class Node {
  public:
    explicit Node(const Document& doc);

    const Json& value() const { return *value_; }
    /// JSON path of this value, e.g. "graph.edges[3]"; "(root)" for the top level.
    std::string path() const { return path_.empty() ? std::string("(root)") : path_; }
    const std::string& file() const { return doc_->file; }

    bool is_object() const { return value_->is_object(); }
    bool is_array() const { return value_->is_array(); }
    bool is_string() const { return value_->is_string(); }
    bool is_number() const { return value_->is_number(); }

    /// Throws unless this is an object whose keys all appear in `allowed`; the error for an
    /// unknown key suggests the closest allowed one.
    void expect_object(std::initializer_list<std::string_view> allowed) const;
    bool has(std::string_view key) const;
    /// The member `key`; throws "missing key" when absent.
    Node at(std::string_view key) const;
    /// The member `key`, or nullopt when absent.
    std::optional<Node> find(std::string_view key) const;

    /// Throws unless this is an array (of `min_size` elements or more).
    void expect_array(std::size_t min_size = 0) const;
    std::size_t size() const;
    /// Element i of an array (checked).
    Node operator[](std::size_t i) const;
    std::vector<Node> elements() const;

    /// Typed reads; each throws ConfigError on a wrong type or a value out of [lo, hi].
    std::int64_t as_int(std::int64_t lo = INT64_MIN, std::int64_t hi = INT64_MAX) const;
    double as_double() const;  ///< any number; rejects NaN and infinities
    bool as_bool() const;
    std::string as_string() const;
    /// A string that must be one of `choices`; the error lists them.
    std::string as_enum(std::initializer_list<std::string_view> choices) const;

    /// Throws ConfigError(file, path, what, fix) for this value.
    [[noreturn]] void fail(const std::string& what, const std::string& fix = {}) const;

  private:
    Node(std::shared_ptr<const Document> doc, const Json* value, std::string path);
    std::string type_name() const;

    std::shared_ptr<const Document> doc_;
    const Json* value_;
    std::string path_;
};

/// Levenshtein distance, used to suggest a close key or choice.
std::size_t edit_distance(std::string_view a, std::string_view b);

/// The element of `choices` closest to `word` if it is close enough to be a likely typo.
std::optional<std::string> closest(std::string_view word, const std::vector<std::string>& choices);

}  // namespace gossamer::json
