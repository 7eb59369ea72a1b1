#pragma once
// Named model presets for `moe gen`: real shapes taken from the published config.json files, and
// tiny-* variants of every architecture gen supports, small enough for fp64 reference forward
// tests (all widths multiples of 32 so every matrix is valid for Q8_0).
#include <string>
#include <vector>

#include "model/config.h"

namespace moe::model {

struct Preset {
    std::string name;
    std::string description;
    ModelConfig config;  // n_vocab is the real vocabulary size (tiny: the built-in vocab's size)
};

const std::vector<Preset>& presets();
// Throws moe::Error listing the known presets when `name` is not one.
const Preset& find_preset(const std::string& name);

}  // namespace moe::model
