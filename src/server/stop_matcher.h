#pragma once
// Stop strings over streamed text, across token boundaries: text that could still be the start of
// a stop string is held back until it cannot; when a stop string appears, the text before it is
// released and the rest dropped (OpenAI semantics: the stop string is not returned).
#include <string>
#include <vector>

namespace moe::server {

class StopMatcher {
public:
    void reset(std::vector<std::string> stops) {
        stops_.clear();
        for (auto& s : stops)
            if (!s.empty()) stops_.push_back(std::move(s));
        held_.clear();
    }
    // Appends `text`; returns what can be released now. hit: a stop string was found (the caller
    // ends the request; later calls are not expected).
    std::string push(const std::string& text, bool& hit) {
        held_ += text;
        hit = false;
        size_t first = std::string::npos;
        for (const auto& s : stops_) first = std::min(first, held_.find(s));
        if (first != std::string::npos) {
            hit = true;
            std::string out = held_.substr(0, first);
            held_.clear();
            return out;
        }
        // Longest suffix of held_ that is a proper prefix of some stop string stays held.
        size_t keep = 0;
        for (const auto& s : stops_)
            for (size_t n = std::min(s.size() - 1, held_.size()); n > keep; --n)
                if (held_.compare(held_.size() - n, n, s, 0, n) == 0) {
                    keep = n;
                    break;
                }
        std::string out = held_.substr(0, held_.size() - keep);
        held_.erase(0, held_.size() - keep);
        return out;
    }
    // End of generation without a stop: everything held plus `tail` (no stop check on the tail is
    // needed beyond push's, so it goes through push once more).
    std::string flush(const std::string& tail) {
        bool hit = false;
        std::string out = push(tail, hit);
        if (!hit) out += held_;
        held_.clear();
        return out;
    }

private:
    std::vector<std::string> stops_;
    std::string held_;
};

}  // namespace moe::server
