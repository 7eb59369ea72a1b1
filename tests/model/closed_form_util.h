#pragma once
// Independent closed-form parameter counts for the gen architectures (llama/Mixtral, qwen2moe,
// qwen3moe, olmoe), written from the published architecture descriptions, not from the catalog.
#include <cstdint>

#include "model/config.h"

struct ClosedForm {
    uint64_t total, active;
};
ClosedForm closed_form_counts(const moe::model::ModelConfig& c);
