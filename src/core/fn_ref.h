#pragma once
// FnRef<R(Args...)>: a non-owning reference to any callable (two pointers), for call sites that
// run the callable before returning (the thread pool's parallel regions). Unlike std::function it
// never allocates: a lambda with more than two captures would cost a heap allocation per
// std::function, i.e. per parallel region, ~100 of them per decoded token.
#include <memory>
#include <type_traits>
#include <utility>

namespace moe {

template <typename Sig>
class FnRef;

template <typename R, typename... Args>
class FnRef<R(Args...)> {
public:
    template <typename F, typename = std::enable_if_t<!std::is_same_v<std::decay_t<F>, FnRef> &&
                                                      std::is_invocable_r_v<R, F&, Args...>>>
    FnRef(F&& f) noexcept  // NOLINT(google-explicit-constructor): implicit from a lambda by design
        : obj_(const_cast<void*>(static_cast<const void*>(std::addressof(f)))),
          call_([](void* o, Args... args) -> R {
              return (*static_cast<std::remove_reference_t<F>*>(o))(std::forward<Args>(args)...);
          }) {}

    R operator()(Args... args) const { return call_(obj_, std::forward<Args>(args)...); }

private:
    void* obj_;
    R (*call_)(void*, Args...);
};

}  // namespace moe
