// What a peer learns from its launcher: Slurm node lists, HOST:PORT, rank, size and rendezvous
// from the flags and the variables of srun, mpirun, PMI launchers and torchrun.
#include <doctest/doctest.h>

#include <cstdlib>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "gossamer/bootstrap/launcher.hpp"
#include "support/errors.hpp"
#include "support/scoped_env.hpp"

namespace bs = gossamer::bootstrap;
using gossamer::test::config_error;
using gossamer::test::contains;
using Hosts = std::vector<std::string>;

namespace {

/// Clears every variable the launcher code reads for one test and restores them afterwards.
class CleanEnv : public gossamer::test::ScopedEnv {
  public:
    CleanEnv()
        : ScopedEnv({"OMPI_COMM_WORLD_RANK",
                     "OMPI_COMM_WORLD_SIZE",
                     "OMPI_COMM_WORLD_LOCAL_SIZE",
                     "PMI_RANK",
                     "PMI_SIZE",
                     "MPI_LOCALNRANKS",
                     "SLURM_PROCID",
                     "SLURM_STEP_NUM_TASKS",
                     "SLURM_NTASKS",
                     "SLURM_STEP_NODELIST",
                     "SLURM_JOB_NODELIST",
                     "SLURM_NODELIST",
                     "SLURM_NODEID",
                     "SLURM_STEP_TASKS_PER_NODE",
                     "SLURM_TASKS_PER_NODE",
                     "RANK",
                     "WORLD_SIZE",
                     "LOCAL_WORLD_SIZE",
                     "MASTER_ADDR",
                     "MASTER_PORT",
                     "TORCHELASTIC_USE_AGENT_STORE",
                     "GOSSAMER_RENDEZVOUS",
                     "GOSSAMER_RENDEZVOUS_PORT",
                     "SLURM_LAUNCH_NODE_IPADDR"}) {}
};

Hosts expand(const std::string& list) {
    return bs::expand_nodelist(list, "SLURM_JOB_NODELIST");
}

std::string expand_error(const std::string& list, std::size_t max = 1u << 20) {
    return config_error([&] { bs::expand_nodelist(list, "SLURM_JOB_NODELIST", max); });
}

bs::LaunchRequest count_only() {
    bs::LaunchRequest r;
    r.count_only = true;
    return r;
}

}  // namespace

