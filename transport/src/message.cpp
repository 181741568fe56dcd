#include "gossamer/transport/message.hpp"

namespace gossamer::transport {

std::string_view to_string(MessageKind kind) noexcept {
    switch (kind) {
        case MessageKind::full_model:
            return "full_model";
        case MessageKind::model_delta:
            return "model_delta";
        case MessageKind::mass_share:
            return "mass_share";
        case MessageKind::reduce:
            return "reduce";
        case MessageKind::control:
            return "control";
    }
    return "?";
}

}  // namespace gossamer::transport
