#include "gossamer/bootstrap/error.hpp"

namespace gossamer::bootstrap {

std::string_view to_string(Reason reason) noexcept {
    switch (reason) {
        case Reason::address_in_use:
            return "address_in_use";
        case Reason::cannot_listen:
            return "cannot_listen";
        case Reason::unreachable:
            return "unreachable";
        case Reason::version_mismatch:
            return "version_mismatch";
        case Reason::job_mismatch:
            return "job_mismatch";
        case Reason::wrong_token:
            return "wrong_token";
        case Reason::peer_list_mismatch:
            return "peer_list_mismatch";
        case Reason::model_size_mismatch:
            return "model_size_mismatch";
        case Reason::layout_mismatch:
            return "layout_mismatch";
        case Reason::duplicate_rank:
            return "duplicate_rank";
        case Reason::not_rendezvous:
            return "not_rendezvous";
        case Reason::malformed:
            return "malformed";
        case Reason::missing_peers:
            return "missing_peers";
        case Reason::connection_lost:
            return "connection_lost";
        case Reason::bad_rank:
            return "bad_rank";
        case Reason::late_join:
            return "late_join";
        case Reason::setting_mismatch:
            return "setting_mismatch";
        case Reason::not_coordinator:
            return "not_coordinator";
        case Reason::not_member:
            return "not_member";
    }
    return "unknown";
}

BootstrapError::BootstrapError(Reason reason, std::vector<int> ranks, const std::string& message)
    : Error(message), reason_(reason), ranks_(std::move(ranks)) {}

}  // namespace gossamer::bootstrap
