// Text data: the KJV through Debian's `bible` reader, text files, vocabularies and windows.

#include "gossamer/core/text.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zlib.h>

#include <array>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>

#include "gossamer/core/error.hpp"
#include "gossamer/core/file_io.hpp"

extern char** environ;

namespace gossamer {
namespace {

constexpr const char* kBibleFix =
    "install Debian's bible-kjv and bible-kjv-text (scripts/deps.sh does), or use "
    "{\"name\": \"text\", \"file\": PATH}";

// Runs argv[0] with the caller's environment minus COLUMNS (which sets `bible`'s line width),
// and returns its standard output: at most kMaxTextBytes, within `timeout_s`, exit status 0.
// Throws ConfigError (path `field`) otherwise.
std::string run_reader(const std::vector<std::string>& argv, const std::string& field,
                       double timeout_s) {
    std::vector<char*> args;
    for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    std::vector<char*> env;
    for (char** e = environ; e && *e; ++e)
        if (std::strncmp(*e, "COLUMNS=", 8) != 0) env.push_back(*e);
    env.push_back(nullptr);
    int out[2];
    if (::pipe2(out, O_CLOEXEC) != 0)
        throw ConfigError("", field, fmt::format("pipe: {}", std::strerror(errno)));
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, out[1], 1);
    posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
    pid_t pid = -1;
    const int rc = ::posix_spawn(&pid, args[0], &fa, nullptr, args.data(), env.data());
    posix_spawn_file_actions_destroy(&fa);
    ::close(out[1]);
    if (rc != 0) {
        ::close(out[0]);
        throw ConfigError("", field, fmt::format("cannot run {}: {}", argv[0], std::strerror(rc)),
                          kBibleFix);
    }
    std::string text;
    std::string problem;
    const auto deadline =
        std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
    std::array<char, 1 << 16> buf;
    for (;;) {
        const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                              deadline - std::chrono::steady_clock::now())
                              .count();
        if (left <= 0) {
            problem = fmt::format("{} did not finish within {} s", argv[0], timeout_s);
            break;
        }
        pollfd p{out[0], POLLIN, 0};
        if (::poll(&p, 1, static_cast<int>(left)) < 0 && errno != EINTR) {
            problem = fmt::format("poll: {}", std::strerror(errno));
            break;
        }
        const ssize_t n = ::read(out[0], buf.data(), buf.size());
        if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
        if (n <= 0) break;
        if (text.size() + static_cast<std::size_t>(n) > kMaxTextBytes) {
            problem = fmt::format("{} printed more than {} bytes", argv[0], kMaxTextBytes);
            break;
        }
        text.append(buf.data(), static_cast<std::size_t>(n));
    }
    ::close(out[0]);
    if (!problem.empty()) ::kill(pid, SIGKILL);
    int status = 0;
    while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    if (!problem.empty()) throw ConfigError("", field, problem, kBibleFix);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
        throw ConfigError("", field,
                          fmt::format("{} failed (status {})", argv[0],
                                      WIFEXITED(status) ? WEXITSTATUS(status) : -1),
                          kBibleFix);
    return text;
}

// "Ge1:1 ", "1Co13:4 ", "Re22:21 ": a verse reference of `bible -f`; returns its length with
// the space, or 0.
std::size_t reference_length(std::string_view line) {
    std::size_t i = 0;
    if (i < line.size() && line[i] >= '1' && line[i] <= '3') ++i;
    const std::size_t letters = i;
    while (i < line.size() && std::isalpha(static_cast<unsigned char>(line[i]))) ++i;
    if (i == letters) return 0;
    const std::size_t digits = i;
    while (i < line.size() && std::isdigit(static_cast<unsigned char>(line[i]))) ++i;
    if (i == digits || i >= line.size() || line[i] != ':') return 0;
    const std::size_t verse = ++i;
    while (i < line.size() && std::isdigit(static_cast<unsigned char>(line[i]))) ++i;
    if (i == verse || i >= line.size() || line[i] != ' ') return 0;
    return i + 1;
}

}  // namespace

std::string read_bible_kjv(const std::string& field, const std::string& program) {
    const std::string path = program.empty() ? std::string("/usr/bin/bible") : program;
    std::error_code ec;
    if (!std::filesystem::is_regular_file(path, ec))
        throw ConfigError("", field, fmt::format("the KJV reader {} is not installed", path),
                          kBibleFix);
    // -f: one verse per line, "Ge1:1 In the beginning ..."; the whole book in one range.
    const std::string raw = run_reader({path, "-f", "Gen1:1-Rev22:21"}, field, 60.0);
    std::string text;
    text.reserve(raw.size());
    std::size_t verses = 0, start = 0;
    while (start < raw.size()) {
        std::size_t end = raw.find('\n', start);
        if (end == std::string::npos) end = raw.size();
        const std::string_view line(raw.data() + start, end - start);
        start = end + 1;
        if (line.empty()) continue;
        const std::size_t ref = reference_length(line);
        if (ref == 0) {
            if (verses == 0)
                throw ConfigError("", field,
                                  fmt::format("{} printed \"{}\", not a verse of the form \"Ge1:1 "
                                              "text\"",
                                              path, line.substr(0, 40)),
                                  kBibleFix);
            text.back() = ' ';  // a wrapped line continues its verse
            text.append(line);
            text.push_back('\n');
            continue;
        }
        text.append(line.substr(ref));
        text.push_back('\n');
        ++verses;
    }
    if (verses < 31000)
        throw ConfigError("", field,
                          fmt::format("{} printed {} verses; the KJV has 31,102", path, verses),
                          kBibleFix);
    return text;
}