TEST_SUITE("bootstrap") {
    TEST_CASE("Slurm node lists expand ranges and lists and suffixes and padding and products") {
        CHECK(expand("vm") == Hosts{"vm"});
        CHECK(expand("node[01-04,07]") == Hosts{"node01", "node02", "node03", "node04", "node07"});
        CHECK(expand("a1,b[2-3]") == Hosts{"a1", "b2", "b3"});
        CHECK(expand("n[1-2]-ib,x") == Hosts{"n1-ib", "n2-ib", "x"});
        CHECK(expand("node[008-011]") == Hosts{"node008", "node009", "node010", "node011"});
        CHECK(expand("c[9-11]") == Hosts{"c9", "c10", "c11"});  // no padding: natural widths
        CHECK(expand("c[7]") == Hosts{"c7"});
        CHECK(expand("c[3,1]") == Hosts{"c3", "c1"});  // Slurm's order, as given
        CHECK(expand("[1-2]x") == Hosts{"1x", "2x"});
        CHECK(expand("r[1-2]n[01-02]") == Hosts{"r1n01", "r1n02", "r2n01", "r2n02"});
        CHECK(expand("gpu-a[0-1],cpu[5],login") == Hosts{"gpu-a0", "gpu-a1", "cpu5", "login"});
        CHECK(expand("10.0.0.[1-2]") == Hosts{"10.0.0.1", "10.0.0.2"});
        CHECK(expand("node[0-999]").size() == 1000);
        CHECK(expand("node[0-999]").back() == "node999");
    }

    TEST_CASE("Slurm node lists in bad forms are one line naming the variable") {
        struct Case {
            std::string list, says;
        };
        for (const auto& c :
             {Case{"", "it is empty"}, Case{"a,,b", "an empty name at position 3"},
              Case{"a,", "an empty name at position 3"}, Case{",a", "an empty name at position 1"},
              Case{"node[1-2", "a '[' is never closed"},
              Case{"node1-2]", "a ']' without '[' at position 8"},
              Case{"node[1-[2]]", "a '[' inside brackets at position 8"},
              Case{"node[]", "empty brackets"}, Case{"node[1,,2]", "an empty range in '[1,,2]'"},
              Case{"node[3-1]", "the range 3-1 runs backwards"},
              Case{"node[a-b]", "'a' in '[a-b]' is not a number"},
              Case{"node[1-]", "'' in '[1-]' is not a number"},
              Case{"node[-1]", "'' in '[-1]' is not a number"},
              Case{"node[1-2-3]", "'2-3' in '[1-2-3]' is not a number"},
              Case{"node[1234567890123456789]", "is not a number"},
              Case{"no de", "a blank or control character in 'no de'"}}) {
            CAPTURE(c.list);
            const auto msg = expand_error(c.list);
            CHECK_MESSAGE(
                contains(msg, "SLURM_JOB_NODELIST: '" + c.list + "' is not a Slurm node list: "),
                msg);
            CHECK_MESSAGE(contains(msg, c.says), msg);
            CHECK_MESSAGE(contains(msg, "node[01-04,07]"), msg);  // the fix shows the form
            CHECK(msg.find('\n') == std::string::npos);
        }
        CHECK(contains(expand_error("n[0-99]", 50), "more than 50 hosts"));
        CHECK(contains(expand_error("a,b,c", 2), "more than 2 hosts"));
        CHECK(contains(expand_error("r[0-9]n[0-9]", 99), "more than 99 hosts"));
        CHECK(bs::expand_nodelist("r[0-9]n[0-9]", "X", 100).size() == 100);
    }

    TEST_CASE("HOST and PORT of a rendezvous with IPv6 and bad forms") {
        auto e = bs::parse_host_port("node01", "--rendezvous", 29450);
        CHECK(e.host == "node01");
        CHECK(e.port == 29450);
        e = bs::parse_host_port("10.0.0.1:1234", "--rendezvous", 29450);
        CHECK(e.str() == "10.0.0.1:1234");
        e = bs::parse_host_port("[fe80::1]:99", "--rendezvous", 29450);
        CHECK(e.host == "fe80::1");
        CHECK(e.port == 99);
        CHECK(bs::parse_host_port("[::1]", "x", 7).port == 7);
        struct Case {
            std::string text, says;
        };
        for (const auto& c : {Case{"", "names no host"}, Case{":80", "names no host"},
                              Case{"h:0", "'0' is not a port"}, Case{"h:70000", "not a port"},
                              Case{"h:x", "'x' is not a port"}, Case{"h:", "'' is not a port"},
                              Case{"fe80::1", "write it as [V6]:PORT"}, Case{"[::1", "without ']'"},
                              Case{"[::1]x", "not :PORT"}}) {
            CAPTURE(c.text);
            const auto msg =
                config_error([&] { bs::parse_host_port(c.text, "GOSSAMER_RENDEZVOUS", 1); });
            CHECK_MESSAGE(contains(msg, "GOSSAMER_RENDEZVOUS: "), msg);
            CHECK_MESSAGE(contains(msg, c.says), msg);
        }
    }

    TEST_CASE(
        "launch discovers rank and size from each launcher and checks the size against the file") {
        CleanEnv env;
        env.set("SLURM_PROCID", "2");
        env.set("SLURM_STEP_NUM_TASKS", "4");
        env.set("SLURM_NTASKS", "16");  // the allocation's; the step's count wins
        auto l = bs::discover_launch({}, 4);
        CHECK(l.rank == 2);
        CHECK(l.rank_source == "SLURM_PROCID");
        CHECK_FALSE(l.rendezvous);  // the file lists hosts: no rendezvous needed

        auto msg = config_error([] { bs::discover_launch({}, 8); });
        CHECK(msg ==
              "SLURM_STEP_NUM_TASKS: srun started 4 peers but the topology file has 8; start 8 "
              "peers (srun -n 8, mpirun -np 8) or use a topology file for 4");
        env.set("SLURM_PROCID", "7");  // the size is named before a rank that is out of range
        CHECK(contains(config_error([] { bs::discover_launch({}, 2); }), "has 2;"));

        env.set("OMPI_COMM_WORLD_RANK", "1");  // mpirun's variables win over Slurm's
        env.set("OMPI_COMM_WORLD_SIZE", "3");
        l = bs::discover_launch({}, 3);
        CHECK(l.rank == 1);
        CHECK(l.rank_source == "OMPI_COMM_WORLD_RANK");
        env.set("OMPI_COMM_WORLD_SIZE", "x");
        CHECK(contains(config_error([] { bs::discover_launch({}, 3); }),
                       "OMPI_COMM_WORLD_SIZE: 'x' is not a number of peers"));
        unsetenv("OMPI_COMM_WORLD_RANK");
        unsetenv("SLURM_PROCID");

        env.set("PMI_RANK", "0");
        env.set("PMI_SIZE", "2");
        CHECK(bs::discover_launch({}, 2).rank_source == "PMI_RANK");
        unsetenv("PMI_RANK");

        env.set("RANK", "1");  // torchrun's RANK counts only beside MASTER_ADDR
        env.set("WORLD_SIZE", "2");
        CHECK(contains(config_error([] { bs::discover_launch({}, 2); }),
                       "--rank: no rank given and none found in the environment"));
        env.set("MASTER_ADDR", "10.1.1.1");
        CHECK(bs::discover_launch({}, 2).rank == 1);
        CHECK(contains(config_error([] { bs::discover_launch({}, 3); }),
                       "WORLD_SIZE: torchrun started 2 peers"));

        // An explicit --rank wins and checks no launcher's size.
        bs::LaunchRequest r;
        r.rank = 0;
        l = bs::discover_launch(r, 3);
        CHECK(l.rank == 0);
        CHECK(l.rank_source == "--rank");
        r.rank = 3;
        CHECK(contains(config_error([&] { bs::discover_launch(r, 3); }),
                       "--rank: rank 3 is out of range for 3 peers"));
    }

    TEST_CASE("launch finds the rendezvous of a count-only job from flags and launchers") {
        CleanEnv env;
        auto req = count_only();
        req.rank = 1;
        // --rank without any rendezvous: the count form's own addresses.
        CHECK_FALSE(bs::discover_launch(req, 4).rendezvous);
        env.set("GOSSAMER_RENDEZVOUS", "head:7000");
        auto l = bs::discover_launch(req, 4);
        REQUIRE(l.rendezvous);
        CHECK(l.rendezvous->str() == "head:7000");
        CHECK(l.rendezvous_source == "GOSSAMER_RENDEZVOUS");
        req.rendezvous = "10.0.0.9";
        l = bs::discover_launch(req, 4);
        CHECK(l.rendezvous->str() == "10.0.0.9:29450");  // the default port
        CHECK(l.rendezvous_source == "--rendezvous");
        env.set("GOSSAMER_RENDEZVOUS_PORT", "7100");
        CHECK(bs::discover_launch(req, 4).rendezvous->port == 7100);
        req.rendezvous_port = 7200;  // the flag wins over the variable
        CHECK(bs::discover_launch(req, 4).rendezvous->port == 7200);
        req.rendezvous_port = 0;
        CHECK(contains(config_error([&] { bs::discover_launch(req, 4); }),
                       "--rendezvous-port: 0 is not a port"));
        req.rendezvous_port.reset();
        env.set("GOSSAMER_RENDEZVOUS_PORT", "99999");
        CHECK(contains(config_error([&] { bs::discover_launch(req, 4); }),
                       "GOSSAMER_RENDEZVOUS_PORT: '99999' is not a port"));
        unsetenv("GOSSAMER_RENDEZVOUS_PORT");
        unsetenv("GOSSAMER_RENDEZVOUS");

        // srun: the first host of the step's node list (not srun's own host).
        env.set("SLURM_PROCID", "3");
        env.set("SLURM_NTASKS", "4");
        env.set("SLURM_JOB_NODELIST", "node[01-04,07]");
        env.set("SLURM_LAUNCH_NODE_IPADDR", "10.9.9.9");
        l = bs::discover_launch(count_only(), 4);
        CHECK(l.rank == 3);
        CHECK(l.rendezvous->str() == "node01:29450");
        CHECK(l.rendezvous_source == "the first host of SLURM_JOB_NODELIST");
        env.set("SLURM_STEP_NODELIST", "node[03-04]");
        CHECK(bs::discover_launch(count_only(), 4).rendezvous->host == "node03");
        env.set("SLURM_STEP_NODELIST", "node[03-");
        CHECK(contains(config_error([] { bs::discover_launch(count_only(), 4); }),
                       "SLURM_STEP_NODELIST: 'node[03-' is not a Slurm node list"));
        unsetenv("SLURM_STEP_NODELIST");
        unsetenv("SLURM_JOB_NODELIST");
        CHECK(contains(config_error([] { bs::discover_launch(count_only(), 4); }),
                       "rank 0's host is unknown"));
        // MASTER_ADDR names rank 0 for any launcher; under torchrun's agent store, port + 1.
        env.set("MASTER_ADDR", "10.0.0.5");
        env.set("MASTER_PORT", "29500");
        CHECK(bs::discover_launch(count_only(), 4).rendezvous->str() == "10.0.0.5:29500");
        env.set("TORCHELASTIC_USE_AGENT_STORE", "True");
        CHECK(bs::discover_launch(count_only(), 4).rendezvous->str() == "10.0.0.5:29501");
        unsetenv("MASTER_ADDR");
        unsetenv("SLURM_PROCID");

        // mpirun on one host: loopback; over several hosts it must be told.
        env.set("OMPI_COMM_WORLD_RANK", "0");
        env.set("OMPI_COMM_WORLD_SIZE", "4");
        env.set("OMPI_COMM_WORLD_LOCAL_SIZE", "4");
        l = bs::discover_launch(count_only(), 4);
        CHECK(l.rendezvous->str() == "127.0.0.1:29450");
        CHECK(l.local_size == 4);
        env.set("OMPI_COMM_WORLD_LOCAL_SIZE", "2");
        auto msg = config_error([] { bs::discover_launch(count_only(), 4); });
        CHECK_MESSAGE(contains(msg,
                               "OMPI_COMM_WORLD_RANK: mpirun started the peers on several "
                               "hosts"),
                      msg);
        CHECK_MESSAGE(contains(msg, "mpirun -x GOSSAMER_RENDEZVOUS=HOST"), msg);
    }

    TEST_CASE("launch refuses flags that do not fit the topology file") {
        CleanEnv env;
        bs::LaunchRequest r;
        r.rank = 0;
        r.rendezvous = "head";
        CHECK(config_error([&] { bs::discover_launch(r, 2); }) ==
              "--rendezvous: the topology file lists every peer's host and port, so rank 0 "
              "listens where it says; drop the flag, or give the topology file only a count "
              "(\"peers\": {\"count\": N})");
        r.rendezvous.reset();
        r.rendezvous_port = 7000;
        CHECK(contains(config_error([&] { bs::discover_launch(r, 2); }), "--rendezvous-port: "));
        r.rendezvous_port.reset();
        r.address = "10.0.0.2";
        CHECK(contains(config_error([&] { bs::discover_launch(r, 2); }), "--address: "));
        r.count_only = true;  // a count-only file, but nothing names rank 0
        CHECK(contains(config_error([&] { bs::discover_launch(r, 2); }),
                       "--address: without a rendezvous"));
        r.rendezvous = "head";
        r.address = "bad host";
        CHECK(contains(config_error([&] { bs::discover_launch(r, 2); }),
                       "--address: 'bad host' is not a host name or address"));
        r.address = "10.0.0.2";
        CHECK(bs::discover_launch(r, 2).rendezvous->host == "head");
    }

    TEST_CASE("launch builds the peer list of a count-only job and counts the peers on this host") {
        const bs::Endpoint rdv{"head", 7000};
        auto p = bs::rendezvous_peers(rdv, 0, 3, std::nullopt);
        REQUIRE(p.size() == 3);
        CHECK(p[0].str() == "0.0.0.0:7000");  // rank 0 listens on every interface
        CHECK(p[1].port == 0);
        CHECK(p[2].port == 0);
        p = bs::rendezvous_peers(rdv, 2, 3, std::string("10.0.0.3"));
        CHECK(p[0].str() == "head:7000");
        CHECK(p[1].port == 0);
        CHECK(p[2].str() == "10.0.0.3:0");  // its own address, a port the kernel gives
        CHECK(bs::rendezvous_peers(rdv, 0, 2, std::string("10.0.0.1"))[0].str() == "10.0.0.1:7000");

        CleanEnv env;
        CHECK_FALSE(bs::launcher_local_size());
        env.set("SLURM_PROCID", "0");
        env.set("SLURM_NODEID", "3");
        env.set("SLURM_STEP_TASKS_PER_NODE", "2(x3),5");
        CHECK(bs::launcher_local_size() == 5);
        env.set("SLURM_NODEID", "1");
        CHECK(bs::launcher_local_size() == 2);
        env.set("SLURM_NODEID", "4");
        CHECK_FALSE(bs::launcher_local_size());
        env.set("SLURM_STEP_TASKS_PER_NODE", "2(x");
        CHECK_FALSE(bs::launcher_local_size());
        env.set("OMPI_COMM_WORLD_RANK", "0");
        env.set("OMPI_COMM_WORLD_LOCAL_SIZE", "8");
        CHECK(bs::launcher_local_size() == 8);
    }
}
