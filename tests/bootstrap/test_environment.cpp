// Rank discovery from --rank and the launchers' variables; the job token's sources.
#include <doctest/doctest.h>

#include <cstdlib>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "gossamer/bootstrap/environment.hpp"
#include "support/errors.hpp"
#include "support/scoped_env.hpp"
#include "support/temp_dir.hpp"

namespace bs = gossamer::bootstrap;
using gossamer::test::config_error;
using gossamer::test::contains;

namespace {

/// Clears the rank and token variables for one test and restores them afterwards.
class CleanEnv : public gossamer::test::ScopedEnv {
  public:
    CleanEnv()
        : ScopedEnv({"OMPI_COMM_WORLD_RANK", "PMI_RANK", "SLURM_PROCID", "GOSSAMER_JOB_TOKEN"}) {}
};

}  // namespace

TEST_SUITE("bootstrap") {
    TEST_CASE(
        "rank discovery order: --rank then OMPI_COMM_WORLD_RANK then PMI_RANK then SLURM_PROCID") {
        CleanEnv env;
        setenv("OMPI_COMM_WORLD_RANK", "1", 1);
        setenv("PMI_RANK", "2", 1);
        setenv("SLURM_PROCID", "3", 1);
        CHECK(bs::discover_rank(5, 8) == 5);
        CHECK(bs::discover_rank(std::nullopt, 8) == 1);
        unsetenv("OMPI_COMM_WORLD_RANK");
        CHECK(bs::discover_rank(std::nullopt, 8) == 2);
        unsetenv("PMI_RANK");
        CHECK(bs::discover_rank(std::nullopt, 8) == 3);
        setenv("SLURM_PROCID", "0", 1);
        CHECK(bs::discover_rank(std::nullopt, 1) == 0);
    }

    TEST_CASE("rank discovery: bad values name the variable") {
        CleanEnv env;
        auto msg = config_error([] { bs::discover_rank(std::nullopt, 8); });
        CHECK_MESSAGE(contains(msg, "--rank: no rank given and none found in the environment"),
                      msg);
        CHECK_MESSAGE(contains(msg, "SLURM_PROCID"), msg);

        setenv("PMI_RANK", "abc", 1);
        msg = config_error([] { bs::discover_rank(std::nullopt, 8); });
        CHECK(msg == "PMI_RANK: 'abc' is not an integer rank; set it to a rank from 0 to 7");
        setenv("PMI_RANK", "3x", 1);
        CHECK(contains(config_error([] { bs::discover_rank(std::nullopt, 8); }), "'3x'"));
        setenv("PMI_RANK", "", 1);
        CHECK(contains(config_error([] { bs::discover_rank(std::nullopt, 8); }), "PMI_RANK: ''"));
        unsetenv("PMI_RANK");

        setenv("SLURM_PROCID", "8", 1);
        msg = config_error([] { bs::discover_rank(std::nullopt, 8); });
        CHECK(msg ==
              "SLURM_PROCID: rank 8 is out of range for 8 peers in the topology file (ranks "
              "run from 0 to 7); start as many processes as the topology file has peers");
        setenv("SLURM_PROCID", "-1", 1);
        CHECK(contains(config_error([] { bs::discover_rank(std::nullopt, 8); }), "rank -1"));
        unsetenv("SLURM_PROCID");

        setenv("OMPI_COMM_WORLD_RANK", "99999999999999999999", 1);
        CHECK(contains(config_error([] { bs::discover_rank(std::nullopt, 8); }),
                       "OMPI_COMM_WORLD_RANK: '99999999999999999999' is not an integer"));
        msg = config_error([] { bs::discover_rank(9, 8); });
        CHECK(contains(msg, "--rank: rank 9 is out of range for 8 peers"));
    }

    TEST_CASE("job token: a token file wins over GOSSAMER_JOB_TOKEN") {
        CleanEnv env;
        gossamer::test::TempDir dir;
        CHECK(bs::job_token() == "");
        setenv("GOSSAMER_JOB_TOKEN", "from-env", 1);
        CHECK(bs::job_token() == "from-env");
        CHECK(bs::job_token(dir.write("token", "from-file\n")) == "from-file");
        auto missing = (dir.path() / "absent").string();
        CHECK(contains(config_error([&] { bs::job_token(missing); }),
                       missing + ": cannot read the job token file"));
        auto empty = dir.write("empty", "\n");
        CHECK(contains(config_error([&] { bs::job_token(empty); }), "the job token file is empty"));
        // A device or a FIFO is refused before a byte is read (issue 37), a huge file by its size.
        CHECK(contains(config_error([&] { bs::job_token("/dev/zero"); }),
                       "/dev/zero: is a character device, not a regular file"));
        CHECK(contains(
            config_error([&] { bs::job_token(dir.write("huge", std::string(5000, 'k'))); }),
            "the file is 4.88 KiB, more than the 4.00 KiB bound on job token files"));
        CHECK(bs::job_token(dir.write("long", std::string(4096, 'k'))) == std::string(4096, 'k'));
    }

    TEST_CASE("job tokens compare by content and length") {
        CHECK(bs::tokens_equal("secret", "secret"));
        CHECK(bs::tokens_equal("", ""));
        CHECK_FALSE(bs::tokens_equal("secret", "secreT"));
        CHECK_FALSE(bs::tokens_equal("secret", "secret2"));
        CHECK_FALSE(bs::tokens_equal("", "x"));
        CHECK_FALSE(bs::tokens_equal(std::string("a\0b", 3), std::string("a\0c", 3)));
    }
}