std::string read_text_file(const std::string& path, const std::string& field) {
    std::error_code ec;
    if (!std::filesystem::exists(path, ec))
        throw ConfigError(path, field, "no such file", "give the path of a text file");
    std::string text;
    try {  // regular files only, bounded, recorded as an input: core/file_io.hpp
        text = read_input_file(path, InputKind{"text file", "text data sets", kMaxTextBytes});
    } catch (const ConfigError& e) {
        throw ConfigError(path, field, e.problem(), e.fix());
    }
    if (text.empty()) throw ConfigError(path, field, "the file is empty", "give a text file");
    if (const auto nul = text.find('\0'); nul != std::string::npos)
        throw ConfigError(path, field,
                          fmt::format("a NUL byte at offset {}: this is not a text file", nul),
                          "give a text file");
    return text;
}

std::string vocabulary_of(std::string_view text) {
    std::array<bool, 256> seen{};
    for (const char c : text) seen[static_cast<unsigned char>(c)] = true;
    std::string v;
    for (int b = 0; b < 256; ++b)
        if (seen[static_cast<std::size_t>(b)]) v.push_back(static_cast<char>(b));
    return v;
}

std::string vocabulary_digest(std::string_view vocabulary) {
    const auto crc =
        ::crc32(::crc32(0L, Z_NULL, 0), reinterpret_cast<const Bytef*>(vocabulary.data()),
                static_cast<uInt>(vocabulary.size()));
    return fmt::format("{:08x}", static_cast<std::uint32_t>(crc));
}

namespace {
std::string shown(char c) {
    const auto u = static_cast<unsigned char>(c);
    if (u >= 0x20 && u < 0x7f) return fmt::format("'{}'", c);
    return fmt::format("\\x{:02x}", u);
}
}  // namespace

std::vector<std::int32_t> encode_text(std::string_view text, std::string_view vocabulary) {
    std::array<std::int32_t, 256> id;
    id.fill(-1);
    for (std::size_t i = 0; i < vocabulary.size(); ++i)
        id[static_cast<unsigned char>(vocabulary[i])] = static_cast<std::int32_t>(i);
    std::vector<std::int32_t> out(text.size());
    for (std::size_t i = 0; i < text.size(); ++i) {
        out[i] = id[static_cast<unsigned char>(text[i])];
        if (out[i] < 0)
            throw Error(
                fmt::format("the character {} at position {} is not in the vocabulary of "
                            "{} characters",
                            shown(text[i]), i, vocabulary.size()));
    }
    return out;
}

std::string decode_text(std::span<const std::int32_t> ids, std::string_view vocabulary) {
    std::string out;
    out.reserve(ids.size());
    for (const auto i : ids) {
        if (i < 0 || static_cast<std::size_t>(i) >= vocabulary.size())
            throw Error(fmt::format("token id {} is outside the vocabulary of {} characters", i,
                                    vocabulary.size()));
        out.push_back(vocabulary[static_cast<std::size_t>(i)]);
    }
    return out;
}

Dataset text_windows(std::string_view text, std::string_view vocabulary, int context, int stride,
                     std::string name) {
    if (context < 1 || stride < 1)
        throw Error(fmt::format("text windows: context {} and stride {} must be positive", context,
                                stride));
    const auto window = static_cast<std::size_t>(context) + 1;
    if (text.size() < window)
        throw Error(fmt::format("{}: {} characters are fewer than one window of context + 1 = {}",
                                name, text.size(), window));
    const auto ids = encode_text(text, vocabulary);
    Dataset d;
    d.name = std::move(name);
    d.features = static_cast<int>(window);
    d.classes = static_cast<int>(vocabulary.size());
    d.vocabulary = std::string(vocabulary);
    const std::size_t count = (text.size() - window) / static_cast<std::size_t>(stride) + 1;
    d.x.resize(count * window);
    d.labels.resize(count);
    for (std::size_t w = 0; w < count; ++w) {
        const std::size_t first = w * static_cast<std::size_t>(stride);
        for (std::size_t j = 0; j < window; ++j)
            d.x[w * window + j] = static_cast<float>(ids[first + j]);
        d.labels[w] = ids[first + window - 1];
    }
    return d;
}

}  // namespace gossamer
