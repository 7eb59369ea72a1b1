#pragma once
// Internal to src/model: the per-architecture tensor-list builders (arch_<name>.cpp) and the small
// helper they share. Public entry point: tensor_catalog() in tensor_catalog.h.
#include <string>
#include <vector>

#include "model/tensor_catalog.h"

namespace moe::model::detail {

class CatalogBuilder {
public:
    explicit CatalogBuilder(std::vector<TensorSpec>& out) : out_(out) {}
    void add(const std::string& name, std::vector<int64_t> shape);
    // "blk.<il>.<suffix>"
    void layer(int64_t il, const std::string& suffix, std::vector<int64_t> shape);

    // Pieces several architectures share (names and shapes as llama.cpp creates them).
    void embeddings_and_head(const ModelConfig& c);  // token_embd, output_norm, output (unless tied)
    // attn_norm, attn_q/k/v (+ biases if c.qkv_bias), attn_output; q width n_head*head_dim_k.
    void standard_attention(const ModelConfig& c, int64_t il);
    // ffn_gate_inp + ffn_{gate,up,down}_exps with expert width n_ff_exp.
    void routed_experts(const ModelConfig& c, int64_t il);
    // ffn_{gate,up,down}_shexp of width n_ff_shexp.
    void shared_expert(const ModelConfig& c, int64_t il);
    void dense_ffn(const ModelConfig& c, int64_t il);

private:
    std::vector<TensorSpec>& out_;
};

void catalog_llama(const ModelConfig& c, CatalogBuilder& b);
void catalog_qwen2moe(const ModelConfig& c, CatalogBuilder& b);
void catalog_qwen3moe(const ModelConfig& c, CatalogBuilder& b);
void catalog_olmoe(const ModelConfig& c, CatalogBuilder& b);
void catalog_deepseek2(const ModelConfig& c, CatalogBuilder& b);
void catalog_gpt_oss(const ModelConfig& c, CatalogBuilder& b);

}  // namespace moe::model::detail
