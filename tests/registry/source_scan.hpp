#pragma once
// A small C++ lexer for tests that read the project's sources: it splits a file into its string
// literals (with their lines) and its code with comments and literals removed, so a check can
// look for names in literals and for identifiers in code without being fooled by comments.

#include <cctype>
#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace source_scan {

struct Literal {
    int line = 0;
    std::string text;  ///< as written between the quotes (escapes kept)
};

struct Scanned {
    std::vector<Literal> literals;
    std::string code;  ///< comments dropped, every literal as "" (line breaks kept)
};

inline bool ident_char(char c) {
    return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '_';
}

/// Splits `text` (C++ source) into literals and code. Handles // and /* */ comments, "..." and
/// '...' with escapes, raw strings R"d(...)d" and digit separators (1'000).
inline Scanned scan(std::string_view text) {
    Scanned out;
    int line = 1;
    std::size_t i = 0;
    const auto at = [&](std::size_t k) { return k < text.size() ? text[k] : '\0'; };
    while (i < text.size()) {
        const char c = text[i];
        if (c == '\n') {
            ++line;
            out.code += c;
            ++i;
        } else if (c == '/' && at(i + 1) == '/') {
            while (i < text.size() && text[i] != '\n') ++i;
        } else if (c == '/' && at(i + 1) == '*') {
            i += 2;
            while (i < text.size() && !(text[i] == '*' && at(i + 1) == '/')) {
                if (text[i] == '\n') {
                    ++line;
                    out.code += '\n';
                }
                ++i;
            }
            i += 2;
        } else if (ident_char(c)) {
            // An identifier or a number (digit separators included), consumed whole.
            const std::size_t start = i;
            const bool number = std::isdigit(static_cast<unsigned char>(c)) != 0;
            while (i < text.size() && (ident_char(text[i]) || (number && text[i] == '\''))) ++i;
            const std::string_view word = text.substr(start, i - start);
            if (!number && at(i) == '"' && word.back() == 'R') {  // a raw string
                const std::size_t open = text.find('(', i);
                const std::string close =
                    ")" + std::string(text.substr(i + 1, open - i - 1)) + "\"";
                const std::size_t end = text.find(close, open);
                const std::string_view body = text.substr(open + 1, end - open - 1);
                out.literals.push_back({line, std::string(body)});
                for (char b : body) line += b == '\n' ? 1 : 0;
                out.code += "\"\"";
                i = end + close.size();
            } else {
                out.code += word;
            }
        } else if (c == '"' || c == '\'') {
            const std::size_t start = ++i;
            while (i < text.size() && text[i] != c) i += text[i] == '\\' ? 2 : 1;
            if (c == '"')
                out.literals.push_back({line, std::string(text.substr(start, i - start))});
            out.code += c == '"' ? "\"\"" : "''";
            ++i;
        } else {
            out.code += c;
            ++i;
        }
    }
    return out;
}

/// Whether `word` occurs in `text` as a whole word (not inside a longer identifier).
inline bool has_word(std::string_view text, std::string_view word) {
    for (std::size_t at = text.find(word); at != std::string_view::npos;
         at = text.find(word, at + 1)) {
        const bool before = at > 0 && ident_char(text[at - 1]);
        const bool after = at + word.size() < text.size() && ident_char(text[at + word.size()]);
        if (!before && !after) return true;
    }
    return false;
}

}  // namespace source_scan
