#pragma once
// Hugging Face config.json reader (also DeepSeek's inference configs): a hostile-input JSON parser
// with typed, named getters. Every error is moe::Error("[hf-config] <file>: ...") naming the field
// (dotted path for nested objects, e.g. "rope_scaling.factor") and what was expected. The mapping
// to a ModelConfig lives in src/model/config_hf.cpp; this layer only parses.
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace moe::hf {

constexpr uint64_t kMaxConfigBytes = 16u << 20;  // real config.json files are a few KB

class Config {
public:
    // Reads and parses the file; rejects non-JSON, a top level that is not an object, and files
    // larger than kMaxConfigBytes.
    static Config load(const std::string& path);
    // Same over text in memory (`name` is used in messages).
    static Config parse(std::string_view text, std::string name = "<memory>");

    const std::string& path() const { return path_; }
    // Dotted path of this object inside the file ("" for the top level).
    const std::string& prefix() const { return prefix_; }

    // Present and not null.
    bool has(std::string_view key) const;
    // Typed getters: nullopt when absent or null; throw when present with another type.
    // Integers accept integral JSON numbers (e.g. 32 or 32.0) that fit in int64.
    std::optional<int64_t> get_int(std::string_view key) const;
    std::optional<double> get_number(std::string_view key) const;
    std::optional<bool> get_bool(std::string_view key) const;
    std::optional<std::string> get_string(std::string_view key) const;
    std::optional<std::vector<std::string>> get_string_array(std::string_view key) const;
    std::optional<std::vector<int64_t>> get_int_array(std::string_view key) const;
    std::optional<Config> get_object(std::string_view key) const;
    // Required variants: throw "missing field" when absent or null.
    int64_t require_int(std::string_view key) const;
    double require_number(std::string_view key) const;
    std::string require_string(std::string_view key) const;

    // Full dotted name of `key` in this object, for messages.
    std::string field(std::string_view key) const;
    [[noreturn]] void fail(std::string_view key, const std::string& what) const;

private:
    // The document is an nlohmann::json kept out of this header: root_ owns it (shared by nested
    // Configs), node_ points at this object inside it.
    Config(std::shared_ptr<const void> root, const void* node, std::string path, std::string prefix);
    const void* find(std::string_view key) const;
    std::shared_ptr<const void> root_;
    const void* node_ = nullptr;
    std::string path_;
    std::string prefix_;
};

}  // namespace moe::hf
