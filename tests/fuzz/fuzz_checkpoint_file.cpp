// The checkpoint reader (docs/operations/checkpoint.md): a checked header and state, or one
// ConfigError.
#include "fuzz_support.hpp"
#include "gossamer/core/checkpoint_file.hpp"
#include "gossamer/core/error.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    using namespace gossamer;
    fuzz::Input in(data, size);
    try {
        const auto f = parse_checkpoint_file("fuzz.state", in.rest_text());
        fuzz::check(f.header.rank >= 0 && f.header.rank < f.header.n,
                    "a loaded checkpoint's rank is one of its peers");
        fuzz::check(f.header.step >= 0, "a loaded checkpoint's step is not negative");
        fuzz::check(checkpoint_mismatch(f.header, f.header).empty(), "a header agrees with itself");
    } catch (const ConfigError&) {
    }
    return 0;
}
