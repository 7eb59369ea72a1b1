#pragma once
// Named model shapes for `moe train --preset NAME` (shape flags given as well override them).
#include <string>

#include "train/net.h"

namespace moe::train {

struct ShapePreset {
    NetConfig net;          // n_vocab unset (the vocabulary is learned)
    int64_t vocab_size = 1024;
};

// Throws moe::Error("[train] ...") listing the known names.
ShapePreset shape_preset(const std::string& name);
// "tiny, small, shakespeare": for help text and errors.
std::string preset_names();

}  // namespace moe::train
