#pragma once
/// The local worker a real peer trains with: optim::make_training_worker, the one function that
/// builds it for `gossamer sim`'s virtual peers too, so a real run and a simulation of the same
/// config compare step for step. Its names are brought into gossamer::peer for the callers that
/// include this header.

#include "gossamer/optimizers/local/training_worker.hpp"

namespace gossamer::peer {

using optim::make_training_worker;
using optim::TrainingWorker;

}  // namespace gossamer::peer
