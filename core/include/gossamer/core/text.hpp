#pragma once
/// Text data for character-level language models (docs/modules/data.md, "Text").
///
/// A corpus is read whole (bounded), its vocabulary is the sorted set of its bytes, the last
/// 10% is the validation split, and each split is cut into windows of context + 1 characters
/// at a fixed stride (default: context, so every character but the first is a target once per
/// epoch). Windows become Dataset samples (token ids as floats); the sharding and the per-epoch
/// batch order of sharding.hpp draw them, deterministic for a seed.

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "gossamer/core/dataset.hpp"

namespace gossamer {

/// The largest corpus read, in bytes (a bound on memory and time, not a property of a format).
inline constexpr std::size_t kMaxTextBytes = 64u << 20;

/// The King James Bible as prose, one verse per line without its reference ("Ge1:1 "), read
/// through the `bible` program of Debian's bible-kjv (data from bible-kjv-text): 4,137,850
/// bytes. `program`: default "/usr/bin/bible". Throws ConfigError (path `field`) when the
/// program is missing ("install it: scripts/deps.sh, or apt-get install bible-kjv"), fails, or
/// prints something that is not its documented verse format.
std::string read_bible_kjv(const std::string& field, const std::string& program = "");

/// A text file's bytes. Throws ConfigError (path `field`) for a missing or unreadable file, an
/// empty one, one larger than kMaxTextBytes or one holding a NUL byte (not text).
std::string read_text_file(const std::string& path, const std::string& field);

/// The sorted distinct bytes of `text`: token id i is vocabulary[i].
std::string vocabulary_of(std::string_view text);

/// 8 hex digits naming a vocabulary (a CRC-32), for model descriptions.
std::string vocabulary_digest(std::string_view vocabulary);

/// Token ids of `text` in `vocabulary`. Throws Error naming the first character (printable or
/// as \xNN) and its position when one is not in the vocabulary.
std::vector<std::int32_t> encode_text(std::string_view text, std::string_view vocabulary);

/// The characters of token ids (each in [0, vocabulary.size())).
std::string decode_text(std::span<const std::int32_t> ids, std::string_view vocabulary);

/// Windows of context + 1 characters of `text` starting at 0, stride, 2 stride, ... while they
/// fit: features = context + 1, classes = vocabulary size, labels = each window's last token,
/// vocabulary set. Throws Error when the text is shorter than one window.
Dataset text_windows(std::string_view text, std::string_view vocabulary, int context, int stride,
                     std::string name);

}  // namespace gossamer
