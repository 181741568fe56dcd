#include <doctest/doctest.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <optional>
#include <string>

#include "gossamer/core/error.hpp"
#include "gossamer/core/idx.hpp"
#include "idx_writer.hpp"
#include "support/errors.hpp"
#include "support/optional.hpp"
#include "support/temp_dir.hpp"

using gossamer::ConfigError;
using gossamer::load_fashion_mnist;
using namespace gossamer::test;

namespace {

// A tiny Fashion-MNIST look-alike: `n` images whose pixel k of image i is (i + k) % 256.
void write_split(const TempDir& dir, const std::string& prefix, std::uint32_t n,
                 std::uint32_t labels, std::uint32_t width = 28, unsigned char first_label = 3) {
    std::vector<unsigned char> pixels(std::size_t{n} * 28 * width);
    for (std::size_t i = 0; i < pixels.size(); ++i) pixels[i] = static_cast<unsigned char>(i % 256);
    write_gz((dir.path() / (prefix + "-images-idx3-ubyte.gz")).string(),
             idx_bytes({n, 28, width}, pixels));
    std::vector<unsigned char> ys(labels);
    for (std::size_t i = 0; i < ys.size(); ++i) ys[i] = static_cast<unsigned char>(i % 10);
    if (!ys.empty()) ys[0] = first_label;
    write_gz((dir.path() / (prefix + "-labels-idx1-ubyte.gz")).string(), idx_bytes({labels}, ys));
}

// Sets an environment variable for one scope and puts the old value back.
class ScopedEnv {
  public:
    ScopedEnv(const char* name, const std::string& value) : name_(name) {
        if (const char* old = std::getenv(name)) old_ = old;
        setenv(name, value.c_str(), 1);
    }
    ~ScopedEnv() {
        if (old_)
            setenv(name_, old_->c_str(), 1);
        else
            unsetenv(name_);
    }
    ScopedEnv(const ScopedEnv&) = delete;
    ScopedEnv& operator=(const ScopedEnv&) = delete;

  private:
    const char* name_;
    std::optional<std::string> old_;
};

}  // namespace

TEST_CASE("load_fashion_mnist reads a split, normalises pixels and sets the image shape") {
    TempDir dir;
    write_split(dir, "t10k", 3, 3);
    const auto d = load_fashion_mnist(dir.path().string(), "test");
    CHECK(d.name == "fashion-mnist/test");
    CHECK(d.size() == 3);
    CHECK(d.features == 784);
    CHECK(d.classes == 10);
    CHECK(d.channels == 1);
    CHECK(d.height == 28);
    CHECK(d.width == 28);
    CHECK(d.labels == std::vector<std::int32_t>{3, 1, 2});
    REQUIRE(d.x.size() == 3 * 784);
    // pixel p becomes (p / 255 - 0.2860) / 0.3530
    CHECK(d.x[0] == doctest::Approx((0.0 - 0.2860) / 0.3530).epsilon(1e-6));
    CHECK(d.x[255] == doctest::Approx((1.0 - 0.2860) / 0.3530).epsilon(1e-6));
    CHECK(d.x[784 + 100] ==
          doctest::Approx(((784 + 100) % 256 / 255.0 - 0.2860) / 0.3530).epsilon(1e-6));
}

TEST_CASE("GOSSAMER_DATA_DIR overrides the default folder, an explicit folder overrides both") {
    TempDir env_dir, arg_dir;
    write_split(env_dir, "train", 2, 2);
    write_split(arg_dir, "train", 4, 4);
    ScopedEnv env("GOSSAMER_DATA_DIR", env_dir.path().string());
    CHECK(gossamer::fashion_mnist_dir() == env_dir.path().string());
    CHECK(load_fashion_mnist().size() == 2);
    CHECK(load_fashion_mnist(arg_dir.path().string()).size() == 4);
}

TEST_CASE("without GOSSAMER_DATA_DIR the Debian package folder is the default") {
    ScopedEnv env("GOSSAMER_DATA_DIR", "");
    CHECK(gossamer::fashion_mnist_dir() == "/usr/share/datasets/fashion-mnist");
}

TEST_CASE("a missing file names it and says how to install the package") {
    TempDir dir;
    const auto msg = config_error([&] { load_fashion_mnist(dir.path().string(), "train"); });
    const auto file = (dir.path() / "train-images-idx3-ubyte.gz").string();
    CHECK(msg.find(file + ": Fashion-MNIST file not found") == 0);
    CHECK(contains(msg, "apt-get install dataset-fashion-mnist"));
    CHECK(contains(msg, "GOSSAMER_DATA_DIR"));
}

TEST_CASE("image and label counts that differ are named with both files") {
    TempDir dir;
    write_split(dir, "train", 5, 4);
    const auto msg = config_error([&] { load_fashion_mnist(dir.path().string(), "train"); });
    const auto labels = (dir.path() / "train-labels-idx1-ubyte.gz").string();
    CHECK(msg.find(labels + ": count mismatch: 4 labels for the 5 images of ") == 0);
    CHECK(contains(msg, "train-images-idx3-ubyte.gz"));
}

TEST_CASE("images of the wrong size are refused with the shape found") {
    TempDir dir;
    write_split(dir, "train", 2, 2, 27);
    const auto msg = config_error([&] { load_fashion_mnist(dir.path().string(), "train"); });
    CHECK(contains(msg,
                   "train-images-idx3-ubyte.gz: wrong dimensions: expected N x 28 x 28 "
                   "images, found 2 x 28 x 27"));
}

TEST_CASE("a label outside 0..9 is refused") {
    TempDir dir;
    write_split(dir, "train", 2, 2, 28, 10);
    const auto msg = config_error([&] { load_fashion_mnist(dir.path().string(), "train"); });
    CHECK(contains(msg, "label 10 of sample 0 is out of range [0, 10)"));
}

TEST_CASE("an unknown split is refused") {
    const auto msg = config_error([] { load_fashion_mnist("/tmp", "validation"); });
    CHECK(msg == "split: unknown Fashion-MNIST split \"validation\"; use \"train\" or \"test\"");
}

TEST_CASE("the real Fashion-MNIST, when installed: 60000 + 10000 samples, 10 balanced classes") {
    const std::string dir = gossamer::fashion_mnist_dir();
    std::string missing;
    if (!std::filesystem::exists(std::filesystem::path(dir) / "train-images-idx3-ubyte.gz")) {
        missing = "Fashion-MNIST not found in ";
        missing += dir;
        missing += " (scripts/deps.sh installs dataset-fashion-mnist)";
    }
    if (!gossamer::test::have_component("fashion-mnist", missing)) return;
    const auto train = load_fashion_mnist(dir, "train");
    const auto test = load_fashion_mnist(dir, "test");
    CHECK(train.size() == 60000);
    CHECK(test.size() == 10000);
    std::vector<int> counts(10, 0);
    for (auto y : train.labels) {
        REQUIRE(y >= 0);
        REQUIRE(y < 10);
        ++counts[static_cast<std::size_t>(y)];
    }
    for (int c : counts) CHECK(c == 6000);
    // The normalisation constants are the training statistics: mean 0, deviation 1.
    double sum = 0, sq = 0;
    for (float v : train.x) {
        sum += v;
        sq += double{v} * v;
    }
    const double n = static_cast<double>(train.x.size());
    CHECK(std::abs(sum / n) < 1e-3);
    CHECK(std::abs(std::sqrt(sq / n - (sum / n) * (sum / n)) - 1.0) < 1e-3);
}
