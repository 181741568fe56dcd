// A built-in job whose learning rate diverges, under gossamer launch
// (docs/operations/reliability.md, "Non-finite values"): every peer stops with one line and exit
// status 5 at the step its loss becomes NaN or infinite, nothing is averaged or written as a
// result, the table counts the peers lost and diverged, and launch exits 3, as `gossamer train`
// does on the same config.
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "launch_job.hpp"

using gossamer::test::kBin;
using gossamer::test::LaunchJob;
using gossamer::test::run;
using Json = nlohmann::json;
namespace fs = std::filesystem;

namespace {

// The launch job's config with an mlp and a learning rate it does not survive.
std::string diverging_config(LaunchJob& job) {
    std::ifstream in(job.config);
    Json c = Json::parse(in);
    c["model"] = {{"name", "mlp"}, {"hidden", {16}}};
    c["optimizer"]["lr"] = 1e4;
    return job.dir.write("diverge.json", c.dump());
}

}  // namespace

TEST_SUITE("integration") {
    TEST_CASE("launch of a diverging job: peers exit 5 and the table says diverged and launch 3") {
        LaunchJob job;
        const auto config = diverging_config(job);
        const auto train = run(kBin + " train --config " + config + " --out " +
                               (job.dir.path() / "train").string());
        CAPTURE(train.err);
        REQUIRE(train.status == 3);  // the reference: train stops on the same config
        for (const char* mode : {"", " --inproc"}) {
            CAPTURE(mode);
            const auto out = job.dir.path() / (std::string("launch") + (*mode ? "-inproc" : ""));
            job.config = config;
            const auto r = job.launch(std::string("--algorithms dpsgd --timeout 60") + mode +
                                      " --out " + out.string());
            CAPTURE(r.out);
            CAPTURE(r.err);
            CHECK(r.status == 3);
            CHECK(r.err.find("diverged") != std::string::npos);
            CHECK(r.out.find("4 (4 diverged)") != std::string::npos);
            CHECK_FALSE(fs::exists(out / "dpsgd" / "average.json"));
            CHECK_FALSE(fs::exists(out / "dpsgd" / "model.bin"));
            std::ifstream in(out / "dpsgd" / "result.json");
            const Json row = Json::parse(in);
            CHECK(row["diverged_peers"] == 4);
            CHECK(row["final_accuracy"].is_null());
            for (const auto& p : row["peers"]) {
                CHECK(p["lost"] == "diverged");
                if (!*mode) CHECK(p["exit"] == "exit status 5");
            }
        }
    }
}
