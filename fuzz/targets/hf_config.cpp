// config.json as `moe inspect` reads it: JSON parse, model_type mapping and validation
// (config_from_hf_text), then what inspect computes from the config alone: the tensor catalog,
// parameter counts and the memory plan. Property: only moe::Error escapes (no overflow reported
// by UBSan in the size arithmetic, no huge allocation from hostile dimensions).
#include "fuzz/fuzz_target.h"
#include "model/config.h"
#include "model/param_count.h"
#include "model/tensor_catalog.h"

namespace moe::fuzz {

void hf_config(const uint8_t* data, size_t size) {
    expect_clean([&] {
        const std::string_view text(reinterpret_cast<const char*>(data), size);
        const model::ModelConfig cfg = model::config_from_hf_text(text, "<fuzz>");
        const auto tensors = model::describe_catalog(model::tensor_catalog(cfg), DType::BF16);
        const model::ParamCounts pc = model::count_params(tensors, cfg);
        (void)model::kv_bytes_per_token(cfg, DType::F16);
        (void)model::plan_memory(cfg, pc, {4096, 1, DType::F16});
    });
}

}  // namespace moe::fuzz
