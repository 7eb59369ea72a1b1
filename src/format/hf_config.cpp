// Hugging Face config.json reader: see hf_config.h. nlohmann-json does the tokenising; this file
// bounds the input size, checks every type and names the field in every error.
#include "format/hf_config.h"

#include <cmath>
#include <fstream>
#include <limits>
#include <sstream>

#include <nlohmann/json.hpp>

#include "core/error.h"

namespace moe::hf {
namespace {

using json = nlohmann::json;
constexpr const char* kComponent = "hf-config";

const json& J(const void* p) { return *static_cast<const json*>(p); }

const char* kind_name(const json& v) {
    switch (v.type()) {
        case json::value_t::null: return "null";
        case json::value_t::boolean: return "a boolean";
        case json::value_t::string: return "a string";
        case json::value_t::array: return "an array";
        case json::value_t::object: return "an object";
        case json::value_t::number_float: return "a number";
        case json::value_t::number_integer:
        case json::value_t::number_unsigned: return "an integer";
        default: return "an unsupported value";
    }
}

// Integral value of a JSON number that fits in int64, else nullopt.
std::optional<int64_t> as_int64(const json& v) {
    if (v.is_number_unsigned()) {
        const uint64_t u = v.get<uint64_t>();
        if (u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) return std::nullopt;
        return static_cast<int64_t>(u);
    }
    if (v.is_number_integer()) return v.get<int64_t>();
    if (v.is_number_float()) {
        const double d = v.get<double>();
        if (!std::isfinite(d) || d != std::floor(d) || std::fabs(d) > 9.0e18) return std::nullopt;
        return static_cast<int64_t>(d);
    }
    return std::nullopt;
}

}  // namespace

Config::Config(std::shared_ptr<const void> root, const void* node, std::string path, std::string prefix)
    : root_(std::move(root)), node_(node), path_(std::move(path)), prefix_(std::move(prefix)) {}

Config Config::parse(std::string_view text, std::string name) {
    if (text.size() > kMaxConfigBytes)
        throw_error(kComponent, name, ": ", text.size(), " bytes is too large for a config.json (limit ",
                    kMaxConfigBytes, ")");
    auto doc = std::make_shared<json>();
    try {
        // allow_exceptions=true, ignore_comments=false: strict JSON.
        *doc = json::parse(text.begin(), text.end());
    } catch (const json::parse_error& e) {
        throw_error(kComponent, name, ": not valid JSON (byte ", e.byte, "): ", e.what());
    } catch (const json::exception& e) {  // e.g. a number out of range (1e999)
        throw_error(kComponent, name, ": not valid JSON: ", e.what());
    }
    if (!doc->is_object())
        throw_error(kComponent, name, ": top level is ", kind_name(*doc), ", expected a JSON object");
    const void* node = doc.get();
    return Config(std::shared_ptr<const void>(std::move(doc)), node, std::move(name), "");
}

Config Config::load(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    if (!in) throw_error(kComponent, path, ": cannot open file");
    in.seekg(0, std::ios::end);
    const std::streamoff size = in.tellg();
    if (size < 0) throw_error(kComponent, path, ": cannot read file");
    if (static_cast<uint64_t>(size) > kMaxConfigBytes)
        throw_error(kComponent, path, ": ", size, " bytes is too large for a config.json (limit ", kMaxConfigBytes, ")");
    in.seekg(0);
    std::string text(static_cast<size_t>(size), '\0');
    if (!in.read(text.data(), size)) throw_error(kComponent, path, ": read failed");
    return parse(text, path);
}

std::string Config::field(std::string_view key) const {
    return prefix_.empty() ? std::string(key) : prefix_ + "." + std::string(key);
}

void Config::fail(std::string_view key, const std::string& what) const {
    throw_error(kComponent, path_, ": field '", field(key), "' ", what);
}

const void* Config::find(std::string_view key) const {
    const json& obj = J(node_);
    auto it = obj.find(key);
    if (it == obj.end() || it->is_null()) return nullptr;
    return &*it;
}

bool Config::has(std::string_view key) const { return find(key) != nullptr; }

std::optional<int64_t> Config::get_int(std::string_view key) const {
    const void* p = find(key);
    if (!p) return std::nullopt;
    auto v = as_int64(J(p));
    if (!v) fail(key, std::string("is ") + kind_name(J(p)) + (J(p).is_number() ? " that is not an integer in range" : "") +
                          ", expected an integer");
    return v;
}

std::optional<double> Config::get_number(std::string_view key) const {
    const void* p = find(key);
    if (!p) return std::nullopt;
    if (!J(p).is_number()) fail(key, std::string("is ") + kind_name(J(p)) + ", expected a number");
    return J(p).get<double>();
}

std::optional<bool> Config::get_bool(std::string_view key) const {
    const void* p = find(key);
    if (!p) return std::nullopt;
    if (!J(p).is_boolean()) fail(key, std::string("is ") + kind_name(J(p)) + ", expected true or false");
    return J(p).get<bool>();
}

std::optional<std::string> Config::get_string(std::string_view key) const {
    const void* p = find(key);
    if (!p) return std::nullopt;
    if (!J(p).is_string()) fail(key, std::string("is ") + kind_name(J(p)) + ", expected a string");
    return J(p).get<std::string>();
}

std::optional<std::vector<std::string>> Config::get_string_array(std::string_view key) const {
    const void* p = find(key);
    if (!p) return std::nullopt;
    if (!J(p).is_array()) fail(key, std::string("is ") + kind_name(J(p)) + ", expected an array of strings");
    std::vector<std::string> out;
    out.reserve(J(p).size());
    for (size_t i = 0; i < J(p).size(); ++i) {
        const json& e = J(p)[i];
        if (!e.is_string()) fail(key, "element " + std::to_string(i) + " is " + kind_name(e) + ", expected a string");
        out.push_back(e.get<std::string>());
    }
    return out;
}

std::optional<std::vector<int64_t>> Config::get_int_array(std::string_view key) const {
    const void* p = find(key);
    if (!p) return std::nullopt;
    if (!J(p).is_array()) fail(key, std::string("is ") + kind_name(J(p)) + ", expected an array of integers");
    std::vector<int64_t> out;
    out.reserve(J(p).size());
    for (size_t i = 0; i < J(p).size(); ++i) {
        auto v = as_int64(J(p)[i]);
        if (!v) fail(key, "element " + std::to_string(i) + " is " + kind_name(J(p)[i]) + ", expected an integer");
        out.push_back(*v);
    }
    return out;
}

std::optional<Config> Config::get_object(std::string_view key) const {
    const void* p = find(key);
    if (!p) return std::nullopt;
    if (!J(p).is_object()) fail(key, std::string("is ") + kind_name(J(p)) + ", expected an object");
    return Config(root_, p, path_, field(key));
}

int64_t Config::require_int(std::string_view key) const {
    auto v = get_int(key);
    if (!v) fail(key, "is missing (expected an integer)");
    return *v;
}

double Config::require_number(std::string_view key) const {
    auto v = get_number(key);
    if (!v) fail(key, "is missing (expected a number)");
    return *v;
}

std::string Config::require_string(std::string_view key) const {
    auto v = get_string(key);
    if (!v) fail(key, "is missing (expected a string)");
    return *v;
}

}  // namespace moe::hf
