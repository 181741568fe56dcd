#pragma once
/// The subcommands of the gossamer binary. Each takes the words after its name and returns the
/// exit status; errors are thrown and turned into one line and a status by main().

#include <string>
#include <vector>

namespace gossamer::cli {

int run_topo(const std::vector<std::string>& args);
int run_train(const std::vector<std::string>& args);
int run_bench(const std::vector<std::string>& args);
int run_sim(const std::vector<std::string>& args);
int run_launch(const std::vector<std::string>& args);
int run_peer(const std::vector<std::string>& args);
int run_eval(const std::vector<std::string>& args);
int run_sample(const std::vector<std::string>& args);
int run_lab(const std::vector<std::string>& args);
int run_report(const std::vector<std::string>& args);

}  // namespace gossamer::cli
