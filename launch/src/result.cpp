// One algorithm's row as OUT/<algorithm>/result.json holds it (launch.hpp).
#include "gossamer/core/text_metrics.hpp"
#include "gossamer/launch/launch.hpp"

namespace gossamer::launch {

json::Json to_json(const LaunchRow& row) {
    json::Json j = {
        {"algorithm", row.algorithm},
        {"time_to_target",
         row.time_to_target ? json::Json(*row.time_to_target) : json::Json(nullptr)},
        {"wall_seconds", row.wall},
        {"train_seconds", row.train},
        {"final_accuracy", row.accuracy ? json::Json(*row.accuracy) : json::Json(nullptr)},
        {"final_loss", row.loss ? json::Json(*row.loss) : json::Json(nullptr)},
        {"mb_sent_per_peer", row.mb_per_peer},
        {"idle_share", row.idle_share},
        {"failed_peers", row.failed},
        {"diverged_peers", row.diverged},
        {"ok", row.ok},
        {"peers", row.peers}};
    if (!row.survivors.is_null()) j["survivors"] = row.survivors;
    if (row.total_mass) j["total_mass"] = *row.total_mass;
    if (row.text && row.loss) j["final_bpc"] = text_metrics::bits_per_char(*row.loss);
    return j;
}

}  // namespace gossamer::launch
