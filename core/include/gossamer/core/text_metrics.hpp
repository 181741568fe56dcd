#pragma once
/// How a language model's numbers are shown (docs/operations/cli.md, "Text data"). On text data
/// (Dataset::vocabulary non-empty) the loss is a cross-entropy per character in nats; every
/// place that shows a classifier's accuracy shows instead that loss in nats per character and
/// in bits per character (bpc = nats / ln 2), the figures language-model papers quote. JSON
/// outputs keep their "loss" and "accuracy" fields and add the bits beside them ("bpc").

#include <fmt/format.h>

#include <numbers>
#include <string>

#include "gossamer/core/dataset.hpp"

namespace gossamer::text_metrics {

/// Whether `data` is text, whose loss these functions show.
inline bool is_text(const Dataset& data) {
    return !data.vocabulary.empty();
}

/// Bits per character of a loss in nats per character.
inline double bits_per_char(double nats) {
    return nats / std::numbers::ln2;
}

/// "1.2345 nats/char, 1.7810 bpc": a loss as a text model's table and progress lines show it.
inline std::string format_loss(double nats) {
    return fmt::format("{:.4f} nats/char, {:.4f} bpc", nats, bits_per_char(nats));
}

}  // namespace gossamer::text_metrics
