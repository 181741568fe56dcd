// The built-in algorithms, one line each: adding one is its folder optimizers/protocols/<name>/
// (whose src/<name>_entry.cpp defines `Algorithm <name>_algorithm()`) and its line here
// (docs/algorithms/README.md, "Adding an algorithm"). The order is the registry's: --help,
// protocol_names(), Python's gossamer.ALGORITHMS and the table of docs/algorithms/README.md.
// No include guard: protocol_registry.cpp includes it once per use of GOSSAMER_ALGORITHM.
GOSSAMER_ALGORITHM(allreduce)
GOSSAMER_ALGORITHM(dpsgd)
GOSSAMER_ALGORITHM(sgp)
GOSSAMER_ALGORITHM(async)
GOSSAMER_ALGORITHM(choco)
GOSSAMER_ALGORITHM(lsgd)
GOSSAMER_ALGORITHM(gadmm)
GOSSAMER_ALGORITHM(qallreduce)
