// The training config loader (docs/formats/train-config.md): a valid config or one ConfigError.
#include "fuzz_support.hpp"
#include "gossamer/core/error.hpp"
#include "gossamer/optimizers/local/training_config.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    using namespace gossamer;
    fuzz::Input in(data, size);
    try {
        auto doc = json::parse_text(in.rest_text(), "fuzz.json");
        (void)optim::parse_training_config(doc);
    } catch (const ConfigError&) {
    }
    return 0;
}
