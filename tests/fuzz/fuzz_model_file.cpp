// The model file and checkpoint reader (docs/formats/model-file.md; a checkpoint is a model file):
// a checked model or one ConfigError.
#include "fuzz_support.hpp"
#include "gossamer/core/error.hpp"
#include "gossamer/core/model_file.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    using namespace gossamer;
    fuzz::Input in(data, size);
    try {
        auto f = parse_model_file("fuzz.bin", in.rest_text());
        fuzz::check(f.params.size() == f.layout.total(),
                    "a loaded model's layout covers its parameters");
    } catch (const ConfigError&) {
    }
    return 0;
}
